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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Barrier, Mutex};
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
    Done,
}

/// What every job's thread shares: the start line, the start instant, the stop flag and whether any job failed
/// to prepare.
struct Shared {
    line: Barrier,
    start_ns: AtomicU64,
    stop: AtomicBool,
    failed: AtomicBool,
}

/// Runs `devices.len()` jobs of `workload`, one thread each, after a ramp of `ramp_ns`, and merges them into one
/// phase shown to `observer` (its samples once the jobs have ended; progress while they run). The workload must
/// have been validated against the device and for this many jobs.
pub fn run_threaded<J: JobDevice, O: Observer + ?Sized>(
    devices: Vec<J>,
    workload: &Workload,
    ramp_ns: u64,
    observer: &mut O,
) -> Result<PhaseOutcome, DeviceError> {
    let jobs = devices.len();
    assert!(jobs >= 1, "at least one job");
    let shared = Shared {
        line: Barrier::new(jobs + 1),
        start_ns: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
    };
    let (tx, rx) = mpsc::channel();
    let outcomes: Vec<Mutex<Option<JobOutcome>>> = (0..jobs).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for (job, device) in devices.into_iter().enumerate() {
            let (shared, tx, slot) = (&shared, tx.clone(), &outcomes[job]);
            scope.spawn(move || {
                let run = JobLoop {
                    workload,
                    jobs: jobs as u32,
                    job,
                    ramp_ns,
                    shared,
                    tx: tx.clone(),
                };
                let outcome = match device.with_device(run) {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        // The device could not be made: the start line still has to be crossed, twice.
                        shared.failed.store(true, Ordering::SeqCst);
                        shared.line.wait();
                        shared.line.wait();
                        JobOutcome(Some(Err(e)))
                    }
                };
                *slot.lock().expect("no job panics holding its slot") = Some(outcome);
                let _ = tx.send(Message::Done);
            });
        }
        drop(tx);
        // Every job is prepared; the first sets the start instant before the second crossing.
        shared.line.wait();
        if !shared.failed.load(Ordering::SeqCst) {
            observer.started();
        }
        shared.line.wait();
        let mut fractions = vec![0.0; jobs];
        let mut done = 0;
        while done < jobs {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Message::Progress(job, fraction)) => {
                    fractions[job] = fraction;
                    observer.progress(fractions.iter().sum::<f64>() / jobs as f64);
                }
                Ok(Message::Done) => done += 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if observer.stop_requested() {
                shared.stop.store(true, Ordering::SeqCst);
            }
        }
    });
    let (closing, ended) = merge(outcomes)?;
    let (mut finished, io_failure) = closing.close(workload.stop.runtime_ns, observer);
    finished.summary.verify_errors = ended.verify_errors;
    Ok(PhaseOutcome {
        samples: finished.samples,
        histograms: finished.histograms,
        summary: finished.summary,
        complete: ended.complete && io_failure.is_none(),
        verify_failures: ended.verify_failures,
        io_failure,
        passes: ended.passes,
    })
}

/// The jobs' books and ends as one phase's; the first job's error when any failed.
fn merge(outcomes: Vec<Mutex<Option<JobOutcome>>>) -> Result<(Closing, Ended), DeviceError> {
    let mut merged: Option<(Closing, Ended)> = None;
    for slot in outcomes {
        let JobOutcome(outcome) = slot
            .into_inner()
            .expect("no job panics holding its slot")
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
struct JobLoop<'a> {
    workload: &'a Workload,
    jobs: u32,
    job: usize,
    ramp_ns: u64,
    shared: &'a Shared,
    tx: mpsc::Sender<Message>,
}

impl JobRun for JobLoop<'_> {
    type Output = JobOutcome;

    fn on<D: Device>(self, mut device: D) -> JobOutcome {
        let shared = self.shared;
        let job = self.job as u32;
        let prepared = Phase::prepare(&mut device, self.workload, self.jobs, job..job + 1);
        if prepared.is_err() {
            shared.failed.store(true, Ordering::SeqCst);
        }
        shared.line.wait();
        if job == 0 {
            shared.start_ns.store(device.now_ns(), Ordering::SeqCst);
        }
        shared.line.wait();
        let mut phase = match prepared {
            Ok(phase) if !shared.failed.load(Ordering::SeqCst) => phase,
            Ok(_) => return JobOutcome(None),
            Err(e) => return JobOutcome(Some(Err(e))),
        };
        let at_ns = shared.start_ns.load(Ordering::SeqCst);
        assert!(device.now_ns() >= at_ns, "the jobs' devices share one clock");
        let start = Start {
            at_ns,
            ramp_ns: self.ramp_ns,
            shared: true,
        };
        let mut observer = JobObserver {
            job: self.job,
            stop: &shared.stop,
            tx: &self.tx,
        };
        JobOutcome(Some((|| {
            let books = phase.drive(&mut device, start, &mut observer)?;
            let closing = books.closing(&device);
            let ended_well = !closing.failed();
            let ended = phase.end(&mut device, ended_well, &observer)?;
            Ok((closing, ended))
        })()))
    }
}

/// A job's view of the observer: its progress goes to the observing thread, and it stops when that thread says.
struct JobObserver<'a> {
    job: usize,
    stop: &'a AtomicBool,
    tx: &'a mpsc::Sender<Message>,
}

impl Observer for JobObserver<'_> {
    fn sample(&mut self, _sample: &Sample) {
        // One job's second is not the phase's: samples are drawn once the jobs are merged.
    }
    fn progress(&mut self, fraction: f64) {
        let _ = self.tx.send(Message::Progress(self.job, fraction));
    }
    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}
