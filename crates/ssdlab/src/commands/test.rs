//! `ssdlab test consistency|trim|sweep|latency`: the methodologies, with tables on stderr, JSON Lines on
//! stdout and a result directory with report.html.

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{MethodOptions, RunOptions, TestOptions};
use ssdlab_core::schema::{Analysis, Event, MethodAnalysis, RunResult, SCHEMA};
use ssdlab_core::units::{BinaryBytes, Nanos, rfc3339_utc};
use ssdlab_methods::consistency::{self, ConsistencyOptions};
use ssdlab_methods::latency::{self, LatencyOptions, LatencyRw};
use ssdlab_methods::pts::{self, PtsOptions, PtsTest};
use ssdlab_methods::replay::{self, TraceInput};
use ssdlab_methods::sweep::{self, SweepAxis, SweepOptions};
use ssdlab_methods::trim::{self, TrimOptions};
use ssdlab_methods::{MethodError, MethodOutcome, Session};

use super::Outcome;
use crate::cli::{
    LatencyRwArg, PtsTestArg, ReplayFitArg, SweepAxisArg, TestCommand, TestCommon, TraceFormatArg,
};
use crate::output::{self, Reporter};
use crate::plan::{self, duration_flag, size_flag};

pub fn run(command: &TestCommand) -> Result<Outcome> {
    match command {
        TestCommand::Consistency(args) => {
            let options = ConsistencyOptions {
                runtime_ns: duration_flag("runtime", &args.runtime)?,
                op_percent: args.op,
                fill_passes: args.fill_passes,
                ..ConsistencyOptions::default()
            };
            if options.runtime_ns < 1_000_000_000 {
                bail!(
                    "--runtime {}: run the random writes for at least 1s",
                    args.runtime
                );
            }
            if args.op >= 100 {
                bail!(
                    "--op {}: the extra over-provisioning must be below 100 (percent of the LBAs left untested)",
                    args.op
                );
            }
            if args.fill_passes == 0 {
                bail!("--fill-passes 0: fill at least once");
            }
            execute(
                &args.common,
                "consistency",
                MethodOptions::Consistency(options),
                plan::Use::Writes,
                |s| consistency::consistency(s, &options),
            )
        }
        TestCommand::Trim(args) => {
            let measure_ns = match args.measure.as_str() {
                "full" => None,
                value => {
                    let ns = duration_flag("measure", value)
                        .map_err(|e| anyhow!("{e}; or write 'full' for a whole pass"))?;
                    if ns < 1_000_000_000 {
                        bail!(
                            "--measure {value}: measure for at least a second, e.g. --measure 60s, or 'full'"
                        );
                    }
                    Some(ns)
                }
            };
            let options = TrimOptions {
                torture_ns: duration_flag("torture", &args.torture)?,
                measure_ns,
                idle_ns: args
                    .idle
                    .as_deref()
                    .map(|v| duration_flag("idle", v))
                    .transpose()?
                    .unwrap_or(0),
                ..TrimOptions::default()
            };
            if options.torture_ns == 0 {
                bail!("--torture 0: torture for at least a moment, e.g. --torture 30s");
            }
            execute(
                &args.common,
                "trim",
                MethodOptions::Trim(options),
                plan::Use::Writes,
                |s| trim::trim(s, &options),
            )
        }
        TestCommand::Sweep(args) => {
            let axis = match args.axis {
                SweepAxisArg::Size => SweepAxis::Size,
                SweepAxisArg::Qd => SweepAxis::Qd,
                SweepAxisArg::Mix => SweepAxis::Mix,
            };
            if axis == SweepAxis::Size && (args.bs.is_some() || args.max_qd.is_some()) {
                bail!(
                    "--bs and --max-qd shape a queue-depth or mix sweep: add --axis qd or mix, or leave them out"
                );
            }
            if axis == SweepAxis::Mix && args.max_qd.is_some() {
                bail!("--max-qd shapes a queue-depth sweep; a mix sweep runs at --qd");
            }
            let max_queue_depth = args.max_qd.unwrap_or(256);
            if !(1..=1024).contains(&max_queue_depth) {
                bail!("--max-qd {max_queue_depth}: between 1 and 1024");
            }
            let options = SweepOptions {
                test_bytes: size_flag("test-size", &args.test_size)?,
                queue_depth: args.qd,
                from_bytes: size_flag("from", &args.from)?,
                to_bytes: size_flag("to", &args.to)?,
                size_runtime_ns: duration_flag("size-runtime", &args.size_runtime)?,
                axis,
                block_bytes: size_flag("bs", args.bs.as_deref().unwrap_or("4k"))?,
                max_queue_depth,
            };
            if !(1..=1024).contains(&args.qd) {
                bail!("--qd {}: queue depth must be between 1 and 1024", args.qd);
            }
            if options.from_bytes < 512
                || options.to_bytes > 64 << 20
                || options.from_bytes > options.to_bytes
            {
                bail!(
                    "--from {} --to {}: sizes run from 512 B to 64 MiB, smaller first",
                    args.from,
                    args.to
                );
            }
            if options.test_bytes == 0 || options.size_runtime_ns == 0 {
                bail!("--test-size and --size-runtime must be above zero");
            }
            execute(
                &args.common,
                "sweep",
                MethodOptions::Sweep(options),
                plan::Use::Writes,
                |s| sweep::sweep(s, &options),
            )
        }
        TestCommand::Latency(args) => {
            let options = LatencyOptions {
                span_bytes: size_flag("span", &args.span)?,
                runtime_ns: duration_flag("runtime", &args.runtime)?,
                rw: match args.rw {
                    LatencyRwArg::Randwrite => LatencyRw::RandWrite,
                    LatencyRwArg::Randread => LatencyRw::RandRead,
                    LatencyRwArg::Read => LatencyRw::Read,
                    LatencyRwArg::Write => LatencyRw::Write,
                    LatencyRwArg::Randrw => LatencyRw::RandRw,
                },
            };
            if options.span_bytes < 4096 {
                bail!("--span {}: at least 4k", args.span);
            }
            if options.runtime_ns == 0 {
                bail!("--runtime 0: run for at least a moment");
            }
            // Reads only read: a real device needs no --allow-destroy for them.
            let usage = if options.rw.writes() {
                plan::Use::Writes
            } else {
                plan::Use::Reads
            };
            execute(
                &args.common,
                "latency",
                MethodOptions::Latency(options),
                usage,
                |s| latency::latency(s, &options),
            )
        }
        TestCommand::Replay(args) => {
            use ssdlab_core::schema::replay::{ReplayFit, ReplayOptions, TraceFormat};
            if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
                bail!(
                    "--time-scale {}: a factor above 0 (0.5 replays twice as fast, 2 half as fast)",
                    args.time_scale
                );
            }
            if !(1..=1024).contains(&args.qd) {
                bail!("--qd {}: between 1 and 1024 operations in flight", args.qd);
            }
            let shown = args.trace.display();
            // Read line by line: a trace of millions of operations is kept as its operations, never as text.
            let file = crate::inputs::open(&format!("--trace {shown}"), &args.trace)?;
            let format = args.format.map(|f| match f {
                TraceFormatArg::FioIolog => TraceFormat::FioIolog,
                TraceFormatArg::Blkparse => TraceFormat::Blkparse,
                TraceFormatArg::Msr => TraceFormat::Msr,
            });
            let trace = ssdlab_trace::read_from(
                std::io::BufReader::with_capacity(1 << 20, file),
                format,
                ssdlab_trace::ReadOptions { msr_disk: args.disk },
            )
            .map_err(|e| anyhow!("--trace {shown}: {e}"))?;
            if args.disk.is_some() && trace.format != TraceFormat::Msr {
                bail!(
                    "--disk chooses a disk of an MSR trace; {shown} is {}",
                    trace.format.name()
                );
            }
            let options = ReplayOptions {
                trace: shown.to_string(),
                format: trace.format,
                time_scale: args.time_scale,
                as_fast_as_possible: args.as_fast_as_possible,
                queue_depth: args.qd,
                fit: match args.fit {
                    ReplayFitArg::Fold => ReplayFit::Fold,
                    ReplayFitArg::Scale => ReplayFit::Scale,
                },
                msr_disk: args.disk,
            };
            // A trace of reads alone (and flushes) opens a real device read-only.
            let writes = trace
                .ops
                .iter()
                .any(|o| matches!(o.op, ssdlab_core::Op::Write | ssdlab_core::Op::Discard));
            let usage = if writes {
                plan::Use::Writes
            } else {
                plan::Use::Reads
            };
            let input = TraceInput {
                format: trace.format,
                ops: trace.ops,
                notes: trace.notes,
            };
            execute(
                &args.common,
                "replay",
                MethodOptions::Replay(options.clone()),
                usage,
                |s| replay::replay(s, input, &options),
            )
        }
        TestCommand::Pts(args) => {
            let options = pts_options(args)?;
            execute(
                &args.common,
                "pts",
                MethodOptions::Pts(options),
                plan::Use::Writes,
                |s| pts::pts(s, &options),
            )
        }
    }
}

