//! Reading every result an earlier ssdlab wrote. `ssdlab/2` names every field with its SI unit (`_bytes_per_s`,
//! `_ns`, `_ratio`); `ssdlab/1` results of the stale-data scans carried MB/s, microseconds and a slowdown factor.
//! `ssdlab/3` tags a test method's options by its kind (`{"kind": "quick", "options": {...}}`); before, they were
//! the bare options object, read as whichever method's fields it had first. `ssdlab/4` records the commands' flags
//! as the values they stood for, in the field's unit (`chunk_bytes`, `runtime_ns`, `hedge_percentile`), not the
//! words typed. [`RunResult::from_json`] reads every
//! version: an older result is rewritten step by step into this version's shape before the typed reading, so no
//! reader ever sees the old units or shapes. Nothing here writes a file.

use serde_json::{Map, Value};

use crate::schema::{RunResult, SCHEMA};

/// The schemas this ssdlab reads.
pub const READABLE: [&str; 4] = ["ssdlab/1", "ssdlab/2", "ssdlab/3", SCHEMA];

/// Renames `old` to `new` in `object`, multiplying a number by `factor` (a `null`, JSON's infinity, stays).
fn convert(object: &mut Map<String, Value>, old: &str, new: &str, factor: f64) {
    if let Some(value) = object.remove(old) {
        let value = match value.as_f64() {
            Some(v) => serde_json::json!(v * factor),
            None => value,
        };
        object.insert(new.to_string(), value);
    }
}

/// The field report's percentile columns of MB/s as bytes per second.
fn columns_mb_to_bytes(object: &mut Map<String, Value>, old: &str, new: &str) {
    if let Some(Value::Object(mut columns)) = object.remove(old) {
        for value in columns.values_mut() {
            if let Some(v) = value.as_f64() {
                *value = serde_json::json!(v * 1e6);
            }
        }
        object.insert(new.to_string(), Value::Object(columns));
    }
}

/// Random-read columns in microseconds as nanoseconds.
fn random_reads_us_to_ns(object: &mut Map<String, Value>) {
    if let Some(Value::Object(reads)) = object.get_mut("random_reads") {
        for name in ["p25", "p50", "p75", "p95", "p99", "mean", "max"] {
            convert(reads, &format!("{name}_us"), &format!("{name}_ns"), 1e3);
        }
    }
}

fn file_v1_to_v2(file: &mut Value) {
    if let Some(file) = file.as_object_mut() {
        if let Some(slowdown) = file.remove("slowdown") {
            file.insert("slowdown_ratio".into(), slowdown);
        }
        random_reads_us_to_ns(file);
    }
}

fn each(object: &mut Map<String, Value>, key: &str, f: impl Fn(&mut Value)) {
    if let Some(Value::Array(items)) = object.get_mut(key) {
        items.iter_mut().for_each(f);
    }
}

/// Rewrites a version-1 scan or region-scan analysis in version 2's names and units.
///
/// `slower_than` is the `--slower-than` the file's options recorded: the threshold was written as its inverse,
/// and 1 / (1 / 0.9) is not 0.9 in floating point.
fn analysis_v1_to_v2(kind: &str, analysis: &mut Map<String, Value>, slower_than: Option<f64>) {
    match kind {
        "scan" => {
            convert(analysis, "baseline_mb_s", "baseline_bytes_per_s", 1e6);
            if let Some(threshold) = analysis.remove("slowdown_threshold") {
                let ratio = slower_than
                    .or_else(|| threshold.as_f64().filter(|t| *t > 0.0).map(|t| 1.0 / t))
                    .map_or(Value::Null, |r| serde_json::json!(r));
                analysis.insert("slower_than_ratio".into(), ratio);
            }
            each(analysis, "buckets", |bucket| {
                if let Some(bucket) = bucket.as_object_mut() {
                    columns_mb_to_bytes(bucket, "speed_mb_s", "speed_bytes_per_s");
                    random_reads_us_to_ns(bucket);
                }
            });
            each(analysis, "devices", |device| {
                if let Some(device) = device.as_object_mut() {
                    columns_mb_to_bytes(device, "speed_mb_s", "speed_bytes_per_s");
                }
            });
            each(analysis, "files", file_v1_to_v2);
            if let Some(Value::Object(after)) = analysis.get_mut("after_refresh") {
                convert(after, "mean_mb_s_before", "mean_bytes_per_s_before", 1e6);
                convert(after, "mean_mb_s_after", "mean_bytes_per_s_after", 1e6);
                each(after, "files", file_v1_to_v2);
            }
            if let Some(Value::Object(report)) = analysis.get_mut("field_report") {
                each(report, "rows", |row| {
                    if let Some(row) = row.as_object_mut() {
                        random_reads_us_to_ns(row);
                    }
                });
            }
        }
        "region-scan" => {
            for name in ["median", "min", "max"] {
                convert(
                    analysis,
                    &format!("{name}_mb_s"),
                    &format!("{name}_bytes_per_s"),
                    1e6,
                );
            }
        }
        _ => {}
    }
}

