//! Turning flags into a validated plan: every value parsed, checked against the device, and every refusal worded
//! as "the flag, what is wrong, how to fix it". Nothing here writes to a device; targets are opened through
//! `ssdlab-targets`, which applies the safety gate.

use anyhow::{Result, anyhow, bail};
use ssdlab_core::units::{parse_duration_ns, parse_rate, parse_size};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};
use ssdlab_io::Engine;
use ssdlab_targets::{Access, ForceScope, OpenOptions, Opened};

use crate::cli::{EngineArg, RunArgs, TargetArgs};

/// Parses a size flag, naming the flag on failure.
pub fn size_flag(flag: &str, value: &str) -> Result<u64> {
    parse_size(value).map_err(|e| anyhow!("--{flag} {e}"))
}

/// Parses a duration flag, naming the flag on failure.
pub fn duration_flag(flag: &str, value: &str) -> Result<u64> {
    parse_duration_ns(value).map_err(|e| anyhow!("--{flag} {e}"))
}

/// Parses `--span`: `N%` of the capacity (rounded down to the logical block) or `OFFSET:LEN`.
pub fn parse_span(value: &str, capacity: u64, logical: u32) -> Result<Span> {
    if let Some(percent) = value.strip_suffix('%') {
        let percent: f64 = percent.trim().parse().map_err(|_| {
            anyhow!("--span {value}: write a percentage such as 100% or 25%, or OFFSET:LEN such as 1g:8g")
        })?;
        if !(percent > 0.0 && percent <= 100.0) {
            bail!("--span {value}: the percentage must be above 0 and at most 100");
        }
        let len = (capacity as f64 * percent / 100.0) as u64 / logical as u64 * logical as u64;
        return Ok(Span {
            offset_bytes: 0,
            len_bytes: len,
        });
    }
    let (offset, len) = value.split_once(':').ok_or_else(|| {
        anyhow!("--span {value}: write a percentage such as 100%, or OFFSET:LEN such as 1g:8g")
    })?;
    let offset = parse_size(offset).map_err(|e| anyhow!("--span {value}: the offset {e}"))?;
    let len = parse_size(len).map_err(|e| anyhow!("--span {value}: the length {e}"))?;
    if len == 0 {
        bail!("--span {value}: the length must be above zero");
    }
    Ok(Span {
        offset_bytes: offset,
        len_bytes: len,
    })
}

/// The flags of `run` that do not depend on the device, parsed.
pub struct RunFlags {
    pub rw: RwMode,
    pub block_bytes: u64,
    pub stop: StopAt,
}

pub fn run_flags(args: &RunArgs) -> Result<RunFlags> {
    let rw = RwMode::parse(&args.rw).ok_or_else(|| anyhow!("--rw {}: use {}", args.rw, RwMode::NAMES))?;
    let block_bytes = size_flag("bs", &args.bs)?;
    let mut stop = StopAt {
        runtime_ns: args
            .runtime
            .as_deref()
            .map(|v| duration_flag("runtime", v))
            .transpose()?,
        bytes: args.bytes.as_deref().map(|v| size_flag("bytes", v)).transpose()?,
        passes: args.passes,
    };
    if stop == StopAt::default() {
        stop.runtime_ns = Some(10_000_000_000);
    }
    if args.mix > 100 {
        bail!(
            "--mix {}: the read percentage must be between 0 and 100",
            args.mix
        );
    }
    Ok(RunFlags {
        rw,
        block_bytes,
        stop,
    })
}

/// Builds and validates the workload of `run` for an opened device.
pub fn run_workload(args: &RunArgs, flags: &RunFlags, device: &ssdlab_core::DeviceInfo) -> Result<Workload> {
    let span = parse_span(&args.span, device.capacity_bytes, device.logical_block_bytes)?;
    let rate = args
        .rate
        .as_deref()
        .map(|v| parse_rate(v).map_err(|e| anyhow!("--rate {e}")))
        .transpose()?;
    let workload = Workload {
        rw: flags.rw,
        mix_read_percent: args.mix,
        pattern: if flags.rw.is_random() {
            Pattern::Random {
                random_map: !args.norandommap,
            }
        } else {
            Pattern::Sequential
        },
        block_bytes: flags.block_bytes,
        queue_depth: args.qd,
        span,
        stop: flags.stop,
        rate,
        seed: args.seed,
        verify: args.verify,
    };
    workload.validate(device)?;
    Ok(workload)
}

fn engine(arg: EngineArg) -> Engine {
    match arg {
        EngineArg::Auto => Engine::Auto,
        EngineArg::IoUring => Engine::IoUring,
        EngineArg::Psync => Engine::Psync,
    }
}

/// How a command uses its `--target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Writes: the safety gate applies (its exclusive claim held until the device closes, `--force` or not); a
    /// `file:` target is laid out (created or extended to its size).
    Writes,
    /// Writes the end of a whole device (op): `--force` lets only a partition table through.
    WritesTail,
    /// Only reads what is there: never creates or extends a file, never writes (read benchmarks, scans, op's
    /// preview).
    Reads,
}

/// Opens `--target` through the one opener.
pub fn open_target(args: &TargetArgs, usage: Use) -> Result<Opened> {
    open_target_as(args, usage, "--target")
}

/// [`open_target`] for a target given by another flag (`--device`), which the messages then name.
pub fn open_target_as(args: &TargetArgs, usage: Use, flag: &'static str) -> Result<Opened> {
    let destructive = matches!(usage, Use::Writes | Use::WritesTail);
    let access = if destructive {
        Access::Destructive {
            allow_destroy: args.allow_destroy,
            force: args.force,
        }
    } else {
        Access::ReadOnly
    };
    let options = OpenOptions {
        access,
        engine: engine(args.engine),
        allow_atime: true,
        lay_out_files: destructive,
        flag,
        force_scope: match usage {
            Use::WritesTail => ForceScope::PartitionTables,
            _ => ForceScope::Signatures,
        },
    };
    Ok(ssdlab_targets::open(&args.target, &options)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(
            parse_span("100%", 1 << 30, 512).unwrap(),
            Span {
                offset_bytes: 0,
                len_bytes: 1 << 30
            }
        );
        assert_eq!(parse_span("25%", 1000 * 512, 512).unwrap().len_bytes, 250 * 512);
        assert_eq!(
            parse_span("1g:2g", 0, 512).unwrap(),
            Span {
                offset_bytes: 1 << 30,
                len_bytes: 2 << 30
            }
        );
        for bad in ["0%", "101%", "half", "1g", "1g:0", "x:1g"] {
            let e = parse_span(bad, 1 << 30, 512).unwrap_err().to_string();
            assert!(e.starts_with("--span"), "{bad}: {e}");
        }
    }
}
