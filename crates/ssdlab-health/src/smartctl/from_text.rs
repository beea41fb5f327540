//! smartctl's text (`smartctl -a`, `-x`, `-A`; ATA, NVMe and SCSI) into [`Printed`], the same shape the JSON
//! reader fills. Text is what people paste into tickets and forums, so this reader takes what it recognises
//! line by line and never needs every section: a bare `-A` table is enough. Lines may carry a carriage return
//! (Windows) and leading blanks (a quote in a forum); labels are matched as smartctl prints them.
//!
//! What each section gives:
//! - the information section: model, serial, firmware, capacity, sector size, local time;
//! - the overall assessment ("SMART overall-health self-assessment test result", "SMART Health Status");
//! - the ATA attribute table, in `-A`'s layout (FLAG, TYPE, UPDATED, WHEN_FAILED columns) or `-x`'s brief one
//!   (FLAGS as letters, a FAIL column), raw values with their suffixes kept in the raw string;
//! - device statistics (`-x`, GP log 0x04): logical sectors written and read, percentage used, power-on hours;
//! - the NVMe SMART/Health Information section, labels mapped to smartctl's JSON names;
//! - the SCSI error counter log (gigabytes processed, uncorrected errors), grown defect list, endurance
//!   indicator, start-stop cycles, power-on time and temperature.

use ssdlab_core::schema::health::{AtaAttribute, NamedValue, Protocol};

use super::printed::{NvmeHealthLog, Printed, ScsiLogs, gigabytes_to_bytes};

/// Reads smartctl's text; the error says why it is not a smartctl output this reader can use.
pub fn read(text: &str) -> Result<Printed, String> {
    let mut reader = Reader::default();
    for line in text.lines() {
        reader.line(line.trim_end_matches('\r'));
    }
    reader.finish()
}

/// Which attribute table layout the header announced.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Table {
    /// `smartctl -A` / `-a`: ID# ATTRIBUTE_NAME FLAG VALUE WORST THRESH TYPE UPDATED WHEN_FAILED RAW_VALUE.
    Long,
    /// `smartctl -x`: ID# ATTRIBUTE_NAME FLAGS VALUE WORST THRESH FAIL RAW_VALUE.
    Brief,
}

#[derive(Default)]
struct Reader {
    printed: Printed,
    table: Option<Table>,
    attributes: Vec<AtaAttribute>,
    nvme: NvmeHealthLog,
    nvme_seen: bool,
    sensors: Vec<String>,
    scsi: ScsiLogs,
    vendor: Option<String>,
    product: Option<String>,
    /// Why smartctl could not read the device, as it printed it.
    failed: Option<String>,
    recognised: bool,
}

impl Reader {
    fn line(&mut self, raw: &str) {
        let line = raw.trim();
        if let Some(table) = self.table {
            if let Some(attribute) = attribute_row(line, table) {
                self.attributes.push(attribute);
                return;
            }
            self.table = None;
        }
        if line.starts_with("ID#") && line.contains("ATTRIBUTE_NAME") {
            self.recognised = true;
            self.printed.protocol.get_or_insert(Protocol::Ata);
            self.table = Some(if line.contains("WHEN_FAILED") {
                Table::Long
            } else {
                Table::Brief
            });
            return;
        }
        if line.starts_with("Smartctl open device:") && line.contains("failed") {
            self.failed = Some(line.to_string());
            return;
        }
        if line.starts_with("smartctl ") && line.contains("[") {
            self.recognised = true;
            return;
        }
        if self.statistic_row(line) || self.scsi_counter_row(line) {
            return;
        }
        if let Some((label, value)) = labelled(line) {
            self.labelled(label, value);
        }
    }

