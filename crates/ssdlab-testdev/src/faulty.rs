//! [`FaultDevice`]: any [`Device`] with faults injected by [`Rule`]s, in the spirit of dm-flakey and
//! TigerBeetle's simulated storage.
//!
//! It owns which of its slots are in flight and how each operation's fault is applied: an error never reaches
//! the device below, a short transfer or a torn write sends only a prefix, a stall holds the completion on the
//! device's clock, a refusal fails the submission. Completions it makes up or holds are merged with the device's
//! by time. Every fault is recorded in the [`FaultLog`] before the operation is submitted, so a test can say
//! what happened even when the device is owned by something else by then. It never changes an operation no rule
//! picked: with no rules it is the device below.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use ssdlab_core::device::{Completion, Device, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op};
use ssdlab_core::rng::Rng;
use ssdlab_core::schema::{CacheStats, DeviceCounters};

use crate::fault::{EIO, Fault, Rule};

/// One fault injected: the operation's number among all those submitted to the device (from 0), the
/// operation as the caller submitted it, the fault, and the device clock then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    pub number: u64,
    pub io: Io,
    pub fault: Fault,
    pub at_ns: u64,
}

/// The faults a device injected, shared: a test keeps a handle while the device is moved into a cache, a
/// server or a worker thread.
#[derive(Debug, Clone, Default)]
pub struct FaultLog(Arc<Mutex<Vec<Injected>>>);

impl FaultLog {
    /// Every fault injected so far, in order.
    pub fn entries(&self) -> Vec<Injected> {
        self.0
            .lock()
            .expect("no test panics holding the fault log")
            .clone()
    }

    pub fn len(&self) -> usize {
        self.0.lock().expect("no test panics holding the fault log").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&self, injected: Injected) {
        self.0
            .lock()
            .expect("no test panics holding the fault log")
            .push(injected);
    }
}

/// How a slot's operation is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// As submitted, at the device below.
    Plain,
    /// At the device below; its completion is held this long after it arrives.
    Stalled(u64),
    /// A prefix at the device below, completing with the device's count.
    Short,
    /// A prefix at the device below, completing with EIO.
    Torn,
    /// Never sent: its completion is already made up.
    MadeUp,
    /// At the device below with byte `at` of its data XORed with `mask`: a write's before it is sent (and back
    /// when it completes, so the caller's buffer is as it was), a read's when it completes.
    Corrupted { at: usize, mask: u8, write: bool },
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    io: Io,
    applied: Applied,
}

pub struct FaultDevice<D: Device> {
    inner: D,
    rules: Vec<(Rule, Rng)>,
    seed: u64,
    log: FaultLog,
    slots: Vec<Option<InFlight>>,
    in_flight: usize,
    /// Completions due to the caller: (due time, order of arrival, slot), with the completion itself in
    /// `held` (a slot carries one operation at a time).
    ready: BinaryHeap<Reverse<(u64, u64, u32)>>,
    held: Vec<Option<Completion>>,
    arrivals: u64,
    /// Operations submitted so far.
    numbered: u64,
    inner_out: Vec<Completion>,
}

impl<D: Device> FaultDevice<D> {
    /// `inner` with no faults yet; `seed` drives every rule's chance (each rule draws from its own stream).
    pub fn new(inner: D, seed: u64) -> Self {
        FaultDevice {
            inner,
            rules: Vec::new(),
            seed,
            log: FaultLog::default(),
            slots: Vec::new(),
            in_flight: 0,
            ready: BinaryHeap::new(),
            held: Vec::new(),
            arrivals: 0,
            numbered: 0,
            inner_out: Vec::new(),
        }
    }

