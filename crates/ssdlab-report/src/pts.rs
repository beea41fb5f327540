//! The SNIA PTS section: the report fields (device, test parameters, rounds, the steady-state verdict), the
//! convergence plot, the steady-state window with its bands and fitted line, and the matrix at steady state as
//! a table and a heat map.

use std::fmt::Write;

use ssdlab_core::schema::pts::{PtsAnalysis, PtsCellResult, PtsMetric, PtsSubTest, PtsTest};
use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::{BinaryBytes, Nanos};

use crate::svg::{self, Axis, Chart, Mark, Scale, Series};
use crate::{charts, escape, label, table, table_with_class};

fn measured(r: &RunResult) -> Option<&PtsAnalysis> {
    match &r.analysis {
        Analysis::Pts(MethodAnalysis {
            measured: Some(a), ..
        }) => Some(a),
        _ => None,
    }
}

/// A block size as the terminal's matrix names it too: "1 MiB", "128 KiB", "512 B".
fn size_name(bytes: u64) -> String {
    ssdlab_core::units::BinaryBytes(bytes).to_string()
}

/// The figure a test's matrix shows: its unit, how it is taken from a cell, and how it reads.
type Figure = (&'static str, fn(&PtsCellResult) -> f64, fn(f64) -> String);

fn figure(test: PtsTest) -> Figure {
    match test {
        PtsTest::Iops => ("IOPS", |c| c.iops, svg::compact),
        PtsTest::Throughput => ("MB/s", |c| c.bytes_per_s / 1e6, |v| format!("{v:.1}")),
        PtsTest::Latency => (
            "mean response time (µs)",
            |c| c.latency_ns_mean / 1e3,
            |v| format!("{v:.0}"),
        ),
    }
}

fn tracking_value(a: &PtsSubTest, v: f64) -> String {
    match a.tracking_metric {
        PtsMetric::Iops => format!("{v:.0} IOPS"),
        PtsMetric::BytesPerS => format!("{:.1} MB/s", v / 1e6),
        PtsMetric::LatencyNsMean => Nanos(v).to_string(),
    }
}

fn tracking_name(a: &PtsSubTest) -> String {
    let c = &a.tracking_cell;
    format!(
        "{} {} {}/{} {}",
        size_name(c.block_bytes),
        if c.sequential { "sequential" } else { "random" },
        c.read_percent,
        100 - c.read_percent,
        match a.tracking_metric {
            PtsMetric::Iops => "IOPS",
            PtsMetric::BytesPerS => "bandwidth",
            PtsMetric::LatencyNsMean => "mean response time",
        }
    )
}

/// One field of the PTS report's header table, from a result and its analysis.
type Field = fn(&RunResult, &PtsAnalysis) -> String;

/// The PTS report's header table (the specification's required report items), one row each: first what was
/// tested.
fn identity_fields() -> [(&'static str, Field); 5] {
    [
        ("test", |_, a| format!("PTS {} test", a.test.name())),
        ("specification", |_, a| {
            let tests = a.sub_tests().map(|t| size_name(t.tracking_cell.block_bytes));
            match a.test {
                PtsTest::Throughput => format!(
                    "{} (throughput at {}, each its own test)",
                    a.flavour.name(),
                    tests.collect::<Vec<_>>().join(" then ")
                ),
                _ => a.flavour.name().to_string(),
            }
        }),
        ("device", |r, a| {
            format!(
                "{} ({}, {} bytes)",
                r.target.model,
                BinaryBytes(a.capacity_bytes),
                a.capacity_bytes
            )
        }),
        ("serial, firmware, write cache", |r, _| {
            let d = &r.target.drive;
            let or_not = |v: &Option<String>| v.clone().unwrap_or_else(|| "not reported".into());
            format!(
                "{}, {}, {}",
                or_not(&d.serial),
                or_not(&d.firmware),
                or_not(&d.write_cache)
            )
        }),
        ("data pattern", |_, a| {
            if a.data_pattern.is_empty() {
                "not recorded".into()
            } else {
                a.data_pattern.clone()
            }
        }),
    ]
}

/// The procedure's report items: purge, preconditioning, range, depth, rounds, steady state, departures.
fn procedure_fields() -> [(&'static str, Field); 11] {
    [
        ("purge", |_, a| per_test(a, purge_text)),
        ("preconditioning", |_, a| {
            per_test(a, |t| {
                format!(
                    "{} of 128 KiB sequential writes",
                    BinaryBytes(t.preconditioning_bytes)
                )
            })
        }),
        ("ActiveRange", |_, a| {
            format!(
                "{:.0}% ({})",
                a.active_range_percent,
                BinaryBytes(a.active_range_bytes)
            )
        }),
        ("outstanding I/O", |_, a| {
            format!("QD{} on one thread", a.first.tracking_cell.queue_depth)
        }),
        ("cell time", |_, a| format!("{} s per cell per round", a.cell_s)),
        ("tracking variable", |_, a| per_test(a, tracking_name)),
        ("rounds", |_, a| {
            per_test(a, |t| {
                format!("{} of at most {}", t.rounds.len(), t.steady_state.max_rounds)
            })
        }),
        ("steady state", |_, a| per_test(a, steady_text)),
        ("departures from the PTS", |_, a| {
            if a.data_pattern.is_empty() {
                "not recorded (a result from before ssdlab listed them)".into()
            } else if a.departures.is_empty() {
                "none: PTS-conforming".into()
            } else {
                a.departures.join("; ")
            }
        }),
        ("skipped", |_, a| {
            if a.skipped.is_empty() {
                "nothing".into()
            } else {
                a.skipped.join("; ")
            }
        }),
        ("reported", |_, a| match a.test {
            PtsTest::Latency => "mean, 99.999th percentile and maximum response time per cell".into(),
            PtsTest::Iops => "IOPS per cell".into(),
            PtsTest::Throughput => "bandwidth per cell".into(),
        }),
    ]
}

pub(crate) fn pts(group: &[&RunResult]) -> String {
    let mut out = String::new();
    // The report fields, one column per result.
    let header: Vec<String> = std::iter::once(String::new())
        .chain(group.iter().map(|r| label(r)))
        .collect();
    let fields = identity_fields().into_iter().chain(procedure_fields());
    let rows: Vec<Vec<String>> = fields
        .map(|(name, field)| {
            std::iter::once(name.to_string())
                .chain(
                    group
                        .iter()
                        .map(|r| measured(r).map_or("not measured".into(), |a| field(r, a))),
                )
                .collect()
        })
        .collect();
    // Text fields: left-aligned like the page's header block.
    out.push_str(&table_with_class("header", &header, &rows));

    for r in group {
        let Some(a) = measured(r) else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        let several = !a.further.is_empty();
        for t in a.sub_tests() {
            if several {
                let _ = write!(
                    out,
                    "<h4>The {} test</h4>",
                    escape(&size_name(t.tracking_cell.block_bytes))
                );
            }
            out.push_str(&sub_test_section(a, t));
        }
    }
    out
}

/// "1024 KiB: X; 128 KiB: Y" for a run of several tests, X alone for one.
fn per_test(a: &PtsAnalysis, field: impl Fn(&PtsSubTest) -> String) -> String {
    if a.further.is_empty() {
        return field(&a.first);
    }
    a.sub_tests()
        .map(|t| format!("{}: {}", size_name(t.tracking_cell.block_bytes), field(t)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn purge_text(t: &PtsSubTest) -> String {
    match (t.purged, t.purge.is_empty()) {
        (_, false) => t.purge.clone(),
        (true, true) => "discard of the whole device".into(),
        (false, true) => "none (not supported): not PTS-conformant".into(),
    }
}

fn steady_text(t: &PtsSubTest) -> String {
    let s = &t.steady_state;
    match (s.window_first_round, s.window_last_round) {
        (Some(first), Some(last)) => format!(
            "{} (measurement window rounds {first}-{last}, mean {}, {}, {})",
            if s.achieved { "achieved" } else { "not achieved" },
            tracking_value(t, s.window_mean.unwrap_or(f64::NAN)),
            crate::text::excursion("range", s.range_excursion.unwrap_or(f64::NAN), 0.20),
            crate::text::excursion("slope", s.slope_excursion.unwrap_or(f64::NAN), 0.10)
        ),
        _ => "not assessed (fewer than 5 rounds)".into(),
    }
}

/// The steady-state measurement window of a test: the tracking variable round by round, its mean, the 20% band
/// around it and the fitted line; None before a window of five rounds exists.
fn window_chart(t: &PtsSubTest) -> Option<Chart> {
    let s = &t.steady_state;
    let (Some(first), Some(last), Some(mean)) = (s.window_first_round, s.window_last_round, s.window_mean)
    else {
        return None;
    };
    let (lo, hi) = (first as f64, last as f64);
    let scale = if t.tracking_metric == PtsMetric::BytesPerS {
        1e-6
    } else if t.tracking_metric == PtsMetric::LatencyNsMean {
        1e-3
    } else {
        1.0
    };
    let tracked: Vec<(f64, f64)> = t
        .rounds
        .iter()
        .filter(|r| (first..=last).contains(&r.round))
        .map(|r| (r.round as f64, r.tracking * scale))
        .collect();
    let window_max = t
        .rounds
        .iter()
        .filter(|r| (first..=last).contains(&r.round))
        .map(|r| r.tracking)
        .fold(0.0, f64::max);
    let flat = |name: &str, v: f64| Series {
        name: name.into(),
        points: vec![(lo, v * scale), (hi, v * scale)],
        mark: Mark::Line,
        style: None,
    };
    let mut series = vec![
        Series {
            name: tracking_name(t),
            points: tracked,
            mark: Mark::LineWithDots,
            style: None,
        },
        flat("window mean", mean),
        Series {
            name: "mean ±10% (the 20% range rule)".into(),
            points: vec![(lo, 0.9 * mean * scale), (hi, 1.1 * mean * scale)],
            mark: Mark::Band,
            style: None,
        },
    ];
    if let (Some(slope), Some(intercept)) = (s.slope_per_round, s.intercept) {
        series.push(Series {
            name: "least-squares fit".into(),
            points: vec![
                (lo, intercept * scale),
                (hi, (intercept + slope * (hi - lo)) * scale),
            ],
            mark: Mark::Line,
            style: None,
        });
    }
    let y_unit = match t.tracking_metric {
        PtsMetric::Iops => "IOPS",
        PtsMetric::BytesPerS => "MB/s",
        PtsMetric::LatencyNsMean => "microseconds",
    };
    Some(Chart {
        title: format!(
            "Steady-state window, rounds {first}-{last}: {}",
            if s.achieved { "achieved" } else { "not achieved" }
        ),
        // Half a round either side, so the first and last rounds' dots are not cut by the frame.
        x: Axis::new("round", Scale::Linear).range(Some(lo - 0.5), Some(hi + 0.5)),
        // Room for the 10% band and for every point of the window, however far a window that did not
        // settle strays.
        y: Axis::new(y_unit, Scale::Linear).range(Some(0.0), Some(1.25 * window_max.max(mean) * scale)),
        series,
    })
}

/// One test's convergence plot, steady-state window and matrix.
fn sub_test_section(a: &PtsAnalysis, t: &PtsSubTest) -> String {
    let mut out = String::new();
    let (unit, value, _) = figure(a.test);
    // Convergence: every write-only cell (all cells of the throughput test) round by round.
    let mut convergence: Vec<Series> = Vec::new();
    if let Some(first) = t.rounds.first() {
        for cell in &first.cells {
            let shown = a.test == PtsTest::Throughput || cell.cell.read_percent == 0;
            if !shown {
                continue;
            }
            let points = t
                .rounds
                .iter()
                .filter_map(|round| {
                    round
                        .cells
                        .iter()
                        .find(|c| c.cell == cell.cell)
                        .map(|c| (round.round as f64, value(c)))
                })
                .collect();
            convergence.push(Series {
                name: format!(
                    "{} {}{}/{}",
                    size_name(cell.cell.block_bytes),
                    if cell.cell.sequential { "seq " } else { "" },
                    cell.cell.read_percent,
                    100 - cell.cell.read_percent
                ),
                points,
                mark: Mark::LineWithDots,
                style: None,
            });
        }
    }
    let mut plots = vec![Chart {
        title: format!("Steady-state convergence: {unit} by round"),
        x: Axis::new("round", Scale::Linear).range(Some(1.0), Some(t.rounds.len().max(2) as f64)),
        y: Axis::new(unit, Scale::Log10),
        series: convergence,
    }];
    // The measurement window: the tracking variable, its mean, the 20% band around it and the fitted line.
    plots.extend(window_chart(t));
    out.push_str(&charts(&plots));
    out.push_str(&matrix_section(a, t));
    out
}

/// The matrix averaged over the measurement window: rows by block size, columns by mix, as a table and a heat map.
fn matrix_section(a: &PtsAnalysis, t: &PtsSubTest) -> String {
    let mut out = String::new();
    let (unit, value, format) = figure(a.test);
    // The matrix at steady state: rows by block size, columns by mix.
    let mut mixes: Vec<u32> = t.matrix.iter().map(|c| c.cell.read_percent).collect();
    mixes.sort_unstable_by(|x, y| y.cmp(x));
    mixes.dedup();
    let mut sizes: Vec<u64> = t.matrix.iter().map(|c| c.cell.block_bytes).collect();
    sizes.sort_unstable_by(|x, y| y.cmp(x));
    sizes.dedup();
    let columns: Vec<String> = mixes.iter().map(|m| format!("{m}/{}", 100 - m)).collect();
    let row_names: Vec<String> = sizes.iter().map(|&b| size_name(b)).collect();
    let grid: Vec<Vec<Option<f64>>> = sizes
        .iter()
        .map(|&b| {
            mixes
                .iter()
                .map(|&m| {
                    t.matrix
                        .iter()
                        .find(|c| c.cell.block_bytes == b && c.cell.read_percent == m)
                        .map(value)
                })
                .collect()
        })
        .collect();
    let mut header = vec![format!("block size \\ R/W ({unit})")];
    header.extend(columns.iter().cloned());
    // The latency test reports the PTS's three figures per cell: mean, 99.999th percentile and maximum
    // response time.
    let tail = |b: u64, m: u32| {
        t.matrix
            .iter()
            .find(|c| c.cell.block_bytes == b && c.cell.read_percent == m)
            .map(|c| {
                let p = c
                    .latency_ns_p99_999
                    .map_or("–".to_string(), |p| Nanos(p as f64).to_string());
                format!("{p} / {}", Nanos(c.latency_ns_max as f64))
            })
    };
    let rows: Vec<Vec<String>> = row_names
        .iter()
        .zip(&grid)
        .zip(&sizes)
        .map(|((name, values), &b)| {
            std::iter::once(name.clone())
                .chain(values.iter().zip(&mixes).map(|(v, &m)| match (v, a.test) {
                    (Some(v), PtsTest::Latency) => {
                        format!("{} / {}", Nanos(*v * 1e3), tail(b, m).unwrap_or_default())
                    }
                    (v, _) => v.map_or("–".into(), format),
                }))
                .collect()
        })
        .collect();
    if a.test == PtsTest::Latency {
        header[0] = "block size \\ R/W (mean / 99.999% / maximum)".into();
    }
    out.push_str(
        "<p>The matrix averaged over the measurement window (maxima: the window's largest; percentiles: from the \
         window's histograms merged):</p>",
    );
    out.push_str(&table(&header, &rows));
    out.push_str("<div class=\"charts\">");
    out.push_str(&svg::heatmap(
        &format!("{unit} at steady state, by block size and R/W mix"),
        "block size",
        "R/W mix (% reads / % writes)",
        &row_names,
        &columns,
        &grid,
        format,
    ));
    out.push_str("</div>");
    out
}

/// How a snia pts result is shown.
pub(crate) struct Pts;

impl crate::views::View for Pts {
    type Analysis = ssdlab_core::schema::pts::PtsAnalysis;
    const HEADING: &'static str = "SNIA PTS: rounds to steady state, and the matrix at steady state";
    const STORY: &'static str = "The SNIA Solid State Storage Performance Test Specification: the drive is purged, preconditioned, then measured round after round until a tracking figure stays within the specification's steady-state window, and the matrix is reported over those rounds. A result that never reached steady state says so; its matrix is not a PTS result.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        pts(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::pts_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::pts(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::pts(analysis)
    }
}
