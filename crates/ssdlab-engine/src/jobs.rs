//! A thread per job: `jobs` copies of a workload (fio's numjobs, see [`Workload::job`]) on as many devices, each
//! driven by its own thread, started together and measured as one phase.
//!
//! This module owns the threads' start (every job prepared before any issues, every one measured from the same
//! instant), their stop (a stop request reaches every job), and the merge of their books into one phase's
//! samples, histograms and summary, exact to the histograms' resolution. The devices must share one target and
//! one clock: a job device is a sibling of the device the gate opened (a duplicate of its descriptor with a ring
//! and buffers of its own), made on the thread that uses it, since an io_uring belongs to the thread that set
//! it up. A device with a virtual clock or counters of its own (the simulator, a cache) runs its jobs as lanes
//! of one loop instead ([`crate::runner::run_jobs_ramped`]). It never opens a device itself, never prints and
//! never reads the wall clock: it waits on its jobs' messages with a timeout so a stop request is seen while
//! they run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use ssdlab_core::device::{Device, DeviceError, JobDevice, JobRun};
use ssdlab_core::schema::Sample;

use crate::books::Closing;
use crate::runner::{Ended, Observer, Phase, PhaseOutcome, Start, VERIFY_DETAIL};
use crate::workload::Workload;

/// What one job's thread hands back: None when it did not run because another job could not be prepared.
pub struct JobOutcome(Option<Result<(Closing, Ended), DeviceError>>);

/// Messages from the jobs to the thread that observes them.
enum Message {
    Progress(usize, f64),
    Sample(usize, Box<Sample>),
    /// Job `usize` has ended: it closes no more seconds.
    Done(usize),
}

/// What every job's thread shares: the start line, the user's stop, and the abort one job's failure raises.
struct Shared {
    line: StartLine,
    stop: AtomicBool,
    abort: AtomicBool,
}

/// The jobs' start line: every job arrives (prepared, or unable to be), then all are let go together and
/// measure from one instant, read on the clock of the first job to leave (the jobs' devices share it).
struct StartLine {
    state: Mutex<LineState>,
    changed: Condvar,
}

#[derive(Default)]
struct LineState {
    arrived: usize,
    failed: bool,
    go: bool,
    start_ns: Option<u64>,
}

