//! The scans' tables as stderr shows them: files by data age (the field report's columns), the devices, the
//! flagged files, and a virtual data set's comparison with seed 000. It prints nothing itself.

use ssdlab_core::units::{BinaryBytes, MONTH_S};

/// How many flagged files the table names (the slowest); the rest are counted.
const FLAGGED_SHOWN: usize = 10;

use ssdlab_core::schema::ScanAnalysis;

/// How a scan's flagged files get rewritten, which the flagged line names: `refresh --from` for files on a real
/// file system; on a virtual data set, the scan's own `--refresh-flagged` (its files live only in that run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteHint {
    RefreshFrom,
    RefreshFlagged,
    /// The scan already rewrote them (`--refresh-flagged` was given).
    Done,
}

pub fn scan_lines(analysis: &ScanAnalysis, hint: RewriteHint) -> Vec<String> {
    let mut out = Vec::new();
    say!(out, "reader    {}", analysis.reader);
    say!(
        out,
        "baseline  {:.1} MB/s ({})",
        analysis.baseline_bytes_per_s / 1e6,
        analysis.baseline_source
    );
    say!(
        out,
        "{:>9}{:>6}{:>11}{:>8}{:>8}{:>8}{:>8}{:>8}{:>13}",
        "age (mo)",
        "files",
        "data",
        "25%",
        "median",
        "75%",
        "95%",
        "mean",
        "h per 900 GB"
    );
    for b in &analysis.buckets {
        let to = b.months_to.map_or("+".into(), |to| format!("{to:.0}"));
        let c = b.speed_bytes_per_s.scaled(1e-6);
        say!(
            out,
            "{:>9}{:>6}{:>11}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>13.2}",
            format!("{:.0}-{to}", b.months_from),
            b.files,
            BinaryBytes(b.bytes).to_string(),
            c.p25,
            c.p50,
            c.p75,
            c.p95,
            c.mean,
            b.hours_per_900gb
        );
    }
    say!(
        out,
        "total     {} read in {:.2} h of device time ({} files); speeds in MB/s",
        BinaryBytes(analysis.total_bytes),
        analysis.total_bulk_read_hours,
        analysis.files.len()
    );
    out.extend(random_read_lines(analysis));
    if let Some(comparison) = &analysis.field_report {
        out.extend(field_report_lines(comparison));
    }
    out.extend(device_lines(analysis));
    out.extend(flagged_lines(analysis, hint));
    out
}

/// 4 KiB random reads at QD1 by data age, when the scan made them.
fn random_read_lines(analysis: &ScanAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    if analysis.buckets.iter().any(|b| b.random_reads.is_some()) {
        say!(out, "random    4 KiB reads at QD1 by data age, latency in µs");
        say!(
            out,
            "{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
            "age (mo)",
            "reads",
            "25%",
            "median",
            "75%",
            "95%",
            "99%",
            "mean"
        );
        for b in &analysis.buckets {
            let Some(r) = &b.random_reads else { continue };
            let to = b.months_to.map_or("+".into(), |to| format!("{to:.0}"));
            say!(
                out,
                "{:>9}{:>9}{:>9.0}{:>9.0}{:>9.0}{:>9.0}{:>9.0}{:>9.0}",
                format!("{:.0}-{to}", b.months_from),
                r.reads,
                r.p25_ns / 1e3,
                r.p50_ns / 1e3,
                r.p75_ns / 1e3,
                r.p95_ns / 1e3,
                r.p99_ns / 1e3,
                r.mean_ns / 1e3
            );
        }
    }
    out
}

/// Each device's files and speeds, when the files lie on more than one.
fn device_lines(analysis: &ScanAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    if analysis.devices.len() > 1 {
        say!(
            out,
            "{:>20}{:>7}{:>11}{:>9}{:>9}{:>9}{:>14}",
            "device",
            "files",
            "data",
            "median",
            "95%",
            "flagged",
            "h per 900 GB"
        );
        for d in &analysis.devices {
            say!(
                out,
                "{:>20}{:>7}{:>11}{:>9.1}{:>9.1}{:>9}{:>14.2}",
                d.device,
                d.files,
                BinaryBytes(d.bytes).to_string(),
                d.speed_bytes_per_s.p50 / 1e6,
                d.speed_bytes_per_s.p95 / 1e6,
                d.flagged,
                d.hours_per_900gb
            );
        }
    }
    out
}

