//! Opening a `file:` target: the one place a regular file is judged, pinned, created or extended, and opened for
//! the engine. It owns the rules for writing to a file: never through a symbolic link, never to a kernel pseudo
//! file, never to a file in use as a disk or held by another program, and a file it created or extended is
//! taken back exactly (that inode, that length) if the open fails or the run is refused. It must never write a
//! byte of the file's data: that is the engine's, after the open succeeded.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ssdlab_core::device::{ClockKind, DeviceInfo, TargetKind};
use ssdlab_core::target::FileCache;

use crate::common::{Backing, BackingKind, Caching, Tail};
use crate::laid_out::{Change, LaidOut};
use crate::open::{OpenError, OpenRequest, os, permission_hint, read_number, sysfs_dir};
use crate::sys;

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

/// Opens a `file:` target: judges what is at the path, pins it (or its directory) against a rename, refuses what
/// must not be written, creates it when it is new, and opens it with O_DIRECT where the file system allows.
pub(crate) fn open_file(
    target: &str,
    path: &Path,
    size: Option<u64>,
    cache: FileCache,
    request: OpenRequest,
) -> Result<(DeviceInfo, Backing, Option<LaidOut>), OpenError> {
    let at = At {
        flag: request.flag,
        target,
        path,
    };
    let (existing, mut notes) = look_at(&at, size, request.write)?;
    let (pinned, pinned_parent) = pin(&at, existing.is_some(), request.write)?;
    // A write goes only to a file system that holds data: a file of procfs, sysfs, cgroup or the like is a
    // kernel setting, and writing benchmark bytes into it changes the machine (a hostname, a sysctl, sysrq).
    if request.write
        && let Some(on) = pinned.as_ref().or(pinned_parent.as_ref())
    {
        refuse_pseudo_files(&at, on)?;
    }
    if let Some(pinned) = &pinned {
        check_pinned(&at, pinned)?;
    }
    let created = create_new(&at, existing.is_some(), pinned_parent.as_ref())?;
    let created_identity = match &created {
        Some(file) => {
            let meta = file.metadata().map_err(|e| {
                os(
                    format!("{} {target}: cannot stat the file it created", at.flag),
                    e,
                )
            })?;
            Some((meta.dev(), meta.ino()))
        }
        None => None,
    };
    let through =
        |file: &File| PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file)));
    let opener = Opener {
        opened_path: match (&created, &pinned) {
            (Some(file), _) | (None, Some(file)) => through(file),
            (None, None) => path.to_path_buf(),
        },
        via_descriptor: created.is_some() || pinned.is_some(),
        write: request.write || created.is_some(),
        no_atime: request.no_atime,
        allow_atime: request.allow_atime,
    };
    let opened = open_as_device(&at, &opener, cache, &mut notes).and_then(|(file, caching)| {
        let writes = Writes {
            write: request.write,
            created: created.is_some(),
        };
        lay_out(
            &at,
            &opener,
            (file, caching),
            size,
            writes,
            created_identity,
            notes,
        )
    });
    // From here on, a failure removes the file it created (and only that inode).
    opened.inspect_err(|_| {
        if let Some((st_dev, st_ino)) = created_identity {
            let _ = crate::files::remove_if_same(path, st_dev, st_ino);
        }
    })
}

/// The target being opened, as every message names it.
struct At<'a> {
    flag: &'a str,
    target: &'a str,
    path: &'a Path,
}

/// What is at the path now, if anything, and refuses what is not a regular file (a link, a directory, a block
/// device named as a file, a FIFO); a path with nothing there needs a size to be created.
fn look_at(
    at: &At<'_>,
    size: Option<u64>,
    write: bool,
) -> Result<(Option<Metadata>, Vec<String>), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    let mut notes = Vec::new();
    let existing = match std::fs::symlink_metadata(path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(os(format!("{flag} {target}: cannot stat {}", path.display()), e));
        }
    };
    match &existing {
        Some(meta) => refuse_what_is_not_a_file(at, meta)?,
        None if size.is_none() => {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: {} does not exist; give a size to create it, e.g. file:{}:1g",
                path.display(),
                path.display()
            )));
        }
        None if !write => {
            notes.push(
                "the file was created for this run and holds no data yet: reads measure unwritten extents"
                    .into(),
            );
        }
        None => {}
    }
    Ok((existing, notes))
}

/// Refuses a symbolic link, a directory, a block device (named by its /dev path instead) or anything else that
/// is not a regular file.
fn refuse_what_is_not_a_file(at: &At<'_>, meta: &Metadata) -> Result<(), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
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
    Ok(())
}

