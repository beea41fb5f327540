//! File-system calls for refreshing files in place: inode flags, shared extents (FIEMAP), data ranges
//! (SEEK_DATA/SEEK_HOLE), write leases, timestamps, and the [`RefreshHandle`] that reads from the medium and
//! writes durably with O_DIRECT.
//!
//! This module decides nothing about which files to refresh or in what order; it refuses a file only for a
//! reason the file system gives (symlink, not a regular file, immutable, append-only, swap, shared extents,
//! open elsewhere) and says which.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::buffers::BufferPool;

const FS_IMMUTABLE_FL: libc::c_long = 0x10;
const FS_APPEND_FL: libc::c_long = 0x20;
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
fn inode_flags(file: &File) -> io::Result<libc::c_long> {
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

/// Whether any extent of the file is shared with another file (reflinks, snapshots): rewriting would unshare
/// it and consume space. File systems without FIEMAP share nothing.
pub fn has_shared_extents(file: &File) -> io::Result<bool> {
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
                Ok(false)
            } else {
                Err(e)
            };
        }
        let extents = &map.extents[..map.mapped_extents as usize];
        if extents.iter().any(|e| e.flags & FIEMAP_EXTENT_SHARED != 0) {
            return Ok(true);
        }
        match extents.last() {
            Some(last) if last.flags & FIEMAP_EXTENT_LAST == 0 => start = last.logical + last.length,
            _ => return Ok(false),
        }
    }
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
fn beneath(root: &Path, path: &Path) -> io::Result<(File, std::path::PathBuf)> {
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
fn open_beneath(dir: &File, relative: &Path, flags: libc::c_int) -> io::Result<File> {
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

/// Whether the file has the named extended attribute.
fn has_xattr(file: &File, name: &std::ffi::CStr) -> bool {
    // SAFETY: a null buffer of size 0 asks only for the value's size; the name is NUL-terminated.
    unsafe { libc::fgetxattr(file.as_raw_fd(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// Paths listed in /proc/swaps.
fn swap_inodes() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        // The kernel escapes spaces in these paths as \040.
        .filter_map(|path| std::fs::metadata(path.replace("\\040", " ")).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Makes SIGIO harmless: a broken lease is then noticed by polling instead of killing the process.
fn ignore_sigio() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
}

/// An open regular file being refreshed.
pub struct RefreshHandle {
    file: File,
    dev: u64,
    ino: u64,
    len: u64,
    atime: (i64, i64),
    mtime: (i64, i64),
    /// (size, mtime, ctime) our own last write left; anything else means another writer.
    expected: (u64, (i64, i64), (i64, i64)),
    lease: bool,
    direct: bool,
    align: u64,
    buffer: BufferPool,
    /// How the file is protected from other writers (always a write lease: files without one are refused).
    pub protection: &'static str,
}

fn stamp_of(meta: &std::fs::Metadata) -> (u64, (i64, i64), (i64, i64)) {
    (
        meta.len(),
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    )
}

impl RefreshHandle {
    /// Opens `path` for refreshing with chunks of up to `chunk_bytes`, or says why not. `root` is the path the
    /// user named (a directory, or the file itself): the file is opened beneath it without following any
    /// symlink or crossing a mount point on the way (openat2), so a directory swapped for a symlink cannot steer
    /// the write elsewhere. `root_dev` is its file system: files on others are refused.
    pub fn open(root: &Path, path: &Path, root_dev: u64, chunk_bytes: usize) -> Result<Self, Refusal> {
        let refuse = |why: String| Refusal(why);
        let meta = std::fs::symlink_metadata(path).map_err(|e| refuse(format!("cannot stat: {e}")))?;
        if meta.file_type().is_symlink() {
            return Err(refuse("a symbolic link (never followed)".into()));
        }
        if !meta.file_type().is_file() {
            return Err(refuse("not a regular file".into()));
        }
        if meta.dev() != root_dev {
            return Err(refuse("on another file system than the path given".into()));
        }
        if swap_inodes().contains(&(meta.dev(), meta.ino())) {
            return Err(refuse("an active swap file".into()));
        }
        let (base, relative) =
            beneath(root, path).map_err(|e| refuse(format!("cannot open the path given: {e}")))?;
        let open = |direct: bool| {
            let flags =
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK | if direct { libc::O_DIRECT } else { 0 };
            // O_NOATIME needs ownership; without it, open plainly (atime is restored at the end anyway).
            open_beneath(&base, &relative, flags | libc::O_NOATIME).or_else(|e| {
                if e.raw_os_error() == Some(libc::EPERM) {
                    open_beneath(&base, &relative, flags)
                } else {
                    Err(e)
                }
            })
        };
        let (file, direct) = match open(true) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (
                open(false).map_err(|e| refuse(format!("cannot open for writing: {e}")))?,
                false,
            ),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                return Err(refuse(
                    "immutable or append-only (the file system refuses writes)".into(),
                ));
            }
            Err(e) => return Err(refuse(format!("cannot open for writing: {e}"))),
        };
        let opened = file.metadata().map_err(|e| refuse(format!("cannot stat: {e}")))?;
        if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
            return Err(refuse("replaced while being opened".into()));
        }
        // Writing clears setuid/setgid bits and file capabilities (the kernel's file_remove_privs).
        if opened.mode() & (libc::S_ISUID | libc::S_ISGID) != 0 {
            return Err(refuse("setuid or setgid (a write would clear the bit)".into()));
        }
        if has_xattr(&file, c"security.capability") {
            return Err(refuse("has file capabilities (a write would remove them)".into()));
        }
        // Restoring the times needs the owner (or CAP_FOWNER, which root has).
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 && euid != opened.uid() {
            return Err(refuse(
                "owned by another user: its times could not be restored".into(),
            ));
        }
        let flags = inode_flags(&file).map_err(|e| refuse(format!("cannot read inode flags: {e}")))?;
        if flags & FS_IMMUTABLE_FL != 0 {
            return Err(refuse("immutable (chattr +i)".into()));
        }
        if flags & FS_APPEND_FL != 0 {
            return Err(refuse("append-only (chattr +a)".into()));
        }
        if has_shared_extents(&file).map_err(|e| refuse(format!("cannot map extents: {e}")))? {
            return Err(refuse(
                "shares extents with another file (reflink or snapshot); rewriting would unshare them".into(),
            ));
        }
        ignore_sigio();
        // A process that just exited can keep the file open for a moment (the kernel closes io_uring's
        // registered files asynchronously), so a refused lease is retried briefly before it counts.
        let mut lease = false;
        for attempt in 0..10 {
            // SAFETY: plain integers on a descriptor we own.
            lease = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } == 0;
            if lease || last_error().raw_os_error() != Some(libc::EAGAIN) {
                break;
            }
            if attempt == 9 {
                return Err(refuse(
                    "open in another process (no write lease could be taken)".into(),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        if !lease {
            // Without a lease nothing keeps another writer out between our read and our write (timestamps are
            // coarse and mmap stores do not move them), so the file is not risked.
            let e = last_error();
            return Err(refuse(format!(
                "no write lease could be taken ({e}); without one a concurrent writer could not be excluded"
            )));
        }
        let align = crate::sys::direct_io_alignment(path)
            .map(|(m, o)| m.max(o) as u64)
            .unwrap_or(4096)
            .max(512);
        Ok(RefreshHandle {
            dev: opened.dev(),
            ino: opened.ino(),
            len: opened.len(),
            atime: (opened.atime(), opened.atime_nsec()),
            mtime: (opened.mtime(), opened.mtime_nsec()),
            expected: stamp_of(&opened),
            lease,
            direct,
            align,
            buffer: BufferPool::new(1, chunk_bytes.next_multiple_of(align as usize), align as usize),
            protection: "write lease",
            file,
        })
    }

    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        data_ranges(&self.file, self.len)
    }

    /// Reads from the medium: O_DIRECT (which also writes back and drops any cached copy of the range first), or
    /// after dropping the page cache when the file system has no O_DIRECT.
    pub fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let aligned = (buf.len() as u64).next_multiple_of(self.align) as usize;
        if !self.direct {
            let _ = crate::sys::drop_cache(&self.file, offset, aligned as u64);
        }
        let staging = &mut self.buffer.slot_mut(0)[..aligned];
        let mut done = 0;
        while done < aligned {
            match self.file.read_at(&mut staging[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let got = done.min(buf.len());
        buf[..got].copy_from_slice(&staging[..got]);
        Ok(got)
    }

    /// Writes `buf` at `offset`. Whole aligned blocks go through O_DIRECT; a partial last block (at end of file)
    /// goes through the page cache on the same descriptor and is synced and evicted at once, so a later read
    /// from the medium sees it. Call [`RefreshHandle::sync`] to make the rest durable.
    pub fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let whole = if self.direct {
            buf.len() as u64 / self.align * self.align
        } else {
            0
        } as usize;
        if whole > 0 {
            let staging = &mut self.buffer.slot_mut(0)[..whole];
            staging.copy_from_slice(&buf[..whole]);
            self.file.write_all_at(staging, offset)?;
        }
        if whole < buf.len() {
            self.set_direct(false)?;
            let tail = self.file.write_all_at(&buf[whole..], offset + whole as u64);
            let synced = self.file.sync_data();
            let _ = crate::sys::drop_cache(&self.file, offset + whole as u64, (buf.len() - whole) as u64);
            if self.direct {
                self.set_direct(true)?;
            }
            tail?;
            synced?;
        }
        self.expected = stamp_of(&self.file.metadata()?);
        Ok(())
    }

    /// Makes every write so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        self.expected = stamp_of(&self.file.metadata()?);
        Ok(())
    }

    fn set_direct(&self, on: bool) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL take plain integers on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(last_error());
        }
        let flags = if on {
            flags | libc::O_DIRECT
        } else {
            flags & !libc::O_DIRECT
        };
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
            return Err(last_error());
        }
        Ok(())
    }

    /// Whether another process opened the file (our lease is being broken) or changed it.
    pub fn changed_by_others(&mut self) -> io::Result<bool> {
        if self.lease {
            // SAFETY: plain integers on a descriptor we own.
            let state = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) };
            if state != libc::F_WRLCK {
                return Ok(true);
            }
        }
        Ok(stamp_of(&self.file.metadata()?) != self.expected)
    }

    /// Whether size, mtime and ctime are what our own last write (or the open) left.
    pub fn unchanged_since_our_last_write(&self) -> io::Result<bool> {
        Ok(stamp_of(&self.file.metadata()?) == self.expected)
    }

    pub fn times(&self) -> ((i64, i64), (i64, i64)) {
        (self.atime, self.mtime)
    }

    /// The current (mtime, ctime).
    pub fn stamp(&self) -> io::Result<((i64, i64), (i64, i64))> {
        let (_, m, c) = stamp_of(&self.file.metadata()?);
        Ok((m, c))
    }

    /// Sets atime and mtime (ctime necessarily moves).
    pub fn restore_times(&mut self, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
        let times = [
            libc::timespec {
                tv_sec: atime.0,
                tv_nsec: atime.1,
            },
            libc::timespec {
                tv_sec: mtime.0,
                tv_nsec: mtime.1,
            },
        ];
        // SAFETY: futimens reads two timespecs from the live local array.
        if unsafe { libc::futimens(self.file.as_raw_fd(), times.as_ptr()) } < 0 {
            return Err(last_error());
        }
        self.expected = stamp_of(&self.file.metadata()?);
        Ok(())
    }
}

impl Drop for RefreshHandle {
    fn drop(&mut self) {
        if self.lease {
            // SAFETY: plain integers on a descriptor we own.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        }
    }
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
