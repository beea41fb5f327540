//! Claiming a block device for writing: the one open of a device ssdlab will write, made before anything is
//! judged, so the device the safety gate checks is the descriptor that is written.
//!
//! The open has no symbolic link anywhere in its path (openat2 RESOLVE_NO_SYMLINKS: not `/dev/disk/by-id/...`,
//! not a symlinked directory on the way) and holds the kernel's exclusive claim (O_EXCL) from that moment until
//! the descriptor closes, `--force` or not: nothing can mount the device, assemble an array on it or claim it
//! while ssdlab judges and writes it. It is opened without O_DIRECT so libblkid can probe it through the page
//! cache; [`crate::open::open_claimed_block`] turns O_DIRECT on once the gate has passed it.
//!
//! It never decides whether a write is allowed (that is `ssdlab_targets`' gate, with [`crate::guard`]'s
//! findings) and never writes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::guard::{self, Finding, OwnClaim};
use crate::sys;

/// A block device open for reading and writing, claimed exclusively, not yet judged.
pub struct ClaimedBlock {
    file: File,
    rdev: u64,
}

impl ClaimedBlock {
    /// The open device, for the guard's questions (signatures are read through it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The device's number, as the descriptor (not the path) says.
    pub fn rdev(&self) -> u64 {
        self.rdev
    }

    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

/// Why a block device could not be claimed. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// A component of the path is a symbolic link; `resolved` is where it leads.
    #[error("a component of the path is a symbolic link (it leads to {resolved})")]
    Symlink { resolved: String },
    /// The kernel refused the exclusive claim: something holds the device. `findings` names what the guard can
    /// see of it (empty when the holder leaves no other trace).
    #[error("the kernel refused exclusive access")]
    Busy { findings: Vec<Finding> },
    #[error("it is not a block device")]
    NotBlockDevice,
    #[error("{0}")]
    Os(#[from] io::Error),
}

/// Opens the block device at `path` for reading and writing with the exclusive claim, never through a
/// symbolic link, and checks the descriptor is a block device.
pub fn claim_block(path: &Path) -> Result<ClaimedBlock, ClaimError> {
    // First an O_PATH descriptor, which opens nothing: a character device such as a watchdog must never be
    // opened by mistake, so the file's type is checked before the device itself is opened.
    let pinned = match sys::open_no_symlinks(path, libc::O_PATH) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ClaimError::Symlink {
                resolved: path
                    .canonicalize()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| "nowhere that exists".into()),
            });
        }
        Err(e) => return Err(ClaimError::Os(e)),
    };
    let meta = pinned.metadata()?;
    if !meta.file_type().is_block_device() {
        return Err(ClaimError::NotBlockDevice);
    }
    // Reopening through the descriptor reaches the same inode, whatever the path names by now.
    let reopen = Path::new("/proc/self/fd").join(pinned.as_raw_fd().to_string());
    let claim = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
            .open(&reopen)
    };
    // A claim can outlive its holder by a few milliseconds: the kernel releases a device an io_uring ring had
    // registered when the ring is torn down, after its process has exited (seen here: 12 of 20 runs straight
    // after a writing run were refused). EBUSY is asked again for up to 300 ms before it counts.
    let mut attempt = claim();
    for _ in 0..10 {
        match &attempt {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(30));
                attempt = claim();
            }
            _ => break,
        }
    }
    let file = match attempt {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            // Name what holds it, as far as the guard can see.
            let findings = guard::uses_of_device(meta.rdev(), OwnClaim::Probe)
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f.in_use)
                .collect();
            return Err(ClaimError::Busy { findings });
        }
        Err(e) => return Err(ClaimError::Os(e)),
    };
    let opened = file.metadata()?;
    if !opened.file_type().is_block_device() || opened.rdev() != meta.rdev() {
        return Err(ClaimError::NotBlockDevice);
    }
    Ok(ClaimedBlock {
        file,
        rdev: opened.rdev(),
    })
}
