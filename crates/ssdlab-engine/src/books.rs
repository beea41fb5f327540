//! What every phase keeps around its issue loop, whatever decides what to issue (a workload or a trace): the
//! accounting, the device's counters at the start, the check of each completion's result, the samples streamed
//! to the observer as their windows close, and the summary with the device's and cache's counters over the
//! phase. It never issues anything.

use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_core::schema::{CacheStats, DeviceCounters};

use crate::accounting::{Accounting, Finished};
use crate::runner::{IoFailure, Observer};

/// Reaps at least one completion into `completions` (cleared first), waiting no later than `deadline` when
/// there is one, and returns the newest completion time (at least `now`): the clock the loop's progress reads.
pub(crate) fn reap_some<D: Device + ?Sized>(
    device: &mut D,
    deadline: Option<u64>,
    completions: &mut Vec<Completion>,
    now: u64,
) -> Result<u64, DeviceError> {
    completions.clear();
    device.reap(1, deadline, completions)?;
    Ok(completions
        .iter()
        .map(|c| c.completed_ns)
        .max()
        .unwrap_or(now)
        .max(now))
}

pub(crate) struct PhaseBooks {
    accounting: Accounting,
    counters_before: Option<DeviceCounters>,
    cache_before: Option<CacheStats>,
    streamed: usize,
    pub(crate) io_errors: u64,
    /// The first failed operation; the phase stops issuing at it.
    pub(crate) io_failure: Option<IoFailure>,
}

impl PhaseBooks {
    /// Books for a phase starting now on `device`.
    pub(crate) fn open<D: Device + ?Sized>(device: &D) -> Self {
        Self::open_at(device, device.now_ns())
    }

    /// Books for a phase on `device` whose seconds count from `start_ns` (its counters are read now).
    pub(crate) fn open_at<D: Device + ?Sized>(device: &D, start_ns: u64) -> Self {
        PhaseBooks {
            accounting: Accounting::new(start_ns),
            counters_before: device.counters(),
            cache_before: device.cache_stats(),
            streamed: 0,
            io_errors: 0,
            io_failure: None,
        }
    }

    /// See [`Accounting::split_directions`].
    pub(crate) fn split_directions(&mut self) {
        self.accounting.split_directions();
    }

    /// See [`Accounting::keep_every_second`].
    pub(crate) fn keep_every_second(&mut self) {
        self.accounting.keep_every_second();
    }

    /// See [`Accounting::track_service_time`].
    pub(crate) fn track_service_time(&mut self) {
        self.accounting.track_service_time();
    }

    /// Accounts completion `c` of `len` bytes at `offset` with `latency_ns`, or counts it as failed (a negative
    /// result, or a short transfer; a flush succeeds with any non-negative result). Returns whether it succeeded.
    pub(crate) fn complete(&mut self, c: &Completion, offset: u64, len: u64, latency_ns: u64) -> bool {
        let expected = if c.op == Op::Flush { 0 } else { len as i64 };
        if c.result != expected && !(c.op == Op::Flush && c.result >= 0) {
            self.io_errors += 1;
            self.io_failure.get_or_insert(IoFailure {
                op: c.op,
                offset,
                len,
                result: c.result,
                refused: None,
            });
            return false;
        }
        self.accounting
            .record(c.op, len, latency_ns, c.submitted_ns, c.completed_ns);
        true
    }

    /// Submits `batch` and returns how many operations the device took. A device that refuses it with an error
    /// is an I/O failure of the phase, like a failed completion: the first operation it did not take is named,
    /// the caller frees the slots of those it did not take, and the loop stops issuing and drains what the
    /// device did take (told apart by what is in flight, since a device may take part of a batch before it
    /// fails).
    pub(crate) fn submit<D: Device + ?Sized>(&mut self, device: &mut D, batch: &[Io]) -> usize {
        let before = device.in_flight();
        let error = match device.submit(batch) {
            Ok(accepted) => return accepted,
            Err(e) => e,
        };
        let taken = device.in_flight().saturating_sub(before).min(batch.len());
        let first = batch[taken];
        self.io_errors += 1;
        let errno = error.errno();
        self.io_failure.get_or_insert(IoFailure {
            op: first.op,
            offset: first.offset,
            len: first.len,
            result: -i64::from(errno),
            refused: Some(error.to_string()),
        });
        taken
    }