    /// A device statistics row: `0x01  0x018  6   64777770148  ---  Logical Sectors Written`. smartctl 6 printed
    /// no flags column, and prints `-` for a value the drive marks invalid.
    fn statistic_row(&mut self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        let is_hex = |w: &str, len: usize| {
            w.len() == len + 2 && w.starts_with("0x") && w[2..].bytes().all(|b| b.is_ascii_hexdigit())
        };
        if words.len() < 5 || !is_hex(words[0], 2) || !is_hex(words[1], 3) {
            return false;
        }
        self.recognised = true;
        let Ok(value) = words[3].trim_start_matches('~').parse::<u64>() else {
            return true;
        };
        let is_flags = |w: &str| w.len() == 3 && w.bytes().all(|b| matches!(b, b'-' | b'N' | b'D' | b'C'));
        let description = if is_flags(words[4]) {
            &words[5..]
        } else {
            &words[4..]
        };
        self.printed
            .device_statistics
            .record(&description.join(" "), value);
        true
    }

    /// A row of the SCSI error counter log: `read:  0 0 0 0 0  54493.146  0` (ECC fast, delayed, rereads, total
    /// corrected, algorithm invocations, gigabytes processed, total uncorrected).
    fn scsi_counter_row(&mut self, line: &str) -> bool {
        let Some((direction, rest)) = line.split_once(':') else {
            return false;
        };
        if !matches!(direction, "read" | "write" | "verify") {
            return false;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.len() != 7 {
            return false;
        }
        self.recognised = true;
        self.printed.protocol = Some(Protocol::Scsi);
        let bytes = gigabytes_to_bytes(words[5]);
        match direction {
            "read" => self.scsi.read_bytes = bytes,
            "write" => self.scsi.written_bytes = bytes,
            _ => {}
        }
        if let Ok(uncorrected) = words[6].parse::<u64>() {
            *self.scsi.uncorrected_errors.get_or_insert(0) += uncorrected;
        }
        true
    }

    fn labelled(&mut self, label: &str, value: &str) {
        let p = &mut self.printed;
        let text = || Some(value.to_string());
        match label {
            "Device Model" => {
                p.model = text();
                p.protocol.get_or_insert(Protocol::Ata);
            }
            "Model Number" => {
                p.model = text();
                p.protocol.get_or_insert(Protocol::Nvme);
            }
            "Serial Number" | "Serial number" => p.serial = text(),
            "Firmware Version" | "Revision" => p.firmware = text(),
            "Vendor" => self.vendor = text(),
            "Product" => self.product = text(),
            "User Capacity" | "Total NVM Capacity" => p.capacity_bytes = first_number(value),
            "Sector Size" | "Sector Sizes" | "Logical block size" => {
                p.logical_block_bytes = first_number(value);
            }
            "Namespace 1 Formatted LBA Size" => p.logical_block_bytes = first_number(value),
            "Local Time is" => match super::local_time::parse(value) {
                Ok(t) => p.local_time_s = Some(t),
                Err(why) => p.local_time_unread = Some(why),
            },
            "SMART overall-health self-assessment test result" => {
                p.smart_passed = Some(value.starts_with("PASSED"));
            }
            "SMART Health Status" => {
                p.protocol = Some(Protocol::Scsi);
                p.smart_passed = Some(value == "OK");
            }
            "Transport protocol" => {
                p.protocol = Some(Protocol::Scsi);
            }
            "Current Temperature" | "Current Drive Temperature" => {
                // SCT status prints 0 or "--" where the drive keeps no temperature there (attribute 194 may).
                p.temperature_celsius = first_number(value)
                    .map(|t| t as f64)
                    .filter(|t| *t > 0.0 && *t < 150.0);
            }
            "Percentage used endurance indicator" => {
                self.scsi.percentage_used = first_number(value).map(|v| v as f64);
            }
            "Elements in grown defect list" => self.scsi.grown_defects = first_number(value),
            "Accumulated start-stop cycles" => self.scsi.start_stop_cycles = first_number(value),
            _ if label.starts_with("Accumulated power on time") => {
                // "Accumulated power on time, hours:minutes 8798:22 [527902 minutes]": the label holds a colon
                // of its own.
                p.power_on_hours = value
                    .split_whitespace()
                    .next()
                    .and_then(|hm| hm.split(':').next())
                    .and_then(|h| h.parse().ok());
            }
            _ => {
                if !self.nvme_field(label, value) {
                    return;
                }
            }
        }
        self.recognised = true;
    }

    /// A field of the NVMe SMART/Health Information section; false when the label is not one.
    fn nvme_field(&mut self, label: &str, value: &str) -> bool {
        let log = &mut self.nvme;
        let count = || number(value);
        match label {
            "Critical Warning" => {
                log.critical_warning = value
                    .strip_prefix("0x")
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
            }
            "Temperature" => log.temperature_celsius = first_number(value).map(|t| t as f64),
            "Available Spare" => log.available_spare_percent = first_number(value).map(|v| v as f64),
            "Available Spare Threshold" => {
                log.available_spare_threshold_percent = first_number(value).map(|v| v as f64);
            }
            "Percentage Used" => log.percentage_used = first_number(value).map(|v| v as f64),
            "Data Units Read" => log.data_units_read = count(),
            "Data Units Written" => log.data_units_written = count(),
            "Media and Data Integrity Errors" => log.media_errors = count(),
            "Unsafe Shutdowns" => log.unsafe_shutdowns = count(),
            "Power On Hours" => log.power_on_hours = count(),
            _ if label.starts_with("Temperature Sensor ") => {
                if let Some(t) = first_number(value) {
                    self.sensors.push(t.to_string());
                }
            }
            _ => {
                let Some(name) = NVME_OTHER.iter().find(|(l, _)| *l == label).map(|(_, n)| *n) else {
                    return false;
                };
                if let Some(v) = count() {
                    log.other_fields.push(NamedValue {
                        name: name.into(),
                        value: v.to_string(),
                    });
                }
            }
        }
        self.nvme_seen = true;
        true
    }

    fn finish(mut self) -> Result<Printed, String> {
        if let Some(failed) = self.failed {
            return Err(format!(
                "smartctl could not read the device ({failed}): there is no data in this output"
            ));
        }
        if !self.recognised {
            return Err("not smartctl's output: no information section, SMART attribute table, NVMe health \
                        section or SCSI log in it; give the text of smartctl -x (or -a), or smartctl --json -x"
                .into());
        }
        if !self.attributes.is_empty() {
            self.printed.ata_attributes = Some(self.attributes);
        }
        if self.nvme_seen {
            if !self.sensors.is_empty() {
                self.nvme.other_fields.push(NamedValue {
                    name: "temperature_sensors".into(),
                    value: format!("[{}]", self.sensors.join(",")),
                });
            }
            self.printed.protocol = Some(Protocol::Nvme);
            self.printed.nvme = Some(self.nvme);
        }
        if self.scsi != ScsiLogs::default() {
            self.printed.protocol = Some(Protocol::Scsi);
            self.printed.scsi = Some(self.scsi);
        }
        if self.printed.model.is_none() {
            // smartctl's JSON names a SCSI drive "VENDOR PRODUCT" (scsi_model_name): the same here.
            let model = [self.vendor, self.product]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>();
            if !model.is_empty() {
                self.printed.model = Some(model.join(" "));
            }
        }
        Ok(self.printed)
    }
}

/// NVMe health labels this reader keeps as they are, by smartctl's JSON name.
const NVME_OTHER: [(&str, &str); 7] = [
    ("Host Read Commands", "host_reads"),
    ("Host Write Commands", "host_writes"),
    ("Controller Busy Time", "controller_busy_time"),
    ("Power Cycles", "power_cycles"),
    ("Error Information Log Entries", "num_err_log_entries"),
    ("Warning  Comp. Temperature Time", "warning_temp_time"),
    ("Critical Comp. Temperature Time", "critical_comp_time"),
];

/// `Label:   value` as smartctl aligns it; None for a line without a label.
fn labelled(line: &str) -> Option<(&str, &str)> {
    if let Some(rest) = line.strip_prefix("Accumulated power on time, hours:minutes") {
        return Some(("Accumulated power on time", rest.trim()));
    }
    let (label, value) = line.split_once(':')?;
    let label = label.trim_end();
    (!label.is_empty() && label.len() <= 60).then(|| (label, value.trim()))
}

/// A whole number with its digits grouped as the locale groups them ("1,234,567 [632 GB]", "240 057 409 536
/// bytes", "500.107.862.016 bytes"), up to the first character that is neither a digit nor a group separator;
/// None when there is no digit or it passes 128 bits. Only for fields smartctl prints as whole numbers.
fn number(value: &str) -> Option<u128> {
    let digits: String = value
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | ' ' | '\'' | '\u{a0}' | '\u{202f}'))
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// [`number`] for fields that fit 64 bits ("35 Celsius", "100%", "512 bytes logical/physical").
fn first_number(value: &str) -> Option<u64> {
    number(value).and_then(|n| u64::try_from(n).ok())
}

