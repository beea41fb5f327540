//! The field report's analysis of a scan: the baseline speed of fresh data, each file's slowdown, the flags
//! (slow, and slow again when re-read), the age buckets with their bulk-read hours, and the per-device summary.
//! Pure arithmetic over [`FileScan`]s; no I/O.

use ssdlab_core::schema::{
    AgeBucket, DeviceSummary, FileScan, PercentileColumns, RandomReadLatency, ScanAnalysis, Verdict,
};
use ssdlab_core::stats::{median, percentile};
use ssdlab_core::units::MONTH_S;

const DAY_S: f64 = 86_400.0;

/// Bucket edges in months: the field report's monthly steps, then half-years.
const EDGES: [f64; 10] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 12.0, f64::INFINITY];

/// Hours to read 900 GB (the field report's unit) at the speed of `bytes` read in `seconds`.
pub fn hours_per_900gb(bytes: u64, seconds: f64) -> f64 {
    900e9 / (bytes as f64 / seconds.max(1e-9)) / 3600.0
}

/// Baseline, slowdowns, flags (with re-read confirmation) and the age buckets. A file is slow when it reads
/// below `slower_than` (a share, `--slower-than`) of the baseline; `reader` says in words how the files were read.
pub fn analyze(mut files: Vec<FileScan>, slower_than: f64, reader: &str) -> ScanAnalysis {
    let (baseline, source) = baseline(&files);
    judge(&mut files, baseline, 1.0 / slower_than);
    let buckets = age_buckets(&files);
    let total_bytes = files.iter().map(|f| f.bytes).sum();
    let total_seconds: f64 = files.iter().map(|f| f.seconds).sum();
    let devices = device_summaries(&files);
    ScanAnalysis {
        devices,
        baseline_bytes_per_s: baseline,
        baseline_source: source,
        slower_than_ratio: slower_than,
        reader: reader.to_string(),
        buckets,
        total_bytes,
        total_bulk_read_hours: total_seconds / 3600.0,
        flagged: files
            .iter()
            .filter(|f| f.flagged)
            .map(|f| f.name.clone())
            .collect(),
        files,
        skipped: Vec::new(),
        after_refresh: None,
        field_report: None,
    }
}

/// The speed of fresh data in bytes per second, and where it comes from in words: the median of the files 1 to
/// 30 days old, else the 90th percentile of all files.
fn baseline(files: &[FileScan]) -> (f64, String) {
    let speeds = |filter: &dyn Fn(&FileScan) -> bool| -> Vec<f64> {
        files
            .iter()
            .filter(|f| filter(f))
            .map(|f| f.bytes_per_s)
            .collect()
    };
    // Fresh data: written more than a day ago (younger data may still sit in an SLC cache) and less than a month.
    let recent = speeds(&|f| f.age_s >= DAY_S && f.age_s < 30.0 * DAY_S);
    if !recent.is_empty() {
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
    }
}

/// Sets each file's slowdown against `baseline` (bytes per second), whether its slowness repeated when re-read,
/// and whether it is flagged (at least `slowdown_threshold` times slower, confirmed, and a day old).
fn judge(files: &mut [FileScan], baseline: f64, slowdown_threshold: f64) {
    for f in files {
        f.slowdown_ratio = if f.bytes_per_s > 0.0 {
            baseline / f.bytes_per_s
        } else {
            f64::INFINITY
        };
        // Slowness that repeats where it was seen is the medium; one that vanishes was contention.
        let repeats = |&(_, first, again): &(u64, u64, u64)| again as f64 >= 0.5 * first as f64;
        f.confirmed = if f.slow_chunks.is_empty() {
            f.slowdown_ratio >= slowdown_threshold
        } else {
            f.slow_chunks.iter().all(repeats)
        };
        // Data younger than a day is not stale, whatever the moment's contention: it is never flagged.
        f.flagged = f.slowdown_ratio >= slowdown_threshold && f.confirmed && f.age_s >= DAY_S;
    }
}

