//! ssdlab-io: everything that touches Linux devices and files.
//!
//! This crate owns the real [`ssdlab_core::Device`] backends (io_uring, pread/pwrite, null), opening targets
//! (`/dev/NAME`, `file:PATH[:SIZE]`, `null[:SIZE]`), sysfs queue limits, BLKGETSIZE64/BLKDISCARD, the
//! destructive-operation guards (mounts, swap, holders, signatures) and small OS helpers (CPU times, host
//! facts). It is the only crate allowed `unsafe`; every unsafe block says why it is sound, and every unsafe fn
//! has a `# Safety` section. It never prints: diagnostics go back to the caller as values.

// The workspace denies unsafe code; this crate alone is where memory meets the kernel.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) mod buffers;
pub mod claim;
pub(crate) mod common;
pub mod dm;
mod file_target;
pub mod files;
pub mod guard;
pub mod inventory;
pub mod laid_out;
pub mod layout;
pub mod many;
pub mod null;
pub mod open;
pub mod pinned;
pub mod psync;
pub mod sys;
pub mod uring;
pub mod walk;
pub mod watch;

pub use common::Sibling;
pub use open::{Engine, OpenError, OpenRequest, RealDevice, open_target};
