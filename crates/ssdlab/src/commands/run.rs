//! `ssdlab run`: one workload on one target, measured.

use anyhow::{Result, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{JobOptions, RunOptions};
use ssdlab_core::schema::{Analysis, Event, PhaseResult, RunResult, SCHEMA, Verdict};
use ssdlab_core::units::{BinaryBytes, Nanos, rfc3339_utc};
use ssdlab_engine::{Workload, run_phase};
use ssdlab_targets::{DeviceVisitor, Undo};

use super::Outcome;
use crate::cli::RunArgs;
use crate::output::{self, Reporter};
use crate::plan::{self, RunFlags};

pub fn run(args: &RunArgs) -> Result<Outcome> {
    let flags = plan::run_flags(args)?;
    if args.verify && ssdlab_targets::is_virtual(&args.target.target) {
        bail!("--verify: the virtual SSD stores no data, so there is nothing to verify; drop --verify");
    }
    if let Some(dir) = &args.out {
        output::prepare_out_dir(dir)?;
    }
    let opened = plan::open_target(
        &args.target,
        if flags.rw.modifies() {
            plan::Use::Writes
        } else {
            plan::Use::Reads
        },
    )?;
    opened.device.visit(RunOn {
        args,
        flags: &flags,
        undo: opened.undo,
    })
}

/// The run, instantiated for each backend.
struct RunOn<'a> {
    args: &'a RunArgs,
    flags: &'a RunFlags,
    undo: Undo,
}

impl DeviceVisitor for RunOn<'_> {
    type Output = Result<Outcome>;
    fn visit<D: Device>(self, device: D) -> Result<Outcome> {
        run_on(device, self.args, self.flags, self.undo)
    }
}

fn describe(w: &Workload) -> String {
    let limits: Vec<String> = [
        w.stop
            .runtime_ns
            .map(|ns| format!("runtime {}", Nanos(ns as f64))),
        w.stop.bytes.map(|b| format!("bytes {}", BinaryBytes(b))),
        w.stop.passes.map(|p| format!("passes {p}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mix = if w.rw == ssdlab_engine::RwMode::RandRw {
        format!(" ({}% reads)", w.mix_read_percent)
    } else {
        String::new()
    };
    format!(
        "{}{mix}  bs {}  qd {}  span {}+{}  {}  seed {}{}",
        format!("{:?}", w.rw).to_lowercase(),
        BinaryBytes(w.block_bytes),
        w.queue_depth,
        w.span.offset_bytes,
        BinaryBytes(w.span.len_bytes),
        limits.join(", "),
        w.seed,
        if w.verify { "  verify" } else { "" }
    )
}

fn run_on<D: Device>(mut device: D, args: &RunArgs, flags: &RunFlags, before: Undo) -> Result<Outcome> {
    let workload = match plan::run_workload(args, flags, device.info()) {
        Ok(workload) => workload,
        Err(e) => {
            // Refused before any I/O: undo the file's creation or extension, so bad input leaves nothing behind.
            drop(device);
            before.restore();
            return Err(e);
        }
    };
    let options = RunOptions::Run(JobOptions {
        target: args.target.recorded(),
        workload: workload.clone(),
    });
    let unix_s = output::unix_now_s();
    let started_at = rfc3339_utc(unix_s);
    let info = device.info().clone();

    let mut reporter = Reporter::new(args.json);
    eprintln!("ssdlab    run {}", describe(&workload));
    output::print_lines_stderr(ssdlab_report::text::target_lines(&info));
    reporter.emit(&Event::Begin {
        kind: "run".into(),
        target: info.clone(),
        options: options.clone(),
        started_at: started_at.clone(),
    })?;
    reporter.start_phase("run")?;
    let outcome = run_phase(&mut device, &workload, &mut reporter)?;
    let cpu = reporter.phase_cpu();
    reporter.finish_phase();

    let mut summary = outcome.summary;
    summary.cpu_user_s = cpu.user_s;
    summary.cpu_sys_s = cpu.sys_s;
    let mut reasons = Vec::new();
    if let Some(failure) = &outcome.io_failure {
        reasons.push(format!("I/O failed: {failure}"));
    }
    if summary.verify_errors > 0 {
        let first = outcome.verify_failures.first().map_or(String::new(), |f| {
            format!(
                "; first at byte {}: {} bad sectors, {}",
                f.offset, f.bad_sectors, f.found
            )
        });
        reasons.push(format!(
            "{} blocks failed verification{first}",
            summary.verify_errors
        ));
    }
    if !outcome.complete && outcome.io_failure.is_none() {
        reasons.push("interrupted before the end condition; results cover what was measured".into());
    }
    let verdict = Verdict {
        passed: reasons.is_empty(),
        reasons,
    };
    reporter.emit(&Event::Summary {
        phase: "run".into(),
        summary: summary.clone(),
        complete: outcome.complete,
    })?;
    reporter.emit(&Event::Verdict(verdict.clone()))?;

    output::print_lines_stderr(ssdlab_report::text::summary_lines(&summary, workload.queue_depth));
    for reason in &verdict.reasons {
        eprintln!("verdict   {reason}");
    }
    if let Some(dir) = &args.out {
        let result = RunResult {
            schema: SCHEMA.into(),
            ssdlab_version: env!("CARGO_PKG_VERSION").into(),
            started_at,
            host: ssdlab_io::sys::host_info(),
            target: info,
            options,
            phases: vec![PhaseResult {
                name: "run".into(),
                samples: outcome.samples,
                summary,
                complete: outcome.complete,
            }],
            analysis: Analysis::Run,
            verdict: verdict.clone(),
            complete: outcome.complete,
            label: None,
        };
        output::write_result_dir(dir, &result)?;
        eprintln!(
            "results   {} (report.html, result.json, samples.csv, charts/)",
            dir.display()
        );
    }
    Ok(if reporter.pipe_closed() {
        Outcome::PipeClosed
    } else if reporter.interrupted() {
        Outcome::Interrupted
    } else if verdict.passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}