    /// Adds a rule; the first rule that picks an operation decides its fault.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.add(rule);
        self
    }

    pub fn add(&mut self, rule: Rule) {
        let stream = Rng::stream(self.seed, self.rules.len() as u64);
        self.rules.push((rule, stream));
    }

    /// The faults injected, as a handle that outlives the device's ownership.
    pub fn log(&self) -> FaultLog {
        self.log.clone()
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The fault, if any, for the next operation `io`.
    fn decide(&mut self, io: &Io) -> Option<Fault> {
        self.rules
            .iter_mut()
            .find_map(|(rule, rng)| rule.decide(io, rng).then(|| rule.fault.clone()))
    }

    /// `bytes` rounded down to the device's block, at most `io.len`.
    fn prefix(&self, io: &Io, bytes: u64) -> u64 {
        let block = u64::from(self.inner.info().logical_block_bytes.max(1));
        bytes.min(io.len) / block * block
    }

    /// How `io` is carried out under `fault`: what goes to the device below (if anything) and how.
    fn apply(&self, io: &Io, fault: Option<&Fault>) -> (Applied, Option<Io>, i64) {
        let transfer = matches!(io.op, Op::Read | Op::Write);
        let cut = |len: u64| Io { len, ..*io };
        match fault {
            None => (Applied::Plain, Some(*io), 0),
            Some(Fault::Stall { ns }) => (Applied::Stalled(*ns), Some(*io), 0),
            Some(Fault::Error(errno)) => (Applied::MadeUp, None, -i64::from(*errno)),
            Some(Fault::Short { keep_bytes }) if transfer => match (*keep_bytes).min(io.len) {
                0 => (Applied::MadeUp, None, 0),
                keep => (Applied::Short, Some(cut(keep)), 0),
            },
            Some(Fault::Torn { landed_bytes }) if io.op == Op::Write => {
                match self.prefix(io, *landed_bytes) {
                    0 => (Applied::MadeUp, None, -i64::from(EIO)),
                    landed => (Applied::Torn, Some(cut(landed)), 0),
                }
            }
            Some(Fault::Short { .. } | Fault::Torn { .. }) => (Applied::MadeUp, None, -i64::from(EIO)),
            Some(Fault::Corrupt { byte, mask }) if transfer && io.len > 0 => (
                Applied::Corrupted {
                    at: (byte % io.len) as usize,
                    mask: *mask,
                    write: io.op == Op::Write,
                },
                Some(*io),
                0,
            ),
            Some(Fault::Lost) if io.op == Op::Read => (Applied::MadeUp, None, -i64::from(EIO)),
            Some(Fault::Lost) => (
                Applied::MadeUp,
                None,
                if io.op == Op::Flush { 0 } else { io.len as i64 },
            ),
            Some(Fault::Misdirect { by_bytes }) if transfer => {
                let block = u64::from(self.inner.info().logical_block_bytes.max(1));
                let room = self.inner.info().addressable_bytes().saturating_sub(io.len) + 1;
                let offset = (io.offset % room + by_bytes % room) % room / block * block;
                (Applied::Plain, Some(Io { offset, ..*io }), 0)
            }
            Some(Fault::Corrupt { .. } | Fault::Misdirect { .. }) => (Applied::Plain, Some(*io), 0),
            Some(Fault::Refuse(_)) => unreachable!("a refusal is never applied"),
        }
    }

    /// XORs the changed byte of every corrupted write among `ios` into its buffer (and, called again, back out).
    fn flip_corrupted_writes(&mut self, ios: &[Io], plans: &[(Applied, Option<Io>, i64)]) {
        for (io, (applied, _, _)) in ios.iter().zip(plans) {
            if let Applied::Corrupted {
                at,
                mask,
                write: true,
            } = *applied
            {
                self.inner.buffer_mut(io.slot)[at] ^= mask;
            }
        }
    }

    fn hold(&mut self, due: u64, c: Completion) {
        self.ready.push(Reverse((due, self.arrivals, c.slot)));
        self.held[c.slot as usize] = Some(c);
        self.arrivals += 1;
    }

    /// Turns one of the device's completions into the caller's, holding a stalled one.
    fn arrived(&mut self, mut c: Completion) {
        let state = self.slots[c.slot as usize].expect("the device completed a slot in flight");
        let mut due = c.completed_ns;
        match state.applied {
            Applied::Plain | Applied::Short => {}
            Applied::Stalled(ns) => due = due.saturating_add(ns),
            Applied::Torn => {
                if c.result >= 0 {
                    c.result = -i64::from(EIO);
                }
            }
            Applied::Corrupted { at, mask, .. } => {
                // A read's data arrives changed; a write's buffer is given back as the caller left it.
                self.inner.buffer_mut(c.slot)[at] ^= mask;
            }
            Applied::MadeUp => unreachable!("a made-up completion never reaches the device"),
        }
        // The caller sees its own operation, whatever was sent below.
        c.completed_ns = due;
        c.tag = state.io.tag;
        c.op = state.io.op;
        self.hold(due, c);
    }

    /// Hands the caller every completion due by now, in time order.
    fn deliver(&mut self, out: &mut Vec<Completion>) -> usize {
        let now = self.inner.now_ns();
        let mut got = 0;
        while let Some(&Reverse((due, _, slot))) = self.ready.peek() {
            if due > now {
                break;
            }
            self.ready.pop();
            let c = self.held[slot as usize]
                .take()
                .expect("a due slot holds its completion");
            self.slots[slot as usize] = None;
            self.in_flight -= 1;
            out.push(c);
            got += 1;
        }
        got
    }

    /// Collects what the device below has finished, waiting no later than `until` for at least one when
    /// `wait` is set.
    fn collect(&mut self, wait: bool, until: Option<u64>) -> DeviceResult<()> {
        if self.inner.in_flight() == 0 {
            if wait && let Some(t) = until {
                self.inner.wait_until(t);
            }
            return Ok(());
        }
        let mut out = std::mem::take(&mut self.inner_out);
        out.clear();
        let result = self.inner.reap(usize::from(wait), until, &mut out);
        for c in out.drain(..) {
            self.arrived(c);
        }
        self.inner_out = out;
        result.map(drop)
    }
}

