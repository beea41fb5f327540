//! The stale-data scan (seed 000): read every file in aligned chunks, time each chunk, compare each file's speed
//! with a baseline of recently written data, and tell a media slowdown (it repeats when the slow chunks are read
//! again) from contention (it does not).
//!
//! Reading goes through the [`Device`] interface: a real file is its own O_DIRECT device, and on the virtual
//! SSD a file is a range of LBAs whose data was written months ago in virtual time, so the same code scans both.

use serde::{Deserialize, Serialize};
use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_core::units::MONTH_S;

use crate::analysis::{PercentileColumns, median, percentile};

/// One file to scan: where its data is on the device, and how old it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanItem {
    /// The path, readable (bytes that are not UTF-8 as `\xNN`).
    pub name: String,
    /// The raw bytes of the path in hexadecimal, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_bytes_hex: Option<String>,
    /// Which device the file lives on (files on one device are read in turn, devices in parallel).
    pub device: String,
    pub age_s: f64,
    /// (offset, length) ranges holding data.
    pub ranges: Vec<(u64, u64)>,
}

/// How one file read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileScan {
    pub name: String,
    /// The raw bytes of the path in hexadecimal, when it is not UTF-8 (`refresh --from` reads it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_bytes_hex: Option<String>,
    pub device: String,
    pub age_s: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_s: f64,
    /// Chunk reads slower than twice the file's median chunk time: (offset, first ns, re-read ns).
    pub slow_chunks: Vec<(u64, u64, u64)>,
    /// Filled in by the analysis.
    #[serde(default)]
    pub slowdown: f64,
    #[serde(default)]
    pub flagged: bool,
    /// Whether re-reading the slow chunks was slow again (a media slowdown, not contention).
    #[serde(default)]
    pub confirmed: bool,
}

/// Reads one file's ranges in `chunk_bytes` pieces at queue depth `qd`, timing every chunk, then re-reads the
/// slowest chunks (up to 8) to see whether their slowness repeats.
pub fn scan_item(
    device: &mut dyn Device,
    item: &ScanItem,
    chunk_bytes: u64,
    qd: u32,
) -> Result<FileScan, DeviceError> {
    let align = device.info().logical_block_bytes.max(512) as u64;
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for &(start, len) in &item.ranges {
        let mut offset = start / align * align;
        let end = start + len;
        while offset < end {
            let want = chunk_bytes.min(end - offset).next_multiple_of(align);
            chunks.push((offset, want));
            offset += want;
        }
    }
    let times = read_chunks(device, &chunks, chunk_bytes, qd)?;
    let bytes: u64 = item.ranges.iter().map(|r| r.1).sum();
    let first_submit = times.iter().map(|t| t.3).min().unwrap_or(0);
    let last_complete = times.iter().map(|t| t.2).max().unwrap_or(0);
    let wall_s = (last_complete.saturating_sub(first_submit) as f64 / 1e9).max(1e-9);
    // Slow chunks: more than twice the median chunk time; re-read the worst to see if it repeats.
    let durations: Vec<f64> = times.iter().map(|t| t.1 as f64).collect();
    let typical = median(&durations);
    let mut slow: Vec<(u64, u64)> = times
        .iter()
        .filter(|t| t.1 as f64 > 2.0 * typical && typical > 0.0)
        .map(|t| (t.0, t.1))
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.1));
    slow.truncate(8);
    let mut slow_chunks = Vec::new();
    for (offset, first_ns) in slow {
        let len = chunks.iter().find(|c| c.0 == offset).map_or(chunk_bytes, |c| c.1);
        let again = read_chunks(device, &[(offset, len)], chunk_bytes, 1)?;
        slow_chunks.push((offset, first_ns, again.first().map_or(0, |t| t.1)));
    }
    Ok(FileScan {
        name: item.name.clone(),
        name_bytes_hex: item.name_bytes_hex.clone(),
        device: item.device.clone(),
        age_s: item.age_s,
        bytes,
        seconds: wall_s,
        bytes_per_s: bytes as f64 / wall_s,
        slow_chunks,
        slowdown: 0.0,
        flagged: false,
        confirmed: false,
    })
}

