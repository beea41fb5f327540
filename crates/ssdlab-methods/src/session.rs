//! A method's session: runs named phases on one device, collects their results, and stops cleanly when the
//! caller asks (Ctrl-C) or an operation fails, so what was measured is kept and marked incomplete, and the
//! verdict can say which of the two stopped it.

use ssdlab_core::device::{Device, DeviceError, Io, Op};
use ssdlab_core::schema::{Analysis, MethodAnalysis, PhaseResult, Verdict};
use ssdlab_core::units::BinaryBytes;
use ssdlab_engine::replay::{ReplayFacts, ReplayPlan, run_trace};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload, WorkloadError};
use ssdlab_engine::{Observer, run_jobs_ramped};

/// What a method's caller sees: the engine's observer plus phase boundaries and CPU accounting.
pub trait MethodObserver: Observer {
    /// A phase starts.
    fn begin_phase(&mut self, name: &str);
    /// A phase ended with this result.
    fn end_phase(&mut self, phase: &PhaseResult);
    /// User and system CPU seconds used by the measured part of the phase that just ended.
    fn phase_cpu(&self) -> (f64, f64) {
        (0.0, 0.0)
    }

    /// Whether a line per phase is worth showing: a method of many short phases (the sweep's 36 sizes) prints
    /// its own table instead. The phases are still streamed and recorded.
    fn show_phase_lines(&mut self, _show: bool) {}

    /// A line the user must see at once, even when quiet (a firmware purge's recovery instructions).
    fn alarm(&mut self, _line: &str) {}

    /// A line of progress for a method whose phases are too many to show one by one (a PTS round).
    fn say(&mut self, _line: &str) {}
}

/// Runs a phase's jobs on threads of their own, each on a sibling of the session's device (a duplicate of the
/// descriptor the gate claimed, with its own ring), merged into one phase (`ssdlab_engine::jobs::run_threaded`).
/// The app gives one for a real device; a session without one (the virtual SSD, a cache, a test's device) runs
/// its jobs as lanes of one loop on its device.
pub trait JobThreads {
    /// `jobs` jobs of `workload`, validated for the device and that many jobs, on threads of their own.
    fn run(
        &self,
        workload: &Workload,
        jobs: u32,
        observer: &mut dyn Observer,
    ) -> Result<ssdlab_engine::PhaseOutcome, DeviceError>;
}

/// Why a method could not run.
#[derive(Debug, thiserror::Error)]
pub enum MethodError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("{0}")]
    Invalid(String),
}

/// Everything a method produced.
#[derive(Debug, Clone)]
pub struct MethodOutcome {
    pub phases: Vec<PhaseResult>,
    /// The method's kind and analysis, with the session's notes.
    pub analysis: Analysis,
    pub verdict: Verdict,
    /// False when interrupted before the last phase finished.
    pub complete: bool,
}

/// One device, one observer, the phases run so far.
pub struct Session<'a> {
    pub device: &'a mut dyn Device,
    pub observer: &'a mut dyn MethodObserver,
    pub phases: Vec<PhaseResult>,
    /// Set when a phase was interrupted or failed: later phases are skipped.
    pub stopped: bool,
    /// The I/O failure that stopped the session, if one did ("phase NAME: what failed").
    pub failure: Option<String>,
    /// Notes for the analysis (e.g. "the device does not support discard").
    pub notes: Vec<String>,
    pub seed: u64,
    /// Where jobs get threads of their own; None: they run as lanes of one loop.
    job_threads: Option<&'a dyn JobThreads>,
}

impl<'a> Session<'a> {
    pub fn new(device: &'a mut dyn Device, observer: &'a mut dyn MethodObserver, seed: u64) -> Self {
        Session {
            device,
            observer,
            phases: Vec::new(),
            stopped: false,
            failure: None,
            notes: Vec::new(),
            seed,
            job_threads: None,
        }
    }

    /// This session's jobs get threads of their own from `threads` (a real device's siblings).
    pub fn with_job_threads(mut self, threads: Option<&'a dyn JobThreads>) -> Self {
        self.job_threads = threads;
        self
    }