    /// Shows the observer every window closed since the last call but the newest, which the phase's short tail
    /// may still be folded into.
    pub(crate) fn stream<O: Observer + ?Sized>(&mut self, observer: &mut O) {
        let streamable = self.accounting.windows_closed().saturating_sub(1);
        if streamable > self.streamed {
            for sample in self
                .accounting
                .samples_since(self.streamed)
                .take(streamable - self.streamed)
            {
                observer.sample(&sample);
            }
            self.streamed = streamable;
        }
    }

    /// The books as the phase's measured part ends now: the device's and cache's counters over it are read,
    /// and nothing more is accounted.
    pub(crate) fn closing<D: Device + ?Sized>(self, device: &D) -> Closing {
        Closing {
            end_ns: device.now_ns(),
            device: device
                .counters()
                .zip(self.counters_before)
                .map(|(after, before)| after.since(&before)),
            cache: device
                .cache_stats()
                .zip(self.cache_before)
                .map(|(after, before)| after.since(&before)),
            accounting: self.accounting,
            streamed: self.streamed,
            io_errors: self.io_errors,
            io_failure: self.io_failure,
        }
    }
}

/// A phase's books once its measured part has ended, before its samples and summary are drawn: the books of
/// several loops that ran one phase together (a thread per job) are merged here.
pub(crate) struct Closing {
    accounting: Accounting,
    end_ns: u64,
    device: Option<DeviceCounters>,
    cache: Option<CacheStats>,
    streamed: usize,
    io_errors: u64,
    io_failure: Option<IoFailure>,
}

impl Closing {
    /// Folds in the books of another loop of the same phase, measured from the same instant on the same clock:
    /// every second's operations, bytes and latencies add exactly, the phase ends when the later one did, and
    /// the first failure kept is this one's (or the other's, when this one had none). Devices with counters of
    /// their own (the simulator, a cache) never run as several loops.
    pub(crate) fn absorb(&mut self, other: Closing) {
        assert!(
            self.device.is_none() && other.device.is_none() && self.cache.is_none() && other.cache.is_none(),
            "loops merged into one phase run on devices without counters of their own"
        );
        self.accounting.absorb(other.accounting);
        self.end_ns = self.end_ns.max(other.end_ns);
        self.streamed = 0;
        self.io_errors += other.io_errors;
        if self.io_failure.is_none() {
            self.io_failure = other.io_failure;
        }
    }

    /// Marks every sample unshown: a job's loop shows its own seconds to no one, since one job's second is not
    /// the phase's.
    pub(crate) fn none_shown(&mut self) {
        self.streamed = 0;
    }

    /// Whether an operation failed in the phase.
    pub(crate) fn failed(&self) -> bool {
        self.io_failure.is_some()
    }

    /// Ends the phase: the samples and summary (with the device's and cache's counters over the phase and the
    /// failed operations), the rest of the samples shown, progress complete.
    pub(crate) fn close<O: Observer + ?Sized>(
        self,
        runtime_ns: Option<u64>,
        observer: &mut O,
    ) -> (Finished, Option<IoFailure>) {
        let mut finished = self.accounting.finish(self.end_ns, runtime_ns);
        finished.summary.device = self.device;
        finished.summary.cache = self.cache;
        finished.summary.io_errors = self.io_errors;
        for sample in finished.samples.iter().skip(self.streamed) {
            observer.sample(sample);
        }
        observer.progress(1.0);
        observer.measured();
        (finished, self.io_failure)
    }
}
