//! The test methods' tables as stderr shows them (consistency, TRIM, sweeps, latency, PTS, replay), rendered
//! from the typed analysis as the HTML is, one line a string. It prints nothing itself.

use ssdlab_core::schema::options::SweepAxis;
use ssdlab_core::units::{BinaryBytes, DecimalBytes, DecimalRate, Nanos};

fn mb(bytes_per_s: f64) -> String {
    ssdlab_core::units::Throughput(bytes_per_s).to_string()
}

/// Consistency's table on stderr.
pub fn consistency_lines(a: &ssdlab_core::schema::ConsistencyAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "tested    {} ({}, {}% extra over-provisioning)",
        DecimalBytes(a.tested_bytes as f64),
        BinaryBytes(a.tested_bytes),
        a.op_percent
    );
    say!(out, "plateau   {:.0} IOPS", a.plateau_iops);
    match &a.cliff {
        Some(c) => say!(
            out,
            "cliff     at {:.0} s, after {} written",
            c.t_s,
            DecimalBytes(c.bytes_written as f64)
        ),
        None => say!(
            out,
            "cliff     none found (IOPS never stayed below half the plateau)"
        ),
    }
    say!(
        out,
        "steady    last {} s: mean {:.0} IOPS, standard deviation {:.0}{}",
        a.steady_window_s,
        a.steady_iops_mean,
        a.steady_iops_std_dev,
        a.steady_consistency_ratio
            .map_or(String::new(), |r| format!(", mean/sd {r:.1}"))
    );
    match (a.snia.window_mean, a.snia.range_excursion, a.snia.slope_excursion) {
        (Some(mean), Some(range), Some(slope)) => say!(
            out,
            "SNIA      {} over the last 5 of {} rounds of {} s: mean {mean:.0} IOPS, {}, {}{}",
            if a.snia.achieved {
                "steady state"
            } else {
                "NOT steady"
            },
            a.snia.rounds,
            a.snia.round_s,
            excursion("range", range, 0.20),
            excursion("slope", slope, 0.10),
            a.snia.first_window_start_round.map_or(String::new(), |r| {
                // The schema's index is 0-based; rounds are counted from 1 here as in the charts.
                format!("; first steady window from round {}", r + 1)
            })
        ),
        _ => say!(
            out,
            "SNIA      not assessed: {} rounds of {} s, fewer than 5",
            a.snia.rounds,
            a.snia.round_s
        ),
    }

    out
}

/// Trim's table on stderr.
pub fn trim_lines(a: &ssdlab_core::schema::TrimAnalysis) -> Vec<String> {
    if !(a.discard_supported) {
        return Vec::new();
    }
    let mut out = Vec::new();
    say!(
        out,
        "measured  128 KiB sequential writes, {} per state{}",
        a.measure_s
            .map_or("one pass over the span".to_string(), |s| format!(
                "at most {s:.0} s or one pass"
            )),
        if a.idle_after_trim_s > 0.0 {
            format!("; idle {:.0} s after the TRIM", a.idle_after_trim_s)
        } else {
            String::new()
        }
    );
    // What ran, which a small span cuts short of the time given.
    let ran = |i: usize| match (a.state_seconds, a.state_bytes) {
        (Some(s), Some(b)) => format!("{:.1} s, {}", s[i], DecimalBytes(b[i] as f64)),
        _ => String::new(),
    };
    say!(
        out,
        "{:<10}{:>20}{:>20}{:>20}",
        "",
        "Clean",
        "Dirty",
        "After TRIM"
    );
    say!(
        out,
        "{:<10}{:>20}{:>20}{:>20}",
        "seq write",
        DecimalRate(a.clean_bytes_per_s).to_string(),
        DecimalRate(a.dirty_bytes_per_s).to_string(),
        DecimalRate(a.after_trim_bytes_per_s).to_string()
    );
    if a.state_seconds.is_some() {
        say!(out, "{:<10}{:>20}{:>20}{:>20}", "ran", ran(0), ran(1), ran(2));
    }
    say!(
        out,
        "restored  {:.0}% of clean speed after TRIM",
        100.0 * a.restored_fraction
    );
    say!(
        out,
        "discard   advertised (up to {} at once); TRIMmed blocks read back as zeroes: {}",
        BinaryBytes(a.discard_max_bytes),
        a.trimmed_reads_zero.map_or("not checked".into(), |z| if z {
            "yes".to_string()
        } else {
            "no".into()
        })
    );

    out
}

