//! One tidy CSV per test, one row per point, beside the per-phase series: the sweep's transfer sizes, the TRIM
//! test's three states, the QD1 latency test's one row, the PTS rounds' cells, a scan's files. Columns are named like the JSON fields
//! (documented in docs/result-schema.md). Pure formatting of the typed analysis.

use std::fmt::Write;

pub use crate::views::tidy_csv;

/// Sweep's tidy CSV as (file name, text).
pub(crate) fn sweep(a: &ssdlab_core::schema::SweepAnalysis) -> Option<(&'static str, String)> {
    let mut csv = String::from(
        "transfer_bytes,queue_depth,jobs,write_bytes,write_bytes_per_s,write_iops,read_bytes,read_bytes_per_s,read_iops,read_percent,partial\n",
    );
    for r in &a.rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.1},{:.1},{},{:.1},{:.1},{},{}",
            r.transfer_bytes,
            r.queue_depth.unwrap_or(a.queue_depth),
            a.jobs,
            r.write_bytes,
            r.write_bytes_per_s,
            r.write_iops,
            r.read_bytes,
            r.read_bytes_per_s,
            r.read_iops,
            r.read_percent.map_or(String::new(), |p| p.to_string()),
            r.partial
        );
    }
    Some(("sweep.csv", csv))
}

/// Replay's tidy CSV as (file name, text).
pub(crate) fn replay(a: &ssdlab_core::schema::replay::ReplayAnalysis) -> Option<(&'static str, String)> {
    let mut csv = String::from(
        "format,trace_ops,replayed_ops,reads,writes,trims,flushes,read_bytes,write_bytes,busy_s,\
         average_data_rate_bytes_per_s,average_service_time_ns,average_device_time_ns,latency_ns_p50,latency_ns_p99,latency_ns_max,\
         late_ns_p99,late_over_1ms_ratio\n",
    );
    let _ = writeln!(
        csv,
        "{},{},{},{},{},{},{},{},{},{:.6},{:.1},{:.1},{},{},{},{},{},{}",
        a.format.name(),
        a.trace_ops,
        a.replayed_ops,
        a.reads,
        a.writes,
        a.trims,
        a.flushes,
        a.read_bytes,
        a.write_bytes,
        a.busy_s,
        a.average_data_rate_bytes_per_s,
        a.average_service_time_ns,
        a.average_device_time_ns
            .map_or(String::new(), |t| format!("{t:.1}")),
        a.latency_ns.p50,
        a.latency_ns.p99,
        a.latency_ns.max,
        a.fidelity.map_or(String::new(), |f| f.late_ns_p99.to_string()),
        a.fidelity
            .map_or(String::new(), |f| format!("{:.6}", f.late_over_1ms_ratio))
    );
    Some(("replay.csv", csv))
}

/// Quick's tidy CSV as (file name, text).
pub(crate) fn quick(a: &ssdlab_core::schema::quick::QuickAnalysis) -> Option<(&'static str, String)> {
    // One row per repeat of each case, each with that repeat's own figures; a record from before issue 49 kept
    // no latency per repeat, and its latency cells are empty rather than the case's repeated.
    let mut csv = String::from(
        "case,read,sequential,block_bytes,queue_depth,threads,repeat,bytes_per_s,iops,latency_ns_mean,latency_ns_p99\n",
    );
    for c in &a.cases {
        for (i, (bytes_per_s, iops)) in c.bytes_per_s.iter().zip(&c.iops).enumerate() {
            let mean = c
                .latency_ns_mean_by_repeat
                .get(i)
                .map_or(String::new(), |m| format!("{m:.1}"));
            let p99 = c
                .latency_ns_p99_by_repeat
                .get(i)
                .map_or(String::new(), u64::to_string);
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{bytes_per_s:.1},{iops:.1},{mean},{p99}",
                c.name,
                c.read,
                c.sequential,
                c.block_bytes,
                c.queue_depth,
                c.threads,
                i + 1,
            );
        }
    }
    Some(("quick.csv", csv))
}

/// Pts's tidy CSV as (file name, text).
pub(crate) fn pts(a: &ssdlab_core::schema::pts::PtsAnalysis) -> Option<(&'static str, String)> {
    // Every cell of every round, then the window's averages as round "window", test by test (PTS-E's
    // throughput runs two: 1 and 2).
    let mut csv = String::from(
        "test,round,read_percent,block_bytes,sequential,queue_depth,iops,bytes_per_s,latency_ns_mean,\
         latency_ns_max,latency_ns_p99_999\n",
    );
    let rows = a.sub_tests().enumerate().flat_map(|(i, t)| {
        t.rounds
            .iter()
            .flat_map(move |r| r.cells.iter().map(move |c| (i + 1, r.round.to_string(), c)))
            .chain(t.matrix.iter().map(move |c| (i + 1, "window".to_string(), c)))
    });
    for (test, round, c) in rows {
        let _ = writeln!(
            csv,
            "{test},{round},{},{},{},{},{:.1},{:.1},{:.1},{},{}",
            c.cell.read_percent,
            c.cell.block_bytes,
            c.cell.sequential,
            c.cell.queue_depth,
            c.iops,
            c.bytes_per_s,
            c.latency_ns_mean,
            c.latency_ns_max,
            c.latency_ns_p99_999.map_or(String::new(), |p| p.to_string())
        );
    }
    Some(("pts.csv", csv))
}