/// Tags a version-2 test result's method options with the result's kind (version 3's shape).
fn method_options_v2_to_v3(kind: &str, value: &mut Value) {
    if crate::schema::MethodKind::from_name(kind).is_none() {
        return;
    }
    if let Some(method) = value.pointer_mut("/options/method") {
        let options = method.take();
        *method = serde_json::json!({ "kind": kind, "options": options });
    }
}

/// A version-3 command's options as version 4 records them: the values the flags' words stood for, in the
/// field's unit (`"chunk": "4m"` becomes `"chunk_bytes": 4194304`). A word that does not parse is left as it was,
/// and the result then fails to read, naming the field.
fn command_options_v3_to_v4(kind: &str, value: &mut Value) {
    use crate::units::{Rate, parse_duration_ns, parse_rate, parse_size};
    let Some(Value::Object(options)) = value.get_mut("options") else {
        return;
    };
    let size = |t: &str| parse_size(t).ok().map(Value::from);
    let duration = |t: &str| parse_duration_ns(t).ok().map(Value::from);
    let rate = |t: &str| match parse_rate(t) {
        Ok(Rate::BytesPerS(b)) => Some(Value::from(b)),
        _ => None,
    };
    let percentile = |t: &str| {
        t.trim()
            .trim_start_matches(['p', 'P'])
            .parse::<f64>()
            .ok()
            .map(Value::from)
    };
    let share = |t: &str| {
        let number = t.trim().strip_suffix('%').unwrap_or(t.trim());
        number.parse::<f64>().ok().map(|p| Value::from(p / 100.0))
    };
    type Parse<'a> = &'a dyn Fn(&str) -> Option<Value>;
    let renames: &[(&str, &str, Parse)] = match kind {
        "refresh" => &[
            ("older_than", "older_than_ns", &duration),
            ("rate", "rate_bytes_per_s", &rate),
            ("chunk", "chunk_bytes", &size),
        ],
        "fanout" => &[
            ("age_by", "age_by_ns", &duration),
            ("hedge", "hedge_percentile", &percentile),
            ("runtime", "runtime_ns", &duration),
            ("bs", "block_bytes", &size),
        ],
        "region-scan" => &[
            ("region_bytes", "region_bytes", &size),
            ("chunk", "chunk_bytes", &size),
        ],
        "scan" => &[
            ("min_size", "min_size_bytes", &size),
            ("chunk", "chunk_bytes", &size),
        ],
        "health" => &[("window", "window_ns", &duration)],
        "op" => &[
            ("set", "set_ratio", &share),
            ("raw_nand", "raw_nand_bytes", &size),
        ],
        _ => &[],
    };
    for (old, new, parse) in renames {
        match options.get(*old) {
            Some(Value::String(text)) => {
                if let Some(parsed) = parse(text) {
                    options.remove(*old);
                    options.insert((*new).to_string(), parsed);
                }
            }
            Some(Value::Null) => {
                options.remove(*old);
                options.insert((*new).to_string(), Value::Null);
            }
            _ => {}
        }
    }
}

