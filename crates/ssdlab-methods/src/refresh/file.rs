//! What a file is to the refresh protocol: an identity that survives reboots and inode reuse, the facts compared
//! around every write, paths as bytes, and the [`RefreshTarget`] trait through which the protocol reads, writes
//! and leases a file.
//!
//! Nothing here touches a file system; the system layer implements [`RefreshTarget`] and [`Opener`].

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use ssdlab_core::scratch::{FilledScratch, MediaRead, Scratch};

/// A time stamp as (seconds, nanoseconds) since the Unix epoch.
pub type Time = (i64, i64);

/// Nanoseconds since the Unix epoch of a [`Time`].
pub fn time_ns(t: Time) -> i128 {
    t.0 as i128 * 1_000_000_000 + t.1 as i128
}

/// Which file, in a way that survives reboots (no device numbers) and inode reuse (birth time and generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FileId {
    /// The file system's identity: statfs `f_fsid` where it is derived from the UUID (ext4, btrfs), the UUID
    /// folded into 64 bits where `f_fsid` is the device number (XFS, f2fs), the device number only where the
    /// file system has neither.
    pub fs: u64,
    pub ino: u64,
    /// Birth time where the file system records one: a reused inode number has a new one.
    pub birth: Option<Time>,
}

/// What our own writes leave behind: anything else means someone else wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub size_bytes: u64,
    pub mtime: Time,
    pub ctime: Time,
}

/// Everything about a file the protocol compares before and after each write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub size_bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// setuid or setgid bit, or file capabilities (`security.capability`): a write would strip them.
    pub privileged: bool,
    /// Whether the path the file was chosen by still names it (a rename or unlink by someone else clears it).
    pub named: bool,
}

impl Facts {
    pub fn stamp(&self) -> Stamp {
        Stamp {
            size_bytes: self.size_bytes,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }

    /// Whether anyone else changed the file's data or metadata since `before` (our own last look). Access
    /// time is not compared: readers move it, and readers are welcome.
    pub fn same_as(&self, before: &Facts) -> bool {
        Facts {
            atime: before.atime,
            ..*self
        } == *before
    }

    /// Whether the data may have changed since `before`: size or modification time moved.
    pub fn data_changed_since(&self, before: &Facts) -> bool {
        self.size_bytes != before.size_bytes || self.mtime != before.mtime
    }
}

/// What changed by path in a window (see [`RefreshTarget::path_changes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathChanges {
    /// Both times, mode, owner, links or extended attributes (or the watch can no longer vouch).
    pub attributes: bool,
    /// The data, or the modification time alone.
    pub modified: bool,
}

/// The result of trying to open a window on a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Open for writing, with a write lease: no one else has the file open.
    Open,
    /// Someone else has the file open: come back later.
    Busy,
}

