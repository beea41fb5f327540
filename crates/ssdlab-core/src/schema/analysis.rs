//! What each kind of result concluded: one type per method, and the [`Analysis`] enum that tags them.
//!
//! `result.json` holds `"kind": K` beside `"analysis": {...}`; [`Analysis`] is exactly that pair, so a result is
//! read back into the variant its kind names and a renamed field is a compile error in every reader, not a NaN
//! in a table. A method that was interrupted before it could measure anything still writes its notes; its
//! figures are then absent ([`MethodAnalysis::measured`] is `None`).
//!
//! Serialization must stay compatible with every file already written: within a schema version fields may be
//! added as optional, never renamed or given a new meaning. A rename (as `ssdlab/2` gave the scans' fields their
//! SI units) bumps the version and adds its step to [`crate::schema::migrate`], so old files still read. Values that can be infinite are stored as `Option` or read
//! back from JSON's `null` (serde_json writes non-finite numbers as `null`).

use serde::{Deserialize, Deserializer, Serialize};

use crate::stats::{mean, percentile};

macro_rules! define_analysis {
    ($( $variant:ident $module:ident $kind:literal $options:ty, $analysis:ty; )*) => {
        /// One result's kind and analysis, tagged as `result.json` writes them: the test methods (from the one
        /// list, [`crate::for_each_method!`]) and the commands that leave a result.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", content = "analysis", rename_all = "kebab-case")]
        pub enum Analysis {
            /// A plain `ssdlab run`: the phases are the result, there is nothing more to conclude.
            Run,
            $( #[serde(rename = $kind)] $variant(MethodAnalysis<$analysis>), )*
            Scan(ScanAnalysis),
            RegionScan(RegionScanAnalysis),
            Health(crate::schema::health::HealthAnalysis),
            Fanout(Box<crate::schema::fanout::FanoutAnalysis>),
            Refresh(crate::schema::refresh::RefreshAnalysis),
            /// `ssdlab erase`: the purge's record.
            Erase(crate::schema::erase::EraseAnalysis),
            /// `ssdlab op`: the spare area, the plan and what applying it did.
            Op(crate::schema::op::OpAnalysis),
            /// `ssdlab serve`: the NBD session.
            Serve(crate::schema::serve::ServeAnalysis),
        }

        impl Analysis {
            /// The kind as `result.json` names it.
            pub fn kind(&self) -> &'static str {
                match self {
                    Analysis::Run => "run",
                    $( Analysis::$variant(_) => $kind, )*
                    Analysis::Scan(_) => "scan",
                    Analysis::RegionScan(_) => "region-scan",
                    Analysis::Health(_) => "health",
                    Analysis::Fanout(_) => "fanout",
                    Analysis::Refresh(_) => "refresh",
                    Analysis::Erase(_) => "erase",
                    Analysis::Op(_) => "op",
                    Analysis::Serve(_) => "serve",
                }
            }

            /// The test method this is a result of, if it is a method's.
            pub fn method(&self) -> Option<crate::schema::MethodKind> {
                match self {
                    $( Analysis::$variant(_) => Some(crate::schema::MethodKind::$variant), )*
                    Analysis::Run
                    | Analysis::Scan(_)
                    | Analysis::RegionScan(_)
                    | Analysis::Health(_)
                    | Analysis::Fanout(_)
                    | Analysis::Refresh(_)
                    | Analysis::Erase(_)
                    | Analysis::Op(_)
                    | Analysis::Serve(_) => None,
                }
            }

            /// What the method noted along the way (fallbacks, I/O failures, purges it could not do).
            pub fn notes(&self) -> &[String] {
                match self {
                    $( Analysis::$variant(m) => &m.notes, )*
                    Analysis::Op(a) => &a.notes,
                    Analysis::Run
                    | Analysis::Scan(_)
                    | Analysis::RegionScan(_)
                    | Analysis::Health(_)
                    | Analysis::Fanout(_)
                    | Analysis::Refresh(_)
                    | Analysis::Erase(_)
                    | Analysis::Serve(_) => &[],
                }
            }

            /// The analysis object alone, as `result.json`'s `analysis` field holds it (`null` for a plain run).
            pub(crate) fn serialize_object<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    Analysis::Run => serializer.serialize_none(),
                    $( Analysis::$variant(a) => a.serialize(serializer), )*
                    Analysis::Scan(a) => a.serialize(serializer),
                    Analysis::RegionScan(a) => a.serialize(serializer),
                    Analysis::Health(a) => a.serialize(serializer),
                    Analysis::Fanout(a) => a.serialize(serializer),
                    Analysis::Refresh(a) => a.serialize(serializer),
                    Analysis::Erase(a) => a.serialize(serializer),
                    Analysis::Op(a) => a.serialize(serializer),
                    Analysis::Serve(a) => a.serialize(serializer),
                }
            }
        }
    };
}