/// The flagged files, the slowest first (a screenful at most; result.json and --json hold them all), and what
/// rewrites them.
fn flagged_lines(analysis: &ScanAnalysis, hint: RewriteHint) -> Vec<String> {
    let mut out = Vec::new();
    // The slowest first, a screenful at most; result.json and --json hold them all.
    let mut flagged: Vec<&ssdlab_core::schema::FileScan> =
        analysis.files.iter().filter(|f| f.flagged).collect();
    flagged.sort_by(|a, b| b.slowdown_ratio.total_cmp(&a.slowdown_ratio));
    for f in flagged.iter().take(FLAGGED_SHOWN) {
        say!(
            out,
            // Every flagged file's slow chunks were slow again when re-read: that is what flagged means.
            "FLAGGED   {}: {:.1} MB/s, {:.1}x slower than fresh data, {:.1} months old",
            f.name,
            f.bytes_per_s / 1e6,
            f.slowdown_ratio,
            f.age_s / MONTH_S
        );
    }
    if !flagged.is_empty() {
        let bytes: u64 = flagged.iter().map(|f| f.bytes).sum();
        let seconds: f64 = flagged.iter().map(|f| f.seconds).sum();
        say!(
            out,
            "flagged   {} files{}, {} holding {}: reading them took {:.1} s; {}",
            flagged.len(),
            if flagged.len() > FLAGGED_SHOWN {
                format!(" ({FLAGGED_SHOWN} slowest shown above)")
            } else {
                String::new()
            },
            if flagged.len() == 1 { "one" } else { "together" },
            BinaryBytes(bytes),
            seconds,
            match hint {
                RewriteHint::RefreshFrom => "`ssdlab refresh --from` the result rewrites them",
                RewriteHint::RefreshFlagged =>
                    "the same scan with --refresh-flagged rewrites them on the virtual drive",
                RewriteHint::Done => "rewritten below",
            }
        );
    }
    out
}

/// The virtual data set age by age beside the field report's bulk-read hours (read with cat).
pub fn field_report_lines(comparison: &ssdlab_core::schema::FieldReportComparison) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "{:>9}{:>6}{:>13}{:>13}{:>7}{:>10}{:>8}{:>8}",
        "age (mo)",
        "files",
        "h per 900 GB",
        "field report",
        "diff",
        "4K median",
        "95%",
        "99%"
    );
    for row in &comparison.rows {
        let reference = row
            .field_report_hours_per_900gb
            .map_or("-".into(), |h| format!("{h:.2}"));
        let diff = row.field_report_hours_per_900gb.map_or("".into(), |h| {
            format!("{:+.0}%", 100.0 * (row.hours_per_900gb / h - 1.0))
        });
        let (p50, p95, p99) = row
            .random_reads
            .as_ref()
            .map_or(("-".into(), "-".into(), "-".into()), |r| {
                (
                    format!("{:.0}", r.p50_ns / 1e3),
                    format!("{:.0}", r.p95_ns / 1e3),
                    format!("{:.0}", r.p99_ns / 1e3),
                )
            });
        say!(
            out,
            "{:>9.1}{:>6}{:>13.2}{:>13}{:>7}{:>10}{:>8}{:>8}",
            row.months,
            row.files,
            row.hours_per_900gb,
            reference,
            diff,
            p50,
            p95,
            p99
        );
    }
    if comparison.same_reader {
        say!(
            out,
            "field     the Net Archive field report's bulk-read hours per 900 GB (840 EVO 1 TB drives, 2014), read with cat as this scan was; its 5.1- and 6.0-month drives read faster than the trend the virtual drive follows; random-read latencies in µs"
        );
    } else {
        say!(
            out,
            "field     the Net Archive field report (840 EVO 1 TB drives, 2014) read with cat; this scan's reader differs, so its hours are a prediction for that reader, not a reproduction (--reader cat reads as the report did)"
        );
    }
    out
}
