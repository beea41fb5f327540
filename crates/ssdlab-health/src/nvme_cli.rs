//! nvme-cli's `nvme smart-log DEV -o json` into a snapshot.
//!
//! nvme-cli names fields differently from smartctl (`percent_used`, `avail_spare`, `spare_thresh`), prints
//! the temperature in kelvin, and since 2.11 prints `critical_warning` as an object with a `value`. It prints no
//! model, serial or time: the snapshot has no serial (so no history) and is stamped with the time it was read.

use serde_json::Value;
use ssdlab_core::schema::health::{DriveIdentity, HealthSnapshot, NamedValue, Protocol};

use crate::ParseError;
use crate::json::{as_u64, counter};
use crate::smartctl::NVME_DATA_UNIT_BYTES;

/// Whether JSON is nvme-cli's smart-log.
pub fn looks_like(value: &Value) -> bool {
    value.get("data_units_written").is_some() && value.get("critical_warning").is_some()
}

/// The fields this reader names; every other field of the log is kept as it is, in `other_fields`.
const NAMED: [&str; 11] = [
    "critical_warning",
    "temperature",
    "avail_spare",
    "spare_thresh",
    "percent_used",
    "percentage_used",
    "data_units_written",
    "data_units_read",
    "power_on_hours",
    "unsafe_shutdowns",
    "media_errors",
];

/// Reads nvme-cli's smart-log JSON into a snapshot stamped `now_s` (the log carries no time of its own).
pub fn parse_value(source_name: &str, log: &Value, now_s: u64) -> Result<HealthSnapshot, ParseError> {
    if !log.is_object() {
        return Err(ParseError::Format {
            source_name: source_name.into(),
            reason: "an nvme smart-log must be a JSON object".into(),
        });
    }
    let mut notes = vec![
        "nvme-cli's smart-log names no drive: no model, serial or time (the time it was read is used); \
         give smartctl --json -x output for history"
            .to_string(),
    ];
    let number = |key: &str| log.get(key).and_then(as_u64);
    let critical_warning = critical_warning_of(log);
    let units = |key: &str, notes: &mut Vec<String>| {
        counter(log, key, notes).map(|u| u.saturating_mul(NVME_DATA_UNIT_BYTES))
    };
    let host_written_bytes = units("data_units_written", &mut notes);
    let host_read_bytes = units("data_units_read", &mut notes);
    let wear = number("percent_used").or_else(|| number("percentage_used"));
    Ok(HealthSnapshot {
        taken_at_s: now_s,
        identity: DriveIdentity {
            model: String::new(),
            serial: String::new(),
            firmware: None,
            capacity_bytes: None,
            protocol: Protocol::Nvme,
            source: source_name.into(),
        },
        power_on_hours: number("power_on_hours"),
        temperature_celsius: temperature_celsius_of(log),
        host_written_bytes,
        host_read_bytes,
        nand_written_bytes: None,
        nand_written_source:
            "not in the NVMe SMART log: read the Endurance Group log (nvme endurance-log) or \
                              the OCP cloud log (nvme ocp smart-add-log) for physical media units written"
                .into(),
        wear_used_percent: wear.map(|w| w as f64),
        wear_source: if wear.is_some() {
            "NVMe percent_used".into()
        } else {
            String::new()
        },
        erase_count_mean: None,
        available_spare_percent: number("avail_spare").map(|v| v as f64),
        available_spare_threshold_percent: number("spare_thresh").map(|v| v as f64),
        media_errors: number("media_errors"),
        crc_errors: None,
        reallocated: None,
        pending_sectors: None,
        unsafe_shutdowns: number("unsafe_shutdowns"),
        smart_passed: critical_warning.map(|w| w == 0),
        critical_warning,
        smartctl_exit_status: None,
        attributes: vec![],
        other_fields: other_fields_of(log),
        notes,
    })
}

/// The critical warning byte: a number, or since nvme-cli 2.11 an object with a `value` (at most 255).
fn critical_warning_of(log: &Value) -> Option<u8> {
    match log.get("critical_warning") {
        Some(Value::Object(o)) => o.get("value").and_then(as_u64),
        Some(v) => as_u64(v),
        None => None,
    }
    .map(|v| v.min(255) as u8)
}

/// The composite temperature in °C to a tenth: nvme-cli prints it in kelvin, and 0 means not reported.
fn temperature_celsius_of(log: &Value) -> Option<f64> {
    log.get("temperature")
        .and_then(as_u64)
        .filter(|&k| k > 0)
        .map(|k| k as f64 - 273.15)
        .map(|c| (c * 10.0).round() / 10.0)
}

/// Every field of the log this reader does not name, with its JSON text.
fn other_fields_of(log: &Value) -> Vec<NamedValue> {
    log.as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !NAMED.contains(&k.as_str()))
                .map(|(k, v)| NamedValue {
                    name: k.clone(),
                    value: v.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}
