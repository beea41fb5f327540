//! File-system calls that scan and refresh share: inode flags, extents (FIEMAP: shared, unwritten), data
//! ranges (SEEK_DATA/SEEK_HOLE), opening beneath a root (openat2: no symlinks, no mount crossings) and the
//! active swap files. [`crate::pinned`] builds the refresh's pinned file on these.
//!
//! This module decides nothing about which files to refresh or in what order.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B; // _IOWR('f', 11, struct fiemap)
const FIEMAP_EXTENT_SHARED: u32 = 0x2000;
const FIEMAP_EXTENT_LAST: u32 = 0x1;

/// Why a file is not refreshed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// The inode flags (FS_IOC_GETFLAGS); 0 when the file system has none.
pub(crate) fn inode_flags(file: &File) -> io::Result<libc::c_long> {
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long through the pointer, which points to a live local.
    let ret = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::FS_IOC_GETFLAGS,
            &mut flags as *mut libc::c_long,
        )
    };
    if ret < 0 {
        let e = last_error();
        return if matches!(
            e.raw_os_error(),
            Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
        ) {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(flags)
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [FiemapExtent; 64],
}

/// Calls `f` for each extent (FIEMAP) until it returns false. File systems without FIEMAP have none.
fn for_each_extent(file: &File, mut f: impl FnMut(&FiemapExtent) -> bool) -> io::Result<()> {
    let mut start = 0u64;
    loop {
        let mut map = Fiemap {
            start,
            length: u64::MAX - start,
            flags: 1, // FIEMAP_FLAG_SYNC: settle delayed allocation first
            mapped_extents: 0,
            extent_count: 64,
            reserved: 0,
            extents: [FiemapExtent::default(); 64],
        };
        // SAFETY: the kernel reads the header and writes at most extent_count extents into the live local.
        let ret = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map as *mut Fiemap) };
        if ret < 0 {
            let e = last_error();
            return if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY)) {
                Ok(())
            } else {
                Err(e)
            };
        }
        let extents = &map.extents[..map.mapped_extents as usize];
        for e in extents {
            if !f(e) {
                return Ok(());
            }
        }
        match extents.last() {
            Some(last) if last.flags & FIEMAP_EXTENT_LAST == 0 => start = last.logical + last.length,
            _ => return Ok(()),
        }
    }
}

/// Whether any extent of the file is shared with another file (reflinks, snapshots): rewriting would unshare
/// it and consume space.
pub fn has_shared_extents(file: &File) -> io::Result<bool> {
    let mut shared = false;
    for_each_extent(file, |e| {
        shared |= e.flags & FIEMAP_EXTENT_SHARED != 0;
        !shared
    })?;
    Ok(shared)
}

/// The data ranges of the file at `path`, opened read-only with O_NOATIME (unless `allow_atime`, which also
/// lets a file that is not ours be opened, moving its access time).
pub fn data_ranges_of(path: &Path, allow_atime: bool) -> io::Result<Vec<(u64, u64)>> {
    let noatime = if allow_atime { 0 } else { libc::O_NOATIME };
    let file = OpenOptions::new().read(true).custom_flags(noatime).open(path)?;
    data_ranges(&file, file.metadata()?.len())
}

/// The (offset, length) ranges of a file that hold data, from SEEK_DATA/SEEK_HOLE (the whole file when the file
/// system does not say).
pub fn data_ranges(file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    use rustix::fs::{SeekFrom, seek};
    use rustix::io::Errno;
    let mut ranges = Vec::new();
    let mut offset = 0u64;
    while offset < len {
        let data = match seek(file, SeekFrom::Data(offset)) {
            Ok(data) => data,
            // No data after offset.
            Err(Errno::NXIO) => return Ok(ranges),
            Err(Errno::INVAL) if ranges.is_empty() && offset == 0 => return Ok(vec![(0, len)]),
            Err(e) => return Err(e.into()),
        };
        let hole = seek(file, SeekFrom::Hole(data))?;
        let (data, hole) = (data, hole.min(len));
        if hole > data {
            ranges.push((data, hole - data));
        }
        offset = hole.max(data + 1);
    }
    Ok(ranges)
}

