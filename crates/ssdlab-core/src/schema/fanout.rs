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
    /// The share of the drive's run its reading thread spent waiting for a CPU (the kernel's run-queue time):
    /// its latencies include that wait. Absent on virtual drives, where no host CPU enters the figures, and in
    /// older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_wait_ratio: Option<f64>,
    /// The thread's mean wait each time it waited for a CPU: a wake-up's few microseconds on an idle host, a
    /// scheduler's time slice of milliseconds when other threads hold every CPU. Absent where the ratio is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_wait_mean_ns: Option<u64>,
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

/// A drive's or a cohort's part in the query, and what reading it like the other drives would buy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attribution {
    /// The drive's name, or the cohort's ("data at least 3.7 months old").
    pub name: String,
    /// The drives in it (one for a drive).
    pub members: Vec<String>,
    /// Its fair share of any tail: members over drives.
    pub fair_share_ratio: f64,
    /// At p50, p95, p99 and p99.9, those the reads support.
    pub percentiles: Vec<PercentileAttribution>,
    /// The query's mean, and its mean with the members reading like the other drives (their reads pooled).
    pub query_mean_ns: f64,
    pub fixed_mean_ns: f64,
}

/// One percentile of an [`Attribution`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PercentileAttribution {
    pub percentile: f64,
    /// The members' share of the queries beyond the query's percentile: the chance one of them is the slowest
    /// shard of such a query.
    pub share_ratio: f64,
    /// The members' reads at or beyond the query's percentile, and what drives all alike would give them.
    pub tail_reads: u64,
    pub tail_reads_expected: f64,
    /// The binomial chance of that many or more by luck alone.
    pub tail_p_value: f64,
    /// The query's percentile, with the members reading like the other drives, and the value a fix must come
    /// under to be beyond the percentile's noise (its sampling and the histograms' resolution).
    pub query_ns: u64,
    pub fixed_ns: u64,
    pub noise_floor_ns: u64,
    /// Named here: at least twice its fair share (half of the rest beyond it, for a cohort of over a third of
    /// the drives), beyond chance over every test made, and a fix beyond noise.
    pub named: bool,
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
    /// The threads that read the drives live: one a drive, or with more drives than CPUs one a CPU, each keeping
    /// a read in flight on every drive of its share through one io_uring. Absent in older records and for
    /// results merged with `--from` (each was read on its own host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading_threads: Option<u32>,
    /// How far apart the drives' first reads were submitted, on the host's clock (absent for virtual drives,
    /// merged results and older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_spread_ns: Option<u64>,
    pub drives: Vec<FanoutDrive>,
    /// The query over the drives given, computed: its CDF is the product of theirs.
    pub query: QueryCase,
    /// That query's CDF, (latency ns, probability of being at most that), at most a few hundred points.
    pub query_cdf: Vec<(u64, f64)>,
    /// What-ifs: more shards like these, hedged requests, replicas.
    pub what_if: Vec<QueryCase>,
    /// Every drive's share of the query's tail, largest p99 share first.
    pub stragglers: Vec<StragglerShare>,
    /// The drives named as making the query slow: at some percentile (see `attribution`) each takes at least
    /// twice its fair share of the tail, beyond chance, and reading it like the others moves that percentile
    /// beyond its noise. (Records written before attribution by percentile judged the p99 alone.)
    pub dominant: Vec<String>,
    /// The query if the dominant drives read like the others (None without dominant drives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<QueryCase>,
    /// The drive older records' fixed case used as the typical one; absent where the fix pools the other
    /// drives' reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_drive: Option<String>,
    /// Each drive's part in the query at every percentile the reads support, and what reading it like the
    /// other drives buys there; the drives in the order given. Absent in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attribution: Vec<Attribution>,
    /// The same for cohorts of drives by data age ("data at least N months old"), when the ages are known,
    /// oldest-only cohort first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cohorts: Vec<Attribution>,
    /// The cohort the analysis names: the fewest drives whose fix buys nearly all that fixing any named cohort
    /// buys (see `cohorts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_cohort: Option<String>,
    /// The query with the named cohort's drives reading like the younger ones (the seed's fix: rewrite the old
    /// data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_fixed: Option<QueryCase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredQueries>,
    /// What the reader should know about the figures (a measured query that disagrees with the computed one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