/// One row of the attribute table in the layout its header announced; None when the line is not a row (the
/// table has ended).
fn attribute_row(line: &str, table: Table) -> Option<AtaAttribute> {
    let words = words_at(line);
    let fixed = if table == Table::Long { 9 } else { 7 };
    if words.len() < fixed + 1 {
        return None;
    }
    let id: u8 = words[0].1.parse().ok()?;
    let small = |w: &str| w.parse::<u16>().ok().map(|v| v.min(255) as u8).unwrap_or(0);
    let (when_failed, prefailure) = match table {
        Table::Long => (words[8].1, words[6].1 == "Pre-fail"),
        Table::Brief => (words[6].1, words[2].1.starts_with('P')),
    };
    let raw_string = line[words[fixed].0..].trim().to_string();
    Some(AtaAttribute {
        id,
        name: words[1].1.to_string(),
        value: small(words[3].1),
        worst: small(words[4].1),
        thresh: small(words[5].1),
        when_failed: match when_failed {
            "FAILING_NOW" | "NOW" => "now",
            "In_the_past" | "Past" | "past" => "past",
            _ => "",
        }
        .into(),
        prefailure,
        raw_value: raw_value(&raw_string),
        raw_string,
    })
}

/// The number a raw string starts with: hexadecimal after `0x`, else its leading decimal digits.
fn raw_value(raw: &str) -> u64 {
    if let Some(hex) = raw.strip_prefix("0x") {
        let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
        return u64::from_str_radix(&digits, 16).unwrap_or(0);
    }
    let digits: String = raw.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(0)
}

