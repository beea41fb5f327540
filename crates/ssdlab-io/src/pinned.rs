//! A file pinned for refreshing: an `O_PATH` descriptor that holds on to the inode (so a rename cannot redirect
//! us and a settled file is the very inode we journalled), and short *windows* in which the file is open for
//! writing under a write lease.
//!
//! Outside a window this module holds nothing another program can notice: an `O_PATH` descriptor neither reads
//! nor writes, does not count as an opener for leases, and does not block `exec` (ETXTBSY) or `chattr`. Inside
//! a window the file is reopened through `/proc/self/fd` (never by name) for direct I/O and leased; closing the
//! window drops lease and descriptor. This module decides nothing about when to write; the refresh protocol in
//! `ssdlab-methods` does, through the binary's adapter.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ssdlab_core::scratch::{FilledScratch, MediaRead, Scratch};

use crate::buffers::BufferPool;
use crate::files::{
    Refusal, beneath, data_ranges, has_shared_extents, inode_flags, open_beneath, swap_inodes,
    unwritten_extents,
};
use crate::watch::AttribWatch;

/// (seconds, nanoseconds) since the epoch.
pub type Time = (i64, i64);

/// What the refresh protocol compares around each write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFacts {
    pub size_bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub birth: Option<Time>,
    pub privileged: bool,
    pub named: bool,
}

/// Reboot-proof identity: file system id, inode, birth time.
///
/// The file system id is statfs's `f_fsid` where the file system derives it from its UUID (ext4, btrfs, and
/// most others). XFS and f2fs report their device number there, which changes when a loop device or a disk is
/// renumbered: for them the id is folded from the UUID (`FS_IOC_GETFSUUID` on the mount's root), and the
/// device-number id is kept as `fs_by_device` so journal entries written before it still match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub fs: u64,
    pub ino: u64,
    pub birth: Option<Time>,
    /// The device-number id this file system had before UUIDs were used, where it differs from `fs`.
    pub fs_by_device: Option<u64>,
}

impl Identity {
    /// An identity as the journal stored it (only the primary file system id).
    pub fn journalled(fs: u64, ino: u64, birth: Option<Time>) -> Self {
        Identity {
            fs,
            ino,
            birth,
            fs_by_device: None,
        }
    }

    /// Whether a file system with this identity is the one `journalled` names.
    pub fn same_fs_as(&self, journalled: &Identity) -> bool {
        self.fs == journalled.fs || self.fs_by_device == Some(journalled.fs)
    }

    /// Whether this is the file `journalled` names.
    pub fn is(&self, journalled: &Identity) -> bool {
        self.same_fs_as(journalled) && self.ino == journalled.ino && self.birth == journalled.birth
    }
}

const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
const ECRYPTFS_SUPER_MAGIC: i64 = 0xf15f;
const AUFS_SUPER_MAGIC: i64 = 0x6175_6673;
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683e;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;
const BCACHEFS_SUPER_MAGIC: i64 = 0xca45_1a4e;
const ZFS_SUPER_MAGIC: i64 = 0x2fc1_2fc1;
const FS_IOC_GETVERSION: libc::c_ulong = 0x8008_7601; // _IOR('v', 1, long)
const FS_IOC_GETFSUUID: libc::c_ulong = 0x8011_1500; // _IOR(0x15, 0, struct fsuuid2)
const FS_IMMUTABLE_FL: libc::c_long = 0x10;
const FS_APPEND_FL: libc::c_long = 0x20;

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// The file system's magic number and its id (f_fsid, or 0 when it has none).
fn statfs(file: &File) -> io::Result<(i64, u64)> {
    let buf = rustix::fs::fstatfs(file)?;
    // f_fsid is two ints, whose fields the type keeps private; their bytes make one u64.
    const _: () = assert!(std::mem::size_of::<rustix::fs::Fsid>() == 8);
    // SAFETY: Fsid is two c_ints (8 bytes, no padding, checked above); reading them as one u64 is a plain bit
    // copy.
    let fsid: u64 = unsafe { std::mem::transmute_copy(&buf.f_fsid) };
    Ok((buf.f_type as i64, fsid))
}

/// statx of a descriptor (AT_EMPTY_PATH, which works on O_PATH descriptors), with birth time where known.
fn statx_fd(fd: impl std::os::fd::AsFd) -> io::Result<rustix::fs::Statx> {
    crate::sys::statx(
        fd,
        c"",
        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_BASIC_STATS | libc::STATX_BTIME | libc::STATX_MNT_ID,
    )
}

fn birth_of(sx: &rustix::fs::Statx) -> Option<Time> {
    (sx.stx_mask & libc::STATX_BTIME != 0).then_some((sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec as i64))
}

fn dev_of(sx: &rustix::fs::Statx) -> u64 {
    libc::makedev(sx.stx_dev_major, sx.stx_dev_minor)
}