/// Reads chunks at a queue depth; returns (offset, latency ns, completed ns, submitted ns) per chunk.
fn read_chunks(
    device: &mut dyn Device,
    chunks: &[(u64, u64)],
    buffer_bytes: u64,
    qd: u32,
) -> Result<Vec<(u64, u64, u64, u64)>, DeviceError> {
    let qd = qd.max(1).min(chunks.len().max(1) as u32);
    let align = device.info().logical_block_bytes.max(512) as u64;
    device.prepare(qd, buffer_bytes.next_multiple_of(align) as usize)?;
    let mut free: Vec<u32> = (0..qd).rev().collect();
    let mut next = 0usize;
    let mut out = Vec::with_capacity(chunks.len());
    let mut done: Vec<Completion> = Vec::new();
    let mut offsets = vec![0u64; qd as usize];
    while out.len() < chunks.len() {
        let mut batch = Vec::new();
        while let Some(&slot) = free.last() {
            if next == chunks.len() {
                break;
            }
            free.pop();
            let (offset, len) = chunks[next];
            offsets[slot as usize] = offset;
            batch.push(Io {
                op: Op::Read,
                offset,
                len,
                slot,
                tag: next as u64,
            });
            next += 1;
        }
        if !batch.is_empty() {
            device.submit(&batch)?;
        }
        done.clear();
        device.reap(1, None, &mut done)?;
        for c in &done {
            free.push(c.slot);
            if c.result < 0 {
                return Err(DeviceError::os(
                    format!("reading {} at offset {}", c.tag, offsets[c.slot as usize]),
                    std::io::Error::from_raw_os_error((-c.result) as i32),
                ));
            }
            out.push((
                offsets[c.slot as usize],
                c.completed_ns - c.submitted_ns,
                c.completed_ns,
                c.submitted_ns,
            ));
        }
    }
    Ok(out)
}

/// One age bucket of the report: the field report's columns of read speed (MB/s), and the projected time to
/// read its data in bulk at its mean speed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgeBucket {
    /// Lower and upper age in months.
    pub months_from: f64,
    pub months_to: f64,
    pub files: u32,
    pub bytes: u64,
    /// Read speed in MB/s (10^6 bytes per second).
    pub speed_mb_s: PercentileColumns,
    /// Hours to read this bucket's bytes at its aggregate speed, and per 900 GB (the field report's unit).
    pub bulk_read_hours: f64,
    pub hours_per_900gb: f64,
}

/// The scan's conclusions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanAnalysis {
    /// The speed fresh data reads at, MB/s, and how it was found.
    pub baseline_mb_s: f64,
    pub baseline_source: String,
    /// A file is flagged when it reads this many times slower than the baseline and the slowness repeats.
    pub slowdown_threshold: f64,
    pub buckets: Vec<AgeBucket>,
    pub total_bytes: u64,
    pub total_bulk_read_hours: f64,
    pub flagged: Vec<String>,
    /// Per underlying device: files, bytes, read speed columns, flagged files (the straggler shows here).
    pub devices: Vec<DeviceSummary>,
    pub files: Vec<FileScan>,
}

/// One device's part of a scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub device: String,
    pub files: u32,
    pub bytes: u64,
    pub speed_mb_s: PercentileColumns,
    pub flagged: u32,
    pub hours_per_900gb: f64,
}

const DAY_S: f64 = 86_400.0;

/// Bucket edges in months: the field report's monthly steps, then half-years.
const EDGES: [f64; 10] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 12.0, f64::INFINITY];

