//! Opening real targets: block devices and null here, regular files through `file_target` (O_DIRECT,
//! alignment from the kernel).
//!
//! This module decides how a target is driven (io_uring or pread/pwrite, direct or buffered) and describes it in
//! a [`DeviceInfo`]. It never decides whether a write to a block device is allowed: that is the safety gate's
//! (see [`crate::guard`]), made before the device is opened for writing. A file's write rules (no links, no
//! pseudo files, no file in use) are `file_target`'s, checked on the very inode it opens.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ssdlab_core::device::{ClockKind, Device, DeviceInfo, TargetKind};
use ssdlab_core::target::TargetSpec;

use crate::claim::ClaimedBlock;
use crate::common::{Backing, BackingKind, Caching};
use crate::laid_out::LaidOut;
use crate::null::NullDevice;
use crate::psync::PsyncDevice;
use crate::sys;
use crate::uring::{self, UringDevice};

/// Which I/O engine drives a real target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// io_uring when the kernel allows it, else pread/pwrite (and say so).
    #[default]
    Auto,
    IoUring,
    Psync,
}

/// How to open a target.
#[derive(Debug, Clone, Copy)]
pub struct OpenRequest {
    /// The flag that named the target (`--target`, `--device`): every message starts with it.
    pub flag: &'static str,
    pub write: bool,
    pub engine: Engine,
    /// Read a file without updating its access time (O_NOATIME where the caller may use it): a scan must not
    /// change what it measures, nor the times a refresh restores.
    pub no_atime: bool,
    /// With `no_atime`: open anyway (moving the access time) where O_NOATIME is refused (not the owner).
    pub allow_atime: bool,
}

impl Default for OpenRequest {
    fn default() -> Self {
        OpenRequest {
            flag: "--target",
            write: false,
            engine: Engine::default(),
            no_atime: false,
            allow_atime: false,
        }
    }
}

/// Why a target could not be opened. Each message names the target and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Refused(String),
    // The cause is printed in the message, so it is not also the error's source (a field named `source`
    // would be): anyhow's `{:#}` would print it twice.
    #[error("{what}: {cause}")]
    Os { what: String, cause: io::Error },
}

pub(crate) fn os(what: String, cause: io::Error) -> OpenError {
    OpenError::Os { what, cause }
}

/// An opened real target. Opened once per run, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum RealDevice {
    Uring(UringDevice),
    Psync(PsyncDevice),
    Null(NullDevice),
}

impl RealDevice {
    /// The open file or block device behind it; None for null.
    pub fn backing_file(&self) -> Option<&std::fs::File> {
        match self {
            RealDevice::Uring(d) => Some(d.backing_file()),
            RealDevice::Psync(d) => Some(d.backing_file()),
            RealDevice::Null(_) => None,
        }
    }

    pub fn info(&self) -> &DeviceInfo {
        match self {
            RealDevice::Uring(d) => d.info(),
            RealDevice::Psync(d) => d.info(),
            RealDevice::Null(d) => d.info(),
        }
    }
}

/// An opened real target, and what opening it laid out on the file system (a `file:` target created or
/// extended), so a command that refuses before any I/O can take exactly that back.
pub struct OpenedReal {
    pub device: RealDevice,
    pub laid_out: Option<LaidOut>,
}

/// Opens `/dev/NAME` (for reading), `file:PATH[:SIZE]` or `null[:SIZE]`. `target` is the string the user gave. A
/// block device is opened for writing only through the safety gate: [`crate::claim::claim_block`], then
/// [`open_claimed_block`].
pub fn open_target(target: &str, spec: &TargetSpec, request: OpenRequest) -> Result<OpenedReal, OpenError> {
    let (info, backing, laid_out) = match spec {
        TargetSpec::Null { size } => {
            return Ok(OpenedReal {
                device: RealDevice::Null(NullDevice::new(target, *size)),
                laid_out: None,
            });
        }
        TargetSpec::Block { .. } if request.write => {
            return Err(OpenError::Refused(format!(
                "{} {target}: a block device is opened for writing only through the safety gate",
                request.flag
            )));
        }
        TargetSpec::Block { path } => {
            let (info, backing) = open_block(target, path, request)?;
            (info, backing, None)
        }
        TargetSpec::File { path, size, cache } => {
            crate::file_target::open_file(target, path, *size, *cache, request)?
        }
        TargetSpec::Sim { .. } | TargetSpec::Cached { .. } => {
            return Err(OpenError::Refused(format!(
                "{target} is not a real device: ssdlab-targets opens it"
            )));
        }
    };
    Ok(OpenedReal {
        device: with_engine(info, backing, request.engine)?,
        laid_out,
    })
}

/// Drives a block device the safety gate has claimed and passed, through the very descriptor it judged (now with
/// O_DIRECT), holding the exclusive claim until the device is dropped.
pub fn open_claimed_block(
    target: &str,
    claimed: ClaimedBlock,
    flag: &'static str,
    engine: Engine,
) -> Result<RealDevice, OpenError> {
    let file = claimed.into_file();
    sys::set_direct(&file, true).map_err(|e| os(format!("{flag} {target}: cannot turn on O_DIRECT"), e))?;
    let mut info = block_info(target, flag, &file)?;
    info.notes.extend(crate::guard::unchecked_processes_note());
    with_engine(
        info,
        Backing {
            file,
            kind: BackingKind::BlockDevice,
            caching: Caching::Direct,
            tail: None,
        },
        engine,
    )
}

