//! The stale-data scan (seed 000): read every file in aligned chunks, time each chunk, compare each file's speed
//! with a baseline of recently written data, and tell a media slowdown (it repeats when the slow chunks are read
//! again) from contention (it does not). Also the region scan (read speed across a device's LBA range) and the
//! virtual data set that lays the field report's drive out on the simulator.
//!
//! Reading goes through the [`ssdlab_core::Device`] interface: a real file is its own O_DIRECT device, and on the
//! virtual SSD a file is a range of LBAs whose data was written months ago in virtual time, so the same code
//! scans both. Scans only read: nothing here writes to a real device or opens a path itself (the caller's
//! [`files::ScanOpener`] does), and the only write is `--refresh-flagged` on a virtual drive.

pub mod age;
pub mod dataset;
pub mod files;
pub mod prom;
pub mod read;
pub mod region;

pub use age::{analyze, verdict};
pub use read::{ScanItem, scan_item};
pub use ssdlab_core::schema::{FileScan, ScanAnalysis};
