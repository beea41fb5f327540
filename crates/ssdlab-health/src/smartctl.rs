//! smartctl's JSON (`smartctl --json -x`, live or saved) into a snapshot.
//!
//! smartctl's exit status is a bit mask and its JSON is printed whatever the status: bits 0-1 mean it could
//! not run (bad command line, device could not be opened), so there is no data; bits 2-7 are findings (a
//! command failed, the disk is failing, attributes at or below threshold now or in the past, errors logged)
//! and the data is read as usual, the bits going into the verdict.

use serde_json::Value;
use ssdlab_core::schema::health::{AtaAttribute, DriveIdentity, HealthSnapshot, NamedValue, Protocol};

use crate::ParseError;
use crate::ata::{self, DeviceStatistics};
use crate::drivedb::AttributeNames;
use crate::json::{as_u64, at, counter, f64_at, identity_at, identity_text, str_at, u64_at};

/// One NVMe data unit is 1000 logical blocks of 512 bytes, whatever the namespace's block size.
pub const NVME_DATA_UNIT_BYTES: u128 = 512_000;

/// The meaning of each bit of smartctl's exit status.
pub const EXIT_BITS: [&str; 8] = [
    "the command line did not parse",
    "the device could not be opened or did not answer IDENTIFY",
    "a SMART or other ATA/NVMe command failed, or a checksum error in a SMART data structure",
    "SMART status check returned DISK FAILING",
    "prefailure attributes are at or below their thresholds",
    "some attributes were at or below their thresholds in the past",
    "the device error log contains errors",
    "the self-test log contains errors",
];

/// The bits of the exit status that mean smartctl could not run at all.
pub const FATAL_BITS: u8 = 0b11;

/// The meanings of the bits set in `status`, joined.
pub fn exit_meaning(status: u8, mask: u8) -> String {
    (0..8)
        .filter(|bit| status & mask & (1 << bit) != 0)
        .map(|bit| format!("bit {bit}: {}", EXIT_BITS[bit]))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether JSON is smartctl's.
pub fn looks_like(value: &Value) -> bool {
    value.get("smartctl").is_some() || value.get("json_format_version").is_some()
}

/// Parses smartctl JSON text, naming attributes by the fallback table only.
pub fn parse(source_name: &str, text: &str, now_s: u64) -> Result<HealthSnapshot, ParseError> {
    parse_named(source_name, text, now_s, &AttributeNames::new(None))
}

/// Parses smartctl JSON text, naming ATA attributes by `names` (the installed drive database, then the fallback).
pub fn parse_named(
    source_name: &str,
    text: &str,
    now_s: u64,
    names: &AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ParseError::Format {
        source_name: source_name.into(),
        reason: format!(
            "smartctl printed something that is not JSON ({e}); is it older than 7.0 (no --json)?"
        ),
    })?;
    if !looks_like(&value) {
        return Err(ParseError::Format {
            source_name: source_name.into(),
            reason: "JSON without smartctl's \"smartctl\" or \"json_format_version\" keys".into(),
        });
    }
    let mut snapshot = parse_value(source_name, &value, now_s, names)?;
    crate::plausible::check(&mut snapshot);
    Ok(snapshot)
}