/// The identity of an open file (any kind, an O_PATH descriptor included).
pub fn identity_of(file: &File) -> io::Result<Identity> {
    let sx = statx_fd(file)?;
    let (_, fsid) = statfs(file)?;
    let by_device = if fsid != 0 { fsid } else { dev_of(&sx) };
    // The kernel's new_encode_dev(): what XFS and f2fs put in f_fsid.
    let (major, minor) = (sx.stx_dev_major as u64, sx.stx_dev_minor as u64);
    let encoded_dev = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
    let from_uuid = if fsid == 0 || fsid == encoded_dev {
        fs_uuid(&sx).map(|uuid| fold_uuid(&uuid))
    } else {
        None
    };
    Ok(Identity {
        fs: from_uuid.unwrap_or(by_device),
        ino: sx.stx_ino,
        birth: birth_of(&sx),
        fs_by_device: from_uuid.map(|_| by_device),
    })
}

/// A UUID as one u64 (the halves XORed, as ext4 derives its f_fsid), with the top bit set so it never equals
/// a device-number id.
fn fold_uuid(uuid: &[u8]) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..uuid.len().min(16)].copy_from_slice(&uuid[..uuid.len().min(16)]);
    let halves = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
        ^ u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes"));
    halves | 1 << 63
}

/// The UUID of the file system a file is on, from `FS_IOC_GETFSUUID` on its mount's root directory (found by
/// mount id in /proc/self/mountinfo, checked to be on the same device). `None` where the kernel or the file
/// system gives none, or the mount's root is out of reach (shadowed by another mount). Cached per device and
/// mount, so a walk over many files reads mountinfo once per file system.
fn fs_uuid(sx: &rustix::fs::Statx) -> Option<Vec<u8>> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// UUIDs by (device, mount id); `None` where there is none.
    type Uuids = HashMap<(u64, u64), Option<Vec<u8>>>;
    static CACHE: Mutex<Option<Uuids>> = Mutex::new(None);
    let key = (dev_of(sx), sx.stx_mnt_id);
    if sx.stx_mask & libc::STATX_MNT_ID == 0 {
        return None;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| read_fs_uuid(sx.stx_mnt_id, key.0))
        .clone()
}

fn read_fs_uuid(mnt_id: u64, dev: u64) -> Option<Vec<u8>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount_point = crate::guard::mount_point_of(&mountinfo, mnt_id)?;
    use rustix::fs::{Mode, OFlags};
    let root = File::from(
        rustix::fs::open(
            mount_point.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?,
    );
    let on_it = statx_fd(&root).ok()?;
    if dev_of(&on_it) != dev {
        return None;
    }
    #[repr(C)]
    struct FsUuid2 {
        len: u8,
        uuid: [u8; 16],
    }
    let mut out = FsUuid2 {
        len: 0,
        uuid: [0; 16],
    };
    // SAFETY: FS_IOC_GETFSUUID writes one struct fsuuid2 (17 bytes, laid out as FsUuid2) through the pointer,
    // which points to a live local.
    if unsafe { libc::ioctl(root.as_raw_fd(), FS_IOC_GETFSUUID, &mut out) } != 0 {
        return None;
    }
    let len = (out.len as usize).min(16);
    (len > 0 && out.uuid[..len].iter().any(|&b| b != 0)).then(|| out.uuid[..len].to_vec())
}

/// The identity of a path, without following a final symlink and without opening it for reading.
pub fn identity_of_path(path: &Path) -> io::Result<Identity> {
    use rustix::fs::{Mode, OFlags};
    let file = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    identity_of(&File::from(file))
}

/// A regular file pinned by an O_PATH descriptor, with an optional open window.
pub struct PinnedFile {
    pin: File,
    /// `/proc/self/fd/N` of the pin: reopening through it reaches the inode, whatever its name now.
    proc_path: CString,
    /// The directory the file was found beneath, and its path relative to it (to check the name still holds).
    base: File,
    relative: PathBuf,
    identity: Identity,
    generation: u64,
    fs_magic: i64,
    window: Option<File>,
    /// Attribute changes by path (which break no lease), watched from the first window on.
    watch: Option<AttribWatch>,
    direct: bool,
    align: u64,
    buffer: BufferPool,
    /// A read of the next chunk running on a helper thread, with a descriptor of its own (see `read_ahead`).
    ahead: Option<ReadAhead>,
    /// How long the medium took for the last `read_from_media` or taken read-ahead.
    last_read: std::time::Duration,
}

/// A read started by [`PinnedFile::read_ahead`]: where, and the helper's thread, which hands back the caller's
/// buffer filled.
struct ReadAhead {
    offset: u64,
    len: usize,
    thread: std::thread::JoinHandle<FilledScratch>,
}

