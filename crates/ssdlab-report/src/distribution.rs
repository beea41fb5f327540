//! The latency distribution of a result's measured phases, as fio-plot draws it: the CDF (share of operations
//! at or below each latency, on a log latency axis) and the tail (share slower than each latency, log on both
//! axes, where p99 and p99.9 stand apart). Drawn for every kind whose phases keep their whole-phase histogram.

use ssdlab_core::schema::{Analysis, RunResult};

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, label};

/// The phases whose latency a kind measures (the fill and purge phases are preparation).
fn measured_phases(r: &RunResult) -> &'static [&'static str] {
    match &r.analysis {
        Analysis::Run => &["run"],
        Analysis::Consistency(_) => &["random-write"],
        Analysis::Trim(_) => &["clean", "dirty", "after-trim"],
        Analysis::Replay(_) => &["replay"],
        // One phase named by its operations.
        Analysis::Latency(_) => &[""],
        _ => &[],
    }
}

/// The CDF and tail charts of `group`, or nothing when no phase kept a histogram.
pub(crate) fn distribution(group: &[&RunResult]) -> String {
    let mut cdf = Vec::new();
    let mut tail = Vec::new();
    for r in group {
        for &name in measured_phases(r) {
            let phase = if name.is_empty() {
                r.phases.first()
            } else {
                r.phases.iter().find(|p| p.name == name)
            };
            let Some(h) = phase.and_then(|p| p.summary.latency_histogram.as_ref()) else {
                continue;
            };
            let points = h.cdf_points();
            if points.is_empty() {
                continue;
            }
            let series_name = match (group.len() > 1, measured_phases(r).len() > 1) {
                (true, true) => format!("{} {name}", label(r)),
                (true, false) => label(r),
                (false, true) => name.to_string(),
                (false, false) => phase.map_or(String::new(), |p| p.name.clone()),
            };
            cdf.push(Series {
                name: series_name.clone(),
                points: points
                    .iter()
                    .map(|&(ns, f)| (ns as f64 / 1e3, 100.0 * f))
                    .collect(),
                mark: Mark::Line,
            });
            // The tail: share of operations slower than each latency; the last bucket (0%) has no place on a log
            // axis.
            tail.push(Series {
                name: series_name,
                points: points
                    .iter()
                    .filter(|&&(_, f)| f < 1.0)
                    .map(|&(ns, f)| (ns as f64 / 1e3, 100.0 * (1.0 - f)))
                    .collect(),
                mark: Mark::Line,
            });
        }
    }
    if cdf.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Latency distribution</h3>");
    out.push_str(&charts(&[
        Chart {
            title: "Latency CDF: operations at or below each latency".into(),
            x: Axis::new("latency (microseconds)", Scale::Log10),
            y: Axis::new("% of operations", Scale::Linear).range(Some(0.0), Some(100.0)),
            series: cdf,
        },
        Chart {
            title: "Latency tail: operations slower than each latency".into(),
            x: Axis::new("latency (microseconds)", Scale::Log10),
            y: Axis::new("% of operations slower", Scale::Log10),
            series: tail,
        },
    ]));
    out
}
