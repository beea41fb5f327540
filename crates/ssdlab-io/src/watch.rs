//! An inotify watch on one inode for attribute changes: what another process can do to a file by path without
//! opening it (utimensat of both times, chmod, chown, link, unlink, setxattr), which therefore breaks no lease.
//! The refresh window uses it to see such a change between its last check and its time restore. The kernel
//! reports a change of the modification time alone as IN_MODIFY, the event a write makes (and merges identical
//! queued events), so IN_MODIFY is watched too: before our write any modification is someone else's; after it,
//! the caller judges from the time itself.
//!
//! The watch only reports; it never decides anything, and reading it consumes the events it reports.

use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;

/// What the watch saw since it was last read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Attributes changed (both times, mode, owner, links, extended attributes), or the watch can no longer
    /// vouch (queue overflow, watch removed).
    pub attributes: bool,
    /// The data or the modification time alone changed (a write, or utimensat of the modification time only).
    pub modified: bool,
}

/// An inotify instance watching one inode for `IN_ATTRIB` and `IN_MODIFY`.
pub struct AttribWatch {
    fd: OwnedFd,
}

impl AttribWatch {
    /// Watches the inode `path` leads to (a `/proc/self/fd/N` path reaches the pinned inode whatever its name).
    pub fn new(path: &CStr) -> io::Result<Self> {
        use rustix::fs::inotify;
        let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)?;
        inotify::add_watch(
            &fd,
            path,
            inotify::WatchFlags::ATTRIB | inotify::WatchFlags::MODIFY,
        )?;
        Ok(AttribWatch { fd })
    }

    /// What changed since the last call (or since the watch began), consuming the events. A queue overflow or
    /// the watch's removal counts as an attribute change: the watch can no longer vouch.
    pub fn changed(&self) -> io::Result<Changes> {
        let mut changed = Changes::default();
        let mut buf = [0u8; 4096];
        loop {
            let n = match rustix::io::read(&self.fd, &mut buf) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => return Ok(changed),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n {
                // The kernel writes whole events, each a header and `len` bytes of name.
                let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().expect("4 bytes"));
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes"));
                if mask & (libc::IN_ATTRIB | libc::IN_Q_OVERFLOW | libc::IN_IGNORED) != 0 {
                    changed.attributes = true;
                }
                if mask & libc::IN_MODIFY != 0 {
                    changed.modified = true;
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
        assert_eq!(watch.changed().unwrap(), Changes::default());
        std::os::unix::fs::FileExt::write_all_at(
            &std::fs::OpenOptions::new().write(true).open(&path).unwrap(),
            b"y",
            0,
        )
        .unwrap();
        let write = watch.changed().unwrap();
        assert!(
            write.modified && !write.attributes,
            "a plain write is no attribute change: {write:?}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(watch.changed().unwrap().attributes);
        assert_eq!(
            watch.changed().unwrap(),
            Changes::default(),
            "reading consumes the events"
        );
        // Setting both times (touch, os.utime) is an attribute change; the modification time alone is reported
        // as a modification, like a write.
        let times = std::fs::FileTimes::new()
            .set_accessed(std::time::SystemTime::UNIX_EPOCH)
            .set_modified(std::time::SystemTime::UNIX_EPOCH);
        std::fs::File::open(&path).unwrap().set_times(times).unwrap();
        assert!(watch.changed().unwrap().attributes);
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(std::time::SystemTime::UNIX_EPOCH)
            .unwrap();
        let mtime_only = watch.changed().unwrap();
        assert!(mtime_only.modified && !mtime_only.attributes, "{mtime_only:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