/// Reads smartctl's JSON into a snapshot: identity and the fields every protocol has, then the NVMe health log
/// or the ATA attributes, then the fields newer smartctl states the same way for all. Fails when smartctl could
/// not run at all (exit status bits 0-1).
pub fn parse_value(
    source_name: &str,
    value: &Value,
    now_s: u64,
    names: &AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let messages = messages_of(value);
    let exit_status = u64_at(value, &["smartctl", "exit_status"]).map(|s| s.min(255) as u8);
    if let Some(status) = exit_status
        && status & FATAL_BITS != 0
    {
        return Err(ParseError::SmartctlFailed {
            source_name: source_name.into(),
            exit_status: status,
            meaning: exit_meaning(status, FATAL_BITS),
            messages: if messages.is_empty() {
                String::new()
            } else {
                format!(": {}", messages.join("; "))
            },
        });
    }
    let protocol = protocol_of(value);
    let mut snapshot = HealthSnapshot {
        taken_at_s: u64_at(value, &["local_time", "time_t"]).unwrap_or(now_s),
        identity: identity_of(source_name, value, protocol),
        power_on_hours: u64_at(value, &["power_on_time", "hours"]),
        temperature_celsius: f64_at(value, &["temperature", "current"]),
        host_written_bytes: None,
        host_read_bytes: None,
        nand_written_bytes: None,
        nand_written_source: String::new(),
        wear_used_percent: None,
        wear_source: String::new(),
        erase_count_mean: None,
        available_spare_percent: None,
        available_spare_threshold_percent: None,
        media_errors: None,
        crc_errors: None,
        reallocated: None,
        pending_sectors: None,
        unsafe_shutdowns: None,
        smart_passed: at(value, &["smart_status", "passed"]).and_then(Value::as_bool),
        critical_warning: None,
        smartctl_exit_status: exit_status,
        attributes: vec![],
        other_fields: vec![],
        notes: messages.iter().map(|m| format!("smartctl: {m}")).collect(),
    };
    if value.get("local_time").is_none() {
        snapshot
            .notes
            .push("smartctl gave no local_time: the snapshot is stamped with the time it was read".into());
    }
    if snapshot.identity.serial.is_empty() {
        snapshot.notes.push(
            "no serial number (redacted or not reported): no history can be kept for this drive".into(),
        );
    }
    if let Some(log) = value.get("nvme_smart_health_information_log") {
        nvme_log(log, &mut snapshot);
    }
    if let Some(table) = at(value, &["ata_smart_attributes", "table"]).and_then(Value::as_array) {
        ata_attributes(value, table, names, &mut snapshot);
    }
    common_fields(value, protocol, &mut snapshot);
    Ok(snapshot)
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
fn protocol_of(value: &Value) -> Protocol {
    match str_at(value, &["device", "protocol"]) {
        Some("ATA") => Protocol::Ata,
        Some("NVMe") => Protocol::Nvme,
        Some("SCSI") => Protocol::Scsi,
        _ if value.get("nvme_smart_health_information_log").is_some() => Protocol::Nvme,
        _ if value.get("ata_smart_attributes").is_some() => Protocol::Ata,
        _ => Protocol::Unknown,
    }
}

/// The drive's model, serial, firmware and capacity, and the device it was read from (`source_name` when
/// smartctl names none).
fn identity_of(source_name: &str, value: &Value, protocol: Protocol) -> DriveIdentity {
    let model = identity_text(
        str_at(value, &["model_name"])
            .or_else(|| str_at(value, &["scsi_model_name"]))
            .or_else(|| str_at(value, &["product"]))
            .unwrap_or(""),
    );
    let capacity_bytes =
        u64_at(value, &["user_capacity", "bytes"]).or_else(|| u64_at(value, &["nvme_total_capacity"]));
    DriveIdentity {
        model,
        serial: identity_at(value, &["serial_number"]).unwrap_or_default(),
        firmware: identity_at(value, &["firmware_version"]),
        capacity_bytes,
        protocol,
        source: identity_text(str_at(value, &["device", "name"]).unwrap_or(source_name)),
    }
}

/// The ATA attribute `table`, named by `names` (the drive database, then the fallback), and what the attributes
/// and the device statistics say about writes, wear and errors.
fn ata_attributes(value: &Value, table: &[Value], names: &AttributeNames, snapshot: &mut HealthSnapshot) {
    snapshot.attributes = table.iter().filter_map(attribute).collect();
    let firmware = snapshot.identity.firmware.clone();
    if let Some(note) = names.rename(
        &snapshot.identity.model,
        firmware.as_deref(),
        &mut snapshot.attributes,
    ) {
        snapshot.notes.push(note);
    }
    let lbs = u64_at(value, &["logical_block_size"]).unwrap_or(512);
    let stats = device_statistics(value);
    let attributes = snapshot.attributes.clone();
    ata::apply(&attributes, &stats, lbs, snapshot);
}

/// What newer smartctl states the same way for every protocol (endurance used, spare) where the protocol's own
/// data gave nothing, why NAND writes are missing, and a note when there was no health data at all.
fn common_fields(value: &Value, protocol: Protocol, snapshot: &mut HealthSnapshot) {
    if let Some(used) = f64_at(value, &["endurance_used", "current_percent"])
        && snapshot.wear_used_percent.is_none()
    {
        snapshot.wear_used_percent = Some(used);
        snapshot.wear_source = "smartctl endurance_used".into();
    }
    if snapshot.available_spare_percent.is_none() {
        snapshot.available_spare_percent = f64_at(value, &["spare_available", "current_percent"]);
        snapshot.available_spare_threshold_percent = f64_at(value, &["spare_available", "threshold_percent"]);
    }
    if snapshot.nand_written_source.is_empty() {
        snapshot.nand_written_source = match protocol {
            Protocol::Nvme => {
                "not in the NVMe SMART log: NVMe drives report NAND writes in the Endurance Group \
                               log (09h) or the OCP cloud log (C0h), which smartctl does not read"
                    .into()
            }
            _ => "not reported by this source".into(),
        };
    }
    if snapshot.attributes.is_empty() && value.get("nvme_smart_health_information_log").is_none() {
        snapshot.notes.push(
            "no SMART attributes or NVMe health log in this output (run smartctl with -x or -a)".into(),
        );
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
        let (Some(name), Some(v)) = (
            entry.get("name").and_then(Value::as_str),
            entry.get("value").and_then(as_u64),
        ) else {
            continue;
        };
        if !valid {
            continue;
        }
        match name {
            "Logical Sectors Written" => stats.logical_sectors_written = Some(v),
            "Logical Sectors Read" => stats.logical_sectors_read = Some(v),
            "Percentage Used Endurance Indicator" => stats.percentage_used = Some(v),
            "Number of Reported Uncorrectable Errors" => stats.reported_uncorrectable = Some(v),
            _ => {}
        }
    }
    stats
}

/// The NVMe SMART / Health Information log (02h), as smartctl names its fields.
fn nvme_log(log: &Value, snapshot: &mut HealthSnapshot) {
    let mut approximate = vec![];
    let units = |key: &str, approximate: &mut Vec<String>| {
        counter(log, key, approximate).map(|u| u.saturating_mul(NVME_DATA_UNIT_BYTES))
    };
    snapshot.host_written_bytes = units("data_units_written", &mut approximate);
    snapshot.host_read_bytes = units("data_units_read", &mut approximate);
    let number = |key: &str| log.get(key).and_then(as_u64);
    snapshot.critical_warning = number("critical_warning").map(|v| v.min(255) as u8);
    snapshot.available_spare_percent = number("available_spare").map(|v| v as f64);
    snapshot.available_spare_threshold_percent = number("available_spare_threshold").map(|v| v as f64);
    if let Some(used) = number("percentage_used") {
        snapshot.wear_used_percent = Some(used as f64);
        snapshot.wear_source = "NVMe percentage_used".into();
    }
    snapshot.media_errors = counter(log, "media_errors", &mut approximate).map(saturate);
    snapshot.unsafe_shutdowns = counter(log, "unsafe_shutdowns", &mut approximate).map(saturate);
    snapshot.power_on_hours = snapshot
        .power_on_hours
        .or_else(|| counter(log, "power_on_hours", &mut approximate).map(saturate));
    if snapshot.temperature_celsius.is_none() {
        snapshot.temperature_celsius = number("temperature").map(|t| t as f64);
    }
    const NAMED: [&str; 9] = [
        "data_units_written",
        "data_units_read",
        "critical_warning",
        "available_spare",
        "available_spare_threshold",
        "percentage_used",
        "media_errors",
        "unsafe_shutdowns",
        "power_on_hours",
    ];
    if let Some(fields) = log.as_object() {
        snapshot.other_fields = fields
            .iter()
            .filter(|(k, _)| !NAMED.contains(&k.as_str()) && !k.ends_with("_s") && !k.ends_with("_le"))
            .map(|(k, v)| NamedValue {
                name: k.clone(),
                value: v.to_string(),
            })
            .collect();
    }
    snapshot.notes.extend(approximate);
}

fn saturate(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// One drive `smartctl --scan-open --json` found: its device and the `-d TYPE` that reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedDrive {
    pub name: String,
    pub device_type: String,
    /// Why smartctl could not open it, if it could not.
    pub open_error: Option<String>,
}

/// Reads `smartctl --scan-open --json=c`: every drive smartctl can open, with the type (sat for a drive behind a
/// USB bridge, megaraid,N behind a RAID controller) that it needs to be read, and why it could not be opened
/// where it could not (a drive that stops answering must still be reported).
pub fn parse_scan(text: &str) -> Result<Vec<ScannedDrive>, ParseError> {
    let source_name = "smartctl --scan-open";
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ParseError::Format {
        source_name: source_name.into(),
        reason: format!("not JSON ({e}); this smartctl may be older than 7.0 (no --json)"),
    })?;
    if value.get("smartctl").is_none() {
        return Err(ParseError::Format {
            source_name: source_name.into(),
            reason: "JSON, but not smartctl's (no \"smartctl\" key)".into(),
        });
    }
    // smartctl leaves the list out when it finds nothing.
    let empty = vec![];
    let devices = value
        .get("devices")
        .and_then(serde_json::Value::as_array)
        .unwrap_or(&empty);
    Ok(devices
        .iter()
        .filter_map(|d| {
            Some(ScannedDrive {
                name: d.get("name")?.as_str()?.to_string(),
                device_type: d.get("type")?.as_str()?.to_string(),
                open_error: d.get("open_error").and_then(|e| e.as_str()).map(str::to_string),
            })
        })
        .collect())
}