/// A file that is written is reached without a symbolic link anywhere in its path, as a block device is: pinned
/// by an O_PATH descriptor (no symlink in any component), which the opens that follow go through. A new file's
/// directory is pinned instead. Returns (the pinned file, the pinned directory).
fn pin(at: &At<'_>, exists: bool, write: bool) -> Result<(Option<File>, Option<File>), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
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
    Ok(match (exists, write) {
        (true, true) => (
            Some(sys::open_no_symlinks(path, libc::O_PATH).map_err(|e| no_link(e, path))?),
            None,
        ),
        (false, _) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let dir = sys::open_no_symlinks(parent, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| no_link(e, parent))?;
            (None, Some(dir))
        }
        (true, false) => (None, None),
    })
}

/// Refuses a write to a file (or into a directory) on a kernel pseudo file system.
fn refuse_pseudo_files(at: &At<'_>, on: &File) -> Result<(), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    let kind = crate::files::pseudo_file_system_of(on).map_err(|e| {
        os(
            format!(
                "{flag} {target}: cannot tell the file system of {}",
                path.display()
            ),
            e,
        )
    })?;
    match kind {
        None => Ok(()),
        Some(kind) => Err(OpenError::Refused(format!(
            "refusing to write to {target}: {} is on {kind}, a pseudo file system of the kernel whose files are \
             settings and views of kernel state, not data on a drive. Nothing was written; name a file on a file \
             system that holds data, e.g. file:/var/tmp/ssdlab.img:1g",
            path.display()
        ))),
    }
}

/// The pinned file is the one opened below: it must be the regular file looked at, not a device node or FIFO
/// renamed over the name meanwhile (opening some devices has effects of its own), and not a disk in use.
fn check_pinned(at: &At<'_>, pinned: &File) -> Result<(), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    let kind = pinned
        .metadata()
        .map_err(|e| os(format!("{flag} {target}: cannot stat {}", path.display()), e))?
        .file_type();
    if !kind.is_file() {
        return Err(OpenError::Refused(format!(
            "{flag} {target}: {} is no longer a regular file (it was replaced while ssdlab opened it); nothing \
             was opened",
            path.display()
        )));
    }
    refuse_a_file_in_use(flag, target, path, pinned)
}

/// Creates a new file with O_CREAT|O_EXCL, to be reopened through that descriptor, so the file laid out, written
/// and (on a refusal) removed is the very inode ssdlab made, whatever appears at the path meanwhile. Created
/// plainly first: an O_DIRECT create on a file system without O_DIRECT would make the file and then fail.
/// Created in the very directory judged above (through its pinned descriptor), whatever its path names by now.
fn create_new(at: &At<'_>, exists: bool, pinned_parent: Option<&File>) -> Result<Option<File>, OpenError> {
    if exists {
        return Ok(None);
    }
    let (flag, target, path) = (at.flag, at.target, at.path);
    let create_at = match (pinned_parent, path.file_name()) {
        (Some(dir), Some(name)) => {
            PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(dir))).join(name)
        }
        _ => path.to_path_buf(),
    };
    let file = OpenOptions::new()
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
        })?;
    Ok(Some(file))
}

/// How the file is opened for I/O: through the descriptor that pinned or created it, or by its path.
struct Opener {
    opened_path: PathBuf,
    /// Opened through a pinned or created file's magic link, which is followed on purpose: it is that file.
    via_descriptor: bool,
    write: bool,
    no_atime: bool,
    allow_atime: bool,
}

impl Opener {
    /// Opens the file, with O_DIRECT when `direct`.
    fn open(&self, direct: bool) -> io::Result<File> {
        let mut flags = if self.via_descriptor {
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
                .write(self.write)
                .custom_flags(flags | extra)
                .open(&self.opened_path)
        };
        if self.no_atime {
            // O_NOATIME needs ownership (or CAP_FOWNER); without it the access time would move, which a scan
            // must not do unless the caller allows it.
            with(libc::O_NOATIME).or_else(|e| {
                if e.raw_os_error() == Some(libc::EPERM) && self.allow_atime {
                    with(0)
                } else {
                    Err(e)
                }
            })
        } else {
            with(0)
        }
    }
}

/// The error of an open that failed, with the hint permissions call for.
fn cannot_open(at: &At<'_>, e: io::Error) -> OpenError {
    let hint = permission_hint(&e);
    os(
        format!(
            "{} {}: cannot open {}{hint}",
            at.flag,
            at.target,
            at.path.display()
        ),
        e,
    )
}

