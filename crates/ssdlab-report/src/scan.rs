//! The stale-data section: read speed against data age (every file, and each age bucket's median), the
//! projected bulk-read hours per 900 GB (beside the field report's, for a virtual data set), random 4 KiB read
//! latency against age, the field report's table per result, and the flagged files.

use std::fmt::Write;

use ssdlab_core::schema::{Analysis, FieldReportComparison, RandomReadLatency, RunResult, ScanAnalysis};
use ssdlab_core::units::MONTH_S;

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, escape, label, mb_s, overlay_prefix, table};

/// Ages are drawn on a log axis, so a file written this instant is drawn at a hundredth of a month.
const YOUNGEST_DRAWN_MONTHS: f64 = 0.01;

/// The series of a group's scans, one chart's worth each.
#[derive(Default)]
struct ScanSeries {
    /// Read speed against age: every file, and each bucket's median.
    scatter: Vec<Series>,
    /// Projected bulk-read hours per 900 GB against age, with the field report's where there is one.
    hours: Vec<Series>,
    /// Random 4 KiB read latency percentiles against age.
    random: Vec<Series>,
}

/// The stale-data section: the charts of every scan in `group` together, then each scan's tables.
pub(crate) fn scan(group: &[&RunResult]) -> String {
    let scans: Vec<(&RunResult, &ScanAnalysis)> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::Scan(a) => Some((*r, a)),
            _ => None,
        })
        .collect();
    let mut series = ScanSeries::default();
    for (r, a) in &scans {
        add_scan_series(&mut series, &overlay_prefix(group, r), a);
    }
    let mut out = scan_charts(series);
    for (r, a) in &scans {
        out.push_str(&bucket_table(r, a));
        if let Some(c) = &a.field_report {
            out.push_str(&field_report_table(c));
        }
        out.push_str(&flagged_list(a));
        if let Some(after) = &a.after_refresh {
            out.push_str(&refresh_table(after));
        }
    }
    out
}

/// The age each of a scan's buckets is drawn at, in months: that of its youngest file.
fn bucket_ages_months(a: &ScanAnalysis) -> Vec<f64> {
    a.buckets
        .iter()
        .map(|b| {
            a.files
                .iter()
                .map(|f| f.age_s / MONTH_S)
                .filter(|m| *m >= b.months_from && b.months_to.is_none_or(|to| *m < to))
                .fold(f64::NAN, f64::min)
                .max(YOUNGEST_DRAWN_MONTHS)
        })
        .collect()
}

/// Adds one scan's series, named with `prefix`, to each chart's.
fn add_scan_series(series: &mut ScanSeries, prefix: &str, a: &ScanAnalysis) {
    let months = |age_s: f64| (age_s / MONTH_S).max(YOUNGEST_DRAWN_MONTHS);
    series.scatter.push(Series {
        name: format!("{prefix}files"),
        points: a
            .files
            .iter()
            .map(|f| (months(f.age_s), f.bytes_per_s / 1e6))
            .collect(),
        mark: Mark::Dots,
        style: None,
    });
    // Each bucket is drawn at the age of its youngest file.
    let youngest = bucket_ages_months(a);
    series.scatter.push(Series {
        name: format!("{prefix}bucket median"),
        points: youngest
            .iter()
            .zip(&a.buckets)
            .map(|(age, b)| (*age, b.speed_bytes_per_s.p50 / 1e6))
            .collect(),
        mark: Mark::LineWithDots,
        style: None,
    });
    series.hours.push(Series {
        name: format!("{prefix}hours per 900 GB"),
        points: youngest
            .iter()
            .zip(&a.buckets)
            .map(|(age, b)| (*age, b.hours_per_900gb))
            .collect(),
        mark: Mark::LineWithDots,
        style: None,
    });
    series.random.extend(random_read_series(prefix, a, &youngest));
    if let Some(c) = &a.field_report {
        series.hours.push(Series {
            name: format!("{prefix}Net Archive field report (cat)"),
            points: c
                .rows
                .iter()
                .filter_map(|row| Some((row.months, row.field_report_hours_per_900gb?)))
                .collect(),
            mark: Mark::Dots,
            style: None,
        });
    }
}

