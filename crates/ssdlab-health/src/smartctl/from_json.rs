//! smartctl's JSON (`smartctl --json -x`, live or saved) into [`Printed`]. Every key is optional: smartctl keeps
//! adding keys, drives leave many out, and older versions shaped some differently (noted where they did).

use serde_json::Value;
use ssdlab_core::schema::health::{AtaAttribute, NamedValue, Protocol};

use super::printed::{NvmeHealthLog, Printed, ScsiLogs, gigabytes_to_bytes};
use crate::ata::DeviceStatistics;
use crate::json::{as_u64, at, counter, f64_at, str_at, u64_at};

/// Reads smartctl's JSON into what it says, uninterpreted.
pub fn read(value: &Value) -> Printed {
    Printed {
        exit_status: u64_at(value, &["smartctl", "exit_status"]).map(|s| s.min(255) as u8),
        messages: messages_of(value),
        local_time_s: u64_at(value, &["local_time", "time_t"]),
        local_time_unread: None,
        protocol: protocol_of(value),
        device_name: str_at(value, &["device", "name"]).map(String::from),
        model: str_at(value, &["model_name"])
            .or_else(|| str_at(value, &["scsi_model_name"]))
            .or_else(|| str_at(value, &["product"]))
            .map(String::from),
        serial: str_at(value, &["serial_number"]).map(String::from),
        firmware: str_at(value, &["firmware_version"])
            .or_else(|| str_at(value, &["scsi_revision"]))
            .or_else(|| str_at(value, &["revision"]))
            .map(String::from),
        capacity_bytes: u64_at(value, &["user_capacity", "bytes"])
            .or_else(|| u64_at(value, &["nvme_total_capacity"])),
        logical_block_bytes: u64_at(value, &["logical_block_size"]),
        power_on_hours: u64_at(value, &["power_on_time", "hours"]),
        temperature_celsius: f64_at(value, &["temperature", "current"]),
        smart_passed: at(value, &["smart_status", "passed"]).and_then(Value::as_bool),
        ata_attributes: at(value, &["ata_smart_attributes", "table"])
            .and_then(Value::as_array)
            .map(|table| table.iter().filter_map(attribute).collect()),
        device_statistics: device_statistics(value),
        nvme: value.get("nvme_smart_health_information_log").map(nvme_log),
        scsi: scsi_logs(value),
        endurance_used_percent: f64_at(value, &["endurance_used", "current_percent"]),
        spare_available_percent: f64_at(value, &["spare_available", "current_percent"]),
        spare_threshold_percent: f64_at(value, &["spare_available", "threshold_percent"]),
    }
}