impl PinnedFile {
    /// Pins `path` (beneath `root`, the path the user gave; no symlinks, no mount crossings) for refreshing, or
    /// says why it must not be rewritten.
    pub fn open(root: &Path, path: &Path) -> Result<Self, Refusal> {
        let refuse = |why: String| Refusal(why);
        let (base, relative) =
            beneath(root, path).map_err(|e| refuse(format!("cannot open the path given: {e}")))?;
        let pin = open_beneath(&base, &relative, libc::O_PATH | libc::O_NOFOLLOW).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refuse("a symbolic link (never followed)".into())
            } else if e.raw_os_error() == Some(libc::EXDEV) {
                refuse("on another file system than the path given".into())
            } else {
                refuse(format!("cannot open: {e}"))
            }
        })?;
        Self::from_pin(pin, base, relative, path)
    }

    /// Pins an inode found through a file handle (after a rename): `base`/`relative` are where it used to be.
    fn from_handle(root: &Path, path: &Path, handle: &[u8]) -> Result<Self, Refusal> {
        let refuse = |why: String| Refusal(why);
        // The path given may itself be what was renamed: the nearest directory that still exists serves as the
        // mount descriptor, and its name check then simply reports the file as no longer named.
        let (base, relative) = beneath(root, path)
            .or_else(|_| {
                let dir = root
                    .ancestors()
                    .skip(1)
                    .find(|d| d.is_dir())
                    .unwrap_or(Path::new("/"));
                beneath(dir, &dir.join(path.file_name().unwrap_or_default()))
            })
            .map_err(|e| refuse(format!("cannot open the path given: {e}")))?;
        if handle.len() < 4 || handle.len() - 4 > MAX_HANDLE_BYTES {
            return Err(refuse("not a file handle".into()));
        }
        let mut fh = FileHandle {
            handle_bytes: (handle.len() - 4) as u32,
            handle_type: i32::from_le_bytes(handle[..4].try_into().expect("4 bytes")),
            f_handle: [0; MAX_HANDLE_BYTES],
        };
        fh.f_handle[..handle.len() - 4].copy_from_slice(&handle[4..]);
        // SAFETY: base is a live descriptor on the file system the handle came from; fh is a live local laid out
        // as struct file_handle with room for handle_bytes; the kernel returns a new descriptor or -1.
        let fd = unsafe {
            libc::open_by_handle_at(
                base.as_raw_fd(),
                &mut fh as *mut FileHandle as *mut libc::file_handle,
                libc::O_PATH | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(refuse(format!("cannot open by handle: {}", last_error())));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let pin = unsafe { File::from_raw_fd(fd) };
        Self::from_pin(pin, base, relative, path)
    }

    fn from_pin(pin: File, base: File, relative: PathBuf, path: &Path) -> Result<Self, Refusal> {
        let refuse = |why: String| Refusal(why);
        let sx = statx_fd(&pin).map_err(|e| refuse(format!("cannot stat: {e}")))?;
        if (sx.stx_mode as u32 & libc::S_IFMT) != libc::S_IFREG {
            return Err(refuse("not a regular file".into()));
        }
        let (fs_magic, _) = statfs(&pin).map_err(|e| refuse(format!("cannot statfs: {e}")))?;
        match fs_magic {
            OVERLAYFS_SUPER_MAGIC | AUFS_SUPER_MAGIC => {
                return Err(refuse(
                    "on a stacked file system (overlayfs): a write would copy the file up into the upper layer and never refresh the lower copy".into(),
                ));
            }
            ECRYPTFS_SUPER_MAGIC => {
                return Err(refuse(
                    "on a stacked file system (ecryptfs): rewriting the plaintext would not rewrite the same bytes below".into(),
                ));
            }
            FUSE_SUPER_MAGIC => {
                return Err(refuse(
                    "on a FUSE file system: what a write does below it is not known, and leases do not work there".into(),
                ));
            }
            _ => {}
        }
        if swap_inodes().contains(&(dev_of(&sx), sx.stx_ino)) {
            return Err(refuse("an active swap file".into()));
        }
        let identity = identity_of(&pin).map_err(|e| refuse(format!("cannot stat: {e}")))?;
        let proc_path = CString::new(format!("/proc/self/fd/{}", pin.as_raw_fd())).expect("no NUL");
        let euid = rustix::process::geteuid().as_raw();
        if euid != 0 && euid != sx.stx_uid {
            return Err(refuse(
                "owned by another user: its times could not be restored".into(),
            ));
        }
        let align = crate::sys::direct_io_alignment(path)
            .map(|(m, o)| m.max(o) as u64)
            .unwrap_or(4096)
            .max(512);
        let mut pinned = PinnedFile {
            pin,
            proc_path,
            base,
            relative,
            identity,
            generation: 0,
            fs_magic,
            window: None,
            watch: None,
            direct: true,
            align,
            // The staging buffer is only for chunks that cannot go to O_DIRECT as they are: it grows when one
            // comes ([`PinnedFile::ensure_buffer`]), so a run over many small files maps no chunk-sized buffer each.
            buffer: BufferPool::new(1, align as usize, align as usize),
            ahead: None,
            last_read: std::time::Duration::ZERO,
        };
        let reader = pinned
            .reopen(libc::O_RDONLY)
            .map_err(|e| refuse(format!("cannot open for reading: {e}")))?;
        let mut generation: libc::c_long = 0;
        // SAFETY: FS_IOC_GETVERSION writes one long through the pointer, which points to a live local.
        if unsafe { libc::ioctl(reader.as_raw_fd(), FS_IOC_GETVERSION, &mut generation) } == 0 {
            pinned.generation = generation as u64;
        }
        let flags = inode_flags(&reader).map_err(|e| refuse(format!("cannot read inode flags: {e}")))?;
        if flags & FS_IMMUTABLE_FL != 0 {
            return Err(refuse("immutable (chattr +i)".into()));
        }
        if flags & FS_APPEND_FL != 0 {
            return Err(refuse("append-only (chattr +a)".into()));
        }
        drop(reader);
        Ok(pinned)
    }

    /// Probes a window before anything is journalled: no write access, or no leases on this file system, is a
    /// refusal now rather than a failure halfway. Someone having the file open is fine: refresh waits for them.
    /// (Settling does not probe: most settles need no write access at all.)
    pub fn probe_window(&mut self) -> Result<(), Refusal> {
        self.open_window()
            .map_err(|e| Refusal(format!("cannot be opened for writing under a lease: {e}")))?;
        self.close_window();
        Ok(())
    }

    /// Reopens the pinned inode (never by name) with `flags`.
    fn reopen(&self, flags: libc::c_int) -> io::Result<File> {
        let open = |flags: libc::c_int| -> io::Result<File> {
            // No O_NOFOLLOW: the /proc magic link to the pinned inode is the one link that is followed.
            let flags = rustix::fs::OFlags::from_bits_retain((flags | libc::O_CLOEXEC) as u32);
            Ok(File::from(rustix::fs::open(
                self.proc_path.as_c_str(),
                flags,
                rustix::fs::Mode::empty(),
            )?))
        };
        // O_NOATIME needs ownership (or CAP_FOWNER); without it the read moves atime, which is restored anyway.
        open(flags | libc::O_NOATIME).or_else(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                open(flags)
            } else {
                Err(e)
            }
        })
    }

    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The kernel's file handle for the inode (type, then bytes), to find it again after a rename; `None` where
    /// the file system has none.
    pub fn handle(&self) -> Option<Vec<u8>> {
        let mut fh = FileHandle {
            handle_bytes: MAX_HANDLE_BYTES as u32,
            handle_type: 0,
            f_handle: [0; MAX_HANDLE_BYTES],
        };
        let mut mount_id: libc::c_int = 0;
        // SAFETY: the path is an empty NUL-terminated string with AT_EMPTY_PATH on a live descriptor; fh has room
        // for handle_bytes bytes; mount_id is a live local.
        let ret = unsafe {
            libc::name_to_handle_at(
                self.pin.as_raw_fd(),
                c"".as_ptr(),
                &mut fh as *mut FileHandle as *mut libc::file_handle,
                &mut mount_id,
                libc::AT_EMPTY_PATH,
            )
        };
        (ret == 0).then(|| {
            let mut out = fh.handle_type.to_le_bytes().to_vec();
            out.extend_from_slice(&fh.f_handle[..fh.handle_bytes as usize]);
            out
        })
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether extents can become shared while we run (btrfs, xfs with reflink, bcachefs, zfs).
    pub fn copy_on_write(&self) -> bool {
        matches!(
            self.fs_magic,
            BTRFS_SUPER_MAGIC | XFS_SUPER_MAGIC | BCACHEFS_SUPER_MAGIC | ZFS_SUPER_MAGIC
        )
    }

    /// The bytes its file system has free for this user (fstatvfs: available blocks times their size).
    pub fn free_bytes(&self) -> io::Result<u64> {
        let buf = rustix::fs::fstatvfs(&self.pin)?;
        Ok(buf.f_bavail.saturating_mul(buf.f_frsize))
    }

    pub fn facts(&self) -> io::Result<FileFacts> {
        let sx = statx_fd(&self.pin)?;
        let mode = sx.stx_mode as u32;
        // An empty buffer asks only for the value's size: whether the file has one at all.
        let caps = rustix::fs::getxattr(
            self.proc_path.as_c_str(),
            c"security.capability",
            &mut [0u8; 0][..],
        )
        .is_ok();
        let named = open_beneath(&self.base, &self.relative, libc::O_PATH | libc::O_NOFOLLOW)
            .and_then(|f| identity_of(&f))
            .is_ok_and(|id| id == self.identity);
        Ok(FileFacts {
            size_bytes: sx.stx_size,
            mode,
            uid: sx.stx_uid,
            gid: sx.stx_gid,
            nlink: sx.stx_nlink as u64,
            atime: (sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec as i64),
            mtime: (sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec as i64),
            ctime: (sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec as i64),
            birth: birth_of(&sx),
            privileged: mode & (libc::S_ISUID | libc::S_ISGID) != 0 || caps,
            named,
        })
    }

    /// A descriptor for reading (the window's, or a fresh read-only one) and whether it reads with O_DIRECT.
    fn with_reader<T>(&mut self, f: impl FnOnce(&File, bool, &mut Self) -> io::Result<T>) -> io::Result<T> {
        if let Some(w) = self.window.take() {
            let out = f(&w, self.direct, self);
            self.window = Some(w);
            return out;
        }
        let flags = libc::O_RDONLY | libc::O_NONBLOCK;
        let reader = if self.direct {
            self.reopen(flags | libc::O_DIRECT)
                .or_else(|_| self.reopen(flags))?
        } else {
            self.reopen(flags)?
        };
        let direct = fcntl_has_direct(&reader);
        f(&reader, direct, self)
    }

    /// Data ranges: SEEK_DATA/SEEK_HOLE, less unwritten (preallocated) extents.
    pub fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        let len = self.facts()?.size_bytes;
        self.with_reader(|file, _, _| {
            let ranges = data_ranges(file, len)?;
            let unwritten = unwritten_extents(file)?;
            Ok(subtract(&ranges, &unwritten))
        })
    }

    pub fn shares_extents(&mut self) -> io::Result<bool> {
        self.with_reader(|file, _, _| has_shared_extents(file))
    }

    /// Opens the window: the inode for writing (direct I/O where the file system allows it) with a write lease.
    /// `Ok(false)` when someone else has the file open (or is executing it).
    pub fn open_window(&mut self) -> io::Result<bool> {
        if self.window.is_some() {
            return Ok(true);
        }
        // Our own read-ahead descriptor would make the kernel refuse the lease: it is closed first.
        if let Some(ahead) = &self.ahead
            && !ahead.thread.is_finished()
        {
            self.finish_read_ahead();
        }
        let base = libc::O_RDWR | libc::O_NONBLOCK;
        let file = match self.reopen(base | if self.direct { libc::O_DIRECT } else { 0 }) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.direct => {
                self.direct = false;
                self.reopen(base)?
            }
            // Being executed (ETXTBSY) or leased by someone else (EWOULDBLOCK): their turn.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETXTBSY) | Some(libc::EWOULDBLOCK)) => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        ignore_sigio();
        // SAFETY: plain integers on a descriptor we own.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
            let e = last_error();
            if e.raw_os_error() == Some(libc::EAGAIN) {
                return Ok(false);
            }
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "no write lease could be taken ({e}); without one a concurrent writer could not be excluded"
                ),
            ));
        }
        // Changes before this window are seen in the file's times and mode; from here on, the watch sees what
        // those cannot show (a time set by path and then overwritten by our write or our restore).
        match &mut self.watch {
            Some(watch) => {
                watch.changed()?;
            }
            None => self.watch = Some(AttribWatch::new(&self.proc_path)?),
        }
        self.window = Some(file);
        Ok(true)
    }

    /// Inside a window: what changed since the window opened or since the last call (our own writes and time
    /// restores included; the caller knows what it did).
    pub fn path_changes(&mut self) -> io::Result<crate::watch::Changes> {
        match &mut self.watch {
            Some(watch) => watch.changed(),
            None => Err(io::Error::other("path_changes outside a window")),
        }
    }

    /// Inside a window: whether someone asked to open the file for writing (the lease is being broken to
    /// F_UNLCK), or the lease is gone, or its state cannot be read (which must not pass for "nobody").
    pub fn writer_waiting(&self) -> bool {
        self.window.as_ref().is_none_or(|w| {
            // SAFETY: plain integers on a descriptor we own.
            let lease = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETLEASE) };
            lease != libc::F_WRLCK && lease != libc::F_RDLCK
        })
    }

    pub fn close_window(&mut self) {
        if let Some(file) = self.window.take() {
            // SAFETY: plain integers on a descriptor we own.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        }
    }

    /// Whether the window's lease still stands (a pending break reports the type it is being broken to).
    /// Which other processes hold the file open, map it or lock it now (the guard's survey, in words): why a
    /// lease is refused, for the reason a file is given up.
    pub fn other_users(&self) -> Vec<String> {
        crate::guard::processes_using_file(&self.pin, std::time::Duration::ZERO)
            .map(|found| found.iter().map(|f| f.to_string()).collect())
            .unwrap_or_default()
    }

    pub fn lease_held(&self) -> bool {
        self.window.as_ref().is_some_and(|w| {
            // SAFETY: plain integers on a descriptor we own.
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETLEASE) == libc::F_WRLCK }
        })
    }

    /// Makes the staging buffer hold at least `bytes` (a settle may read a chunk of an earlier run's size).
    fn ensure_buffer(&mut self, bytes: usize) {
        if self.buffer.buffer_len() < bytes {
            self.buffer = BufferPool::new(
                1,
                bytes.next_multiple_of(self.align as usize),
                self.align as usize,
            );
        }
    }

    /// Starts reading `len` bytes at `offset` from the medium into `buf` on a helper thread, through a read-only
    /// O_DIRECT descriptor of its own, so the read runs while this thread syncs and verifies the chunk before it;
    /// [`PinnedFile::take_read_ahead`] hands the buffer back filled, with the checksum of what was read (taken on
    /// the helper's thread piece by piece as the pieces arrive). Only outside a window and with O_DIRECT; otherwise the buffer comes straight
    /// back and the caller reads in line. The helper's descriptor is closed before any window opens
    /// (`open_window` waits for it): a write lease is refused while another descriptor is open.
    pub fn read_ahead(&mut self, offset: u64, len: usize, mut buf: Scratch) -> Result<(), Scratch> {
        self.finish_read_ahead();
        if self.window.is_some() || !self.direct {
            return Err(buf);
        }
        let aligned = (len as u64).next_multiple_of(self.align) as usize;
        // The slice the helper reads into, sized and checked here; the helper asks for the same length, which
        // neither moves nor grows the buffer.
        if !self.direct_ready(buf.slice_mut(aligned)) {
            return Err(buf);
        }
        let Ok(reader) = self.reopen(libc::O_RDONLY | libc::O_NONBLOCK | libc::O_DIRECT) else {
            return Err(buf);
        };
        if !fcntl_has_direct(&reader) {
            return Err(buf);
        }
        // The buffer is moved into the helper and back out through its join handle: only one thread can reach
        // it at a time, and a failed spawn loses it (the caller allocates another).
        let spawned = std::thread::Builder::new()
            .name("refresh-read-ahead".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                let staging = buf.slice_mut(aligned);
                let read = read_summed(&reader, staging, offset, len);
                drop(reader);
                let elapsed = started.elapsed();
                FilledScratch {
                    buf,
                    digest: read.as_ref().ok().map(|r| r.sum),
                    read: read.map(|r| r.len_bytes),
                    elapsed,
                }
            });
        match spawned {
            Ok(thread) => {
                self.ahead = Some(ReadAhead { offset, len, thread });
                Ok(())
            }
            Err(_) => Err(Scratch::new()),
        }
    }

    /// The read-ahead of `len` bytes at `offset`, once it has finished (this waits for it); `None` when no
    /// read-ahead of that range was started (the caller reads in line).
    pub fn take_read_ahead(&mut self, offset: u64, len: usize) -> Option<FilledScratch> {
        let ahead = self.ahead.take_if(|a| a.offset == offset && a.len == len)?;
        let filled = ahead.thread.join().ok()?;
        self.last_read = filled.elapsed;
        Some(filled)
    }

    /// Waits for a read-ahead in progress (its descriptor is then closed) and drops its result.
    fn finish_read_ahead(&mut self) {
        if let Some(ahead) = self.ahead.take() {
            let _ = ahead.thread.join();
        }
    }

    /// How long the medium took for the last [`PinnedFile::read_from_media`] or taken read-ahead.
    pub fn last_read_time(&self) -> std::time::Duration {
        self.last_read
    }

    /// Reads from the medium, in line: O_DIRECT, or after dropping the cached pages when the file system has
    /// none; returns the bytes read and their checksum. A read-ahead in progress (of another range, or of this
    /// one not taken) goes on beside it.
    pub fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<MediaRead> {
        let started = std::time::Instant::now();
        let result = self.read_in_line(offset, buf);
        self.last_read = started.elapsed();
        result
    }

    /// Whether `buf` can go to an O_DIRECT transfer as it is: its address and length are multiples of the
    /// medium's alignment (the staging copy is then not needed).
    fn direct_ready(&self, buf: &[u8]) -> bool {
        let align = self.align as usize;
        (buf.as_ptr() as usize).is_multiple_of(align) && buf.len().is_multiple_of(align)
    }

    fn read_in_line(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<MediaRead> {
        let aligned = (buf.len() as u64).next_multiple_of(self.align) as usize;
        let in_place = self.direct_ready(buf);
        if !in_place {
            self.ensure_buffer(aligned);
        }
        self.with_reader(|file, direct, me| {
            if !direct {
                let _ = crate::sys::drop_cache(file, offset, aligned as u64);
            }
            if in_place {
                let len = buf.len();
                return read_summed(file, buf, offset, len);
            }
            // SAFETY: the staging buffer is used only by synchronous pread/pwrite on this thread.
            let staging = &mut unsafe { me.buffer.slot_mut(0) }[..aligned];
            let read = read_summed(file, staging, offset, buf.len())?;
            buf[..read.len_bytes].copy_from_slice(&staging[..read.len_bytes]);
            Ok(read)
        })
    }

    /// Writes `buf` at `offset` inside the window. Whole aligned blocks go through O_DIRECT; a partial last
    /// block (at the end of the file) through the page cache on the same descriptor, synced and evicted at once.
    pub fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let file = self
            .window
            .take()
            .ok_or_else(|| io::Error::other("write outside a window"))?;
        let result = self.write_in(&file, offset, buf);
        self.window = Some(file);
        result
    }

    fn write_in(&mut self, file: &File, offset: u64, buf: &[u8]) -> io::Result<()> {
        let whole = if self.direct {
            buf.len() as u64 / self.align * self.align
        } else {
            0
        } as usize;
        if whole > 0 && self.direct_ready(&buf[..whole]) {
            file.write_all_at(&buf[..whole], offset)?;
        } else if whole > 0 {
            self.ensure_buffer(buf.len());
            // SAFETY: the staging buffer is used only by synchronous pread/pwrite on this thread.
            let staging = &mut unsafe { self.buffer.slot_mut(0) }[..whole];
            staging.copy_from_slice(&buf[..whole]);
            file.write_all_at(staging, offset)?;
        }
        if whole < buf.len() {
            crate::sys::set_direct(file, false)?;
            let tail = file.write_all_at(&buf[whole..], offset + whole as u64);
            let synced = file.sync_data();
            let _ = crate::sys::drop_cache(file, offset + whole as u64, (buf.len() - whole) as u64);
            if self.direct {
                crate::sys::set_direct(file, true)?;
            }
            tail?;
            synced?;
        }
        Ok(())
    }

    /// Makes the writes durable (fdatasync works on any descriptor of the inode, so no window is needed).
    pub fn sync(&mut self) -> io::Result<()> {
        self.with_reader(|file, _, _| file.sync_data())
    }

    /// Sets the modification time on the pinned inode and leaves the access time alone (the change time
    /// necessarily moves).
    pub fn set_mtime(&mut self, mtime: Time) -> io::Result<()> {
        let times = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_OMIT,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: mtime.0,
                tv_nsec: mtime.1,
            },
        };
        Ok(rustix::fs::utimensat(
            rustix::fs::CWD,
            self.proc_path.as_c_str(),
            &times,
            rustix::fs::AtFlags::empty(),
        )?)
    }
}

