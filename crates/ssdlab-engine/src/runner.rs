//! The runner: keeps up to the queue depth of operations outstanding on a device until the workload's stop
//! condition, and accounts every completion.
//!
//! The hot loop allocates nothing: slots, the submission batch and the completion vector are sized once. Each
//! turn reads the device clock once, issues every operation that is due, and reaps at least one completion.
//! Under a rate limit each operation has an intended issue time on a fixed schedule; latency is measured from
//! that time, not from when a free slot finally let it go, so a stalled device cannot hide its stall by
//! slowing the schedule (no coordinated omission).

use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_core::histogram::SparseHistogram;
use ssdlab_core::rng::Rng;
use ssdlab_core::schema::{Sample, Summary};

use crate::access::Access;
use crate::accounting::Finished;
use crate::books::{PhaseBooks, reap_some};
use crate::data;
use crate::workload::Workload;

/// What the caller wants to see while a phase runs. Every method has a do-nothing default.
pub trait Observer {
    /// The phase is about to issue its first operation (buffers are prepared).
    fn started(&mut self) {}
    /// The measured part of the phase is over; a verify read-back (not measured) may follow.
    fn measured(&mut self) {}
    /// A one-second sample has closed.
    fn sample(&mut self, _sample: &Sample) {}
    /// A second of a phase run by several threads, as it runs: the jobs' seconds added up (operations, bytes and
    /// rates add; the latencies are the worst job's), for a live view only. The phase's samples, merged exactly
    /// from every job's histograms, come through [`Observer::sample`] once the jobs have ended.
    fn live(&mut self, _sample: &Sample) {}
    /// Progress through the phase, 0.0 to 1.0, called about once per second of device time.
    fn progress(&mut self, _fraction: f64) {}
    /// Polled every turn of the loop: true stops issuing, drains what is in flight, and ends the phase as
    /// incomplete.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// An observer that watches nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// A block whose data did not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    pub offset: u64,
    pub found: data::Found,
    pub bad_sectors: u32,
}

/// An operation the device failed, cut short or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFailure {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    /// Negative errno, or the short byte count.
    pub result: i64,
    /// Why the device refused to take the operation at all, when it did (it then never completed).
    pub refused: Option<String>,
}

impl std::fmt::Display for IoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = format!("{:?}", self.op).to_lowercase();
        if let Some(reason) = &self.refused {
            write!(
                f,
                "{op} of {} bytes at offset {} was refused by the device: {reason}",
                self.len, self.offset
            )
        } else if self.result < 0 {
            let err = std::io::Error::from_raw_os_error((-self.result) as i32);
            write!(
                f,
                "{op} of {} bytes at offset {} failed: {err}",
                self.len, self.offset
            )
        } else {
            write!(
                f,
                "{op} at offset {} transferred {} of {} bytes",
                self.offset, self.result, self.len
            )
        }
    }
}

/// Everything a phase produced.
#[derive(Debug, Clone)]
pub struct PhaseOutcome {
    pub samples: Vec<Sample>,
    /// One histogram per sample.
    pub histograms: Vec<SparseHistogram>,
    pub summary: Summary,
    /// False when the observer stopped the phase or an I/O failed.
    pub complete: bool,
    /// The first few verify failures (the summary counts them all).
    pub verify_failures: Vec<VerifyFailure>,
    /// The first I/O failure; the phase stops at it.
    pub io_failure: Option<IoFailure>,
    /// Passes every job completed over its span.
    pub passes: u64,
}

/// How many verify failures are kept in detail.
pub(crate) const VERIFY_DETAIL: usize = 16;

/// Per-slot facts the completion does not carry.
#[derive(Debug, Clone, Copy, Default)]
struct SlotState {
    offset: u64,
    len: u64,
    intended_ns: u64,
    /// For a verify-mode read: whether the block held its pattern (a completed write) when the read was issued.
    check: bool,
}

/// Runs one phase of `workload` on `device`. The workload must have been validated against the device.
pub fn run_phase<D: Device + ?Sized, O: Observer + ?Sized>(
    device: &mut D,
    workload: &Workload,
    observer: &mut O,
) -> Result<PhaseOutcome, DeviceError> {
    run_phase_ramped(device, workload, 0, observer)
}

/// [`run_phase`] after a ramp (fio's `ramp_time`): the workload runs for `ramp_ns` first, as the same stream of
/// operations, and nothing before the ramp's end is kept: no sample, no latency, no byte in the summary, no
/// device counter. The runtime is counted from the ramp's end; a byte or pass limit counts every operation, the
/// ramp's too, as fio's does. Operations in flight when the ramp ends are kept, as they complete after it.
pub fn run_phase_ramped<D: Device + ?Sized, O: Observer + ?Sized>(
    device: &mut D,
    workload: &Workload,
    ramp_ns: u64,
    observer: &mut O,
) -> Result<PhaseOutcome, DeviceError> {
    run_jobs_ramped(device, workload, 1, ramp_ns, observer)
}