fn pts_options(args: &crate::cli::PtsArgs) -> Result<PtsOptions> {
    let options = PtsOptions {
        test: match args.test {
            PtsTestArg::Iops => PtsTest::Iops,
            PtsTestArg::Throughput => PtsTest::Throughput,
            PtsTestArg::Latency => PtsTest::Latency,
        },
        cell_ns: duration_flag("round-time", &args.round_time)?,
        active_range_percent: args.span,
        queue_depth: args.qd.unwrap_or(32),
        max_rounds: args.max_rounds,
        ..PtsOptions::default()
    };
    if options.cell_ns < 100_000_000 {
        bail!(
            "--round-time {}: run each cell for at least 100ms (the PTS runs a minute)",
            args.round_time
        );
    }
    if !(args.span > 0.0 && args.span <= 100.0) {
        bail!(
            "--span {}: the ActiveRange is a percentage above 0 and at most 100",
            args.span
        );
    }
    if let Some(qd) = args.qd {
        if options.test == PtsTest::Latency {
            bail!("--qd {qd}: the PTS latency test runs at QD1 by definition; leave --qd out");
        }
        if !(1..=1024).contains(&qd) {
            bail!("--qd {qd}: queue depth must be between 1 and 1024");
        }
    }
    if !(5..=1000).contains(&args.max_rounds) {
        bail!(
            "--max-rounds {}: between 5 (one steady-state window) and 1000; the PTS allows 25",
            args.max_rounds
        );
    }
    Ok(options)
}

