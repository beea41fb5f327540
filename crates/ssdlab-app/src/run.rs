//! `run`: one workload on one target, measured, with the record of every second.

use anyhow::{Result, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{JobOptions, RunOptions};
use ssdlab_core::schema::{Analysis, Event, PhaseResult, Verdict};
use ssdlab_core::units::Rate;
use ssdlab_core::units::{BinaryBytes, Nanos};
use ssdlab_engine::workload::{Pattern, RwMode, StopAt};
use ssdlab_engine::{Workload, run_jobs_ramped, run_threaded};
use ssdlab_targets::{DeviceVisitor, JobTarget, Undo};

use crate::export;
use crate::flags::SpanFlag;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// A `run`, checked as far as it can be before the device is open; the workload is checked against the device
/// once it is (its size, block size and limits).
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: TargetPlan,
    pub rw: RwMode,
    /// Reads as a percentage of operations (randrw).
    pub mix_read_percent: u8,
    pub block_bytes: u64,
    pub queue_depth: u32,
    pub span: SpanFlag,
    pub stop: StopAt,
    pub rate: Option<Rate>,
    pub seed: u64,
    /// Random offsets cover each block once per pass (fio's random map) unless false.
    pub random_map: bool,
    pub verify: bool,
    /// fio's ramp_time: how long the workload runs before statistics are kept (0: none).
    pub ramp_ns: u64,
    /// fio's numjobs: copies of the workload run side by side (see `Workload::job`).
    pub jobs: u32,
    pub out: Option<crate::export::OutDir>,
}

/// The flags of `run`, typed by the command line's parser (`crate::flags`' value parsers).
#[derive(Debug, Clone)]
pub struct RunFlags {
    pub rw: RwMode,
    pub mix: u8,
    pub block_bytes: u64,
    pub qd: u32,
    pub span: SpanFlag,
    pub runtime_ns: Option<u64>,
    pub bytes: Option<u64>,
    pub passes: Option<u64>,
    pub rate: Option<Rate>,
    pub seed: u64,
    pub norandommap: bool,
    pub verify: bool,
    /// `--ramp-time`: the run before statistics are kept.
    pub ramp_ns: u64,
    /// `--jobs` (fio's `--numjobs`): copies of the workload run side by side.
    pub jobs: u32,
}

impl Plan {
    /// Checks every flag that does not depend on the device; without a stop condition the run lasts 10 s.
    pub fn new(target: TargetPlan, flags: RunFlags, out: Option<crate::export::OutDir>) -> Result<Self> {
        let (rw, block_bytes) = (flags.rw, flags.block_bytes);
        let mut stop = StopAt {
            runtime_ns: flags.runtime_ns,
            bytes: flags.bytes,
            passes: flags.passes,
        };
        if stop == StopAt::default() {
            stop.runtime_ns = Some(10_000_000_000);
        }
        if flags.mix > 100 {
            bail!(
                "--mix {}: the read percentage must be between 0 and 100",
                flags.mix
            );
        }
        if !(1..=ssdlab_core::workload::MAX_JOBS).contains(&flags.jobs) {
            bail!(
                "--jobs {}: must be between 1 and {}",
                flags.jobs,
                ssdlab_core::workload::MAX_JOBS
            );
        }
        if flags.verify && target.is_virtual() {
            bail!("--verify: the virtual SSD stores no data, so there is nothing to verify; drop --verify");
        }
        let (span, rate) = (flags.span, flags.rate);
        if let Some(dir) = &out {
            export::check_out_dir(dir)?;
        }
        Ok(Plan {
            target,
            rw,
            mix_read_percent: flags.mix,
            block_bytes,
            queue_depth: flags.qd,
            span,
            stop,
            rate,
            seed: flags.seed,
            random_map: !flags.norandommap,
            verify: flags.verify,
            ramp_ns: flags.ramp_ns,
            jobs: flags.jobs,
            out,
        })
    }

    /// The workload on an opened device, checked against it.
    pub fn workload(&self, device: &ssdlab_core::DeviceInfo) -> Result<Workload> {
        let workload = Workload {
            rw: self.rw,
            mix_read_percent: self.mix_read_percent,
            pattern: if self.rw.is_random() {
                Pattern::Random {
                    random_map: self.random_map,
                }
            } else {
                Pattern::Sequential
            },
            block_bytes: self.block_bytes,
            queue_depth: self.queue_depth,
            span: self
                .span
                .resolve(device.capacity_bytes, device.logical_block_bytes),
            stop: self.stop,
            rate: self.rate,
            seed: self.seed,
            verify: self.verify,
        };
        workload.validate(device)?;
        workload.validate_jobs(self.jobs)?;
        Ok(workload)
    }
}

