//! What one smartctl output says, typed: the one shape its JSON reader and its text reader both fill, so that a
//! drive read either way becomes the same snapshot. Nothing here interprets a figure (units, plausibility,
//! verdicts are the snapshot builder's and later modules'); a field is None when the output does not print it.

use ssdlab_core::schema::health::{AtaAttribute, NamedValue, Protocol};

use crate::ata::DeviceStatistics;

/// One smartctl output, whichever form it came in.
#[derive(Debug, Default)]
pub struct Printed {
    /// smartctl's exit status (JSON only: a saved text output does not carry it).
    pub exit_status: Option<u8>,
    /// smartctl's own messages (errors and warnings it printed about the device).
    pub messages: Vec<String>,
    /// When smartctl read the drive, in Unix seconds, where the output says in a form that converts.
    pub local_time_s: Option<u64>,
    /// Why a printed local time was not used (a time zone that does not convert), for a note.
    pub local_time_unread: Option<String>,
    pub protocol: Option<Protocol>,
    pub device_name: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    pub capacity_bytes: Option<u64>,
    pub logical_block_bytes: Option<u64>,
    pub power_on_hours: Option<u64>,
    pub temperature_celsius: Option<f64>,
    /// The drive's own overall assessment: SMART overall-health PASSED, SCSI health status OK.
    pub smart_passed: Option<bool>,
    /// The ATA attribute table, when the output holds one.
    pub ata_attributes: Option<Vec<AtaAttribute>>,
    pub device_statistics: DeviceStatistics,
    pub nvme: Option<NvmeHealthLog>,
    pub scsi: Option<ScsiLogs>,
    /// Newer smartctl's protocol-independent `endurance_used` and `spare_available` (JSON only).
    pub endurance_used_percent: Option<f64>,
    pub spare_available_percent: Option<f64>,
    pub spare_threshold_percent: Option<f64>,
}

/// The NVMe SMART / Health Information log (02h).
#[derive(Debug, Default)]
pub struct NvmeHealthLog {
    pub critical_warning: Option<u8>,
    pub temperature_celsius: Option<f64>,
    pub available_spare_percent: Option<f64>,
    pub available_spare_threshold_percent: Option<f64>,
    pub percentage_used: Option<f64>,
    /// Data units of 1000 x 512 bytes.
    pub data_units_read: Option<u128>,
    pub data_units_written: Option<u128>,
    pub media_errors: Option<u128>,
    pub unsafe_shutdowns: Option<u128>,
    pub power_on_hours: Option<u128>,
    /// Every other field, by smartctl's JSON name (the text reader maps its labels to them).
    pub other_fields: Vec<NamedValue>,
    /// Counters read only approximately (past 2^64 with no exact form), in words.
    pub approximate: Vec<String>,
}

/// What a SCSI (SAS) drive's log pages say about its health.
#[derive(Debug, Default, PartialEq)]
pub struct ScsiLogs {
    /// The error counter log's "Gigabytes processed [10^9 bytes]", write and read, in bytes.
    pub written_bytes: Option<u128>,
    pub read_bytes: Option<u128>,
    /// Total uncorrected errors over read, write and verify.
    pub uncorrected_errors: Option<u64>,
    /// Elements in the grown defect list: blocks the drive retired since it left the factory.
    pub grown_defects: Option<u64>,
    /// The Solid State Media log page's percentage used endurance indicator.
    pub percentage_used: Option<f64>,
    pub start_stop_cycles: Option<u64>,
}

/// A decimal count of 10^9 bytes as smartctl prints it (`%.3f`: "54493.146"; "54493,146" where the locale's
/// decimal mark is a comma, since smartctl prints no thousands separator there), in bytes exactly.
pub fn gigabytes_to_bytes(text: &str) -> Option<u128> {
    let text = text.trim().replace(',', ".");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u128 = whole.parse().ok()?;
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<u128>().ok()? * 10u128.pow(9 - fraction.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::gigabytes_to_bytes;

    #[test]
    fn gigabytes_processed_are_read_exactly() {
        assert_eq!(gigabytes_to_bytes("54493.146"), Some(54_493_146_000_000));
        assert_eq!(gigabytes_to_bytes("0.000"), Some(0));
        assert_eq!(gigabytes_to_bytes("12"), Some(12_000_000_000));
        assert_eq!(
            gigabytes_to_bytes("11472,811"),
            Some(11_472_811_000_000),
            "a decimal comma"
        );
        assert_eq!(gigabytes_to_bytes("1,234.5"), None);
        assert_eq!(gigabytes_to_bytes("-1"), None);
        assert_eq!(gigabytes_to_bytes("abc"), None);
    }
}
