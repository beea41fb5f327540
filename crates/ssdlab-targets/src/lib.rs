//! ssdlab-targets: the one place a `--target` becomes a device.
//!
//! [`open`] takes the target string and the [`Access`] a command needs and returns an [`AnyDevice`], one enum
//! over every backend (io_uring, pread/pwrite, null, the virtual SSD, the DRAM cache over any of them, and a
//! device a caller built, `Dyn`, which tests use to wrap a target in faults), so a runner generic over
//! [`Device`] is compiled once per backend and no command looks at a target's prefix. The destructive-safety gate of
//! DESIGN.md section 2 lives here and nowhere else: a write to a block device needs `allow_destroy`, is never
//! made through a symbolic link, is refused always when the device is in use (mounted, swap, claimed), and when
//! it only carries signs of past use unless `force`. Only a benchmark lays out (creates or extends) a file.
//!
//! It prints nothing: refusals come back as [`OpenError`]s whose text names the flag and the fix, and what a
//! closing cache had to say (a hot map that could not be saved) waits in [`close_notes`] for the binary.
#![forbid(unsafe_code)]

mod any;
mod cpu_load;
mod drive_set;
mod hot_map;
mod jobs;
mod reuse;
mod undo;

use std::path::Path;

pub use any::{AnyDevice, DeviceVisitor};
pub use drive_set::drive_set;
pub use hot_map::{close_notes, default_state_dir};
pub use jobs::{JobSource, JobTarget};
pub use reuse::on_this_threads_ring;
use ssdlab_cache::{CacheConfig, CachedDevice};
use ssdlab_core::device::Device;
use ssdlab_core::target::TargetSpec;
use ssdlab_io::claim::{ClaimError, ClaimedBlock, claim_block};
use ssdlab_io::guard::{self, OwnClaim};
use ssdlab_io::{Engine, OpenRequest, RealDevice, open_target};
pub use undo::Undo;

/// What the command will do to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: no permission flag is needed.
    ReadOnly,
    /// Writes (or discards): the safety gate applies.
    Destructive { allow_destroy: bool, force: bool },
}

impl Access {
    fn writes(self) -> bool {
        matches!(self, Access::Destructive { .. })
    }
}

/// What `--force` may override on a block device, beyond the `allow_destroy` every write needs. A device in use
/// (mounted, swap, held, claimed) is refused whatever the scope, and the exclusive claim (O_EXCL) is held from
/// the gate's open until the device closes, whatever the scope: `--force` overrides signatures only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceScope {
    /// Every sign of past use: file system, volume, RAID and partition-table signatures, loop devices over the
    /// device that nothing uses (benchmarks, erase).
    Signatures,
    /// Only a partition table (op: it keeps clear of every partition, but discards the whole device's end, where
    /// a file system or volume on the whole device keeps data).
    PartitionTables,
}

impl ForceScope {
    /// The findings `force` cannot override in this scope (signs of past use only; devices in use are refused
    /// before this is asked).
    pub fn unforceable(self, findings: &[guard::Finding]) -> Vec<&guard::Finding> {
        findings
            .iter()
            .filter(|f| !f.in_use && self == ForceScope::PartitionTables && !f.partition_table)
            .collect()
    }
}

/// How to open a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    pub access: Access,
    pub engine: Engine,
    /// Read without moving access times where the file system allows it (O_NOATIME); with `allow_atime` also
    /// open where it is refused (a file of another user), which moves the access time.
    pub allow_atime: bool,
    /// A `file:PATH:SIZE` target may be created, or extended to SIZE, as fio lays out its files (a benchmark).
    /// Off for commands that only look at what is there (scans): they never create or extend a file.
    pub lay_out_files: bool,
    /// The flag that named the target (`--target`, `--device`), for messages.
    pub flag: &'static str,
    /// What `force` overrides on a block device.
    pub force_scope: ForceScope,
}

/// Why a target was not opened. Nothing was written, and nothing created in this run is left behind.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The target string, or a value in it, is not understood; the text starts with the flag.
    #[error("{0}")]
    Spec(String),
    /// The safety gate or the access mode refused it; the text says why and what to do.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] ssdlab_io::OpenError),
}

/// An opened target and what to do if the command then refuses to run before any I/O.
pub struct Opened {
    pub device: AnyDevice,
    /// Takes back the creation or extension of a `file:` target.
    pub undo: Undo,
}

/// Parses `target` and opens it with `options`, applying the safety gate before anything is opened for
/// writing.
pub fn open(target: &str, options: &OpenOptions) -> Result<Opened, OpenError> {
    let spec = TargetSpec::parse(target).map_err(|e| OpenError::Spec(format!("{} {e}", options.flag)))?;
    open_spec(target, &spec, options)
}