/// Sweep's table on stderr.
pub fn sweep_lines(a: &ssdlab_core::schema::SweepAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    if a.axis == SweepAxis::Mix {
        let block = a.rows.first().map_or(0, |r| r.transfer_bytes);
        say!(
            out,
            "region    {}, random {} at QD{}, reads from 0% to 100% of operations",
            BinaryBytes(a.region_bytes),
            BinaryBytes(block),
            a.queue_depth
        );
        say!(
            out,
            "{:>10}{:>12}{:>12}{:>12}{:>14}",
            "reads",
            "IOPS",
            "read IOPS",
            "write IOPS",
            "MB/s"
        );
        for r in &a.rows {
            say!(
                out,
                "{:>9}%{:>12.0}{:>12.0}{:>12.0}{:>14.1}{}",
                r.read_percent.unwrap_or(0),
                r.read_iops + r.write_iops,
                r.read_iops,
                r.write_iops,
                (r.read_bytes_per_s + r.write_bytes_per_s) / 1e6,
                partial_mark(r)
            );
        }
        return out;
    }
    let by_qd = a.axis == SweepAxis::Qd;
    if by_qd {
        say!(
            out,
            "region    {}, random, QD 1 to {}",
            BinaryBytes(a.region_bytes),
            a.queue_depth
        );
    } else {
        say!(
            out,
            "region    {} at QD{}",
            BinaryBytes(a.region_bytes),
            a.queue_depth
        );
    }
    say!(
        out,
        "{:>10}{:>14}{:>14}{:>12}{:>12}",
        if by_qd { "QD" } else { "transfer" },
        "write MB/s",
        "read MB/s",
        "write IOPS",
        "read IOPS"
    );
    for r in &a.rows {
        say!(
            out,
            "{:>10}{:>14.1}{:>14.1}{:>12.0}{:>12.0}{}",
            match r.queue_depth {
                Some(qd) if by_qd => qd.to_string(),
                _ => BinaryBytes(r.transfer_bytes).to_string(),
            },
            r.write_bytes_per_s / 1e6,
            r.read_bytes_per_s / 1e6,
            r.write_iops,
            r.read_iops,
            partial_mark(r)
        );
    }
    for s in &a.skipped {
        say!(out, "skipped   {s}");
    }

    out
}

/// "  partial" after a sweep row an interrupt cut short (its figures are over the part that ran).
fn partial_mark(r: &ssdlab_core::schema::SweepRow) -> &'static str {
    if r.partial { "  partial" } else { "" }
}

/// Latency's table on stderr.
pub fn latency_lines(a: &ssdlab_core::schema::LatencyAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "QD1       {:.0} IOPS, {}, maximum latency {}, CPU {:.1}%",
        a.iops,
        mb(a.bytes_per_s),
        Nanos(a.latency_ns_max as f64),
        a.cpu_percent
    );
    say!(
        out,
        "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "25%",
        "median",
        "75%",
        "95%",
        "mean",
        "99%",
        "99.9%"
    );
    say!(
        out,
        "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        Nanos(a.latency_ns_p25 as f64).to_string(),
        Nanos(a.latency_ns_p50 as f64).to_string(),
        Nanos(a.latency_ns_p75 as f64).to_string(),
        Nanos(a.latency_ns_p95 as f64).to_string(),
        Nanos(a.latency_ns_mean).to_string(),
        Nanos(a.latency_ns_p99 as f64).to_string(),
        Nanos(a.latency_ns_p999 as f64).to_string()
    );

    out
}

