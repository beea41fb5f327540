//! The options a result was produced with, as `result.json`'s `options` holds them: every flag as parsed or
//! defaulted (sizes in bytes, durations in nanoseconds, shares as ratios), so the run can be repeated and read
//! without parsing units again. One type per command; the JSON carries no tag of its own (the
//! result's `kind` says which). [`RunOptions`] is untagged, so a shape is read as the first variant whose required
//! fields it has: each variant has a required field every variant before it lacks, except that `EraseFlags`'
//! required fields include all of `OpFlags'` (whose `set_ratio` and `raw_nand_bytes` are optional), so `Erase` must stay
//! before `Op`. The tests below read every new shape back as itself.
//!
//! The method option types live here, not in ssdlab-methods, because the result schema names them; the
//! methods re-export them. A test method's options are tagged by its kind ([`MethodOptions`], generated from the one
//! list of methods in `methods.rs`), so they read back as the method they name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::workload::Workload;

/// Every command's options, one variant per shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RunOptions {
    /// `ssdlab test ...`: the target, the seed and the method's own options.
    Test(TestOptions),
    /// `ssdlab run`: the target and the workload.
    Run(JobOptions),
    /// `ssdlab scan --device`.
    RegionScan(RegionScanFlags),
    /// `ssdlab scan PATH...` or `scan --target sim:... --dataset ...`.
    FileScan(FileScanFlags),
    /// `ssdlab health`.
    Health(HealthFlags),
    /// `ssdlab fanout`.
    Fanout(FanoutFlags),
    /// `ssdlab refresh`.
    Refresh(RefreshFlags),
    /// `ssdlab erase`.
    Erase(EraseFlags),
    /// `ssdlab op`.
    Op(OpFlags),
    /// `ssdlab serve`.
    Serve(ServeFlags),
}

/// `ssdlab serve`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeFlags {
    #[serde(flatten)]
    pub target: TargetOptions,
    pub socket: Option<PathBuf>,
    pub listen: Option<String>,
    pub allow_remote: bool,
    pub read_only: bool,
    pub name: String,
    pub qd: u32,
    /// `--max-connections` (absent from records written before it existed).
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// `--poll-us` (absent from records written before it existed).
    #[serde(default)]
    pub poll_us: Option<u32>,
}

/// `ssdlab op`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpFlags {
    #[serde(flatten)]
    pub target: TargetOptions,
    /// `--set`: the share of the capacity to leave unpartitioned (0.25 for `--set 25%`).
    pub set_ratio: Option<f64>,
    /// `--raw-nand`: the drive's raw NAND capacity, when given.
    pub raw_nand_bytes: Option<u64>,
    pub samples: u32,
    pub seed: u64,
}

/// `ssdlab erase`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EraseFlags {
    #[serde(flatten)]
    pub target: TargetOptions,
    /// `--method` as given: `auto` or one method's name.
    pub erase_method: String,
    pub samples: u32,
    pub seed: u64,
}

/// `ssdlab refresh`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefreshFlags {
    /// As given, readable (bytes that are not UTF-8 as `\xNN`).
    pub paths: Vec<String>,
    pub from: Option<String>,
    pub slower_than: Option<f64>,
    /// `--older-than`: files whose data is at least this old, in nanoseconds.
    pub older_than_ns: Option<u64>,
    /// `--rate`: the most bytes per second refresh writes.
    pub rate_bytes_per_s: Option<f64>,
    pub chunk_bytes: u64,
    pub dry_run: bool,
}

/// `ssdlab fanout`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FanoutFlags {
    pub targets: Vec<String>,
    pub fleet: Option<String>,
    /// `--age-by`: nanoseconds more of age on the field report's fleet.
    pub age_by_ns: Option<u64>,
    pub refresh_all: bool,
    pub shards: Vec<u32>,
    /// `--hedge`: the percentile of the fleet's read latency after which a read is hedged (95 for p95).
    pub hedge_percentile: f64,
    /// `computed` or `measured`.
    pub mode: String,
    pub runtime_ns: u64,
    pub block_bytes: u64,
    pub seed: u64,
}