/// smartctl's own messages (`smartctl.messages[].string`).
fn messages_of(value: &Value) -> Vec<String> {
    at(value, &["smartctl", "messages"])
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(|m| m.get("string").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The device's protocol as smartctl names it, or as its health data shows when it does not.
fn protocol_of(value: &Value) -> Option<Protocol> {
    match str_at(value, &["device", "protocol"]) {
        Some("ATA") => Some(Protocol::Ata),
        Some("NVMe") => Some(Protocol::Nvme),
        Some("SCSI") => Some(Protocol::Scsi),
        _ if value.get("nvme_smart_health_information_log").is_some() => Some(Protocol::Nvme),
        _ if value.get("ata_smart_attributes").is_some() => Some(Protocol::Ata),
        _ if value.get("scsi_error_counter_log").is_some()
            || value.get("scsi_grown_defect_list").is_some() =>
        {
            Some(Protocol::Scsi)
        }
        _ => None,
    }
}

fn attribute(entry: &Value) -> Option<AtaAttribute> {
    let small = |key: &str| entry.get(key).and_then(as_u64).map(|v| v.min(255) as u8);
    Some(AtaAttribute {
        id: small("id")?,
        name: entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("Unknown_Attribute")
            .into(),
        value: small("value").unwrap_or(0),
        worst: small("worst").unwrap_or(0),
        thresh: small("thresh").unwrap_or(0),
        when_failed: entry
            .get("when_failed")
            .and_then(Value::as_str)
            .unwrap_or("")
            .into(),
        prefailure: at(entry, &["flags", "prefailure"])
            .and_then(Value::as_bool)
            .unwrap_or(false),
        raw_value: u64_at(entry, &["raw", "value"]).unwrap_or(0),
        raw_string: str_at(entry, &["raw", "string"]).unwrap_or("").into(),
    })
}

fn device_statistics(value: &Value) -> DeviceStatistics {
    let mut stats = DeviceStatistics::default();
    let Some(pages) = at(value, &["ata_device_statistics", "pages"]).and_then(Value::as_array) else {
        return stats;
    };
    for entry in pages
        .iter()
        .filter_map(|p| p.get("table").and_then(Value::as_array))
        .flatten()
    {
        let valid = at(entry, &["flags", "valid"])
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if let (true, Some(name), Some(v)) = (
            valid,
            entry.get("name").and_then(Value::as_str),
            entry.get("value").and_then(as_u64),
        ) {
            stats.record(name, v);
        }
    }
    stats
}

/// The NVMe SMART / Health Information log (02h), as smartctl names its fields.
fn nvme_log(log: &Value) -> NvmeHealthLog {
    let mut approximate = vec![];
    let number = |key: &str| log.get(key).and_then(as_u64);
    let mut wide = |key: &str| counter(log, key, &mut approximate);
    let data_units_read = wide("data_units_read");
    let data_units_written = wide("data_units_written");
    let media_errors = wide("media_errors");
    let unsafe_shutdowns = wide("unsafe_shutdowns");
    let power_on_hours = wide("power_on_hours");
    NvmeHealthLog {
        critical_warning: number("critical_warning").map(|v| v.min(255) as u8),
        temperature_celsius: number("temperature").map(|t| t as f64),
        available_spare_percent: number("available_spare").map(|v| v as f64),
        available_spare_threshold_percent: number("available_spare_threshold").map(|v| v as f64),
        percentage_used: number("percentage_used").map(|v| v as f64),
        data_units_read,
        data_units_written,
        media_errors,
        unsafe_shutdowns,
        power_on_hours,
        other_fields: log
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .filter(|(k, _)| {
                        !super::NVME_NAMED.contains(&k.as_str()) && !k.ends_with("_s") && !k.ends_with("_le")
                    })
                    .map(|(k, v)| NamedValue {
                        name: k.clone(),
                        value: v.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        approximate,
    }
}

/// A SCSI drive's log pages: the error counter log, the grown defect list, the endurance indicator and the
/// start-stop cycle counter. None when the output has none of them.
fn scsi_logs(value: &Value) -> Option<ScsiLogs> {
    let direction = |d: &str| value.get("scsi_error_counter_log").and_then(|log| log.get(d));
    let processed = |d: &str| {
        direction(d).and_then(|e| match e.get("gigabytes_processed")? {
            Value::String(s) => gigabytes_to_bytes(s),
            Value::Number(n) => gigabytes_to_bytes(&n.to_string()),
            _ => None,
        })
    };
    let uncorrected: Vec<u64> = ["read", "write", "verify"]
        .iter()
        .filter_map(|d| direction(d)?.get("total_uncorrected_errors").and_then(as_u64))
        .collect();
    // smartctl 7.0-7.4 print the indicator as a number; some builds as an object holding it.
    let percentage_used = match value.get("scsi_percentage_used_endurance_indicator") {
        Some(Value::Object(o)) => o.get("percentage_used_endurance_indicator").and_then(as_u64),
        Some(v) => as_u64(v),
        None => None,
    };
    let logs = ScsiLogs {
        written_bytes: processed("write"),
        read_bytes: processed("read"),
        uncorrected_errors: (!uncorrected.is_empty()).then(|| uncorrected.iter().sum()),
        grown_defects: value.get("scsi_grown_defect_list").and_then(as_u64),
        percentage_used: percentage_used.map(|p| p as f64),
        start_stop_cycles: u64_at(
            value,
            &["scsi_start_stop_cycle_counter", "accumulated_start_stop_cycles"],
        ),
    };
    (logs != ScsiLogs::default()).then_some(logs)
}