/// [`run_phase_ramped`] with `jobs` copies of the workload (fio's numjobs, see [`Workload::job`]) submitting to
/// one device from this thread, each with its own queue depth of slots, offsets, rate schedule and limits. On a
/// virtual clock this is the only way to run jobs (they are simulated submitters, and a seed still replays
/// exactly); on a real device it measures what one core can drive (see `crate::jobs` for a thread per job).
/// The workload must have been validated for `jobs` ([`Workload::validate_jobs`]).
pub fn run_jobs_ramped<D: Device + ?Sized, O: Observer + ?Sized>(
    device: &mut D,
    workload: &Workload,
    jobs: u32,
    ramp_ns: u64,
    observer: &mut O,
) -> Result<PhaseOutcome, DeviceError> {
    let mut phase = Phase::prepare(device, workload, jobs, 0..jobs)?;
    observer.started();
    let start = Start {
        at_ns: device.now_ns(),
        ramp_ns,
        shared: false,
    };
    let books = phase.drive(device, start, observer)?;
    phase.finish(device, books, observer)
}

/// When a phase's loop starts, and how its measured part is timed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    /// The device clock at the start (the ramp's start, when there is one).
    pub(crate) at_ns: u64,
    pub(crate) ramp_ns: u64,
    /// Several loops on devices sharing one clock make one phase: each measures from the same instants (the start,
    /// or the ramp's end exactly), so their per-second windows line up and merge exactly. A loop alone measures
    /// from the first turn after the ramp, as it always has.
    pub(crate) shared: bool,
}

/// Books for a phase of `workload` measured from `start_ns`: under a rate limit they keep the device's own time
/// apart, and a mix of reads and writes states each direction in every second from the first one streamed (not
/// only once both have completed). Books of loops that will be merged keep every second as its own window.
fn books_for<D: Device + ?Sized>(device: &D, start_ns: u64, phase: &Phase, shared: bool) -> PhaseBooks {
    let mut books = PhaseBooks::open_at(device, start_ns);
    if phase.interval_ns.is_some() {
        books.track_service_time();
    }
    let workload = phase.workload;
    if workload.rw == crate::workload::RwMode::RandRw && (1..100).contains(&workload.mix_read_percent) {
        books.split_directions();
    }
    if shared {
        books.keep_every_second();
    }
    books
}

/// One job's stream of operations inside a phase: its own offsets, its own choice of read or write and data
/// stamps, its own slots (a run of the phase's), its own rate schedule and its own stop limit.
struct Lane {
    rng: Rng,
    access: Access,
    /// Where the job's span starts, in bytes, and its first block among the workload's (for the written map).
    offset_bytes: u64,
    first_block: u64,
    /// Operations to issue at most (None: until the runtime ends).
    block_limit: Option<u64>,
    issued: u64,
    /// Under a rate limit: the next intended issue time.
    next_intended: f64,
    /// Free slots of this lane.
    free: Vec<u32>,
}

impl Lane {
    fn limit_reached(&self) -> bool {
        self.block_limit.is_some_and(|l| self.issued >= l)
    }
}

/// One phase as it runs: the lanes (one per job), the slots and the operation each holds, what was written, and
/// the verify failures found. Everything is sized once, before the first operation: the hot loop allocates
/// nothing.
pub(crate) struct Phase<'w> {
    workload: &'w Workload,
    lanes: Vec<Lane>,
    /// The share of reads, in percent, and the operation that is not a read (write or discard).
    read_percent: u64,
    modifying_op: Op,
    /// Under a rate limit: nanoseconds between one job's intended issue times.
    interval_ns: Option<f64>,
    /// Which blocks of the workload's span this run wrote with the verify pattern: reads check only those, and
    /// a final pass reads every one of them back.
    written: Option<Vec<u64>>,
    slots: Vec<SlotState>,
    batch: Vec<Io>,
    completions: Vec<Completion>,
    verify_failures: Vec<VerifyFailure>,
    verify_errors: u64,
    stopped_early: bool,
}

