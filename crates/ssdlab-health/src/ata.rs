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

    host_counters(attributes, stats, (lbs, &lbs_name), snapshot);
    nand_writes(attributes, snapshot);
    wear(attributes, stats, snapshot);
    errors(attributes, stats, snapshot);
}

/// Units a counter named for LBAs (`Total_LBAs_Written`, smartctl's default name for 241) may really count in:
/// OEM firmware keeps the default names over other units (a Dell-branded Intel S3520 and a LiteOn CV1 count
/// 32 MiB there, a WD SA500 GiB). LBAs are tried first.
const LBA_NAMED_UNITS: [(u128, &str); 3] = [(MIB32, "32 MiB"), (GIB, "1 GiB"), (1 << 20, "1 MiB")];

/// Device statistics are 48-bit fields, but some firmware keeps them in 32 bits: the figure wraps at 2^32 sectors
/// (2 TiB of 512-byte sectors).
const STATISTIC_WRAP_SECTORS: u128 = 1 << 32;

/// A figure another counter gives for the same traffic, to prove an LBA-named counter's unit against.
struct Reference {
    bytes: u128,
    source: String,
    /// A device statistic, which may have wrapped at 2^32 sectors.
    sectors: Option<u128>,
}

/// How an LBA-named counter of `raw` in `unit` compares with a reference.
#[derive(PartialEq)]
enum Agreement {
    Same,
    /// The statistic is this figure wrapped at 2^32 sectors.
    StatisticWrapped,
    Differs,
}

fn agreement(raw: u128, unit: u128, lbs: u128, reference: &Reference) -> Agreement {
    // Within 2%, or within one unit of a coarse counter.
    let close = |a: u128, b: u128, slack: u128| a.abs_diff(b) <= (b / 50).max(slack);
    let bytes = raw * unit;
    if close(bytes, reference.bytes, unit) {
        return Agreement::Same;
    }
    match reference.sectors {
        Some(sectors) if lbs > 0 && bytes / lbs >= STATISTIC_WRAP_SECTORS => {
            let wrapped = (bytes / lbs) % STATISTIC_WRAP_SECTORS;
            if close(wrapped, sectors, (unit / lbs).max(1)) {
                Agreement::StatisticWrapped
            } else {
                Agreement::Differs
            }
        }
        _ => Agreement::Differs,
    }
}

/// The unit of the LBA-named pair (241/242), and which side a second counter disputes.
struct PairUnit {
    unit: u128,
    name: String,
    /// The write side (0) and the read side (1) disagree with their second counter in the pair's unit: neither
    /// figure of that side is used.
    disputed: [bool; 2],
}

