//! The virtual data set: files of given sizes and ages laid out on a virtual drive, so the scan can show what
//! the field report measured without waiting months. `field-report` is seed 000's drive: six 64 MiB files at
//! each of its eight ages.
//!
//! This module parses the `--dataset` description and scans the laid-out files; laying them out is the virtual
//! drive's job (its caller passes the ranges), so nothing here depends on the simulator. The one write it makes
//! is `--refresh-flagged`'s rewrite, and only on the virtual drive it was given. A file that fails to read, or
//! whose rewrite fails, is reported in `skipped` and the scan goes on.

use ssdlab_core::device::Device;
use ssdlab_core::schema::{
    AfterRefresh, FieldReportComparison, FieldReportRow, FileScan, RandomReadLatency, ScanAnalysis,
    SkippedFile,
};
use ssdlab_core::units::{MONTH_S, parse_duration_ns, parse_size};
use ssdlab_engine::runner::Quiet;
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use super::age::{analyze, hours_per_900gb};
use super::read::{Reader, ScanItem, ScanReads, scan_item};
use crate::session::MethodError;

/// Seed 000's drive ages in months (the 0.5-month files give the fresh baseline).
pub const FIELD_REPORT_MONTHS: [f64; 8] = [0.5, 0.9, 2.0, 3.0, 4.0, 5.1, 6.0, 7.0];

/// Seed 000's bulk-read hours per 900 GB by data age in months, measured with `cat index/* > /dev/null`. The
/// 5.1- and 6.0-month drives read faster than the trend (the drives differ; the virtual drive follows the trend).
pub const FIELD_REPORT_BULK_READ_HOURS: [(f64, f64); 7] = [
    (0.9, 1.11),
    (2.0, 3.51),
    (3.0, 6.06),
    (4.0, 8.70),
    (5.1, 5.85),
    (6.0, 5.23),
    (7.0, 10.49),
];

/// Seed 000's bulk-read hours per 900 GB after rewriting the data in place.
pub const FIELD_REPORT_REFRESHED_HOURS: f64 = 1.0;

/// The smallest file a data set may hold: one 4 KiB block (a smaller one measures only request overhead).
pub const MIN_FILE_BYTES: u64 = 4096;

/// One virtual file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetFile {
    pub size_bytes: u64,
    /// How long ago it was written.
    pub age_ns: u64,
}

/// The most files a virtual data set may have (each is scanned and reported one by one).
pub const MAX_DATASET_FILES: u64 = 1_000_000;

/// Parses `--dataset`: `field-report`, or `AGE:COUNTxSIZE,...` with units on both (`7mo:8x64m`), for a drive of
/// `capacity_bytes`. The counts and sizes are checked against the drive (and [`MAX_DATASET_FILES`]) before a single
/// file is built, so a few bytes of flag can never cost more memory than the data set's list.
pub fn parse_dataset(spec: &str, capacity_bytes: u64) -> Result<Vec<DatasetFile>, String> {
    let month_ns = MONTH_S * 1e9;
    if spec == "field-report" {
        return Ok(FIELD_REPORT_MONTHS
            .iter()
            .flat_map(|&m| {
                std::iter::repeat_n(
                    DatasetFile {
                        size_bytes: 64 << 20,
                        age_ns: (m * month_ns) as u64,
                    },
                    6,
                )
            })
            .collect());
    }
    let mut groups = Vec::new();
    let (mut total_files, mut total_bytes) = (0u64, 0u64);
    for part in spec.split(',') {
        let bad = || format!("--dataset {part}: write AGE:COUNTxSIZE, e.g. 7mo:8x64m, or field-report");
        let (age, rest) = part.split_once(':').ok_or_else(bad)?;
        let (count, size) = rest.split_once('x').ok_or_else(bad)?;
        let age_ns = parse_duration_ns(age).map_err(|e| format!("--dataset {part}: the age {e}"))?;
        let count: u64 = count.parse().map_err(|_| bad())?;
        if size.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "--dataset {part}: the size {size} has no unit; write {size}m for MiB or {size}k for KiB"
            ));
        }
        let size_bytes = parse_size(size).map_err(|e| format!("--dataset {part}: the size {e}"))?;
        if size_bytes < MIN_FILE_BYTES {
            return Err(format!(
                "--dataset {part}: files must hold at least 4k (a smaller file measures request overhead, not the medium)"
            ));
        }
        total_files = total_files.saturating_add(count);
        // Each file takes whole 4 KiB units on the drive.
        total_bytes = total_bytes.saturating_add(count.saturating_mul(size_bytes.next_multiple_of(4096)));
        if total_files > MAX_DATASET_FILES {
            return Err(format!(
                "--dataset {spec}: more than {MAX_DATASET_FILES} files; use fewer, larger files (the field report \
                 had 36 of 64 MiB)"
            ));
        }
        if total_bytes > capacity_bytes {
            return Err(format!(
                "--dataset {spec}: the files need more than the drive's {capacity_bytes} bytes; use fewer or \
                 smaller files, or a larger drive (a larger scale=)"
            ));
        }
        groups.push((count, DatasetFile { size_bytes, age_ns }));
    }
    if total_files == 0 {
        return Err(format!("--dataset {spec}: no files"));
    }
    Ok(groups
        .into_iter()
        .flat_map(|(count, file)| std::iter::repeat_n(file, count as usize))
        .collect())
}