/// A scan's random reads by age, median, 95% and 99% (µs): at each virtual age exactly when the data set has
/// them, else per bucket (drawn at `youngest`, each bucket's age). Empty when it made none.
fn random_read_series(prefix: &str, a: &ScanAnalysis, youngest: &[f64]) -> Vec<Series> {
    let by_age: Vec<(f64, &RandomReadLatency)> = match &a.field_report {
        Some(c) => c
            .rows
            .iter()
            .filter_map(|row| Some((row.months.max(YOUNGEST_DRAWN_MONTHS), row.random_reads.as_ref()?)))
            .collect(),
        None => youngest
            .iter()
            .zip(&a.buckets)
            .filter_map(|(age, b)| Some((*age, b.random_reads.as_ref()?)))
            .collect(),
    };
    if by_age.is_empty() {
        return Vec::new();
    }
    [
        (
            "median",
            (|r: &RandomReadLatency| r.p50_ns / 1e3) as fn(&RandomReadLatency) -> f64,
        ),
        ("95%", |r| r.p95_ns / 1e3),
        ("99%", |r| r.p99_ns / 1e3),
    ]
    .into_iter()
    .map(|(name, column)| Series {
        name: format!("{prefix}4 KiB random read {name}"),
        points: by_age.iter().map(|(age, r)| (*age, column(r))).collect(),
        mark: Mark::LineWithDots,
        style: None,
    })
    .collect()
}

/// The charts of read speed and bulk-read time against age, and of random reads when any scan made them.
fn scan_charts(series: ScanSeries) -> String {
    let mut out = charts(&[
        Chart {
            title: "Read speed against data age".into(),
            x: Axis::new("age (months, log scale)", Scale::Log10),
            y: Axis::new("MB/s", Scale::Linear),
            series: series.scatter,
        },
        Chart {
            title: "Projected bulk-read time".into(),
            x: Axis::new("age (months, log scale)", Scale::Log10),
            y: Axis::new("hours per 900 GB", Scale::Linear),
            series: series.hours,
        },
    ]);
    if !series.random.is_empty() {
        out.push_str(&charts(&[Chart {
            title: "Random 4 KiB reads at QD1 against data age".into(),
            x: Axis::new("age (months, log scale)", Scale::Log10),
            y: Axis::new("latency (log scale)", Scale::Log10).format(crate::svg::micros),
            series: series.random,
        }]));
    }
    out
}

/// What rewriting the flagged files bought: their read speed and bulk-read hours before and after, the number
/// the field report's operator measured (10.49 h per 900 GB on the oldest drive, then 1.0).
fn refresh_table(after: &ssdlab_core::schema::AfterRefresh) -> String {
    if after.files.is_empty() {
        return "<h3>What the refresh bought</h3><p>Nothing was flagged, so nothing was rewritten.</p>"
            .into();
    }
    let hours = |h: Option<f64>| h.map_or("–".to_string(), |h| format!("{h:.2}"));
    let header: Vec<String> = ["", "before the refresh", "after", "field report"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows = vec![
        vec![
            "mean read speed of the rewritten files (MB/s)".to_string(),
            mb_s(after.mean_bytes_per_s_before),
            mb_s(after.mean_bytes_per_s_after),
            "–".into(),
        ],
        vec![
            "hours to read 900 GB of them".to_string(),
            hours(after.hours_per_900gb_before),
            hours(after.hours_per_900gb_after),
            "10.49, then 1.00".into(),
        ],
    ];
    let ratio = if after.mean_bytes_per_s_before > 0.0 {
        after.mean_bytes_per_s_after / after.mean_bytes_per_s_before
    } else {
        f64::NAN
    };
    format!(
        "<h3>What the refresh bought</h3><p>The {} flagged files rewritten in place and read again: {ratio:.1}x \
         faster.</p>{}",
        after.files.len(),
        table(&header, &rows)
    )
}

/// The virtual data set age by age beside seed 000's bulk-read hours, with the random reads' columns.
fn field_report_table(c: &FieldReportComparison) -> String {
    let header: Vec<String> = [
        "age (months)",
        "files",
        "h per 900 GB",
        "field report (cat)",
        "difference",
        "4K 25% (µs)",
        "median (µs)",
        "75% (µs)",
        "95% (µs)",
        "99% (µs)",
        "mean (µs)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|row| {
            let mut cells = vec![
                format!("{:.1}", row.months),
                row.files.to_string(),
                format!("{:.2}", row.hours_per_900gb),
                row.field_report_hours_per_900gb
                    .map_or("–".into(), |h| format!("{h:.2}")),
                row.field_report_hours_per_900gb.map_or(String::new(), |h| {
                    format!("{:+.0}%", 100.0 * (row.hours_per_900gb / h - 1.0))
                }),
            ];
            match &row.random_reads {
                Some(r) => cells.extend(
                    [r.p25_ns, r.p50_ns, r.p75_ns, r.p95_ns, r.p99_ns, r.mean_ns]
                        .map(|v| format!("{:.0}", v / 1e3)),
                ),
                None => cells.extend(std::iter::repeat_n("–".to_string(), 6)),
            }
            cells
        })
        .collect();
    let mut out = String::from("<h3>Against the field report</h3>");
    out.push_str(&table(&header, &rows));
    out.push_str(if c.same_reader {
        "<p>The field report (Net Archive's 25 Samsung 840 EVO 1 TB drives, 2014) read its shards with <code>cat</code>, as this scan did; its 5.1- and 6.0-month drives read \
         faster than the trend the virtual drive follows.</p>"
    } else {
        "<p>The field report (Net Archive's 25 Samsung 840 EVO 1 TB drives, 2014) read with <code>cat</code>; this scan's reader differs, so its hours are a prediction for \
         that reader, not a reproduction.</p>"
    });
    out
}

