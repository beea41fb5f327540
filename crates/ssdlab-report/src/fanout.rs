//! The fan-out section: every drive's latency tail overlaid with the query's, the stragglers ranked by their
//! share of the query's tail, and the what-if table (more shards, hedging, replicas, the stragglers fixed, the
//! old data rewritten); several fan-outs (a fleet before and after its refresh) first side by side.

use std::fmt::Write;

use ssdlab_core::schema::fanout::{FanoutAnalysis, HistogramBuckets, QueryCase};
use ssdlab_core::schema::{Analysis, LatencyNs, RunResult};

use crate::svg::{Axis, Chart, Mark, Scale, Series, bars};
use crate::{charts, escape, label, table};

/// The smallest tail share drawn: a one-in-ten-thousand read.
const SMALLEST_FRACTION: f64 = 1e-4;

/// (latency ms, fraction of reads at least that slow) along a histogram: each value with the share of reads
/// at or beyond it, so the slowest value still shows (with the share that took it).
fn tail_of(h: &HistogramBuckets) -> Vec<(f64, f64)> {
    at_or_beyond(&h.to_sparse().cdf_points())
}

/// A CDF's points as (latency ms, P(X >= value)), down to [`SMALLEST_FRACTION`].
fn at_or_beyond(cdf: &[(u64, f64)]) -> Vec<(f64, f64)> {
    let mut previous = 0.0;
    cdf.iter()
        .map(|&(ns, f)| {
            let point = (ns as f64 / 1e6, 1.0 - previous);
            previous = f;
            point
        })
        .filter(|&(_, share)| share >= SMALLEST_FRACTION)
        .collect()
}

/// Fractions as percentages: 0.01 -> "1%", 0.001 -> "0.1%".
fn percent(v: f64) -> String {
    let p = 100.0 * v;
    if p >= 1.0 {
        format!("{p:.0}%")
    } else {
        let digits = (-p.log10()).ceil() as usize;
        format!("{p:.digits$}%")
    }
}

pub(crate) fn fanout(group: &[&RunResult]) -> String {
    let mut out = String::new();
    if group.len() > 1 {
        out.push_str(&side_by_side(group));
    }
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

/// Several fan-outs (a fleet before and after its refresh): their queries' tails on one chart and their
/// percentiles in one table, each named with its drives' data ages.
fn side_by_side(group: &[&RunResult]) -> String {
    let fanouts: Vec<(String, &FanoutAnalysis)> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::Fanout(a) => Some((named_by_age(&label(r), a), &**a)),
            _ => None,
        })
        .collect();
    let series = fanouts
        .iter()
        .map(|(name, a)| Series {
            name: name.clone(),
            points: at_or_beyond(&a.query_cdf),
            mark: Mark::Line,
            style: None,
        })
        .collect();
    let mut out = charts(&[Chart {
        title: "The query that waits for every drive, side by side".into(),
        x: Axis::new("latency (log scale)", Scale::Log10).format(crate::svg::millis),
        y: Axis::new("queries at least this slow (log scale)", Scale::Log10).format(percent),
        series,
    }]);
    let header: Vec<String> = [
        "query over all drives (ms)",
        "median",
        "95%",
        "99%",
        "99.9%",
        "mean",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let rows: Vec<Vec<String>> = fanouts
        .iter()
        .map(|(name, a)| {
            let l = &a.query.latency_ns;
            vec![
                name.clone(),
                ms(l.p50),
                ms(l.p95),
                ms(l.p99),
                ms(l.p999),
                format!("{:.2}", l.mean / 1e6),
            ]
        })
        .collect();
    out.push_str(&table(&header, &rows));
    out
}

/// A fan-out's label with the range of its drives' data ages, when they are known.
fn named_by_age(label: &str, a: &FanoutAnalysis) -> String {
    let ages: Option<Vec<f64>> = a.drives.iter().map(|d| d.data_age_months).collect();
    match ages {
        Some(ages) if !ages.is_empty() => {
            let (young, old) = ages
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
            // One age when the drives share it ("data 0.1 months old"), a range otherwise.
            if format!("{young:.1}") == format!("{old:.1}") {
                format!("{label}: data {young:.1} months old")
            } else {
                format!("{label}: data {young:.1}-{old:.1} months old")
            }
        }
        _ => label.to_string(),
    }
}

fn one(a: &FanoutAnalysis) -> String {
    let mut out = tail_chart(a);
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
    out.push_str(&query_table(a));
    out.push_str(&drives_table(a));
    let _ = write!(
        out,
        "<p>{}; {} mode. A query's CDF is the product of the drives' CDFs (independent shards).</p>",
        escape(&a.workload),
        escape(&a.mode)
    );
    out
}

