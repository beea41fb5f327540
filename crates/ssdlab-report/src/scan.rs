//! The stale-data section: read speed against data age (every file, and each age bucket's median), the
//! projected bulk-read hours per 900 GB, the field report's table per result, and the flagged files.

use std::fmt::Write;

use ssdlab_core::schema::{Analysis, RunResult, ScanAnalysis};
use ssdlab_core::units::MONTH_S;

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, escape, label, overlay_prefix, table};

/// Ages are drawn on a log axis, so a file written this instant is drawn at a hundredth of a month.
const YOUNGEST_DRAWN_MONTHS: f64 = 0.01;

pub(crate) fn scan(group: &[&RunResult]) -> String {
    let scans: Vec<(&RunResult, &ScanAnalysis)> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::Scan(a) => Some((*r, a)),
            _ => None,
        })
        .collect();
    let mut scatter = Vec::new();
    let mut hours = Vec::new();
    for (r, a) in &scans {
        let prefix = overlay_prefix(group, r);
        let months = |age_s: f64| (age_s / MONTH_S).max(YOUNGEST_DRAWN_MONTHS);
        scatter.push(Series {
            name: format!("{prefix}files"),
            points: a
                .files
                .iter()
                .map(|f| (months(f.age_s), f.bytes_per_s / 1e6))
                .collect(),
            mark: Mark::Dots,
        });
        // Each bucket is drawn at the age of its youngest file.
        let youngest: Vec<f64> = a
            .buckets
            .iter()
            .map(|b| {
                a.files
                    .iter()
                    .map(|f| f.age_s / MONTH_S)
                    .filter(|m| *m >= b.months_from && b.months_to.is_none_or(|to| *m < to))
                    .fold(f64::NAN, f64::min)
                    .max(YOUNGEST_DRAWN_MONTHS)
            })
            .collect();
        scatter.push(Series {
            name: format!("{prefix}bucket median"),
            points: youngest
                .iter()
                .zip(&a.buckets)
                .map(|(age, b)| (*age, b.speed_mb_s.p50))
                .collect(),
            mark: Mark::LineWithDots,
        });
        hours.push(Series {
            name: format!("{prefix}hours per 900 GB"),
            points: youngest
                .iter()
                .zip(&a.buckets)
                .map(|(age, b)| (*age, b.hours_per_900gb))
                .collect(),
            mark: Mark::LineWithDots,
        });
    }
    let mut out = charts(&[
        Chart {
            title: "Read speed against data age".into(),
            x: Axis::new("age (months, log scale)", Scale::Log10),
            y: Axis::new("MB/s", Scale::Linear),
            series: scatter,
        },
        Chart {
            title: "Projected bulk-read time".into(),
            x: Axis::new("age (months, log scale)", Scale::Log10),
            y: Axis::new("hours per 900 GB", Scale::Linear),
            series: hours,
        },
    ]);
    for (r, a) in &scans {
        out.push_str(&bucket_table(r, a));
        out.push_str(&flagged_list(a));
    }
    out
}

fn bucket_table(r: &RunResult, a: &ScanAnalysis) -> String {
    let header: Vec<String> = [
        "age (months)",
        "files",
        "25%",
        "median",
        "75%",
        "95%",
        "mean",
        "h per 900 GB",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = a
        .buckets
        .iter()
        .map(|b| {
            let c = &b.speed_mb_s;
            vec![
                format!(
                    "{:.0}-{}",
                    b.months_from,
                    b.months_to.map_or("+".into(), |to| format!("{to:.0}"))
                ),
                b.files.to_string(),
                format!("{:.1}", c.p25),
                format!("{:.1}", c.p50),
                format!("{:.1}", c.p75),
                format!("{:.1}", c.p95),
                format!("{:.1}", c.mean),
                format!("{:.2}", b.hours_per_900gb),
            ]
        })
        .collect();
    let mut out = format!(
        "<h3>{} — baseline {:.1} MB/s ({})</h3>",
        escape(&label(r)),
        a.baseline_mb_s,
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
