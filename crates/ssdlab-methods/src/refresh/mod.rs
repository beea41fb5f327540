//! Refreshing files in place without risking a byte, and the state that makes it safe to interrupt.
//!
//! This module owns the refresh protocol and everything it keeps between runs:
//! - [`file`]: what a file is to the protocol (its reboot-proof identity, the facts compared around every write)
//!   and the [`RefreshTarget`] trait the system layer implements;
//! - [`journal`]: the durable journal (one fsynced JSON line per step, every chunk's checksum in it);
//! - [`state`]: the state directory: one exclusive lock, the journal, the refresh log and the one `data_age`
//!   that scan and refresh both use;
//! - [`protocol`]: refreshing one file in short lease windows, and settling an interrupted run's entries;
//! - [`select`] and [`pace`]: which files, and how fast;
//! - [`session`]: one whole run over ports (settle, walk, select, refresh each, record), so the crash tests
//!   cover the run's ordering, not only one file's.
//!
//! It never opens a file itself: files come through [`RefreshTarget`] and [`Opener`], journal bytes through
//! [`JournalStore`], so the crash tests below run the real protocol against in-memory files that crash at every
//! durable step.

pub mod file;
pub mod journal;
pub mod pace;
pub mod protocol;
pub mod select;
pub mod session;
pub mod state;

#[cfg(test)]
mod crash_tests;

pub use file::{Facts, FileId, Opener, PathBytes, RefreshTarget, Stamp, Time, Window};
pub use journal::{Journal, JournalError, JournalStore};
pub use protocol::{
    FileOutcome, RefreshEnv, RefreshError, SettleOutcome, checksum, refresh_file, settle_all, settle_entry,
};
pub use state::{RefreshLog, StateDir, StateError};
