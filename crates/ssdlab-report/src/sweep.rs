//! The transfer-size sweep section: write and read MB/s against transfer size, and a table per result.

use std::fmt::Write;

use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult, SweepRow};

use crate::svg::{Axis, Chart, Mark, Scale, Series, binary_size};
use crate::{charts, escape, label, mb_s, overlay_prefix, table};

/// One direction's speed in a sweep row.
type Speed = fn(&SweepRow) -> f64;

pub(crate) fn sweep(group: &[&RunResult]) -> String {
    let mut series = Vec::new();
    for r in group {
        let rows = rows_of(r);
        let prefix = overlay_prefix(group, r);
        let directions: [(&str, Speed); 2] = [
            ("write", |row| row.write_bytes_per_s),
            ("read", |row| row.read_bytes_per_s),
        ];
        for (direction, speed) in directions {
            series.push(Series {
                name: format!("{prefix}{direction}"),
                points: rows
                    .iter()
                    .map(|row| (row.transfer_bytes as f64, speed(row) / 1e6))
                    .collect(),
                mark: Mark::LineWithDots,
            });
        }
    }
    let mut out = charts(&[Chart {
        title: "Sequential throughput by transfer size".into(),
        x: Axis::new("transfer size (bytes)", Scale::Log2).format(binary_size),
        y: Axis::new("MB/s", Scale::Linear),
        series,
    }]);
    for r in group {
        let header: Vec<String> = ["transfer", "write MB/s", "read MB/s", "write IOPS", "read IOPS"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let rows: Vec<Vec<String>> = rows_of(r)
            .iter()
            .map(|row| {
                vec![
                    binary_size(row.transfer_bytes as f64),
                    mb_s(row.write_bytes_per_s),
                    mb_s(row.read_bytes_per_s),
                    format!("{:.0}", row.write_iops),
                    format!("{:.0}", row.read_iops),
                ]
            })
            .collect();
        let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        out.push_str(&table(&header, &rows));
    }
    out
}

/// The rows of a sweep result (none when it was stopped before the first size).
fn rows_of(r: &RunResult) -> &[SweepRow] {
    match &r.analysis {
        Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) => &a.rows,
        _ => &[],
    }
}