/// A SNIA PTS steady-state excursion against its limit, said so that it cannot be misread as within it:
/// "slope 10.5% (over its 10% limit)", "range 10.1% (within its 20% limit)". One precision here and in the page.
pub fn excursion(name: &str, share: f64, limit: f64) -> String {
    let verdict = if share <= limit { "within" } else { "over" };
    format!(
        "{name} {:.1}% ({verdict} its {:.0}% limit)",
        100.0 * share,
        100.0 * limit
    )
}

/// The quick set on one screen (within 80 columns): a row per case, read and write side by side, each the
/// repeats' mean with their spread.
pub fn quick_lines(a: &ssdlab_core::schema::quick::QuickAnalysis) -> Vec<String> {
    use ssdlab_core::schema::quick::QuickCase;
    use ssdlab_core::units::{Count, MegabytesPerSecond};
    let mut out = Vec::new();
    let cell = |c: Option<&QuickCase>| -> String {
        let Some(c) = c else {
            return "–".into();
        };
        let spread = match c.bytes_per_s.len() {
            0 | 1 => String::new(),
            _ => format!(" ±{:.1}%", 100.0 * c.relative_spread()),
        };
        match c.sequential {
            // One unit down the column, as CrystalDiskMark shows it: a GB/s beside an MB/s misleads the eye.
            true => format!("{}{spread}", MegabytesPerSecond(c.mean_bytes_per_s())),
            false => format!(
                "{} IOPS {}{spread}",
                Count(c.mean_iops()),
                MegabytesPerSecond(c.mean_bytes_per_s())
            ),
        }
    };
    if a.repeats == 1 {
        say!(
            out,
            "quick     one repeat of {} s over {} (no spread: give --repeats 3 or more to see one)",
            a.runtime_s,
            BinaryBytes(a.span_bytes)
        );
    } else {
        say!(
            out,
            "quick     mean ± sample standard deviation of {} repeats of {} s over {}",
            a.repeats,
            a.runtime_s,
            BinaryBytes(a.span_bytes)
        );
    }
    let mut names: Vec<&str> = a.cases.iter().map(|c| c.name.as_str()).collect();
    names.dedup();
    // As wide as the longest name ("SEQ128K Q32T1" in the NVMe set), and no narrower than the default set's.
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0).max(12);
    say!(out, "{:<width$} {:<32} write", "", "read");
    for name in names {
        let find = |read: bool| a.cases.iter().find(|c| c.name == name && c.read == read);
        say!(
            out,
            "{:<width$} {:<32} {}",
            name,
            cell(find(true)),
            cell(find(false))
        );
    }
    out
}

/// The PTS result on stderr: how it ran, the steady-state determination and the matrix at steady state, test by
/// test (PTS-E's throughput test is two).
pub fn pts_lines(a: &ssdlab_core::schema::pts::PtsAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "PTS       {} {} test over {:.0}% of the device ({}), cells of {} s, QD{}",
        a.flavour.name(),
        a.test.name(),
        a.active_range_percent,
        BinaryBytes(a.active_range_bytes),
        a.cell_s,
        a.first.tracking_cell.queue_depth,
    );
    for t in a.sub_tests() {
        out.extend(pts_sub_test_lines(a, t));
    }
    for s in &a.skipped {
        say!(out, "skipped   {s}");
    }
    for d in &a.departures {
        say!(out, "departs   {d}");
    }
    out
}

/// One PTS sub-test on stderr: what was run, its rounds and steady state, then its matrices.
fn pts_sub_test_lines(
    a: &ssdlab_core::schema::pts::PtsAnalysis,
    t: &ssdlab_core::schema::pts::PtsSubTest,
) -> Vec<String> {
    let mut out = pts_progress_lines(t);
    out.extend(pts_matrix_lines(a.test, t));
    out
}

/// A value of the figure a PTS sub-test tracks, in its unit.
fn pts_tracking(metric: ssdlab_core::schema::pts::PtsMetric, v: f64) -> String {
    use ssdlab_core::schema::pts::PtsMetric;
    match metric {
        PtsMetric::Iops => format!("{v:.0} IOPS"),
        PtsMetric::BytesPerS => mb(v),
        PtsMetric::LatencyNsMean => Nanos(v).to_string(),
    }
}

