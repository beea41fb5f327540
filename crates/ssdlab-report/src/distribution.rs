//! The latency distribution of a result's measured phases, as fio-plot draws it: the CDF (share of operations
//! at or below each latency, on a log latency axis) and the tail (share slower than each latency, log on both
//! axes, where p99 and p99.9 stand apart), and fio's latency buckets as a table (the share of operations in each
//! of fio's ranges, `lat (usec): 100=12.5%, 250=80.1%, ...`) and as a column chart, fio-plot's histogram. Drawn
//! for every kind whose phases keep their whole-phase histogram.

use ssdlab_core::schema::RunResult;

use crate::svg::{Axis, Chart, Mark, Scale, Series, columns};
use crate::{chart_svg, label, table_with_class};

/// fio's latency bucket edges in nanoseconds (its `lat (usec)` and `lat (msec)` lines): each bucket holds the
/// operations above the previous edge and at or below its own; the last holds everything slower.
const FIO_EDGES_NS: [u64; 21] = [
    2_000,
    4_000,
    10_000,
    20_000,
    50_000,
    100_000,
    250_000,
    500_000,
    750_000,
    1_000_000,
    2_000_000,
    4_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    750_000_000,
    1_000_000_000,
    2_000_000_000,
];

/// How fio names a bucket by its upper edge.
fn edge_name(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{} µs", ns / 1_000)
    } else {
        format!("{} ms", ns / 1_000_000)
    }
}

/// The share of operations in each of fio's buckets, from a histogram's CDF points (value, share at or below).
fn fio_buckets(points: &[(u64, f64)]) -> Vec<f64> {
    let at_most = |edge: u64| {
        points
            .iter()
            .take_while(|&&(v, _)| v <= edge)
            .last()
            .map_or(0.0, |&(_, f)| f)
    };
    let mut shares = Vec::with_capacity(FIO_EDGES_NS.len() + 1);
    let mut below = 0.0;
    for edge in FIO_EDGES_NS {
        let upto = at_most(edge);
        shares.push(upto - below);
        below = upto;
    }
    shares.push(1.0 - below);
    shares
}

/// The latency distributions of a group's measured phases, one entry per phase that kept a histogram.
struct Distributions {
    /// The share of operations at or below each latency (µs against %).
    cdf: Vec<Series>,
    /// The share of operations slower than each latency (µs against %).
    tail: Vec<Series>,
    /// Each phase's shares of fio's buckets, named and styled as its series.
    buckets: Vec<crate::svg::Columns>,
}

impl Distributions {
    /// The distributions of every measured phase of every result in `group`.
    fn of(group: &[&RunResult]) -> Self {
        let mut all = Distributions {
            cdf: Vec::new(),
            tail: Vec::new(),
            buckets: Vec::new(),
        };
        for r in group {
            for (kind, &name) in crate::views::measured_phases(r).iter().enumerate() {
                if let Some((series_name, points)) = phase_cdf(group, r, name) {
                    all.add(series_name, &points, crate::result_style(group, r, kind));
                }
            }
        }
        all
    }

    /// Adds one phase, `name`d and drawn in `style`, from its CDF points (nanoseconds, share at or below).
    fn add(&mut self, name: String, points: &[(u64, f64)], style: Option<(usize, usize)>) {
        self.buckets.push((name.clone(), fio_buckets(points), style));
        self.cdf.push(Series {
            name: name.clone(),
            points: points
                .iter()
                .map(|&(ns, f)| (ns as f64 / 1e3, 100.0 * f))
                .collect(),
            mark: Mark::Line,
            style,
        });
        // The tail: share of operations slower than each latency; the last bucket (0%) has no place on a log
        // axis.
        self.tail.push(Series {
            name,
            points: points
                .iter()
                .filter(|&&(_, f)| f < 1.0)
                .map(|&(ns, f)| (ns as f64 / 1e3, 100.0 * (1.0 - f)))
                .collect(),
            mark: Mark::Line,
            style,
        });
    }
}