impl<'w> Phase<'w> {
    /// Prepares the device's buffers (a queue depth of slots for each job in `lanes`, of `jobs` in all) and sizes
    /// everything the loop needs.
    pub(crate) fn prepare<D: Device + ?Sized>(
        device: &mut D,
        workload: &'w Workload,
        jobs: u32,
        lanes: std::ops::Range<u32>,
    ) -> Result<Self, DeviceError> {
        assert!(
            lanes.end <= jobs && !lanes.is_empty(),
            "lanes {lanes:?} of {jobs} jobs"
        );
        let qd = workload.queue_depth;
        let bs = workload.block_bytes;
        let slot_count = qd * lanes.len() as u32;
        device.prepare(slot_count, bs as usize)?;
        let read_percent = workload.rw.read_percent(workload.mix_read_percent) as u64;
        let modifying_op = workload.rw.modifying_op();
        let stamps = modifying_op == Op::Write && read_percent < 100 && !workload.verify;
        let mut built = Vec::with_capacity(lanes.len());
        for (i, job) in lanes.enumerate() {
            let one = workload.job(jobs, job);
            let mut rng = Rng::stream(one.seed, 0xDA7A);
            let first_slot = i as u32 * qd;
            if stamps {
                // Incompressible content once per buffer; each write then only stamps it unique.
                for slot in first_slot..first_slot + qd {
                    rng.fill(device.buffer_mut(slot));
                }
            }
            let blocks = one.blocks();
            let block_limit = {
                let by_bytes = one.stop.bytes.map(|b| b.div_ceil(bs));
                let by_passes = one.stop.passes.map(|p| p.saturating_mul(blocks));
                match (by_bytes, by_passes, one.stop.runtime_ns) {
                    (None, None, None) => Some(blocks),
                    (a, b, _) => a.into_iter().chain(b).min(),
                }
            };
            built.push(Lane {
                rng,
                access: Access::new(&one),
                offset_bytes: one.span.offset_bytes,
                first_block: (one.span.offset_bytes - workload.span.offset_bytes) / bs,
                block_limit,
                issued: 0,
                next_intended: 0.0,
                free: (first_slot..first_slot + qd).rev().collect(),
            });
        }
        Ok(Phase {
            workload,
            lanes: built,
            read_percent,
            modifying_op,
            interval_ns: workload.issue_interval_ns(),
            written: (workload.verify && modifying_op == Op::Write && read_percent < 100)
                .then(|| vec![0u64; workload.blocks().div_ceil(64) as usize]),
            slots: vec![SlotState::default(); slot_count as usize],
            batch: Vec::with_capacity(slot_count as usize),
            completions: Vec::with_capacity(2 * slot_count as usize),
            verify_failures: Vec::new(),
            verify_errors: 0,
            stopped_early: false,
        })
    }

    /// Runs the loop from `start` until the stop condition, a stop request or a failure, and returns its books,
    /// not yet closed.
    pub(crate) fn drive<D: Device + ?Sized, O: Observer + ?Sized>(
        &mut self,
        device: &mut D,
        start: Start,
        observer: &mut O,
    ) -> Result<PhaseBooks, DeviceError> {
        let workload = self.workload;
        let ramp_end_ns = start.at_ns.saturating_add(start.ramp_ns);
        let mut ramping = start.ramp_ns > 0;
        let mut start_ns = start.at_ns;
        let mut books = books_for(device, start_ns, self, start.shared);
        for lane in &mut self.lanes {
            lane.next_intended = start_ns as f64;
        }
        let mut deadline_ns = workload.stop.runtime_ns.map(|r| ramp_end_ns.saturating_add(r));
        let mut last_progress_s = 0u64;

        loop {
            let now = device.now_ns();
            if ramping && now >= ramp_end_ns {
                // The measured phase starts here: fresh books, the device's counters from now.
                ramping = false;
                start_ns = if start.shared { ramp_end_ns } else { now };
                books = books_for(device, start_ns, self, start.shared);
                deadline_ns = workload.stop.runtime_ns.map(|r| start_ns.saturating_add(r));
                last_progress_s = 0;
            }
            let mut issuing = books.io_failure.is_none();
            if deadline_ns.is_some_and(|d| now >= d) || self.limit_reached() {
                issuing = false;
            } else if issuing && observer.stop_requested() {
                self.stopped_early = true;
                issuing = false;
            }

            self.batch.clear();
            if issuing {
                self.fill_batch(device, now);
            }
            self.submit_batch(device, &mut books);

            if device.in_flight() == 0 {
                if !issuing || self.limit_reached() {
                    break;
                }
                if self.interval_ns.is_some() {
                    // Idle until the next operation is due; the device learns the host is idle.
                    let due = (self.next_due(false) as u64).min(deadline_ns.unwrap_or(u64::MAX));
                    device.wait_until(due);
                }
                continue;
            }

            let reap_deadline = (self.interval_ns.is_some() && issuing)
                .then(|| self.next_due(true))
                .filter(|due| due.is_finite())
                .map(|due| due as u64);
            let last_completed = reap_some(device, reap_deadline, &mut self.completions, now)?;
            if ramping && start.shared && last_completed >= ramp_end_ns {
                // Loops measured together switch books at the ramp's end exactly: what completed before it is
                // the ramp's, what completed after it is the first second's, even within one reap.
                self.account_completions_where(device, &mut books, |c| c.completed_ns < ramp_end_ns);
                ramping = false;
                start_ns = ramp_end_ns;
                books = books_for(device, start_ns, self, true);
                deadline_ns = workload.stop.runtime_ns.map(|r| start_ns.saturating_add(r));
                last_progress_s = 0;
                self.account_completions_where(device, &mut books, |c| c.completed_ns >= ramp_end_ns);
            } else {
                self.account_completions_where(device, &mut books, |_| true);
            }

            if ramping {
                // Nothing of the ramp is shown or kept.
                continue;
            }
            books.stream(observer);
            let elapsed_s = last_completed.saturating_sub(start_ns) / 1_000_000_000;
            if elapsed_s > last_progress_s {
                last_progress_s = elapsed_s;
                observer.progress(self.progress(now - start_ns));
            }
        }
        if ramping {
            // The limits ended the phase inside its ramp: nothing was measured, and nothing of the ramp is kept.
            // Loops measured together all measure from the ramp's end, so their books still line up.
            let at = if start.shared {
                ramp_end_ns
            } else {
                device.now_ns()
            };
            books = books_for(device, at, self, start.shared);
        }
        Ok(books)
    }