fn bucket_table(r: &RunResult, a: &ScanAnalysis) -> String {
    let header: Vec<String> = [
        "age (months)",
        "files",
        "25% (MB/s)",
        "median (MB/s)",
        "75% (MB/s)",
        "95% (MB/s)",
        "mean (MB/s)",
        "h per 900 GB",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = a
        .buckets
        .iter()
        .map(|b| {
            let c = &b.speed_bytes_per_s;
            vec![
                format!(
                    "{:.0}-{}",
                    b.months_from,
                    b.months_to.map_or("+".into(), |to| format!("{to:.0}"))
                ),
                b.files.to_string(),
                format!("{:.1}", c.p25 / 1e6),
                format!("{:.1}", c.p50 / 1e6),
                format!("{:.1}", c.p75 / 1e6),
                format!("{:.1}", c.p95 / 1e6),
                format!("{:.1}", c.mean / 1e6),
                format!("{:.2}", b.hours_per_900gb),
            ]
        })
        .collect();
    let mut out = format!(
        "<h3>{} — baseline {:.1} MB/s ({})</h3>",
        escape(&label(r)),
        a.baseline_bytes_per_s / 1e6,
        escape(&a.baseline_source)
    );
    out.push_str(&table(&header, &rows));
    out
}

/// At most this many flagged files are listed; result.json holds them all.
const FLAGGED_LISTED: usize = 50;

fn flagged_list(a: &ScanAnalysis) -> String {
    let mut out = format!(
        "<p>{} files flagged as stale (slow, and slow again when re-read)",
        a.flagged.len()
    );
    if a.flagged.is_empty() {
        out.push_str(".</p>");
        return out;
    }
    out.push_str(":</p><ul>");
    for name in a.flagged.iter().take(FLAGGED_LISTED) {
        let _ = write!(out, "<li>{}</li>", escape(name));
    }
    if a.flagged.len() > FLAGGED_LISTED {
        let _ = write!(
            out,
            "<li>… and {} more (see result.json)</li>",
            a.flagged.len() - FLAGGED_LISTED
        );
    }
    out.push_str("</ul>");
    out
}

/// How a stale data result is shown.
pub(crate) struct Scan;

impl crate::views::View for Scan {
    type Analysis = ssdlab_core::schema::ScanAnalysis;
    const HEADING: &'static str = "Stale data: read speed by data age";
    const STORY: &'static str = "Every file's read speed set against its age, as the Net Archive field report on the Samsung 840 EVO measured it: data left untouched for months read far slower than fresh data on the same drive. The percentile table by age and the hours to read it all are the figures the report gave; files below the threshold are the ones a refresh would rewrite.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        scan(group)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::scan(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::scan(analysis)
    }
}
