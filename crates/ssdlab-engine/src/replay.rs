//! The trace runner: issues a trace's operations on a device at the trace's times (open loop) or as fast as the
//! slots allow, and accounts every completion like the workload runner does.
//!
//! Open loop: each operation is due at the phase start plus its trace time; latency is measured from that due
//! time, so a device that falls behind is charged for the wait (no coordinated omission), and how late each
//! issue was is kept as the replay's fidelity. Busy time (at least one operation in flight) is measured for the
//! storage bench's average data rate. The caller fits the trace to the device first: every operation must be
//! within the device and aligned to its logical block.

use ssdlab_core::Histogram;
use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_core::rng::Rng;
use ssdlab_core::trace::TraceOp;

use crate::books::{PhaseBooks, reap_some};
use crate::data;
use crate::runner::{Observer, PhaseOutcome};

/// What to replay and how.
#[derive(Debug, Clone, Copy)]
pub struct ReplayPlan<'a> {
    /// In time order, fitted to the device.
    pub ops: &'a [TraceOp],
    /// Ignore the trace's times: issue whenever a slot is free.
    pub as_fast_as_possible: bool,
    /// The most operations in flight.
    pub queue_depth: u32,
    pub seed: u64,
}

/// A replay's phase and what only a replay measures.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    pub phase: PhaseOutcome,
    pub facts: ReplayFacts,
}

/// What only a replay measures.
#[derive(Debug, Clone)]
pub struct ReplayFacts {
    /// Time with at least one operation in flight.
    pub busy_ns: u64,
    /// How late each operation was issued against its trace time (None when as fast as possible).
    pub lateness: Option<Histogram>,
    /// Operations issued (all of them unless stopped or failed), in trace order.
    pub issued: u64,
    /// Mean time from submission to completion: the device's own time, without any wait for a free slot (None
    /// when no operation completed: nothing was measured).
    pub device_time_ns_mean: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct SlotState {
    offset: u64,
    len: u64,
    intended_ns: u64,
}

/// Replays `plan` on `device`.
pub fn run_trace<D: Device + ?Sized, O: Observer + ?Sized>(
    device: &mut D,
    plan: &ReplayPlan<'_>,
    observer: &mut O,
) -> Result<ReplayOutcome, DeviceError> {
    let mut replay = Replay::prepare(device, plan)?;
    observer.started();
    let mut books = PhaseBooks::open(device);
    let start_ns = device.now_ns();
    replay.start_ns = start_ns;
    // A real device sleeps through the trace's idle gaps; in slices, so Ctrl-C is heard within one.
    let slice_ns = match device.info().clock {
        ssdlab_core::device::ClockKind::Real => 100_000_000,
        ssdlab_core::device::ClockKind::Virtual => u64::MAX,
    };
    let mut last_progress_s = 0u64;

    loop {
        let now = device.now_ns();
        let mut issuing = books.io_failure.is_none() && replay.next < plan.ops.len();
        if issuing && observer.stop_requested() {
            replay.stopped_early = true;
            issuing = false;
        }
        replay.batch.clear();
        if issuing {
            replay.fill_batch(device, now);
        }
        if !replay.batch.is_empty() {
            replay.submit(device, &mut books, now);
        }
        let more = issuing && books.io_failure.is_none() && replay.next < plan.ops.len();
        if device.in_flight() == 0 {
            if !more {
                break;
            }
            // Idle until the next operation is due; the device learns the host is idle.
            device.wait_until(replay.due(replay.next).min(now.saturating_add(slice_ns)));
            continue;
        }
        let reap_deadline =
            (more && !replay.free.is_empty() && !plan.as_fast_as_possible).then(|| replay.due(replay.next));
        let last_completed = reap_some(device, reap_deadline, &mut replay.completions, now)?;
        replay.account_completions(&mut books);
        if device.in_flight() == 0
            && let Some(since) = replay.busy_since.take()
        {
            replay.busy_ns += last_completed.saturating_sub(since);
        }
        books.stream(observer);
        let elapsed_s = (last_completed - start_ns) / 1_000_000_000;
        if elapsed_s > last_progress_s {
            last_progress_s = elapsed_s;
            observer.progress(replay.next as f64 / plan.ops.len().max(1) as f64);
        }
    }
    Ok(replay.finish(device, books, observer))
}

/// A replay as it runs: the slots and the operation each holds, the next operation of the trace, how late the
/// issues were and how long the device was busy. Everything is sized once, before the first operation.
struct Replay<'p, 'o> {
    plan: &'p ReplayPlan<'o>,
    rng: Rng,
    slots: Vec<SlotState>,
    free: Vec<u32>,
    batch: Vec<Io>,
    completions: Vec<Completion>,
    /// How late each operation was issued against its time in the trace (None: as fast as possible).
    lateness: Option<Histogram>,
    /// The device clock at the first operation: trace times count from here.
    start_ns: u64,
    /// Device time of completed operations, summed and counted.
    device_ns_sum: u128,
    device_ns_count: u64,
    /// The trace's next operation to issue.
    next: usize,
    busy_ns: u64,
    busy_since: Option<u64>,
    stopped_early: bool,
}

impl<'p, 'o> Replay<'p, 'o> {
    /// Prepares the device's buffers (for the largest read or write) and sizes everything the loop needs.
    fn prepare<D: Device + ?Sized>(device: &mut D, plan: &'p ReplayPlan<'o>) -> Result<Self, DeviceError> {
        let qd = plan.queue_depth.max(1);
        // Buffers carry reads and writes only: a TRIM of gigabytes needs none.
        let max_len = plan
            .ops
            .iter()
            .filter(|o| matches!(o.op, Op::Read | Op::Write))
            .map(|o| o.len_bytes)
            .max()
            .unwrap_or(0)
            .max(4096);
        assert!(
            max_len.saturating_mul(qd as u64) <= ssdlab_core::workload::BUFFER_LIMIT_BYTES,
            "the caller keeps a replay's buffers within the limit (checked when fitting)"
        );
        device.prepare(qd, max_len as usize)?;
        let mut rng = Rng::stream(plan.seed, 0xDA7A);
        for slot in 0..qd {
            rng.fill(device.buffer_mut(slot));
        }
        Ok(Replay {
            plan,
            rng,
            slots: vec![SlotState::default(); qd as usize],
            free: (0..qd).rev().collect(),
            batch: Vec::with_capacity(qd as usize),
            completions: Vec::with_capacity(2 * qd as usize),
            lateness: (!plan.as_fast_as_possible).then(Histogram::new),
            start_ns: 0,
            device_ns_sum: 0,
            device_ns_count: 0,
            next: 0,
            busy_ns: 0,
            busy_since: None,
            stopped_early: false,
        })
    }