/// Opens an already parsed target (a path that is not UTF-8 cannot be written as a target string); `target`
/// names it in messages and results.
pub fn open_spec(target: &str, spec: &TargetSpec, options: &OpenOptions) -> Result<Opened, OpenError> {
    if let TargetSpec::Cached {
        inner,
        inner_target,
        cache,
    } = spec
    {
        return open_cached(target, (inner, inner_target), cache, options);
    }
    if let TargetSpec::Sim { spec } = spec {
        let flag = options.flag;
        let parsed = ssdlab_sim::spec::SimSpec::parse(spec)
            .map_err(|e| OpenError::Spec(format!("{flag} {target}: {e}")))?;
        let device = ssdlab_sim::device::SimDevice::new(target, &parsed)
            .map_err(|e| OpenError::Spec(format!("{flag} {target}: {e}")))?;
        return Ok(Opened {
            device: AnyDevice::Sim(device),
            undo: Undo::none(),
        });
    }
    match (spec, options.access) {
        (TargetSpec::File { path, size, .. }, _) if !options.lay_out_files => {
            existing_file(options.flag, target, path, *size)?
        }
        (TargetSpec::Block { path }, Access::Destructive { allow_destroy, force }) => {
            let claimed = gate_block_device(
                options.flag,
                target,
                path,
                allow_destroy,
                force,
                options.force_scope,
            )?;
            let device = ssdlab_io::open::open_claimed_block(target, claimed, options.flag, options.engine)?;
            return Ok(Opened {
                device: real(device),
                undo: Undo::none(),
            });
        }
        _ => {}
    }
    let request = OpenRequest {
        flag: options.flag,
        write: options.access.writes(),
        engine: options.engine,
        no_atime: true,
        allow_atime: options.allow_atime,
    };
    let opened = open_target(target, spec, request)?;
    Ok(Opened {
        device: real(opened.device),
        undo: Undo::of(opened.laid_out),
    })
}

/// The DRAM cache over the inner target, opened first (and given back if the cache cannot go over it).
fn open_cached(
    target: &str,
    (inner, inner_target): (&TargetSpec, &str),
    cache: &ssdlab_core::target::CacheSpec,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let size_bytes = cache_size(options.flag, target, cache.size_bytes)?;
    let opened = open_spec(inner_target, inner, options)?;
    let block = opened.device.info().logical_block_bytes;
    if !ssdlab_cache::BLOCK.is_multiple_of(u64::from(block)) {
        opened.undo.restore();
        return Err(OpenError::Refused(format!(
            "{} {target}: the cache works in {}-byte blocks and {inner_target} has {block}-byte logical blocks; it cannot be cached",
            options.flag,
            ssdlab_cache::BLOCK
        )));
    }
    let config = CacheConfig {
        seq_cutoff_bytes: cache.seq_cutoff_bytes,
        dirty_limit_percent: cache.dirty_limit_percent,
        cpu_limit_percent: cache.cpu_limit_percent,
        ..CacheConfig::new(size_bytes, cache.mode)
    };
    let real_clock = opened.device.info().clock == ssdlab_core::device::ClockKind::Real;
    let mut cached = Box::new(CachedDevice::new(opened.device, target, config));
    // On a virtual drive the host's CPU is not part of the model: no pass-through there.
    if real_clock && cache.cpu_limit_percent < 100 {
        cached.set_load_probe(cpu_load::probe());
    }
    if let Err(e) = hot_map::attach(options.flag, target, inner, &cache.hot_map, &mut cached) {
        drop(cached);
        opened.undo.restore();
        return Err(e);
    }
    Ok(Opened {
        device: AnyDevice::Cached(cached),
        undo: opened.undo,
    })
}

fn real(device: RealDevice) -> AnyDevice {
    match device {
        RealDevice::Uring(d) => AnyDevice::Uring(d),
        RealDevice::Psync(d) => AnyDevice::Psync(d),
        RealDevice::Null(d) => AnyDevice::Null(d),
    }
}

/// Whether `target` names a virtual drive, cached or not (its results come in virtual time).
pub fn is_virtual(target: &str) -> bool {
    TargetSpec::parse(target).is_ok_and(|spec| spec.is_virtual())
}