/// Opens the file for the engine: through the page cache when asked, with O_DIRECT otherwise, and where the file
/// system refuses O_DIRECT, buffered with the pages dropped after each transfer (said in a note).
fn open_as_device(
    at: &At<'_>,
    opener: &Opener,
    cache: FileCache,
    notes: &mut Vec<String>,
) -> Result<(File, Caching), OpenError> {
    Ok(match cache {
        FileCache::Page => {
            notes.push(
                "cache=page: reads and writes go through the kernel's page cache, as nbdkit's file plugin does; a \
                 write is durable only after a flush (fdatasync), and the figures measure the page cache as much \
                 as the medium"
                    .into(),
            );
            (opener.open(false).map_err(|e| cannot_open(at, e))?, Caching::Kept)
        }
        FileCache::Bypass => match opener.open(true) {
            Ok(file) => (file, Caching::Direct),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                notes.push(format!(
                    "O_DIRECT is not supported on the filesystem holding {}; using buffered I/O with \
                     posix_fadvise(DONTNEED) after each transfer",
                    at.path.display()
                ));
                (
                    opener.open(false).map_err(|e| cannot_open(at, e))?,
                    Caching::DroppedAfterEachTransfer,
                )
            }
            Err(e) => return Err(cannot_open(at, e)),
        },
    })
}

/// Whether the run writes, and whether the file was created for it.
#[derive(Debug, Clone, Copy)]
struct Writes {
    write: bool,
    created: bool,
}

/// Refuses a write to an active swap file or a file another program uses, and takes the write lock; says when
/// the file has other names.
fn refuse_unsafe_write(
    at: &At<'_>,
    file: &File,
    writes: Writes,
    notes: &mut Vec<String>,
) -> Result<(), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    // The kernel's own mark (asked first: a swap file is named as one, not as a file someone holds), which no
    // mount over a path can hide (refuse_a_file_in_use reads /proc/swaps' paths): asked before the file is
    // extended, since the kernel refuses writes to a swap file but not ftruncate's extension.
    if !writes.created && sys::is_active_swap_file(file) {
        return Err(OpenError::Refused(format!(
            "refusing to write to {target}: {} is an active swap file (the kernel marks it so, whatever path \
             /proc/swaps shows). Nothing was written; swapoff it first, or name another file",
            path.display()
        )));
    }
    refuse_other_users(flag, target, path, file, writes.created)?;
    notes.extend(crate::guard::unchecked_processes_note());
    let links = file.metadata().map(|m| m.nlink()).unwrap_or(1);
    if links > 1 {
        notes.push(format!(
            "{} has {links} names (hard links): the writes change the file under every one of them",
            path.display()
        ));
    }
    Ok(())
}

/// The file's length now, and the capacity the run uses: extended to `size` (the space reserved where the file
/// system allows), never shrunk.
fn extend_to(at: &At<'_>, file: &File, size: Option<u64>) -> Result<(u64, u64), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    let current = file
        .metadata()
        .map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?
        .len();
    let capacity = match size {
        Some(size) if size > current => {
            // Reserve the space so a write test neither allocates as it goes nor runs out of room midway. A file
            // system without fallocate gets a sparse extension; a file the kernel refuses to change (ETXTBSY: an
            // active swap file) gets none.
            if let Err(e) = sys::allocate(file, size) {
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
    Ok((current, capacity))
}

/// Checks a write, extends the file, and describes it as a device: its alignment (O_DIRECT's, or 512 bytes
/// buffered), a tail block moved without O_DIRECT where the length ends inside one, and what was laid out (a
/// created or extended file, to be taken back exactly).
fn lay_out(
    at: &At<'_>,
    opener: &Opener,
    (file, caching): (File, Caching),
    size: Option<u64>,
    writes: Writes,
    created_identity: Option<(u64, u64)>,
    mut notes: Vec<String>,
) -> Result<(DeviceInfo, Backing, Option<LaidOut>), OpenError> {
    let (flag, target, path) = (at.flag, at.target, at.path);
    if writes.write {
        refuse_unsafe_write(at, &file, writes, &mut notes)?;
    }
    let (current, capacity) = extend_to(at, &file, size)?;
    let buffered = caching != Caching::Direct;
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
                opener.open(false).map_err(|e| cannot_open(at, e))?
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
    let change = match created_identity {
        Some(_) => Some(Change::Created),
        None if capacity > current => Some(Change::Extended { from_bytes: current }),
        None => None,
    };
    let laid_out = change.map(|change| laid_out(at, &file, change)).transpose()?;
    let backing = Backing {
        file,
        kind: BackingKind::RegularFile,
        caching,
        tail,
    };
    Ok((info, backing, laid_out))
}

/// What was laid out, held by the inode and a descriptor so only that file is ever taken back.
fn laid_out(at: &At<'_>, file: &File, change: Change) -> Result<LaidOut, OpenError> {
    let (flag, target) = (at.flag, at.target);
    let identity = file
        .metadata()
        .map_err(|e| os(format!("{flag} {target}: cannot stat"), e))?;
    Ok(LaidOut {
        path: at.path.to_path_buf(),
        st_dev: identity.dev(),
        st_ino: identity.ino(),
        change,
        pin: file
            .try_clone()
            .map_err(|e| os(format!("{flag} {target}: cannot hold the file open"), e))?,
    })
}