/// The files grouped by data age between the [`EDGES`] (empty buckets left out): speeds, bulk-read hours and
/// random-read latencies of each.
fn age_buckets(files: &[FileScan]) -> Vec<AgeBucket> {
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
        let speeds: Vec<f64> = members.iter().map(|f| f.bytes_per_s).collect();
        let aggregate = bytes as f64 / seconds.max(1e-9);
        let latencies: Vec<u64> = members
            .iter()
            .flat_map(|f| f.random_read_ns.iter().copied())
            .collect();
        buckets.push(AgeBucket {
            months_from: from,
            months_to: to.is_finite().then_some(to),
            files: members.len() as u32,
            bytes,
            speed_bytes_per_s: PercentileColumns::of(&speeds),
            bulk_read_hours: bytes as f64 / aggregate / 3600.0,
            hours_per_900gb: hours_per_900gb(bytes, seconds),
            random_reads: RandomReadLatency::of_ns(&latencies),
        });
    }
    buckets
}

/// One summary per device the files live on, in the order of the devices' names.
fn device_summaries(files: &[FileScan]) -> Vec<DeviceSummary> {
    let mut device_names: Vec<&str> = files.iter().map(|f| f.device.as_str()).collect();
    device_names.sort_unstable();
    device_names.dedup();
    device_names
        .iter()
        .map(|&device| {
            let members: Vec<&FileScan> = files.iter().filter(|f| f.device == device).collect();
            let bytes: u64 = members.iter().map(|f| f.bytes).sum();
            let seconds: f64 = members.iter().map(|f| f.seconds).sum();
            let speeds: Vec<f64> = members.iter().map(|f| f.bytes_per_s).collect();
            DeviceSummary {
                device: device.to_string(),
                files: members.len() as u32,
                bytes,
                speed_bytes_per_s: PercentileColumns::of(&speeds),
                flagged: members.iter().filter(|f| f.flagged).count() as u32,
                hours_per_900gb: hours_per_900gb(bytes, seconds),
            }
        })
        .collect()
}

/// Passed when no file was flagged and the drive read every file; stale files are a finding, and a file the drive
/// failed to read fails the scan (the speeds are of the files that were read).
pub fn verdict(analysis: &ScanAnalysis, slower_than: f64) -> Verdict {
    let mut reasons = vec![];
    let failed: Vec<&ssdlab_core::schema::SkippedFile> =
        analysis.skipped.iter().filter(|s| s.io_failed).collect();
    if let Some(first) = failed.first() {
        reasons.push(format!(
            "{} files could not be read (first: {}: {}); the speeds are of the {} that were",
            failed.len(),
            first.name,
            first.reason,
            analysis.files.len()
        ));
    }
    if !analysis.flagged.is_empty() {
        reasons.push(format!(
            "{} files read at less than {slower_than} of fresh speed, confirmed by re-reading",
            analysis.flagged.len()
        ));
    }
    // Stale files are what a scan looks for: a finding about the data, not a failed scan.
    Verdict {
        finding: !analysis.flagged.is_empty() && failed.is_empty(),
        passed: analysis.flagged.is_empty() && failed.is_empty(),
        reasons,
        unknown: false,
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
            slowdown_ratio: 0.0,
            flagged: false,
            confirmed: false,
            random_reads: None,
            // Random reads as slow as the file: 100 us per 4 KiB at 500 MB/s-class speed, 1 ms at 50.
            random_read_ns: vec![(50_000_000.0 / mb_s) as u64; 4],
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
        let a = analyze(files, 0.5, "test reader");
        assert_eq!(
            a.baseline_bytes_per_s, 480e6,
            "median (nearest rank) of the files 1 to 30 days old"
        );
        assert_eq!(a.flagged, vec!["old-slow".to_string()]);
        let old = a
            .buckets
            .iter()
            .find(|b| b.months_from == 6.0)
            .expect("a 6-7 month bucket");
        assert_eq!(old.files, 3);
        // The bucket's random reads pool its files' samples: 8 of 1 ms and 4 of about 106 us.
        let random = old.random_reads.as_ref().expect("random reads were made");
        assert_eq!(random.reads, 12);
        assert_eq!(random.p50_ns, 1_000_000.0);
        assert!((random.p25_ns - 106_000.0).abs() < 1000.0, "{random:?}");
        assert_eq!(random.max_ns, 1_000_000.0);
        assert_eq!(a.slower_than_ratio, 0.5);
        assert_eq!(a.reader, "test reader");
        assert!(a.buckets.iter().any(|b| b.months_from == 0.0 && b.files == 2));
        let fresh = &a.buckets[0];
        assert!(
            (fresh.hours_per_900gb - 900e9 / (200e6 / (100.0 / 500.0 + 100.0 / 480.0)) / 3600.0).abs() < 1e-9
        );
    }
}