/// The cache's size: as given, or min(25% of RAM, 1 GiB); never more than half of this machine's memory.
fn cache_size(flag: &str, target: &str, given: Option<u64>) -> Result<u64, OpenError> {
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .ok_or_else(|| {
            OpenError::Refused(format!(
                "{flag} {target}: cannot read the memory size from /proc/meminfo; give the cache a size="
            ))
        })?;
    match given {
        None => Ok(ssdlab_cache::default_size_bytes(ram)),
        Some(size) if size > ram / 2 => Err(OpenError::Spec(format!(
            "{flag} {target}: size={} MiB is more than half of this machine's {} MiB of memory; give a smaller size=",
            size >> 20,
            ram >> 20
        ))),
        Some(size) => Ok(size),
    }
}

/// A command that only reads reads what exists: it never creates a file or extends one to a given size.
fn existing_file(flag: &str, target: &str, path: &Path, size: Option<u64>) -> Result<(), OpenError> {
    let existing = std::fs::symlink_metadata(path).ok().map(|m| m.len());
    match (existing, size) {
        (None, _) => Err(OpenError::Refused(format!(
            "{flag} {target}: {} does not exist, and a command that only reads never creates a file: write it \
             first (ssdlab run --rw write --target file:{}:SIZE)",
            path.display(),
            path.display()
        ))),
        (Some(len), Some(size)) if size > len => Err(OpenError::Refused(format!(
            "{flag} {target}: {} holds {len} bytes, and a command that only reads never extends a file: give no \
             size, or one of at most {len} bytes",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// DESIGN.md section 2: a block device is written only with `--allow-destroy`, never through a symbolic link,
/// never while in use, and with signs of past use only with `--force`. The device is claimed (opened
/// exclusively, no symlink in its path) first and judged through that descriptor, so the device checked is the
/// device written, and nothing can mount or claim it between the check and the writes.
fn gate_block_device(
    flag: &str,
    target: &str,
    path: &Path,
    allow_destroy: bool,
    force: bool,
    scope: ForceScope,
) -> Result<ClaimedBlock, OpenError> {
    if !allow_destroy {
        return Err(OpenError::Refused(format!(
            "{flag} {target}: this writes to a block device and destroys its data; add --allow-destroy if that is what you want (nothing was written)"
        )));
    }
    let claimed = claim_block(path).map_err(|e| match e {
        ClaimError::Symlink { resolved } => OpenError::Refused(format!(
            "{flag} {target}: a component of its path is a symbolic link; ssdlab never follows a link into a \
             destructive operation: give the device's own path ({resolved})"
        )),
        ClaimError::Busy { findings } if findings.is_empty() => OpenError::Refused(format!(
            "refusing to write to {target}: it is in use (the kernel refused exclusive access: something holds it \
             open exclusively, such as a mount in another namespace, a ZFS pool or a virtual machine). Nothing \
             was written; --force does not override a device in use: release it first"
        )),
        ClaimError::Busy { findings } => OpenError::Refused(format!(
            "refusing to write to {target}: {}. Nothing was written; --force does not override a device in use: \
             unmount it or stop what holds it first",
            findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; ")
        )),
        ClaimError::NotBlockDevice => OpenError::Refused(format!(
            "{flag} {target} is not a block device; for a regular file write file:{}",
            path.display()
        )),
        ClaimError::Os(e) => OpenError::Refused(format!("{flag} {target}: cannot open it: {e}")),
    })?;
    let inspect_error = |e: std::io::Error| {
        OpenError::Refused(format!(
            "{flag} {target}: cannot check whether the device is in use: {e}"
        ))
    };
    let mut findings =
        guard::uses_of_device(claimed.rdev(), OwnClaim::HeldByCaller).map_err(inspect_error)?;
    findings.extend(guard::signature_findings(claimed.file()).map_err(inspect_error)?);
    let in_use: Vec<String> = findings
        .iter()
        .filter(|f| f.in_use)
        .map(|f| f.to_string())
        .collect();
    if !in_use.is_empty() {
        return Err(OpenError::Refused(format!(
            "refusing to write to {target}: {}. Nothing was written; --force does not override a device in use: unmount it or stop what holds it first",
            in_use.join("; ")
        )));
    }
    let unforceable: Vec<String> = scope
        .unforceable(&findings)
        .iter()
        .map(|f| f.to_string())
        .collect();
    if !unforceable.is_empty() {
        return Err(OpenError::Refused(format!(
            "{flag} {target}: refusing to write to it: {}. Nothing was written; this command refuses it even with --force, because \
             it discards the end of the whole device, where that data lives. Partition the drive, or erase \
             it first (ssdlab erase) if its data is expendable",
            unforceable.join("; ")
        )));
    }
    if !findings.is_empty() && !force {
        let found: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
        return Err(OpenError::Refused(format!(
            "refusing to write to {target}: {}. Nothing was written. If you are sure the data is expendable, add --force",
            found.join("; ")
        )));
    }
    Ok(claimed)
}
