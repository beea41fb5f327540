//! What `ssdlab test replay` measured: the storage bench's two figures (average data rate over busy time and
//! average service time), the latency distribution, how the trace was fitted onto the device, and how faithfully
//! the replay kept the trace's timing.

use serde::{Deserialize, Serialize};

use crate::schema::LatencyNs;

/// A trace file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// fio's `write_iolog` output, version 2 (`wait` lines) or 3 (a microsecond timestamp on every line).
    FioIolog,
    /// `blkparse`'s default text output (the queue or dispatch events of a blktrace recording).
    Blkparse,
    /// The MSR Cambridge traces' CSV: Timestamp (100 ns FILETIME), Hostname, DiskNumber, Type, Offset, Size,
    /// ResponseTime.
    Msr,
}

impl TraceFormat {
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::FioIolog => "fio-iolog",
            TraceFormat::Blkparse => "blkparse",
            TraceFormat::Msr => "msr",
        }
    }
}

/// How operations beyond the device's end are brought onto it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplayFit {
    /// Offsets past the end wrap around (offset modulo the capacity): locality within a region is kept.
    #[default]
    Fold,
    /// Every offset is scaled by capacity / the trace's extent: the spread across the device is kept.
    Scale,
}

/// `ssdlab test replay`'s options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayOptions {
    /// The trace file as given.
    pub trace: String,
    /// As given or detected.
    pub format: TraceFormat,
    /// Trace times are multiplied by this (0.5 replays twice as fast, 2 half as fast).
    pub time_scale: f64,
    /// Issue every operation as soon as a slot is free, ignoring the trace's times.
    pub as_fast_as_possible: bool,
    /// The most operations in flight at once.
    pub queue_depth: u32,
    pub fit: ReplayFit,
    /// For MSR traces holding several disks: the one replayed.
    pub msr_disk: Option<u32>,
}

/// How the trace was fitted onto the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayFitReport {
    pub fit: ReplayFit,
    /// The end of the trace's furthest operation.
    pub trace_extent_bytes: u64,
    pub capacity_bytes: u64,
    /// Operations moved by the fit (none when the trace fits the device).
    pub remapped_ops: u64,
    /// Operations widened to the device's logical block (O_DIRECT needs whole blocks).
    pub aligned_ops: u64,
    /// Operations not replayed, and why (e.g. TRIMs on a device without discard).
    pub dropped_ops: u64,
    pub dropped_reasons: Vec<String>,
}

/// How late operations were issued against the trace's times (open-loop replay only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayFidelity {
    pub late_ns_p50: u64,
    pub late_ns_p99: u64,
    pub late_ns_max: u64,
    /// Share of operations issued more than 1 ms after their time.
    pub late_over_1ms_ratio: f64,
}

/// A replay's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayAnalysis {
    pub format: TraceFormat,
    /// Operations in the trace file (reads, writes, TRIMs and flushes), and those replayed.
    pub trace_ops: u64,
    pub replayed_ops: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub flushes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub trim_bytes: u64,
    /// From the first to the last operation's time in the trace, and the replay's wall (or virtual) time.
    pub trace_duration_s: f64,
    pub replay_duration_s: f64,
    pub time_scale: f64,
    pub as_fast_as_possible: bool,
    pub queue_depth: u32,
    pub fit: ReplayFitReport,
    /// Time with at least one operation in flight.
    pub busy_s: f64,
    /// Bytes read and written over busy time: the storage bench's average data rate.
    pub average_data_rate_bytes_per_s: f64,
    /// Mean completion time minus issue time (the trace's time in open-loop replay): the storage bench's
    /// average service time.
    pub average_service_time_ns: f64,
    /// Mean time from each operation's submission to its completion: the device's own time, without the wait
    /// for a free slot or for an issue that fell behind the trace (equal to the service time when nothing did).
    /// None in results written before it existed.
    #[serde(default)]
    pub average_device_time_ns: Option<f64>,
    /// Boxed, as the other large figures of a result are, to keep the analysis enum small.
    pub latency_ns: Box<LatencyNs>,
    pub read_latency_ns: Option<Box<LatencyNs>>,
    pub write_latency_ns: Option<Box<LatencyNs>>,
    /// None with `--as-fast-as-possible`.
    pub fidelity: Option<ReplayFidelity>,
}
