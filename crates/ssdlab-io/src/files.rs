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
    let fd = file.as_raw_fd();
    let mut ranges = Vec::new();
    let mut offset = 0u64;
    while offset < len {
        // SAFETY: lseek takes plain integers on a descriptor we own.
        let data = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let e = last_error();
            return match e.raw_os_error() {
                Some(libc::ENXIO) => Ok(ranges), // no data after offset
                Some(libc::EINVAL) if ranges.is_empty() && offset == 0 => Ok(vec![(0, len)]),
                _ => Err(e),
            };
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(last_error());
        }
        let (data, hole) = (data as u64, (hole as u64).min(len));
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
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c_path =
        std::ffi::CString::new(relative.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // struct open_how of <linux/openat2.h>.
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_XDEV,
    };
    // SAFETY: the path is NUL-terminated and `how` is a live local of the size passed; the kernel returns a new
    // descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a fresh descriptor that nothing else owns.
        return Ok(unsafe { File::from_raw_fd(fd as libc::c_int) });
    }
    let e = last_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    // SAFETY: as above, with openat.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c_path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
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
