//! The `test` command: the methodologies (consistency, TRIM, sweep, latency, replay, PTS) on one target, with
//! their tables, JSON Lines and a result directory with report.html. A plan is the target, the seed and one method's checked
//! options; the run opens the target for what the method does, runs it through a session, and records it.

pub mod options;

use anyhow::{Result, anyhow};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{RunOptions, TestOptions};
pub use ssdlab_methods::MethodPlan;
use ssdlab_methods::erase::Purger;
use ssdlab_methods::{MethodContext, MethodError, Session};

use crate::export;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// A test, checked.
pub struct Plan {
    pub target: TargetPlan,
    pub seed: u64,
    pub out: Option<crate::export::OutDir>,
    pub method: MethodPlan,
}

impl Plan {
    pub fn new(
        target: TargetPlan,
        seed: u64,
        out: Option<crate::export::OutDir>,
        method: MethodPlan,
    ) -> Result<Self> {
        // Checked now, created by the recording once the gate has let the test through.
        if let Some(dir) = &out {
            export::check_out_dir(dir)?;
        }
        Ok(Plan {
            target,
            seed,
            out,
            method,
        })
    }
}

/// The purges a whole block device's drive offers, through a duplicate of the descriptor the safety gate judged;
/// None for anything else (a partition is refused by the drive's purges themselves, with the reason).
fn drive_purger<'p>(
    target: &TargetPlan,
    device: &ssdlab_targets::AnyDevice,
    info: &ssdlab_core::DeviceInfo,
    tools: &'p dyn crate::ports::Tools,
    clock: &'p dyn crate::ports::Clock,
) -> Option<crate::erase::KernelPurger<'p>> {
    let ssdlab_core::target::TargetSpec::Block { path } = &target.spec else {
        return None;
    };
    let gated = device.backing_file()?.try_clone().ok()?;
    crate::erase::KernelPurger::new(gated, path, info, tools, clock, None).ok()
}

/// A real target's jobs on threads of their own, over siblings of the descriptor the gate claimed.
struct SiblingJobs(ssdlab_targets::JobSource);

impl SiblingJobs {
    fn port(jobs: &Option<SiblingJobs>) -> Option<&dyn ssdlab_methods::session::JobThreads> {
        jobs.as_ref()
            .map(|j| j as &dyn ssdlab_methods::session::JobThreads)
    }
}

impl ssdlab_methods::session::JobThreads for SiblingJobs {
    fn run(
        &self,
        workload: &ssdlab_engine::Workload,
        jobs: u32,
        observer: &mut dyn ssdlab_engine::Observer,
    ) -> Result<ssdlab_engine::PhaseOutcome, ssdlab_core::device::DeviceError> {
        ssdlab_engine::run_threaded(self.0.targets(jobs)?, workload, 0, observer)
    }
}

/// Runs a test method and records it.
pub fn run(plan: Plan, ports: &mut Ports) -> Result<Outcome> {
    let Plan {
        target,
        seed,
        out,
        method,
    } = plan;
    let kind = method.kind().name();
    let usage = if method.writes() { Use::Writes } else { Use::Reads };
    let removes_test_file = method.removes_test_file();
    let options = method.recorded();
    let opened = target.open(ports.targets, usage)?;
    let (mut device, before) = (opened.device, opened.undo);
    let info = device.info().clone();
    let options = RunOptions::Test(TestOptions {
        target: target.recorded(),
        seed,
        method: options,
    });
    // After the gate, before the method measures anything: a refusal leaves no directory behind.
    let mut recording = match Recording::begin(out.as_ref(), None, ports.started_unix_s) {
        Ok(recording) => recording,
        Err(e) => return Err(crate::target::taken_back(device, &before, e)),
    };
    let mut reporter = Reporter::new(&mut *ports.console);
    reporter.say(&format!("ssdlab    test {kind}"));
    reporter.say_lines(ssdlab_report::text::target_lines(&info));
    recording.announce(&mut reporter, kind, &info, &options)?;
    // A PTS purges a whole drive with its own sanitize or secure erase where it offers one (the specification's
    // purge), so the run holds the gate's descriptor for them. The console is the run's while it runs: the
    // purges' notices reach the user through the method (`Purger::notices`, said as alarms before each purge),
    // so the purger is given no console of its own.
    let mut purger = if method.purges() {
        drive_purger(&target, &device, &info, ports.tools, ports.clock)
    } else {
        None
    };
    // A method's jobs (quick's T, sweep's --jobs) get threads of their own on a real target, as fio's numjobs
    // and CrystalDiskMark's threads do; on the virtual SSD and a cache they stay lanes of one loop.
    let job_threads = match device.job_source() {
        Ok(source) => source.map(SiblingJobs),
        Err(e) => return Err(crate::target::taken_back(device, &before, anyhow!(e))),
    };
    let run = method.run(
        Session::new(&mut device, &mut reporter, seed).with_job_threads(SiblingJobs::port(&job_threads)),
        MethodContext {
            purger: purger.as_mut().map(|p| p as &mut dyn Purger),
        },
    );
    drop(purger);
    let outcome = match run {
        Ok(outcome) => outcome,
        // Refused before any I/O: what opening the target laid out is taken back, as any refusal does.
        Err(e) if !matches!(e, MethodError::Device(_)) && !reporter.issued_io() => {
            return Err(crate::target::taken_back(
                device,
                &before,
                anyhow!("test {kind}: {e}"),
            ));
        }
        // Failed after I/O: a file extended for the run stays as it is now (truncating it would not give back
        // what was written), and only a test file this run created goes, where the method removes its own.
        Err(e) => {
            let error = match e {
                MethodError::Device(e) => anyhow!(e).context(format!("test {kind} on {}", info.target)),
                e => anyhow!("test {kind}: {e}"),
            };
            drop(device);
            if removes_test_file && let Some(said) = before.remove_created() {
                reporter.say(&format!("note      {said}"));
            }
            return Err(error);
        }
    };
    reporter.say_lines(ssdlab_report::text::method_lines(&outcome.analysis));
    for note in outcome.analysis.notes() {
        reporter.say(&format!("note      {note}"));
    }
    reporter.say_lines(ssdlab_report::text::verdict_lines(&outcome.verdict));
    if removes_test_file {
        // Closed first: the file goes only once nothing of this run holds it.
        drop(device);
        if let Some(said) = before.remove_created() {
            reporter.say(&format!("note      {said}"));
        }
    }
    recording.finish(
        &mut reporter,
        Finished::new(info, options, outcome.analysis, outcome.verdict)
            .phases(outcome.phases, outcome.complete),
    )
}
