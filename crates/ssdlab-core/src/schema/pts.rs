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

/// A PTS test's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PtsAnalysis {
    pub test: PtsTest,
    /// The device's capacity and the ActiveRange the rounds addressed.
    pub capacity_bytes: u64,
    pub active_range_bytes: u64,
    pub active_range_percent: f64,
    pub cell_s: f64,
    /// Whether the device was purged first (the PTS requires it; a device without discard is not).
    pub purged: bool,
    pub preconditioning_bytes: u64,
    /// The tracking variable: which cell and which figure of it.
    pub tracking_cell: PtsCell,
    pub tracking_metric: PtsMetric,
    pub rounds: Vec<PtsRound>,
    pub steady_state: PtsSteadyState,
    /// Every cell averaged over the measurement window: the PTS's reported matrix.
    pub matrix: Vec<PtsCellResult>,
    /// Cells the device could not run (a block size below its logical block), with why.
    pub skipped: Vec<String>,
}

/// A block size as the PTS writes it: 0.5, 4, 1024 (KiB), as a phase-name-safe token ("512b", "4k", "1m").
pub fn size_token(block_bytes: u64) -> String {
    match block_bytes {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{}m", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{}k", b >> 10),
        b => format!("{b}b"),
    }
}