impl<D: Device> Device for FaultDevice<D> {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        assert_eq!(self.in_flight, 0, "prepare with operations in flight");
        self.inner.prepare(slots, buffer_bytes)?;
        self.slots = vec![None; slots as usize];
        self.held = vec![None; slots as usize];
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        assert!(
            self.slots[slot as usize].is_none(),
            "the buffer of slot {slot}, which is in flight"
        );
        self.inner.buffer(slot)
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        assert!(
            self.slots[slot as usize].is_none(),
            "the buffer of slot {slot}, which is in flight"
        );
        self.inner.buffer_mut(slot)
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        // The slots are checked here: an operation that never reaches the device below must still be refused
        // on a busy slot, and a refused batch must take nothing.
        let capacity = self.inner.info().addressable_bytes();
        for (k, io) in ios.iter().enumerate() {
            let slot = io.slot as usize;
            let repeated = ios[..k].iter().any(|other| other.slot == io.slot);
            if slot >= self.slots.len() || self.slots[slot].is_some() || repeated {
                return Err(DeviceError::Invalid(format!("slot {} is not free", io.slot)));
            }
            io.check_bounds(capacity, self.inner.buffer(io.slot).len())?;
        }
        let now = self.inner.now_ns();
        let mut faults = Vec::with_capacity(ios.len());
        for (k, io) in ios.iter().enumerate() {
            let fault = self.decide(io);
            if let Some(f) = &fault {
                self.log.push(Injected {
                    number: self.numbered + k as u64,
                    io: *io,
                    fault: f.clone(),
                    at_ns: now,
                });
                if let Fault::Refuse(reason) = f {
                    // Nothing of the batch is taken; the operations were seen and counted.
                    self.numbered += ios.len() as u64;
                    return Err(DeviceError::Invalid(reason.clone()));
                }
            }
            faults.push(fault);
        }
        let plans: Vec<(Applied, Option<Io>, i64)> = ios
            .iter()
            .zip(&faults)
            .map(|(io, f)| self.apply(io, f.as_ref()))
            .collect();
        // A corrupted write carries its changed byte down; the caller's buffer is given back when it completes.
        self.flip_corrupted_writes(ios, &plans);
        let plans_applied: Vec<(Applied, Option<Io>, i64)> = plans.clone();
        let below: Vec<Io> = plans.iter().filter_map(|p| p.1).collect();
        let sent = if below.is_empty() {
            0
        } else {
            match self.inner.submit(&below) {
                Ok(sent) => sent,
                Err(e) => {
                    // Nothing of the batch is in flight: the corrupted writes' buffers are the caller's again.
                    self.flip_corrupted_writes(ios, &plans_applied);
                    return Err(e);
                }
            }
        };
        // The caller's operations are taken in order up to the first one the device below did not take.
        let mut taken = 0;
        let mut sent_seen = 0;
        for (io, (applied, down, result)) in ios.iter().zip(plans) {
            if down.is_some() {
                if sent_seen == sent {
                    break;
                }
                sent_seen += 1;
            }
            self.slots[io.slot as usize] = Some(InFlight { io: *io, applied });
            self.in_flight += 1;
            if applied == Applied::MadeUp {
                let c = Completion {
                    slot: io.slot,
                    tag: io.tag,
                    op: io.op,
                    result,
                    submitted_ns: now,
                    completed_ns: now,
                };
                self.hold(now, c);
            }
            taken += 1;
        }
        // A corrupted write the device below did not take is not in flight: its buffer is the caller's again.
        self.flip_corrupted_writes(&ios[taken..], &plans_applied[taken..]);
        self.numbered += ios.len() as u64;
        Ok(taken)
    }

    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        let mut got = 0;
        loop {
            self.collect(false, None)?;
            got += self.deliver(out);
            if got >= min || self.in_flight == 0 {
                return Ok(got);
            }
            if deadline_ns.is_some_and(|d| self.inner.now_ns() >= d) {
                return Ok(got);
            }
            let held = self.ready.peek().map(|r| r.0.0);
            let until = match (held, deadline_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            assert!(
                self.inner.in_flight() > 0 || until.is_some(),
                "an operation in flight is at the device below or held"
            );
            self.collect(true, until)?;
        }
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn wait_until(&mut self, t_ns: u64) {
        self.inner.wait_until(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn idle(&mut self) {
        self.inner.idle();
    }

    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        self.inner.extents(offset, len, out)
    }

    fn counters(&self) -> Option<DeviceCounters> {
        self.inner.counters()
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        self.inner.cache_stats()
    }
}