/// Finds the unit the LBA-named pair counts in. A unit is proved when one side agrees with its second counter in
/// it (the same figure within 2% or one unit); a statistic wrapped at 2^32 sectors is accepted on a side only in
/// the unit the other side proved, or in LBAs, the reading without a proof (elsewhere a wrap would match by
/// coincidence one time in fifty). A side that disagrees with its second counter in the proved unit, or in every
/// unit, is disputed. LBAs, unproved, when no side has a second counter.
fn pair_unit(
    pair: [Option<&AtaAttribute>; 2],
    references: [Option<&Reference>; 2],
    (lbs, lbs_name): (u128, &str),
    notes: &mut Vec<String>,
) -> PairUnit {
    let checked: Vec<(usize, &AtaAttribute, &Reference)> = (0..2)
        .filter_map(|side| Some((side, pair[side]?, references[side]?)))
        .collect();
    let units = std::iter::once((lbs, lbs_name)).chain(LBA_NAMED_UNITS.iter().map(|&(u, n)| (u, n)));
    for (unit, unit_name) in units {
        let agreements: Vec<Agreement> = checked
            .iter()
            .map(|(_, a, r)| agreement(u128::from(a.raw_value), unit, lbs, r))
            .collect();
        let proof = checked
            .iter()
            .zip(&agreements)
            .find(|(_, g)| **g == Agreement::Same || (unit == lbs && **g == Agreement::StatisticWrapped));
        let Some(((_, proof, reference), _)) = proof else {
            continue;
        };
        if unit != lbs {
            notes.push(format!(
                "attributes {} count {unit_name} units, not {lbs_name} sectors: attribute {} {} (raw {}) agrees \
                 with {} only in that unit",
                pair.iter()
                    .flatten()
                    .map(|a| format!("{} {}", a.id, a.name))
                    .collect::<Vec<_>>()
                    .join(" and "),
                proof.id,
                proof.name,
                proof.raw_value,
                reference.source
            ));
        }
        let mut disputed = [false; 2];
        for ((side, a, r), g) in checked.iter().zip(&agreements) {
            match g {
                Agreement::Same => {}
                Agreement::StatisticWrapped => notes.push(format!(
                    "{} wrapped at 2^32 sectors (the firmware keeps it in 32 bits): attribute {} {} is used",
                    r.source, a.id, a.name
                )),
                Agreement::Differs => {
                    disputed[*side] = true;
                    notes.push(format!(
                        "attribute {} {} (raw {}) and {} disagree in {unit_name} units, the unit its pair proved: \
                         neither is used",
                        a.id, a.name, a.raw_value, r.source
                    ));
                }
            }
        }
        return PairUnit {
            unit,
            name: unit_name.to_string(),
            disputed,
        };
    }
    let mut disputed = [false; 2];
    for (side, a, r) in &checked {
        disputed[*side] = true;
        notes.push(format!(
            "attribute {} {} (raw {}) and {} agree in no unit: neither is used",
            a.id, a.name, a.raw_value, r.source
        ));
    }
    PairUnit {
        unit: lbs,
        name: lbs_name.to_string(),
        disputed,
    }
}

