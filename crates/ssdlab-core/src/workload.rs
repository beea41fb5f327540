//! The workload: what to issue, where, how much and how fast. A validated value; building one from CLI flags
//! (and naming the flag at fault) is the binary's job, but every rule a device imposes is checked here in
//! [`Workload::validate`], so methods that build workloads in code get the same checks.

use crate::device::{DeviceInfo, Op};
use crate::units::{BinaryBytes, Rate};
use serde::{Deserialize, Serialize};

/// The `--rw` modes, as in fio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    RandRw,
    Trim,
    RandTrim,
}

impl RwMode {
    pub const NAMES: &'static str = "read, write, randread, randwrite, randrw, trim or randtrim";

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "randrw" => RwMode::RandRw,
            "trim" => RwMode::Trim,
            "randtrim" => RwMode::RandTrim,
            _ => return None,
        })
    }

    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim
        )
    }

    /// Whether the mode changes data on the device (writes or discards).
    pub fn modifies(self) -> bool {
        !matches!(self, RwMode::Read | RwMode::RandRead)
    }

    /// The percentage of operations that are reads (the rest are writes or discards).
    pub fn read_percent(self, mix: u8) -> u8 {
        match self {
            RwMode::Read | RwMode::RandRead => 100,
            RwMode::RandRw => mix,
            _ => 0,
        }
    }

    /// The operation issued when an operation is not a read.
    pub fn modifying_op(self) -> Op {
        if matches!(self, RwMode::Trim | RwMode::RandTrim) {
            Op::Discard
        } else {
            Op::Write
        }
    }
}

/// How offsets are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Sequential,
    /// Uniform random; with `random_map` every block is touched exactly once per pass (fio's default).
    Random {
        random_map: bool,
    },
}

/// The byte range a workload touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Span {
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// When the workload stops issuing: at whichever limit comes first. With none set it runs one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StopAt {
    pub runtime_ns: Option<u64>,
    pub bytes: Option<u64>,
    pub passes: Option<u64>,
}

/// A complete description of one phase of I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Workload {
    pub rw: RwMode,
    /// Reads as a percentage of operations, for `randrw`.
    pub mix_read_percent: u8,
    pub pattern: Pattern,
    pub block_bytes: u64,
    pub queue_depth: u32,
    pub span: Span,
    pub stop: StopAt,
    pub rate: Option<Rate>,
    pub seed: u64,
    /// Write a checkable pattern and check it on every read.
    pub verify: bool,
}

/// Why a workload cannot run on a device. Each variant names the setting at fault; the binary maps it to a flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("--bs {bs}: block size must be between 512 B and 64 MiB")]
    BlockSizeRange { bs: u64 },
    #[error(
        "--bs {bs}: not a multiple of the device's logical block size ({logical} bytes); use a multiple such as {suggestion}"
    )]
    BlockSizeAlignment { bs: u64, logical: u32, suggestion: u64 },
    #[error("--qd {qd}: queue depth must be between 1 and 1024")]
    QueueDepth { qd: u32 },
    #[error("--mix {mix}: the read percentage must be between 0 and 100")]
    Mix { mix: u8 },
    #[error(
        "--span {offset}:{len}: offset and length must be multiples of the logical block size ({logical} bytes)"
    )]
    SpanAlignment { offset: u64, len: u64, logical: u32 },
    #[error("--span ends at byte {end}, beyond the device's {capacity} bytes ({human}); shorten it")]
    SpanBeyondDevice { end: u64, capacity: u64, human: String },
    #[error("--span holds {len} bytes, less than one {bs}-byte block; make the span larger or --bs smaller")]
    SpanTooSmall { len: u64, bs: u64 },
    #[error("--qd {qd} x --bs {bs} needs {need} of buffers, above the 4 GiB limit; lower --qd or --bs")]
    BufferMemory { qd: u32, bs: u64, need: String },
    #[error("--rate must be above zero")]
    Rate,
    #[error("--verify with trim: discarded blocks hold no pattern to verify; drop --verify")]
    VerifyTrim,
    #[error("--{flag} 0: must be above zero")]
    ZeroLimit { flag: &'static str },
    #[error("--jobs {jobs}: must be between 1 and {MAX_JOBS}")]
    Jobs { jobs: u32 },
    #[error(
        "--jobs {jobs} x --qd {qd} x --bs {bs} needs {need} of buffers, above the 4 GiB limit; lower --jobs, --qd or --bs"
    )]
    JobsBufferMemory {
        jobs: u32,
        qd: u32,
        bs: u64,
        need: String,
    },
    #[error(
        "--jobs {jobs} x --qd {qd} keeps {slots} operations in flight, above the {MAX_SLOTS_IN_FLIGHT} ssdlab allows together; lower --jobs or --qd"
    )]
    JobsInFlight { jobs: u32, qd: u32, slots: u64 },
    #[error(
        "--jobs {jobs} with --verify: each job writes its own share of the span, and {blocks} blocks cannot be shared among {jobs} jobs; lower --jobs or widen --span"
    )]
    VerifyShares { jobs: u32, blocks: u64 },
}