/// The CDF points of `r`'s measured phase `name` (its first phase when the name is empty), with the name its
/// series take in `group`; None when the phase kept no histogram or an empty one.
fn phase_cdf(group: &[&RunResult], r: &RunResult, name: &str) -> Option<(String, Vec<(u64, f64)>)> {
    let phase = if name.is_empty() {
        r.phases.first()
    } else {
        r.phases.iter().find(|p| p.name == name)
    };
    let h = phase.and_then(|p| p.summary.latency_histogram.as_ref())?;
    let points = h.cdf_points();
    if points.is_empty() {
        return None;
    }
    let series_name = match (group.len() > 1, crate::views::measured_phases(r).len() > 1) {
        (true, true) => format!("{} {name}", label(r)),
        (true, false) => label(r),
        (false, true) => name.to_string(),
        (false, false) => phase.map_or(String::new(), |p| p.name.clone()),
    };
    Some((series_name, points))
}

/// The distribution section of `group`: fio's buckets as a table and as a histogram, the CDF and the tail; or
/// nothing when no phase kept a histogram.
pub(crate) fn distribution(group: &[&RunResult]) -> String {
    let all = Distributions::of(group);
    if all.cdf.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Latency distribution</h3>");
    // fio's buckets, only those where some phase has operations.
    let used: Vec<usize> = (0..=FIO_EDGES_NS.len())
        .filter(|&i| all.buckets.iter().any(|(_, shares, _)| shares[i] >= 0.00005))
        .collect();
    let bucket_names: Vec<String> = used
        .iter()
        .map(|&i| match FIO_EDGES_NS.get(i) {
            Some(&edge) => edge_name(edge),
            None => format!("> {}", edge_name(FIO_EDGES_NS[FIO_EDGES_NS.len() - 1])),
        })
        .collect();
    out.push_str(&bucket_table(&all.buckets, &used, &bucket_names));
    out.push_str(&distribution_charts(all, &used, &bucket_names));
    out
}

/// fio's buckets as a table: a row per phase, its share of operations in each `used` bucket (named by `names`).
fn bucket_table(buckets: &[crate::svg::Columns], used: &[usize], names: &[String]) -> String {
    let mut header = vec!["operations in fio's range up to".to_string()];
    header.extend(names.iter().cloned());
    let rows: Vec<Vec<String>> = buckets
        .iter()
        .map(|(name, shares, _)| {
            std::iter::once(name.clone())
                .chain(used.iter().map(|&i| format!("{:.2}%", 100.0 * shares[i])))
                .collect()
        })
        .collect();
    table_with_class("wide", &header, &rows)
}

/// The histogram of the `used` buckets (named by `names`), the CDF and the tail, as one row of charts.
fn distribution_charts(all: Distributions, used: &[usize], names: &[String]) -> String {
    // The histogram as fio-plot draws it: a column per bucket and phase, the share of operations on a linear axis.
    let histogram: Vec<crate::svg::Columns> = all
        .buckets
        .iter()
        .map(|(name, shares, style)| {
            (
                name.clone(),
                used.iter().map(|&i| 100.0 * shares[i]).collect(),
                *style,
            )
        })
        .collect();
    let mut out = String::from("<div class=\"charts\">");
    out.push_str(&columns(
        "Latency histogram: operations in each of fio's ranges",
        "latency, up to (fio's ranges)",
        &Axis::new("% of operations", Scale::Linear),
        names,
        &histogram,
    ));
    for chart in [
        Chart {
            title: "Latency CDF: operations at or below each latency".into(),
            x: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            y: Axis::new("% of operations", Scale::Linear).range(Some(0.0), Some(100.0)),
            series: all.cdf,
        },
        Chart {
            title: "Latency tail: operations slower than each latency".into(),
            x: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            y: Axis::new("% of operations slower", Scale::Log10),
            series: all.tail,
        },
    ] {
        out.push_str(&chart_svg(&chart));
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_buckets_share_out_every_operation() {
        // A quarter at 1 us, half at 150 us, a quarter at 3 s.
        let points = [(1_000, 0.25), (150_000, 0.75), (3_000_000_000, 1.0)];
        let shares = fio_buckets(&points);
        assert_eq!(shares.len(), FIO_EDGES_NS.len() + 1);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(shares[0], 0.25, "at or below 2 us");
        assert_eq!(shares[6], 0.5, "above 100 us, at or below 250 us");
        assert_eq!(shares[FIO_EDGES_NS.len()], 0.25, "slower than 2 s");
        assert_eq!(edge_name(250_000), "250 µs");
        assert_eq!(edge_name(2_000_000_000), "2000 ms");
    }
}
