//! [`MemDevice`]: a [`Device`] in memory with a virtual clock, for tests of everything above the device.
//!
//! It owns its slots, the operations in flight and when each completes, and applies each operation to its
//! [`Store`] when it completes (a read on arrival if its options say so). It checks the contract as strictly as a
//! real backend would and more: a busy slot, an operation past the end, a transfer larger than the slot or the
//! device's limit are refused, and touching the buffer of a slot in flight, or preparing with operations in
//! flight, panics (io_uring would race the kernel there). It never fails an operation by itself: that is
//! [`crate::FaultDevice`]'s job.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ssdlab_core::device::{
    ClockKind, Completion, Device, DeviceError, DeviceInfo, DeviceResult, Io, Op, TargetKind,
};
use ssdlab_core::rng::Rng;

use crate::options::{MemOptions, ReadsAt, Service};
use crate::store::Store;

/// One operation at the device.
#[derive(Debug, Clone, Copy)]
struct Pending {
    io: Io,
    submitted_ns: u64,
    /// A read whose data was taken when it arrived.
    read_early: bool,
    /// A slow read (see [`crate::SlowReads`]).
    slow: bool,
    /// A FLUSH's mark: the writes completed before it was submitted.
    flush_mark: u64,
}

pub struct MemDevice {
    info: DeviceInfo,
    options: MemOptions,
    store: Store,
    buffers: Vec<Vec<u8>>,
    slots: Vec<Option<Pending>>,
    /// (completion time, submission number, slot): ties complete in submission order.
    due: BinaryHeap<Reverse<(u64, u64, u32)>>,
    in_flight: usize,
    slow_in_flight: usize,
    submitted: u64,
    now_ns: u64,
    rng: Rng,
    log: Vec<(Op, u64, u64)>,
}

impl MemDevice {
    /// A device of `capacity` bytes that stores its data and serves every operation in `service_ns`.
    pub fn new(capacity: u64, service_ns: u64) -> Self {
        MemDevice::with(MemOptions {
            service: Service::Fixed { ns: service_ns },
            ..MemOptions::new(capacity)
        })
    }

    pub fn with(options: MemOptions) -> Self {
        let block = options.logical_block_bytes;
        assert!(
            block.is_power_of_two() && block >= 512,
            "a logical block of {block} bytes"
        );
        let info = DeviceInfo {
            target: options.name.clone(),
            kind: TargetKind::Sim,
            model: options.name.clone(),
            capacity_bytes: options.capacity_bytes,
            logical_block_bytes: block,
            physical_block_bytes: block,
            memory_align_bytes: block,
            max_transfer_bytes: options.max_transfer_bytes,
            discard_supported: options.discard,
            discard_max_bytes: if options.discard { u64::MAX } else { 0 },
            rotational: false,
            clock: ClockKind::Virtual,
            backend: "memory".into(),
            direct_io: true,
            notes: vec![],
            drive: Default::default(),
        };
        MemDevice {
            info,
            store: Store::new(options.capacity_bytes, options.keep_data, options.volatile_cache),
            rng: Rng::new(options.seed),
            options,
            buffers: Vec::new(),
            slots: Vec::new(),
            due: BinaryHeap::new(),
            in_flight: 0,
            slow_in_flight: 0,
            submitted: 0,
            now_ns: 0,
            log: Vec::new(),
        }
    }

    /// What reads see now.
    pub fn data(&self) -> &[u8] {
        self.store.visible()
    }

