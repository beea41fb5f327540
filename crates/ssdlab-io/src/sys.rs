//! Thin, safe wrappers around the Linux calls ssdlab needs that std does not offer.
//!
//! Each wrapper owns exactly one system call and turns its failure into `std::io::Error`. Nothing here keeps
//! state or decides policy.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

// Block-device ioctl numbers from <linux/fs.h>; libc does not export them.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272; // _IOR(0x12, 114, size_t)
const BLKDISCARD: libc::c_ulong = 0x1277; // _IO(0x12, 119)
const BLKSECDISCARD: libc::c_ulong = 0x127d; // _IO(0x12, 125)
const BLKZEROOUT: libc::c_ulong = 0x127f; // _IO(0x12, 127)

/// The size of a transparent huge page where ssdlab runs (x86-64 and arm64 with 4 KiB base pages).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// `len` zeroed bytes whose memory the kernel is asked to back with transparent huge pages: `madvise`
/// (MADV_HUGEPAGE) before the first touch, so the zeroing faults them in as huge pages. Debian's default
/// (`transparent_hugepage/enabled` = madvise) gives none without asking. An O_DIRECT transfer pins every page
/// of its buffer: a 4 MiB chunk is 1,024 base pages to pin, add to a bio and mark dirty, or two huge pages
/// when it starts on a multiple of [`HUGE_PAGE_BYTES`] (the advice covers only the whole huge pages inside the
/// vector, so a buffer that must be huge pages throughout asks for that much more and starts there). Where the
/// kernel declines (huge pages off or none free), the memory is ordinary. The vector must not grow past its
/// length: a reallocation would be ordinary memory again.
pub fn huge_page_bytes(len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = Vec::with_capacity(len + HUGE_PAGE_BYTES);
    let spare = bytes.spare_capacity_mut();
    let start = spare.as_mut_ptr() as usize;
    let first = start.next_multiple_of(HUGE_PAGE_BYTES);
    let end = (start + spare.len()) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    if end > first {
        // SAFETY: [first, end) lies inside the vector's allocation, which nothing else refers to yet; the
        // advice changes only how its pages are faulted in later, never their contents or whether they are
        // valid. Its failure (an old kernel, huge pages compiled out) leaves ordinary memory, so it is ignored.
        let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
    bytes.resize(len, 0);
    bytes
}

/// The open flag that refuses to follow a symbolic link, for callers outside this crate.
pub const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
/// Opens without blocking (a FIFO with no writer).
pub const O_NONBLOCK: i32 = libc::O_NONBLOCK;

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The size in bytes of an open block device (BLKGETSIZE64).
pub fn block_device_size(file: &File) -> io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which points to a live local.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) })?;
    Ok(size)
}

/// Discards `len` bytes at `offset` on an open block device (BLKDISCARD).
pub fn block_discard(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKDISCARD reads two u64 through the pointer, which points to a live local array.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKDISCARD, range.as_ptr()) })
}

/// Discards `len` bytes at `offset` so that the old data is unrecoverable, on devices that promise it
/// (BLKSECDISCARD; most report EOPNOTSUPP).
pub fn block_secure_discard(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKSECDISCARD reads two u64 through the pointer, which points to a live local array.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKSECDISCARD, range.as_ptr()) })
}

/// Makes `len` bytes at `offset` read as zeroes (BLKZEROOUT: the device's WRITE ZEROES where it has one, else the
/// kernel writes zeroes).
pub fn block_zero_out(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKZEROOUT reads two u64 through the pointer, which points to a live local array.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKZEROOUT, range.as_ptr()) })
}

/// Deallocates a byte range of a regular file, keeping its size (a punched hole reads back as zeroes).
pub fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    Ok(rustix::fs::fallocate(
        file,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        offset,
        len,
    )?)
}

