//! The ATA attributes this model names, by vendor: host writes and reads, NAND writes, wear, spare and errors.
//!
//! Attribute numbers are not a standard: 233 is Intel's wearout indicator and Kingston's NAND writes, 246 is
//! Micron's host writes and Kingston's erase total. So every rule matches the attribute's *name* as smartctl's
//! drive database gives it (with the number as a second check where names are generic), never the number
//! alone. An attribute no rule names is still kept in the snapshot and shown.
//!
//! NAND writes (the counter Samsung's Magician did not show), in the order tried:
//!
//! | vendor | attributes | unit |
//! |---|---|---|
//! | Intel (320/330/520/730) | 249 `NAND_Writes_1GiB` | GiB |
//! | Intel DC (S3500/S3700) | 243 `NAND_Writes_32MiB` | 32 MiB |
//! | Kingston/Phison, SanDisk | 233 `Flash_Writes_GiB`, `Total_NAND_Writes_GiB`, `NAND_Writes_GiB` | GiB |
//! | WD Blue/Red SA500 | 233 `NAND_GB_Written_TLC` + 234 `NAND_GB_Written_SLC` | GiB |
//! | Silicon Motion | 245 `TLC_Writes_32MiB` (+ 246 `SLC_Writes_32MiB`) | 32 MiB |
//! | Micron/Crucial | 247 host + 248 FTL (`Bckgnd_`) program pages | host bytes x (247 + 248) / 247 |
//! | Samsung client | none: 177 `Wear_Leveling_Count` x raw NAND gives a coarse estimate, said in words | |
//! | Samsung enterprise SATA | 251 `NAND_Writes`: kept and said, not converted (no published unit) | |

use ssdlab_core::schema::health::{AtaAttribute, HealthSnapshot};

const GIB: u128 = 1 << 30;
const MIB32: u128 = 32 << 20;

/// ATA device statistics (the standard log 04h) that smartctl -x decodes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeviceStatistics {
    pub logical_sectors_written: Option<u64>,
    pub logical_sectors_read: Option<u64>,
    pub percentage_used: Option<u64>,
    pub reported_uncorrectable: Option<u64>,
    pub power_on_hours: Option<u64>,
}

impl DeviceStatistics {
    /// Keeps one statistic by the description smartctl prints for it (the same words in its JSON and its text).
    pub fn record(&mut self, description: &str, value: u64) {
        let slot = match description.trim() {
            "Logical Sectors Written" => &mut self.logical_sectors_written,
            "Logical Sectors Read" => &mut self.logical_sectors_read,
            "Percentage Used Endurance Indicator" => &mut self.percentage_used,
            "Number of Reported Uncorrectable Errors" => &mut self.reported_uncorrectable,
            "Power-on Hours" => &mut self.power_on_hours,
            _ => return,
        };
        *slot = Some(value);
    }
}

/// The count an attribute's raw value holds: the first figure smartctl prints for it. Formats that pack more
/// than one figure into the 48 raw bits print the count first ("8670 (398 2929)", "31 (Min/Max 19/51)",
/// "14551h+12m+05.123s"), while the packed raw number is the count only when nothing else is packed; a hex
/// format is read whole.
pub fn count_of(attribute: &AtaAttribute) -> u64 {
    let text = attribute.raw_string.trim();
    if text.starts_with("0x") {
        return attribute.raw_value;
    }
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    match digits.parse::<u64>() {
        Ok(first) if digits.len() < text.len() => first,
        _ => attribute.raw_value,
    }
}

fn find<'a>(attributes: &'a [AtaAttribute], names: &[&str]) -> Option<&'a AtaAttribute> {
    attributes
        .iter()
        .find(|a| names.iter().any(|n| a.name.eq_ignore_ascii_case(n)))
}

/// A scaled byte count from an attribute's raw value, and words saying where it came from.
fn scaled(attribute: &AtaAttribute, unit: u128, unit_name: &str) -> (u128, String) {
    (
        u128::from(attribute.raw_value) * unit,
        format!("attribute {} {} x {unit_name}", attribute.id, attribute.name),
    )
}