    /// Whether a phase of several jobs runs them on threads of their own (else as submitters of one loop).
    pub fn jobs_on_threads(&self) -> bool {
        self.job_threads.is_some()
    }

    /// Runs one phase unless the session has stopped; returns its index in `phases`.
    pub fn phase(&mut self, name: &str, workload: &Workload) -> Result<Option<usize>, MethodError> {
        self.phase_jobs(name, workload, 1)
    }

    /// [`Session::phase`] with `jobs` copies of the workload side by side (fio's numjobs, the disk-mark tools'
    /// T), each with its own queue depth and offsets: on threads of their own where the session has them
    /// ([`Session::with_job_threads`]), else submitters of this one thread's device.
    pub fn phase_jobs(
        &mut self,
        name: &str,
        workload: &Workload,
        jobs: u32,
    ) -> Result<Option<usize>, MethodError> {
        if self.stopped {
            return Ok(None);
        }
        workload.validate(self.device.info())?;
        workload.validate_jobs(jobs)?;
        self.observer.begin_phase(name);
        let outcome = match self.job_threads {
            Some(threads) if jobs > 1 => threads.run(workload, jobs, &mut *self.observer)?,
            _ => run_jobs_ramped(self.device, workload, jobs, 0, self.observer)?,
        };
        Ok(Some(self.record(name, outcome)))
    }

    /// Replays a fitted trace as one phase unless the session has stopped; returns the phase's index and what
    /// only a replay measures (busy time, lateness).
    pub fn replay(
        &mut self,
        name: &str,
        plan: &ReplayPlan<'_>,
    ) -> Result<Option<(usize, ReplayFacts)>, MethodError> {
        if self.stopped {
            return Ok(None);
        }
        self.observer.begin_phase(name);
        let outcome = run_trace(self.device, plan, self.observer)?;
        let index = self.record(name, outcome.phase);
        Ok(Some((index, outcome.facts)))
    }

    /// Keeps a finished phase: CPU time, failure notes, the observer told, later phases skipped if it stopped.
    fn record(&mut self, name: &str, outcome: ssdlab_engine::PhaseOutcome) -> usize {
        let mut summary = outcome.summary;
        let (user, sys) = self.observer.phase_cpu();
        summary.cpu_user_s = user;
        summary.cpu_sys_s = sys;
        if let Some(failure) = &outcome.io_failure {
            self.fail(format!("phase {name}: {failure}"));
        }
        let phase = PhaseResult {
            name: name.to_string(),
            samples: outcome.samples,
            summary,
            complete: outcome.complete,
        };
        self.observer.end_phase(&phase);
        if !phase.complete {
            self.stopped = true;
        }
        self.phases.push(phase);
        self.phases.len() - 1
    }

    /// An operation failed: the session stops (later phases are skipped) and the failure is noted.
    pub fn fail(&mut self, failure: String) {
        self.stopped = true;
        self.notes.push(failure.clone());
        self.failure.get_or_insert(failure);
    }

    /// Why the session stopped, to begin a verdict's reason: an I/O error, or the caller's interruption.
    pub fn stop_reason(&self) -> String {
        match &self.failure {
            Some(failure) => format!("stopped by an I/O error ({failure})"),
            None => "interrupted".into(),
        }
    }

    /// The whole device rounded down to `align` bytes.
    /// Notes that `flag` asked for `asked_bytes`, more than the target's `available_bytes`, and what is used
    /// instead (`instead`: "the whole device is the span").
    pub fn note_larger_than_target(
        &mut self,
        flag: &str,
        asked_bytes: u64,
        available_bytes: u64,
        instead: &str,
    ) {
        self.notes.push(format!(
            "{flag} {} is larger than {} ({}): {instead}",
            BinaryBytes(asked_bytes),
            self.device.info().target,
            BinaryBytes(available_bytes)
        ));
    }

    pub fn whole_device(&self, align: u64) -> Span {
        let capacity = self.device.info().capacity_bytes;
        Span {
            offset_bytes: 0,
            len_bytes: capacity / align * align,
        }
    }

