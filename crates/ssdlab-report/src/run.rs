//! Plain runs: IOPS and p99 latency over time for every phase, and the summary table.

use ssdlab_core::schema::RunResult;
use ssdlab_core::units::Nanos;

use crate::svg::{Axis, Chart, Mark, Scale, Series, compact};
use crate::{charts, iops_over_time, label, mb_s, table};

pub(crate) fn run(group: &[&RunResult]) -> String {
    let mut iops = Vec::new();
    let mut p99 = Vec::new();
    let mut rows = Vec::new();
    for r in group {
        for (kind, p) in r.phases.iter().enumerate() {
            let name = if group.len() > 1 || r.phases.len() > 1 {
                format!("{} {}", label(r), p.name)
            } else {
                label(r)
            };
            iops.push(Series {
                name: name.clone(),
                points: iops_over_time(p),
                mark: Mark::Line,
                style: crate::result_style(group, r, kind),
            });
            p99.push(Series {
                name: name.clone(),
                points: p
                    .samples
                    .iter()
                    .map(|s| (s.t_s, s.latency_ns_p99 as f64 / 1e3))
                    .collect(),
                mark: Mark::Line,
                style: crate::result_style(group, r, kind),
            });
            let s = &p.summary;
            rows.push(vec![
                name,
                format!("{:.0}", s.iops),
                mb_s(s.bytes_per_s),
                Nanos(s.latency_ns.mean).to_string(),
                Nanos(s.latency_ns.p50 as f64).to_string(),
                Nanos(s.latency_ns.p99 as f64).to_string(),
                Nanos(s.latency_ns.max as f64).to_string(),
                format!("{:.1}", s.qd_mean),
                compact(s.ios as f64),
            ]);
        }
    }
    let header: Vec<String> = ["", "IOPS", "MB/s", "mean", "p50", "p99", "max", "QD", "ios"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut out = charts(&[
        Chart {
            title: "IOPS per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("IOPS", Scale::Linear),
            series: iops,
        },
        Chart {
            title: "p99 latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            series: p99,
        },
    ]);
    out.push_str(&table(&header, &rows));
    out
}

/// How a plain run is shown.
pub(crate) struct Run;

impl crate::views::View for Run {
    type Analysis = ();
    const HEADING: &'static str = "run";
    const MEASURED_PHASES: &'static [&'static str] = &["run"];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        run(group)
    }

    fn figures(result: &ssdlab_core::schema::RunResult, _: &()) -> Vec<crate::figures::Figure> {
        crate::figures::run(result)
    }
}
