//! `ssdlab trace synth`: synthetic traces with the mix of a desktop storage bench, for demos and tests.
//!
//! They are not AnandTech's Storage Bench traces (those were never published); they are built to have the
//! character their descriptions give: bursts of mostly small random I/O with sequential runs, a hot region that
//! a cache can hold, flushes, idle gaps between bursts, and for `heavy` more writes, larger transfers, deeper
//! bursts and TRIMs. The exact mix is in [`Profile::mix`] and docs/trace.md. Every draw comes from the seed, so
//! the same seed writes the same trace.

use ssdlab_core::device::Op;
use ssdlab_core::rng::Rng;

use crate::TraceOp;

/// Which desktop mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Office and browsing: 65% reads, small transfers, short bursts.
    Light,
    /// Workstation (media, builds, VMs): 45% reads, large transfers mixed in, deep bursts, TRIMs.
    Heavy,
}

/// One profile's mix.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Reads as a percentage of data operations.
    pub read_percent: u32,
    /// (transfer size, weight) of reads and of writes.
    pub read_sizes: &'static [(u64, u32)],
    pub write_sizes: &'static [(u64, u32)],
    /// Share of operations that continue one of 8 sequential streams; the rest land at random (4 KiB aligned).
    pub sequential_percent: u32,
    /// Share of random operations that land in the hot region (the first `hot_bytes` of the span).
    pub hot_percent: u32,
    pub hot_bytes: u64,
    /// Bursts start as a Poisson process at this rate; each holds a uniform number of operations in
    /// `burst_ops`, issued `op_gap_ns` apart.
    pub bursts_per_s: f64,
    pub burst_ops: (u32, u32),
    pub op_gap_ns: u64,
    /// A flush after every this many writes; a 1 MiB TRIM after every this many writes (0: none).
    pub flush_every_writes: u32,
    pub trim_every_writes: u32,
    /// The footprint the trace addresses by default.
    pub span_bytes: u64,
}

const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Light => "light",
            Profile::Heavy => "heavy",
        }
    }

    pub fn mix(self) -> Mix {
        match self {
            Profile::Light => Mix {
                read_percent: 65,
                read_sizes: &[
                    (4 * KIB, 45),
                    (8 * KIB, 10),
                    (16 * KIB, 10),
                    (32 * KIB, 10),
                    (64 * KIB, 10),
                    (128 * KIB, 15),
                ],
                write_sizes: &[
                    (4 * KIB, 60),
                    (8 * KIB, 10),
                    (16 * KIB, 10),
                    (64 * KIB, 10),
                    (128 * KIB, 10),
                ],
                sequential_percent: 50,
                hot_percent: 30,
                hot_bytes: GIB,
                bursts_per_s: 50.0,
                burst_ops: (1, 8),
                op_gap_ns: 30_000,
                flush_every_writes: 64,
                trim_every_writes: 0,
                span_bytes: 16 * GIB,
            },
            Profile::Heavy => Mix {
                read_percent: 45,
                read_sizes: &[
                    (4 * KIB, 30),
                    (16 * KIB, 10),
                    (64 * KIB, 20),
                    (128 * KIB, 30),
                    (MIB, 10),
                ],
                write_sizes: &[
                    (4 * KIB, 40),
                    (16 * KIB, 10),
                    (64 * KIB, 15),
                    (128 * KIB, 25),
                    (MIB, 10),
                ],
                sequential_percent: 55,
                hot_percent: 20,
                hot_bytes: 2 * GIB,
                bursts_per_s: 60.0,
                burst_ops: (2, 16),
                op_gap_ns: 50_000,
                flush_every_writes: 128,
                trim_every_writes: 256,
                span_bytes: 32 * GIB,
            },
        }
    }
}

fn pick(rng: &mut Rng, sizes: &[(u64, u32)]) -> u64 {
    let total: u32 = sizes.iter().map(|s| s.1).sum();
    let mut draw = rng.below(total as u64) as u32;
    for &(size, weight) in sizes {
        if draw < weight {
            return size;
        }
        draw -= weight;
    }
    sizes[sizes.len() - 1].0
}