fn execute(
    common: &TestCommon,
    kind: &str,
    options: MethodOptions,
    usage: plan::Use,
    method: impl FnOnce(Session<'_>) -> Result<MethodOutcome, MethodError>,
) -> Result<Outcome> {
    if let Some(dir) = &common.out {
        output::prepare_out_dir(dir)?;
    }
    let opened = plan::open_target(&common.target, usage)?;
    let (mut device, before) = (opened.device, opened.undo);
    let info = device.info().clone();
    let unix_s = output::unix_now_s();
    let started_at = rfc3339_utc(unix_s);
    let options = RunOptions::Test(TestOptions {
        target: common.target.recorded(),
        seed: common.seed,
        method: options,
    });
    eprintln!("ssdlab    test {kind}");
    output::print_target(&info);
    let mut reporter = Reporter::new(common.json);
    reporter.emit(&Event::Begin {
        kind: kind.into(),
        target: info.clone(),
        options: options.clone(),
        started_at: started_at.clone(),
    })?;
    let outcome = match method(Session::new(&mut device, &mut reporter, common.seed)) {
        Ok(outcome) => outcome,
        Err(MethodError::Device(e)) => {
            return Err(anyhow!(e)).context(format!("test {kind} on {}", info.target));
        }
        Err(e) => {
            // Refused before measuring anything: undo a file target's creation or extension.
            drop(device);
            before.restore();
            return Err(anyhow!("test {kind}: {e}"));
        }
    };
    print_analysis(&outcome.analysis);
    for note in outcome.analysis.notes() {
        eprintln!("note      {note}");
    }
    for reason in &outcome.verdict.reasons {
        eprintln!("verdict   {reason}");
    }
    if outcome.verdict.passed {
        eprintln!("verdict   passed");
    }
    reporter.emit(&Event::Analysis(outcome.analysis.clone()))?;
    reporter.emit(&Event::Verdict(outcome.verdict.clone()))?;
    if let Some(dir) = &common.out {
        let result = RunResult {
            schema: SCHEMA.into(),
            ssdlab_version: env!("CARGO_PKG_VERSION").into(),
            started_at,
            host: ssdlab_io::sys::host_info(),
            target: info,
            options,
            phases: outcome.phases,
            analysis: outcome.analysis,
            verdict: outcome.verdict.clone(),
            complete: outcome.complete,
            label: None,
        };
        output::write_result_dir(dir, &result)?;
        eprintln!(
            "results   {} (report.html, result.json, CSV, charts/)",
            dir.display()
        );
    }
    Ok(if reporter.pipe_closed() {
        Outcome::PipeClosed
    } else if reporter.interrupted() {
        Outcome::Interrupted
    } else if outcome.verdict.passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}

fn mb(bytes_per_s: f64) -> String {
    ssdlab_core::units::Throughput(bytes_per_s).to_string()
}

/// The method's table on stderr.
fn print_analysis(analysis: &Analysis) {
    match analysis {
        Analysis::Consistency(MethodAnalysis {
            measured: Some(a), ..
        }) => {
            eprintln!(
                "tested    {} ({}% extra over-provisioning)",
                BinaryBytes(a.tested_bytes),
                a.op_percent
            );
            eprintln!("plateau   {:.0} IOPS", a.plateau_iops);
            match &a.cliff {
                Some(c) => eprintln!(
                    "cliff     at {:.0} s, after {:.2} GB written",
                    c.t_s,
                    c.bytes_written as f64 / 1e9
                ),
                None => eprintln!("cliff     none found (IOPS never stayed below half the plateau)"),
            }
            eprintln!(
                "steady    last {} s: mean {:.0} IOPS, standard deviation {:.0}{}",
                a.steady_window_s,
                a.steady_iops_mean,
                a.steady_iops_std_dev,
                a.steady_consistency_ratio
                    .map_or(String::new(), |r| format!(", mean/sd {r:.1}"))
            );
            match (a.snia.window_mean, a.snia.range_excursion, a.snia.slope_excursion) {
                (Some(mean), Some(range), Some(slope)) => eprintln!(
                    "SNIA      {} over the last 5 of {} rounds of {} s: mean {mean:.0} IOPS, range {:.1}% (<= 20%), slope {:.1}% (<= 10%){}",
                    if a.snia.achieved {
                        "steady state"
                    } else {
                        "NOT steady"
                    },
                    a.snia.rounds,
                    a.snia.round_s,
                    100.0 * range,
                    100.0 * slope,
                    a.snia
                        .first_window_start_round
                        .map_or(String::new(), |r| format!("; first steady window from round {r}"))
                ),
                _ => eprintln!(
                    "SNIA      not assessed: {} rounds of {} s, fewer than 5",
                    a.snia.rounds, a.snia.round_s
                ),
            }
        }
        Analysis::Trim(MethodAnalysis {
            measured: Some(a), ..
        }) if a.discard_supported => {
            eprintln!(
                "measured  {}{}",
                a.measure_s
                    .map_or("a whole pass over the drive per state".to_string(), |s| format!(
                        "{s:.0} s of sequential 128 KiB writes per state"
                    )),
                if a.idle_after_trim_s > 0.0 {
                    format!("; idle {:.0} s after the TRIM", a.idle_after_trim_s)
                } else {
                    String::new()
                }
            );
            // Each figure is "172.5 MB/s (164.5 MiB/s)": 24 characters and a gap.
            eprintln!("{:<10}{:>26}{:>26}{:>26}", "", "Clean", "Dirty", "After TRIM");
            eprintln!(
                "{:<10}{:>26}{:>26}{:>26}",
                "seq write",
                mb(a.clean_bytes_per_s),
                mb(a.dirty_bytes_per_s),
                mb(a.after_trim_bytes_per_s)
            );
            eprintln!(
                "restored  {:.0}% of clean speed after TRIM",
                100.0 * a.restored_fraction
            );
            eprintln!(
                "discard   advertised (discard_max_bytes {}); trimmed blocks read back as zeroes: {}",
                a.discard_max_bytes,
                a.trimmed_reads_zero.map_or("not checked".into(), |z| if z {
                    "yes".to_string()
                } else {
                    "no".into()
                })
            );
        }
        Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) => {
            if a.axis == SweepAxis::Mix {
                let block = a.rows.first().map_or(0, |r| r.transfer_bytes);
                eprintln!(
                    "region    {}, random {} at QD{}, reads from 0% to 100% of operations",
                    BinaryBytes(a.region_bytes),
                    BinaryBytes(block),
                    a.queue_depth
                );
                eprintln!(
                    "{:>10}{:>12}{:>12}{:>12}{:>14}",
                    "reads", "IOPS", "read IOPS", "write IOPS", "MB/s"
                );
                for r in &a.rows {
                    eprintln!(
                        "{:>9}%{:>12.0}{:>12.0}{:>12.0}{:>14.1}",
                        r.read_percent.unwrap_or(0),
                        r.read_iops + r.write_iops,
                        r.read_iops,
                        r.write_iops,
                        (r.read_bytes_per_s + r.write_bytes_per_s) / 1e6
                    );
                }
                return;
            }
            let by_qd = a.axis == SweepAxis::Qd;
            if by_qd {
                eprintln!(
                    "region    {}, random, QD 1 to {}",
                    BinaryBytes(a.region_bytes),
                    a.queue_depth
                );
            } else {
                eprintln!("region    {} at QD{}", BinaryBytes(a.region_bytes), a.queue_depth);
            }
            eprintln!(
                "{:>10}{:>14}{:>14}{:>12}{:>12}",
                if by_qd { "QD" } else { "transfer" },
                "write MB/s",
                "read MB/s",
                "write IOPS",
                "read IOPS"
            );
            for r in &a.rows {
                eprintln!(
                    "{:>10}{:>14.1}{:>14.1}{:>12.0}{:>12.0}",
                    match r.queue_depth {
                        Some(qd) if by_qd => qd.to_string(),
                        _ => BinaryBytes(r.transfer_bytes).to_string(),
                    },
                    r.write_bytes_per_s / 1e6,
                    r.read_bytes_per_s / 1e6,
                    r.write_iops,
                    r.read_iops
                );
            }
            for s in &a.skipped {
                eprintln!("skipped   {s}");
            }
        }
        Analysis::Latency(MethodAnalysis {
            measured: Some(a), ..
        }) => {
            eprintln!(
                "QD1       {:.0} IOPS, {}, maximum latency {}, CPU {:.1}%",
                a.iops,
                mb(a.bytes_per_s),
                Nanos(a.latency_ns_max as f64),
                a.cpu_percent
            );
            eprintln!(
                "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
                "25%", "median", "75%", "95%", "mean", "99%", "99.9%"
            );
            eprintln!(
                "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
                Nanos(a.latency_ns_p25 as f64).to_string(),
                Nanos(a.latency_ns_p50 as f64).to_string(),
                Nanos(a.latency_ns_p75 as f64).to_string(),
                Nanos(a.latency_ns_p95 as f64).to_string(),
                Nanos(a.latency_ns_mean).to_string(),
                Nanos(a.latency_ns_p99 as f64).to_string(),
                Nanos(a.latency_ns_p999 as f64).to_string()
            );
        }
        Analysis::Pts(MethodAnalysis {
            measured: Some(a), ..
        }) => print_pts(a),
        Analysis::Replay(MethodAnalysis {
            measured: Some(a), ..
        }) => print_replay(a),
        _ => {}
    }
}

/// The PTS result on stderr: how it ran, the steady-state determination and the matrix at steady state.
fn print_pts(a: &ssdlab_core::schema::pts::PtsAnalysis) {
    use ssdlab_core::schema::pts::PtsTest;
    use ssdlab_methods::pts::matrix;
    let cells = a.rounds.first().map_or(0, |r| r.cells.len());
    eprintln!(
        "PTS       {} test: {} round(s) of {cells} cells x {} s over {:.0}% of the device ({}), QD{}; preconditioned with {}{}",
        a.test.name(),
        a.rounds.len(),
        a.cell_s,
        a.active_range_percent,
        BinaryBytes(a.active_range_bytes),
        a.tracking_cell.queue_depth,
        BinaryBytes(a.preconditioning_bytes),
        if a.purged {
            " after a purge"
        } else {
            ", not purged"
        }
    );
    let tracking = |v: f64| match a.tracking_metric {
        ssdlab_core::schema::pts::PtsMetric::Iops => format!("{v:.0} IOPS"),
        ssdlab_core::schema::pts::PtsMetric::BytesPerS => mb(v),
        ssdlab_core::schema::pts::PtsMetric::LatencyNsMean => Nanos(v).to_string(),
    };
    let series: Vec<String> = a.rounds.iter().map(|r| tracking(r.tracking)).collect();
    eprintln!("rounds    {}", series.join(", "));
    let st = &a.steady_state;
    match (st.window_first_round, st.window_last_round, st.window_mean) {
        (Some(first), Some(last), Some(mean)) => eprintln!(
            "steady    {} in rounds {first}-{last}: mean {}, range {:.1}% (<= 20%), slope {:.1}% (<= 10%)",
            if st.achieved { "achieved" } else { "NOT achieved" },
            tracking(mean),
            100.0 * st.range_excursion.unwrap_or(f64::NAN),
            100.0 * st.slope_excursion.unwrap_or(f64::NAN)
        ),
        _ => eprintln!(
            "steady    not assessed: {} round(s), fewer than 5",
            a.rounds.len()
        ),
    }
    let mut mixes: Vec<u32> = a.matrix.iter().map(|c| c.cell.read_percent).collect();
    mixes.dedup();
    mixes.sort_unstable_by(|x, y| y.cmp(x));
    mixes.dedup();
    let mut sizes: Vec<u64> = a.matrix.iter().map(|c| c.cell.block_bytes).collect();
    sizes.sort_unstable_by(|x, y| y.cmp(x));
    sizes.dedup();
    let (what, figure): (&str, fn(&ssdlab_core::schema::pts::PtsCellResult) -> String) = match a.test {
        PtsTest::Iops => ("IOPS", |c| format!("{:.0}", c.iops)),
        PtsTest::Throughput => ("MB/s", |c| format!("{:.1}", c.bytes_per_s / 1e6)),
        PtsTest::Latency => ("mean / maximum response time", |c| {
            format!(
                "{} / {}",
                Nanos(c.latency_ns_mean),
                Nanos(c.latency_ns_max as f64)
            )
        }),
    };
    let width = if a.test == PtsTest::Latency { 22 } else { 10 };
    eprintln!("matrix    {what} over the measurement window, by block size and R/W mix");
    let mut header = format!("{:>10}", "block");
    for m in &mixes {
        header.push_str(&format!("{:>width$}", format!("{m}/{}", 100 - m)));
    }
    eprintln!("{header}");
    for size in sizes {
        let mut line = format!("{:>10}", matrix::size_token(size));
        for m in &mixes {
            let cell = a
                .matrix
                .iter()
                .find(|c| c.cell.block_bytes == size && c.cell.read_percent == *m);
            line.push_str(&format!("{:>width$}", cell.map_or("–".to_string(), figure)));
        }
        eprintln!("{line}");
    }
    for s in &a.skipped {
        eprintln!("skipped   {s}");
    }
}

/// The replay's figures on stderr: what was replayed, the storage bench's two figures, latency and fidelity.
fn print_replay(a: &ssdlab_core::schema::replay::ReplayAnalysis) {
    let gb = |b: u64| format!("{:.2} GB", b as f64 / 1e9);
    eprintln!(
        "trace     {}: {} operations over {:.1} s",
        a.format.name(),
        a.trace_ops,
        a.trace_duration_s
    );
    eprintln!(
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
    eprintln!(
        "bench     average data rate {} over {:.2} s busy; average service time {} (the device's own: {})",
        mb(a.average_data_rate_bytes_per_s),
        a.busy_s,
        Nanos(a.average_service_time_ns),
        Nanos(a.average_device_time_ns.unwrap_or(f64::NAN))
    );
    let l = &a.latency_ns;
    eprintln!(
        "{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "", "25%", "median", "75%", "95%", "99%", "99.9%", "maximum"
    );
    let row = |name: &str, l: &ssdlab_core::schema::LatencyNs| {
        eprintln!(
            "{name:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            Nanos(l.p25 as f64).to_string(),
            Nanos(l.p50 as f64).to_string(),
            Nanos(l.p75 as f64).to_string(),
            Nanos(l.p95 as f64).to_string(),
            Nanos(l.p99 as f64).to_string(),
            Nanos(l.p999 as f64).to_string(),
            Nanos(l.max as f64).to_string()
        )
    };
    row("all", l);
    if let Some(r) = &a.read_latency_ns {
        row("reads", r);
    }
    if let Some(w) = &a.write_latency_ns {
        row("writes", w);
    }
    match &a.fidelity {
        Some(f) => eprintln!(
            "fidelity  issued late by: median {}, p99 {}, max {}; {:.2}% more than 1 ms late",
            Nanos(f.late_ns_p50 as f64),
            Nanos(f.late_ns_p99 as f64),
            Nanos(f.late_ns_max as f64),
            100.0 * f.late_over_1ms_ratio
        ),
        None => eprintln!("fidelity  not measured: replayed as fast as possible"),
    }
}
