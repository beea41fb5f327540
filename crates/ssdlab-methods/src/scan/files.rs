//! Scanning real files: one worker per underlying device (devices in parallel, the files on one device in
//! turn, so they do not compete for it), and a file that cannot be read is reported and passed over, never
//! allowed to stop the scan.
//!
//! Opening is the caller's: a [`ScanOpener`] turns a path into a read-only device and its data ranges (with
//! O_NOATIME, refusing what it cannot read without side effects). This module never touches a path itself.

use std::path::PathBuf;

use ssdlab_core::device::{Device, DeviceError};
use ssdlab_core::schema::{FileScan, SkippedFile};

use super::read::{ScanItem, ScanReads, scan_item};

/// A file found by the walk, with what the scan needs to know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanCandidate {
    pub path: PathBuf,
    /// The path, readable, and its raw bytes in hexadecimal when it is not UTF-8.
    pub name: String,
    pub name_bytes_hex: Option<String>,
    /// The underlying device's number (files are grouped by it) and its name for the report.
    pub device_id: u64,
    pub device_name: String,
    /// Data age: since the last write, or since ssdlab refreshed it.
    pub age_s: f64,
}

/// Why a file could not be scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanRefusal {
    /// Reading it would move its access time (O_NOATIME is refused on files of other users).
    NotOurs,
    /// It vanished or shrank (another program's doing, not the drive's).
    Failed(String),
    /// The drive failed to read it: an I/O error, a refused read, or a read cut short of a file that did not
    /// shrink.
    Unreadable(String),
}

impl ScanRefusal {
    fn reason(&self) -> String {
        match self {
            ScanRefusal::NotOurs => {
                "not ours: reading it would move its access time (--allow-atime permits that)".into()
            }
            ScanRefusal::Failed(why) => format!("vanished or shrank mid-scan: {why}"),
            ScanRefusal::Unreadable(why) => format!("could not be read: {why}"),
        }
    }
}

/// A file opened for scanning: a read-only device over it and the (offset, length) ranges that hold data.
pub struct OpenedFile {
    pub device: Box<dyn Device>,
    pub data_ranges: Vec<(u64, u64)>,
}

/// Opens files for scanning, without side effects (O_NOATIME unless the user allowed otherwise).
pub trait ScanOpener: Sync {
    fn open(&self, path: &std::path::Path) -> Result<OpenedFile, ScanRefusal>;
}

/// Scans every candidate; returns the files that read (empty ones left out) and those passed over, with why.
pub fn scan_files(
    candidates: Vec<ScanCandidate>,
    opener: &dyn ScanOpener,
    reads: ScanReads,
) -> (Vec<FileScan>, Vec<SkippedFile>) {
    let mut by_device: std::collections::BTreeMap<u64, Vec<ScanCandidate>> = Default::default();
    for c in candidates {
        by_device.entry(c.device_id).or_default().push(c);
    }
    let results: Vec<(Vec<FileScan>, Vec<SkippedFile>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = by_device
            .into_values()
            .map(|files| scope.spawn(move || scan_one_device(files, opener, reads)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("scan worker panicked"))
            .collect()
    });
    let mut scans = Vec::new();
    let mut skipped = Vec::new();
    for (ok, failed) in results {
        scans.extend(ok.into_iter().filter(|f| f.bytes > 0));
        skipped.extend(failed);
    }
    (scans, skipped)
}

/// Whose doing a failed read of an open file was: a read cut short of a file that is now gone or shorter than
/// the data it held is another program's (it shrank or removed the file); anything else is the drive's.
fn why_unread(path: &std::path::Path, data_end: u64, e: &DeviceError) -> ScanRefusal {
    let short =
        matches!(e, DeviceError::Os { cause, .. } if cause.kind() == std::io::ErrorKind::UnexpectedEof);
    let shrank = std::fs::symlink_metadata(path).map_or(true, |m| m.len() < data_end);
    if short && shrank {
        ScanRefusal::Failed(e.to_string())
    } else {
        ScanRefusal::Unreadable(e.to_string())
    }
}

fn scan_one_device(
    files: Vec<ScanCandidate>,
    opener: &dyn ScanOpener,
    reads: ScanReads,
) -> (Vec<FileScan>, Vec<SkippedFile>) {
    let mut scans = Vec::new();
    let mut skipped = Vec::new();
    for file in files {
        let scanned = opener.open(&file.path).and_then(|mut opened| {
            let data_end = opened.data_ranges.iter().map(|(o, l)| o + l).max().unwrap_or(0);
            let item = ScanItem {
                name: file.name.clone(),
                name_bytes_hex: file.name_bytes_hex.clone(),
                device: file.device_name.clone(),
                age_s: file.age_s,
                ranges: opened.data_ranges,
            };
            scan_item(opened.device.as_mut(), &item, &reads).map_err(|e| why_unread(&file.path, data_end, &e))
        });
        match scanned {
            Ok(scan) => scans.push(scan),
            Err(refusal) => skipped.push(SkippedFile {
                name: file.name,
                name_bytes_hex: file.name_bytes_hex,
                reason: refusal.reason(),
                io_failed: matches!(refusal, ScanRefusal::Unreadable(_)),
            }),
        }
    }
    (scans, skipped)
}