fn with_engine(mut info: DeviceInfo, backing: Backing, engine: Engine) -> Result<RealDevice, OpenError> {
    if engine == Engine::Psync {
        info.backend = "pread/pwrite (chosen with --engine psync)".into();
        return Ok(RealDevice::Psync(PsyncDevice::new(info, backing)));
    }
    // Over the page cache, a read the cache holds is answered inline and a miss goes through the ring, where it
    // waits for the medium without stopping the caller (pread stopped an NBD server for every one: 4 KiB random
    // reads of a cold 1 GiB image at QD32, about 25K IOPS through pread, 79-87K through the ring, 61-75K for
    // nbdkit's threads); writes run inline while they are copies (see uring.rs).
    let page_cache = engine == Engine::Auto && backing.caching == Caching::Kept;
    let (failure, info, backing) = match uring::probe() {
        Ok(()) => match UringDevice::new(info, backing) {
            Ok(device) if page_cache => return Ok(RealDevice::Uring(device.over_page_cache())),
            Ok(device) => return Ok(RealDevice::Uring(device)),
            Err(refused) => {
                let r = *refused;
                (r.reason, r.info, r.backing)
            }
        },
        Err(e) => (e.to_string(), info, backing),
    };
    if engine == Engine::IoUring {
        return Err(OpenError::Refused(format!(
            "--engine io_uring: io_uring is unavailable here ({failure}); use --engine psync or auto"
        )));
    }
    let mut info = info;
    info.backend = "pread/pwrite (one I/O at a time)".into();
    info.notes.push(format!(
        "io_uring is unavailable ({failure}); fell back to pread/pwrite, so queue depth is 1"
    ));
    Ok(RealDevice::Psync(PsyncDevice::new(info, backing)))
}

/// The sysfs directory of a block device's request queue (a partition's queue is its disk's).
pub(crate) fn sysfs_dir(rdev: u64) -> PathBuf {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let dir = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if dir.join("partition").exists() {
        dir.join("..")
    } else {
        dir
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub(crate) fn read_number(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

fn block_model(disk: &Path) -> String {
    let vendor = read_trimmed(&disk.join("device/vendor"));
    let model = read_trimmed(&disk.join("device/model"));
    if let Some(backing) = read_trimmed(&disk.join("loop/backing_file")) {
        return format!("loop device backed by {backing}");
    }
    match (vendor, model) {
        (Some(v), Some(m)) if !m.starts_with(&v) => format!("{v} {m}"),
        (_, Some(m)) => m,
        (Some(v), None) => v,
        (None, None) => disk
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "block device".into()),
    }
}

/// An ATA drive's firmware revision from the ATA Information VPD page (0x89) libata's SCSI translation answers:
/// the IDENTIFY DEVICE data starts at byte 60, and words 23-26 hold the revision as ATA strings do, each word's two
/// bytes swapped. (`device/rev` there is only the revision's last four characters, cut to SCSI's field.)
fn ata_firmware(page: &[u8]) -> Option<String> {
    let identify = page.get(60..60 + 512)?;
    let swapped: Vec<u8> = identify[46..54]
        .chunks_exact(2)
        .flat_map(|w| [w[1], w[0]])
        .collect();
    let text = String::from_utf8_lossy(&swapped).trim().to_string();
    (!text.is_empty() && text.chars().all(|c| c.is_ascii_graphic() || c == ' ')).then_some(text)
}

/// The drive's serial, firmware and write cache as the kernel reports them: NVMe and virtio give `serial` and
/// `firmware_rev` files; SCSI disks give `rev` and the serial in VPD page 0x80 (a 4-byte header, then the ASCII
/// serial), and an ATA disk behind libata its whole firmware revision in VPD page 0x89; every disk has
/// `queue/write_cache`.
fn drive_facts(disk: &Path) -> ssdlab_core::DriveFacts {
    let vpd_serial = || {
        let page = std::fs::read(disk.join("device/vpd_pg80")).ok()?;
        let text = String::from_utf8_lossy(page.get(4..)?).trim().to_string();
        (!text.is_empty()).then_some(text)
    };
    ssdlab_core::DriveFacts {
        serial: read_trimmed(&disk.join("device/serial"))
            .or_else(|| read_trimmed(&disk.join("serial")))
            .or_else(vpd_serial),
        firmware: read_trimmed(&disk.join("device/firmware_rev")).or_else(|| {
            match std::fs::read(disk.join("device/vpd_pg89")) {
                Ok(page) => ata_firmware(&page),
                Err(_) => read_trimmed(&disk.join("device/rev")),
            }
        }),
        write_cache: read_trimmed(&disk.join("queue/write_cache")),
    }
}

/// What may have refused an open, by the error and by who asked: EACCES for a user is the device's permissions;
/// EPERM, or any refusal to root, comes from elsewhere (a container's device rules, seccomp, a security module,
/// kernel lockdown, a read-only device), and "run as root" would be wrong advice there.
pub(crate) fn permission_hint(e: &io::Error) -> &'static str {
    permission_hint_for(e, rustix::process::geteuid().is_root())
}

fn permission_hint_for(e: &io::Error, root: bool) -> &'static str {
    if e.kind() != io::ErrorKind::PermissionDenied {
        return "";
    }
    match (e.raw_os_error(), root) {
        (Some(libc::EACCES), false) => " (run as root or join the disk group)",
        (Some(libc::EPERM), false) => {
            " (EPERM: not the file's permissions but a rule above them: a container or sandbox (device cgroup, \
             seccomp), kernel lockdown, or a device marked read-only; running as root may not help)"
        }
        _ => {
            " (refused although running as root: a container or sandbox (device cgroup, seccomp), a security \
             module such as SELinux or AppArmor, kernel lockdown, or a device marked read-only (blockdev \
             --getro))"
        }
    }
}