/// Runs the workload and records it.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let opened = plan.target.open(
        ports.targets,
        if plan.rw.modifies() {
            Use::Writes
        } else {
            Use::Reads
        },
    )?;
    // Jobs on a real target are threads, each over a duplicate of the descriptor the gate judged; on the virtual
    // drive or a cache they are lanes of one loop on the one device.
    let job_targets = if plan.jobs > 1 {
        match opened.device.job_targets(plan.jobs) {
            Ok(targets) => targets,
            Err(e) => return Err(crate::target::taken_back(opened.device, &opened.undo, e.into())),
        }
    } else {
        None
    };
    opened.device.visit(RunOn {
        plan,
        ports,
        undo: opened.undo,
        job_targets,
    })
}

/// The run, instantiated for each backend.
struct RunOn<'a, 'p> {
    plan: &'a Plan,
    ports: &'a mut Ports<'p>,
    undo: Undo,
    job_targets: Option<Vec<JobTarget>>,
}

impl DeviceVisitor for RunOn<'_, '_> {
    type Output = Result<Outcome>;
    fn visit<D: Device>(self, device: D) -> Result<Outcome> {
        run_on(device, self.plan, self.ports, self.undo, self.job_targets)
    }
}

fn describe(w: &Workload, jobs: u32) -> String {
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
    let rate = w.rate.map_or(String::new(), |r| format!(", rate {r}"));
    let jobs = if jobs > 1 {
        format!(" in each of {jobs} jobs")
    } else {
        String::new()
    };
    format!(
        "{}{mix}, bs {}, qd {}{jobs}, span {}+{}, {}{rate}, seed {}{}",
        format!("{:?}", w.rw).to_lowercase(),
        BinaryBytes(w.block_bytes),
        w.queue_depth,
        w.span.offset_bytes,
        BinaryBytes(w.span.len_bytes),
        limits.join(", "),
        w.seed,
        if w.verify { ", verify" } else { "" }
    )
}

fn run_on<D: Device>(
    mut device: D,
    plan: &Plan,
    ports: &mut Ports,
    before: Undo,
    job_targets: Option<Vec<JobTarget>>,
) -> Result<Outcome> {
    let workload = match plan.workload(device.info()) {
        Ok(workload) => workload,
        Err(e) => return Err(crate::target::taken_back(device, &before, e)),
    };
    let options = RunOptions::Run(JobOptions {
        target: plan.target.recorded(),
        workload: workload.clone(),
        ramp_ns: (plan.ramp_ns > 0).then_some(plan.ramp_ns),
        jobs: (plan.jobs > 1).then_some(plan.jobs),
    });
    let info = device.info().clone();
    // After the gate and the workload's checks, before the first I/O: a refusal leaves no directory behind, and
    // a directory that cannot take the result takes back the file target's creation or extension too.
    let mut recording = match Recording::begin(plan.out.as_ref(), None, ports.started_unix_s) {
        Ok(recording) => recording,
        Err(e) => return Err(crate::target::taken_back(device, &before, e)),
    };

    let mut reporter = Reporter::new(&mut *ports.console);
    let ramp = if plan.ramp_ns > 0 {
        format!(
            ", after a ramp of {} that is not measured",
            Nanos(plan.ramp_ns as f64)
        )
    } else {
        String::new()
    };
    reporter.say(&format!("ssdlab    run {}{ramp}", describe(&workload, plan.jobs)));
    reporter.say_lines(ssdlab_report::text::target_lines(&info));
    // Reads of space never written (a file's hole or preallocation, a virtual drive's unmapped blocks) return
    // zeroes without reaching the medium: judged before the run, while the span is as the reads first find it.
    let unwritten = match workload.rw {
        RwMode::Read | RwMode::RandRead => never_written_share(&mut device, workload.span),
        RwMode::RandRw if workload.mix_read_percent > 0 => never_written_share(&mut device, workload.span),
        _ => None,
    };
    recording.announce(&mut reporter, "run", &info, &options)?;
    reporter.start_phase("run")?;
    let threaded = job_targets.is_some();
    let outcome = match job_targets {
        Some(targets) => run_threaded(targets, &workload, plan.ramp_ns, &mut reporter)?,
        None => run_jobs_ramped(&mut device, &workload, plan.jobs, plan.ramp_ns, &mut reporter)?,
    };
    let cpu = reporter.phase_cpu();
    reporter.finish_phase();

    let mut summary = outcome.summary.clone();
    summary.cpu_user_s = cpu.user_s;
    summary.cpu_sys_s = cpu.sys_s;
    let mut verdict = verdict_of(&outcome, &summary);
    if let Some(share) = unwritten
        && let Some(note) = judge_unwritten(&workload, share, &mut verdict)
    {
        reporter.say(&note);
    }
    reporter.emit(&Event::Summary {
        phase: "run".into(),
        summary: summary.clone(),
        complete: outcome.complete,
    })?;
    reporter.say_lines(ssdlab_report::text::summary_lines(
        &summary,
        workload.queue_depth * plan.jobs,
    ));
    if plan.jobs > 1 {
        reporter.say(&jobs_note(plan.jobs, threaded));
    }
    reporter.say_lines(ssdlab_report::text::verdict_lines(&verdict));
    // A plain run keeps the file it created (another run may want the same data); it says so, as quick says
    // it removed its own.
    if let Some(path) = before.created() {
        reporter.say(&format!(
            "note      kept {}, the test file this run created: remove it when done",
            path.display()
        ));
    }
    let phase = PhaseResult {
        name: "run".into(),
        samples: outcome.samples,
        summary,
        complete: outcome.complete,
    };
    recording.finish(
        &mut reporter,
        Finished::new(info, options, Analysis::Run, verdict).phases(vec![phase], outcome.complete),
    )
}