/// How to scan the data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DatasetScanOptions {
    pub reads: ScanReads,
    /// The flag threshold as a fraction of fresh speed.
    pub slower_than: f64,
    /// Rewrite the flagged files in place, let them settle two days, and scan them again.
    pub refresh_flagged: bool,
}

/// Scans the laid-out files (`ranges[i]` holds `files[i]`) on `device`, named `device_name` in the results.
pub fn scan_dataset(
    device: &mut dyn Device,
    device_name: &str,
    files: &[DatasetFile],
    ranges: &[(u64, u64)],
    options: &DatasetScanOptions,
) -> Result<ScanAnalysis, MethodError> {
    assert_eq!(files.len(), ranges.len(), "every virtual file has one range");
    let items: Vec<ScanItem> = files
        .iter()
        .zip(ranges)
        .enumerate()
        .map(|(i, (file, &range))| ScanItem {
            name: format!("virtual/{:.1}mo/file-{i}", file.age_ns as f64 / 1e9 / MONTH_S),
            name_bytes_hex: None,
            device: device_name.to_string(),
            age_s: file.age_ns as f64 / 1e9,
            ranges: vec![range],
        })
        .collect();
    // A file that fails to read is reported and passed over, as a real file is: the scan goes on.
    let scan_all = |device: &mut dyn Device, items: &[ScanItem], skipped: &mut Vec<SkippedFile>| {
        let mut scans = Vec::with_capacity(items.len());
        for item in items {
            match scan_item(device, item, &options.reads) {
                Ok(scan) => scans.push(scan),
                // A virtual file cannot vanish: a read that failed is the drive's failure.
                Err(e) => skipped.push(skip(item, format!("could not be read: {e}"), true)),
            }
        }
        scans
    };
    let reader = options.reads.reader.describe();
    let mut skipped = Vec::new();
    let mut analysis = analyze(
        scan_all(device, &items, &mut skipped),
        options.slower_than,
        &reader,
    );
    analysis.field_report = compare_with_field_report(&analysis.files, options.reads.reader);
    if !options.refresh_flagged {
        analysis.skipped = skipped;
        return Ok(analysis);
    }
    let mut refreshed = Vec::new();
    for item in items.iter().filter(|i| analysis.flagged.contains(&i.name)) {
        // A rewrite that failed refreshed nothing: it is said, and the file is not measured as refreshed.
        if let Some(failure) = rewrite_in_place(device, item.ranges[0])? {
            skipped.push(skip(
                item,
                format!("not refreshed: its rewrite failed: {failure}"),
                true,
            ));
            continue;
        }
        refreshed.push(ScanItem {
            age_s: 2.0 * 86_400.0,
            ..item.clone()
        });
    }
    // Let the rewritten data settle (out of the SLC cache) for two days, then measure again.
    let until = device.now_ns() + 2 * 86_400 * 1_000_000_000;
    device.wait_until(until);
    let after = analyze(
        scan_all(device, &refreshed, &mut skipped),
        options.slower_than,
        &reader,
    );
    analysis.skipped = skipped;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let before_speeds: Vec<f64> = analysis
        .files
        .iter()
        .filter(|f| f.flagged)
        .map(|f| f.bytes_per_s)
        .collect();
    let after_speeds: Vec<f64> = after.files.iter().map(|f| f.bytes_per_s).collect();
    let flagged_files: Vec<&FileScan> = analysis.files.iter().filter(|f| f.flagged).collect();
    analysis.after_refresh = Some(AfterRefresh {
        mean_bytes_per_s_before: mean(&before_speeds),
        mean_bytes_per_s_after: mean(&after_speeds),
        hours_per_900gb_before: (!flagged_files.is_empty()).then(|| files_hours_per_900gb(&flagged_files)),
        hours_per_900gb_after: (!after.files.is_empty())
            .then(|| files_hours_per_900gb(&after.files.iter().collect::<Vec<_>>())),
        files: after.files,
    });
    Ok(analysis)
}