impl StartLine {
    fn new() -> Self {
        StartLine {
            state: Mutex::new(LineState::default()),
            changed: Condvar::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LineState> {
        // A job that panicked while holding the line left nothing half-done in it: its counts stay usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A job arrives; `prepared` says whether it can run.
    fn arrive(&self, prepared: bool) {
        let mut state = self.state();
        state.arrived += 1;
        state.failed |= !prepared;
        self.changed.notify_all();
    }

    /// Waits until `expected` jobs have arrived, then lets them go; false when any of them cannot run (then none
    /// does).
    fn wait_then_go(&self, expected: usize, failed: bool) -> bool {
        let mut state = self.state();
        while state.arrived < expected {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        state.failed |= failed;
        state.go = true;
        self.changed.notify_all();
        !state.failed
    }

    /// Waits for the go and returns the start instant (None when some job cannot run); the first job to leave
    /// reads it on its clock.
    fn leave(&self, now_ns: impl FnOnce() -> u64) -> Option<u64> {
        let mut state = self.state();
        while !state.go {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if state.failed {
            return None;
        }
        Some(*state.start_ns.get_or_insert_with(now_ns))
    }
}

/// A job's place at the start line: a job that ends before arriving (its device could not be made, or it
/// panicked) still arrives, as one that cannot run, so the others are never left waiting.
struct Arrival<'a> {
    line: &'a StartLine,
    arrived: bool,
}

impl Arrival<'_> {
    fn arrive(&mut self, prepared: bool) {
        assert!(!self.arrived, "a job arrives once");
        self.arrived = true;
        self.line.arrive(prepared);
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            self.line.arrive(false);
        }
    }
}

/// Runs `devices.len()` jobs of `workload`, one thread each, after a ramp of `ramp_ns`, and merges them into one
/// phase shown to `observer` (its samples once the jobs have ended; progress while they run). The workload must
/// have been validated against the device and for this many jobs. A job whose operation fails stops the others,
/// as one loop stops at its first failure.
pub fn run_threaded<J: JobDevice, O: Observer + ?Sized>(
    devices: Vec<J>,
    workload: &Workload,
    ramp_ns: u64,
    observer: &mut O,
) -> Result<PhaseOutcome, DeviceError> {
    let jobs = devices.len();
    assert!(jobs >= 1, "at least one job");
    let shared = Shared {
        line: StartLine::new(),
        stop: AtomicBool::new(false),
        abort: AtomicBool::new(false),
    };
    let (tx, rx) = mpsc::channel();
    let outcomes: Vec<Mutex<Option<JobOutcome>>> = (0..jobs).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        let mut spawned = 0;
        let mut spawn_failed = false;
        for (job, device) in devices.into_iter().enumerate() {
            let (shared, thread_tx, slot) = (&shared, tx.clone(), &outcomes[job]);
            let started = std::thread::Builder::new()
                .name(format!("ssdlab-job-{job}"))
                .spawn_scoped(scope, move || {
                    let mut arrival = Arrival {
                        line: &shared.line,
                        arrived: false,
                    };
                    let run = JobLoop {
                        workload,
                        jobs: jobs as u32,
                        job,
                        ramp_ns,
                        shared,
                        arrival: &mut arrival,
                        tx: thread_tx.clone(),
                    };
                    let outcome = match device.with_device(run) {
                        Ok(outcome) => outcome,
                        // The device could not be made: the job arrives as one that cannot run (on drop).
                        Err(e) => JobOutcome(Some(Err(e))),
                    };
                    drop(arrival);
                    *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
                    let _ = thread_tx.send(Message::Done(job));
                });
            match started {
                Ok(_) => spawned += 1,
                Err(e) => {
                    spawn_failed = true;
                    *outcomes[job]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(JobOutcome(Some(Err(
                        DeviceError::os("starting a job's thread", e),
                    ))));
                }
            }
        }
        drop(tx);
        if shared.line.wait_then_go(spawned, spawn_failed) {
            observer.started();
        }
        observe(&rx, spawned, jobs, &shared.stop, observer);
    });
    let (closing, ended) = merge(outcomes)?;
    let (finished, io_failure) = closing.close(workload.stop.runtime_ns, observer);
    Ok(ended.outcome(finished, io_failure))
}

/// Shows the jobs' progress to `observer` until the `running` jobs have ended, and passes its stop request on.
fn observe<O: Observer + ?Sized>(
    rx: &mpsc::Receiver<Message>,
    running: usize,
    jobs: usize,
    stop: &AtomicBool,
    observer: &mut O,
) {
    let mut fractions = vec![0.0; jobs];
    let mut seconds: Vec<std::collections::VecDeque<Sample>> = vec![Default::default(); jobs];
    let mut ended = vec![false; jobs];
    let mut done = 0;
    while done < running {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Message::Progress(job, fraction)) => {
                fractions[job] = fraction;
                observer.progress(fractions.iter().sum::<f64>() / jobs as f64);
            }
            Ok(Message::Sample(job, sample)) => seconds[job].push_back(*sample),
            Ok(Message::Done(job)) => {
                done += 1;
                ended[job] = true;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // A second every job still running has closed is shown (a job that ended, at its limit or its share's end,
        // adds what it closed and no more); checked after every message, since a job's end may be told after the
        // others' seconds arrived.
        while seconds.iter().any(|s| !s.is_empty())
            && seconds.iter().zip(&ended).all(|(s, &over)| over || !s.is_empty())
        {
            let second: Vec<Sample> = seconds.iter_mut().filter_map(|s| s.pop_front()).collect();
            observer.live(&added_up(&second));
        }
        if observer.stop_requested() {
            stop.store(true, Ordering::SeqCst);
        }
    }
}

/// The jobs' same second, added up for a live view (see [`Observer::live`]).
fn added_up(second: &[Sample]) -> Sample {
    let first = second.first().cloned().unwrap_or_default();
    let ios: u64 = second.iter().map(|s| s.ios).sum();
    let weighted: f64 = second.iter().map(|s| s.latency_ns_mean * s.ios as f64).sum();
    Sample {
        read: None,
        write: None,
        ios,
        bytes: second.iter().map(|s| s.bytes).sum(),
        iops: second.iter().map(|s| s.iops).sum(),
        bytes_per_s: second.iter().map(|s| s.bytes_per_s).sum(),
        read_ios: second.iter().map(|s| s.read_ios).sum(),
        write_ios: second.iter().map(|s| s.write_ios).sum(),
        latency_ns_mean: if ios > 0 { weighted / ios as f64 } else { 0.0 },
        latency_ns_p50: second.iter().map(|s| s.latency_ns_p50).max().unwrap_or(0),
        latency_ns_p99: second.iter().map(|s| s.latency_ns_p99).max().unwrap_or(0),
        latency_ns_max: second.iter().map(|s| s.latency_ns_max).max().unwrap_or(0),
        qd_mean: second.iter().map(|s| s.qd_mean).sum(),
        ..first
    }
}