/// The directory to resolve from and the path beneath it: the root itself when it is a directory, its parent
/// when the user named a single file.
pub(crate) fn beneath(root: &Path, path: &Path) -> io::Result<(File, std::path::PathBuf)> {
    let root_is_dir = std::fs::symlink_metadata(root)?.is_dir();
    let (dir, relative) = if root_is_dir {
        (
            root.to_path_buf(),
            path.strip_prefix(root)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
                .to_path_buf(),
        )
    } else {
        let dir = root
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        (
            dir.to_path_buf(),
            root.file_name()
                .map(std::path::PathBuf::from)
                .ok_or(io::ErrorKind::InvalidInput)?,
        )
    };
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    Ok((dir, relative))
}

/// openat2 beneath `dir` with no symlinks and no mount crossings; plain openat with O_NOFOLLOW on kernels
/// without openat2 (before 5.6).
pub(crate) fn open_beneath(dir: &File, relative: &Path, flags: libc::c_int) -> io::Result<File> {
    use rustix::fs::ResolveFlags;
    use std::os::unix::ffi::OsStrExt;
    let c_path =
        std::ffi::CString::new(relative.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_XDEV;
    match crate::sys::openat2(dir, &c_path, flags, resolve) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        other => return other,
    }
    let flags = rustix::fs::OFlags::from_bits_retain((flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u32);
    Ok(File::from(rustix::fs::openat(
        dir,
        c_path.as_c_str(),
        flags,
        rustix::fs::Mode::empty(),
    )?))
}

/// Removes the file at `path` only if it is the regular file (`st_dev`, `st_ino`): the file is first renamed to
/// a private name in its directory (RENAME_NOREPLACE), checked there, and unlinked only if it is that inode;
/// anything else is renamed back and left alone. So whatever another program put at the path meanwhile, even a
/// symlink or a device node, is never removed. The caller keeps the file open meanwhile: an inode that is still
/// open cannot be freed, so its number cannot be reused by someone else's new file.
pub fn remove_if_same(path: &Path, st_dev: u64, st_ino: u64) -> io::Result<crate::laid_out::Undone> {
    remove_kind_if_same(path, libc::S_IFREG, st_dev, st_ino)
}

/// [`remove_if_same`] for the Unix socket (`st_dev`, `st_ino`) a server bound: a path someone else took over
/// meanwhile (a file put in its place) is left alone.
pub fn remove_socket_if_same(path: &Path, st_dev: u64, st_ino: u64) -> io::Result<crate::laid_out::Undone> {
    remove_kind_if_same(path, libc::S_IFSOCK, st_dev, st_ino)
}

fn remove_kind_if_same(
    path: &Path,
    kind: libc::mode_t,
    st_dev: u64,
    st_ino: u64,
) -> io::Result<crate::laid_out::Undone> {
    use crate::laid_out::Undone;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(parent)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let private = format!(
        ".ssdlab-undo-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    use rustix::fs::{AtFlags, RenameFlags, renameat_with, statat, unlinkat};
    use rustix::io::Errno;
    let c_name = CString::new(name.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let c_private = CString::new(private.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let moved = renameat_with(&dir, &c_name, &dir, &c_private, RenameFlags::NOREPLACE);
    let checked_name = match moved {
        Ok(()) => &c_private,
        Err(Errno::NOENT) => {
            return Ok(Undone::LeftAlone(format!("{} no longer exists", path.display())));
        }
        // A file system without RENAME_NOREPLACE: check and unlink in place (a narrower guarantee).
        Err(Errno::INVAL | Errno::NOSYS) => &c_name,
        Err(e) => return Err(e.into()),
    };
    let same = statat(&dir, checked_name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| (st.st_mode & libc::S_IFMT) == kind && (st.st_dev, st.st_ino) == (st_dev, st_ino));
    if same {
        // No flags: unlinks a non-directory.
        unlinkat(&dir, checked_name, AtFlags::empty())?;
        return Ok(Undone::Removed);
    }
    if moved.is_ok()
        && let Err(e) = renameat_with(&dir, &c_private, &dir, &c_name, RenameFlags::NOREPLACE)
    {
        return Ok(Undone::LeftAlone(format!(
            "{} was replaced by another file, which was moved aside to {} and could not be put back: {}",
            path.display(),
            parent.join(&private).display(),
            io::Error::from(e)
        )));
    }
    Ok(Undone::LeftAlone(format!(
        "{} is no longer the file ssdlab created; it was left alone",
        path.display()
    )))
}

/// A file's identity: (st_dev, st_ino).
pub type FileIdentity = (u64, u64);

/// Reads the regular file at `path` without following a symlink in its last component and without blocking on
/// a FIFO or device, refusing anything larger than `max_bytes`. None when nothing is there; also its identity.
pub fn read_regular(path: &Path, max_bytes: u64) -> io::Result<Option<(Vec<u8>, FileIdentity)>> {
    use std::io::Read;
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is a symbolic link",
            ));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    if meta.len() > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it holds {} bytes, more than the {max_bytes} expected at most",
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it grew past the size expected",
        ));
    }
    Ok(Some((bytes, (meta.dev(), meta.ino()))))
}