impl RunResult {
    /// Reads a `result.json` of any readable schema, in this version's names and units.
    pub fn from_json(text: &str) -> Result<RunResult, String> {
        let mut value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let schema = value
            .get("schema")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !READABLE.contains(&schema.as_str()) {
            return Err(format!(
                "schema '{schema}' is not one this ssdlab reads ({})",
                READABLE.join(", ")
            ));
        }
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if schema == "ssdlab/1" {
            let slower_than = value.pointer("/options/slower_than").and_then(Value::as_f64);
            if let Some(Value::Object(analysis)) = value.get_mut("analysis") {
                analysis_v1_to_v2(&kind, analysis, slower_than);
            }
        }
        if schema == "ssdlab/1" || schema == "ssdlab/2" {
            method_options_v2_to_v3(&kind, &mut value);
        }
        if schema != SCHEMA {
            command_options_v3_to_v4(&kind, &mut value);
            value["schema"] = Value::String(SCHEMA.into());
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_scan_reads_in_si_units() {
        let mut analysis: Map<String, Value> = serde_json::from_str(
            r#"{"baseline_mb_s": 250.0, "slowdown_threshold": 2.0,
                "buckets": [{"speed_mb_s": {"p25": 1.5, "p50": 2.0, "p75": 3.0, "p95": 4.0, "mean": 2.5},
                             "random_reads": {"reads": 2, "p25_us": 100.0, "p50_us": 150.0, "p75_us": 200.0,
                                              "p95_us": 300.0, "p99_us": 400.0, "mean_us": 160.0, "max_us": 500.0}}],
                "files": [{"slowdown": null}, {"slowdown": 10.5}],
                "after_refresh": {"mean_mb_s_before": 20.0, "mean_mb_s_after": 240.0, "files": []}}"#,
        )
        .unwrap();
        analysis_v1_to_v2("scan", &mut analysis, None);
        let v = Value::Object(analysis);
        assert_eq!(v["baseline_bytes_per_s"], 250e6);
        assert_eq!(v["slower_than_ratio"], 0.5);
        assert_eq!(v["buckets"][0]["speed_bytes_per_s"]["p50"], 2e6);
        assert_eq!(v["buckets"][0]["random_reads"]["p99_ns"], 400e3);
        assert_eq!(
            v["files"][0]["slowdown_ratio"],
            Value::Null,
            "infinity stays null"
        );
        assert_eq!(v["files"][1]["slowdown_ratio"], 10.5);
        assert_eq!(v["after_refresh"]["mean_bytes_per_s_after"], 240e6);
        assert!(v.get("baseline_mb_s").is_none() && v["buckets"][0].get("speed_mb_s").is_none());
    }

    /// A version-2 quick result: its options were latency's fields plus `repeats`, untagged. It reads back as
    /// quick's options, and a version-2 latency result as latency's.
    #[test]
    fn a_version_2_methods_options_read_back_as_its_kind() {
        for (kind, options) in [
            (
                "quick",
                r#"{"repeats": 3, "runtime_ns": 1000000000, "span_bytes": 1048576}"#,
            ),
            (
                "latency",
                r#"{"span_bytes": 1048576, "runtime_ns": 1000000000, "rw": "randread"}"#,
            ),
        ] {
            let mut value: Value = serde_json::from_str(&format!(
                r#"{{"kind": "{kind}", "options": {{"target": "null", "engine": "auto", "allow_destroy": false,
                    "force": false, "seed": 1, "method": {options}}}}}"#
            ))
            .unwrap();
            method_options_v2_to_v3(kind, &mut value);
            let method: crate::schema::MethodOptions =
                serde_json::from_value(value.pointer("/options/method").unwrap().clone()).unwrap();
            assert_eq!(method.kind().name(), kind);
        }
        // Not a method: untouched.
        let mut value: Value = serde_json::from_str(r#"{"kind": "scan", "options": {"paths": []}}"#).unwrap();
        let before = value.clone();
        method_options_v2_to_v3("scan", &mut value);
        assert_eq!(value, before);
    }

    #[test]
    fn a_version_3_commands_flags_read_back_as_values() {
        let fanout = r#"{"schema": "ssdlab/3", "kind": "fanout", "options": {"targets": [], "fleet": "field-report",
            "age_by": "6w", "refresh_all": false, "shards": [100], "hedge": "p95", "mode": "computed",
            "runtime": "60s", "bs": "4k", "seed": 1}}"#;
        let mut value: Value = serde_json::from_str(fanout).unwrap();
        command_options_v3_to_v4("fanout", &mut value);
        let options = &value["options"];
        assert_eq!(options["age_by_ns"], 42 * 86_400 * 1_000_000_000u64);
        assert_eq!(options["hedge_percentile"], 95.0);
        assert_eq!(options["runtime_ns"], 60_000_000_000u64);
        assert_eq!(options["block_bytes"], 4096);
        assert!(options.get("bs").is_none());
        let mut op: Value = serde_json::from_str(
            r#"{"options": {"set": "25%", "raw_nand": null, "samples": 64, "seed": 1}}"#,
        )
        .unwrap();
        command_options_v3_to_v4("op", &mut op);
        assert_eq!(op["options"]["set_ratio"], 0.25);
        assert_eq!(op["options"]["raw_nand_bytes"], Value::Null);
        let mut refresh: Value =
            serde_json::from_str(r#"{"options": {"older_than": "90d", "rate": "200m", "chunk": "4m"}}"#)
                .unwrap();
        command_options_v3_to_v4("refresh", &mut refresh);
        assert_eq!(
            refresh["options"]["older_than_ns"],
            90 * 86_400 * 1_000_000_000u64
        );
        assert_eq!(refresh["options"]["rate_bytes_per_s"], 200.0 * 1048576.0);
        assert_eq!(refresh["options"]["chunk_bytes"], 4 << 20);
    }

    #[test]
    fn unknown_schemas_are_refused_by_name() {
        let err = RunResult::from_json(r#"{"schema": "ssdlab/9"}"#).unwrap_err();
        assert!(
            err.contains("ssdlab/9") && err.contains("ssdlab/1, ssdlab/2, ssdlab/3, ssdlab/4"),
            "{err}"
        );
    }
}