/// Trim's tidy CSV as (file name, text).
pub(crate) fn trim(a: &ssdlab_core::schema::TrimAnalysis) -> Option<(&'static str, String)> {
    let mut csv = String::from("state,bytes_per_s,ratio_to_clean\n");
    for (state, bytes_per_s) in [
        ("clean", a.clean_bytes_per_s),
        ("dirty", a.dirty_bytes_per_s),
        ("after-trim", a.after_trim_bytes_per_s),
    ] {
        let ratio = if a.clean_bytes_per_s > 0.0 {
            bytes_per_s / a.clean_bytes_per_s
        } else {
            0.0
        };
        let _ = writeln!(csv, "{state},{bytes_per_s:.1},{ratio:.4}");
    }
    Some(("trim.csv", csv))
}

/// Latency's tidy CSV as (file name, text).
pub(crate) fn latency(a: &ssdlab_core::schema::LatencyAnalysis) -> Option<(&'static str, String)> {
    let mut csv = String::from(
        "span_bytes,iops,bytes_per_s,latency_ns_mean,latency_ns_p25,latency_ns_p50,latency_ns_p75,\
         latency_ns_p95,latency_ns_p99,latency_ns_p999,latency_ns_max,cpu_percent\n",
    );
    let _ = writeln!(
        csv,
        "{},{:.1},{:.1},{:.1},{},{},{},{},{},{},{},{:.2}",
        a.span_bytes,
        a.iops,
        a.bytes_per_s,
        a.latency_ns_mean,
        a.latency_ns_p25,
        a.latency_ns_p50,
        a.latency_ns_p75,
        a.latency_ns_p95,
        a.latency_ns_p99,
        a.latency_ns_p999,
        a.latency_ns_max,
        a.cpu_percent
    );
    Some(("latency.csv", csv))
}

/// Scan's tidy CSV as (file name, text).
pub(crate) fn scan(a: &ssdlab_core::schema::ScanAnalysis) -> Option<(&'static str, String)> {
    Some(("files.csv", files_csv(a)))
}

/// Fanout's tidy CSV as (file name, text).
pub(crate) fn fanout(a: &ssdlab_core::schema::fanout::FanoutAnalysis) -> Option<(&'static str, String)> {
    Some(("drives.csv", drives_csv(a)))
}

/// One row per scanned file, columns named like the JSON fields.
fn files_csv(analysis: &ssdlab_core::schema::ScanAnalysis) -> String {
    let mut csv = String::from("name,device,age_s,bytes,seconds,bytes_per_s,slowdown_ratio,flagged\n");
    for f in &analysis.files {
        csv.push_str(&format!(
            "\"{}\",{},{:.0},{},{:.6},{:.1},{:.3},{}\n",
            f.name.replace('"', "\"\""),
            f.device,
            f.age_s,
            f.bytes,
            f.seconds,
            f.bytes_per_s,
            f.slowdown_ratio,
            f.flagged
        ));
    }
    csv
}

/// One row per drive: its latency columns (nanoseconds, as every other CSV) and its shares of the query's tail.
fn drives_csv(a: &ssdlab_core::schema::fanout::FanoutAnalysis) -> String {
    let mut out = String::from(
        "drive,target,data_age_months,reads,latency_ns_p25,latency_ns_p50,latency_ns_p75,latency_ns_p95,\
         latency_ns_p99,latency_ns_p999,latency_ns_mean,latency_ns_max,share_of_p95_ratio,share_of_p99_ratio\n",
    );
    for d in &a.drives {
        let share = a.stragglers.iter().find(|s| s.name == d.name);
        let l = &d.latency_ns;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{:.1},{},{:.4},{:.4}",
            csv_field(&d.name),
            csv_field(&d.target),
            d.data_age_months.map_or(String::new(), |m| format!("{m:.2}")),
            d.reads,
            l.p25,
            l.p50,
            l.p75,
            l.p95,
            l.p99,
            l.p999,
            l.mean,
            l.max,
            share.map_or(0.0, |s| s.share_of_p95_ratio),
            share.map_or(0.0, |s| s.share_of_p99_ratio),
        );
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};

    #[test]
    fn a_sweep_is_one_row_per_transfer_size() {
        let text = include_str!("../../ssdlab-core/tests/fixtures/ssdlab1/sweep.json");
        let result = RunResult::from_json(text).unwrap();
        let (name, csv) = tidy_csv(&result).unwrap();
        assert_eq!(name, "sweep.csv");
        let Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) = &result.analysis
        else {
            panic!("a sweep")
        };
        assert_eq!(csv.lines().count(), 1 + a.rows.len());
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .starts_with(&a.rows[0].transfer_bytes.to_string())
        );
        // A record from before --jobs ran every point as one job, and its rows say so.
        assert!(
            csv.lines().skip(1).all(|row| row.split(',').nth(2) == Some("1")),
            "{csv}"
        );
        let trim =
            RunResult::from_json(include_str!("../../ssdlab-core/tests/fixtures/ssdlab1/trim.json")).unwrap();
        let (_, csv) = tidy_csv(&trim).unwrap();
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.contains("\nclean,") && csv.contains("\nafter-trim,"));
    }
}