/// The tail chart: the query's CDF beyond each latency beside the drives' (all of them up to a handful, else the
/// fastest, median, slowest and any straggler), and a line for the drives not drawn.
fn tail_chart(a: &FanoutAnalysis) -> String {
    let mut series: Vec<Series> = Vec::new();
    series.push(Series {
        name: format!("query over all {} drives", a.query.shards),
        points: at_or_beyond(&a.query_cdf),
        mark: Mark::LineWithDots,
        style: None,
    });
    if let Some(m) = &a.measured {
        series.push(Series {
            name: "query as measured".into(),
            points: tail_of(&m.histogram),
            mark: Mark::Line,
            style: None,
        });
    }
    // Every drive is a line up to a handful; past that the lines repeat their styles and hide each other, so the
    // chart draws the fastest, the median and the slowest drive by p99 and any named straggler; the table below
    // lists them all.
    const ALL_DRIVES_UP_TO: usize = 6;
    let mut by_p99: Vec<&ssdlab_core::schema::fanout::FanoutDrive> = a.drives.iter().collect();
    by_p99.sort_by_key(|d| d.latency_ns.p99);
    let drawn: Vec<(&ssdlab_core::schema::fanout::FanoutDrive, &str)> = if by_p99.len() <= ALL_DRIVES_UP_TO {
        by_p99.iter().map(|&d| (d, "")).collect()
    } else {
        let mut picked = vec![
            (by_p99[0], "fastest: "),
            (by_p99[by_p99.len() / 2], "median: "),
            (by_p99[by_p99.len() - 1], "slowest: "),
        ];
        for d in by_p99.iter().filter(|d| a.dominant.contains(&d.name)) {
            if !picked.iter().any(|(p, _)| p.name == d.name) {
                picked.push((d, "straggler: "));
            }
        }
        picked
    };
    for (d, role) in &drawn {
        series.push(Series {
            name: match d.data_age_months {
                Some(m) => format!("{role}{} ({m:.1} mo)", d.name),
                None => format!("{role}{}", d.name),
            },
            points: tail_of(&d.histogram),
            mark: Mark::Line,
            style: None,
        });
    }
    let hidden = a.drives.len() - drawn.len();
    let mut out = charts(&[Chart {
        title: "Read latency tail: every drive and the query that waits for all".into(),
        x: Axis::new("latency (log scale)", Scale::Log10).format(crate::svg::millis),
        y: Axis::new("reads at least this slow (log scale)", Scale::Log10).format(percent),
        series,
    }]);
    if hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"meta\">The other {hidden} drives are not drawn (the fastest, median and slowest by p99 \
             are); each drive's figures are in the table below.</p>"
        );
    }
    out
}

/// The query's percentiles: as computed, as measured, and for each what-if.
fn query_table(a: &FanoutAnalysis) -> String {
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
    rows.extend(a.fixed.iter().chain(&a.cohort_fixed).map(case_row));
    table(&header, &rows)
}

/// Every drive's percentiles, data age and share of the query's p99 tail.
fn drives_table(a: &FanoutAnalysis) -> String {
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
    table(&header, &rows)
}

/// How a fan-out result is shown.
pub(crate) struct Fanout;

impl crate::views::View for Fanout {
    type Analysis = ssdlab_core::schema::fanout::FanoutAnalysis;
    const HEADING: &'static str = "Fan-out: the query that waits for every drive, and the straggler";
    const STORY: &'static str = "A search over many shards waits for its slowest drive: each drive's read latency measured, and the query's latency computed as the slowest of them, as the field report's 25-shard search saw it. The straggler table names the drive that sets the query's time.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        fanout(group)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::fanout(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::fanout(analysis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_value_keeps_the_share_that_took_it() {
        // 94% at 5 ms, 6% at 24.5 ms: the tail shows 100% at 5 ms and 6% at 24.5 ms.
        let points = at_or_beyond(&[(5_000_000, 0.94), (24_500_000, 1.0)]);
        assert_eq!(points.len(), 2);
        assert_eq!(points[0], (5.0, 1.0));
        assert!((points[1].0 - 24.5).abs() < 1e-9 && (points[1].1 - 0.06).abs() < 1e-9);
        assert_eq!(percent(0.06), "6%");
        assert_eq!(percent(0.001), "0.1%");
        assert_eq!(percent(0.0001), "0.01%");
    }
}