/// The most operations all jobs keep in flight together: an io_uring holds at most 32,768 entries, and a cache over
/// the jobs' one device adds its own destaging to theirs.
pub const MAX_SLOTS_IN_FLIGHT: u64 = 8192;

/// The most jobs one workload runs (fio allows more; beyond this a job per core is far past any machine ssdlab
/// is run on, and every job pins its own buffers).
pub const MAX_JOBS: u32 = 64;

/// The most buffer memory one phase may pin (queue depth x block size).
pub const BUFFER_LIMIT_BYTES: u64 = 4 << 30;

impl Workload {
    /// Checks the workload against the device; every error names the flag and the fix.
    pub fn validate(&self, info: &DeviceInfo) -> Result<(), WorkloadError> {
        let bs = self.block_bytes;
        if !(512..=64 << 20).contains(&bs) {
            return Err(WorkloadError::BlockSizeRange { bs });
        }
        let logical = info.logical_block_bytes.max(1);
        if !bs.is_multiple_of(logical as u64) {
            let suggestion = bs.next_multiple_of(logical as u64);
            return Err(WorkloadError::BlockSizeAlignment {
                bs,
                logical,
                suggestion,
            });
        }
        if !(1..=1024).contains(&self.queue_depth) {
            return Err(WorkloadError::QueueDepth { qd: self.queue_depth });
        }
        if self.mix_read_percent > 100 {
            return Err(WorkloadError::Mix {
                mix: self.mix_read_percent,
            });
        }
        let Span {
            offset_bytes: offset,
            len_bytes: len,
        } = self.span;
        if !offset.is_multiple_of(logical as u64) || !len.is_multiple_of(logical as u64) {
            return Err(WorkloadError::SpanAlignment { offset, len, logical });
        }
        let end = offset.saturating_add(len);
        if end > info.capacity_bytes {
            let human = BinaryBytes(info.capacity_bytes).to_string();
            return Err(WorkloadError::SpanBeyondDevice {
                end,
                capacity: info.capacity_bytes,
                human,
            });
        }
        if len < bs {
            return Err(WorkloadError::SpanTooSmall { len, bs });
        }
        let need = self.queue_depth as u64 * bs;
        if need > BUFFER_LIMIT_BYTES {
            let need = BinaryBytes(need).to_string();
            return Err(WorkloadError::BufferMemory {
                qd: self.queue_depth,
                bs,
                need,
            });
        }
        if let Some(Rate::Iops(v) | Rate::BytesPerS(v)) = self.rate
            && (v <= 0.0 || !v.is_finite())
        {
            return Err(WorkloadError::Rate);
        }
        if self.verify && self.rw.modifying_op() == Op::Discard {
            return Err(WorkloadError::VerifyTrim);
        }
        for (flag, value) in [
            ("runtime", self.stop.runtime_ns),
            ("bytes", self.stop.bytes),
            ("passes", self.stop.passes),
        ] {
            if value == Some(0) {
                return Err(WorkloadError::ZeroLimit { flag });
            }
        }
        Ok(())
    }

    /// Checks that `jobs` copies of this workload (fio's numjobs) can run side by side: a count in range, their
    /// buffers together within the limit, and with verify a share of the span for each job.
    pub fn validate_jobs(&self, jobs: u32) -> Result<(), WorkloadError> {
        if !(1..=MAX_JOBS).contains(&jobs) {
            return Err(WorkloadError::Jobs { jobs });
        }
        let slots = u64::from(jobs) * u64::from(self.queue_depth);
        if slots > MAX_SLOTS_IN_FLIGHT {
            return Err(WorkloadError::JobsInFlight {
                jobs,
                qd: self.queue_depth,
                slots,
            });
        }
        let need = u64::from(jobs) * u64::from(self.queue_depth) * self.block_bytes;
        if jobs > 1 && need > BUFFER_LIMIT_BYTES {
            return Err(WorkloadError::JobsBufferMemory {
                jobs,
                qd: self.queue_depth,
                bs: self.block_bytes,
                need: BinaryBytes(need).to_string(),
            });
        }
        if self.verify && self.blocks() < u64::from(jobs) {
            return Err(WorkloadError::VerifyShares {
                jobs,
                blocks: self.blocks(),
            });
        }
        Ok(())
    }

