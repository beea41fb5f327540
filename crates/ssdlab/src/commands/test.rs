//! `ssdlab test consistency|trim|sweep|latency`: the methodologies, with tables on stderr, JSON Lines on
//! stdout and a result directory with report.html.

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{MethodOptions, RunOptions, TestOptions};
use ssdlab_core::schema::{Event, RunResult, SCHEMA};
use ssdlab_core::units::rfc3339_utc;
use ssdlab_methods::consistency::{self, ConsistencyOptions};
use ssdlab_methods::latency::{self, LatencyOptions, LatencyRw};
use ssdlab_methods::pts::{self, PtsOptions, PtsTest};
use ssdlab_methods::replay::{self, TraceInput};
use ssdlab_methods::sweep::{self, SweepAxis, SweepOptions};
use ssdlab_methods::trim::{self, TrimOptions};
use ssdlab_methods::{MethodError, MethodOutcome, Session};

use super::Outcome;
use crate::cli::{
    ConsistencyArgs, LatencyArgs, LatencyRwArg, PtsTestArg, ReplayArgs, ReplayFitArg, SweepArgs,
    SweepAxisArg, TestCommand, TestCommon, TraceFormatArg, TrimArgs,
};
use crate::output::{self, Reporter};
use crate::plan::{self, duration_flag, size_flag};

pub fn run(command: &TestCommand) -> Result<Outcome> {
    match command {
        TestCommand::Consistency(args) => {
            let options = consistency_options(args)?;
            execute(
                &args.common,
                "consistency",
                MethodOptions::Consistency(options),
                plan::Use::Writes,
                |s| consistency::consistency(s, &options),
            )
        }
        TestCommand::Trim(args) => {
            let options = trim_options(args)?;
            execute(
                &args.common,
                "trim",
                MethodOptions::Trim(options),
                plan::Use::Writes,
                |s| trim::trim(s, &options),
            )
        }
        TestCommand::Sweep(args) => {
            let options = sweep_options(args)?;
            execute(
                &args.common,
                "sweep",
                MethodOptions::Sweep(options),
                plan::Use::Writes,
                |s| sweep::sweep(s, &options),
            )
        }
        TestCommand::Latency(args) => {
            let options = latency_options(args)?;
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
            let (options, input, usage) = replay_input(args)?;
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

/// The consistency test's flags, checked.
fn consistency_options(args: &ConsistencyArgs) -> Result<ConsistencyOptions> {
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
    Ok(options)
}

/// The TRIM test's flags, checked.
fn trim_options(args: &TrimArgs) -> Result<TrimOptions> {
    let measure_ns = match args.measure.as_str() {
        "full" => None,
        value => {
            let ns = duration_flag("measure", value)
                .map_err(|e| anyhow!("{e}; or write 'full' for a whole pass"))?;
            if ns < 1_000_000_000 {
                bail!("--measure {value}: measure for at least a second, e.g. --measure 60s, or 'full'");
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
    Ok(options)
}

/// A sweep's flags, checked (the axis decides which apply).
fn sweep_options(args: &SweepArgs) -> Result<SweepOptions> {
    let axis = match args.axis {
        SweepAxisArg::Size => SweepAxis::Size,
        SweepAxisArg::Qd => SweepAxis::Qd,
        SweepAxisArg::Mix => SweepAxis::Mix,
    };
    if axis == SweepAxis::Size && (args.bs.is_some() || args.max_qd.is_some()) {
        bail!("--bs and --max-qd shape a queue-depth or mix sweep: add --axis qd or mix, or leave them out");
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
    if options.from_bytes < 512 || options.to_bytes > 64 << 20 || options.from_bytes > options.to_bytes {
        bail!(
            "--from {} --to {}: sizes run from 512 B to 64 MiB, smaller first",
            args.from,
            args.to
        );
    }
    if options.test_bytes == 0 || options.size_runtime_ns == 0 {
        bail!("--test-size and --size-runtime must be above zero");
    }
    Ok(options)
}

/// The latency test's flags, checked.
fn latency_options(args: &LatencyArgs) -> Result<LatencyOptions> {
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
    Ok(options)
}

/// A replay's flags, checked, and its trace read: the options, the trace's operations (fitted to the device
/// later, by the method), and how the target is used (a trace of reads alone opens a real device read-only).
fn replay_input(
    args: &ReplayArgs,
) -> Result<(ssdlab_core::schema::replay::ReplayOptions, TraceInput, plan::Use)> {
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
    Ok((options, input, usage))
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
    output::print_lines_stderr(ssdlab_report::text::target_lines(&info));
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
    for line in ssdlab_report::text::method_lines(&outcome.analysis) {
        eprintln!("{line}");
    }
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
