//! The result schema: what `--json` streams and `result.json` holds (schema "ssdlab/4"; `migrate` reads "ssdlab/1"
//! to "ssdlab/3").
//!
//! Field names carry their units as suffixes. The report crate renders only from these types, so any old
//! result directory can be redrawn. Changing a field's meaning needs a new schema version; adding optional
//! fields does not. The prose description lives in `docs/result-schema.md`.

mod analysis;
mod cache;
pub mod erase;
pub mod fanout;
pub mod health;
mod methods;
pub mod migrate;
pub mod op;
pub mod options;
pub mod pts;
pub mod quick;
pub mod refresh;
pub mod replay;
pub mod serve;

use serde::{Deserialize, Serialize, Serializer};

pub use analysis::*;
pub use cache::CacheStats;
pub use methods::{MethodKind, MethodOptions};

use crate::device::DeviceInfo;
use crate::histogram::SparseHistogram;

/// The schema identifier written into every result.
pub const SCHEMA: &str = "ssdlab/4";

/// Latency percentiles and moments in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyNs {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    pub p25: u64,
    pub p50: u64,
    pub p75: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
}

impl LatencyNs {
    pub fn from_histogram(h: &crate::Histogram) -> Self {
        LatencyNs {
            min: h.min(),
            mean: h.mean(),
            max: h.max(),
            p25: h.percentile(25.0),
            p50: h.percentile(50.0),
            p75: h.percentile(75.0),
            p95: h.percentile(95.0),
            p99: h.percentile(99.0),
            p999: h.percentile(99.9),
        }
    }
}

/// Totals for one direction (read, write or discard).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionSummary {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub latency_ns: LatencyNs,
}

/// What a device knows about its own NAND, like SMART counters (the virtual SSD reports them; real devices may
/// later through SMART). In a phase summary the byte counts cover that phase; erase counts are as of its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceCounters {
    pub host_bytes_written: u64,
    pub nand_bytes_written: u64,
    /// NAND bytes written over host bytes written.
    pub write_amplification: f64,
    pub erase_count_min: u32,
    pub erase_count_mean: f64,
    pub erase_count_max: u32,
    /// Host bytes absorbed by the SLC cache.
    pub slc_hit_bytes: u64,
    /// Bytes garbage collection copied.
    pub gc_relocated_bytes: u64,
    /// Bytes rewritten by the firmware's own refresh policy.
    pub refreshed_bytes: u64,
}

impl DeviceCounters {
    /// The counters accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        let host = self.host_bytes_written - earlier.host_bytes_written;
        let nand = self.nand_bytes_written - earlier.nand_bytes_written;
        DeviceCounters {
            host_bytes_written: host,
            nand_bytes_written: nand,
            write_amplification: if host == 0 { 0.0 } else { nand as f64 / host as f64 },
            slc_hit_bytes: self.slc_hit_bytes - earlier.slc_hit_bytes,
            gc_relocated_bytes: self.gc_relocated_bytes - earlier.gc_relocated_bytes,
            refreshed_bytes: self.refreshed_bytes - earlier.refreshed_bytes,
            ..*self
        }
    }
}

/// The summary of a phase or a whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub ios: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub latency_ns: LatencyNs,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Mean number of operations in flight, time-weighted: whether the requested depth was reached.
    pub qd_mean: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub read: Option<DirectionSummary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub write: Option<DirectionSummary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub discard: Option<DirectionSummary>,
    /// Operations the device failed (negative result).
    pub io_errors: u64,
    /// Blocks whose content did not match the verify pattern.
    pub verify_errors: u64,
    /// NAND-level counters over the phase, from devices that know them (the virtual SSD).
    #[serde(flatten, default)]
    pub device: Option<DeviceCounters>,
    /// What the DRAM cache did over the phase, for `cached:` targets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache: Option<CacheStats>,
    /// The whole-phase latency histogram, for re-analysis.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency_histogram: Option<SparseHistogram>,
    /// Under a rate limit `latency_ns` runs from when each operation was due, so a host that falls behind shows
    /// in it; this is the device's own part, submission to completion. Absent without a rate limit, where the
    /// two are one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_latency_ns: Option<LatencyNs>,
}

