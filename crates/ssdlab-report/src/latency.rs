//! The QD1 latency section: the field report's percentile columns plus p99 and the maximum, and mean and p99
//! latency per second.

use ssdlab_core::schema::options::{MethodOptions, RunOptions, TestOptions};
use ssdlab_core::schema::{Analysis, LatencyAnalysis, MethodAnalysis, RunResult};
use ssdlab_core::units::Nanos;

use crate::svg::{Axis, Chart, Mark, Scale};
use crate::{charts, label, mb_s, series_of_phase, table};

/// The QD1 operations of a latency result (random writes for results written before `--rw`).
fn operations(r: &RunResult) -> String {
    match &r.options {
        RunOptions::Test(TestOptions {
            method: MethodOptions::Latency(o),
            ..
        }) => format!("4 KiB {}", o.rw.name()),
        _ => "4 KiB randwrite".into(),
    }
}

fn measured(r: &RunResult) -> Option<&LatencyAnalysis> {
    match &r.analysis {
        Analysis::Latency(MethodAnalysis {
            measured: Some(a), ..
        }) => Some(a),
        _ => None,
    }
}

/// The QD1 latency section: a row per result (with each cached result against its plain drive, as ratios), then
/// the mean and p99 latency per second.
pub(crate) fn latency(group: &[&RunResult]) -> String {
    let header: Vec<String> = [
        "",
        "operations",
        "IOPS",
        "MB/s",
        "CPU",
        "mean",
        "25%",
        "median",
        "75%",
        "95%",
        "99%",
        "99.9%",
        "maximum",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rows: Vec<Vec<String>> = group.iter().map(|r| latency_row(r)).collect();
    rows.extend(cached_ratio_rows(group));
    let mut out = table(&header, &rows);
    out.push_str(&latency_charts(group));
    out
}

/// A result's row of the table: its operations, IOPS, MB/s, CPU and latency percentiles, or "not measured".
fn latency_row(r: &RunResult) -> Vec<String> {
    let ns = |v: u64| Nanos(v as f64).to_string();
    match &r.analysis {
        Analysis::Latency(MethodAnalysis {
            measured: Some(a), ..
        }) => vec![
            label(r),
            operations(r),
            format!("{:.0}", a.iops),
            mb_s(a.bytes_per_s),
            format!("{:.1}%", a.cpu_percent),
            Nanos(a.latency_ns_mean).to_string(),
            ns(a.latency_ns_p25),
            ns(a.latency_ns_p50),
            ns(a.latency_ns_p75),
            ns(a.latency_ns_p95),
            ns(a.latency_ns_p99),
            if a.latency_ns_p999 > 0 {
                ns(a.latency_ns_p999)
            } else {
                "–".into()
            },
            ns(a.latency_ns_max),
        ],
        _ => vec![label(r), "not measured".into()],
    }
}

/// RAPID's comparison: each cached result against the same drive without the cache (same operations), as ratios.
fn cached_ratio_rows(group: &[&RunResult]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for cached in group {
        let Some(plain_target) = crate::uncached_target(&cached.target.target) else {
            continue;
        };
        let Some(plain) = group
            .iter()
            .find(|r| r.target.target == plain_target && operations(r) == operations(cached))
        else {
            continue;
        };
        if let (Some(c), Some(p)) = (measured(cached), measured(plain)) {
            rows.push(ratio_row(cached, plain, c, p));
        }
    }
    rows
}

/// The row of a cached result `c` against its plain drive `p`: each figure as the ratio of the two.
fn ratio_row(cached: &RunResult, plain: &RunResult, c: &LatencyAnalysis, p: &LatencyAnalysis) -> Vec<String> {
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}x", a / b)
        } else {
            "–".into()
        }
    };
    let mut row = vec![
        format!("{} / {}", label(cached), label(plain)),
        String::new(),
        ratio(c.iops, p.iops),
        ratio(c.bytes_per_s, p.bytes_per_s),
        ratio(c.cpu_percent, p.cpu_percent),
        ratio(c.latency_ns_mean, p.latency_ns_mean),
    ];
    for (a, b) in [
        (c.latency_ns_p25, p.latency_ns_p25),
        (c.latency_ns_p50, p.latency_ns_p50),
        (c.latency_ns_p75, p.latency_ns_p75),
        (c.latency_ns_p95, p.latency_ns_p95),
        (c.latency_ns_p99, p.latency_ns_p99),
        (c.latency_ns_p999, p.latency_ns_p999),
        (c.latency_ns_max, p.latency_ns_max),
    ] {
        row.push(ratio(a as f64, b as f64));
    }
    row
}

/// The mean and the p99 latency of each second, one line per result.
fn latency_charts(group: &[&RunResult]) -> String {
    let mean = series_of_phase(
        group,
        // A latency result has one phase, named by its operations (qd1-random-write, qd1-sequential-read, ...).
        |r| r.phases.first(),
        |p| {
            p.samples
                .iter()
                .map(|s| (s.t_s, s.latency_ns_mean / 1e3))
                .collect()
        },
        Mark::Line,
    );
    let p99 = series_of_phase(
        group,
        |r| r.phases.first(),
        |p| {
            p.samples
                .iter()
                .map(|s| (s.t_s, s.latency_ns_p99 as f64 / 1e3))
                .collect()
        },
        Mark::Line,
    );
    charts(&[
        Chart {
            title: "Mean latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            series: mean,
        },
        Chart {
            title: "p99 latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            series: p99,
        },
    ])
}

/// How a qd1 latency result is shown.
pub(crate) struct Latency;

impl crate::views::View for Latency {
    type Analysis = ssdlab_core::schema::LatencyAnalysis;
    const HEADING: &'static str = "QD1 latency: 4 KiB operations one at a time";
    const STORY: &'static str = "Single 4 KiB operations, one at a time, across growing spans of the drive, as AnandTech measured QD1 latency: the time one request takes with nothing queued behind it. Look at the percentiles: the median is the drive's usual answer, the 99th and 99.9th its hiccups.";
    const MEASURED_PHASES: &'static [&'static str] = &[""];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        latency(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::latency_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::latency(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::latency(analysis)
    }
}