/// A PTS sub-test's course: its cells, preconditioning and purge, the tracked figure in the first and last
/// rounds, and whether steady state was reached.
fn pts_progress_lines(t: &ssdlab_core::schema::pts::PtsSubTest) -> Vec<String> {
    let mut out = Vec::new();
    let cells = t.rounds.first().map_or(0, |r| r.cells.len());
    say!(
        out,
        "test      {}: {} round(s) of {cells} cells; preconditioned with {}; purge: {}",
        BinaryBytes(t.tracking_cell.block_bytes),
        t.rounds.len(),
        BinaryBytes(t.preconditioning_bytes),
        match (t.purged, t.purge.is_empty()) {
            (_, false) => t.purge.clone(),
            (true, true) => "discard".into(),
            (false, true) => "none".into(),
        }
    );
    let tracking = |v: f64| pts_tracking(t.tracking_metric, v);
    // Each round was said as it ended; the list here keeps to the first and the last.
    if let (Some(first), Some(last)) = (t.rounds.first(), t.rounds.last()) {
        say!(
            out,
            "rounds    {}: {} in round 1, {} in round {}",
            t.rounds.len(),
            tracking(first.tracking),
            tracking(last.tracking),
            last.round
        );
    }
    let st = &t.steady_state;
    match (st.window_first_round, st.window_last_round, st.window_mean) {
        (Some(first), Some(last), Some(mean)) => say!(
            out,
            "steady    {} in rounds {first}-{last}: mean {}, {}, {}",
            if st.achieved { "achieved" } else { "NOT achieved" },
            tracking(mean),
            excursion("range", st.range_excursion.unwrap_or(f64::NAN), 0.20),
            excursion("slope", st.slope_excursion.unwrap_or(f64::NAN), 0.10)
        ),
        _ => say!(
            out,
            "steady    not assessed: {} round(s), fewer than 5",
            t.rounds.len()
        ),
    }
    out
}

/// How one figure of a PTS matrix cell is written.
type PtsFigure = fn(&ssdlab_core::schema::pts::PtsCellResult) -> String;

/// The figures a PTS test reports, each as a matrix of its own: one matrix per figure keeps each within 80
/// columns (the latency test's three figures side by side in one cell ran to 106).
fn pts_figures(test: ssdlab_core::schema::pts::PtsTest) -> Vec<(&'static str, PtsFigure)> {
    use ssdlab_core::schema::pts::PtsTest;
    match test {
        PtsTest::Iops => vec![("IOPS", |c| format!("{:.0}", c.iops))],
        PtsTest::Throughput => vec![("MB/s", |c| format!("{:.1}", c.bytes_per_s / 1e6))],
        PtsTest::Latency => vec![
            ("mean response time", |c| Nanos(c.latency_ns_mean).to_string()),
            ("99.999% response time", |c| {
                c.latency_ns_p99_999
                    .map_or("–".to_string(), |p| Nanos(p as f64).to_string())
            }),
            ("maximum response time", |c| {
                Nanos(c.latency_ns_max as f64).to_string()
            }),
        ],
    }
}

/// A PTS sub-test's matrices over the steady-state window: for each figure `test` reports, a row per block size
/// (largest first) and a column per read/write mix (most reads first).
fn pts_matrix_lines(
    test: ssdlab_core::schema::pts::PtsTest,
    t: &ssdlab_core::schema::pts::PtsSubTest,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut mixes: Vec<u32> = t.matrix.iter().map(|c| c.cell.read_percent).collect();
    mixes.sort_unstable_by(|x, y| y.cmp(x));
    mixes.dedup();
    let mut sizes: Vec<u64> = t.matrix.iter().map(|c| c.cell.block_bytes).collect();
    sizes.sort_unstable_by(|x, y| y.cmp(x));
    sizes.dedup();
    let width = 10;
    for (what, figure) in pts_figures(test) {
        say!(out, "matrix    {what} over the window, by block size and R/W mix");
        let mut header = format!("{:>10}", "block");
        for m in &mixes {
            header.push_str(&format!("{:>width$}", format!("{m}/{}", 100 - m)));
        }
        say!(out, "{header}");
        for &size in &sizes {
            // The block size as the HTML matrix names it: "1 MiB", "512 B".
            let mut line = format!("{:>10}", BinaryBytes(size).to_string());
            for m in &mixes {
                let cell = t
                    .matrix
                    .iter()
                    .find(|c| c.cell.block_bytes == size && c.cell.read_percent == *m);
                line.push_str(&format!("{:>width$}", cell.map_or("–".to_string(), figure)));
            }
            say!(out, "{line}");
        }
    }
    out
}