/// The words of a line with the byte offset each starts at.
fn words_at(line: &str) -> Vec<(usize, &str)> {
    let mut words = vec![];
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                words.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &line[s..]));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: &str = "\
smartctl 7.3 2022-02-28 r5338 [x86_64-linux-6.1.0] (local build)
=== START OF INFORMATION SECTION ===
Device Model:     Samsung SSD 850 EVO M.2 250GB\r
Serial Number:    S24BNXAG000000X\r
Firmware Version: EMT21B6Q\r
User Capacity:    250,059,350,016 bytes [250 GB]
Sector Size:      512 bytes logical/physical
Local Time is:    Tue Mar  5 10:00:00 2024 UTC
SMART overall-health self-assessment test result: PASSED

ID# ATTRIBUTE_NAME          FLAG     VALUE WORST THRESH TYPE      UPDATED  WHEN_FAILED RAW_VALUE
  5 Reallocated_Sector_Ct   0x0033   100   100   010    Pre-fail  Always       -       0
  9 Power_On_Hours          0x0032   095   095   000    Old_age   Always       -       21213
194 Temperature_Celsius     0x0022   069   049   000    Old_age   Always       -       31 (Min/Max 19/51)
241 Total_LBAs_Written      0x0032   099   099   000    Old_age   Always       -       171369465656
";

    #[test]
    fn the_long_table_and_the_information_section() {
        let p = read(LONG).unwrap();
        assert_eq!(p.model.as_deref(), Some("Samsung SSD 850 EVO M.2 250GB"));
        assert_eq!(p.serial.as_deref(), Some("S24BNXAG000000X"), "the CR is gone");
        assert_eq!(p.capacity_bytes, Some(250_059_350_016));
        assert_eq!(p.logical_block_bytes, Some(512));
        assert_eq!(p.smart_passed, Some(true));
        assert_eq!(p.local_time_s, Some(1_709_632_800));
        let a = p.ata_attributes.unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!((a[0].id, a[0].prefailure, a[0].thresh), (5, true, 10));
        assert_eq!(a[2].raw_string, "31 (Min/Max 19/51)");
        assert_eq!(a[2].raw_value, 31);
        assert_eq!(a[3].raw_value, 171_369_465_656);
    }

    #[test]
    fn the_brief_table_with_failures_and_statistics() {
        let text = "\
ID# ATTRIBUTE_NAME          FLAGS    VALUE WORST THRESH FAIL RAW_VALUE
  5 Reallocated_Sector_Ct   PO--CK   001   001   010    NOW  2048
187 Reported_Uncorrect      -O--CK   090   090   000    -    10
196 Reallocated_Event_Count -O--CK   100   100   000    Past 3
                            ||||||_ K auto-keep

Device Statistics (GP Log 0x04)
Page  Offset Size        Value Flags Description
0x01  =====  =               =  ===  == General Statistics (rev 1) ==
0x01  0x010  4           21213  ---  Power-on Hours
0x01  0x018  6     64777770148  ---  Logical Sectors Written
0x01  0x028  6               -  ---  Logical Sectors Read
0x07  0x008  1              19  N--  Percentage Used Endurance Indicator
";
        let p = read(text).unwrap();
        let a = p.ata_attributes.unwrap();
        assert_eq!(a.len(), 3, "the flag legend ends the table");
        assert_eq!((a[0].when_failed.as_str(), a[0].prefailure), ("now", true));
        assert_eq!((a[2].when_failed.as_str(), a[2].prefailure), ("past", false));
        let s = p.device_statistics;
        assert_eq!(s.logical_sectors_written, Some(64_777_770_148));
        assert_eq!(s.logical_sectors_read, None, "an invalid value is absent");
        assert_eq!((s.percentage_used, s.power_on_hours), (Some(19), Some(21213)));
    }

    #[test]
    fn nvme_and_scsi_sections() {
        let nvme = "\
Model Number:                       Samsung SSD 970 EVO Plus 250GB
SMART/Health Information (NVMe Log 0x02)
Critical Warning:                   0x04
Temperature:                        35 Celsius
Percentage Used:                    3%
Data Units Written:                 29,311,488 [15.0 TB]
Warning  Comp. Temperature Time:    5
Temperature Sensor 1:               35 Celsius
Temperature Sensor 2:               41 Celsius
";
        let p = read(nvme).unwrap();
        assert_eq!(p.protocol, Some(Protocol::Nvme));
        let log = p.nvme.unwrap();
        assert_eq!(log.critical_warning, Some(4));
        assert_eq!(log.data_units_written, Some(29_311_488));
        assert_eq!(log.percentage_used, Some(3.0));
        let names: Vec<_> = log
            .other_fields
            .iter()
            .map(|f| (f.name.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            names,
            [("warning_temp_time", "5"), ("temperature_sensors", "[35,41]")]
        );

        let scsi = "\
Vendor:               HGST
Product:              HUSMR1680ASS200
Revision:             A20C
SMART Health Status: OK
Percentage used endurance indicator: 1%
Accumulated power on time, hours:minutes 8798:22
Elements in grown defect list: 2
read:          0        0         0         0          0      54493.146           1
write:         0        0         0         0          0      32264.489           0
verify:        0        0         0         0          0          0.000           0
";
        let p = read(scsi).unwrap();
        assert_eq!(p.model.as_deref(), Some("HGST HUSMR1680ASS200"));
        assert_eq!((p.protocol, p.power_on_hours), (Some(Protocol::Scsi), Some(8798)));
        let logs = p.scsi.unwrap();
        assert_eq!(logs.written_bytes, Some(32_264_489_000_000));
        assert_eq!(logs.read_bytes, Some(54_493_146_000_000));
        assert_eq!((logs.uncorrected_errors, logs.grown_defects), (Some(1), Some(2)));
        assert_eq!(logs.percentage_used, Some(1.0));
    }

    #[test]
    fn what_is_not_smartctl_output_or_has_no_data_is_refused() {
        assert!(
            read("hello\nworld\n")
                .unwrap_err()
                .contains("not smartctl's output")
        );
        let failed = "smartctl 7.3 2022-02-28 r5338 [x86_64-linux] (local build)\n\
                      Smartctl open device: /dev/sdz failed: No such device\n";
        assert!(read(failed).unwrap_err().contains("could not read the device"));
    }
}
