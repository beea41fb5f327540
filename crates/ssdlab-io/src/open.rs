//! Opening real targets: block devices and regular files (O_DIRECT, alignment from the kernel) and null.
//!
//! This module decides how a target is driven (io_uring or pread/pwrite, direct or buffered) and describes it in
//! a [`DeviceInfo`]. It never decides whether a write is allowed: that is the caller's safety check (see
//! [`crate::guard`]) made before opening for writing.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ssdlab_core::device::{ClockKind, Device, DeviceInfo, TargetKind};
use ssdlab_core::target::{FileCache, TargetSpec};

use crate::claim::ClaimedBlock;
use crate::common::{Backing, BackingKind, Caching, Tail};
use crate::laid_out::{Change, LaidOut};
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

fn os(what: String, cause: io::Error) -> OpenError {
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
        TargetSpec::File { path, size, cache } => open_file(target, path, *size, *cache, request)?,
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
fn sysfs_dir(rdev: u64) -> PathBuf {
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

fn read_number(path: &Path) -> Option<u64> {
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

fn permission_hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        " (run as root or join the disk group)"
    } else {
        ""
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

/// An existing file about to be written (`pinned`: the very inode, reached without links) must not be a disk in
/// use: an active swap file, or the backing of a loop device that is mounted, held or claimed. Checked before the
/// file is opened for writing or extended, since the kernel refuses writes to a swap file but not its extension,
/// and a loop device's user would see its disk change under it.
fn refuse_a_file_in_use(
    flag: &str,
    target: &str,
    path: &Path,
    pinned: &std::fs::File,
) -> Result<(), OpenError> {
    let meta = pinned
        .metadata()
        .map_err(|e| os(format!("{flag} {target}: cannot stat {}", path.display()), e))?;
    // The path the kernel holds for the pinned file, which is where an overlay's layers are looked up.
    let held = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(pinned)
    ))
    .unwrap_or_else(|_| path.into());
    let uses = crate::guard::uses_of_file(&held, meta.dev(), meta.ino()).map_err(|e| {
        os(
            format!(
                "{flag} {target}: cannot check whether {} is in use as a disk",
                path.display()
            ),
            e,
        )
    })?;
    if uses.is_empty() {
        return Ok(());
    }
    let found: Vec<String> = uses.iter().map(|f| f.to_string()).collect();
    Err(OpenError::Refused(format!(
        "refusing to write to {target}: {} is in use as a disk: {}. Nothing was written; swapoff it, unmount it \
         or detach the loop device (losetup -d) first, or name another file",
        path.display(),
        found.join("; ")
    )))
}

/// A file about to be written must not be used by another program: held open (a virtual machine, a FUSE daemon
/// serving a file system out of it, qemu-nbd), mapped or locked, directly or through a loop device over it. The
/// survey runs on the descriptor that will be written; then an OFD write lock is taken over the whole file and
/// held as long as that descriptor, so a program that locks (QEMU does) sees it in use while ssdlab writes. A
/// file created in this run had no other user; it is locked all the same. No flag overrides a refusal here.
fn refuse_other_users(
    flag: &str,
    target: &str,
    path: &Path,
    file: &std::fs::File,
    created: bool,
) -> Result<(), OpenError> {
    let refuse = |found: Vec<String>| {
        OpenError::Refused(format!(
            "refusing to write to {target}: {} is in use by another program: {}. Nothing was written; no flag \
             overrides a file in use (not even --force): stop what uses it, or unmount its FUSE mount, first",
            path.display(),
            found.join("; ")
        ))
    };
    if !created {
        let uses =
            crate::guard::processes_using_file(file, crate::guard::TRANSIENT_USE_PATIENCE).map_err(|e| {
                os(
                    format!(
                        "{flag} {target}: cannot check which programs use {}",
                        path.display()
                    ),
                    e,
                )
            })?;
        if !uses.is_empty() {
            return Err(refuse(uses.iter().map(|f| f.to_string()).collect()));
        }
        // The kernel's own count of opens, which no /proc survey can match: a holder in another PID namespace,
        // one ssdlab may not inspect, a descriptor in flight or registered with io_uring, a thread with a table
        // of its own. A write lease is granted only when nothing else has the file open (asked again for up to
        // the same second; a loop device over it, unused as judged above, holds it open too).
        let start = std::time::Instant::now();
        let held = || sys::others_have_it_open(file) == Some(true);
        let mut still = held();
        while still && start.elapsed() < crate::guard::TRANSIENT_USE_PATIENCE {
            std::thread::sleep(std::time::Duration::from_millis(50));
            still = held();
        }
        let meta = file
            .metadata()
            .map_err(|e| os(format!("{flag} {target}: cannot stat {}", path.display()), e))?;
        if still && !crate::guard::loop_devices_over_file(meta.dev(), meta.ino()) {
            // A holder that opened it after the survey above may show now.
            let late =
                crate::guard::processes_using_file(file, std::time::Duration::ZERO).unwrap_or_default();
            if !late.is_empty() {
                return Err(refuse(late.iter().map(|f| f.to_string()).collect()));
            }
            return Err(refuse(vec![
                "the kernel says another program has it open (a write lease is refused), though no process here \
                 shows it: one in another PID namespace or that ssdlab may not inspect, or a descriptor in flight \
                 or registered with io_uring"
                    .into(),
            ]));
        }
    }
    match sys::lock_whole_file_for_writing(file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            // Whoever holds the lock, /proc/locks says what kind; a holder the survey could not name is said so.
            let uses =
                crate::guard::processes_using_file(file, std::time::Duration::ZERO).unwrap_or_default();
            let mut found: Vec<String> = uses.iter().map(|f| f.to_string()).collect();
            if found.is_empty() {
                found.push(
                    "a lock is held on it, by another program or by this ssdlab through another target (one file \
                     is written through one target at a time)"
                        .into(),
                );
            }
            Err(refuse(found))
        }
        // A file system without OFD locks (some network ones): the survey above is what there is.
        Err(_) => Ok(()),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "over 80 lines before the rule; split when next changed"
)]
fn open_file(
    target: &str,
    path: &Path,
    size: Option<u64>,
    cache: FileCache,
    request: OpenRequest,
) -> Result<(DeviceInfo, Backing, Option<LaidOut>), OpenError> {
    let flag = request.flag;
    let mut notes = Vec::new();
    let existing = match std::fs::symlink_metadata(path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(os(format!("{flag} {target}: cannot stat {}", path.display()), e));
        }
    };
    if let Some(meta) = &existing {
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} is a symbolic link; ssdlab never follows links: give the real file",
                path.display()
            )));
        }
        if kind.is_dir() {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} is a directory; name a file inside it, e.g. file:{}/ssdlab.img:1g",
                path.display(),
                path.display().to_string().trim_end_matches('/')
            )));
        }
        if kind.is_block_device() {
            // Block targets are named by their /dev path; the kernel's name for this node's device says which.
            let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
            let name = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
                .ok()
                .and_then(|u| {
                    u.lines()
                        .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
                });
            return Err(OpenError::Refused(match name {
                Some(name) => format!(
                    "{flag} {target}: {} is a block device (/dev/{name}); to use it, write {flag} /dev/{name}",
                    path.display()
                ),
                None => format!(
                    "{flag} {target}: {} is a block device ({major}:{minor}); name it by its /dev path",
                    path.display()
                ),
            }));
        }
        if !kind.is_file() {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} is not a regular file",
                path.display()
            )));
        }
    } else if size.is_none() {
        return Err(OpenError::Refused(format!(
            "{flag} {target}: {} does not exist; give a size to create it, e.g. file:{}:1g",
            path.display(),
            path.display()
        )));
    } else if !request.write {
        notes.push(
            "the file was created for this run and holds no data yet: reads measure unwritten extents".into(),
        );
    }
    // A file that is written is reached without a symbolic link anywhere in its path, as a block device is:
    // pinned by an O_PATH descriptor (no symlink in any component), which the opens below go through.
    let no_link = |e: io::Error, what: &Path| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            OpenError::Refused(format!(
                "{flag} {target}: a component of {} is a symbolic link; ssdlab never follows a link into a \
                 write: give the real path ({})",
                what.display(),
                path.canonicalize()
                    .or_else(|_| path.parent().unwrap_or(Path::new(".")).canonicalize())
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| "unresolved".into())
            ))
        } else {
            os(format!("{flag} {target}: cannot open {}", what.display()), e)
        }
    };
    let (pinned, pinned_parent) = match (&existing, request.write) {
        (Some(_), true) => (
            Some(sys::open_no_symlinks(path, libc::O_PATH).map_err(|e| no_link(e, path))?),
            None,
        ),
        (None, _) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let dir = sys::open_no_symlinks(parent, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| no_link(e, parent))?;
            (None, Some(dir))
        }
        (Some(_), false) => (None, None),
    };
    // A write goes only to a file system that holds data: a file of procfs, sysfs, cgroup or the like is a
    // kernel setting, and writing benchmark bytes into it changes the machine (a hostname, a sysctl, sysrq).
    if request.write
        && let Some(on) = pinned.as_ref().or(pinned_parent.as_ref())
        && let Some(kind) = crate::files::pseudo_file_system_of(on).map_err(|e| {
            os(
                format!(
                    "{flag} {target}: cannot tell the file system of {}",
                    path.display()
                ),
                e,
            )
        })?
    {
        return Err(OpenError::Refused(format!(
            "refusing to write to {target}: {} is on {kind}, a pseudo file system of the kernel whose files are \
             settings and views of kernel state, not data on a drive. Nothing was written; name a file on a file \
             system that holds data, e.g. file:/var/tmp/ssdlab.img:1g",
            path.display()
        )));
    }
    if let Some(pinned) = &pinned {
        // The pinned file is the one opened below: it must be the regular file looked at, not a device node or
        // FIFO renamed over the name meanwhile (opening some devices has effects of its own).
        let kind = pinned
            .metadata()
            .map_err(|e| os(format!("{flag} {target}: cannot stat {}", path.display()), e))?
            .file_type();
        if !kind.is_file() {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} is no longer a regular file (it was replaced while ssdlab opened it); \
                 nothing was opened",
                path.display()
            )));
        }
        refuse_a_file_in_use(flag, target, path, pinned)?;
    }
    // Created with O_CREAT|O_EXCL and then reopened through that descriptor, so the file laid out, written and
    // (on a refusal) removed is the very inode ssdlab made, whatever appears at the path meanwhile. Created
    // plainly first: an O_DIRECT create on a file system without O_DIRECT would make the file and then fail.
    // Created in the very directory judged above (through its pinned descriptor), whatever its path names by now.
    let create_at = match (&pinned_parent, path.file_name()) {
        (Some(dir), Some(name)) => {
            PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(dir))).join(name)
        }
        _ => path.to_path_buf(),
    };
    let created = match existing {
        Some(_) => None,
        None => Some(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&create_at)
                .map_err(|e| {
                    let hint = permission_hint(&e);
                    os(
                        format!("{flag} {target}: cannot create {}{hint}", path.display()),
                        e,
                    )
                })?,
        ),
    };
    let create = created.is_some();
    let created_identity = match &created {
        Some(file) => {
            let meta = file
                .metadata()
                .map_err(|e| os(format!("{flag} {target}: cannot stat the file it created"), e))?;
            Some((meta.dev(), meta.ino()))
        }
        None => None,
    };
    // From here on, a failure removes the file it created (and only that inode).
    let undo_created = |e: OpenError| {
        if let Some((st_dev, st_ino)) = created_identity {
            let _ = crate::files::remove_if_same(path, st_dev, st_ino);
        }
        e
    };
    let through = |file: &std::fs::File| {
        PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file)))
    };
    let opened_path = match (&created, &pinned) {
        (Some(file), _) | (None, Some(file)) => through(file),
        (None, None) => path.to_path_buf(),
    };
    let via_descriptor = created.is_some() || pinned.is_some();
    let open = |direct: bool| {
        // The magic link of a pinned or created file is followed on purpose: it is that file.
        let mut flags = if via_descriptor {
            libc::O_CLOEXEC
        } else {
            libc::O_NOFOLLOW | libc::O_CLOEXEC
        };
        if direct {
            flags |= libc::O_DIRECT;
        }
        let with = |extra: libc::c_int| {
            OpenOptions::new()
                .read(true)
                .write(request.write || create)
                .custom_flags(flags | extra)
                .open(&opened_path)
        };
        if request.no_atime {
            // O_NOATIME needs ownership (or CAP_FOWNER); without it the access time would move, which a scan
            // must not do unless the caller allows it.
            with(libc::O_NOATIME).or_else(|e| {
                if e.raw_os_error() == Some(libc::EPERM) && request.allow_atime {
                    with(0)
                } else {
                    Err(e)
                }
            })
        } else {
            with(0)
        }
    };
    let finish = || -> Result<(DeviceInfo, Backing, Option<LaidOut>), OpenError> {
        let cannot_open = |e: io::Error| {
            let hint = permission_hint(&e);
            os(
                format!("{flag} {target}: cannot open {}{hint}", path.display()),
                e,
            )
        };
        let (file, caching) = match cache {
            FileCache::Page => {
                notes.push(
                    "cache=page: reads and writes go through the kernel's page cache, as nbdkit's file plugin \
                     does; a write is durable only after a flush (fdatasync), and the figures measure the page \
                     cache as much as the medium"
                        .into(),
                );
                (open(false).map_err(cannot_open)?, Caching::Kept)
            }
            FileCache::Bypass => match open(true) {
                Ok(file) => (file, Caching::Direct),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    notes.push(format!(
                        "O_DIRECT is not supported on the filesystem holding {}; using buffered I/O with \
                         posix_fadvise(DONTNEED) after each transfer",
                        path.display()
                    ));
                    (
                        open(false).map_err(cannot_open)?,
                        Caching::DroppedAfterEachTransfer,
                    )
                }
                Err(e) => return Err(cannot_open(e)),
            },
        };
        let buffered = caching != Caching::Direct;
        // The kernel's own mark (asked first: a swap file is named as one, not as a file someone holds), which no mount over a path can hide (refuse_a_file_in_use reads /proc/swaps'
        // paths): asked before the file is extended, since the kernel refuses writes to a swap file but not
        // ftruncate's extension.
        if request.write && !create && sys::is_active_swap_file(&file) {
            return Err(OpenError::Refused(format!(
                "refusing to write to {target}: {} is an active swap file (the kernel marks it so, whatever path \
                 /proc/swaps shows). Nothing was written; swapoff it first, or name another file",
                path.display()
            )));
        }
        if request.write {
            refuse_other_users(flag, target, path, &file, create)?;
            notes.extend(crate::guard::unchecked_processes_note());
            let links = file.metadata().map(|m| m.nlink()).unwrap_or(1);
            if links > 1 {
                notes.push(format!(
                    "{} has {links} names (hard links): the writes change the file under every one of them",
                    path.display()
                ));
            }
        }
        let current = file
            .metadata()
            .map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?
            .len();
        let capacity = match size {
            Some(size) if size > current => {
                // Reserve the space so a write test neither allocates as it goes nor runs out of room midway.
                // A file system without fallocate gets a sparse extension; a file the kernel refuses to change
                // (ETXTBSY: an active swap file) gets none.
                if let Err(e) = sys::allocate(&file, size) {
                    if e.raw_os_error() == Some(libc::ETXTBSY) {
                        return Err(os(format!("{flag} {target}: cannot extend to {size} bytes"), e));
                    }
                    file.set_len(size)
                        .map_err(|e| os(format!("{flag} {target}: cannot extend to {size} bytes"), e))?;
                }
                size
            }
            // Never shrink a user's file: a smaller size only limits the region tested.
            Some(size) => size,
            None => current,
        };
        if capacity == 0 {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} is empty; give a size to extend it, e.g. file:{}:1g",
                path.display(),
                path.display()
            )));
        }
        let fs_block = file.metadata().map(|m| m.blksize()).unwrap_or(4096);
        let (memory_align, offset_align) = sys::direct_io_alignment(path).unwrap_or_else(|| {
            let meta = file.metadata().ok();
            let logical = meta
                .and_then(|m| read_number(&sysfs_dir(m.dev()).join("queue/logical_block_size")))
                .unwrap_or(512) as u32;
            (logical, logical)
        });
        let offset_align = if buffered { 512 } else { offset_align };
        // A length that ends inside a block: that block is moved through a descriptor without O_DIRECT.
        let tail = match capacity % u64::from(offset_align) {
            0 => None,
            part => Some(Tail {
                start_bytes: capacity - part,
                end_bytes: capacity,
                file: if buffered {
                    file.try_clone()
                        .map_err(|e| os(format!("{flag} {target}: cannot hold the file open"), e))?
                } else {
                    open(false).map_err(cannot_open)?
                },
            }),
        };
        let info = DeviceInfo {
            target: target.to_string(),
            kind: TargetKind::File,
            model: format!("regular file {}", path.display()),
            capacity_bytes: capacity,
            logical_block_bytes: offset_align,
            physical_block_bytes: (fs_block as u32).max(offset_align),
            memory_align_bytes: memory_align.max(offset_align),
            max_transfer_bytes: u64::MAX,
            discard_supported: true,
            discard_max_bytes: u64::MAX,
            rotational: false,
            clock: ClockKind::Real,
            backend: String::new(),
            direct_io: !buffered,
            notes,
            drive: Default::default(),
        };
        let identity = file
            .metadata()
            .map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?;
        let change = match created_identity {
            Some(_) => Some(Change::Created),
            None if capacity > current => Some(Change::Extended { from_bytes: current }),
            None => None,
        };
        let laid_out = match change {
            Some(change) => Some(LaidOut {
                path: path.to_path_buf(),
                st_dev: identity.dev(),
                st_ino: identity.ino(),
                change,
                pin: file
                    .try_clone()
                    .map_err(|e| os(format!("{flag} {target}: cannot hold the file open"), e))?,
            }),
            None => None,
        };
        Ok((
            info,
            Backing {
                file,
                kind: BackingKind::RegularFile,
                caching,
                tail,
            },
            laid_out,
        ))
    };
    finish().map_err(undo_created)
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
