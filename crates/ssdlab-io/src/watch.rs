//! An inotify watch on one inode for attribute changes: what another process can do to a file by path without
//! opening it (utimensat of both times, chmod, chown, link, unlink, setxattr), which therefore breaks no lease.
//! The refresh window uses it to see such a change between its last check and its time restore. The kernel
//! reports a change of the modification time alone as IN_MODIFY, the event a write makes (and merges identical
//! queued events), so IN_MODIFY is watched too: before our write any modification is someone else's; after it,
//! the caller judges from the time itself.
//!
//! All watches share one inotify instance for the process, each with its own watch descriptor: closing an inotify
//! instance waits for the kernel's SRCU grace period (about 13 ms measured on the CI's VM), which a refresh of many
//! small files would pay once a file, while removing one watch from a kept instance does not wait. Events are
//! read by whichever watch asks first and kept for their own watch; an event for a watch already removed (its
//! `IN_IGNORED`) is dropped, and a queue overflow is told to every watch.
//!
//! The watch only reports; it never decides anything, and reading it consumes the events it reports.

use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What the watch saw since it was last read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Attributes changed (both times, mode, owner, links, extended attributes), or the watch can no longer
    /// vouch (queue overflow, watch removed).
    pub attributes: bool,
    /// The data or the modification time alone changed (a write, or utimensat of the modification time only).
    pub modified: bool,
}

/// The process's one inotify instance and the events read for each live watch but not yet asked for.
struct Shared {
    fd: OwnedFd,
    pending: HashMap<i32, Changes>,
}

fn shared() -> io::Result<MutexGuard<'static, Shared>> {
    static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();
    if SHARED.get().is_none() {
        use rustix::fs::inotify;
        let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)?;
        // Another thread may have made one meanwhile: then this one is closed unused.
        let _ = SHARED.set(Mutex::new(Shared {
            fd,
            pending: HashMap::new(),
        }));
    }
    let lock = SHARED.get().expect("set above").lock();
    // A panic elsewhere while holding the lock leaves only whole events in `pending`: the state stays usable.
    Ok(lock.unwrap_or_else(|poisoned| poisoned.into_inner()))
}

impl Shared {
    /// Reads every queued event into `pending`, by watch.
    fn drain(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let n = match rustix::io::read(&self.fd, &mut buf) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n {
                // The kernel writes whole events, each a header and `len` bytes of name.
                let wd = i32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
                let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().expect("4 bytes"));
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes"));
                let attributes = mask & (libc::IN_ATTRIB | libc::IN_Q_OVERFLOW | libc::IN_IGNORED) != 0;
                let modified = mask & libc::IN_MODIFY != 0;
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    // Events were lost, for any watch.
                    for changes in self.pending.values_mut() {
                        changes.attributes = true;
                    }
                } else if let Some(changes) = self.pending.get_mut(&wd) {
                    changes.attributes |= attributes;
                    changes.modified |= modified;
                }
                at += header + len as usize;
            }
        }
    }
}

/// A watch on one inode for `IN_ATTRIB` and `IN_MODIFY`: on the process's shared inotify instance, or on an
/// instance of its own when the shared one already watches the inode.
pub struct AttribWatch {
    on: On,
}

enum On {
    Shared(i32),
    /// A second live watch of one inode: the shared instance would give it the first one's descriptor.
    Own(Shared, i32),
}

const WATCHED: rustix::fs::inotify::WatchFlags =
    rustix::fs::inotify::WatchFlags::ATTRIB.union(rustix::fs::inotify::WatchFlags::MODIFY);

impl AttribWatch {
    /// Watches the inode `path` leads to (a `/proc/self/fd/N` path reaches the pinned inode whatever its name).
    pub fn new(path: &CStr) -> io::Result<Self> {
        use rustix::fs::inotify;
        let mut shared = shared()?;
        // Events still queued belong to watches that exist now; read them before a new watch can take a number
        // the kernel gave an earlier one.
        shared.drain()?;
        // MASK_CREATE: an inode already watched here is refused rather than given the same descriptor, whose
        // removal would end both watches; that watch gets an instance of its own.
        match inotify::add_watch(&shared.fd, path, WATCHED | inotify::WatchFlags::MASK_CREATE) {
            // Kernels before 4.18 ignore MASK_CREATE and hand back the live watch's descriptor: that one is left as
            // it was (the same events), and this watch gets an instance of its own.
            Ok(wd) if !shared.pending.contains_key(&wd) => {
                shared.pending.insert(wd, Changes::default());
                Ok(AttribWatch { on: On::Shared(wd) })
            }
            Ok(_) | Err(rustix::io::Errno::EXIST) => {
                drop(shared);
                let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)?;
                let wd = inotify::add_watch(&fd, path, WATCHED)?;
                Ok(AttribWatch {
                    on: On::Own(
                        Shared {
                            fd,
                            pending: HashMap::from([(wd, Changes::default())]),
                        },
                        wd,
                    ),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What changed since the last call (or since the watch began), consuming the events. A queue overflow or
    /// the watch's removal counts as an attribute change: the watch can no longer vouch.
    pub fn changed(&mut self) -> io::Result<Changes> {
        let take = |instance: &mut Shared, wd: i32| -> io::Result<Changes> {
            instance.drain()?;
            let changes = instance.pending.get_mut(&wd).expect("a live watch has its entry");
            Ok(std::mem::take(changes))
        };
        match &mut self.on {
            On::Shared(wd) => take(&mut *shared()?, *wd),
            On::Own(own, wd) => take(own, *wd),
        }
    }
}

impl Drop for AttribWatch {
    fn drop(&mut self) {
        if let On::Shared(wd) = self.on
            && let Ok(mut shared) = shared()
        {
            shared.pending.remove(&wd);
            // The watch may be gone already (its inode freed); its IN_IGNORED event is then dropped when read.
            let _ = rustix::fs::inotify::remove_watch(&shared.fd, wd);
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
        let mut watch = AttribWatch::new(&CString::new(path.to_str().unwrap()).unwrap()).unwrap();
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

    #[test]
    fn watches_sharing_the_instance_see_only_their_own_files() {
        let dir = std::env::temp_dir().join(format!("ssdlab-watch-shared-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"x").unwrap();
        let c = |p: &std::path::Path| CString::new(p.to_str().unwrap()).unwrap();
        let mut on_a = AttribWatch::new(&c(&a)).unwrap();
        let mut on_b = AttribWatch::new(&c(&b)).unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o600)).unwrap();
        // b's reading drains a's event too; it is kept for a.
        assert_eq!(on_b.changed().unwrap(), Changes::default());
        assert!(on_a.changed().unwrap().attributes);
        // A second watch of the same inode has an instance of its own: both see a change, and dropping one leaves
        // the other watching.
        let mut again_b = AttribWatch::new(&c(&b)).unwrap();
        assert!(matches!(again_b.on, On::Own(..)));
        std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(again_b.changed().unwrap().attributes);
        drop(again_b);
        assert!(on_b.changed().unwrap().attributes);
        std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            on_b.changed().unwrap().attributes,
            "the shared watch outlives the second one"
        );
        // A dropped watch's events, queued and not read, and the kernel's notice of its removal, reach no one else.
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(on_a);
        let mut on_a_again = AttribWatch::new(&c(&a)).unwrap();
        assert_eq!(on_a_again.changed().unwrap(), Changes::default());
        assert_eq!(on_b.changed().unwrap(), Changes::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