/// Baseline, slowdowns, flags (with re-read confirmation) and the age buckets.
pub fn analyze(mut files: Vec<FileScan>, slowdown_threshold: f64) -> ScanAnalysis {
    let speeds = |filter: &dyn Fn(&FileScan) -> bool| -> Vec<f64> {
        files
            .iter()
            .filter(|f| filter(f))
            .map(|f| f.bytes_per_s / 1e6)
            .collect()
    };
    // Fresh data: written more than a day ago (younger data may still sit in an SLC cache) and less than a month.
    let recent = speeds(&|f| f.age_s >= DAY_S && f.age_s < 30.0 * DAY_S);
    let (baseline, source) = if !recent.is_empty() {
        (
            median(&recent),
            format!("median of {} files written 1 to 30 days ago", recent.len()),
        )
    } else {
        let all = speeds(&|_| true);
        (
            percentile(&all, 90.0),
            "no files 1 to 30 days old: the 90th percentile of all files".to_string(),
        )
    };
    for f in &mut files {
        let mb_s = f.bytes_per_s / 1e6;
        f.slowdown = if mb_s > 0.0 {
            baseline / mb_s
        } else {
            f64::INFINITY
        };
        // Slowness that repeats where it was seen is the medium; one that vanishes was contention.
        let repeats = |&(_, first, again): &(u64, u64, u64)| again as f64 >= 0.5 * first as f64;
        f.confirmed = if f.slow_chunks.is_empty() {
            f.slowdown >= slowdown_threshold
        } else {
            f.slow_chunks.iter().all(repeats)
        };
        // Data younger than a day is not stale, whatever the moment's contention: it is never flagged.
        f.flagged = f.slowdown >= slowdown_threshold && f.confirmed && f.age_s >= DAY_S;
    }
    let mut buckets = Vec::new();
    for pair in EDGES.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let members: Vec<&FileScan> = files
            .iter()
            .filter(|f| f.age_s / MONTH_S >= from && f.age_s / MONTH_S < to)
            .collect();
        if members.is_empty() {
            continue;
        }
        let bytes: u64 = members.iter().map(|f| f.bytes).sum();
        let seconds: f64 = members.iter().map(|f| f.seconds).sum();
        let mb_s: Vec<f64> = members.iter().map(|f| f.bytes_per_s / 1e6).collect();
        let aggregate = bytes as f64 / seconds.max(1e-9);
        buckets.push(AgeBucket {
            months_from: from,
            months_to: to,
            files: members.len() as u32,
            bytes,
            speed_mb_s: PercentileColumns::of(&mb_s),
            bulk_read_hours: bytes as f64 / aggregate / 3600.0,
            hours_per_900gb: 900e9 / aggregate / 3600.0,
        });
    }
    let total_bytes = files.iter().map(|f| f.bytes).sum();
    let total_seconds: f64 = files.iter().map(|f| f.seconds).sum();
    let mut device_names: Vec<&str> = files.iter().map(|f| f.device.as_str()).collect();
    device_names.sort_unstable();
    device_names.dedup();
    let devices = device_names
        .iter()
        .map(|&device| {
            let members: Vec<&FileScan> = files.iter().filter(|f| f.device == device).collect();
            let bytes: u64 = members.iter().map(|f| f.bytes).sum();
            let seconds: f64 = members.iter().map(|f| f.seconds).sum();
            let mb_s: Vec<f64> = members.iter().map(|f| f.bytes_per_s / 1e6).collect();
            DeviceSummary {
                device: device.to_string(),
                files: members.len() as u32,
                bytes,
                speed_mb_s: PercentileColumns::of(&mb_s),
                flagged: members.iter().filter(|f| f.flagged).count() as u32,
                hours_per_900gb: 900e9 / (bytes as f64 / seconds.max(1e-9)) / 3600.0,
            }
        })
        .collect();
    ScanAnalysis {
        devices,
        baseline_mb_s: baseline,
        baseline_source: source,
        slowdown_threshold,
        buckets,
        total_bytes,
        total_bulk_read_hours: total_seconds / 3600.0,
        flagged: files
            .iter()
            .filter(|f| f.flagged)
            .map(|f| f.name.clone())
            .collect(),
        files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, age_days: f64, mb_s: f64, slow_repeats: bool) -> FileScan {
        FileScan {
            name: name.into(),
            name_bytes_hex: None,
            device: "d".into(),
            age_s: age_days * DAY_S,
            bytes: 100_000_000,
            seconds: 100.0 / mb_s,
            bytes_per_s: mb_s * 1e6,
            slow_chunks: if mb_s < 100.0 {
                vec![(0, 1_000_000, if slow_repeats { 900_000 } else { 10_000 })]
            } else {
                vec![]
            },
            slowdown: 0.0,
            flagged: false,
            confirmed: false,
        }
    }

    #[test]
    fn slow_old_files_are_flagged_only_when_the_slowness_repeats() {
        let files = vec![
            file("fresh-1", 5.0, 500.0, true),
            file("fresh-2", 10.0, 480.0, true),
            file("old-slow", 210.0, 50.0, true),
            file("old-contended", 200.0, 50.0, false),
            file("old-fine", 205.0, 470.0, true),
        ];
        let a = analyze(files, 2.0);
        assert_eq!(
            a.baseline_mb_s, 480.0,
            "median (nearest rank) of the files 1 to 30 days old"
        );
        assert_eq!(a.flagged, vec!["old-slow".to_string()]);
        let old = a
            .buckets
            .iter()
            .find(|b| b.months_from == 6.0)
            .expect("a 6-7 month bucket");
        assert_eq!(old.files, 3);
        assert!(a.buckets.iter().any(|b| b.months_from == 0.0 && b.files == 2));
        let fresh = &a.buckets[0];
        assert!(
            (fresh.hours_per_900gb - 900e9 / (200e6 / (100.0 / 500.0 + 100.0 / 480.0)) / 3600.0).abs() < 1e-9
        );
    }
}