    /// Submits the batch. A device that refuses it ends the phase as a failed operation would: the slots it did
    /// not take are free again, and what it did take is drained by the loop.
    fn submit_batch<D: Device + ?Sized>(&mut self, device: &mut D, books: &mut PhaseBooks) {
        if self.batch.is_empty() {
            return;
        }
        let accepted = books.submit(device, &self.batch);
        assert!(
            accepted == self.batch.len() || books.io_failure.is_some(),
            "devices accept up to their prepared slot count"
        );
        for io in &self.batch[accepted..] {
            let lane = (io.slot / self.workload.queue_depth) as usize;
            self.lanes[lane].free.push(io.slot);
        }
    }

    /// Whether every operation the stop condition allows has been issued, in every lane.
    fn limit_reached(&self) -> bool {
        self.lanes.iter().all(Lane::limit_reached)
    }

    /// Under a rate limit, the earliest intended issue time of a lane that still issues (with a free slot, when
    /// `with_free_slot`); infinity when there is none.
    fn next_due(&self, with_free_slot: bool) -> f64 {
        self.lanes
            .iter()
            .filter(|l| !l.limit_reached() && (!with_free_slot || !l.free.is_empty()))
            .map(|l| l.next_intended)
            .fold(f64::INFINITY, f64::min)
    }

    /// The fraction of the phase done, by whichever limit is closest to ending it.
    fn progress(&self, elapsed_ns: u64) -> f64 {
        let issued: u64 = self.lanes.iter().map(|l| l.issued).sum();
        let limit: Option<u64> = self.lanes.iter().map(|l| l.block_limit).sum();
        progress(self.workload, issued, limit, elapsed_ns)
    }

    /// Fills the batch with every operation that is due and has a free slot, each buffer made ready.
    fn fill_batch<D: Device + ?Sized>(&mut self, device: &mut D, now: u64) {
        let workload = self.workload;
        let bs = workload.block_bytes;
        for lane in &mut self.lanes {
            while !lane.free.is_empty() && !lane.limit_reached() {
                let intended_ns = match self.interval_ns {
                    Some(interval) => {
                        if lane.next_intended > now as f64 {
                            break;
                        }
                        let t = lane.next_intended as u64;
                        lane.next_intended += interval;
                        t
                    }
                    None => now,
                };
                let slot = lane.free.pop().expect("checked non-empty");
                let block = lane.access.next_block();
                let offset = lane.offset_bytes + block * bs;
                let tag = lane.first_block + block;
                let op = if self.read_percent == 100
                    || (self.read_percent > 0 && lane.rng.below(100) < self.read_percent)
                {
                    Op::Read
                } else {
                    self.modifying_op
                };
                if op == Op::Write {
                    let buf = device.buffer_mut(slot);
                    if workload.verify {
                        data::write_pattern(buf, offset, workload.seed);
                    } else {
                        data::stamp(buf, &mut lane.rng);
                    }
                }
                // A read is checked only if the block's pattern was on the device when it was issued: a write
                // still in flight may or may not be seen by a concurrent read.
                let check = op == Op::Read
                    && workload.verify
                    && self.written.as_ref().is_none_or(|bits| bit(bits, tag));
                self.slots[slot as usize] = SlotState {
                    offset,
                    len: bs,
                    intended_ns,
                    check,
                };
                self.batch.push(Io {
                    op,
                    offset,
                    len: bs,
                    slot,
                    tag,
                });
                lane.issued += 1;
            }
        }
    }