crate::for_each_method!(define_analysis);

/// A device method's analysis: its figures when it got far enough to measure, and its notes either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MethodAnalysis<T> {
    #[serde(flatten)]
    pub measured: Option<T>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// SNIA PTS steady state over a window of rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SniaSteadyState {
    /// Seconds per round (the series is averaged into rounds of this length).
    pub round_s: u32,
    pub rounds: u32,
    /// Whether the last five rounds meet both criteria.
    pub achieved: bool,
    /// The first window of five rounds that met both criteria (0-based index of its first round), if any.
    pub first_window_start_round: Option<u32>,
    /// Figures of the last window (None when the run holds fewer than five rounds).
    pub window_mean: Option<f64>,
    /// (max - min) / mean; the criterion is <= 0.20.
    pub range_excursion: Option<f64>,
    /// |slope| x (window width - 1 rounds) / mean; the criterion is <= 0.10.
    pub slope_excursion: Option<f64>,
}

/// Where the write cliff falls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cliff {
    /// Seconds from the start of the series.
    pub t_s: f64,
    /// Bytes written before it.
    pub bytes_written: u64,
}

/// The performance-consistency test's random-write phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConsistencyAnalysis {
    pub tested_bytes: u64,
    pub op_percent: u32,
    pub plateau_iops: f64,
    /// None: no cliff was found (the drive never fell below half its initial rate).
    pub cliff: Option<Cliff>,
    pub steady_window_s: u32,
    pub steady_iops_mean: f64,
    pub steady_iops_std_dev: f64,
    /// Mean / standard deviation: the later reviews' consistency score (higher is steadier).
    pub steady_consistency_ratio: Option<f64>,
    pub snia: SniaSteadyState,
    pub random_bytes_written: u64,
    pub samples: u32,
}

/// TRIM validation: sequential write speed clean, dirty and after the span was discarded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrimAnalysis {
    #[serde(default)]
    pub span_bytes: u64,
    #[serde(default)]
    pub clean_bytes_per_s: f64,
    #[serde(default)]
    pub dirty_bytes_per_s: f64,
    #[serde(default)]
    pub after_trim_bytes_per_s: f64,
    /// After-TRIM speed over clean speed.
    #[serde(default)]
    pub restored_fraction: f64,
    pub discard_supported: bool,
    #[serde(with = "crate::device::no_limit", default = "crate::device::no_limit::none")]
    #[schemars(with = "Option<u64>")]
    pub discard_max_bytes: u64,
    /// Whether discarded blocks read back as zeroes (None when it could not be checked).
    #[serde(default)]
    pub trimmed_reads_zero: Option<bool>,
    /// The most each state's sequential write runs; it also stops after one pass over the span (None: a whole pass).
    #[serde(default)]
    pub measure_s: Option<f64>,
    /// Idle time between the TRIM and the after-TRIM measurement.
    #[serde(default)]
    pub idle_after_trim_s: f64,
    /// How long each state's measurement ran (clean, dirty, after TRIM) and what it wrote: a timed measurement
    /// stops early at the end of a small span, so the time given is the most, not what ran. Absent in results
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_seconds: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bytes: Option<[u64; 3]>,
}