impl Drop for PinnedFile {
    fn drop(&mut self) {
        self.finish_read_ahead();
        self.close_window();
    }
}

/// How much of a chunk is read before it is summed: the piece just read is summed while the next one is on its
/// way from the medium (another thread's read keeps the medium busy meanwhile), so a chunk's checksum costs the
/// time of one piece after its read, not of the chunk. A multiple of every direct-I/O alignment.
const PIECE_BYTES: usize = 512 << 10;

/// Reads `buf` (until it is full or the file ends) in pieces of [`PIECE_BYTES`], summing the first `len` bytes of
/// what was read as each piece arrives.
fn read_summed(file: &File, buf: &mut [u8], offset: u64, len: usize) -> io::Result<MediaRead> {
    let mut sum = ssdlab_core::checksum::Checksum::new();
    let mut done = 0;
    while done < buf.len() {
        let piece = (buf.len() - done).min(PIECE_BYTES);
        let got = read_fully(file, &mut buf[done..done + piece], offset + done as u64)?;
        let summed_to = (done + got).min(len);
        if summed_to > done {
            sum.update(&buf[done..summed_to]);
        }
        done += got;
        if got < piece {
            break;
        }
    }
    Ok(MediaRead {
        len_bytes: done.min(len),
        sum: sum.finish(),
    })
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_fully(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Ranges minus holes: `ranges` with every `(offset, len)` of `cut` removed.
fn subtract(ranges: &[(u64, u64)], cut: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(start, len) in ranges {
        let mut pieces = vec![(start, start + len)];
        for &(c_start, c_len) in cut {
            let c_end = c_start + c_len;
            pieces = pieces
                .into_iter()
                .flat_map(|(s, e)| {
                    if c_end <= s || c_start >= e {
                        vec![(s, e)]
                    } else {
                        let mut keep = Vec::new();
                        if c_start > s {
                            keep.push((s, c_start));
                        }
                        if c_end < e {
                            keep.push((c_end, e));
                        }
                        keep
                    }
                })
                .collect();
        }
        out.extend(pieces.into_iter().map(|(s, e)| (s, e - s)));
    }
    out
}

fn fcntl_has_direct(file: &File) -> bool {
    // SAFETY: F_GETFL takes a plain integer on a descriptor we own.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

/// Makes SIGIO harmless: a broken lease is then noticed by polling instead of killing the process.
fn ignore_sigio() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
}

const MAX_HANDLE_BYTES: usize = 128;

/// struct file_handle with room for the largest handle.
#[repr(C)]
struct FileHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; MAX_HANDLE_BYTES],
}