    /// Accounts the reaped completions that `which` picks: frees their slots, books their latency (from the
    /// intended issue time under a rate limit), marks written blocks and checks verified reads.
    fn account_completions_where<D: Device + ?Sized>(
        &mut self,
        device: &D,
        books: &mut PhaseBooks,
        which: impl Fn(&Completion) -> bool,
    ) {
        let qd = self.workload.queue_depth;
        for c in self.completions.iter().filter(|c| which(c)) {
            let state = self.slots[c.slot as usize];
            self.lanes[(c.slot / qd) as usize].free.push(c.slot);
            let began_ns = if self.interval_ns.is_some() {
                state.intended_ns
            } else {
                c.submitted_ns
            };
            let latency_ns = c.completed_ns.saturating_sub(began_ns);
            if !books.complete(c, state.offset, state.len, latency_ns) {
                continue;
            }
            if c.op == Op::Write
                && let Some(bits) = self.written.as_mut()
            {
                bits[(c.tag / 64) as usize] |= 1 << (c.tag % 64);
            }
            if state.check {
                let mut failures = Failures {
                    detail: &mut self.verify_failures,
                    count: &mut self.verify_errors,
                };
                failures.check(device.buffer(c.slot), state.offset, self.workload.seed);
            }
        }
    }

    /// Closes the books and, when the run wrote with verify and ended well, reads every written block back.
    pub(crate) fn finish<D: Device + ?Sized, O: Observer + ?Sized>(
        self,
        device: &mut D,
        books: PhaseBooks,
        observer: &mut O,
    ) -> Result<PhaseOutcome, DeviceError> {
        let closing = books.closing(device);
        let (finished, io_failure) = closing.close(self.workload.stop.runtime_ns, observer);
        let ended = self.end(device, io_failure.is_none(), observer)?;
        Ok(ended.outcome(finished, io_failure))
    }

    /// After the measured part: the verify read-back of every written block (when the run wrote with verify and
    /// `ended_well`), and what the lanes did.
    pub(crate) fn end<D: Device + ?Sized, O: Observer + ?Sized>(
        mut self,
        device: &mut D,
        ended_well: bool,
        observer: &O,
    ) -> Result<Ended, DeviceError> {
        if let Some(bits) = &self.written
            && ended_well
            && !self.stopped_early
        {
            let mut failures = Failures {
                detail: &mut self.verify_failures,
                count: &mut self.verify_errors,
            };
            if !verify_pass(
                device,
                self.workload,
                bits,
                &mut self.slots,
                &mut failures,
                observer,
            )? {
                self.stopped_early = true;
            }
        }
        Ok(Ended {
            verify_failures: self.verify_failures,
            verify_errors: self.verify_errors,
            complete: !self.stopped_early,
            passes: self
                .lanes
                .iter()
                .map(|l| l.access.passes_completed())
                .min()
                .expect("a phase has a lane"),
        })
    }
}

/// What a phase's lanes leave once its measured part and verify read-back are over.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) verify_failures: Vec<VerifyFailure>,
    pub(crate) verify_errors: u64,
    /// False when a stop request ended it.
    pub(crate) complete: bool,
    /// Passes every job completed over its span.
    pub(crate) passes: u64,
}

impl Ended {
    /// The phase's outcome: its closed books (`finished`, with the failure that stopped it, if one did) and what
    /// the lanes left.
    pub(crate) fn outcome(self, mut finished: Finished, io_failure: Option<IoFailure>) -> PhaseOutcome {
        finished.summary.verify_errors = self.verify_errors;
        PhaseOutcome {
            samples: finished.samples,
            histograms: finished.histograms,
            summary: finished.summary,
            complete: self.complete && io_failure.is_none(),
            verify_failures: self.verify_failures,
            io_failure,
            passes: self.passes,
        }
    }
}

/// Where verify failures are counted and the first few kept.
struct Failures<'a> {
    detail: &'a mut Vec<VerifyFailure>,
    count: &'a mut u64,
}

impl Failures<'_> {
    fn check(&mut self, buf: &[u8], offset: u64, seed: u64) {
        if let Err(m) = data::check_pattern(buf, offset, seed) {
            *self.count += 1;
            if self.detail.len() < VERIFY_DETAIL {
                self.detail.push(VerifyFailure {
                    offset: m.offset,
                    found: m.found,
                    bad_sectors: m.bad_sectors,
                });
            }
        }
    }
}

