//! The performance-consistency section: IOPS over time (whole run, steady-state zoom, linear, against data
//! written) and the table of plateau, cliff, steady state and the SNIA PTS verdict.

use ssdlab_core::schema::{Analysis, ConsistencyAnalysis, RunResult};
use ssdlab_core::units::BinaryBytes;

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, iops_over_time, label, series_of, table};

pub(crate) fn consistency(group: &[&RunResult]) -> String {
    let iops = series_of(group, "random-write", iops_over_time, Mark::Dots);
    let runtime = iops
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let zoom_from = if runtime > 2000.0 * 0.9 {
        1400.0
    } else {
        (runtime * 0.7).floor()
    };
    let zoomed: Vec<Series> = iops
        .iter()
        .map(|s| Series {
            points: s.points.iter().copied().filter(|p| p.0 >= zoom_from).collect(),
            ..s.clone()
        })
        .collect();
    let by_gb = series_of(
        group,
        "random-write",
        |p| {
            let mut written = 0u64;
            p.samples
                .iter()
                .map(|s| {
                    written += s.bytes;
                    (written as f64 / 1e9, s.iops)
                })
                .collect()
        },
        Mark::Dots,
    );
    let seconds = Axis::new("time (s)", Scale::Linear);
    let mut out = charts(&[
        Chart {
            title: "IOPS over the whole run (log scale)".into(),
            x: seconds.clone(),
            y: Axis::new("IOPS", Scale::Log10),
            series: iops.clone(),
        },
        Chart {
            title: format!("Steady state from t = {zoom_from:.0} s (log scale)"),
            x: seconds.clone().range(Some(zoom_from), None),
            y: Axis::new("IOPS", Scale::Log10),
            series: zoomed,
        },
        Chart {
            title: "IOPS, linear scale up to 40K".into(),
            x: seconds,
            y: Axis::new("IOPS", Scale::Linear).range(Some(0.0), Some(40_000.0)),
            series: iops,
        },
        Chart {
            title: "IOPS against data written".into(),
            x: Axis::new("GB written", Scale::Linear),
            y: Axis::new("IOPS", Scale::Log10),
            series: by_gb,
        },
    ]);
    let mut header = vec![String::new()];
    header.extend(group.iter().map(|r| label(r)));
    let figure = |name: &str, f: &dyn Fn(&ConsistencyAnalysis) -> String| -> Vec<String> {
        let mut row = vec![name.to_string()];
        row.extend(group.iter().map(|r| analysis(r).map_or("–".into(), f)));
        row
    };
    let rows = vec![
        figure("tested span", &|a| BinaryBytes(a.tested_bytes).to_string()),
        figure("initial plateau (IOPS)", &|a| format!("{:.0}", a.plateau_iops)),
        figure("write cliff", &|a| match &a.cliff {
            Some(c) => format!("{:.0} s, {:.2} GB written", c.t_s, c.bytes_written as f64 / 1e9),
            None => "none found".into(),
        }),
        figure("steady mean (IOPS)", &|a| format!("{:.0}", a.steady_iops_mean)),
        figure("steady std dev (IOPS)", &|a| {
            format!("{:.0}", a.steady_iops_std_dev)
        }),
        figure("steady window (s)", &|a| a.steady_window_s.to_string()),
        figure("mean / std dev", &|a| {
            a.steady_consistency_ratio
                .map_or("–".into(), |v| format!("{v:.1}"))
        }),
        figure("SNIA PTS steady state", &|a| {
            let s = &a.snia;
            match (s.range_excursion, s.slope_excursion) {
                (Some(range), Some(slope)) => format!(
                    "{} (range {:.1}%, slope {:.1}%)",
                    if s.achieved { "achieved" } else { "not achieved" },
                    100.0 * range,
                    100.0 * slope
                ),
                _ => format!("not assessed ({} rounds, fewer than 5)", s.rounds),
            }
        }),
    ];
    out.push_str(&table(&header, &rows));
    out
}

/// The consistency figures of a result, when it measured them.
pub(crate) fn analysis(r: &RunResult) -> Option<&ConsistencyAnalysis> {
    match &r.analysis {
        Analysis::Consistency(m) => m.measured.as_ref(),
        _ => None,
    }
}
