//! What `ssdlab quick` measured: the eight figures CrystalDiskMark and KDiskMark show (SEQ1M Q8T1, SEQ1M Q1T1,
//! RND4K Q32T1 and RND4K Q1T1, each read and written; or CrystalDiskMark's NVMe set), every repeat kept, so the
//! spread is as much a result as the mean.

use serde::{Deserialize, Serialize};

use crate::stats::{mean, sample_std_dev};

/// `ssdlab quick`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuickOptions {
    /// Times each case runs (CrystalDiskMark's default: 5).
    pub repeats: u32,
    /// How long each repeat runs (CrystalDiskMark's default: 5 s).
    pub runtime_ns: u64,
    /// The span the cases address from the start of the target (CrystalDiskMark's default test size: 1 GiB),
    /// written once before the first read so reads find data.
    pub span_bytes: u64,
    /// `--keep`: keep a test file this run created (by default it is removed, as CrystalDiskMark removes its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// `--profile`: the set of cases (absent: the default set).
    #[serde(default, skip_serializing_if = "QuickProfile::is_default")]
    pub profile: QuickProfile,
}

impl Default for QuickOptions {
    fn default() -> Self {
        QuickOptions {
            repeats: 5,
            runtime_ns: 5_000_000_000,
            span_bytes: 1 << 30,
            keep: false,
            profile: QuickProfile::Default,
        }
    }
}

/// Which of CrystalDiskMark's sets `quick` runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuickProfile {
    /// SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1 (CrystalDiskMark's and KDiskMark's default).
    #[default]
    Default,
    /// SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1 (CrystalDiskMark's "NVMe SSD" setting): sixteen
    /// threads of 32 random reads each, as a drive with many queues is rated.
    Nvme,
}

impl QuickProfile {
    pub fn is_default(&self) -> bool {
        *self == QuickProfile::Default
    }
}

/// One case of the set: its access, and what each repeat measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuickCase {
    /// As the tools name it: "SEQ1M Q8T1", "RND4K Q1T1".
    pub name: String,
    pub read: bool,
    pub sequential: bool,
    pub block_bytes: u64,
    /// Operations in flight in each thread (job); `threads` of them run side by side.
    pub queue_depth: u32,
    /// The tools' T: jobs of `queue_depth` each (absent: one).
    #[serde(default = "one_thread", skip_serializing_if = "is_one_thread")]
    pub threads: u32,
    /// Each repeat's figures, in the order they ran.
    pub bytes_per_s: Vec<f64>,
    pub iops: Vec<f64>,
    /// The mean latency over every repeat's operations, and the worst repeat's p99.
    pub latency_ns_mean: f64,
    pub latency_ns_p99: u64,
    /// Each repeat's own mean and p99 latency, in the order they ran (absent in records before issue 49).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_ns_mean_by_repeat: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_ns_p99_by_repeat: Vec<u64>,
}

fn one_thread() -> u32 {
    1
}

fn is_one_thread(threads: &u32) -> bool {
    *threads == 1
}

impl QuickCase {
    pub fn mean_bytes_per_s(&self) -> f64 {
        mean(&self.bytes_per_s)
    }

    pub fn mean_iops(&self) -> f64 {
        mean(&self.iops)
    }

    /// The repeats' sample standard deviation (divided by n - 1) over their mean (0 for a single repeat): how
    /// far one run of this case can be trusted.
    pub fn relative_spread(&self) -> f64 {
        let m = self.mean_bytes_per_s();
        if m > 0.0 {
            sample_std_dev(&self.bytes_per_s) / m
        } else {
            0.0
        }
    }
}

/// `ssdlab quick`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuickAnalysis {
    pub span_bytes: u64,
    pub repeats: u32,
    pub runtime_s: f64,
    /// Whether the span was written before the reads (a target that keeps no data, such as null, is not).
    pub prepared: bool,
    pub cases: Vec<QuickCase>,
}
