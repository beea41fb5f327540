//! Plain runs: IOPS and p99 latency over time for every phase, and the summary table.

use ssdlab_core::schema::{DirectionSummary, PhaseResult, RunResult, Sample, Summary};
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
            let style = crate::result_style(group, r, kind);
            let (i, l) = phase_series(&name, p, style);
            iops.extend(i);
            p99.extend(l);
            rows.extend(phase_rows(name, &p.summary));
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
    const HEADING: &'static str = "Runs: IOPS and latency second by second";
    const STORY: &'static str = "A workload run as given (fio's options): the rate and the 99th-percentile latency of every second, then the summary. A flat line is a drive that holds its speed; dips and spikes are where the drive paused (garbage collection, a full cache). A workload that both read and wrote is shown a direction at a time.";
    const MEASURED_PHASES: &'static [&'static str] = &["run"];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        run(group)
    }

    fn figures(result: &ssdlab_core::schema::RunResult, _: &()) -> Vec<crate::figures::Figure> {
        crate::figures::run(result)
    }
}

/// Whether a phase both read and wrote: it is drawn and tabled a direction at a time, as fio-plot draws fio's
/// per-direction logs, since a combined line would hide a write stall behind steady reads.
fn mixed(summary: &Summary) -> bool {
    summary.read.is_some() && summary.write.is_some()
}

/// The phase's IOPS and p99 series: one each, or one per direction for a mixed phase whose samples keep them
/// (records from before samples kept directions are drawn combined).
fn phase_series(name: &str, p: &PhaseResult, style: Option<(usize, usize)>) -> (Vec<Series>, Vec<Series>) {
    if !(mixed(&p.summary) && p.samples.iter().any(|s| s.read.is_some())) {
        let iops = Series {
            name: name.to_string(),
            points: iops_over_time(p),
            mark: Mark::Line,
            style,
        };
        let p99 = Series {
            name: name.to_string(),
            points: p
                .samples
                .iter()
                .map(|s| (s.t_s, s.latency_ns_p99 as f64 / 1e3))
                .collect(),
            mark: Mark::Line,
            style,
        };
        return (vec![iops], vec![p99]);
    }
    let mut iops = Vec::new();
    let mut p99 = Vec::new();
    for (d, direction) in ["read", "write"].into_iter().enumerate() {
        let of = |s: &Sample| if d == 0 { s.read.clone() } else { s.write.clone() };
        let style = style.map(|(colour, k)| (colour, k + d));
        iops.push(Series {
            name: format!("{name} {direction}"),
            points: p
                .samples
                .iter()
                .filter_map(|s| of(s).map(|x| (s.t_s, x.iops)))
                .collect(),
            mark: Mark::Line,
            style,
        });
        // A second in which the direction completed nothing has no latency: no point, not a zero.
        p99.push(Series {
            name: format!("{name} {direction}"),
            points: p
                .samples
                .iter()
                .filter_map(|s| of(s)?.latency_ns.map(|l| (s.t_s, l.p99 as f64 / 1e3)))
                .collect(),
            mark: Mark::Line,
            style,
        });
    }
    (iops, p99)
}

/// The phase's rows of the summary table: read, write and total for a mixed phase, one row otherwise.
fn phase_rows(name: String, s: &Summary) -> Vec<Vec<String>> {
    let row = |name: String, d: &DirectionSummary, qd: String| {
        vec![
            name,
            format!("{:.0}", d.iops),
            mb_s(d.bytes_per_s),
            Nanos(d.latency_ns.mean).to_string(),
            Nanos(d.latency_ns.p50 as f64).to_string(),
            Nanos(d.latency_ns.p99 as f64).to_string(),
            Nanos(d.latency_ns.max as f64).to_string(),
            qd,
            compact(d.ios as f64),
        ]
    };
    let mut rows = Vec::new();
    if mixed(s) {
        for (direction, d) in [("read", &s.read), ("write", &s.write)] {
            if let Some(d) = d {
                rows.push(row(format!("{name} {direction}"), d, String::new()));
            }
        }
    }
    let name = if mixed(s) { format!("{name} total") } else { name };
    rows.push(row(name, &s.total(), format!("{:.1}", s.qd_mean)));
    rows
}