    /// When the trace's operation `i` is due on the device clock.
    fn due(&self, i: usize) -> u64 {
        self.start_ns.saturating_add(self.plan.ops[i].at_ns)
    }

    /// Fills the batch with every operation that is due (all of them, as fast as possible) and has a free slot.
    fn fill_batch<D: Device + ?Sized>(&mut self, device: &mut D, now: u64) {
        let plan = self.plan;
        while !self.free.is_empty() && self.next < plan.ops.len() {
            let intended_ns = if plan.as_fast_as_possible {
                now
            } else {
                if self.due(self.next) > now {
                    break;
                }
                self.due(self.next)
            };
            if let Some(late) = self.lateness.as_mut() {
                late.record(now - intended_ns);
            }
            let op = plan.ops[self.next];
            let slot = self.free.pop().expect("checked non-empty");
            if op.op == Op::Write {
                data::stamp(
                    &mut device.buffer_mut(slot)[..op.len_bytes as usize],
                    &mut self.rng,
                );
            }
            self.slots[slot as usize] = SlotState {
                offset: op.offset_bytes,
                len: op.len_bytes,
                intended_ns,
            };
            self.batch.push(Io {
                op: op.op,
                offset: op.offset_bytes,
                len: op.len_bytes,
                slot,
                tag: self.next as u64,
            });
            self.next += 1;
        }
    }

    /// Submits the batch; the device's busy time starts when it had nothing in flight.
    fn submit<D: Device + ?Sized>(&mut self, device: &mut D, books: &mut PhaseBooks, now: u64) {
        if device.in_flight() == 0 {
            self.busy_since = Some(now);
        }
        // A device that refuses the batch ends the replay as a failed operation would; what it did not take was
        // not issued.
        let accepted = books.submit(device, &self.batch);
        assert!(
            accepted == self.batch.len() || books.io_failure.is_some(),
            "devices accept up to their prepared slot count"
        );
        self.free.extend(self.batch[accepted..].iter().map(|io| io.slot));
        self.next -= self.batch.len() - accepted;
        if device.in_flight() == 0 {
            self.busy_since = None;
        }
    }

    /// Accounts the reaped completions: frees their slots and books their latency from the trace's time.
    fn account_completions(&mut self, books: &mut PhaseBooks) {
        for c in &self.completions {
            let state = self.slots[c.slot as usize];
            self.free.push(c.slot);
            let latency_ns = c.completed_ns.saturating_sub(state.intended_ns);
            if books.complete(c, state.offset, state.len, latency_ns) {
                self.device_ns_sum += c.completed_ns.saturating_sub(c.submitted_ns) as u128;
                self.device_ns_count += 1;
            }
        }
    }

