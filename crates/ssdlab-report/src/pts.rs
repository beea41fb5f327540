//! The SNIA PTS section: the report fields (device, test parameters, rounds, the steady-state verdict), the
//! convergence plot, the steady-state window with its bands and fitted line, and the matrix at steady state as
//! a table and a heat map.

use std::fmt::Write;

use ssdlab_core::schema::pts::{PtsAnalysis, PtsCellResult, PtsMetric, PtsTest};
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

fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1024 && b.is_multiple_of(1024) => format!("{} KiB", b / 1024),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}

/// The figure a test's matrix shows: its unit, how it is taken from a cell, and how it reads.
type Figure = (&'static str, fn(&PtsCellResult) -> f64, fn(f64) -> String);

fn figure(test: PtsTest) -> Figure {
    match test {
        PtsTest::Iops => ("IOPS", |c| c.iops, svg::compact),
        PtsTest::Throughput => ("MB/s", |c| c.bytes_per_s / 1e6, |v| format!("{v:.1}")),
        PtsTest::Latency => (
            "mean response time (us)",
            |c| c.latency_ns_mean / 1e3,
            |v| format!("{v:.0}"),
        ),
    }
}

fn tracking_value(a: &PtsAnalysis, v: f64) -> String {
    match a.tracking_metric {
        PtsMetric::Iops => format!("{v:.0} IOPS"),
        PtsMetric::BytesPerS => format!("{:.1} MB/s", v / 1e6),
        PtsMetric::LatencyNsMean => Nanos(v).to_string(),
    }
}

fn tracking_name(a: &PtsAnalysis) -> String {
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

pub(crate) fn pts(group: &[&RunResult]) -> String {
    let mut out = String::new();
    // The report fields, one column per result.
    let header: Vec<String> = std::iter::once(String::new())
        .chain(group.iter().map(|r| label(r)))
        .collect();
    type Field = fn(&RunResult, &PtsAnalysis) -> String;
    let fields: [(&str, Field); 11] = [
        ("test", |_, a| format!("PTS {} test", a.test.name())),
        ("device", |r, a| {
            format!(
                "{} ({}, {} bytes)",
                r.target.model,
                BinaryBytes(a.capacity_bytes),
                a.capacity_bytes
            )
        }),
        ("purge", |_, a| {
            if a.purged {
                "discard of the whole device".into()
            } else {
                "none (not supported): not PTS-conformant".into()
            }
        }),
        ("preconditioning", |_, a| {
            format!(
                "{} of 128 KiB sequential writes",
                BinaryBytes(a.preconditioning_bytes)
            )
        }),
        ("ActiveRange", |_, a| {
            format!(
                "{:.0}% ({})",
                a.active_range_percent,
                BinaryBytes(a.active_range_bytes)
            )
        }),
        ("outstanding I/O", |_, a| {
            format!("QD{} on one thread", a.tracking_cell.queue_depth)
        }),
        ("cell time", |_, a| format!("{} s per cell per round", a.cell_s)),
        ("tracking variable", |_, a| tracking_name(a)),
        ("rounds", |_, a| {
            format!("{} of at most {}", a.rounds.len(), a.steady_state.max_rounds)
        }),
        ("steady state", |_, a| {
            let s = &a.steady_state;
            match (s.window_first_round, s.window_last_round) {
                (Some(first), Some(last)) => format!(
                    "{} (measurement window rounds {first}-{last}, mean {}, range {:.1}% of 20%, slope {:.1}% of 10%)",
                    if s.achieved { "achieved" } else { "not achieved" },
                    tracking_value(a, s.window_mean.unwrap_or(f64::NAN)),
                    100.0 * s.range_excursion.unwrap_or(f64::NAN),
                    100.0 * s.slope_excursion.unwrap_or(f64::NAN)
                ),
                _ => "not assessed (fewer than 5 rounds)".into(),
            }
        }),
        ("skipped", |_, a| {
            if a.skipped.is_empty() {
                "nothing".into()
            } else {
                a.skipped.join("; ")
            }
        }),
    ];
    let rows: Vec<Vec<String>> = fields
        .iter()
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
        let (unit, value, format) = figure(a.test);
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        // Convergence: every write-only cell (all cells of the throughput test) round by round.
        let mut convergence: Vec<Series> = Vec::new();
        if let Some(first) = a.rounds.first() {
            for cell in &first.cells {
                let shown = a.test == PtsTest::Throughput || cell.cell.read_percent == 0;
                if !shown {
                    continue;
                }
                let points = a
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
            x: Axis::new("round", Scale::Linear).range(Some(1.0), Some(a.rounds.len().max(2) as f64)),
            y: Axis::new(unit, Scale::Log10),
            series: convergence,
        }];
        // The measurement window: the tracking variable, its mean, the 20% band around it and the fitted line.
        let s = &a.steady_state;
        if let (Some(first), Some(last), Some(mean)) =
            (s.window_first_round, s.window_last_round, s.window_mean)
        {
            let (lo, hi) = (first as f64, last as f64);
            let scale = if a.tracking_metric == PtsMetric::BytesPerS {
                1e-6
            } else if a.tracking_metric == PtsMetric::LatencyNsMean {
                1e-3
            } else {
                1.0
            };
            let tracked: Vec<(f64, f64)> = a
                .rounds
                .iter()
                .filter(|r| (first..=last).contains(&r.round))
                .map(|r| (r.round as f64, r.tracking * scale))
                .collect();
            let flat = |name: &str, v: f64| Series {
                name: name.into(),
                points: vec![(lo, v * scale), (hi, v * scale)],
                mark: Mark::Line,
                style: None,
            };
            let mut series = vec![
                Series {
                    name: tracking_name(a),
                    points: tracked,
                    mark: Mark::LineWithDots,
                    style: None,
                },
                flat("window mean", mean),
                Series {
                    name: "mean +-10% (the 20% range rule)".into(),
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
            let y_unit = match a.tracking_metric {
                PtsMetric::Iops => "IOPS",
                PtsMetric::BytesPerS => "MB/s",
                PtsMetric::LatencyNsMean => "microseconds",
            };
            plots.push(Chart {
                title: format!(
                    "Steady-state window, rounds {first}-{last}: {}",
                    if s.achieved { "achieved" } else { "not achieved" }
                ),
                x: Axis::new("round", Scale::Linear).range(Some(lo), Some(hi)),
                y: Axis::new(y_unit, Scale::Linear).range(Some(0.0), Some(1.25 * mean * scale)),
                series,
            });
        }
        out.push_str(&charts(&plots));

        // The matrix at steady state: rows by block size, columns by mix.
        let mut mixes: Vec<u32> = a.matrix.iter().map(|c| c.cell.read_percent).collect();
        mixes.sort_unstable_by(|x, y| y.cmp(x));
        mixes.dedup();
        let mut sizes: Vec<u64> = a.matrix.iter().map(|c| c.cell.block_bytes).collect();
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
                        a.matrix
                            .iter()
                            .find(|c| c.cell.block_bytes == b && c.cell.read_percent == m)
                            .map(value)
                    })
                    .collect()
            })
            .collect();
        let mut header = vec![format!("block size \\ R/W ({unit})")];
        header.extend(columns.iter().cloned());
        // The latency test reports the PTS's two figures per cell: mean and maximum response time.
        let maximum = |b: u64, m: u32| {
            a.matrix
                .iter()
                .find(|c| c.cell.block_bytes == b && c.cell.read_percent == m)
                .map(|c| Nanos(c.latency_ns_max as f64).to_string())
        };
        let rows: Vec<Vec<String>> = row_names
            .iter()
            .zip(&grid)
            .zip(&sizes)
            .map(|((name, values), &b)| {
                std::iter::once(name.clone())
                    .chain(values.iter().zip(&mixes).map(|(v, &m)| match (v, a.test) {
                        (Some(v), PtsTest::Latency) => {
                            format!("{} / {}", Nanos(*v * 1e3), maximum(b, m).unwrap_or_default())
                        }
                        (v, _) => v.map_or("–".into(), format),
                    }))
                    .collect()
            })
            .collect();
        if a.test == PtsTest::Latency {
            header[0] = "block size \\ R/W (mean / maximum)".into();
        }
        out.push_str(
            "<p>The matrix averaged over the measurement window (maxima: the window's largest):</p>",
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
    }
    out
}