/// Fills the snapshot's normalized fields from the attribute table and the device statistics.
pub fn apply(
    attributes: &[AtaAttribute],
    stats: &DeviceStatistics,
    logical_block_bytes: u64,
    snapshot: &mut HealthSnapshot,
) {
    let lbs = u128::from(logical_block_bytes);
    let lbs_name = format!("{logical_block_bytes} B");

    // Host writes: a vendor attribute, else the standard statistic.
    let host_written = if let Some(a) = find(attributes, &["Host_Writes_32MiB"]) {
        Some(scaled(a, MIB32, "32 MiB"))
    } else if let Some(a) = find(
        attributes,
        &["Lifetime_Writes_GiB", "Total_Writes_GiB", "Host_Writes_GiB"],
    ) {
        Some(scaled(a, GIB, "1 GiB"))
    } else if let Some(a) = find(attributes, &["Total_LBAs_Written", "Host_Writes_LBAs"]) {
        Some(scaled(a, lbs, &lbs_name))
    } else {
        stats.logical_sectors_written.map(|s| {
            (
                u128::from(s) * lbs,
                format!("device statistics Logical Sectors Written x {lbs_name}"),
            )
        })
    };
    let host_source = host_written.as_ref().map(|(_, s)| s.clone());
    snapshot.host_written_bytes = host_written.map(|(b, _)| b);
    if let Some(source) = host_source {
        snapshot.notes.push(format!("host writes from {source}"));
    }

    snapshot.host_read_bytes = if let Some(a) = find(attributes, &["Host_Reads_32MiB"]) {
        Some(scaled(a, MIB32, "").0)
    } else if let Some(a) = find(
        attributes,
        &["Lifetime_Reads_GiB", "Total_Reads_GiB", "Host_Reads_GiB"],
    ) {
        Some(scaled(a, GIB, "").0)
    } else if let Some(a) = find(attributes, &["Total_LBAs_Read", "Host_Reads_LBAs"]) {
        Some(scaled(a, lbs, "").0)
    } else {
        stats.logical_sectors_read.map(|s| u128::from(s) * lbs)
    };

    nand_writes(attributes, snapshot);
    wear(attributes, stats, snapshot);
    errors(attributes, stats, snapshot);
}

fn nand_writes(attributes: &[AtaAttribute], snapshot: &mut HealthSnapshot) {
    let found = if let Some(a) = find(attributes, &["NAND_Writes_1GiB"]) {
        Some(scaled(a, GIB, "1 GiB"))
    } else if let Some(a) = find(attributes, &["NAND_Writes_32MiB"]) {
        Some(scaled(a, MIB32, "32 MiB"))
    } else if let Some(a) = find(
        attributes,
        &["Flash_Writes_GiB", "Total_NAND_Writes_GiB", "NAND_Writes_GiB"],
    ) {
        Some(scaled(a, GIB, "1 GiB"))
    } else if let Some(tlc) = find(attributes, &["TLC_Writes_32MiB"]) {
        // Silicon Motion controllers count what reached TLC and, where they have one, the SLC cache.
        let slc = find(attributes, &["SLC_Writes_32MiB"]);
        let units = u128::from(tlc.raw_value) + slc.map_or(0, |a| u128::from(a.raw_value));
        Some((
            units * MIB32,
            match slc {
                Some(slc) => format!(
                    "attributes {} {} + {} {} x 32 MiB",
                    tlc.id, tlc.name, slc.id, slc.name
                ),
                None => format!("attribute {} {} x 32 MiB", tlc.id, tlc.name),
            },
        ))
    } else if let (Some(tlc), Some(slc)) = (
        find(attributes, &["NAND_GB_Written_TLC"]),
        find(attributes, &["NAND_GB_Written_SLC"]),
    ) {
        Some((
            (u128::from(tlc.raw_value) + u128::from(slc.raw_value)) * GIB,
            format!(
                "attributes {} {} + {} {} x 1 GiB",
                tlc.id, tlc.name, slc.id, slc.name
            ),
        ))
    } else if let (Some(host_pages), Some(ftl_pages), Some(host_bytes)) = (
        find(attributes, &["Host_Program_Page_Count"]),
        find(attributes, &["FTL_Program_Page_Count", "Bckgnd_Program_Page_Cnt"]),
        snapshot.host_written_bytes,
    ) {
        let pages = u128::from(host_pages.raw_value) + u128::from(ftl_pages.raw_value);
        // A product past 2^128 (nonsense raw values) gives no figure rather than a wrapped one.
        let nand = host_bytes
            .checked_mul(pages)
            .and_then(|p| p.checked_div(u128::from(host_pages.raw_value)));
        nand.map(|nand| {
            (
                nand,
                format!(
                    "host writes x (attributes {} {} + {} {}) / {} (program page counts)",
                    host_pages.id, host_pages.name, ftl_pages.id, ftl_pages.name, host_pages.id
                ),
            )
        })
    } else {
        None
    };
    match found {
        Some((bytes, source)) => {
            snapshot.nand_written_bytes = Some(bytes);
            snapshot.nand_written_source = source;
        }
        None => {
            snapshot.nand_written_bytes = None;
            let samsung_client = snapshot.identity.model.starts_with("Samsung SSD");
            snapshot.nand_written_source = if let Some(a) = find(attributes, &["NAND_Writes"]) {
                // Samsung's enterprise SATA drives (PM863, PM883) have one, but no published unit.
                format!(
                    "attribute {} {} (raw {}) counts NAND writes in a unit its vendor does not publish: not \
                     converted to bytes",
                    a.id, a.name, a.raw_value
                )
            } else if let Some(a) = find(attributes, &["Wear_Leveling_Count"]).filter(|_| samsung_client) {
                format!(
                    "not exposed by this drive (no NAND-write attribute; Samsung client drives have none). \
                     Attribute {} {} says blocks were erased {} times on average: times the raw NAND capacity \
                     that is a coarse upper figure, not a counter",
                    a.id, a.name, a.raw_value
                )
            } else {
                "not exposed by this drive (no known NAND-write attribute)".into()
            };
        }
    }
}