/// Reads back every block marked in `written`, in order at the workload's queue depth, and checks it. This is
/// verification, not measurement: it is not part of the phase's statistics. A read that fails, comes back short
/// or is refused counts as a failed block. Returns false when the observer stopped it.
fn verify_pass<D: Device + ?Sized, O: Observer + ?Sized>(
    device: &mut D,
    workload: &Workload,
    written: &[u64],
    slots: &mut [SlotState],
    failures: &mut Failures<'_>,
    observer: &O,
) -> Result<bool, DeviceError> {
    let bs = workload.block_bytes;
    let mut blocks = (0..workload.blocks()).filter(|&b| bit(written, b));
    let mut free: Vec<u32> = (0..workload.queue_depth).rev().collect();
    let mut batch = Vec::with_capacity(free.len());
    let mut completions = Vec::with_capacity(2 * free.len());
    let mut exhausted = false;
    let mut stopped = false;
    loop {
        batch.clear();
        if !exhausted && observer.stop_requested() {
            exhausted = true;
            stopped = true;
        }
        while !exhausted && !free.is_empty() {
            let Some(block) = blocks.next() else {
                exhausted = true;
                break;
            };
            let slot = free.pop().expect("checked non-empty");
            let offset = workload.span.offset_bytes + block * bs;
            slots[slot as usize] = SlotState {
                offset,
                len: bs,
                intended_ns: 0,
                check: true,
            };
            batch.push(Io {
                op: Op::Read,
                offset,
                len: bs,
                slot,
                tag: block,
            });
        }
        if !batch.is_empty() {
            // A read-back the device refuses is a block that could not be verified: counted, and the pass goes
            // on (a device that refuses every read gets every remaining block counted).
            let before = device.in_flight();
            if device.submit(&batch).is_err() {
                let taken = device.in_flight().saturating_sub(before).min(batch.len());
                for io in &batch[taken..] {
                    free.push(io.slot);
                    *failures.count += 1;
                }
            }
        }
        if device.in_flight() == 0 {
            if !exhausted {
                continue;
            }
            return Ok(!stopped);
        }
        completions.clear();
        device.reap(1, None, &mut completions)?;
        for c in &completions {
            free.push(c.slot);
            let offset = slots[c.slot as usize].offset;
            if c.result != bs as i64 {
                *failures.count += 1;
                continue;
            }
            failures.check(device.buffer(c.slot), offset, workload.seed);
        }
    }
}

/// Whether bit `index` is set.
#[inline]
fn bit(bits: &[u64], index: u64) -> bool {
    bits[(index / 64) as usize] & (1 << (index % 64)) != 0
}

