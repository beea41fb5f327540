//! An inotify watch on one inode for attribute changes: what another process can do to a file by path without
//! opening it (utimensat of both times, chmod, chown, link, unlink, setxattr), which therefore breaks no lease.
//! The refresh window uses it to see such a change between its last check and its time restore. (The kernel
//! reports a change of the modification time alone as IN_MODIFY, the event a write makes, and merges identical
//! queued events, so that case is judged from the time itself, not here.)
//!
//! The watch only reports; it never decides anything, and reading it consumes the events it reports.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// An inotify instance watching one inode for `IN_ATTRIB`.
pub struct AttribWatch {
    fd: OwnedFd,
}

impl AttribWatch {
    /// Watches the inode `path` leads to (a `/proc/self/fd/N` path reaches the pinned inode whatever its name).
    pub fn new(path: &CStr) -> io::Result<Self> {
        // SAFETY: inotify_init1 takes only flags.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `path` is NUL-terminated and outlives the call; the descriptor is open.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), libc::IN_ATTRIB) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AttribWatch { fd })
    }

    /// Whether any attribute change happened since the last call (or since the watch began), consuming the
    /// events. A queue overflow or the watch's removal counts as a change: the watch can no longer vouch.
    pub fn changed(&self) -> io::Result<bool> {
        let mut changed = false;
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: the buffer is live and writable for its whole length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(changed),
                    Some(libc::EINTR) => continue,
                    _ => Err(e),
                };
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                // The kernel writes whole events, each a header and `len` bytes of name.
                let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().expect("4 bytes"));
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes"));
                if mask & (libc::IN_ATTRIB | libc::IN_Q_OVERFLOW | libc::IN_IGNORED) != 0 {
                    changed = true;
                }
                at += header + len as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_chmod_or_touch_by_path_is_seen_once_and_a_write_is_not() {
        let dir = std::env::temp_dir().join(format!("ssdlab-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let watch = AttribWatch::new(&CString::new(path.to_str().unwrap()).unwrap()).unwrap();
        assert!(!watch.changed().unwrap());
        std::os::unix::fs::FileExt::write_all_at(
            &std::fs::OpenOptions::new().write(true).open(&path).unwrap(),
            b"y",
            0,
        )
        .unwrap();
        assert!(!watch.changed().unwrap(), "a plain write is no attribute change");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(watch.changed().unwrap());
        assert!(!watch.changed().unwrap(), "reading consumes the events");
        // Setting both times (touch, os.utime) is an attribute change. Setting the modification time alone is
        // reported by the kernel as a modification, like a write, so it is not seen here: the refresh protocol
        // sees it in the time the file shows after its write.
        let times = std::fs::FileTimes::new()
            .set_accessed(std::time::SystemTime::UNIX_EPOCH)
            .set_modified(std::time::SystemTime::UNIX_EPOCH);
        std::fs::File::open(&path).unwrap().set_times(times).unwrap();
        assert!(watch.changed().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