/// Where the next data (`SEEK_DATA`) or hole (`SEEK_HOLE`) at or after `offset` begins; `None` when there is no
/// data after `offset` (ENXIO). The file's position moves, which the positional I/O here never uses.
pub fn seek_extent(file: &File, offset: u64, whence: SeekTo) -> io::Result<Option<u64>> {
    let to = match whence {
        SeekTo::Data => rustix::fs::SeekFrom::Data(offset),
        SeekTo::Hole => rustix::fs::SeekFrom::Hole(offset),
    };
    match rustix::fs::seek(file, to) {
        Ok(at) => Ok(Some(at)),
        Err(rustix::io::Errno::NXIO) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Which boundary [`seek_extent`] looks for.
#[derive(Debug, Clone, Copy)]
pub enum SeekTo {
    Data,
    Hole,
}

/// Reserves space for `len` bytes from offset 0 so writes later do not allocate (or fail with ENOSPC).
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    Ok(rustix::fs::fallocate(
        file,
        rustix::fs::FallocateFlags::empty(),
        0,
        len,
    )?)
}

/// Whether `file`, open for writing, is an active swap file, by the kernel's own mark on the inode rather than
/// by the paths /proc/swaps lists, which a mount over the path or a lazily unmounted one can hide. fallocate
/// refuses any change to an active swap file with ETXTBSY before it looks at the range; a range that ends past
/// the largest possible offset is refused with EFBIG for every other file, so asking changes nothing.
pub fn is_active_swap_file(file: &File) -> bool {
    // The range is refused whatever the file is.
    let asked = rustix::fs::fallocate(
        file,
        rustix::fs::FallocateFlags::KEEP_SIZE,
        libc::off_t::MAX as u64,
        1,
    );
    asked == Err(rustix::io::Errno::TXTBSY)
}

/// Drops clean cached pages of a byte range (posix_fadvise DONTNEED).
pub fn drop_cache(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // A length of zero means "to the end of the file", as posix_fadvise reads it.
    let len = std::num::NonZeroU64::new(len);
    Ok(rustix::fs::fadvise(
        file,
        offset,
        len,
        rustix::fs::Advice::DontNeed,
    )?)
}

/// Whether the page cache holds every page of `[offset, offset + len)` of `file` now, so a read of it would
/// not wait for the medium (cachestat, Linux 6.5+). False where the kernel cannot say (an older kernel, an
/// architecture whose call number is not known here): the caller then reads through the device as before.
pub fn page_cache_holds(file: BorrowedFd<'_>, offset: u64, len: u64) -> bool {
    // cachestat's number in the x86_64 table and in the generic one (arm64, riscv64).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
    const SYS_CACHESTAT: Option<libc::c_long> = Some(451);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
    const SYS_CACHESTAT: Option<libc::c_long> = None;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // A kernel without the call (or a seccomp filter that refuses it) is asked once.
    static UNAVAILABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(number) = SYS_CACHESTAT else {
        return false;
    };
    if UNAVAILABLE.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let Some(end) = offset.checked_add(len) else {
        return false;
    };
    if len == 0 {
        return true;
    }
    let page = rustix::param::page_size() as u64;
    let pages = end.div_ceil(page) - offset / page;
    let range = Range { off: offset, len };
    let mut stat = Stat::default();
    // SAFETY: cachestat reads the range and writes the stat, both live locals of the C layout the kernel
    // expects (struct cachestat_range, struct cachestat), and keeps neither pointer after the call.
    let got = unsafe {
        libc::syscall(
            number,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Stat,
            0u32,
        )
    };
    if got != 0 {
        if matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOSYS | libc::EPERM)
        ) {
            UNAVAILABLE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        return false;
    }
    if stat.nr_cache < pages {
        return false;
    }
    // cachestat counts pages that are present, and a page read ahead is present before its data arrives: a
    // read of it would wait for the medium after all. One byte at each end, asked of the cache alone
    // (RWF_NOWAIT fails rather than wait for a page that is not up to date yet), tells a range whose read
    // ahead has landed from one still on its way (read ahead fills a range from its start, in one request or a
    // few in order).
    [offset, end - 1].iter().all(|&at| {
        let mut byte = 0u8;
        let iov = libc::iovec {
            iov_base: (&mut byte as *mut u8).cast(),
            iov_len: 1,
        };
        // SAFETY: one iovec over a live local byte; preadv2 is synchronous and keeps no pointer.
        let read = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at as libc::off_t, libc::RWF_NOWAIT) };
        read == 1
    })
}

/// statx: `path` relative to the directory descriptor `dirfd` (rustix's CWD for the working directory; an empty
/// path with AT_EMPTY_PATH names `dirfd` itself, an O_PATH descriptor included), asking for the fields in `mask`.
/// The one wrapper of the call: every statx in ssdlab goes through it.
pub fn statx(
    dirfd: impl std::os::fd::AsFd,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    mask: u32,
) -> io::Result<rustix::fs::Statx> {
    Ok(rustix::fs::statx(
        dirfd,
        path,
        rustix::fs::AtFlags::from_bits_retain(flags as u32),
        rustix::fs::StatxFlags::from_bits_retain(mask),
    )?)
}