impl Summary {
    /// The phase's operations of every direction together, in the shape of one direction's: the "total" row
    /// beside the read and write rows.
    pub fn total(&self) -> DirectionSummary {
        DirectionSummary {
            ios: self.ios,
            bytes: self.bytes,
            iops: self.iops,
            bytes_per_s: self.bytes_per_s,
            latency_ns: self.latency_ns.clone(),
        }
    }
}

/// One second of a run (the last window may be shorter; `seconds` says how long it was).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Seconds since the phase started at the end of this window.
    pub t_s: f64,
    pub seconds: f64,
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub latency_ns_mean: f64,
    pub latency_ns_p50: u64,
    pub latency_ns_p99: u64,
    pub latency_ns_max: u64,
    pub qd_mean: f64,
    /// In a phase that both read and wrote (fio's randrw), the reads of this second on their own; absent in a
    /// phase of one direction, where the figures above are that direction's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<DirectionSample>,
    /// In a phase that both read and wrote, the writes of this second on their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<DirectionSample>,
}

/// One direction's share of a second in a mixed phase, as fio's per-direction bandwidth and latency logs keep it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionSample {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    /// Latency of this direction's completions in the second; absent when none completed (a second without a
    /// completion has no latency to state, which is not a latency of zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<SampleLatencyNs>,
}

/// Latency figures of one window's completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampleLatencyNs {
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// One phase of a method (a plain `run` has a single phase named "run").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseResult {
    pub name: String,
    pub samples: Vec<Sample>,
    pub summary: Summary,
    /// False when the phase was interrupted (Ctrl-C) before its end condition.
    pub complete: bool,
}

/// The host the run was made on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u32,
}

/// Pass or fail, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    pub passed: bool,
    pub reasons: Vec<String>,
    /// Not passed because the method found what it exists to find (stale files, a straggler, a drive that keeps
    /// only part of its speed after TRIM, one that does not settle in the rounds allowed): a finding about the
    /// device or the data, shown as such, not a failure of the run. The exit status is the same as a failure's,
    /// so scripts still see it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub finding: bool,
    /// Not passed because nothing was read to judge (a drive's output without health data): neither a pass nor
    /// a failure, and never counted as passing. Exit 3 when nothing failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown: bool,
}

impl Verdict {
    /// What the verdict is, in one word: passed, finding, failed or unknown.
    pub fn kind(&self) -> &'static str {
        match (self.passed, self.finding, self.unknown) {
            (true, _, _) => "passed",
            (false, true, _) => "finding",
            (false, false, true) => "unknown",
            (false, false, false) => "failed",
        }
    }
}

/// A whole `result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    pub schema: String,
    /// The kind ("run", or the method's name) and what the method concluded, as `"kind"` and `"analysis"`.
    #[serde(flatten)]
    pub analysis: Analysis,
    pub ssdlab_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub host: HostInfo,
    pub target: DeviceInfo,
    /// Every option as given or defaulted, so the run can be repeated.
    pub options: options::RunOptions,
    pub phases: Vec<PhaseResult>,
    pub verdict: Verdict,
    pub complete: bool,
    /// The name `ssdlab report --label` gave this result in the page (never written by a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl RunResult {
    /// The kind as `result.json` names it ("run", "consistency", ...).
    pub fn kind(&self) -> &'static str {
        self.analysis.kind()
    }
}

/// One line of `--json` output. Consumers read it as JSON: the `analysis` event carries only the analysis
/// object (its kind was in `begin`), so events are written, never read back into this type.
// Events are built about once per second, so the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Event {
    Begin {
        /// The schema the stream's records follow (as `result.json`'s `schema`): a consumer reads `options`
        /// by it.
        schema: String,
        kind: String,
        target: DeviceInfo,
        options: options::RunOptions,
        started_at: String,
    },
    Phase {
        name: String,
    },
    Sample {
        phase: String,
        sample: Sample,
    },
    Summary {
        phase: String,
        summary: Summary,
        complete: bool,
    },
    Analysis(#[serde(serialize_with = "analysis_object")] Analysis),
    Verdict(Verdict),
}

/// The analysis object alone, as `result.json`'s `analysis` field holds it (`null` for a plain run).
fn analysis_object<S: Serializer>(analysis: &Analysis, serializer: S) -> Result<S::Ok, S::Error> {
    analysis.serialize_object(serializer)
}