/// Hours to read 900 GB at the files' aggregate speed (their bytes over their reading time); give it files.
fn files_hours_per_900gb(files: &[&FileScan]) -> f64 {
    hours_per_900gb(
        files.iter().map(|f| f.bytes).sum(),
        files.iter().map(|f| f.seconds).sum(),
    )
}

/// Each age of the data set beside the field report's figure for it; None when no age is one of the report's.
fn compare_with_field_report(files: &[FileScan], reader: Reader) -> Option<FieldReportComparison> {
    let mut ages: Vec<f64> = files.iter().map(|f| f.age_s).collect();
    ages.sort_by(f64::total_cmp);
    ages.dedup();
    let rows: Vec<FieldReportRow> = ages
        .iter()
        .map(|&age_s| {
            let members: Vec<&FileScan> = files.iter().filter(|f| f.age_s == age_s).collect();
            let months = age_s / MONTH_S;
            let latencies: Vec<u64> = members
                .iter()
                .flat_map(|f| f.random_read_ns.iter().copied())
                .collect();
            FieldReportRow {
                months,
                files: members.len() as u32,
                hours_per_900gb: files_hours_per_900gb(&members),
                field_report_hours_per_900gb: FIELD_REPORT_BULK_READ_HOURS
                    .iter()
                    .find(|(m, _)| (m - months).abs() < 0.01)
                    .map(|&(_, hours)| hours),
                random_reads: RandomReadLatency::of_ns(&latencies),
            }
        })
        .collect();
    rows.iter()
        .any(|r| r.field_report_hours_per_900gb.is_some())
        .then_some(FieldReportComparison {
            same_reader: reader == Reader::Cat,
            rows,
        })
}

/// A virtual file passed over, with why, and whether the drive failed an I/O of it.
fn skip(item: &ScanItem, reason: String, io_failed: bool) -> SkippedFile {
    SkippedFile {
        name: item.name.clone(),
        name_bytes_hex: item.name_bytes_hex.clone(),
        reason,
        io_failed,
    }
}

/// Rewrites one range sequentially in 1 MiB writes: on the virtual drive the data is new from now on. Returns
/// the write that failed, if one did (the rewrite stops there).
fn rewrite_in_place(
    device: &mut dyn Device,
    (offset, len): (u64, u64),
) -> Result<Option<ssdlab_engine::runner::IoFailure>, MethodError> {
    let capacity = device.info().capacity_bytes;
    let workload = Workload {
        rw: RwMode::Write,
        mix_read_percent: 0,
        pattern: Pattern::Sequential,
        block_bytes: 1 << 20,
        queue_depth: 8,
        span: Span {
            offset_bytes: offset,
            len_bytes: len.next_multiple_of(1 << 20).min(capacity - offset),
        },
        stop: StopAt {
            passes: Some(1),
            ..Default::default()
        },
        rate: None,
        seed: 1,
        verify: false,
    };
    Ok(ssdlab_engine::run_phase(device, &workload, &mut Quiet)?.io_failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_sizes_need_units_and_a_block() {
        assert_eq!(parse_dataset("field-report", 1 << 40).unwrap().len(), 48);
        let files = parse_dataset("7mo:8x64m,1d:2x4k", 1 << 40).unwrap();
        assert_eq!(files.len(), 10);
        assert_eq!(files[0].size_bytes, 64 << 20);
        assert_eq!(files[9].size_bytes, 4096);
        let err = parse_dataset("7mo:8x64", 1 << 40).unwrap_err();
        assert!(err.contains("no unit") && err.contains("64m"), "{err}");
        assert!(
            parse_dataset("7mo:8x512b", 1 << 40)
                .unwrap_err()
                .contains("at least 4k")
        );
        assert!(parse_dataset("7:8x64m", 1 << 40).unwrap_err().contains("the age"));
        assert!(
            parse_dataset("7mo:0x64m", 1 << 40)
                .unwrap_err()
                .contains("no files")
        );
        // A few bytes of flag never build more than the drive holds, nor a list of more than a million files.
        let huge = parse_dataset("1d:18446744073709551615x4k", 1 << 40).unwrap_err();
        assert!(huge.contains("more than 1000000 files"), "{huge}");
        let big = parse_dataset("1d:200000x4k", 64 << 20).unwrap_err();
        assert!(big.contains("need more than the drive's 67108864 bytes"), "{big}");
        assert_eq!(parse_dataset("1d:16384x4k", 64 << 20).unwrap().len(), 16384);
    }
}