/// Direct-I/O alignment of a file as the kernel reports it (statx STATX_DIOALIGN, Linux 6.1+):
/// `(memory alignment, offset alignment)`, or None when the filesystem does not say.
pub fn direct_io_alignment(path: &Path) -> Option<(u32, u32)> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let stx = statx(
        rustix::fs::CWD,
        &c_path,
        libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_DIOALIGN,
    )
    .ok()?;
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align, stx.stx_dio_offset_align))
}

/// User and system CPU seconds used by this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
}

impl CpuTimes {
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: self.user_s - earlier.user_s,
            sys_s: self.sys_s - earlier.sys_s,
        }
    }
}

/// This process's CPU times (getrusage RUSAGE_SELF: every thread, including the kernel's work on our behalf
/// in system time).
pub fn cpu_times() -> CpuTimes {
    // SAFETY: rusage is plain old data; zeroed is valid, and getrusage fills the live local.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF cannot fail with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    CpuTimes {
        user_s: seconds(usage.ru_utime),
        sys_s: seconds(usage.ru_stime),
    }
}

/// The host's name, kernel release and CPU count, read from /proc.
pub fn host_info() -> ssdlab_core::schema::HostInfo {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    ssdlab_core::schema::HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: format!("Linux {}", read("/proc/sys/kernel/osrelease")),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
    }
}

/// How long the calling thread has waited on a run queue for a CPU since it started, in nanoseconds, and how many
/// times it was put on a CPU: the second and third figures of `/proc/thread-self/schedstat` (None where the
/// kernel does not keep them). A thread that measures latency while it waits for a CPU measures the host, not
/// the device.
pub fn thread_cpu_wait() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut figures = text.split_whitespace().skip(1);
    Some((figures.next()?.parse().ok()?, figures.next()?.parse().ok()?))
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Installs a SIGINT/SIGTERM handler that sets a flag instead of killing the process, so a long run can stop
/// cleanly and still write what it measured. The handler resets itself: a second signal kills as usual.
pub fn interrupt_flag() -> &'static std::sync::atomic::AtomicBool {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: sigaction is plain old data; the handler only performs an atomic store, which is
            // async-signal-safe, and lives for the whole program.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_interrupt as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
    &INTERRUPTED
}

/// Whether this process runs with root's effective user id (advice about permissions depends on it).
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The width in columns of the terminal standard error writes to; None when it is not a terminal (a pipe, a
/// file) or the terminal does not say, so callers leave their lines as they are.
pub fn stderr_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer given, which points at a local of that type; on
    // a descriptor that is no terminal it fails with ENOTTY and writes nothing.
    let done = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut size as *mut libc::winsize) };
    (done == 0 && size.ws_col > 0).then_some(size.ws_col as usize)
}

/// Sends this process's standard error to /dev/null from now on and returns a handle on the original one, for
/// the messages that must still be seen (`--quiet`: errors only).
pub fn silence_stderr() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    let original = std::io::stderr().as_fd().try_clone_to_owned()?;
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // fd 2 now refers to /dev/null; the original stderr stays reachable through `original`.
    rustix::stdio::dup2_stderr(&null)?;
    Ok(std::fs::File::from(original))
}

/// Lowers this thread's timer slack to 1 us (the default is 50 us), so the short sleeps of a rate-limited run wake
/// close to the scheduled issue time instead of up to 50 us late.
pub fn tighten_timer_slack() {
    // A kernel that refuses leaves the default slack: the sleeps are then only less precise.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
}

/// How long the kernel lets a lease holder keep a file after someone asks for it
/// (`/proc/sys/fs/lease-break-time`, 45 s by default).
pub fn lease_break_time() -> std::time::Duration {
    let seconds = std::fs::read_to_string("/proc/sys/fs/lease-break-time")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(45);
    std::time::Duration::from_secs(seconds)
}

/// Operations the block layer has in flight on the device (or partition) holding `st_dev`, from
/// `/sys/dev/block/MAJ:MIN/stat`; None when the file system is not on a block device.
pub fn block_in_flight(st_dev: u64) -> Option<u64> {
    let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    // Field 9 of the stat file: I/Os currently in flight.
    stat.split_whitespace().nth(8)?.parse().ok()
}