/// Host writes and reads. A counter whose name carries its unit (`Host_Writes_32MiB`, `*_GiB`) or the standard
/// device statistics is taken as it says. A pair named for LBAs (241/242) is checked against such a one where the
/// drive has both: the unit that makes either side agree is the unit both count in, proved. Without a second
/// counter the LBA reading stands unproved, for the plausibility check to judge.
fn host_counters(
    attributes: &[AtaAttribute],
    stats: &DeviceStatistics,
    (lbs, lbs_name): (u128, &str),
    snapshot: &mut HealthSnapshot,
) {
    let named = |names32: &str, names_gib: &[&str]| {
        if let Some(a) = find(attributes, &[names32]) {
            Some(scaled(a, MIB32, "32 MiB"))
        } else {
            find(attributes, names_gib).map(|a| scaled(a, GIB, "1 GiB"))
        }
    };
    let named_write = named(
        "Host_Writes_32MiB",
        &["Lifetime_Writes_GiB", "Total_Writes_GiB", "Host_Writes_GiB"],
    );
    let named_read = named(
        "Host_Reads_32MiB",
        &["Lifetime_Reads_GiB", "Total_Reads_GiB", "Host_Reads_GiB"],
    );
    let statistic = |sectors: Option<u64>, what: &str| {
        sectors.map(|s| Reference {
            bytes: u128::from(s) * lbs,
            source: format!("device statistics {what} x {lbs_name}"),
            sectors: Some(u128::from(s)),
        })
    };
    let of_named = |(bytes, source): &(u128, String)| Reference {
        bytes: *bytes,
        source: source.clone(),
        sectors: None,
    };
    let write_reference = named_write
        .as_ref()
        .map(of_named)
        .or_else(|| statistic(stats.logical_sectors_written, "Logical Sectors Written"));
    let read_reference = named_read
        .as_ref()
        .map(of_named)
        .or_else(|| statistic(stats.logical_sectors_read, "Logical Sectors Read"));
    // 241 and 242 first: some firmware repeats the name on another attribute (a Dell S3520's 233).
    let by_id_then_name = |id: u8, names: &[&str]| {
        let named = |a: &&AtaAttribute| names.iter().any(|n| a.name.eq_ignore_ascii_case(n));
        attributes
            .iter()
            .filter(named)
            .find(|a| a.id == id)
            .or_else(|| find(attributes, names))
    };
    let lba_write = by_id_then_name(241, &["Total_LBAs_Written", "Host_Writes_LBAs"]);
    let lba_read = by_id_then_name(242, &["Total_LBAs_Read", "Host_Reads_LBAs"]);
    let unit = pair_unit(
        [lba_write, lba_read],
        [write_reference.as_ref(), read_reference.as_ref()],
        (lbs, lbs_name),
        &mut snapshot.notes,
    );

    // A counter whose name states its unit stands; else the pair in its unit; else the statistic. A side the pair
    // and its statistic dispute gives nothing.
    let side = |named: Option<(u128, String)>,
                attribute: Option<&AtaAttribute>,
                reference: Option<Reference>,
                disputed: bool| {
        named.or_else(|| match (attribute, disputed) {
            (Some(_), true) => None,
            (Some(a), false) => Some(scaled(a, unit.unit, &unit.name)),
            (None, _) => reference.map(|r| (r.bytes, r.source)),
        })
    };
    let host_written = side(named_write, lba_write, write_reference, unit.disputed[0]);
    if let Some((bytes, source)) = host_written {
        snapshot.host_written_bytes = Some(bytes);
        snapshot.notes.push(format!("host writes from {source}"));
    }
    snapshot.host_read_bytes =
        side(named_read, lba_read, read_reference, unit.disputed[1]).map(|(bytes, _)| bytes);
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
    // reads 0 there while its 167 counts 21, an Apacer 66,135), then Phison's "MAX (Average AVG)" string.
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
    } else if let Some(a) = find(attributes, &["Wear_Leveling_Count"]).filter(|a| {
        // "Wear_Leveling_Count" is smartctl's default name for 177 on every SSD its database does not know, so its
        // raw value is an erase count only where the database says so: Samsung's 177, Micron's 173.
        (a.id == 177
            && snapshot
                .identity
                .model
                .to_ascii_lowercase()
                .starts_with("samsung"))
            || a.id == 173
    }) {
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

/// The attributes whose raw counts predict failure on drives of every kind (Backblaze's, and smartmontools'
/// own advice), read by ID under any of the names the drive database gives the same count (Intel's S3520 names
/// 197 `Pending_Sector_Count`, Samsung 187 `Uncorrectable_Error_Cnt`), with what each counts. A few families use
/// these IDs for other counters (Indilinx's 198 `Read_Sectors_Tot_Ct`, Virtium's 198 `RAID_Recovery_Cnt`): an
/// attribute whose name holds none of its ID's words is not read as the critical counter.
pub const CRITICAL_COUNTERS: [(u8, &[&str], &str); 6] = [
    (
        5,
        &["realloc", "retired", "bad_b"],
        "sectors or blocks reallocated",
    ),
    (
        187,
        &["uncorrect", "_ue_"],
        "uncorrectable errors reported to the host",
    ),
    (188, &["timeout"], "commands that timed out"),
    (196, &["realloc"], "reallocation events"),
    (197, &["pending"], "sectors pending reallocation"),
    (198, &["uncorrect"], "sectors found uncorrectable offline"),
];

/// Whether `a` is one of the critical counters, under a name that means it.
pub fn is_critical(a: &AtaAttribute) -> bool {
    let name = a.name.to_ascii_lowercase();
    CRITICAL_COUNTERS
        .iter()
        .any(|(id, words, _)| *id == a.id && words.iter().any(|w| name.contains(w)))
}

/// The critical counter with this ID, if the drive reports it under a name that means it.
pub fn critical(attributes: &[AtaAttribute], id: u8) -> Option<&AtaAttribute> {
    attributes.iter().find(|a| a.id == id && is_critical(a))
}

fn errors(attributes: &[AtaAttribute], stats: &DeviceStatistics, snapshot: &mut HealthSnapshot) {
    let raw = |names: &[&str]| find(attributes, names).map(count_of);
    let id = |id: u8| critical(attributes, id).map(count_of);
    snapshot.reallocated = id(5).or_else(|| {
        raw(&[
            "Retired_Block_Count",
            "Reallocate_NAND_Blk_Cnt",
            "Runtime_Bad_Block",
        ])
    });
    snapshot.pending_sectors = id(197).or_else(|| raw(&["Current_Pending_ECC_Cnt"]));
    snapshot.media_errors = id(187)
        .or_else(|| raw(&["Reported_UE_Counts", "Uncorrectable_Error_Cnt"]))
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