fn wear(attributes: &[AtaAttribute], stats: &DeviceStatistics, snapshot: &mut HealthSnapshot) {
    // Mean erase cycles: an attribute that says it is the average first (Micron's 173, Silicon Motion's 167, WD's
    // 173), then Samsung's 177 raw (other controllers use that name for other things: a Silicon Motion drive
    // reads 0 there while its 167 counts 21), then Phison's "MAX (Average AVG)" string.
    if let Some(a) = find(
        attributes,
        &[
            "Ave_Block-Erase_Count",
            "Avg_Block-Erase_Count",
            "Average_Erase_Count",
            "Average_PE_Cycles_TLC",
        ],
    ) {
        snapshot.erase_count_mean = Some(a.raw_value as f64);
    } else if let Some(a) = find(attributes, &["Wear_Leveling_Count"]) {
        snapshot.erase_count_mean = Some(a.raw_value as f64);
    } else if let Some(a) = find(attributes, &["MaxAvgErase_Ct"]) {
        snapshot.erase_count_mean = a
            .raw_string
            .split("Average")
            .nth(1)
            .and_then(|s| s.trim().trim_end_matches(')').trim().parse().ok());
    }

    // Micron/Crucial count the percentage *used* in 202's raw value; Phison keeps 231's normalized value at
    // 100 and counts the life *left* in the raw value; the others normalize from 100 (new) down to 1, so
    // used = 100 - value.
    let from_attribute = if let Some(a) = find(attributes, &["Percent_Lifetime_Remain"]) {
        Some((a.raw_value as f64, format!("attribute {} {} raw", a.id, a.name)))
    } else if let Some(a) =
        find(attributes, &["Remaining_Lifetime_Perc"]).filter(|a| a.value == 100 && a.raw_value <= 100)
    {
        // Silicon Motion keeps the normalized value at 100 and counts the life left in the raw value.
        Some((
            100.0 - a.raw_value as f64,
            format!("attribute {} {} (100 - raw value, the life left)", a.id, a.name),
        ))
    } else if let Some(a) =
        find(attributes, &["SSD_Life_Left"]).filter(|a| a.value == 100 && (1..100).contains(&a.raw_value))
    {
        Some((
            100.0 - a.raw_value as f64,
            format!("attribute {} {} (100 - raw value, the life left)", a.id, a.name),
        ))
    } else {
        find(
            attributes,
            &[
                "Media_Wearout_Indicator",
                "SSD_Life_Left",
                "Wear_Leveling_Count",
                "Remaining_Lifetime_Perc",
                "Percent_Life_Remaining",
            ],
        )
        .map(|a| {
            (
                100.0 - f64::from(a.value.min(100)),
                format!("attribute {} {} (100 - normalized value)", a.id, a.name),
            )
        })
    };
    if let Some(used) = stats.percentage_used {
        snapshot.wear_used_percent = Some(used as f64);
        snapshot.wear_source = "device statistics Percentage Used Endurance Indicator".into();
    } else if let Some((used, source)) = from_attribute {
        snapshot.wear_used_percent = Some(used);
        snapshot.wear_source = source;
    }

    if let Some(a) = find(attributes, &["Available_Reservd_Space"]) {
        snapshot.available_spare_percent = Some(f64::from(a.value));
        snapshot.available_spare_threshold_percent = Some(f64::from(a.thresh));
    }
}

fn errors(attributes: &[AtaAttribute], stats: &DeviceStatistics, snapshot: &mut HealthSnapshot) {
    let raw = |names: &[&str]| find(attributes, names).map(|a| a.raw_value);
    snapshot.reallocated = raw(&[
        "Reallocated_Sector_Ct",
        "Retired_Block_Count",
        "Reallocate_NAND_Blk_Cnt",
        "Runtime_Bad_Block",
    ]);
    snapshot.pending_sectors = raw(&["Current_Pending_Sector", "Current_Pending_ECC_Cnt"]);
    snapshot.media_errors = raw(&[
        "Reported_Uncorrect",
        "Reported_UE_Counts",
        "Uncorrectable_Error_Cnt",
    ])
    .or(stats.reported_uncorrectable);
    snapshot.crc_errors = raw(&[
        "UDMA_CRC_Error_Count",
        "SATA_CRC_Error_Count",
        "CRC_Error_Count",
        "SATA_CRC_Error",
    ]);
    snapshot.unsafe_shutdowns = raw(&[
        "Unexpect_Power_Loss_Ct",
        "Unsafe_Shutdown_Count",
        "Power-Off_Retract_Count",
        "POR_Recovery_Count",
    ]);
}
