//! The QD1 latency section: the field report's percentile columns plus p99 and the maximum, and mean and p99
//! latency per second.

use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::Nanos;

use crate::svg::{Axis, Chart, Mark, Scale};
use crate::{charts, label, mb_s, series_of, table};

pub(crate) fn latency(group: &[&RunResult]) -> String {
    let header: Vec<String> = [
        "", "IOPS", "MB/s", "CPU", "mean", "25%", "median", "75%", "95%", "99%", "maximum",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ns = |v: u64| Nanos(v as f64).to_string();
    let rows: Vec<Vec<String>> = group
        .iter()
        .map(|r| match &r.analysis {
            Analysis::Latency(MethodAnalysis {
                measured: Some(a), ..
            }) => vec![
                label(r),
                format!("{:.0}", a.iops),
                mb_s(a.bytes_per_s),
                format!("{:.1}%", a.cpu_percent),
                Nanos(a.latency_ns_mean).to_string(),
                ns(a.latency_ns_p25),
                ns(a.latency_ns_p50),
                ns(a.latency_ns_p75),
                ns(a.latency_ns_p95),
                ns(a.latency_ns_p99),
                ns(a.latency_ns_max),
            ],
            _ => vec![label(r), "not measured".into()],
        })
        .collect();
    let mut out = table(&header, &rows);
    let mean = series_of(
        group,
        "qd1-random-write",
        |p| {
            p.samples
                .iter()
                .map(|s| (s.t_s, s.latency_ns_mean / 1e3))
                .collect()
        },
        Mark::Line,
    );
    let p99 = series_of(
        group,
        "qd1-random-write",
        |p| {
            p.samples
                .iter()
                .map(|s| (s.t_s, s.latency_ns_p99 as f64 / 1e3))
                .collect()
        },
        Mark::Line,
    );
    out.push_str(&charts(&[
        Chart {
            title: "Mean latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("microseconds", Scale::Log10),
            series: mean,
        },
        Chart {
            title: "p99 latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("microseconds", Scale::Log10),
            series: p99,
        },
    ]));
    out
}