    /// The contents, to set up a test (only without a volatile cache, where they are also durable).
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.store.visible_mut()
    }

    /// What would survive a power loss now (what reads see, without a volatile cache).
    pub fn durable(&self) -> &[u8] {
        self.store.durable()
    }

    /// Power is lost: operations in flight never complete, and writes not flushed are gone.
    pub fn crash(&mut self) {
        self.store.crash();
        self.slots.iter_mut().for_each(|s| *s = None);
        self.due.clear();
        self.in_flight = 0;
        self.slow_in_flight = 0;
    }

    /// Every operation submitted, in order: (operation, offset, length).
    pub fn log(&self) -> &[(Op, u64, u64)] {
        &self.log
    }

    fn check(&self, ios: &[Io]) -> DeviceResult<()> {
        for (k, io) in ios.iter().enumerate() {
            let slot = io.slot as usize;
            let repeated = ios[..k].iter().any(|other| other.slot == io.slot);
            if slot >= self.slots.len() || self.slots[slot].is_some() || repeated {
                return Err(DeviceError::Invalid(format!("slot {} is not free", io.slot)));
            }
            io.check_bounds(self.info.addressable_bytes(), self.buffers[slot].len())?;
            if matches!(io.op, Op::Read | Op::Write) && io.len > self.info.max_transfer_bytes {
                return Err(DeviceError::Invalid(format!(
                    "a {}-byte transfer is above the device's {}-byte limit",
                    io.len, self.info.max_transfer_bytes
                )));
            }
            if io.op == Op::Discard && !self.info.discard_supported {
                return Err(DeviceError::Unsupported("discard"));
            }
        }
        Ok(())
    }

    /// How long `io` takes, whether it is a slow read, and whether a read takes its data now. The draws are
    /// made in a fixed order, so a seed replays exactly.
    fn plan(&mut self, io: &Io) -> (u64, bool, bool) {
        let mut ns = match self.options.service {
            Service::Fixed { ns } => ns,
            Service::Random {
                min_ns,
                spread_ns,
                tail_one_in,
                tail_factor,
            } => {
                let tail = if tail_one_in > 0 && self.rng.below(tail_one_in) == 0 {
                    tail_factor
                } else {
                    1
                };
                (min_ns + self.rng.below(spread_ns.max(1))) * tail
            }
        };
        let mut slow = false;
        if let Some(s) = self.options.slow_reads
            && io.op == Op::Read
            && io.len > s.longer_than_bytes
            && (!s.one_at_a_time || self.slow_in_flight == 0)
            && (s.one_in <= 1 || self.rng.below(s.one_in) == 0)
        {
            slow = true;
            ns = s.min_ns
                + if s.spread_ns > 0 {
                    self.rng.below(s.spread_ns)
                } else {
                    0
                };
        }
        let early = io.op == Op::Read
            && (slow
                || match self.options.reads_at {
                    ReadsAt::Completion => false,
                    ReadsAt::Arrival => true,
                    ReadsAt::Either => self.rng.below(2) == 0,
                });
        (ns, slow, early)
    }

    /// Applies a completed operation to the store and returns its completion.
    fn finish(&mut self, slot: u32, completed_ns: u64) -> Completion {
        let p = self.slots[slot as usize]
            .take()
            .expect("a due operation is in flight");
        self.in_flight -= 1;
        if p.slow {
            self.slow_in_flight -= 1;
        }
        let io = p.io;
        let len = io.len as usize;
        match io.op {
            Op::Read if !p.read_early => {
                self.store
                    .read(io.offset, &mut self.buffers[slot as usize][..len]);
            }
            Op::Read => {}
            Op::Write => self.store.write(io.offset, &self.buffers[slot as usize][..len]),
            Op::Discard => self.store.discard(io.offset, io.len),
            Op::Flush => self.store.flush(p.flush_mark),
        }
        Completion {
            slot,
            tag: io.tag,
            op: io.op,
            result: if io.op == Op::Flush { 0 } else { io.len as i64 },
            submitted_ns: p.submitted_ns,
            completed_ns,
        }
    }
}

