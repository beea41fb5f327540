//! NAND writes of NVMe drives, which the standard SMART log does not carry: the OCP Datacenter NVMe SSD
//! specification's SMART log (log page C0h, "Physical Media Units Written", in bytes) and the Endurance Group
//! Information log (page 09h, "Media Units Written", in billions of bytes), as nvme-cli prints them with
//! `-o json`. This module parses those outputs and says which log a figure came from; running nvme-cli is the
//! caller's.
//!
//! nvme-cli has printed both logs in more than one shape (see tests/fixtures/real/NVME-NAND-LOGS.md):
//! - `nvme ocp smart-add-log`: output version 1 names the field "Physical media units written", version 2
//!   "physical_media_units_written"; the 128-bit value is `{"hi": N, "lo": N}` (value = hi x 2^64 + lo), with
//!   N quoted on builds linked against an old json-c.
//! - `nvme endurance-log`: "media_units_written" and "data_units_written" at the top level, numbers that may pass
//!   64 bits; early 2.x releases printed them as strings such as "12345.000000".

use serde_json::Value;

/// The Endurance Group log counts media and data units in billions of bytes.
pub const ENDURANCE_UNIT_BYTES: u128 = 1_000_000_000;

/// A NAND-write figure and the log it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NandWrites {
    pub bytes: u128,
    /// "the OCP Datacenter SMART log (C0h), Physical Media Units Written", in words for the snapshot.
    pub source: String,
}

/// A count nvme-cli printed as a number, a string ("12345" or "12345.000000") or a `{"hi","lo"}` pair.
fn wide(value: &Value) -> Option<u128> {
    match value {
        // Past 2^64 serde_json holds a double: exact for the powers of two a test uses, approximate otherwise
        // (a counter that large is a drive lifetime of zettabytes, where the last digits do not matter).
        Value::Number(n) => n
            .as_u64()
            .map(u128::from)
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u128)),
        Value::String(s) => {
            let (whole, fraction) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
            match fraction.chars().all(|c| c == '0') {
                true => whole.parse().ok(),
                false => None,
            }
        }
        Value::Object(o) => {
            let hi = wide(o.get("hi")?)?;
            let lo = wide(o.get("lo")?)?;
            (hi <= u128::from(u64::MAX) && lo <= u128::from(u64::MAX)).then_some((hi << 64) | lo)
        }
        _ => None,
    }
}

fn json(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what}: not JSON ({e})"))
}

/// Keys only the OCP SMART log's JSON has.
const OCP_KEYS: [&str; 2] = ["Physical media units written", "physical_media_units_written"];
/// Keys only the Endurance Group log's JSON has (it shares `critical_warning` and `data_units_written` with the
/// SMART log, so those cannot tell them apart).
const ENDURANCE_KEYS: [&str; 3] = [
    "media_units_written",
    "mediate_write_commands",
    "endurance_estimate",
];

/// A saved `nvme ocp smart-add-log` or `nvme endurance-log` output (`--from`): None when the text is neither, so
/// the caller reads it as a health log; else the NAND writes it holds, or why it holds none. The group a saved
/// endurance log was read from is not in its output, so the source names none.
pub fn parse_saved(text: &str) -> Option<Result<NandWrites, String>> {
    let value: Value = serde_json::from_str(text).ok()?;
    if OCP_KEYS.iter().any(|k| value.get(k).is_some()) {
        Some(parse_ocp_smart_log(text).map(|mut n| {
            n.source = n.source.replace("read with nvme-cli", "saved from nvme-cli");
            n
        }))
    } else if ENDURANCE_KEYS.iter().any(|k| value.get(k).is_some()) {
        Some(parse_endurance_log(text, 0).map(|n| {
            NandWrites {
                source:
                    "the Endurance Group Information log (09h), Media Units Written x 10^9 bytes, saved from \
                     nvme-cli (its group not recorded)"
                        .into(),
                ..n
            }
        }))
    } else {
        None
    }
}

