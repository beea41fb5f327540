//! The fan-out section: every drive's latency tail overlaid with the query's, the stragglers ranked by their
//! share of the query's tail, and the what-if table (more shards, hedging, replicas, the stragglers fixed).

use std::fmt::Write;

use ssdlab_core::histogram::{SparseHistogram, bucket_value};
use ssdlab_core::schema::fanout::{FanoutAnalysis, QueryCase};
use ssdlab_core::schema::{Analysis, LatencyNs, RunResult};

use crate::svg::{Axis, Chart, Mark, Scale, Series, bars};
use crate::{charts, escape, label, table};

/// The smallest tail fraction drawn: a one-in-ten-thousand read.
const SMALLEST_FRACTION: f64 = 1e-4;

/// (latency ms, fraction of reads slower) along a histogram.
fn tail_of(h: &SparseHistogram) -> Vec<(f64, f64)> {
    let mut seen = 0u64;
    h.buckets
        .iter()
        .map(|&(index, count)| {
            seen += count;
            let value = bucket_value(index as usize).clamp(h.min_ns, h.max_ns);
            (value as f64 / 1e6, 1.0 - seen as f64 / h.count as f64)
        })
        .filter(|&(_, slower)| slower >= SMALLEST_FRACTION)
        .collect()
}

pub(crate) fn fanout(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Analysis::Fanout(a) = &r.analysis else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        out.push_str(&one(a));
    }
    out
}

fn one(a: &FanoutAnalysis) -> String {
    let mut series: Vec<Series> = Vec::new();
    series.push(Series {
        name: format!("query over all {} drives", a.query.shards),
        points: a
            .query_cdf
            .iter()
            .map(|&(ns, f)| (ns as f64 / 1e6, 1.0 - f))
            .filter(|&(_, slower)| slower >= SMALLEST_FRACTION)
            .collect(),
        mark: Mark::LineWithDots,
    });
    if let Some(m) = &a.measured {
        series.push(Series {
            name: "query as measured".into(),
            points: tail_of(&m.histogram),
            mark: Mark::Line,
        });
    }
    for d in &a.drives {
        series.push(Series {
            name: match d.data_age_months {
                Some(m) => format!("{} ({m:.1} mo)", d.name),
                None => d.name.clone(),
            },
            points: tail_of(&d.histogram),
            mark: Mark::Line,
        });
    }
    let mut out = charts(&[Chart {
        title: "Read latency tail: every drive and the query that waits for all".into(),
        x: Axis::new("latency (ms, log scale)", Scale::Log10),
        y: Axis::new("fraction of reads slower (log scale)", Scale::Log10),
        series,
    }]);
    let ranked: Vec<(String, f64)> = a
        .stragglers
        .iter()
        .map(|s| (s.name.clone(), s.share_of_p99_ratio))
        .collect();
    let _ = write!(
        out,
        "<div class=\"charts\">{}</div>",
        bars(
            "Share of the query's p99 tail (the drive is the slowest of the query)",
            "share of queries at or beyond the query's p99",
            &ranked,
            |v| format!("{:.0}%", 100.0 * v)
        )
    );
    let header: Vec<String> = [
        "query (ms)",
        "median",
        "95%",
        "99%",
        "99.9%",
        "mean",
        "extra reads",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let row = |name: &str, l: &LatencyNs, extra: f64| {
        let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
        vec![
            name.to_string(),
            ms(l.p50),
            ms(l.p95),
            ms(l.p99),
            ms(l.p999),
            format!("{:.2}", l.mean / 1e6),
            if extra > 0.0 {
                format!("+{:.0}%", 100.0 * extra)
            } else {
                String::new()
            },
        ]
    };
    let case_row = |c: &QueryCase| row(&c.case, &c.latency_ns, c.extra_load_ratio);
    let mut rows = vec![case_row(&a.query)];
    if let Some(m) = &a.measured {
        rows.push(row(
            &format!("measured: {} synchronized queries", m.queries),
            &m.latency_ns,
            0.0,
        ));
    }
    rows.extend(a.what_if.iter().map(case_row));
    if let Some(fixed) = &a.fixed {
        rows.push(case_row(fixed));
    }
    out.push_str(&table(&header, &rows));
    let header: Vec<String> = [
        "drive",
        "data age (months)",
        "reads",
        "25% (ms)",
        "median",
        "75%",
        "95%",
        "mean",
        "99%",
        "99.9%",
        "share of p99 tail",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = a
        .drives
        .iter()
        .map(|d| {
            let l = &d.latency_ns;
            let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
            let share = a
                .stragglers
                .iter()
                .find(|s| s.name == d.name)
                .map_or(0.0, |s| s.share_of_p99_ratio);
            vec![
                d.name.clone(),
                d.data_age_months.map_or("–".into(), |m| format!("{m:.1}")),
                d.reads.to_string(),
                ms(l.p25),
                ms(l.p50),
                ms(l.p75),
                ms(l.p95),
                format!("{:.2}", l.mean / 1e6),
                ms(l.p99),
                ms(l.p999),
                format!("{:.0}%", 100.0 * share),
            ]
        })
        .collect();
    out.push_str(&table(&header, &rows));
    let _ = write!(
        out,
        "<p>{}; {} mode. A query's CDF is the product of the drives' CDFs (independent shards).</p>",
        escape(&a.workload),
        escape(&a.mode)
    );
    out
}