/// A device number as "MAJOR:MINOR", as /proc and sysfs write it.
pub fn device_name(dev: u64) -> String {
    format!("{}:{}", libc::major(dev), libc::minor(dev))
}

/// What the loop driver says a loop device is backed by (LOOP_GET_STATUS64): the backing file's device and
/// inode, and its `rdev` when the backing file is itself a block device (0 for a regular file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopBacking {
    pub st_dev: u64,
    pub st_ino: u64,
    pub st_rdev: u64,
    pub offset_bytes: u64,
    /// 0: up to the end of the backing file.
    pub sizelimit_bytes: u64,
    /// The file as the loop driver opened it, when the guard names it by another (an overlay's file by its
    /// layer file): processes that hold the file open hold that one.
    pub opened_as: Option<(u64, u64)>,
}

/// `struct loop_info64` of <linux/loop.h>.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// The backing of an open loop device (LOOP_GET_STATUS64). ENXIO when no file is attached.
pub fn loop_backing(file: &File) -> io::Result<LoopBacking> {
    // SAFETY: loop_info64 is plain old data; all-zero bytes are a valid value of it.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one struct loop_info64 through the pointer, which points to a live local
    // of exactly that layout.
    check(unsafe { libc::ioctl(file.as_raw_fd(), LOOP_GET_STATUS64, &mut info as *mut LoopInfo64) })?;
    // The kernel encodes device numbers with huge_encode_dev, the same layout as glibc's for majors below 4096.
    Ok(LoopBacking {
        st_dev: info.lo_device,
        st_ino: info.lo_inode,
        st_rdev: info.lo_rdevice,
        offset_bytes: info.lo_offset,
        sizelimit_bytes: info.lo_sizelimit,
        opened_as: None,
    })
}

/// Opens `path` with `flags` (O_CLOEXEC added) where no component of the path is a symbolic link, magic links
/// such as /proc/self/fd/N included (openat2 with RESOLVE_NO_SYMLINKS). ELOOP when one is. Kernels before 5.6
/// have no openat2: there every component is checked with lstat first and the last is opened O_NOFOLLOW, which
/// leaves a window between the check and the open that openat2 closes.
pub fn open_no_symlinks(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let c_path =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    match openat2(
        rustix::fs::CWD,
        &c_path,
        flags,
        rustix::fs::ResolveFlags::NO_SYMLINKS,
    ) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        other => return other,
    }
    let mut prefix = std::path::PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        if std::fs::symlink_metadata(&prefix)?.file_type().is_symlink() {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
    }
    let flags = rustix::fs::OFlags::from_bits_retain((flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u32);
    Ok(File::from(rustix::fs::open(
        c_path.as_c_str(),
        flags,
        rustix::fs::Mode::empty(),
    )?))
}

/// openat2 (Linux 5.6+) relative to `dirfd` with `flags` (O_CLOEXEC added) and `resolve`. ENOSYS on an older
/// kernel, for the caller's fallback.
pub(crate) fn openat2(
    dirfd: impl std::os::fd::AsFd,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    resolve: rustix::fs::ResolveFlags,
) -> io::Result<File> {
    let flags = rustix::fs::OFlags::from_bits_retain((flags | libc::O_CLOEXEC) as u32);
    Ok(File::from(rustix::fs::openat2(
        dirfd,
        path,
        flags,
        rustix::fs::Mode::empty(),
        resolve,
    )?))
}

/// Turns O_DIRECT on or off for an open file (fcntl F_SETFL): a device is probed through the page cache and then
/// written around it through the same descriptor, and the refresh writes a file's unaligned tail, which O_DIRECT
/// cannot take, through the cache.
pub fn set_direct(file: &File, on: bool) -> io::Result<()> {
    let mut flags = rustix::fs::fcntl_getfl(file)?;
    flags.set(rustix::fs::OFlags::DIRECT, on);
    Ok(rustix::fs::fcntl_setfl(file, flags)?)
}

