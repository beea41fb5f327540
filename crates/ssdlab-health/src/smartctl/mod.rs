//! smartctl's output, JSON (`smartctl --json -x`, live or saved) or text (`smartctl -a`, `-x`, `-A`, as saved or
//! pasted into a ticket), into a snapshot. Each form has its reader ([`from_json`], [`from_text`]) that fills one
//! typed [`Printed`]; [`snapshot_of`] builds the snapshot from it, so the two forms cannot drift apart.
//!
//! smartctl's exit status is a bit mask and its JSON is printed whatever the status: bits 0-1 mean it could
//! not run (bad command line, device could not be opened), so there is no data; bits 2-7 are findings (a
//! command failed, the disk is failing, attributes at or below threshold now or in the past, errors logged)
//! and the data is read as usual, the bits going into the verdict.

mod from_json;
mod from_text;
mod local_time;
pub mod printed;

use serde_json::Value;
use ssdlab_core::schema::health::{AtaAttribute, DriveIdentity, HealthSnapshot, Protocol};

use crate::ParseError;
use crate::ata::{self, DeviceStatistics};
use crate::drivedb::AttributeNames;
use crate::json::identity_text;
use printed::{NvmeHealthLog, Printed};

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

/// Whether JSON is smartctl's: its own keys, or (in outputs other tools saved trimmed, as scrutiny's test data
/// is) a section only smartctl writes.
pub fn looks_like(value: &Value) -> bool {
    const SECTIONS: [&str; 6] = [
        "smartctl",
        "json_format_version",
        "smart_status",
        "ata_smart_attributes",
        "nvme_smart_health_information_log",
        "scsi_error_counter_log",
    ];
    SECTIONS.iter().any(|key| value.get(key).is_some())
        || value.get("device").and_then(|d| d.get("protocol")).is_some()
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

/// Reads smartctl's JSON into a snapshot (see [`snapshot_of`]).
pub fn parse_value(
    source_name: &str,
    value: &Value,
    now_s: u64,
    names: &AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    snapshot_of(source_name, from_json::read(value), now_s, names)
}

/// Reads smartctl's text (`smartctl -a`, `-x` or `-A`, as saved or pasted) into a snapshot (see [`snapshot_of`]);
/// fails when the text is not smartctl's or says smartctl could not read the device.
pub fn parse_text(
    source_name: &str,
    text: &str,
    now_s: u64,
    names: &AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let printed = from_text::read(text).map_err(|reason| ParseError::Format {
        source_name: source_name.into(),
        reason,
    })?;
    snapshot_of(source_name, printed, now_s, names)
}

/// What one smartctl output says, as a snapshot: identity and the fields every protocol has, then the NVMe
/// health log, the ATA attributes or the SCSI log pages, then the fields newer smartctl states the same way for
/// all. Both readers end here, so a drive read from JSON and from text becomes the same snapshot. Fails when
/// smartctl could not run at all (exit status bits 0-1). Plausibility is the caller's next step.
pub fn snapshot_of(
    source_name: &str,
    printed: Printed,
    now_s: u64,
    names: &AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let messages = printed.messages.clone();
    if let Some(status) = printed.exit_status
        && status & FATAL_BITS != 0
    {
        return Err(ParseError::SmartctlFailed {
            source_name: source_name.into(),
            exit_status: status,
            meaning: exit_meaning(status, FATAL_BITS),
            messages: if messages.is_empty() {
                String::new()
            } else {
                // smartctl's own words, and where they have one cause a reader can act on, that cause.
                let hint = if messages
                    .iter()
                    .any(|m| m.contains("Unable to detect device type"))
                {
                    "; a virtual disk (virtio, a cloud volume) has no SMART to read, and a drive behind a USB or \
                     RAID bridge needs its type as DEVICE:TYPE (/dev/sdb:sat, /dev/sda:megaraid,0)"
                } else {
                    ""
                };
                format!(": {}{hint}", messages.join("; "))
            },
        });
    }
    let protocol = printed.protocol.unwrap_or(Protocol::Unknown);
    let mut snapshot = first_fields(source_name, &printed, now_s, protocol);
    let has_nvme_log = printed.nvme.is_some();
    if let Some(log) = printed.nvme {
        nvme_log(log, &mut snapshot);
    }
    if let Some(attributes) = printed.ata_attributes {
        ata_attributes(
            attributes,
            &printed.device_statistics,
            printed.logical_block_bytes,
            names,
            &mut snapshot,
        );
    } else if printed.device_statistics != DeviceStatistics::default() {
        // `smartctl -x` on a drive that lists statistics but no attribute table (rare, but the log is standard).
        let lbs = printed.logical_block_bytes.unwrap_or(512);
        ata::apply(&[], &printed.device_statistics, lbs, &mut snapshot);
    }
    if let Some(logs) = &printed.scsi {
        crate::scsi::apply(logs, &mut snapshot);
    }
    let common = Common {
        endurance_used_percent: printed.endurance_used_percent,
        spare_available_percent: printed.spare_available_percent,
        spare_threshold_percent: printed.spare_threshold_percent,
        has_nvme_log,
        has_scsi_logs: printed.scsi.is_some(),
    };
    common.apply(protocol, &mut snapshot);
    Ok(snapshot)
}

/// The snapshot's identity and the fields every protocol prints, with notes on a missing time or serial; the
/// protocol's own health data comes after.
fn first_fields(source_name: &str, printed: &Printed, now_s: u64, protocol: Protocol) -> HealthSnapshot {
    let mut snapshot = HealthSnapshot {
        power_on_hours: printed.power_on_hours,
        temperature_celsius: printed.temperature_celsius,
        smart_passed: printed.smart_passed,
        smartctl_exit_status: printed.exit_status,
        notes: printed
            .messages
            .iter()
            .map(|m| format!("smartctl: {m}"))
            .collect(),
        ..HealthSnapshot::unread(
            identity_of(source_name, printed, protocol),
            printed.local_time_s.unwrap_or(now_s),
        )
    };
    match (&printed.local_time_s, &printed.local_time_unread) {
        (Some(_), _) => {}
        (None, Some(why)) => snapshot.notes.push(format!(
            "{why}: the snapshot is stamped with the time it was read"
        )),
        (None, None) => snapshot
            .notes
            .push("smartctl gave no local time: the snapshot is stamped with the time it was read".into()),
    }
    if snapshot.identity.serial.is_empty() {
        snapshot.notes.push(
            "no serial number (redacted or not reported): no history can be kept for this drive".into(),
        );
    }
    snapshot
}

/// The drive's model, serial, firmware and capacity, and the device it was read from (`source_name` when
/// smartctl names none).
fn identity_of(source_name: &str, printed: &Printed, protocol: Protocol) -> DriveIdentity {
    DriveIdentity {
        model: identity_text(printed.model.as_deref().unwrap_or("")),
        serial: printed.serial.as_deref().map(identity_text).unwrap_or_default(),
        firmware: printed.firmware.as_deref().map(identity_text),
        capacity_bytes: printed.capacity_bytes,
        protocol,
        source: identity_text(printed.device_name.as_deref().unwrap_or(source_name)),
    }
}

/// The ATA attribute table, named by `names` (the drive database, then the fallback), and what the attributes
/// and the device statistics say about writes, wear and errors.
fn ata_attributes(
    mut attributes: Vec<AtaAttribute>,
    stats: &DeviceStatistics,
    logical_block_bytes: Option<u64>,
    names: &AttributeNames,
    snapshot: &mut HealthSnapshot,
) {
    let firmware = snapshot.identity.firmware.clone();
    if let Some(note) = names.rename(&snapshot.identity.model, firmware.as_deref(), &mut attributes) {
        snapshot.notes.push(note);
    }
    if snapshot.power_on_hours.is_none() {
        // Text has no power_on_time: the attribute (first figure of its raw value), then the statistic.
        snapshot.power_on_hours = attributes
            .iter()
            .find(|a| a.id == 9)
            .map(ata::count_of)
            .or(stats.power_on_hours);
    }
    if snapshot.temperature_celsius.is_none() {
        snapshot.temperature_celsius = [194u8, 190]
            .iter()
            .find_map(|id| attributes.iter().find(|a| a.id == *id))
            .map(|a| ata::count_of(a) as f64)
            .filter(|t| *t > 0.0 && *t < 150.0);
    }
    ata::apply(&attributes, stats, logical_block_bytes.unwrap_or(512), snapshot);
    snapshot.attributes = attributes;
}

/// What newer smartctl states the same way for every protocol, and what is missing.
struct Common {
    endurance_used_percent: Option<f64>,
    spare_available_percent: Option<f64>,
    spare_threshold_percent: Option<f64>,
    has_nvme_log: bool,
    has_scsi_logs: bool,
}

impl Common {
    /// Endurance used and spare where the protocol's own data gave nothing, why NAND writes are missing, and a
    /// note when there was no health data at all.
    fn apply(&self, protocol: Protocol, snapshot: &mut HealthSnapshot) {
        if let Some(used) = self.endurance_used_percent
            && snapshot.wear_used_percent.is_none()
        {
            snapshot.wear_used_percent = Some(used);
            snapshot.wear_source = "smartctl endurance_used".into();
        }
        if snapshot.available_spare_percent.is_none() {
            snapshot.available_spare_percent = self.spare_available_percent;
            snapshot.available_spare_threshold_percent = self.spare_threshold_percent;
        }
        if snapshot.nand_written_source.is_empty() {
            snapshot.nand_written_source = match protocol {
                Protocol::Nvme => {
                    "not in the NVMe SMART log: NVMe drives report NAND writes in the Endurance \
                                   Group log (09h) or the OCP cloud log (C0h), which smartctl does not read"
                        .into()
                }
                Protocol::Scsi => {
                    "not in the SCSI log pages smartctl reads (SAS drives count NAND writes, if \
                                   at all, in vendor log pages)"
                        .into()
                }
                _ => "not reported by this source".into(),
            };
        }
        if snapshot.attributes.is_empty() && !self.has_nvme_log && !self.has_scsi_logs {
            snapshot.notes.push(
                "no SMART attributes, NVMe health log or SCSI log pages in this output (run smartctl with -x or -a)"
                    .into(),
            );
        }
    }
}

/// The NVMe health log's fields this reader names; every other one is kept in `other_fields`.
const NVME_NAMED: [&str; 10] = [
    "data_units_written",
    "data_units_read",
    "critical_warning",
    "available_spare",
    "available_spare_threshold",
    "percentage_used",
    "media_errors",
    "unsafe_shutdowns",
    "power_on_hours",
    "temperature",
];

/// The NVMe SMART / Health Information log (02h) into the snapshot.
fn nvme_log(log: NvmeHealthLog, snapshot: &mut HealthSnapshot) {
    let bytes = |units: Option<u128>| units.map(|u| u.saturating_mul(NVME_DATA_UNIT_BYTES));
    snapshot.host_written_bytes = bytes(log.data_units_written);
    snapshot.host_read_bytes = bytes(log.data_units_read);
    snapshot.critical_warning = log.critical_warning;
    snapshot.available_spare_percent = log.available_spare_percent;
    snapshot.available_spare_threshold_percent = log.available_spare_threshold_percent;
    if let Some(used) = log.percentage_used {
        snapshot.wear_used_percent = Some(used);
        snapshot.wear_source = "NVMe percentage_used".into();
    }
    snapshot.media_errors = log.media_errors.map(saturate);
    snapshot.unsafe_shutdowns = log.unsafe_shutdowns.map(saturate);
    snapshot.power_on_hours = snapshot.power_on_hours.or(log.power_on_hours.map(saturate));
    if snapshot.temperature_celsius.is_none() {
        snapshot.temperature_celsius = log.temperature_celsius;
    }
    snapshot.other_fields = log.other_fields;
    snapshot.notes.extend(log.approximate);
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