/// A run that read space never written (a `share` of its span) measured nothing there: a read run is not
/// trustworthy (the verdict says why); a mix's own writes fill the span as it goes, so it gets a note instead,
/// returned.
fn judge_unwritten(workload: &Workload, share: f64, verdict: &mut Verdict) -> Option<String> {
    let said = format!(
        "about {:.0}% of the span read had never been written (a hole or preallocated space in a file, unmapped \
         blocks on a drive): reads there return zeroes without reaching the medium; write the span first \
         (--rw write) to measure reads",
        100.0 * share
    );
    if workload.rw == RwMode::RandRw && workload.mix_read_percent < 100 {
        // The run's writes fill the span as it goes: the early reads are the ones that measured nothing.
        return Some(format!("note      {said}, until this run's writes reach it"));
    }
    verdict.passed = false;
    verdict.reasons.push(format!("not trustworthy: {said}"));
    None
}

/// What a run of several jobs says under its summary: the figures are of all of them, the limits each one's,
/// and how they ran.
fn jobs_note(jobs: u32, threaded: bool) -> String {
    format!(
        "note      the figures above are of all {jobs} jobs together; --qd, --rate, --bytes and --passes are each \
         job's, as fio's are{}",
        if threaded {
            ", and each job ran on its own thread"
        } else {
            "; the jobs submitted from one thread, to the one device this target is (its state and clock are not \
             shared between threads)"
        }
    )
}

/// The share of `span` that holds no data, from the device's extents at up to 256 places spread over it (a
/// bound on the cost on any span); None when all of it holds data, or the device cannot tell.
fn never_written_share<D: Device>(device: &mut D, span: ssdlab_core::workload::Span) -> Option<f64> {
    const PLACES: u64 = 256;
    let block = u64::from(device.info().logical_block_bytes.max(512));
    let places = PLACES.min((span.len_bytes / block).max(1));
    let step = span.len_bytes / places;
    let mut holes = 0u64;
    let mut extents = Vec::new();
    for i in 0..places {
        let at = (span.offset_bytes + i * step) / block * block;
        extents.clear();
        device.extents(at, block, &mut extents).ok()?;
        if extents.first().is_some_and(|e| !e.allocated) {
            holes += 1;
        }
    }
    let share = holes as f64 / places as f64;
    (share >= 0.01).then_some(share)
}

/// A run passes when no I/O failed, every block verified and it reached its end condition.
fn verdict_of(outcome: &ssdlab_engine::PhaseOutcome, summary: &ssdlab_core::schema::Summary) -> Verdict {
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
    Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    }
}