/// Takes an open-file-description write lock over the whole of `file` without waiting (F_OFD_SETLK): other
/// programs that lock (QEMU takes OFD locks on its images) see that the file is being written and refuse it,
/// and one that already holds a lock makes this fail with `WouldBlock`. The lock lasts as long as this open
/// file description: until the last descriptor of it closes.
pub fn lock_whole_file_for_writing(file: &File) -> io::Result<()> {
    let lock = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    // SAFETY: F_OFD_SETLK reads one struct flock through the pointer, which points to a live local.
    match check(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) }) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            Err(io::Error::new(io::ErrorKind::WouldBlock, e))
        }
        other => other,
    }
}

/// Whether any other open file description of the file open as `file` exists, anywhere (any process, thread,
/// PID or mount namespace, a descriptor in flight over a socket or registered with io_uring, a loop device over
/// it, a mapping): the kernel grants a write lease only when there is none. Asked by taking a write lease and
/// dropping it at once (SIGIO, which a lease break would send meanwhile, is made harmless first). None when it
/// cannot be asked: a file system without leases, or a file that is neither ours nor leasable by us.
pub fn others_have_it_open(file: &File) -> Option<bool> {
    // SAFETY: setting a signal's disposition to SIG_IGN has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    // SAFETY: F_SETLEASE takes a plain integer on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } == 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        return Some(false);
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Some(true),
        _ => None,
    }
}

/// How many PID namespaces deep this process runs (1: the machine's own). Processes outside its namespace are
/// not in its /proc.
pub fn pid_namespace_depth() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map(|ids| ids.split_whitespace().count())
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    /// The flags of the mapping that holds `address` (the `VmFlags` line of its entry in /proc/self/smaps).
    fn mapping_flags(address: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((start, end)) = range.split_once('-')
                && let (Ok(start), Ok(end)) =
                    (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
            {
                inside = (start..end).contains(&address);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().map(str::to_owned).collect();
            }
        }
        panic!("no mapping in /proc/self/smaps holds {address:#x}");
    }

    #[test]
    fn huge_page_bytes_are_zeroed_and_advised_for_huge_pages() {
        let bytes = huge_page_bytes(4 << 20);
        assert_eq!(bytes.len(), 4 << 20);
        assert!(bytes.iter().all(|&b| b == 0));
        if !Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        // The advice is the mapping's flag ("hg"), whether or not the kernel had huge pages free when the
        // zeroing faulted them in (what they save is measured by scripts/bench-refresh.sh, not here).
        let first_whole_page = (bytes.as_ptr() as usize).next_multiple_of(HUGE_PAGE_BYTES);
        let flags = mapping_flags(first_whole_page);
        assert!(flags.iter().any(|f| f == "hg"), "VmFlags {flags:?}");
        let plain = vec![0u8; 4 << 20];
        let flags = mapping_flags((plain.as_ptr() as usize).next_multiple_of(HUGE_PAGE_BYTES));
        assert!(
            !flags.iter().any(|f| f == "hg"),
            "an ordinary vector is advised too: {flags:?}"
        );
    }

    #[test]
    fn the_page_cache_holds_a_range_read_in_and_not_once_it_is_dropped() {
        // On /var/tmp, a disk: tmpfs would hold every page whatever is dropped, and an overlay's cachestat may
        // see another inode's pages. Elsewhere the test says so and checks nothing.
        let mut file = tempfile::tempfile_in("/var/tmp").unwrap();
        let kind = rustix::fs::fstatfs(&file).unwrap().f_type as i64;
        if ![0xEF53_i64, 0x5846_5342, 0x9123_683E].contains(&kind) {
            eprintln!(
                "/var/tmp is not ext4, XFS or btrfs (magic {kind:#x}): page-cache residency not checked"
            );
            return;
        }
        // 8 MiB: more than the read ahead of a 256 KiB read brings in.
        file.write_all(&vec![7u8; 8 << 20]).unwrap();
        file.sync_all().unwrap();
        drop_cache(&file, 0, 0).unwrap();
        assert!(
            !page_cache_holds(file.as_fd(), 0, 8 << 20),
            "the range was dropped"
        );
        let mut back = vec![0u8; 256 << 10];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, 4096).unwrap();
        assert!(
            page_cache_holds(file.as_fd(), 4096, 256 << 10),
            "the range was just read"
        );
        assert!(
            page_cache_holds(file.as_fd(), 4096 + 100, 1000),
            "inside the range, unaligned"
        );
        assert!(
            !page_cache_holds(file.as_fd(), 0, 8 << 20),
            "most of the file is still out"
        );
    }
}