/// One transfer size of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepRow {
    pub transfer_bytes: u64,
    /// The queue depth of this point (a queue-depth sweep; absent in size sweeps, which use the analysis's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// Reads as a percentage of the point's operations (a mix sweep, where one mixed run gives both directions'
    /// figures; absent in size and queue-depth sweeps, which write, then read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_percent: Option<u32>,
    pub write_bytes: u64,
    pub write_bytes_per_s: f64,
    pub write_iops: f64,
    pub read_bytes: u64,
    pub read_bytes_per_s: f64,
    pub read_iops: f64,
    /// Cut short by an interrupt after both directions moved data: the figures are over the part that ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// The transfer-size sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepAnalysis {
    /// What the sweep varied.
    #[serde(default)]
    pub axis: crate::schema::options::SweepAxis,
    pub region_bytes: u64,
    pub queue_depth: u32,
    /// Jobs that ran every point side by side, each at the point's queue depth (`--jobs`); the figures are of all
    /// of them together (absent: one).
    #[serde(default = "one_job", skip_serializing_if = "is_one_job")]
    pub jobs: u32,
    pub rows: Vec<SweepRow>,
    /// Sizes not run, and why.
    pub skipped: Vec<String>,
}

fn one_job() -> u32 {
    1
}

fn is_one_job(jobs: &u32) -> bool {
    *jobs == 1
}

/// The QD1 latency test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyAnalysis {
    pub span_bytes: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub latency_ns_mean: f64,
    pub latency_ns_max: u64,
    pub latency_ns_p25: u64,
    pub latency_ns_p50: u64,
    pub latency_ns_p75: u64,
    pub latency_ns_p95: u64,
    pub latency_ns_p99: u64,
    /// Absent (0) in results written before it was kept.
    #[serde(default)]
    pub latency_ns_p999: u64,
    /// Process CPU time over run time, in percent of one core.
    pub cpu_percent: f64,
}

/// The field report's columns: 25th, 50th, 75th and 95th percentiles and the mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PercentileColumns {
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub mean: f64,
}

impl PercentileColumns {
    /// Every column multiplied by `factor` (bytes per second to MB/s for a table, say).
    pub fn scaled(&self, factor: f64) -> Self {
        PercentileColumns {
            p25: self.p25 * factor,
            p50: self.p50 * factor,
            p75: self.p75 * factor,
            p95: self.p95 * factor,
            mean: self.mean * factor,
        }
    }

    pub fn of(values: &[f64]) -> Self {
        PercentileColumns {
            p25: percentile(values, 25.0),
            p50: percentile(values, 50.0),
            p75: percentile(values, 75.0),
            p95: percentile(values, 95.0),
            mean: mean(values),
        }
    }
}

/// Random 4 KiB reads at queue depth 1 (seed 000's second experiment: the small random reads a search makes),
/// in nanoseconds: the field report's columns plus p99 and the maximum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RandomReadLatency {
    pub reads: u32,
    pub p25_ns: f64,
    pub p50_ns: f64,
    pub p75_ns: f64,
    pub p95_ns: f64,
    pub p99_ns: f64,
    pub mean_ns: f64,
    pub max_ns: f64,
}

impl RandomReadLatency {
    /// The columns of a set of latencies in nanoseconds (None for an empty set).
    pub fn of_ns(latencies_ns: &[u64]) -> Option<Self> {
        if latencies_ns.is_empty() {
            return None;
        }
        let ns: Vec<f64> = latencies_ns.iter().map(|&ns| ns as f64).collect();
        Some(RandomReadLatency {
            reads: ns.len() as u32,
            p25_ns: percentile(&ns, 25.0),
            p50_ns: percentile(&ns, 50.0),
            p75_ns: percentile(&ns, 75.0),
            p95_ns: percentile(&ns, 95.0),
            p99_ns: percentile(&ns, 99.0),
            mean_ns: mean(&ns),
            max_ns: ns.iter().copied().fold(0.0, f64::max),
        })
    }
}

/// How one file read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileScan {
    pub name: String,
    /// The raw bytes of the path in hexadecimal, when it is not UTF-8 (`refresh --from` reads it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_bytes_hex: Option<String>,
    pub device: String,
    pub age_s: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_s: f64,
    /// Chunk reads slower than twice the file's median chunk time: (offset, first ns, re-read ns).
    pub slow_chunks: Vec<(u64, u64, u64)>,
    /// Baseline speed over this file's speed (infinite for a file that read nothing in its time).
    #[serde(default, deserialize_with = "null_is_infinite")]
    #[schemars(with = "Option<f64>")]
    pub slowdown_ratio: f64,
    #[serde(default)]
    pub flagged: bool,
    /// Whether re-reading the slow chunks was slow again (a media slowdown, not contention).
    #[serde(default)]
    pub confirmed: bool,
    /// The file's random 4 KiB reads (`scan --random-reads`), if any were made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_reads: Option<RandomReadLatency>,
    /// Each random read's latency, kept in memory for the age buckets' columns and not written out (the
    /// columns above and the buckets' are).
    #[serde(skip)]
    pub random_read_ns: Vec<u64>,
}