    /// Job `job` of `jobs` copies of this workload, as fio's numjobs runs them: each job is the whole workload
    /// (its queue depth, its rate, its byte and pass limits) over the whole span with offsets of its own, so
    /// job 0 is this workload exactly and a run of one job replays as it always did. With verify the jobs split
    /// the span instead, each writing and checking its own share, since two jobs writing one block could not
    /// tell which pattern a read should find. The verify pattern stays keyed by the workload's seed.
    pub fn job(&self, jobs: u32, job: u32) -> Workload {
        assert!(job < jobs, "job {job} of {jobs}");
        let mut one = self.clone();
        if job > 0 {
            one.seed = crate::rng::splitmix64(self.seed ^ u64::from(job).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
        if self.verify && jobs > 1 {
            let blocks = self.blocks();
            let share = blocks / u64::from(jobs);
            let first = share * u64::from(job);
            let count = if job + 1 == jobs { blocks - first } else { share };
            one.span = Span {
                offset_bytes: self.span.offset_bytes + first * self.block_bytes,
                len_bytes: count * self.block_bytes,
            };
        }
        one
    }

    /// Whole blocks in the span (a partial block at the end is never touched).
    pub fn blocks(&self) -> u64 {
        self.span.len_bytes / self.block_bytes
    }

    /// Nanoseconds between intended issue times under the rate limit, if any.
    pub fn issue_interval_ns(&self) -> Option<f64> {
        self.rate.map(|rate| match rate {
            Rate::Iops(iops) => 1e9 / iops,
            Rate::BytesPerS(bps) => 1e9 * self.block_bytes as f64 / bps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{ClockKind, TargetKind};

    pub(crate) fn info(capacity: u64, logical: u32) -> DeviceInfo {
        DeviceInfo {
            target: "test".into(),
            kind: TargetKind::Null,
            model: "test".into(),
            capacity_bytes: capacity,
            logical_block_bytes: logical,
            physical_block_bytes: logical,
            memory_align_bytes: logical,
            max_transfer_bytes: u64::MAX,
            discard_supported: true,
            discard_max_bytes: u64::MAX,
            rotational: false,
            clock: ClockKind::Real,
            backend: "test".into(),
            direct_io: true,
            notes: vec![],
            drive: Default::default(),
        }
    }

    fn workload() -> Workload {
        Workload {
            rw: RwMode::RandRead,
            mix_read_percent: 70,
            pattern: Pattern::Random { random_map: true },
            block_bytes: 4096,
            queue_depth: 32,
            span: Span {
                offset_bytes: 0,
                len_bytes: 1 << 20,
            },
            stop: StopAt::default(),
            rate: None,
            seed: 1,
            verify: false,
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let dev = info(1 << 20, 4096);
        assert_eq!(workload().validate(&dev), Ok(()));
        let e = Workload {
            block_bytes: 6144,
            ..workload()
        }
        .validate(&dev)
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--bs 6144") && e.to_string().contains("8192"),
            "{e}"
        );
        let e = Workload {
            queue_depth: 0,
            ..workload()
        }
        .validate(&dev)
        .unwrap_err();
        assert!(e.to_string().starts_with("--qd 0"));
        let span = Span {
            offset_bytes: 4096,
            len_bytes: 1 << 20,
        };
        let e = Workload { span, ..workload() }.validate(&dev).unwrap_err();
        assert!(e.to_string().starts_with("--span ends at byte"), "{e}");
        let e = Workload {
            block_bytes: 128 << 20,
            ..workload()
        }
        .validate(&dev)
        .unwrap_err();
        assert!(e.to_string().contains("between 512 B and 64 MiB"));
    }

    #[test]
    fn rate_intervals() {
        let w = Workload {
            rate: Some(Rate::Iops(1000.0)),
            ..workload()
        };
        assert_eq!(w.issue_interval_ns(), Some(1e6));
        let w = Workload {
            rate: Some(Rate::BytesPerS(4096.0 * 100.0)),
            ..workload()
        };
        assert_eq!(w.issue_interval_ns(), Some(1e7));
    }
}