/// Finds a journalled file again: the path beneath the root if it still names the same inode, else (renamed or
/// moved) through its file handle, which needs CAP_DAC_READ_SEARCH. `None` when it is gone or replaced.
pub fn reopen_pinned(
    root: &Path,
    path: &Path,
    identity: Identity,
    handle: Option<&[u8]>,
) -> io::Result<Option<PinnedFile>> {
    let by_path = PinnedFile::open(root, path);
    if let Ok(p) = by_path.as_ref()
        && p.identity.is(&identity)
    {
        return by_path.map(Some).map_err(|r| io::Error::other(r.0));
    }
    // The name is gone or belongs to another file: the inode itself may still exist under another name.
    if let Some(p) = handle
        .and_then(|h| PinnedFile::from_handle(root, path, h).ok())
        .filter(|p| p.identity.is(&identity))
    {
        return Ok(Some(p));
    }
    match by_path {
        // Something is at the path that cannot be pinned (our file made immutable, say): try again next run.
        Err(refusal) if std::fs::symlink_metadata(path).is_ok() => Err(io::Error::other(refusal.0)),
        // Gone only when we looked on the right file system: the nearest existing directory on the way to the
        // old path is on it, and neither the name nor the handle found the inode there. Otherwise the file
        // system is not mounted where it was (unmounted, mounted elsewhere, a new device number): keep the
        // entry for a run that can see it.
        _ => {
            let ancestor = path.ancestors().skip(1).find(|a| std::fs::metadata(a).is_ok());
            let on_its_fs = ancestor
                .and_then(|a| identity_of_path(a).ok())
                .is_some_and(|a| a.same_fs_as(&identity));
            if on_its_fs {
                Ok(None)
            } else {
                Err(io::Error::other(format!(
                    "its file system is not mounted at {} as it was; the entry is kept until it is",
                    ancestor.map_or("/".into(), |a| a.display().to_string())
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_extents_are_cut_out_of_data_ranges() {
        assert_eq!(subtract(&[(0, 100)], &[(10, 20)]), vec![(0, 10), (30, 70)]);
        assert_eq!(subtract(&[(0, 100)], &[(0, 100)]), vec![]);
        assert_eq!(subtract(&[(0, 10), (50, 10)], &[(5, 50)]), vec![(0, 5), (55, 5)]);
    }

    #[test]
    fn a_pinned_file_follows_its_inode_through_a_rename_and_knows_its_name_is_gone() {
        let dir = std::env::temp_dir().join(format!("ssdlab-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let mut pinned = PinnedFile::open(&dir, &path).unwrap();
        assert!(pinned.facts().unwrap().named);
        std::fs::rename(&path, dir.join("g")).unwrap();
        let facts = pinned.facts().unwrap();
        assert!(!facts.named, "the name no longer leads to the pinned inode");
        assert!(pinned.open_window().unwrap());
        assert!(pinned.lease_held());
        let mut buf = vec![0u8; 4096];
        assert_eq!(pinned.read_from_media(0, &mut buf).unwrap().len_bytes, 4096);
        assert!(buf.iter().all(|&b| b == 7));
        // Another opener is refused while the window is open (O_NONBLOCK), and the lease reports the break.
        let other = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open(dir.join("g"));
        assert!(other.is_err());
        assert!(!pinned.lease_held());
        pinned.close_window();
        assert!(std::fs::File::open(dir.join("g")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A read-ahead hands back the caller's buffer holding the bytes the medium holds, with their digest; a read
    /// of another range meanwhile reads in line; a read-ahead of another range is not taken for this one; a window
    /// opened while one runs waits for it (our own second descriptor would make the lease refused).
    #[test]
    fn a_read_ahead_gives_the_next_read_its_bytes_and_never_blocks_a_window() {
        // On disk, not tmpfs: the read-ahead needs O_DIRECT.
        let dir = std::path::Path::new("/var/tmp").join(format!("ssdlab-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        // Chunks of a little more than two pieces, so a chunk's checksum is taken over pieces and a part.
        let len = (1 << 20) + 4096;
        let data: Vec<u8> = (0..(len * 3 + (len - 8192)) as u32)
            .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let mut pinned = PinnedFile::open(&dir, &path).unwrap();
        let sum = ssdlab_core::checksum::checksum;
        let mut check = vec![0u8; len];
        let mut spare = Scratch::new();
        for round in 0..3u64 {
            let offset = round * len as u64;
            pinned
                .read_ahead(offset, len, std::mem::take(&mut spare))
                .expect("O_DIRECT on /var/tmp: the read-ahead starts");
            // The chunk before, re-read while the helper runs.
            if round > 0 {
                let before = offset as usize - len;
                let read = pinned.read_from_media(before as u64, &mut check).unwrap();
                assert_eq!(read.len_bytes, len);
                assert_eq!(check[..], data[before..offset as usize]);
                assert_eq!(read.sum, sum(&check));
            }
            assert!(
                pinned.take_read_ahead(offset + 4096, len).is_none(),
                "another range was taken"
            );
            let mut filled = pinned
                .take_read_ahead(offset, len)
                .expect("the read-ahead of this range");
            assert_eq!(filled.read.unwrap(), len);
            let chunk = &data[offset as usize..offset as usize + len];
            assert_eq!(filled.buf.slice_mut(len)[..], chunk[..]);
            assert_eq!(filled.digest, Some(sum(chunk)));
            spare = filled.buf;
        }
        // The last chunk is short (the file ends): what was read is summed, not the buffer's length.
        let last = 3 * len as u64;
        pinned.read_ahead(last, len, spare).unwrap();
        let mut filled = pinned.take_read_ahead(last, len).unwrap();
        assert_eq!(filled.read.unwrap(), len - 8192);
        assert_eq!(filled.buf.slice_mut(len)[..len - 8192], data[last as usize..]);
        assert_eq!(filled.digest, Some(sum(&data[last as usize..])));
        let read = pinned.read_from_media(last, &mut check).unwrap();
        assert_eq!(
            (read.len_bytes, read.sum),
            (len - 8192, sum(&data[last as usize..]))
        );
        pinned.read_ahead(0, len, filled.buf).unwrap();
        assert!(
            pinned.open_window().unwrap(),
            "our own read-ahead kept the lease from us"
        );
        assert!(pinned.lease_held());
        // Inside a window the buffer comes straight back.
        assert!(pinned.read_ahead(0, len, Scratch::new()).is_err());
        pinned.close_window();
        drop(pinned);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    trait NonBlock {
        fn custom_flags_nonblock(&mut self) -> &mut Self;
    }
    impl NonBlock for std::fs::OpenOptions {
        fn custom_flags_nonblock(&mut self) -> &mut Self {
            use std::os::unix::fs::OpenOptionsExt;
            self.custom_flags(libc::O_NONBLOCK)
        }
    }
}