/// One age bucket of the scan report: the field report's columns of read speed, and the projected time
/// to read its data in bulk at its mean speed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgeBucket {
    /// Lower and upper age in months; no upper bound for the last bucket.
    pub months_from: f64,
    pub months_to: Option<f64>,
    pub files: u32,
    pub bytes: u64,
    /// Read speed in bytes per second.
    pub speed_bytes_per_s: PercentileColumns,
    /// Hours to read this bucket's bytes at its aggregate speed, and per 900 GB (the field report's unit).
    pub bulk_read_hours: f64,
    pub hours_per_900gb: f64,
    /// The bucket's random 4 KiB reads, all files together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_reads: Option<RandomReadLatency>,
}

/// One age of a virtual data set beside seed 000's figure for that age: bulk-read hours per 900 GB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldReportRow {
    pub months: f64,
    pub files: u32,
    /// This scan's figure, with its reader.
    pub hours_per_900gb: f64,
    /// The field report's (read with `cat`), where it has one for this age.
    pub field_report_hours_per_900gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_reads: Option<RandomReadLatency>,
}

/// A virtual data set's scan set against the field report, age by age.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldReportComparison {
    /// Whether the scan read as the field report did (`--reader cat`); otherwise its hours are a prediction
    /// for another reader and differ from the report's by design.
    pub same_reader: bool,
    pub rows: Vec<FieldReportRow>,
}

/// One device's part of a scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceSummary {
    pub device: String,
    pub files: u32,
    pub bytes: u64,
    pub speed_bytes_per_s: PercentileColumns,
    pub flagged: u32,
    pub hours_per_900gb: f64,
}

/// A path the scan passed over, and why.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SkippedFile {
    /// The path, readable (bytes that are not UTF-8 as `\xNN`).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_bytes_hex: Option<String>,
    pub reason: String,
    /// The drive failed a read or write of it (an I/O error, a read cut short of a file that did not shrink): a
    /// failure of the drive, which fails the scan. False for a file that vanished or was passed over by choice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub io_failed: bool,
}

/// What a `skipped[]` entry may hold when read back: the typed form, or a `"path: reason"` string of a result
/// written before it (the schema's view of [`SkippedFile`]'s reader).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum SkippedFileAsRead {
    Typed(SkippedFile),
    Text(String),
}

impl<'de> Deserialize<'de> for SkippedFile {
    /// Reads the typed form, and the `"path: reason"` strings of results written before it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Typed {
            name: String,
            #[serde(default)]
            name_bytes_hex: Option<String>,
            reason: String,
            #[serde(default)]
            io_failed: bool,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Typed(Typed),
            Text(String),
        }
        Ok(match Either::deserialize(deserializer)? {
            Either::Typed(t) => SkippedFile {
                name: t.name,
                name_bytes_hex: t.name_bytes_hex,
                reason: t.reason,
                io_failed: t.io_failed,
            },
            Either::Text(text) => {
                let (name, reason) = text.split_once(": ").unwrap_or((&text, ""));
                SkippedFile {
                    name: name.to_string(),
                    name_bytes_hex: None,
                    reason: reason.to_string(),
                    io_failed: false,
                }
            }
        })
    }
}

/// What rewriting the flagged files bought on the virtual drive (`scan --refresh-flagged`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AfterRefresh {
    /// The flagged files scanned again two days after they were rewritten.
    pub files: Vec<FileScan>,
    pub mean_bytes_per_s_before: f64,
    pub mean_bytes_per_s_after: f64,
    /// The rewritten files' bulk-read hours per 900 GB, before and after (the field report: 10.49 h, then 1.0);
    /// absent when nothing was flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours_per_900gb_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours_per_900gb_after: Option<f64>,
}