    /// Discards `span` (a purge: BLKDISCARD on a device, hole punching on a file, unmapping on the virtual SSD).
    /// Returns whether it purged: false, with a note, when the device cannot discard, and false when the purge
    /// did not complete (interrupted, or a discard failed: the session has stopped).
    pub fn purge(&mut self, span: Span) -> Result<bool, MethodError> {
        self.purge_as("purge", span)
    }

    /// [`Session::purge`] as a phase named `name` (a method that purges more than once names each).
    pub fn purge_as(&mut self, name: &str, span: Span) -> Result<bool, MethodError> {
        let info = self.device.info();
        if !info.discard_supported {
            self.notes.push(format!(
                "{} does not support discard: it was not purged, so results depend on its prior state",
                info.target
            ));
            return Ok(false);
        }
        if span.len_bytes == 0 {
            return Ok(true);
        }
        // The largest chunk (a power of two from 64 MiB down) that the device accepts and that divides the span,
        // so the whole span is discarded in equal pieces.
        let logical = info.logical_block_bytes.max(512) as u64;
        let limit = info.discard_max_bytes.max(logical);
        let Some(chunk) = (0..=17)
            .map(|shift| (64u64 << 20) >> shift)
            .find(|&c| c <= limit && c >= logical && span.len_bytes.is_multiple_of(c))
        else {
            return Err(MethodError::Invalid(format!(
                "cannot discard {} bytes in whole pieces of the {}-byte logical block",
                span.len_bytes, logical
            )));
        };
        let workload = Workload {
            rw: RwMode::Trim,
            block_bytes: chunk,
            queue_depth: 4,
            span,
            stop: StopAt {
                passes: Some(1),
                ..StopAt::default()
            },
            ..self.workload_base()
        };
        Ok(self
            .phase(name, &workload)?
            .is_some_and(|i| self.phases[i].complete))
    }

    /// A workload with this session's seed and neutral settings, to be filled in with struct update syntax.
    pub fn workload_base(&self) -> Workload {
        Workload {
            rw: RwMode::Write,
            mix_read_percent: 0,
            pattern: Pattern::Sequential,
            block_bytes: 128 << 10,
            queue_depth: 32,
            span: Span {
                offset_bytes: 0,
                len_bytes: 0,
            },
            stop: StopAt::default(),
            rate: None,
            seed: self.seed,
            verify: false,
        }
    }

    /// Reads `len` bytes at `offset` directly and says whether they are all zero (e.g. after a discard); None
    /// when the read failed, came back short or was refused, which stops the session as a failed phase does.
    pub fn reads_as_zero(&mut self, offset: u64, len: u64) -> Result<Option<bool>, MethodError> {
        self.device.prepare(1, len as usize)?;
        let read = Io {
            op: Op::Read,
            offset,
            len,
            slot: 0,
            tag: 0,
        };
        let what = |why: String| format!("reading {len} bytes at offset {offset} to check for zeroes: {why}");
        match self.device.complete(read) {
            Ok(done) if done.result == len as i64 => Ok(Some(self.device.buffer(0).iter().all(|&b| b == 0))),
            Ok(done) if done.result < 0 => {
                let err = std::io::Error::from_raw_os_error((-done.result) as i32);
                self.fail(what(err.to_string()));
                Ok(None)
            }
            Ok(done) => {
                self.fail(what(format!("only {} bytes came back", done.result)));
                Ok(None)
            }
            Err(e) => {
                self.fail(what(format!("the device refused it: {e}")));
                Ok(None)
            }
        }
    }

    /// Lets the device sit idle for `ns` (a real device sleeps; the virtual one does its background work).
    pub fn idle(&mut self, ns: u64) {
        let until = self.device.now_ns() + ns;
        self.device.wait_until(until);
    }

    /// Finishes the session into an outcome: `kind` is the [`Analysis`] variant of the method, `measured` its
    /// figures (None when it was stopped before it could measure), and the session's notes go with them.
    pub fn finish<T>(
        self,
        kind: fn(MethodAnalysis<T>) -> Analysis,
        measured: Option<T>,
        verdict: Verdict,
    ) -> MethodOutcome {
        let complete = !self.stopped;
        MethodOutcome {
            phases: self.phases,
            analysis: kind(MethodAnalysis {
                measured,
                notes: self.notes,
            }),
            verdict,
            complete,
        }
    }
}