/// The kernel's pseudo file systems (by statfs magic): their files are views of kernel state, not data on a drive,
/// and reading or writing them can have effects (PCI config space, EFI variables, tracing).
const PSEUDO_FILE_SYSTEMS: &[(i64, &str)] = &[
    (0x6265_6572, "sysfs"),
    (0x9fa0, "procfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x6265_6570, "configfs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0xcafe_4a11, "bpf"),
    (0x1cd1, "devpts"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
    (0x6573_5543, "fusectl"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x1980_0202, "mqueue"),
    (0x9584_58f6, "hugetlbfs"),
    (0x0187, "autofs"),
    (0x6e73_6673, "nsfs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4341_5d53, "smackfs"),
    (0x5a3c_69f0, "apparmorfs"),
    (0x6759_6969, "rpc_pipefs"),
    (0x6e66_7364, "nfsd"),
    (0x9fa1, "openpromfs"),
    (0xabba_1974, "xenfs"),
    (0x0765_5821, "resctrl"),
    (0x0a64_7361, "functionfs"),
];

/// Names the pseudo file system `path` is on (sysfs, procfs, debugfs, devtmpfs, ...), or None for a file system
/// that holds data. Asks statfs without opening anything; devtmpfs, which shares tmpfs's magic, is told apart by
/// its mount's type.
pub fn pseudo_file_system(path: &Path) -> io::Result<Option<&'static str>> {
    use std::os::unix::ffi::OsStrExt;
    let c_path =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let buf = rustix::fs::statfs(c_path.as_c_str())?;
    Ok(pseudo_by_magic(buf.f_type as i64, || {
        crate::sys::statx(rustix::fs::CWD, &c_path, 0, libc::STATX_MNT_ID).ok()
    }))
}

/// [`pseudo_file_system`] of an open file (an `O_PATH` descriptor will do): the file that is written, not what
/// its path names a moment later.
pub fn pseudo_file_system_of(file: &File) -> io::Result<Option<&'static str>> {
    let buf = rustix::fs::fstatfs(file)?;
    Ok(pseudo_by_magic(buf.f_type as i64, || {
        crate::sys::statx(file, c"", libc::AT_EMPTY_PATH, libc::STATX_MNT_ID).ok()
    }))
}

/// The pseudo file system a statfs magic names; devtmpfs shares tmpfs's magic and is told by its mount's type
/// (`statx` gives the mount id, asked only then).
fn pseudo_by_magic(magic: i64, statx: impl FnOnce() -> Option<rustix::fs::Statx>) -> Option<&'static str> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    if let Some((_, name)) = PSEUDO_FILE_SYSTEMS.iter().find(|(m, _)| *m == magic) {
        return Some(name);
    }
    if magic == TMPFS_MAGIC
        && let Some(sx) = statx()
        && sx.stx_mask & libc::STATX_MNT_ID != 0
    {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if crate::guard::mount_type_of(&mountinfo, sx.stx_mnt_id).as_deref() == Some("devtmpfs") {
            return Some("devtmpfs");
        }
    }
    None
}

/// Opens a file the user named as input (a trace, a result, a saved smartctl output): only a regular file, opened
/// without blocking (a FIFO would wait forever for a writer) and without following a symlink into anything but a
/// regular file. A directory, FIFO, socket or device is an `InvalidInput` error that names what it is.
pub fn open_input(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    ))
}