/// A file chosen for refreshing, pinned by identity (a rename does not redirect it).
///
/// Writes happen only inside a *window*: [`RefreshTarget::open_window`] opens the file for writing and takes a
/// write lease, [`RefreshTarget::close_window`] drops both. Outside windows the protocol holds nothing that
/// disturbs other programs (no writable descriptor, no lease).
pub trait RefreshTarget {
    fn id(&self) -> FileId;
    /// The inode generation (FS_IOC_GETVERSION; 0 where the file system has none).
    fn generation(&self) -> u64;
    /// The kernel's file handle (name_to_handle_at), to find the inode after a rename; `None` where there is none.
    fn handle(&self) -> Option<Vec<u8>>;
    fn facts(&mut self) -> io::Result<Facts>;
    /// Ranges that hold written data, as (offset, length): holes and unwritten (preallocated) extents are left
    /// out, so they stay as they are.
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>>;
    /// Whether any extent is shared with another file (reflink, snapshot): a write would unshare it.
    fn shares_extents(&mut self) -> io::Result<bool>;
    /// Whether the file system is copy-on-write (extents can become shared while we run: re-check them; every
    /// rewrite takes new space before the old is freed: check there is room).
    fn copy_on_write(&self) -> bool;
    /// The bytes the file system has free for this user (statvfs: available blocks times their size).
    fn free_bytes(&mut self) -> io::Result<u64>;
    fn open_window(&mut self) -> io::Result<Window>;
    fn close_window(&mut self);
    /// Inside a window: whether our lease still stands (false once anyone has asked for the file).
    fn lease_held(&mut self) -> io::Result<bool>;
    /// Which other programs use the file now (process and what it holds), for the reason a file is given up.
    fn other_users(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Inside a window: what changed by path since the window opened or since the last call (what needs no
    /// open and so breaks no lease). Our own writes and time restores show as `modified`; a setuid bit our write
    /// cleared shows as `attributes`.
    fn path_changes(&mut self) -> io::Result<PathChanges>;
    /// Inside a window: whether someone asked to open the file for writing (or the lease is gone). A reader
    /// waiting does not count.
    fn writer_waiting(&mut self) -> io::Result<bool>;
    /// Reads from the medium (not the page cache) into `buf`; returns the bytes read and their checksum
    /// ([`super::checksum`] of exactly those bytes), which a target may take piece by piece as they arrive.
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<MediaRead>;
    /// Outside a window: the next chunk read after this one's verification will be `len` bytes at `offset`; a
    /// target may start reading them into `into` now, so the read overlaps the sync and the verification, and
    /// hand the buffer back filled through [`RefreshTarget::take_read_ahead`]. What it holds then must be what
    /// the medium held after this call (a read started now qualifies: any change by anyone after it moves the
    /// modification time, which the next window sees), and its digest must be [`super::checksum`] of those
    /// bytes. A target that does not read ahead hands `into` straight back.
    fn read_ahead(&mut self, _offset: u64, _len: u64, into: Scratch) -> Result<(), Scratch> {
        Err(into)
    }
    /// The read-ahead of `len` bytes at `offset`, finished: `None` when none of that range was started (the chunk
    /// is then read in line). A read that failed is the chunk's read failing, as an in-line one would: it is not
    /// tried again in line, and the file is left for the next run to settle.
    fn take_read_ahead(&mut self, _offset: u64, _len: u64) -> Option<FilledScratch> {
        None
    }
    /// Inside a window: writes `buf` at `offset` (durable after [`RefreshTarget::sync`]).
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
    /// Sets the modification time, leaving the access time alone (the change time necessarily moves).
    fn set_mtime(&mut self, mtime: Time) -> io::Result<()>;
}

/// Finds a journalled file again, for settling an interrupted run.
pub trait Opener {
    /// The file `id` with `generation`: at `path` beneath `root`, or (renamed) through `handle`; `None` when it is
    /// gone or its inode now belongs to another file.
    fn reopen(
        &mut self,
        root: &Path,
        path: &Path,
        id: &FileId,
        generation: u64,
        handle: Option<&[u8]>,
    ) -> io::Result<Option<Box<dyn RefreshTarget>>>;
}

/// A path kept as the bytes the kernel gave, so names that are not UTF-8 survive the journal, JSON output and
/// `--from`. Serialized as a string when it is UTF-8, otherwise as `{"escaped": "...", "bytes_hex": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathBytes(pub PathBuf);

impl PathBytes {
    /// A readable form: invalid bytes as `\xNN`.
    pub fn escaped(&self) -> String {
        escape_path(&self.0)
    }
}

/// A readable form of a path: valid UTF-8 as it is, every invalid byte as `\xNN`.
pub fn escape_path(path: &Path) -> String {
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Bytes in lower-case hexadecimal.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from hexadecimal; `None` when it is not.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The raw bytes of a path in hexadecimal, when it is not UTF-8.
pub fn path_bytes_hex(path: &Path) -> Option<String> {
    let bytes = path.as_os_str().as_bytes();
    std::str::from_utf8(bytes).is_err().then(|| to_hex(bytes))
}

/// The path from its hexadecimal bytes.
pub fn path_from_hex(hex: &str) -> Option<PathBuf> {
    Some(PathBuf::from(OsStr::from_bytes(&from_hex(hex)?)))
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PathRepr {
    Text(String),
    Bytes { escaped: String, bytes_hex: String },
}

impl Serialize for PathBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.0.to_str(), path_bytes_hex(&self.0)) {
            (Some(text), _) => PathRepr::Text(text.to_string()),
            (None, Some(bytes_hex)) => PathRepr::Bytes {
                escaped: self.escaped(),
                bytes_hex,
            },
            (None, None) => unreachable!("a path is either UTF-8 or not"),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PathBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match PathRepr::deserialize(d)? {
            PathRepr::Text(text) => Ok(PathBytes(text.into())),
            PathRepr::Bytes { bytes_hex, .. } => path_from_hex(&bytes_hex)
                .map(PathBytes)
                .ok_or_else(|| serde::de::Error::custom("bytes_hex is not hexadecimal")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_are_not_utf8_round_trip_through_json() {
        let raw = PathBuf::from(OsStr::from_bytes(b"/data/caf\xe9/\xff.idx"));
        let path = PathBytes(raw.clone());
        let json = serde_json::to_string(&path).unwrap();
        assert!(json.contains("caf\\\\xe9"), "{json}");
        let back: PathBytes = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0, raw);
        let plain = PathBytes("/data/ok".into());
        assert_eq!(serde_json::to_string(&plain).unwrap(), "\"/data/ok\"");
    }

    #[test]
    fn facts_ignore_readers_but_see_everything_else() {
        let base = Facts {
            size_bytes: 10,
            mode: 0o644,
            uid: 1,
            gid: 1,
            nlink: 1,
            atime: (1, 0),
            mtime: (2, 0),
            ctime: (3, 0),
            privileged: false,
            named: true,
        };
        assert!(
            Facts {
                atime: (9, 9),
                ..base
            }
            .same_as(&base)
        );
        assert!(!Facts { mode: 0o600, ..base }.same_as(&base));
        assert!(!Facts { named: false, ..base }.same_as(&base));
        assert!(
            !Facts {
                ctime: (3, 1),
                ..base
            }
            .same_as(&base)
        );
        assert!(
            !Facts {
                ctime: (3, 1),
                ..base
            }
            .data_changed_since(&base)
        );
        assert!(
            Facts {
                mtime: (2, 1),
                ..base
            }
            .data_changed_since(&base)
        );
    }
}