/// The fraction of the phase done, by whichever limit is closest to ending it.
fn progress(workload: &Workload, issued: u64, block_limit: Option<u64>, elapsed_ns: u64) -> f64 {
    let by_blocks = block_limit.map(|l| issued as f64 / l.max(1) as f64);
    let by_time = workload
        .stop
        .runtime_ns
        .map(|r| elapsed_ns as f64 / r.max(1) as f64);
    by_blocks.into_iter().chain(by_time).fold(0.0, f64::max).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Pattern, RwMode, Span, StopAt};
    use ssdlab_core::units::Rate;
    use ssdlab_testdev::MemDevice;

    fn workload(rw: RwMode, span_bytes: u64) -> Workload {
        Workload {
            rw,
            mix_read_percent: 50,
            pattern: if rw.is_random() {
                Pattern::Random { random_map: true }
            } else {
                Pattern::Sequential
            },
            block_bytes: 4096,
            queue_depth: 8,
            span: Span {
                offset_bytes: 0,
                len_bytes: span_bytes,
            },
            stop: StopAt::default(),
            rate: None,
            seed: 5,
            verify: false,
        }
    }

    #[test]
    fn one_pass_touches_every_block_once() {
        let mut dev = MemDevice::new(1 << 20, 100_000);
        let out = run_phase(&mut dev, &workload(RwMode::RandWrite, 1 << 20), &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 256);
        assert_eq!(out.summary.bytes, 1 << 20);
        assert_eq!(out.passes, 1);
        let mut offsets: Vec<u64> = dev.log().iter().map(|&(_, offset, _)| offset).collect();
        offsets.sort_unstable();
        assert_eq!(offsets, (0..256).map(|b| b * 4096).collect::<Vec<_>>());
        assert!(out.complete);
        assert!(
            (out.summary.qd_mean - 8.0).abs() < 0.5,
            "qd_mean {}",
            out.summary.qd_mean
        );
    }

    #[test]
    fn jobs_each_run_the_whole_workload_with_offsets_of_their_own() {
        // Three jobs of one pass each touch every block once: three times the blocks, in three orders.
        let mut dev = MemDevice::new(1 << 20, 100_000);
        let w = workload(RwMode::RandWrite, 1 << 20);
        let out = run_jobs_ramped(&mut dev, &w, 3, 0, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 3 * 256);
        assert_eq!(out.passes, 1);
        let log = dev.log();
        let mut offsets: Vec<u64> = log.iter().map(|&(_, offset, _)| offset).collect();
        offsets.sort_unstable();
        let each: Vec<u64> = (0..256).flat_map(|b| [b * 4096; 3]).collect();
        assert_eq!(offsets, each);
        // 24 slots in flight, not 8; and the jobs' orders differ (their own seeds), job 0's is the one-job order.
        assert!(
            (out.summary.qd_mean - 24.0).abs() < 1.0,
            "qd_mean {}",
            out.summary.qd_mean
        );
        let mut alone = MemDevice::new(1 << 20, 100_000);
        run_phase(&mut alone, &w, &mut Quiet).unwrap();
        let first_of = |log: &[(ssdlab_core::device::Op, u64, u64)], n: usize| -> Vec<u64> {
            log.iter().take(n).map(|&(_, o, _)| o).collect()
        };
        assert_eq!(
            first_of(log, 8),
            first_of(alone.log(), 8),
            "job 0 issues first, as one job would"
        );
        assert_ne!(
            first_of(log, 8),
            first_of(&log[8..], 8),
            "job 1 has offsets of its own"
        );
        // A byte limit is each job's, as fio's is.
        let mut dev = MemDevice::new(1 << 20, 1000);
        let limited = Workload {
            stop: StopAt {
                bytes: Some(40 * 4096),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 20)
        };
        let out = run_jobs_ramped(&mut dev, &limited, 2, 0, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 80);
    }

    #[test]
    fn jobs_that_verify_write_and_check_their_own_shares() {
        let mut dev = MemDevice::new(1 << 20, 1000);
        let w = Workload {
            verify: true,
            ..workload(RwMode::RandWrite, 1 << 20)
        };
        let out = run_jobs_ramped(&mut dev, &w, 3, 0, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 256, "the shares cover the span once");
        assert_eq!(out.summary.verify_errors, 0);
        let writes: Vec<u64> = dev
            .log()
            .iter()
            .filter(|&&(op, _, _)| op == Op::Write)
            .map(|&(_, o, _)| o)
            .collect();
        let mut sorted = writes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 256, "every block written once");
        // A corrupted block in any job's share is found by a read of all of them.
        dev.data_mut()[900_000] ^= 0x10;
        let read = Workload {
            verify: true,
            ..workload(RwMode::RandRead, 1 << 20)
        };
        let out = run_jobs_ramped(&mut dev, &read, 3, 0, &mut Quiet).unwrap();
        assert_eq!(out.summary.verify_errors, 1);
        assert_eq!(out.verify_failures[0].offset, 900_000 / 512 * 512);
    }

    #[test]
    fn a_rate_is_each_jobs() {
        let mut dev = MemDevice::new(1 << 30, 10_000);
        let w = Workload {
            queue_depth: 1,
            rate: Some(Rate::Iops(1000.0)),
            stop: StopAt {
                runtime_ns: Some(1_000_000_000),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 30)
        };
        let out = run_jobs_ramped(&mut dev, &w, 4, 0, &mut Quiet).unwrap();
        assert!(
            (3996..=4004).contains(&out.summary.ios),
            "{} ios",
            out.summary.ios
        );
        assert_eq!(out.summary.latency_ns.max, 10_000, "the jobs' schedules are met");
    }

    #[test]
    fn byte_and_pass_limits_are_exact() {
        let mut dev = MemDevice::new(1 << 20, 1000);
        let w = Workload {
            stop: StopAt {
                bytes: Some(100 << 10),
                ..StopAt::default()
            },
            ..workload(RwMode::Read, 1 << 20)
        };
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 25);
        let w = Workload {
            stop: StopAt {
                passes: Some(3),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRw, 64 << 10)
        };
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 48);
        assert_eq!(out.passes, 3);
        let reads = out.summary.read.map_or(0, |d| d.ios);
        assert!((10..=38).contains(&reads), "a 50% mix gave {reads} reads of 48");
    }

    /// Random 4 KiB reads over 1 GiB for two seconds of the device's clock.
    fn two_seconds_of_random_reads() -> Workload {
        Workload {
            stop: StopAt {
                runtime_ns: Some(2_000_000_000),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 30)
        }
    }

    #[test]
    fn runtime_runs_on_the_device_clock() {
        let mut dev = MemDevice::new(1 << 30, 100_000);
        let w = two_seconds_of_random_reads();
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        // 8 slots, 100 us each: 80,000 IOPS for two virtual seconds.
        assert_eq!(out.summary.ios, 160_000);
        assert_eq!(out.samples.len(), 2);
        // Completions at exactly t = 1 s belong to the second window.
        assert_eq!(out.samples[0].ios, 79_992);
        assert_eq!(out.summary.latency_ns.p50, 100_000);
    }

    /// fio's ramp_time: the ramp runs first, on the same device clock, and nothing of it is kept; the runtime
    /// is counted from its end. A limit that ends the phase inside the ramp leaves nothing measured.
    #[test]
    fn a_ramp_runs_first_and_nothing_of_it_is_kept() {
        let mut dev = MemDevice::new(1 << 30, 100_000);
        let w = two_seconds_of_random_reads();
        let out = run_phase_ramped(&mut dev, &w, 3_000_000_000, &mut Quiet).unwrap();
        // Two measured seconds at 80,000 IOPS (8 slots of 100 us); the ramp's 240,000 reads were issued too.
        assert_eq!(out.samples.len(), 2);
        assert!(
            (out.summary.seconds - 2.0).abs() < 1e-3,
            "{}",
            out.summary.seconds
        );
        assert!(out.summary.ios.abs_diff(160_000) <= 8, "{}", out.summary.ios);
        assert!(dev.log().len() >= 400_000, "{} reads in all", dev.log().len());
        assert!(out.complete);
        // A byte limit inside the ramp: the phase ends there, and nothing is measured.
        let short = Workload {
            stop: StopAt {
                bytes: Some(1 << 20),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 30)
        };
        let out = run_phase_ramped(&mut dev, &short, 3_000_000_000, &mut Quiet).unwrap();
        assert_eq!(out.summary.ios, 0);
        assert!(out.samples.iter().all(|s| s.ios == 0), "{:?}", out.samples.len());
    }

    #[test]
    fn verify_catches_a_corrupted_block() {
        let mut dev = MemDevice::new(1 << 20, 1000);
        let w = Workload {
            verify: true,
            ..workload(RwMode::RandWrite, 1 << 20)
        };
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert_eq!(
            out.summary.verify_errors, 0,
            "the write pass reads its own blocks back"
        );
        let read = Workload {
            verify: true,
            ..workload(RwMode::Read, 1 << 20)
        };
        assert_eq!(
            run_phase(&mut dev, &read, &mut Quiet)
                .unwrap()
                .summary
                .verify_errors,
            0
        );
        dev.data_mut()[40_000] ^= 0x10;
        let out = run_phase(&mut dev, &read, &mut Quiet).unwrap();
        assert_eq!(out.summary.verify_errors, 1);
        assert_eq!(out.verify_failures[0].offset, 40_000 / 512 * 512);
        dev.data_mut()[70_000] ^= 0x10;
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert_eq!(out.summary.verify_errors, 0, "a rewrite heals the block");
    }

    #[test]
    fn rate_limit_measures_from_the_intended_time() {
        // A device that takes 5 ms per operation at QD1 cannot keep up with 1000 IOPS: operations queue up
        // behind it and their latency, measured from when they were due, grows far beyond 5 ms.
        let mut dev = MemDevice::new(1 << 30, 5_000_000);
        let w = Workload {
            queue_depth: 1,
            rate: Some(Rate::Iops(1000.0)),
            stop: StopAt {
                runtime_ns: Some(1_000_000_000),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 30)
        };
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert!(
            out.summary.latency_ns.p99 > 500_000_000,
            "p99 {}",
            out.summary.latency_ns.p99
        );
        // The device's own part is its 5 ms; the rest was waiting to be issued.
        let device = out
            .summary
            .device_latency_ns
            .as_ref()
            .expect("kept under a rate limit");
        assert_eq!((device.min, device.max), (5_000_000, 5_000_000));
        // A fast device meets the schedule: about 1000 operations, each 10 us.
        let mut dev = MemDevice::new(1 << 30, 10_000);
        let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
        assert!((999..=1001).contains(&out.summary.ios), "{} ios", out.summary.ios);
        assert_eq!(out.summary.latency_ns.max, 10_000);
    }

    #[test]
    fn stop_request_ends_the_phase_incomplete() {
        struct StopAfterFirst(bool);
        impl Observer for StopAfterFirst {
            fn sample(&mut self, _: &Sample) {
                self.0 = true;
            }
            fn stop_requested(&self) -> bool {
                self.0
            }
        }
        let mut dev = MemDevice::new(1 << 30, 100_000);
        let w = Workload {
            stop: StopAt {
                runtime_ns: Some(10_000_000_000),
                ..StopAt::default()
            },
            ..workload(RwMode::RandRead, 1 << 30)
        };
        let out = run_phase(&mut dev, &w, &mut StopAfterFirst(false)).unwrap();
        assert!(!out.complete);
        assert!(out.samples.len() <= 2);
    }
}