/// Reads a whole input file ([`open_input`]'s rules) of at most `max_bytes`: a larger one is an `InvalidInput`
/// error saying its size, before anything is read.
pub fn read_input(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_input(path)?;
    let len = file.metadata()?.len();
    if len > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it holds {len} bytes, more than the {max_bytes} this input may have"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it grew past the {max_bytes} bytes this input may have while it was read"),
        ));
    }
    Ok(bytes)
}

/// The first component of `path` (from the root) that is a symbolic link, among those that exist.
pub fn first_symlink_in(path: &Path) -> Option<std::path::PathBuf> {
    let mut prefix = std::path::PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        match std::fs::symlink_metadata(&prefix) {
            Ok(m) if m.file_type().is_symlink() => return Some(prefix),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// (device, inode) of every active swap file (one /proc/swaps parser: the guard's).
pub(crate) fn swap_inodes() -> Vec<(u64, u64)> {
    crate::guard::swap_paths(&std::fs::read_to_string("/proc/swaps").unwrap_or_default())
        .into_iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;

/// Extents allocated but never written (fallocate): they read as zeros and must not be written as zeros.
pub(crate) fn unwritten_extents(file: &File) -> io::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for_each_extent(file, |e| {
        if e.flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
            out.push((e.logical, e.length));
        }
        true
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_created_inode_is_removed() {
        use crate::laid_out::Undone;
        let base = std::env::temp_dir().join(format!("ssdlab-remove-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let path = base.join("t.img");
        std::fs::write(&path, b"ours").unwrap();
        // Held open, as the device holds the file it created, so its inode number cannot be reused.
        let held = File::open(&path).unwrap();
        let ours = held.metadata().unwrap();
        // Someone replaces it with their own file, then with a symlink to it: both stay.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"theirs").unwrap();
        assert!(matches!(
            remove_if_same(&path, ours.dev(), ours.ino()).unwrap(),
            Undone::LeftAlone(_)
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        std::fs::rename(&path, base.join("real")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), &path).unwrap();
        assert!(matches!(
            remove_if_same(&path, ours.dev(), ours.ino()).unwrap(),
            Undone::LeftAlone(_)
        ));
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        drop(held);
        // The file itself goes, and nothing is left beside it.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"ours").unwrap();
        let ours = std::fs::metadata(&path).unwrap();
        assert_eq!(
            remove_if_same(&path, ours.dev(), ours.ino()).unwrap(),
            Undone::Removed
        );
        assert!(!path.exists());
        assert!(matches!(
            remove_if_same(&path, ours.dev(), ours.ino()).unwrap(),
            Undone::LeftAlone(_)
        ));
        let mut left: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, vec![std::ffi::OsString::from("real")]);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn pseudo_file_systems_are_named_and_data_file_systems_are_not() {
        assert_eq!(
            pseudo_file_system(Path::new("/sys/devices")).unwrap(),
            Some("sysfs")
        );
        assert_eq!(
            pseudo_file_system(Path::new("/proc/self")).unwrap(),
            Some("procfs")
        );
        assert_eq!(pseudo_file_system(Path::new("/dev")).unwrap(), Some("devtmpfs"));
        assert_eq!(pseudo_file_system(&std::env::temp_dir()).unwrap(), None);
        assert!(pseudo_file_system(Path::new("/nonexistent/ssdlab")).is_err());
    }

    #[test]
    fn opening_beneath_a_root_never_follows_a_symlinked_directory() {
        let base = std::env::temp_dir().join(format!("ssdlab-beneath-{}", std::process::id()));
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("real/f"), b"inside").unwrap();
        std::fs::write(outside.join("f"), b"outside").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let dir = File::open(&root).unwrap();
        assert!(open_beneath(&dir, Path::new("real/f"), libc::O_RDONLY).is_ok());
        let through_link = open_beneath(&dir, Path::new("link/f"), libc::O_RDONLY);
        assert!(
            through_link.is_err(),
            "a symlinked directory on the way must not be followed"
        );
        assert!(
            open_beneath(&dir, Path::new("../outside/f"), libc::O_RDONLY).is_err(),
            "nothing outside the root"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