    /// Closes the books and gathers what the replay saw.
    fn finish<D: Device + ?Sized, O: Observer + ?Sized>(
        mut self,
        device: &mut D,
        books: PhaseBooks,
        observer: &mut O,
    ) -> ReplayOutcome {
        if let Some(since) = self.busy_since {
            self.busy_ns += device.now_ns().saturating_sub(since);
        }
        let (finished, io_failure) = books.closing(device).close(None, observer);
        ReplayOutcome {
            phase: PhaseOutcome {
                samples: finished.samples,
                histograms: finished.histograms,
                summary: finished.summary,
                complete: !self.stopped_early && io_failure.is_none(),
                verify_failures: Vec::new(),
                io_failure,
                passes: 0,
            },
            facts: ReplayFacts {
                busy_ns: self.busy_ns,
                lateness: self.lateness,
                issued: self.next as u64,
                device_time_ns_mean: (self.device_ns_count > 0)
                    .then(|| self.device_ns_sum as f64 / self.device_ns_count as f64),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Quiet;
    use ssdlab_testdev::MemDevice;

    fn op(at_us: u64, op: Op, offset: u64, len: u64) -> TraceOp {
        TraceOp {
            at_ns: at_us * 1000,
            op,
            offset_bytes: offset,
            len_bytes: len,
        }
    }

    #[test]
    fn open_loop_issues_each_operation_at_its_time_and_counts_busy_time() {
        // 100 us per operation; two bursts 10 ms apart.
        let mut dev = MemDevice::new(1 << 20, 100_000);
        let ops = [
            op(0, Op::Write, 0, 4096),
            op(0, Op::Write, 4096, 8192),
            op(10_000, Op::Read, 0, 4096),
            op(10_050, Op::Flush, 0, 0),
            op(10_050, Op::Discard, 65536, 65536),
        ];
        let plan = ReplayPlan {
            ops: &ops,
            as_fast_as_possible: false,
            queue_depth: 4,
            seed: 1,
        };
        let out = run_trace(&mut dev, &plan, &mut Quiet).unwrap();
        assert!(out.phase.complete);
        assert_eq!(out.facts.issued, 5);
        let issued: Vec<(Op, u64, u64)> = dev.log().to_vec();
        assert_eq!(
            issued,
            [
                (Op::Write, 0, 4096),
                (Op::Write, 4096, 8192),
                (Op::Read, 0, 4096),
                (Op::Flush, 0, 0),
                (Op::Discard, 65536, 65536)
            ]
        );
        let s = &out.phase.summary;
        assert_eq!(s.ios, 5);
        assert_eq!(s.read.as_ref().unwrap().bytes, 4096);
        // Busy: the first burst (100 us, two slots in parallel), then the read and the flush and discard.
        assert!(
            out.facts.busy_ns >= 200_000 && out.facts.busy_ns < 400_000,
            "busy {}",
            out.facts.busy_ns
        );
        assert!(
            s.seconds >= 0.0100,
            "the replay waited for the second burst: {}",
            s.seconds
        );
        let late = out.facts.lateness.unwrap();
        assert_eq!(late.count(), 5);
        assert_eq!(late.max(), 0, "the device kept up: nothing was late");
    }

    #[test]
    fn a_slow_device_makes_issues_late_and_latency_counts_from_the_trace_time() {
        // 1 ms per operation, one slot, ten operations due every 100 us: each waits for the one before.
        let mut dev = MemDevice::new(1 << 20, 1_000_000);
        let ops: Vec<TraceOp> = (0..10).map(|i| op(i * 100, Op::Read, i * 4096, 4096)).collect();
        let plan = ReplayPlan {
            ops: &ops,
            as_fast_as_possible: false,
            queue_depth: 1,
            seed: 1,
        };
        let out = run_trace(&mut dev, &plan, &mut Quiet).unwrap();
        let late = out.facts.lateness.unwrap();
        assert!(
            late.max() >= 8_000_000,
            "the last issue was 8.1 ms late: {}",
            late.max()
        );
        // The last read completes at 10 ms but was due at 0.9 ms: 9.1 ms of latency.
        assert!(out.phase.summary.latency_ns.max >= 9_000_000);
        // As fast as possible, latency is the service time alone and nothing is late.
        let mut dev = MemDevice::new(1 << 20, 1_000_000);
        let afap = ReplayPlan {
            as_fast_as_possible: true,
            ..plan
        };
        let out = run_trace(&mut dev, &afap, &mut Quiet).unwrap();
        assert!(out.facts.lateness.is_none());
        assert!(out.phase.summary.latency_ns.max <= 1_010_000);
        assert_eq!(out.facts.busy_ns, 10_000_000);
    }
}