#[cfg(test)]
mod permission_tests {
    use super::permission_hint_for;
    use std::io;

    #[test]
    fn the_advice_follows_the_error_and_who_asked() {
        let eacces = io::Error::from_raw_os_error(libc::EACCES);
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        assert!(permission_hint_for(&eacces, false).contains("join the disk group"));
        assert!(permission_hint_for(&eperm, false).contains("EPERM"));
        for e in [&eacces, &eperm] {
            let said = permission_hint_for(e, true);
            assert!(
                said.contains("although running as root") && !said.contains("disk group"),
                "{said}"
            );
        }
        assert_eq!(
            permission_hint_for(&io::Error::from_raw_os_error(libc::ENOENT), true),
            ""
        );
    }
}

/// Opens a block device for reading (symlinks such as /dev/disk/by-id/... are followed: reading harms nothing).
fn open_block(target: &str, path: &Path, request: OpenRequest) -> Result<(DeviceInfo, Backing), OpenError> {
    let flag = request.flag;
    debug_assert!(!request.write, "block devices are written only through the gate");
    let meta = std::fs::metadata(path).map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?;
    if !meta.file_type().is_block_device() {
        return Err(OpenError::Refused(format!(
            "{flag} {target} is not a block device; for a regular file write file:{}",
            path.display()
        )));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            let hint = permission_hint(&e);
            os(format!("{flag} {target}: cannot open{hint}"), e)
        })?;
    let info = block_info(target, flag, &file)?;
    Ok((
        info,
        Backing {
            file,
            kind: BackingKind::BlockDevice,
            caching: Caching::Direct,
            tail: None,
        },
    ))
}

/// Describes the block device open as `file`: what was opened, not what the path named a moment earlier.
fn block_info(target: &str, flag: &str, file: &std::fs::File) -> Result<DeviceInfo, OpenError> {
    let meta = file
        .metadata()
        .map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?;
    if !meta.file_type().is_block_device() {
        return Err(OpenError::Refused(format!(
            "{flag} {target} is no longer a block device"
        )));
    }
    let disk = sysfs_dir(meta.rdev());
    let logical = read_number(&disk.join("queue/logical_block_size")).unwrap_or(512) as u32;
    let physical = read_number(&disk.join("queue/physical_block_size")).unwrap_or(logical as u64) as u32;
    let max_transfer = read_number(&disk.join("queue/max_sectors_kb"))
        .map(|kb| kb * 1024)
        .unwrap_or(u64::MAX);
    let discard_max = read_number(&disk.join("queue/discard_max_bytes")).unwrap_or(0);
    let capacity =
        sys::block_device_size(file).map_err(|e| os(format!("{flag} {target}: BLKGETSIZE64"), e))?;
    Ok(DeviceInfo {
        target: target.to_string(),
        kind: TargetKind::BlockDevice,
        model: block_model(&disk),
        capacity_bytes: capacity,
        logical_block_bytes: logical,
        physical_block_bytes: physical,
        memory_align_bytes: logical.max(512),
        max_transfer_bytes: max_transfer,
        discard_supported: discard_max > 0,
        discard_max_bytes: discard_max,
        rotational: read_number(&disk.join("queue/rotational")) == Some(1),
        clock: ClockKind::Real,
        backend: String::new(),
        direct_io: true,
        notes: Vec::new(),
        drive: drive_facts(&disk),
    })
}

#[cfg(test)]
mod drive_facts_tests {
    use super::ata_firmware;

    #[test]
    fn an_ata_firmware_revision_is_read_whole_from_vpd_page_0x89() {
        // IDENTIFY data at byte 60; words 23-26 (bytes 46-53) hold "RVT02B6Q" with each pair swapped.
        let mut page = vec![0u8; 60 + 512];
        page[60 + 46..60 + 54].copy_from_slice(b"VR0TB2Q6");
        assert_eq!(ata_firmware(&page).as_deref(), Some("RVT02B6Q"));
        assert_eq!(ata_firmware(&page[..100]), None, "a short page");
        let blank = vec![b' '; 60 + 512];
        assert_eq!(ata_firmware(&blank), None);
    }
}