/// The replay's figures on stderr: what was replayed, the storage bench's two figures, latency and fidelity.
pub fn replay_lines(a: &ssdlab_core::schema::replay::ReplayAnalysis) -> Vec<String> {
    let mut out = replay_run_lines(a);
    out.extend(replay_latency_lines(a));
    match &a.fidelity {
        Some(f) => say!(
            out,
            "fidelity  issued late by: median {}, p99 {}, max {}; {:.2}% more than 1 ms late",
            Nanos(f.late_ns_p50 as f64),
            Nanos(f.late_ns_p99 as f64),
            Nanos(f.late_ns_max as f64),
            100.0 * f.late_over_1ms_ratio
        ),
        None => say!(out, "fidelity  not measured: replayed as fast as possible"),
    }
    out
}

/// What a replay read and replayed (operations, pace, depth, reads and writes) and the storage bench's two
/// figures, average data rate and average service time.
fn replay_run_lines(a: &ssdlab_core::schema::replay::ReplayAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    let gb = |b: u64| format!("{:.2} GB", b as f64 / 1e9);
    say!(
        out,
        "trace     {}: {} operations over {}",
        a.format.name(),
        a.trace_ops,
        Nanos(a.trace_duration_s * 1e9)
    );
    say!(
        out,
        "replayed  {} operations in {:.1} s, {}, at most {} in flight: {} reads ({}), {} writes ({}), {} TRIMs, {} flushes",
        a.replayed_ops,
        a.replay_duration_s,
        if a.as_fast_as_possible {
            "as fast as possible".to_string()
        } else if a.time_scale == 1.0 {
            "at the trace's times".to_string()
        } else {
            format!("at the trace's times x{}", a.time_scale)
        },
        a.queue_depth,
        a.reads,
        gb(a.read_bytes),
        a.writes,
        gb(a.write_bytes),
        a.trims,
        a.flushes
    );
    say!(
        out,
        "bench     average data rate {} over {:.2} s busy; average service time {} (the device's own: {})",
        mb(a.average_data_rate_bytes_per_s),
        a.busy_s,
        Nanos(a.average_service_time_ns),
        a.average_device_time_ns
            .map_or("not measured: no operation completed".to_string(), |ns| Nanos(ns)
                .to_string())
    );
    out
}

/// A replay's latency percentiles as a table: all operations, then reads and writes where they were measured.
fn replay_latency_lines(a: &ssdlab_core::schema::replay::ReplayAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "",
        "25%",
        "median",
        "75%",
        "95%",
        "99%",
        "99.9%",
        "maximum"
    );
    out.push(replay_latency_row("all", &a.latency_ns));
    if let Some(r) = &a.read_latency_ns {
        out.push(replay_latency_row("reads", r));
    }
    if let Some(w) = &a.write_latency_ns {
        out.push(replay_latency_row("writes", w));
    }
    out
}

/// One row of the replay's latency table: `name`, then the quartiles, p95, p99, p99.9 and the maximum.
fn replay_latency_row(name: &str, l: &ssdlab_core::schema::LatencyNs) -> String {
    format!(
        "{name:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        Nanos(l.p25 as f64).to_string(),
        Nanos(l.p50 as f64).to_string(),
        Nanos(l.p75 as f64).to_string(),
        Nanos(l.p95 as f64).to_string(),
        Nanos(l.p99 as f64).to_string(),
        Nanos(l.p999 as f64).to_string(),
        Nanos(l.max as f64).to_string()
    )
}
