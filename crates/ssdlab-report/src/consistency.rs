//! The performance-consistency section: IOPS over time (whole run, steady-state zoom, linear, against data
//! written) and the table of plateau, cliff, steady state and the SNIA PTS verdict.

use ssdlab_core::schema::{Analysis, ConsistencyAnalysis, RunResult};
use ssdlab_core::units::BinaryBytes;

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, iops_over_time, label, series_of, table};

/// The performance-consistency section: the charts of IOPS over time, then the table of its figures.
pub(crate) fn consistency(group: &[&RunResult]) -> String {
    let mut out = consistency_charts(group);
    out.push_str(&consistency_table(group));
    out
}

/// IOPS over the whole run (log and linear), from the steady state on, against data written, and the SNIA
/// rounds.
fn consistency_charts(group: &[&RunResult]) -> String {
    let iops = series_of(group, "random-write", iops_over_time, Mark::Dots);
    let zoom_from = steady_zoom_start_s(&iops);
    let zoomed: Vec<Series> = iops
        .iter()
        .map(|s| Series {
            points: s.points.iter().copied().filter(|p| p.0 >= zoom_from).collect(),
            ..s.clone()
        })
        .collect();
    let by_gb = series_of(group, "random-write", iops_by_data_written, Mark::Dots);
    let seconds = Axis::new("time (s)", Scale::Linear);
    charts(&[
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
        snia_rounds(group),
    ])
}

/// Where the steady-state chart starts, in seconds: at 1400 s for a run of the full 2000 s (or nearly), else at
/// 70% of the longest run.
fn steady_zoom_start_s(iops: &[Series]) -> f64 {
    let runtime = iops
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    if runtime > 2000.0 * 0.9 {
        1400.0
    } else {
        (runtime * 0.7).floor()
    }
}

/// A phase's IOPS of each second against the data written up to its end, in GB.
fn iops_by_data_written(p: &ssdlab_core::schema::PhaseResult) -> Vec<(f64, f64)> {
    let mut written = 0u64;
    p.samples
        .iter()
        .map(|s| {
            written += s.bytes;
            (written as f64 / 1e9, s.iops)
        })
        .collect()
}

/// The table of each result's figures: tested span, plateau, cliff, steady state and the SNIA PTS verdict.
fn consistency_table(group: &[&RunResult]) -> String {
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
        figure("steady variation (std dev / mean)", &|a| {
            if a.steady_iops_mean > 0.0 {
                format!("{:.1}%", 100.0 * a.steady_iops_std_dev / a.steady_iops_mean)
            } else {
                "–".into()
            }
        }),
        figure("steady window (s)", &|a| a.steady_window_s.to_string()),
        figure("mean / std dev", &|a| {
            a.steady_consistency_ratio
                .map_or("–".into(), |v| format!("{v:.1}"))
        }),
        figure("SNIA PTS steady state", &|a| snia_verdict(&a.snia)),
    ];
    table(&header, &rows)
}

/// The SNIA PTS steady state in words: achieved or not with its range and slope, or why it was not assessed.
fn snia_verdict(s: &ssdlab_core::schema::SniaSteadyState) -> String {
    match (s.range_excursion, s.slope_excursion) {
        (Some(range), Some(slope)) => format!(
            "{} ({}, {})",
            if s.achieved { "achieved" } else { "not achieved" },
            crate::text::excursion("range", range, 0.20),
            crate::text::excursion("slope", slope, 0.10)
        ),
        _ => format!("not assessed ({} rounds, fewer than 5)", s.rounds),
    }
}

/// The SNIA PTS view of the random writes: IOPS averaged per round, and over the last five rounds (the window
/// the verdict judges) the band of +-10% around their mean (the 20% range rule) with the least-squares line (the
/// slope rule).
fn snia_rounds(group: &[&RunResult]) -> Chart {
    let mut series = Vec::new();
    let mut round_s = 60;
    for r in group {
        let (Some(a), Some(phase)) = (analysis(r), crate::phase(r, "random-write")) else {
            continue;
        };
        round_s = a.snia.round_s.max(1);
        let per_second: Vec<f64> = phase.samples.iter().map(|s| s.iops).collect();
        let rounds: Vec<f64> = per_second
            .chunks_exact(round_s as usize)
            .map(|c| c.iter().sum::<f64>() / c.len() as f64)
            .collect();
        let prefix = crate::overlay_prefix(group, r);
        series.push(Series {
            name: format!("{prefix}round means"),
            points: rounds
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as f64 + 1.0, v))
                .collect(),
            mark: Mark::LineWithDots,
            style: crate::result_style(group, r, 0),
        });
        let Some(start) = rounds.len().checked_sub(5) else {
            continue;
        };
        let window = &rounds[start..];
        let mean = window.iter().sum::<f64>() / 5.0;
        let (first, last) = (start as f64 + 1.0, start as f64 + 5.0);
        series.push(Series {
            name: format!(
                "{prefix}window mean ±10% ({})",
                if a.snia.achieved { "steady" } else { "not steady" }
            ),
            points: vec![(first, 0.9 * mean), (last, 1.1 * mean)],
            mark: Mark::Band,
            style: crate::result_style(group, r, 0),
        });
        let xs: Vec<f64> = (0..5).map(|i| i as f64).collect();
        if let Some(line) = ssdlab_core::stats::least_squares(&xs, window) {
            series.push(Series {
                name: format!("{prefix}least-squares fit"),
                points: vec![(first, line.intercept), (last, line.intercept + 4.0 * line.slope)],
                mark: Mark::Line,
                style: crate::result_style(group, r, 1),
            });
        }
    }
    Chart {
        title: format!("SNIA PTS steady state: IOPS per {round_s}-second round, the last five judged"),
        x: Axis::new("round", Scale::Linear),
        y: Axis::new("IOPS", Scale::Linear).range(Some(0.0), None),
        series,
    }
}

/// The consistency figures of a result, when it measured them.
pub(crate) fn analysis(r: &RunResult) -> Option<&ConsistencyAnalysis> {
    match &r.analysis {
        Analysis::Consistency(m) => m.measured.as_ref(),
        _ => None,
    }
}

/// How a performance consistency result is shown.
pub(crate) struct Consistency;

impl crate::views::View for Consistency {
    type Analysis = ssdlab_core::schema::ConsistencyAnalysis;
    const HEADING: &'static str = "Performance consistency: 4 KiB random writes at QD32";
    const STORY: &'static str = "Sustained 4 KiB random writes at QD32 on a drive filled first, as AnandTech's performance-consistency test runs them: the IOPS of every second. The drive starts fast while its SLC cache and free blocks last, falls off a cliff when garbage collection begins, and settles into the steady state it can hold. A consistent drive's steady state is a narrow band, not a scatter.";
    const MEASURED_PHASES: &'static [&'static str] = &["random-write"];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        consistency(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::consistency_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::consistency(analysis)
    }
}
