//! What opening a `file:` target did to the file system (created the file, or extended it), and taking exactly
//! that back when the command then refuses to run.
//!
//! The rule this module keeps: ssdlab removes only a file it created in this run, proven by the inode it
//! created (O_CREAT|O_EXCL, then the identity checked again before the name goes), and truncates only the file
//! it extended, back to the length it had. Whatever else is at the path by then (another file, a symlink, a
//! device node) is left alone. It never follows a symlink.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

/// A change opening a `file:` target made.
#[derive(Debug)]
pub struct LaidOut {
    pub path: PathBuf,
    /// The identity of the file ssdlab created or extended.
    pub st_dev: u64,
    pub st_ino: u64,
    pub change: Change,
    /// The file itself, held open so its inode cannot be freed and its number reused by someone else's file
    /// before the undo checks it.
    pub pin: std::fs::File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The file did not exist; ssdlab created it.
    Created,
    /// The file held `from_bytes`; ssdlab extended it.
    Extended { from_bytes: u64 },
}

/// What [`LaidOut::undo`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undone {
    Removed,
    Truncated,
    /// The path no longer names the file ssdlab created or extended: nothing was touched.
    LeftAlone(String),
}

impl LaidOut {
    /// Takes the change back: removes the file ssdlab created, or truncates the one it extended to its old
    /// length, in both cases only if the path still names that very file.
    pub fn undo(&self) -> io::Result<Undone> {
        match self.change {
            Change::Created => crate::files::remove_if_same(&self.path, self.st_dev, self.st_ino),
            Change::Extended { from_bytes } => {
                let file = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                    .open(&self.path)?;
                let meta = file.metadata()?;
                if !meta.is_file() || (meta.dev(), meta.ino()) != (self.st_dev, self.st_ino) {
                    return Ok(Undone::LeftAlone(format!(
                        "{} is no longer the file ssdlab extended",
                        self.path.display()
                    )));
                }
                if meta.len() > from_bytes {
                    file.set_len(from_bytes)?;
                }
                Ok(Undone::Truncated)
            }
        }
    }
}