/// `nvme ocp smart-add-log DEV -o json`: physical media units written, in bytes.
pub fn parse_ocp_smart_log(text: &str) -> Result<NandWrites, String> {
    let log = json(text, "the OCP SMART log")?;
    let field = ["Physical media units written", "physical_media_units_written"]
        .iter()
        .find_map(|key| log.get(*key))
        .ok_or("the OCP SMART log has no physical media units written")?;
    let bytes = wide(field).ok_or("the OCP SMART log's physical media units written is not a count")?;
    Ok(NandWrites {
        bytes,
        source:
            "the OCP Datacenter SMART log (C0h), Physical Media Units Written (bytes), read with nvme-cli"
                .into(),
    })
}

/// `nvme endurance-log DEV --group-id=N -o json`: media units written, in billions of bytes.
pub fn parse_endurance_log(text: &str, group: u16) -> Result<NandWrites, String> {
    let log = json(text, "the Endurance Group log")?;
    // nvme-cli 1.x and early 2.x printed Media Units Written as "mediate_write_commands".
    let units = ["media_units_written", "mediate_write_commands"]
        .iter()
        .find_map(|key| log.get(*key))
        .and_then(wide)
        .ok_or("the Endurance Group log has no media units written")?;
    Ok(NandWrites {
        bytes: units.saturating_mul(ENDURANCE_UNIT_BYTES),
        source: format!(
            "the Endurance Group Information log (09h) of group {group}, Media Units Written x 10^9 bytes, read \
             with nvme-cli"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ocp_log_in_both_output_versions_and_both_json_c_shapes() {
        // 2^64 + 5 bytes: the high half matters.
        let v1 = r#"{"Physical media units written": {"hi": 1, "lo": 5}, "Physical media units read": {"hi": 0, "lo": 9}}"#;
        let v2 = r#"{"physical_media_units_written": {"hi": "1", "lo": "5"}}"#;
        for text in [v1, v2] {
            let n = parse_ocp_smart_log(text).unwrap();
            assert_eq!(n.bytes, (1u128 << 64) + 5, "{text}");
            assert!(n.source.contains("C0h"));
        }
        let small = r#"{"physical_media_units_written": {"hi": 0, "lo": 187000000000000}}"#;
        assert_eq!(parse_ocp_smart_log(small).unwrap().bytes, 187_000_000_000_000);
        assert!(
            parse_ocp_smart_log("{}")
                .unwrap_err()
                .contains("no physical media units")
        );
        assert!(
            parse_ocp_smart_log("NVMe status: Invalid Log Page")
                .unwrap_err()
                .contains("not JSON")
        );
    }

    #[test]
    fn the_endurance_log_counts_billions_of_bytes_in_any_printed_shape() {
        for text in [
            r#"{"data_units_written": 812, "media_units_written": 1234}"#,
            r#"{"data_units_written": "812.000000", "media_units_written": "1234.000000"}"#,
            r#"{"media_units_written": "1234"}"#,
        ] {
            let n = parse_endurance_log(text, 1).unwrap();
            assert_eq!(n.bytes, 1_234_000_000_000, "{text}");
            assert!(n.source.contains("09h) of group 1"));
        }
        // Past 64 bits, as the field allows.
        let wide_text = r#"{"media_units_written": 36893488147419103232}"#;
        assert_eq!(
            parse_endurance_log(wide_text, 1).unwrap().bytes,
            36_893_488_147_419_103_232u128 * ENDURANCE_UNIT_BYTES
        );
        // A saved log is told apart from a SMART log by its own keys.
        let saved =
            parse_saved(r#"{"critical_warning": 0, "data_units_written": 3, "media_units_written": 7}"#);
        assert_eq!(saved.unwrap().unwrap().bytes, 7_000_000_000);
        assert!(parse_saved(r#"{"critical_warning": 0, "data_units_written": 3}"#).is_none());
        // nvme-cli 1.x's misspelt key for the same field.
        let old = r#"{"data_units_written": "812.000000", "mediate_write_commands": "3.000000"}"#;
        assert_eq!(parse_endurance_log(old, 1).unwrap().bytes, 3_000_000_000);
        assert!(parse_endurance_log(r#"{"data_units_written": 3}"#, 1).is_err());
    }
}