/// The stale-data scan's conclusions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScanAnalysis {
    /// The speed fresh data reads at, and how it was found.
    pub baseline_bytes_per_s: f64,
    pub baseline_source: String,
    /// A file is flagged when it reads slower than this share of the baseline (`--slower-than`) and the
    /// slowness repeats.
    pub slower_than_ratio: f64,
    /// How the files were read, in words (e.g. "cat: sequential 128 KiB reads, one at a time").
    #[serde(default)]
    pub reader: String,
    pub buckets: Vec<AgeBucket>,
    pub total_bytes: u64,
    pub total_bulk_read_hours: f64,
    pub flagged: Vec<String>,
    /// Per underlying device: files, bytes, read speed columns, flagged files (the straggler shows here).
    pub devices: Vec<DeviceSummary>,
    pub files: Vec<FileScan>,
    #[serde(default)]
    #[schemars(with = "Vec<SkippedFileAsRead>")]
    pub skipped: Vec<SkippedFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_refresh: Option<AfterRefresh>,
    /// For a virtual data set of the field report's ages: each age beside the report's figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_report: Option<FieldReportComparison>,
}

/// One region of a region scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RegionRow {
    pub offset_bytes: u64,
    pub bytes: u64,
    /// The first read's speed; `null` when the region could not be read (`measured` false, `error` says why).
    pub bytes_per_s: Option<f64>,
    /// False when no speed was measured: the region's read failed.
    #[serde(default = "measured_by_default")]
    pub measured: bool,
    /// Why the region could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The speed of the second read, for regions that were slow the first time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reread_bytes_per_s: Option<f64>,
}

/// Rows written before a region could fail to read were all measured.
fn measured_by_default() -> bool {
    true
}

/// Read speed across the LBA range of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RegionScanAnalysis {
    pub regions: Vec<RegionRow>,
    pub region_bytes: u64,
    pub median_bytes_per_s: f64,
    pub min_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
    /// The median, minimum and maximum are of the regions that were read; these could not be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_region_offsets: Vec<u64>,
    /// Regions that read below the threshold twice: a media slowdown, not contention.
    pub slow_region_offsets: Vec<u64>,
}

/// JSON has no infinity: serde_json writes it as `null`, so `null` reads back as infinite.
fn null_is_infinite<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_method_keeps_its_notes_without_figures() {
        let json = r#"{"kind":"consistency","analysis":{"notes":["interrupted"]}}"#;
        let a: Analysis = serde_json::from_str(json).unwrap();
        match &a {
            Analysis::Consistency(m) => assert!(m.measured.is_none() && m.notes == ["interrupted"]),
            other => panic!("read as {other:?}"),
        }
        assert_eq!(serde_json::to_string(&a).unwrap(), json);
        let run: Analysis = serde_json::from_str(r#"{"kind":"run"}"#).unwrap();
        assert_eq!(
            (run.kind(), serde_json::to_string(&run).unwrap()),
            ("run", r#"{"kind":"run"}"#.into())
        );
    }

    #[test]
    fn trim_without_discard_reads_back_from_the_old_short_form() {
        let json =
            r#"{"kind":"trim","analysis":{"discard_supported":false,"discard_max_bytes":0,"notes":[]}}"#;
        let Analysis::Trim(m) = serde_json::from_str(json).unwrap() else {
            panic!("not trim")
        };
        assert_eq!(m.measured, Some(TrimAnalysis::default()));
    }

    #[test]
    fn old_skipped_strings_and_null_infinities_read_back() {
        let skipped: Vec<SkippedFile> =
            serde_json::from_str(r#"["a/b: vanished", {"name":"c","reason":"r"}]"#).unwrap();
        assert_eq!(
            (skipped[0].name.as_str(), skipped[0].reason.as_str()),
            ("a/b", "vanished")
        );
        assert_eq!(skipped[1].name, "c");
        let file = FileScan {
            name: "f".into(),
            name_bytes_hex: None,
            device: "d".into(),
            age_s: 1.0,
            bytes: 0,
            seconds: 1.0,
            bytes_per_s: 0.0,
            slow_chunks: vec![],
            slowdown_ratio: f64::INFINITY,
            flagged: true,
            confirmed: true,
            random_reads: RandomReadLatency::of_ns(&[100_000, 300_000]),
            random_read_ns: vec![],
        };
        let back: FileScan = serde_json::from_str(&serde_json::to_string(&file).unwrap()).unwrap();
        assert_eq!(back, file);
        let random = file.random_reads.as_ref().unwrap();
        assert_eq!(
            (random.reads, random.mean_ns, random.max_ns),
            (2, 200_000.0, 300_000.0)
        );
    }
}
