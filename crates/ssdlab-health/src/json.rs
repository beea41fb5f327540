//! Reading optional values out of tools' JSON. Every field is optional (smartctl keeps adding keys and drives
//! leave many out), and counters may be wider than a double can hold exactly.

use serde_json::Value;

/// The value at a path of object keys, if every step exists.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

/// A drive's identity text (model, serial, firmware, device name) as a tool reported it, trimmed and cut to 128
/// characters: ATA and NVMe hold at most 40, and a longer one is a damaged or hostile file, never to be echoed
/// whole into every line of the output.
pub fn identity_text(text: &str) -> String {
    const MAX_CHARS: usize = 128;
    let text = text.trim();
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

pub fn u64_at(value: &Value, path: &[&str]) -> Option<u64> {
    at(value, path).and_then(as_u64)
}

pub fn f64_at(value: &Value, path: &[&str]) -> Option<f64> {
    at(value, path).and_then(Value::as_f64)
}

/// A whole number written as a number or as a decimal string.
pub fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A counter that may be 128 bits wide, read exactly where the source allows.
///
/// smartctl writes such a counter as a number `KEY` and, when the number is not exactly representable as a
/// double (past 2^53), also as a decimal string `KEY_s` and a little-endian byte array `KEY_le`; smartctl 7.0
/// wrote an object `{"n", "s", "le"}` in its place. The string is preferred, then the bytes, then the number
/// (exact up to 2^64; beyond that only a double, which is said in `approximate`).
pub fn counter(object: &Value, key: &str, approximate: &mut Vec<String>) -> Option<u128> {
    if let Some(s) = object.get(format!("{key}_s")).and_then(Value::as_str)
        && let Ok(v) = s.trim().parse::<u128>()
    {
        return Some(v);
    }
    if let Some(v) = object.get(format!("{key}_le")).and_then(le_bytes) {
        return Some(v);
    }
    match object.get(key)? {
        Value::Object(inner) => {
            let inner = Value::Object(inner.clone());
            counter(&inner, "s", approximate)
                .or_else(|| inner.get("le").and_then(le_bytes))
                .or_else(|| counter(&inner, "n", approximate))
        }
        Value::String(s) => s.trim().replace(',', "").parse().ok(),
        Value::Number(n) => match n.as_u64() {
            Some(v) => Some(u128::from(v)),
            None => {
                let f = n.as_f64().filter(|f| *f >= 0.0)?;
                approximate.push(format!(
                    "{key} is past 2^64 and the source gave no exact form ({key}_s): read as {f:e}, approximate"
                ));
                Some(f as u128)
            }
        },
        _ => None,
    }
}

/// A little-endian byte array (at most 16 bytes) as a number.
fn le_bytes(value: &Value) -> Option<u128> {
    let bytes = value.as_array()?;
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    bytes.iter().enumerate().try_fold(0u128, |acc, (i, b)| {
        let b = u8::try_from(b.as_u64()?).ok()?;
        Some(acc | (u128::from(b) << (8 * i)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Option<u128>, Vec<String>) {
        let value: Value = serde_json::from_str(text).unwrap();
        let mut notes = vec![];
        (counter(&value, "data_units_written", &mut notes), notes)
    }

    #[test]
    fn counters_past_2_pow_53_keep_every_digit() {
        // 2^53 + 1: a double would read 2^53.
        assert_eq!(
            read(r#"{"data_units_written": 9007199254740993}"#).0,
            Some(9_007_199_254_740_993)
        );
        // Past 2^64: the string form is exact.
        let big = "340282366920938463463374607431768211455";
        let (v, notes) = read(&format!(
            r#"{{"data_units_written": {big}, "data_units_written_s": "{big}"}}"#
        ));
        assert_eq!(v, Some(u128::MAX));
        assert!(notes.is_empty());
        // The byte array when there is no string: 2^64 + 1.
        let (v, _) = read(
            r#"{"data_units_written": 18446744073709551617, "data_units_written_le": [1,0,0,0,0,0,0,0,1]}"#,
        );
        assert_eq!(v, Some((1u128 << 64) + 1));
        // smartctl 7.0's object form.
        let (v, _) =
            read(r#"{"data_units_written": {"n": 18446744073709551617, "s": "18446744073709551617"}}"#);
        assert_eq!(v, Some((1u128 << 64) + 1));
    }

    #[test]
    fn a_bare_number_past_2_pow_64_is_read_and_called_approximate() {
        let (v, notes) = read(r#"{"data_units_written": 36893488147419103232}"#);
        assert_eq!(v, Some(1u128 << 65));
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("approximate"));
    }

    #[test]
    fn strings_and_missing_keys() {
        assert_eq!(read(r#"{"data_units_written": "1,234"}"#).0, Some(1234));
        assert_eq!(read(r#"{"other": 1}"#).0, None);
        assert_eq!(read(r#"{"data_units_written": -1}"#).0, None);
    }
}