/// A trace of `profile` lasting `duration_ns`, addressing `span_bytes` (the profile's footprint when None).
pub fn generate(profile: Profile, seed: u64, duration_ns: u64, span_bytes: Option<u64>) -> Vec<TraceOp> {
    let mix = profile.mix();
    let span = span_bytes.unwrap_or(mix.span_bytes).max(4 * MIB) / (4 * KIB) * (4 * KIB);
    let hot = mix.hot_bytes.min(span / 2);
    let mut rng = Rng::stream(seed, 0x7ACE);
    let mut streams: Vec<u64> = (0..8).map(|_| rng.below(span / (4 * KIB)) * 4 * KIB).collect();
    let mut ops = Vec::new();
    let mut writes: u64 = 0;
    let mut t_ns: u64 = 0;
    loop {
        // The gap to the next burst: exponential with the profile's mean.
        let gap_s = -(1.0 - rng.unit_f64()).ln() / mix.bursts_per_s;
        t_ns += (gap_s * 1e9) as u64;
        if t_ns >= duration_ns {
            break;
        }
        let (lo, hi) = mix.burst_ops;
        let count = lo + rng.below((hi - lo + 1) as u64) as u32;
        for i in 0..count {
            let at_ns = t_ns + i as u64 * mix.op_gap_ns;
            let read = rng.below(100) < mix.read_percent as u64;
            let len = pick(&mut rng, if read { mix.read_sizes } else { mix.write_sizes }).min(span);
            let stream = rng.below(streams.len() as u64) as usize;
            let offset = if rng.below(100) < mix.sequential_percent as u64 && streams[stream] + len <= span {
                streams[stream]
            } else {
                let region = if rng.below(100) < mix.hot_percent as u64 {
                    hot
                } else {
                    span
                };
                rng.below((region - len) / (4 * KIB) + 1) * 4 * KIB
            };
            streams[stream] = if offset + len >= span { 0 } else { offset + len };
            ops.push(TraceOp {
                at_ns,
                op: if read { Op::Read } else { Op::Write },
                offset_bytes: offset,
                len_bytes: len,
            });
            if !read {
                writes += 1;
                if mix.flush_every_writes > 0 && writes.is_multiple_of(mix.flush_every_writes as u64) {
                    ops.push(TraceOp {
                        at_ns,
                        op: Op::Flush,
                        offset_bytes: 0,
                        len_bytes: 0,
                    });
                }
                if mix.trim_every_writes > 0 && writes.is_multiple_of(mix.trim_every_writes as u64) {
                    let offset = rng.below((span - MIB) / MIB + 1) * MIB;
                    ops.push(TraceOp {
                        at_ns,
                        op: Op::Discard,
                        offset_bytes: offset,
                        len_bytes: MIB,
                    });
                }
            }
        }
        t_ns += count as u64 * mix.op_gap_ns;
    }
    ops
}

/// `ops` as a fio iolog version 3 (microsecond timestamps) on `file`, which `fio --read_iolog` and
/// `ssdlab test replay` both replay.
pub fn to_fio_iolog(ops: &[TraceOp], file: &str) -> String {
    let mut text = format!("fio version 3 iolog\n0 {file} add\n0 {file} open\n");
    for op in ops {
        let action = match op.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Discard => "trim",
            Op::Flush => "sync",
        };
        text.push_str(&format!(
            "{} {file} {action} {} {}\n",
            op.at_ns / 1000,
            op.offset_bytes,
            op.len_bytes
        ));
    }
    let end = ops.last().map_or(0, |o| o.at_ns / 1000);
    text.push_str(&format!("{end} {file} close\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReadOptions, TraceFormat, read};

    #[test]
    fn profiles_have_their_documented_mix_and_replay_as_written() {
        for profile in [Profile::Light, Profile::Heavy] {
            let mix = profile.mix();
            let ops = generate(profile, 7, 20_000_000_000, None);
            let data: Vec<&TraceOp> = ops
                .iter()
                .filter(|o| matches!(o.op, Op::Read | Op::Write))
                .collect();
            let reads = data.iter().filter(|o| o.op == Op::Read).count() as f64 / data.len() as f64;
            assert!(
                (reads * 100.0 - mix.read_percent as f64).abs() < 3.0,
                "{profile:?} reads {reads}"
            );
            assert!(
                data.iter()
                    .all(|o| o.offset_bytes + o.len_bytes <= mix.span_bytes && o.offset_bytes % 4096 == 0)
            );
            // About bursts_per_s x mean burst x 20 s operations.
            let expected = mix.bursts_per_s * (mix.burst_ops.0 + mix.burst_ops.1) as f64 / 2.0 * 20.0;
            assert!(
                (data.len() as f64 / expected - 1.0).abs() < 0.1,
                "{profile:?}: {} ops, {expected}",
                data.len()
            );
            assert!(ops.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
            assert_eq!(
                generate(profile, 7, 20_000_000_000, None),
                ops,
                "the seed decides everything"
            );
            assert_ne!(generate(profile, 8, 20_000_000_000, None), ops);
            // Written as fio iolog v3 and read back: the same operations, to the microsecond.
            let text = to_fio_iolog(&ops, "/dev/ssdlab-synth");
            let back = read(&text, None, ReadOptions::default()).unwrap();
            assert_eq!(back.format, TraceFormat::FioIolog);
            assert_eq!(back.ops.len(), ops.len());
            assert!(back.ops.iter().zip(&ops).all(|(b, o)| b.op == o.op
                && b.offset_bytes == o.offset_bytes
                && b.len_bytes == o.len_bytes
                && b.at_ns == o.at_ns / 1000 * 1000));
        }
        let heavy = generate(Profile::Heavy, 1, 20_000_000_000, None);
        assert!(heavy.iter().any(|o| o.op == Op::Discard) && heavy.iter().any(|o| o.op == Op::Flush));
    }
}
