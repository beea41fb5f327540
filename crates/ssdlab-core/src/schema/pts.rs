//! What `ssdlab test pts` measured: the SNIA Solid State Storage Performance Test Specification's IOPS,
//! throughput and latency tests, as result.json holds them. Every round keeps every cell, so the convergence
//! plot, the steady-state window and the matrix can be redrawn from the result alone.

use serde::{Deserialize, Serialize};

/// Which PTS test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PtsTest {
    /// Random I/O at 8 block sizes by 7 read/write mixes; tracks 4 KiB random write IOPS.
    #[default]
    Iops,
    /// Sequential 1024 KiB and 128 KiB reads and writes; tracks 1024 KiB sequential write bandwidth.
    Throughput,
    /// QD1 random I/O at 0.5, 4 and 8 KiB by 3 mixes; tracks the mean response time of 4 KiB random writes.
    Latency,
}

impl PtsTest {
    pub fn name(self) -> &'static str {
        match self {
            PtsTest::Iops => "iops",
            PtsTest::Throughput => "throughput",
            PtsTest::Latency => "latency",
        }
    }
}

/// Which of SNIA's two specifications a run follows. They share the IOPS and latency matrices and the
/// steady-state rule; the throughput test of PTS-E (Enterprise) runs 1024 KiB and 128 KiB as two tests, each
/// with its own purge, preconditioning and steady state, where PTS-C (Client) runs 1024 KiB only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PtsFlavour {
    #[default]
    Enterprise,
    Client,
}

impl PtsFlavour {
    /// "PTS-E" or "PTS-C", as SNIA names them.
    pub fn name(self) -> &'static str {
        match self {
            PtsFlavour::Enterprise => "PTS-E",
            PtsFlavour::Client => "PTS-C",
        }
    }
}

/// The figure a PTS test follows round by round to decide steady state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PtsMetric {
    Iops,
    BytesPerS,
    LatencyNsMean,
}

/// `ssdlab test pts`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsOptions {
    pub test: PtsTest,
    /// How long each cell of the matrix runs per round (the PTS: one minute).
    pub cell_ns: u64,
    /// The ActiveRange: the share of the LBAs the rounds address, from the start of the device.
    pub active_range_percent: f64,
    /// Outstanding I/Os of the IOPS and throughput tests (the PTS's thread count x queue depth; ssdlab runs one
    /// thread). The latency test always runs at 1.
    pub queue_depth: u32,
    /// Rounds before the test gives up on steady state (the PTS: 25).
    pub max_rounds: u32,
    /// Workload-independent preconditioning: passes of 128 KiB sequential writes over the whole device (the
    /// PTS: twice the user capacity).
    pub precondition_passes: u32,
    /// PTS-E or PTS-C (results from before the choice existed ran PTS-E's matrices).
    #[serde(default)]
    pub flavour: PtsFlavour,
}

impl Default for PtsOptions {
    fn default() -> Self {
        PtsOptions {
            test: PtsTest::Iops,
            cell_ns: 60_000_000_000,
            active_range_percent: 100.0,
            queue_depth: 32,
            max_rounds: 25,
            precondition_passes: 2,
            flavour: PtsFlavour::Enterprise,
        }
    }
}

/// One cell of a PTS matrix: an access pattern run for one cell time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsCell {
    /// Reads as a percentage of operations (the PTS writes the mix as R/W, e.g. 65/35).
    pub read_percent: u32,
    pub block_bytes: u64,
    pub sequential: bool,
    pub queue_depth: u32,
}

/// What one cell measured (in a round, or averaged over the steady-state window).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsCellResult {
    #[serde(flatten)]
    pub cell: PtsCell,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub latency_ns_mean: f64,
    pub latency_ns_max: u64,
    /// The 99.999th percentile response time, which the latency test reports beside the mean and maximum (from the
    /// cell's histogram; over the window, from the window's rounds' histograms merged). Other tests leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns_p99_999: Option<u64>,
}

/// One round of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsRound {
    /// 1-based, as the PTS numbers rounds.
    pub round: u32,
    /// The tracking variable's value in this round.
    pub tracking: f64,
    pub cells: Vec<PtsCellResult>,
}

/// The PTS steady-state determination over the measurement window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsSteadyState {
    /// Whether five consecutive rounds met both criteria.
    pub achieved: bool,
    /// The measurement window, 1-based and inclusive: the first five rounds that met the criteria, or the last
    /// five when none did (None with fewer than five rounds).
    pub window_first_round: Option<u32>,
    pub window_last_round: Option<u32>,
    pub window_mean: Option<f64>,
    /// (max - min) / mean over the window; the criterion is <= 0.20.
    pub range_excursion: Option<f64>,
    /// |slope| x (window width - 1 rounds) / mean; the criterion is <= 0.10.
    pub slope_excursion: Option<f64>,
    /// The least-squares line through the window, per round and at the window's first round.
    pub slope_per_round: Option<f64>,
    pub intercept: Option<f64>,
    pub rounds_run: u32,
    pub max_rounds: u32,
}

/// One test of a PTS run, from its purge to its reported matrix: the IOPS and latency tests are one, PTS-E's
/// throughput test is two (1024 KiB, then 128 KiB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsSubTest {
    /// Whether the device was purged first (the PTS requires it).
    pub purged: bool,
    /// How it was purged: the drive's own sanitize or secure erase where it offers one, else discard; or why it
    /// was not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub purge: String,
    pub preconditioning_bytes: u64,
    /// The tracking variable: which cell and which figure of it.
    pub tracking_cell: PtsCell,
    pub tracking_metric: PtsMetric,
    pub rounds: Vec<PtsRound>,
    pub steady_state: PtsSteadyState,
    /// Every cell averaged over the measurement window: the PTS's reported matrix.
    pub matrix: Vec<PtsCellResult>,
}

/// A PTS test's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsAnalysis {
    pub test: PtsTest,
    #[serde(default)]
    pub flavour: PtsFlavour,
    /// The device's capacity and the ActiveRange the rounds addressed.
    pub capacity_bytes: u64,
    pub active_range_bytes: u64,
    pub active_range_percent: f64,
    pub cell_s: f64,
    /// The first (or only) test, its fields at this level.
    #[serde(flatten)]
    pub first: PtsSubTest,
    /// The tests after the first: PTS-E throughput's 128 KiB test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub further: Vec<PtsSubTest>,
    /// Cells the device could not run (a block size below its logical block), with why.
    pub skipped: Vec<String>,
    /// What the writes carry (the PTS report states the data pattern).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data_pattern: String,
    /// Every way this run departs from the specification (no purge, cells shorter than a minute, more than 25
    /// rounds, fewer preconditioning passes): empty for a conforming run. Results from before the list existed
    /// have no `data_pattern` either, and are shown as "not recorded".
    #[serde(default)]
    pub departures: Vec<String>,
}

impl PtsAnalysis {
    /// Every test of the run, in the order they ran.
    pub fn sub_tests(&self) -> impl Iterator<Item = &PtsSubTest> {
        std::iter::once(&self.first).chain(&self.further)
    }

    /// Whether every test reached steady state.
    pub fn achieved(&self) -> bool {
        self.sub_tests().all(|t| t.steady_state.achieved)
    }
}

/// A block size as the PTS writes it: 0.5, 4, 1024 (KiB), as a phase-name-safe token ("512b", "4k", "1m").
pub fn size_token(block_bytes: u64) -> String {
    match block_bytes {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{}m", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{}k", b >> 10),
        b => format!("{b}b"),
    }
}
