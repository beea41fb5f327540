//! Turning flags into a validated plan: every value parsed, checked against the device, and every refusal worded
//! as "the flag, what is wrong, how to fix it". Nothing here writes to a device.

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::{parse_duration_ns, parse_rate, parse_size};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};
use ssdlab_io::{Engine, OpenRequest, RealDevice, guard, open_target};

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

/// Builds the virtual SSD a `sim:` target names.
pub fn open_sim(target: &str, spec: &str) -> Result<ssdlab_sim::device::SimDevice> {
    let parsed = ssdlab_sim::spec::SimSpec::parse(spec).map_err(|e| anyhow!("--target {target}: {e}"))?;
    ssdlab_sim::device::SimDevice::new(target, &parsed).map_err(|e| anyhow!("--target {target}: {e}"))
}

/// What a `file:` target looked like before ssdlab opened it (which may create or extend it).
pub struct FileSnapshot {
    path: Option<std::path::PathBuf>,
    /// None when the file did not exist.
    len: Option<u64>,
}

impl FileSnapshot {
    /// For targets that are not files.
    pub fn none() -> Self {
        FileSnapshot {
            path: None,
            len: None,
        }
    }

    pub fn take(spec: &TargetSpec) -> Self {
        match spec {
            TargetSpec::File { path, .. } => FileSnapshot {
                path: Some(path.clone()),
                len: std::fs::symlink_metadata(path)
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len()),
            },
            _ => FileSnapshot {
                path: None,
                len: None,
            },
        }
    }

    /// Removes the file if ssdlab created it, or truncates it back if ssdlab extended it. Only for use before
    /// any I/O was issued.
    pub fn restore(&self) {
        let Some(path) = &self.path else { return };
        match self.len {
            None => {
                let _ = std::fs::remove_file(path);
            }
            Some(len) => {
                if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path)
                    && file.metadata().is_ok_and(|m| m.len() > len)
                {
                    let _ = file.set_len(len);
                }
            }
        }
    }
}

/// Opens a real target, applying DESIGN's destructive-safety rules when `modifies` is set:
/// a block device needs `--allow-destroy`, is never reached through a symlink, and is refused when it looks in
/// use unless `--force` is also given. The check happens before the device is opened for writing.
pub fn open_real(args: &TargetArgs, spec: &TargetSpec, modifies: bool) -> Result<RealDevice> {
    let target = &args.target;
    if let TargetSpec::Block { path } = spec
        && modifies
    {
        if !args.allow_destroy {
            bail!(
                "--target {target}: this writes to a block device and destroys its data; add --allow-destroy if \
                 that is what you want (nothing was written)"
            );
        }
        let meta =
            std::fs::symlink_metadata(path).with_context(|| format!("--target {target}: cannot stat"))?;
        if meta.file_type().is_symlink() {
            bail!(
                "--target {target} is a symbolic link; ssdlab never follows a link into a destructive operation: \
                 give the device's own path ({})",
                path.canonicalize()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| "unresolved".into())
            );
        }
        let findings = guard::destructive_findings(path)
            .with_context(|| format!("--target {target}: cannot check whether the device is in use"))?;
        if !findings.is_empty() && !args.force {
            let found: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
            bail!(
                "refusing to write to {target}: {}. Nothing was written. If you are sure the data is expendable, \
                 add --force",
                found.join("; ")
            );
        }
    }
    let request = OpenRequest {
        write: modifies,
        engine: engine(args.engine),
        exclusive: modifies && !args.force,
        no_atime: true,
        allow_atime: true,
    };
    Ok(open_target(target, spec, request)?)
}

/// Opens any target as a trait object, with the destructive-safety gate when `modifies`. Methods run through
/// this; `run` keeps concrete types so its hot loop is monomorphized.
pub fn open_any(args: &TargetArgs, modifies: bool) -> Result<(Box<dyn ssdlab_core::Device>, FileSnapshot)> {
    let spec = TargetSpec::parse(&args.target).map_err(|e| anyhow!("--target {e}"))?;
    if let TargetSpec::Sim { spec } = &spec {
        return Ok((Box::new(open_sim(&args.target, spec)?), FileSnapshot::none()));
    }
    let before = FileSnapshot::take(&spec);
    let device: Box<dyn ssdlab_core::Device> = match open_real(args, &spec, modifies)? {
        RealDevice::Uring(d) => Box::new(d),
        RealDevice::Psync(d) => Box::new(d),
        RealDevice::Null(d) => Box::new(d),
    };
    Ok((device, before))
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
