//! What `ssdlab health` concluded about each drive: the normalized snapshot (one shape for SATA, NVMe and the
//! virtual SSD), the write rates and write amplification over the history window, the remaining-life estimate
//! with its band, and a verdict with reasons.
//!
//! Counters that drives keep in 128-bit fields (NVMe data units) are `u128` here, so a value past 2^53 keeps
//! every digit. In JSON they are numbers up to 2^64 (readers that parse numbers as doubles lose the low digits
//! past 2^53, as they would of smartctl's own output) and decimal strings beyond, which serde can carry through
//! the flattened result. Everything a drive reported but this model does not name is kept (`attributes`,
//! `other_fields`).

use serde::{Deserialize, Serialize};

/// How the drive is attached, as far as its health data shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Ata,
    Nvme,
    Scsi,
    /// ssdlab's virtual SSD (`sim:`), reporting its own counters.
    Virtual,
    Unknown,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ata => "ATA",
            Protocol::Nvme => "NVMe",
            Protocol::Scsi => "SCSI",
            Protocol::Virtual => "virtual",
            Protocol::Unknown => "unknown",
        }
    }
}

/// Which drive a snapshot describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DriveIdentity {
    pub model: String,
    /// The key of the drive's history; empty when the source did not say (nvme-cli's smart-log).
    pub serial: String,
    pub firmware: Option<String>,
    pub capacity_bytes: Option<u64>,
    pub protocol: Protocol,
    /// The device node, file or target the data came from.
    pub source: String,
}

/// One ATA SMART attribute as the drive reported it (every one is kept, known or not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AtaAttribute {
    pub id: u8,
    pub name: String,
    /// Normalized value, worst seen and the failure threshold (vendor scales, usually 100 or 200 = new).
    pub value: u8,
    pub worst: u8,
    pub thresh: u8,
    /// smartctl's "when failed": "" (never), "past" or "now".
    pub when_failed: String,
    /// A pre-failure attribute (its threshold predicts failure) rather than an age/usage one.
    pub prefailure: bool,
    pub raw_value: u64,
    pub raw_string: String,
}

/// A reported value this model has no field for, kept as the source wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NamedValue {
    pub name: String,
    pub value: String,
}

/// One drive at one moment, normalized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthSnapshot {
    /// When the data was read (Unix seconds): smartctl's own time stamp when it has one.
    pub taken_at_s: u64,
    pub identity: DriveIdentity,
    pub power_on_hours: Option<u64>,
    pub temperature_celsius: Option<f64>,
    #[serde(with = "wide", default)]
    #[schemars(with = "Option<wide::Wide>")]
    pub host_written_bytes: Option<u128>,
    #[serde(with = "wide", default)]
    #[schemars(with = "Option<wide::Wide>")]
    pub host_read_bytes: Option<u128>,
    /// Bytes the drive programmed into NAND (host writes plus its own garbage collection, wear leveling and
    /// refresh), where the drive exposes a counter for it.
    #[serde(with = "wide", default)]
    #[schemars(with = "Option<wide::Wide>")]
    pub nand_written_bytes: Option<u128>,
    /// Which counter `nand_written_bytes` came from, or why there is none, in words.
    pub nand_written_source: String,
    /// Rated endurance used, in percent (may exceed 100).
    pub wear_used_percent: Option<f64>,
    /// Which field `wear_used_percent` came from.
    pub wear_source: String,
    /// Mean erase (P/E) cycles per block, where the drive says.
    pub erase_count_mean: Option<f64>,
    pub available_spare_percent: Option<f64>,
    pub available_spare_threshold_percent: Option<f64>,
    /// Uncorrectable media or data-integrity errors.
    pub media_errors: Option<u64>,
    /// Interface CRC errors (a cable or backplane, not the NAND).
    pub crc_errors: Option<u64>,
    /// Blocks or sectors retired and replaced from the spare pool.
    pub reallocated: Option<u64>,
    pub pending_sectors: Option<u64>,
    pub unsafe_shutdowns: Option<u64>,
    /// The drive's own overall assessment (SMART return status, NVMe critical warning clear).
    pub smart_passed: Option<bool>,
    /// NVMe critical warning bits (0 is clear).
    pub critical_warning: Option<u8>,
    /// smartctl's exit status bit mask, when the snapshot came from smartctl.
    pub smartctl_exit_status: Option<u8>,
    #[serde(default)]
    pub attributes: Vec<AtaAttribute>,
    #[serde(default)]
    pub other_fields: Vec<NamedValue>,
    /// What the reader noticed: fields missing, values approximated, the source's own messages.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl HealthSnapshot {
    /// A snapshot of `identity` at `taken_at_s` with no figure read yet: every reading absent, never zero.
    pub fn unread(identity: DriveIdentity, taken_at_s: u64) -> Self {
        HealthSnapshot {
            taken_at_s,
            identity,
            power_on_hours: None,
            temperature_celsius: None,
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
            smart_passed: None,
            critical_warning: None,
            smartctl_exit_status: None,
            attributes: vec![],
            other_fields: vec![],
            notes: vec![],
        }
    }
}