/// The jobs' books and ends as one phase's; the first job's error when any failed.
fn merge(outcomes: Vec<Mutex<Option<JobOutcome>>>) -> Result<(Closing, Ended), DeviceError> {
    let mut merged: Option<(Closing, Ended)> = None;
    for slot in outcomes {
        let JobOutcome(outcome) = slot
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .expect("every job leaves an outcome");
        let Some(outcome) = outcome else {
            // Another job could not be prepared: its error is returned below.
            continue;
        };
        let (closing, ended) = outcome?;
        merged = Some(match merged {
            None => (closing, ended),
            Some((mut all, mut so_far)) => {
                all.absorb(closing);
                so_far.verify_errors += ended.verify_errors;
                let room = VERIFY_DETAIL.saturating_sub(so_far.verify_failures.len());
                so_far
                    .verify_failures
                    .extend(ended.verify_failures.into_iter().take(room));
                so_far.complete &= ended.complete;
                so_far.passes = so_far.passes.min(ended.passes);
                (all, so_far)
            }
        });
    }
    Ok(merged.expect("a job that did not run leaves another's error"))
}

/// One job's loop, run on its own device on its own thread.
struct JobLoop<'a, 'l> {
    workload: &'a Workload,
    jobs: u32,
    job: usize,
    ramp_ns: u64,
    shared: &'a Shared,
    arrival: &'l mut Arrival<'a>,
    tx: mpsc::Sender<Message>,
}

impl JobRun for JobLoop<'_, '_> {
    type Output = JobOutcome;

    fn on<D: Device>(self, mut device: D) -> JobOutcome {
        let shared = self.shared;
        let job = self.job as u32;
        let prepared = Phase::prepare(&mut device, self.workload, self.jobs, job..job + 1);
        self.arrival.arrive(prepared.is_ok());
        let at_ns = shared.line.leave(|| device.now_ns());
        let mut phase = match (prepared, at_ns) {
            (Err(e), _) => return JobOutcome(Some(Err(e))),
            (Ok(_), None) => return JobOutcome(None),
            (Ok(phase), Some(_)) => phase,
        };
        let at_ns = at_ns.expect("matched above");
        assert!(device.now_ns() >= at_ns, "the jobs' devices share one clock");
        let start = Start {
            at_ns,
            ramp_ns: self.ramp_ns,
            shared: true,
        };
        let mut observer = JobObserver {
            job: self.job,
            stop: &shared.stop,
            abort: &shared.abort,
            tx: &self.tx,
        };
        let outcome = (|| {
            let books = phase.drive(&mut device, start, &mut observer)?;
            let mut closing = books.closing(&device);
            // This job's seconds were never shown: they are drawn once every job's are merged.
            closing.none_shown();
            if closing.failed() {
                shared.abort.store(true, Ordering::SeqCst);
            }
            let ended = phase.end(&mut device, !closing.failed(), &observer)?;
            Ok((closing, ended))
        })();
        if outcome.is_err() {
            shared.abort.store(true, Ordering::SeqCst);
        }
        JobOutcome(Some(outcome))
    }
}

/// A job's view of the observer: its progress goes to the observing thread, and it stops when that thread says
/// or another job failed.
struct JobObserver<'a> {
    job: usize,
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
    tx: &'a mpsc::Sender<Message>,
}

impl Observer for JobObserver<'_> {
    fn sample(&mut self, sample: &Sample) {
        // One job's second is not the phase's: it is shown live, added to the others', and the phase's samples
        // are drawn once the jobs are merged.
        let _ = self.tx.send(Message::Sample(self.job, Box::new(sample.clone())));
    }
    fn progress(&mut self, fraction: f64) {
        let _ = self.tx.send(Message::Progress(self.job, fraction));
    }
    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.abort.load(Ordering::Relaxed)
    }
}
