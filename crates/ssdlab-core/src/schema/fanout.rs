//! What `ssdlab fanout` concluded: each drive's read latency, the latency of a query that waits for all of
//! them, what-ifs (more shards, hedged requests, replicas, the stragglers fixed) and which drives make the tail.

use serde::{Deserialize, Serialize};

use super::LatencyNs;
use crate::histogram::SparseHistogram;

/// A latency histogram as an analysis keeps it: the log-linear buckets of [`crate::histogram`] with their
/// counts, and the exact count, extremes and mean. (The sum is not kept as a 128-bit integer: serde cannot read
/// one back inside a tagged analysis.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistogramBuckets {
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// (bucket index, count) pairs, ascending.
    pub buckets: Vec<(u32, u64)>,
}

impl HistogramBuckets {
    pub fn of(h: &SparseHistogram) -> Self {
        HistogramBuckets {
            count: h.count,
            min_ns: h.min_ns,
            max_ns: h.max_ns,
            mean_ns: h.mean(),
            buckets: h.buckets.clone(),
        }
    }

    /// The histogram again (its sum from the mean, exact to a nanosecond per value).
    pub fn to_sparse(&self) -> SparseHistogram {
        SparseHistogram {
            count: self.count,
            sum_ns: (self.mean_ns * self.count as f64).round() as u128,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            buckets: self.buckets.clone(),
        }
    }
}

/// One drive of the fan-out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FanoutDrive {
    /// A short name (the virtual fleet's `drive-07`, or the target as given).
    pub name: String,
    pub target: String,
    /// The age of the drive's data in months, when known (the virtual fleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_age_months: Option<f64>,
    pub reads: u64,
    pub latency_ns: LatencyNs,
    /// Every read's latency, for the query arithmetic and for redrawing.
    pub histogram: HistogramBuckets,
    /// Per second of the run: (seconds since start, median ns, p99 ns).
    pub per_second: Vec<(f64, u64, u64)>,
    /// The read that failed, in words; the drive read no more after it (a failing drive is the worst
    /// straggler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// A query's latency under some assumption, and how much extra load it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueryCase {
    /// What the case assumes, in words.
    pub case: String,
    pub shards: u32,
    pub latency_ns: LatencyNs,
    /// Reads sent per query over one read per shard, minus one (0.05 = 5% more reads).
    pub extra_load_ratio: f64,
    /// The percentiles of this case the reads cannot support (fewer than ten reads expected beyond them), each
    /// with the reads still needed: their latency is capped near the largest read measured, not measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<PercentileNeed>,
}

/// A percentile the data cannot support yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PercentileNeed {
    pub percentile: f64,
    pub more_reads: u64,
}

/// A drive's part in the query's tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StragglerShare {
    pub name: String,
    /// The probability that this drive is the slowest of a query at least as slow as the query's p95 (p99),
    /// ties shared.
    pub share_of_p95_ratio: f64,
    pub share_of_p99_ratio: f64,
    /// This drive's reads at least as slow as the query's p99 (to the histogram's bucket), and how many all
    /// drives alike would give it.
    #[serde(default)]
    pub tail_reads: u64,
    #[serde(default)]
    pub tail_reads_expected: f64,
    /// The chance that a drive like the others has at least `tail_reads` of them (binomial upper tail); a
    /// straggler is named only when this is below 1% divided by the number of drives.
    #[serde(default = "one")]
    pub tail_p_value: f64,
}

fn one() -> f64 {
    1.0
}

/// Synchronized queries as measured (`--mode measured`): one read to every drive at the same instant, waiting
/// for all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeasuredQueries {
    pub queries: u64,
    pub latency_ns: LatencyNs,
    pub histogram: HistogramBuckets,
}

/// The fan-out's conclusions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FanoutAnalysis {
    /// The read workload on every drive, in words.
    pub workload: String,
    /// `computed` (independent loads, the query computed from the drives' histograms) or `measured` (also
    /// synchronized queries).
    pub mode: String,
    pub runtime_s: f64,
    pub drives: Vec<FanoutDrive>,
    /// The query over the drives given, computed: its CDF is the product of theirs.
    pub query: QueryCase,
    /// That query's CDF, (latency ns, probability of being at most that), at most a few hundred points.
    pub query_cdf: Vec<(u64, f64)>,
    /// What-ifs: more shards like these, hedged requests, replicas.
    pub what_if: Vec<QueryCase>,
    /// Every drive's share of the query's tail, largest p99 share first.
    pub stragglers: Vec<StragglerShare>,
    /// The drives that take at least twice their fair share of the p99 tail.
    pub dominant: Vec<String>,
    /// The query if the dominant drives read like the median drive (None without dominant drives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<QueryCase>,
    /// The drive the fixed case uses as the typical one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_drive: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredQueries>,
    /// What the reader should know about the figures (a measured query that disagrees with the computed one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
