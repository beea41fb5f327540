//! Which files a refresh rewrites: the walked files, once each, minus the young ones by the one `data_age` that
//! scan uses too; or the files a scan found slow (`--from`).

use std::collections::HashSet;
use std::path::PathBuf;

use ssdlab_core::schema::ScanAnalysis;

use super::file::{FileId, Time, path_from_hex};
use super::state::RefreshLog;

/// A regular file found under a path the user gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The path the user gave (files are opened beneath it).
    pub root: PathBuf,
    pub path: PathBuf,
    pub id: FileId,
    pub size_bytes: u64,
    pub mtime: Time,
}

/// The files to refresh, and how many were passed over as younger than `--older-than`.
#[derive(Debug, Default)]
pub struct Selection {
    pub files: Vec<Found>,
    pub younger: usize,
}

/// Keeps files with data, once each (hard links and repeated paths), whose data age is at least
/// `older_than_s`.
pub fn select(found: Vec<Found>, older_than_s: Option<f64>, log: &RefreshLog, now_unix_s: f64) -> Selection {
    let mut seen = HashSet::new();
    let mut selection = Selection::default();
    for file in found {
        if file.size_bytes == 0 || !seen.insert(file.id) {
            continue;
        }
        let age_s = log.data_age_s(&file.id, file.mtime, file.id.birth, now_unix_s);
        if older_than_s.is_some_and(|limit| age_s < limit) {
            selection.younger += 1;
            continue;
        }
        selection.files.push(file);
    }
    selection
}

/// The files of a scan to rewrite, with their speed in MB/s: those it flagged (slower than its threshold, and slow
/// again when re-read), or, when asked with a `fraction`, every file that read slower than that share of its
/// baseline. A file the scan cleared is not rewritten unasked: a rewrite spends the drive's endurance. A name that
/// is not UTF-8 comes back from its raw bytes; one whose bytes cannot be decoded is left out.
pub fn slow_in_scan(scan: &ScanAnalysis, fraction: Option<f64>) -> Vec<(PathBuf, f64)> {
    scan.files
        .iter()
        .filter(|f| match fraction {
            Some(fraction) => f.bytes_per_s < fraction * scan.baseline_bytes_per_s,
            None => f.flagged,
        })
        .filter_map(|f| {
            let path = match &f.name_bytes_hex {
                Some(hex) => path_from_hex(hex)?,
                None => PathBuf::from(&f.name),
            };
            Some((path, f.bytes_per_s / 1e6))
        })
        .collect()
}