/// How the target was opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetOptions {
    pub target: String,
    /// The engine as given (`auto`, `uring`, `psync`).
    pub engine: String,
    pub allow_destroy: bool,
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestOptions {
    #[serde(flatten)]
    pub target: TargetOptions,
    pub seed: u64,
    pub method: MethodOptions,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobOptions {
    #[serde(flatten)]
    pub target: TargetOptions,
    pub workload: Workload,
    /// `run --ramp-time` (fio's ramp_time): how long the workload ran before statistics were kept (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_ns: Option<u64>,
    /// `run --jobs` (fio's numjobs): how many copies of the workload ran side by side (see `Workload::job`);
    /// absent: one. Limits and rates in `workload` are each job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
}

/// A method's options, tagged by its kind (generated from the one list of methods).
pub use crate::schema::methods::MethodOptions;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConsistencyOptions {
    pub runtime_ns: u64,
    /// Extra over-provisioning simulated by leaving this percentage of the LBAs untouched.
    pub op_percent: u32,
    pub fill_passes: u32,
    /// Seconds per SNIA round.
    pub round_s: u32,
    /// Seconds at the end over which steady-state mean and deviation are taken (AnandTech: 400).
    pub steady_window_s: u32,
}

impl Default for ConsistencyOptions {
    fn default() -> Self {
        ConsistencyOptions {
            runtime_ns: 2000 * 1_000_000_000,
            op_percent: 0,
            fill_passes: 1,
            round_s: 60,
            steady_window_s: 400,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrimOptions {
    pub torture_ns: u64,
    /// Pass when after-TRIM speed is at least this fraction of clean speed.
    pub restore_threshold: f64,
    /// Each state is measured by sequential writes for this long (Iometer's 60 s in seeds 002/003), or, when
    /// None, by a whole pass over the span (HD Tach's way; results from before this option were measured so).
    #[serde(default)]
    pub measure_ns: Option<u64>,
    /// Idle time between the TRIM and the after-TRIM measurement, for drives that reclaim trimmed space in the
    /// background.
    #[serde(default)]
    pub idle_ns: u64,
}

impl Default for TrimOptions {
    fn default() -> Self {
        TrimOptions {
            torture_ns: 40 * 60 * 1_000_000_000,
            restore_threshold: 0.9,
            measure_ns: Some(60 * 1_000_000_000),
            idle_ns: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepOptions {
    pub test_bytes: u64,
    pub queue_depth: u32,
    pub from_bytes: u64,
    pub to_bytes: u64,
    /// Each direction at each size stops after one pass over the region or this long, whichever comes first.
    pub size_runtime_ns: u64,
    /// What the sweep varies: the transfer size (sequential, ATTO's) or the queue depth (random, at
    /// `block_bytes`, from 1 to `max_queue_depth`). Results written before the axis existed swept sizes.
    #[serde(default)]
    pub axis: SweepAxis,
    #[serde(default = "default_sweep_block")]
    pub block_bytes: u64,
    #[serde(default = "default_sweep_max_qd")]
    pub max_queue_depth: u32,
    /// `--jobs` (fio's numjobs): copies of each point's workload side by side, each at `queue_depth` (absent: one).
    #[serde(default = "one_job", skip_serializing_if = "is_one_job")]
    pub jobs: u32,
}

fn one_job() -> u32 {
    1
}

fn is_one_job(jobs: &u32) -> bool {
    *jobs == 1
}

fn default_sweep_block() -> u64 {
    4096
}

fn default_sweep_max_qd() -> u32 {
    256
}

/// What a sweep varies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SweepAxis {
    /// Sequential write and read at every power-of-two transfer size (ATTO).
    #[default]
    Size,
    /// Random write and read at every power-of-two queue depth (the queue-depth scaling chart).
    Qd,
    /// Random I/O at one block size and queue depth with reads from 0% to 100% of operations, in steps of 10.
    Mix,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            test_bytes: 2 << 30,
            queue_depth: 4,
            from_bytes: 512,
            to_bytes: 64 << 20,
            size_runtime_ns: 10_000_000_000,
            axis: SweepAxis::Size,
            block_bytes: default_sweep_block(),
            max_queue_depth: default_sweep_max_qd(),
            jobs: 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyOptions {
    pub span_bytes: u64,
    pub runtime_ns: u64,
    /// What the QD1 operations are. Results written before the flag hold none: random writes.
    #[serde(default)]
    pub rw: LatencyRw,
}

/// The operations of the QD1 latency test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LatencyRw {
    /// 4 KiB random writes, IOmeter's 4K QD1 write (seed 001).
    #[default]
    RandWrite,
    RandRead,
    Read,
    Write,
    /// Random, 70% reads.
    RandRw,
}

impl LatencyRw {
    /// The name as the flag and result.json write it.
    pub fn name(self) -> &'static str {
        match self {
            LatencyRw::RandWrite => "randwrite",
            LatencyRw::RandRead => "randread",
            LatencyRw::Read => "read",
            LatencyRw::Write => "write",
            LatencyRw::RandRw => "randrw",
        }
    }

    /// Whether the test writes (and so needs the destructive gate on a real device).
    pub fn writes(self) -> bool {
        !matches!(self, LatencyRw::RandRead | LatencyRw::Read)
    }
}

impl Default for LatencyOptions {
    fn default() -> Self {
        LatencyOptions {
            span_bytes: 8 << 30,
            runtime_ns: 60_000_000_000,
            rw: LatencyRw::RandWrite,
        }
    }
}

/// `scan --device`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RegionScanFlags {
    pub device: String,
    pub regions: u32,
    pub region_bytes: Option<u64>,
    /// `cat` or `chunks` (absent in results written before readers existed: chunks).
    #[serde(default)]
    pub reader: String,
    pub chunk_bytes: u64,
    pub qd: u32,
    pub slower_than: f64,
}

/// `scan PATH...` / `scan --target sim:... --dataset ...` flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileScanFlags {
    pub paths: Vec<PathBuf>,
    pub target: Option<String>,
    pub dataset: String,
    pub min_size_bytes: u64,
    /// `cat` or `chunks` (absent in results written before readers existed: chunks).
    #[serde(default)]
    pub reader: String,
    /// With the chunks reader, the chunk and queue depth used; with cat, 128 KiB and 1.
    pub chunk_bytes: u64,
    pub qd: u32,
    #[serde(default)]
    pub random_reads: u32,
    pub slower_than: f64,
}

/// `ssdlab health`'s flags as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthFlags {
    pub devices: Vec<String>,
    /// `--scan`: the drives smartctl found were read too.
    #[serde(default)]
    pub scan: bool,
    pub from: Vec<PathBuf>,
    pub history_dir: Option<PathBuf>,
    /// The history window in nanoseconds, or None for all of it.
    pub window_ns: Option<u64>,
    pub rated_tbw: Option<f64>,
    pub rated_dwpd: Option<f64>,
    pub rated_pe: Option<u32>,
    pub warranty_years: Option<f64>,
    /// `--wear-warn`: rated wear in percent from which a drive warns (absent in records before issue 48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wear_warn_percent: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> TargetOptions {
        TargetOptions {
            target: "/dev/loop9".into(),
            engine: "auto".into(),
            allow_destroy: true,
            force: false,
        }
    }

    fn read_back(options: &RunOptions) -> RunOptions {
        serde_json::from_str(&serde_json::to_string(options).unwrap()).unwrap()
    }

    #[test]
    fn the_record_commands_options_read_back_as_their_own_shape() {
        let erase = RunOptions::Erase(EraseFlags {
            target: target(),
            erase_method: "auto".into(),
            samples: 256,
            seed: 1,
        });
        let op = RunOptions::Op(OpFlags {
            target: target(),
            set_ratio: Some(0.25),
            raw_nand_bytes: None,
            samples: 64,
            seed: 1,
        });
        let op_bare = RunOptions::Op(OpFlags {
            target: target(),
            set_ratio: None,
            raw_nand_bytes: None,
            samples: 64,
            seed: 1,
        });
        let serve = RunOptions::Serve(ServeFlags {
            target: target(),
            socket: Some("/run/nbd.sock".into()),
            listen: None,
            allow_remote: false,
            read_only: true,
            name: "ssdlab".into(),
            qd: 32,
            max_connections: Some(1024),
            poll_us: Some(15),
        });
        for options in [erase, op, op_bare, serve] {
            assert_eq!(read_back(&options), options);
        }
    }

    #[test]
    fn the_measuring_commands_options_read_back_as_their_own_shape() {
        let refresh = RunOptions::Refresh(RefreshFlags {
            paths: vec!["/srv".into()],
            from: None,
            slower_than: None,
            older_than_ns: Some(90 * 86_400 * 1_000_000_000),
            rate_bytes_per_s: Some(200e6),
            chunk_bytes: 4 << 20,
            dry_run: false,
        });
        let fanout = RunOptions::Fanout(FanoutFlags {
            targets: vec![],
            fleet: Some("field-report".into()),
            age_by_ns: None,
            refresh_all: false,
            shards: vec![100],
            hedge_percentile: 95.0,
            mode: "computed".into(),
            runtime_ns: 60_000_000_000,
            block_bytes: 4096,
            seed: 1,
        });
        let region_scan = RunOptions::RegionScan(RegionScanFlags {
            device: "/dev/sdb".into(),
            regions: 8,
            region_bytes: Some(64 << 20),
            reader: "chunks".into(),
            chunk_bytes: 1 << 20,
            qd: 4,
            slower_than: 0.5,
        });
        let file_scan = RunOptions::FileScan(FileScanFlags {
            paths: vec!["/srv".into()],
            target: None,
            dataset: String::new(),
            min_size_bytes: 64 << 10,
            reader: "cat".into(),
            chunk_bytes: 128 << 10,
            qd: 1,
            random_reads: 0,
            slower_than: 0.5,
        });
        let health = RunOptions::Health(HealthFlags {
            devices: vec!["/dev/sda".into()],
            scan: false,
            from: vec![],
            history_dir: None,
            window_ns: Some(30 * 86_400 * 1_000_000_000),
            rated_tbw: None,
            rated_dwpd: None,
            rated_pe: None,
            warranty_years: None,
            wear_warn_percent: Some(70.0),
        });
        for options in [refresh, fanout, region_scan, file_scan, health] {
            assert_eq!(read_back(&options), options);
        }
    }
}