/// The drive's rated endurance, and where the rating came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnduranceRating {
    /// Terabytes written the warranty covers, in bytes.
    pub tbw_bytes: Option<u64>,
    pub warranty_years: Option<f64>,
    /// Drive writes per day over the warranty, when a TBW and a capacity give it (or it was given).
    pub dwpd: Option<f64>,
    /// Rated program/erase cycles of its NAND.
    pub pe_cycles: Option<u32>,
    /// "--rated-tbw", "known drive table: ...", "profile ...".
    pub source: String,
}

/// One point of a drive's history, for charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryPoint {
    pub t_s: u64,
    #[serde(with = "wide", default)]
    #[schemars(with = "Option<wide::Wide>")]
    pub host_written_bytes: Option<u128>,
    #[serde(with = "wide", default)]
    #[schemars(with = "Option<wide::Wide>")]
    pub nand_written_bytes: Option<u128>,
    pub wear_used_percent: Option<f64>,
}

/// Rates over the history window (the oldest snapshot inside it to the newest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WriteRates {
    pub from_s: u64,
    pub to_s: u64,
    pub snapshots: u32,
    pub host_written_bytes_per_day: Option<f64>,
    pub nand_written_bytes_per_day: Option<f64>,
    /// NAND bytes over host bytes written inside the window.
    pub write_amplification_ratio: Option<f64>,
}

/// Remaining life from the wear trend: a least-squares line through the window's wear figures, with the
/// 95% confidence interval of its slope giving the band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LifeEstimate {
    /// What was extrapolated ("wear_used_percent", or host writes against the TBW rating).
    pub basis: String,
    pub remaining_days: Option<f64>,
    /// The band: the fastest plausible wear gives the low end; None at the high end means no upper bound
    /// (the slope's interval includes zero).
    pub remaining_days_low: Option<f64>,
    pub remaining_days_high: Option<f64>,
    /// Set when there was not enough to estimate: what is needed.
    pub needs: Option<String>,
}

/// Healthy, worth watching, or failing.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HealthLevel {
    Ok,
    Warn,
    Fail,
    /// Nothing that shows the drive's condition was read (no wear, spare, error or attribute figure, no NVMe
    /// warning): neither healthy nor failing, and never counted as passing.
    Unknown,
}

impl HealthLevel {
    pub fn name(self) -> &'static str {
        match self {
            HealthLevel::Ok => "OK",
            HealthLevel::Warn => "WARN",
            HealthLevel::Fail => "FAIL",
            HealthLevel::Unknown => "UNKNOWN",
        }
    }
}

/// A drive's verdict and every reason behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthVerdict {
    pub level: HealthLevel,
    pub reasons: Vec<String>,
}

/// Everything `health` concluded about one drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DriveHealth {
    pub snapshot: HealthSnapshot,
    /// NAND bytes over host bytes over the drive's whole life.
    pub lifetime_write_amplification_ratio: Option<f64>,
    pub rating: Option<EnduranceRating>,
    /// How much of its rated endurance the drive has used and has left, by the figure that shows the most used
    /// (absent when neither the drive nor a rating gives one; absent in records before issue 48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rated_life: Option<RatedLife>,
    pub rates: Option<WriteRates>,
    pub life: LifeEstimate,
    #[serde(default)]
    pub history: Vec<HistoryPoint>,
    pub verdict: HealthVerdict,
}

/// Rated endurance used and left, and which figure says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RatedLife {
    /// Percent of the rated endurance used (may exceed 100).
    pub used_percent: f64,
    /// Percent left: 100 less what is used, never below 0.
    pub remaining_percent: f64,
    /// The figure it comes from: the drive's own wear indicator, host writes against the TBW rating, or mean erase
    /// count against the rated P/E cycles.
    pub basis: String,
}

/// `ssdlab health`: one entry per drive asked about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthAnalysis {
    pub drives: Vec<DriveHealth>,
    /// The rated wear, in percent, from which a drive warns (`--wear-warn`; absent in records before issue 48,
    /// which warned from 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wear_warn_percent: Option<f64>,
    /// The history directory used, if any.
    pub history_dir: Option<String>,
    /// Drives asked about that could not be read this time (the others are still reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableDrive>,
}

/// A drive whose health could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnreadableDrive {
    /// The device as given (e.g. /dev/sdc).
    pub device: String,
    pub reason: String,
}

/// `Option<u128>` as a JSON number while it fits in 64 bits, and as a decimal string beyond.
mod wide {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// A byte counter as written: a number below 2^64, a decimal string above.
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(untagged)]
    pub enum Wide {
        Number(u64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(value: &Option<u128>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(v) => match u64::try_from(*v) {
                Ok(small) => serializer.serialize_u64(small),
                Err(_) => serializer.serialize_str(&v.to_string()),
            },
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u128>, D::Error> {
        match Option::<Wide>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Wide::Number(n)) => Ok(Some(u128::from(n))),
            Some(Wide::Text(t)) => t.parse().map(Some).map_err(D::Error::custom),
        }
    }
}