impl Device for MemDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        assert_eq!(self.in_flight, 0, "prepare with operations in flight");
        // Each buffer allocated zeroed on its own (cloning one would write every page of every buffer).
        self.buffers = (0..slots).map(|_| vec![0; buffer_bytes]).collect();
        self.slots = vec![None; slots as usize];
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        assert!(
            self.slots[slot as usize].is_none(),
            "the buffer of slot {slot}, which is in flight"
        );
        &self.buffers[slot as usize]
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        assert!(
            self.slots[slot as usize].is_none(),
            "the buffer of slot {slot}, which is in flight"
        );
        &mut self.buffers[slot as usize]
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        // Every operation is checked before any is taken, so an error means none was accepted.
        self.check(ios)?;
        for io in ios {
            let (ns, slow, read_early) = self.plan(io);
            if read_early {
                let len = io.len as usize;
                self.store
                    .read(io.offset, &mut self.buffers[io.slot as usize][..len]);
            }
            self.log.push((io.op, io.offset, io.len));
            self.slots[io.slot as usize] = Some(Pending {
                io: *io,
                submitted_ns: self.now_ns,
                read_early,
                slow,
                flush_mark: self.store.flush_mark(),
            });
            self.in_flight += 1;
            self.slow_in_flight += usize::from(slow);
            self.due
                .push(Reverse((self.now_ns.saturating_add(ns), self.submitted, io.slot)));
            self.submitted += 1;
        }
        Ok(ios.len())
    }

    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        let mut got = 0;
        loop {
            while let Some(&Reverse((at, _, slot))) = self.due.peek() {
                if at > self.now_ns {
                    break;
                }
                self.due.pop();
                out.push(self.finish(slot, at));
                got += 1;
            }
            if got >= min {
                return Ok(got);
            }
            let Some(&Reverse((next, _, _))) = self.due.peek() else {
                return Ok(got);
            };
            if let Some(d) = deadline_ns
                && d < next
            {
                self.now_ns = self.now_ns.max(d);
                return Ok(got);
            }
            self.now_ns = next;
        }
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn wait_until(&mut self, t_ns: u64) {
        self.now_ns = self.now_ns.max(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::SlowReads;

    fn io(op: Op, offset: u64, len: u64, slot: u32) -> Io {
        Io {
            op,
            offset,
            len,
            slot,
            tag: slot as u64,
        }
    }

    fn reap_all(device: &mut MemDevice) -> Vec<Completion> {
        let mut out = Vec::new();
        while device.in_flight() > 0 {
            device.reap(1, None, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn fixed_service_completes_in_submission_order_after_its_time() {
        let mut device = MemDevice::new(1 << 20, 1000);
        device.prepare(3, 4096).unwrap();
        device.buffer_mut(0).fill(7);
        device
            .submit(&[io(Op::Write, 0, 4096, 0), io(Op::Read, 0, 4096, 1)])
            .unwrap();
        device.wait_until(500);
        device.submit(&[io(Op::Flush, 0, 0, 2)]).unwrap();
        let done = reap_all(&mut device);
        let order: Vec<(u32, u64)> = done.iter().map(|c| (c.slot, c.completed_ns)).collect();
        assert_eq!(order, [(0, 1000), (1, 1000), (2, 1500)]);
        assert_eq!(done[2].result, 0, "a flush moves no bytes");
        assert!(
            device.buffer(1).iter().all(|&b| b == 7),
            "the read completed after the write and saw it"
        );
        assert_eq!(device.log().len(), 3);
    }

    #[test]
    fn a_deadline_stops_the_clock_before_the_next_completion() {
        let mut device = MemDevice::new(1 << 20, 10_000);
        device.prepare(1, 512).unwrap();
        device.submit(&[io(Op::Read, 0, 512, 0)]).unwrap();
        let mut out = Vec::new();
        assert_eq!(device.reap(1, Some(4000), &mut out).unwrap(), 0);
        assert_eq!(device.now_ns(), 4000);
        assert_eq!(device.reap(0, None, &mut out).unwrap(), 0, "nothing is due yet");
        assert_eq!(device.reap(1, None, &mut out).unwrap(), 1);
        assert_eq!(device.now_ns(), 10_000);
    }

    #[test]
    fn busy_slots_oversized_transfers_and_the_end_are_refused_whole() {
        let mut device = MemDevice::with(MemOptions {
            max_transfer_bytes: 4096,
            ..MemOptions::new(1 << 20)
        });
        device.prepare(2, 8192).unwrap();
        assert!(
            device.submit(&[io(Op::Read, 0, 8192, 0)]).is_err(),
            "above the limit"
        );
        assert!(
            device.submit(&[io(Op::Read, 1 << 20, 512, 0)]).is_err(),
            "past the end"
        );
        assert!(
            device
                .submit(&[io(Op::Read, 0, 512, 0), io(Op::Read, 512, 512, 0)])
                .is_err(),
            "one slot twice in a batch"
        );
        assert_eq!(device.in_flight(), 0, "a refused batch takes nothing");
        device.submit(&[io(Op::Read, 0, 512, 0)]).unwrap();
        assert!(device.submit(&[io(Op::Read, 0, 512, 0)]).is_err(), "a busy slot");
    }

    #[test]
    #[should_panic(expected = "which is in flight")]
    fn touching_a_buffer_in_flight_panics() {
        let mut device = MemDevice::new(1 << 20, 1000);
        device.prepare(1, 512).unwrap();
        device.submit(&[io(Op::Read, 0, 512, 0)]).unwrap();
        device.buffer_mut(0)[0] = 1;
    }

    #[test]
    fn a_read_on_arrival_misses_a_write_that_lands_while_it_is_in_flight() {
        let options = MemOptions {
            reads_at: ReadsAt::Arrival,
            ..MemOptions::new(1 << 20)
        };
        let mut device = MemDevice::with(options);
        device.prepare(2, 512).unwrap();
        device.buffer_mut(0).fill(3);
        device
            .submit(&[io(Op::Write, 0, 512, 0), io(Op::Read, 0, 512, 1)])
            .unwrap();
        reap_all(&mut device);
        assert!(device.buffer(1).iter().all(|&b| b == 0));
        assert!(device.data()[..512].iter().all(|&b| b == 3));
    }

    #[test]
    fn slow_reads_complete_after_everything_else_with_the_data_they_found() {
        let options = MemOptions {
            slow_reads: Some(SlowReads {
                longer_than_bytes: 512,
                one_in: 1,
                min_ns: 1_000_000,
                spread_ns: 0,
                one_at_a_time: false,
            }),
            ..MemOptions::new(1 << 20)
        };
        let mut device = MemDevice::with(options);
        device.prepare(2, 1024).unwrap();
        device.submit(&[io(Op::Read, 0, 1024, 0)]).unwrap();
        device.buffer_mut(1)[..512].fill(9);
        device.submit(&[io(Op::Write, 0, 512, 1)]).unwrap();
        let done = reap_all(&mut device);
        assert_eq!(done.iter().map(|c| c.slot).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(done[1].completed_ns, 1_000_000);
        assert!(
            device.buffer(0)[..512].iter().all(|&b| b == 0),
            "taken on arrival"
        );
    }

    #[test]
    fn a_crash_keeps_only_what_a_completed_flush_covered() {
        let options = MemOptions {
            volatile_cache: true,
            ..MemOptions::new(1 << 20)
        };
        let mut device = MemDevice::with(options);
        device.prepare(2, 512).unwrap();
        device.buffer_mut(0).fill(1);
        device.submit(&[io(Op::Write, 0, 512, 0)]).unwrap();
        reap_all(&mut device);
        device.submit(&[io(Op::Flush, 0, 0, 0)]).unwrap();
        reap_all(&mut device);
        device.buffer_mut(0).fill(2);
        device.submit(&[io(Op::Write, 0, 512, 0)]).unwrap();
        reap_all(&mut device);
        // A flush in flight when power goes covers nothing.
        device.submit(&[io(Op::Flush, 0, 0, 1)]).unwrap();
        assert_eq!(device.data()[0], 2);
        device.crash();
        assert_eq!(device.in_flight(), 0);
        assert_eq!(device.data()[0], 1, "the second write was never flushed");
    }

    #[test]
    fn random_service_is_out_of_order_and_replays_from_its_seed() {
        let run = |seed: u64| {
            let mut device = MemDevice::with(MemOptions {
                service: Service::Random {
                    min_ns: 1000,
                    spread_ns: 50_000,
                    tail_one_in: 16,
                    tail_factor: 100,
                },
                seed,
                ..MemOptions::new(1 << 20)
            });
            device.prepare(8, 512).unwrap();
            let ios: Vec<Io> = (0..8).map(|s| io(Op::Read, 0, 512, s)).collect();
            device.submit(&ios).unwrap();
            reap_all(&mut device).iter().map(|c| c.slot).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), (0..8).collect::<Vec<_>>(), "seed 7 reorders eight reads");
    }
}
