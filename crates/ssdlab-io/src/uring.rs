//! The io_uring backend: registered file and buffers, one enter per submitted entry, batched reaping, no allocation
//! per I/O.
//!
//! Every entry is handed to the kernel as it is queued, in its own system call, and the engine refills a freed
//! slot at once, as fio does (iodepth_batch_submit=1): the device holds the queue depth it was asked for, and
//! at QD1 it starts while the engine is still on its way to wait. Against fio on a loop device at QD1 this beat
//! queueing the operation until the next wait (one system call per I/O instead of two) by about 4% of the IOPS;
//! on a virtio disk at QD32 (ext4 file, O_DIRECT), holding a freed slot until the next wait cost 15-20%. Each
//! of those enters also posts the completions the ring deferred, as fio's do: handing a refilled batch over in
//! one enter instead left completions unposted until the next wait, and cost about 10% at QD32 on that disk
//! (0.12 enters per I/O, against fio's 1.03).
//! The ring defers completion work to our own enters where the kernel allows it (see `new_ring`).
//! Timestamps: the submit time as each entry is queued, the completion time once per harvested batch of
//! completions (an operation done inline in `submit` stamps both around its own system call). Reaping waits for
//! a single completion at a time, so no completion is held back behind slower ones. Discards run synchronously
//! (BLKDISCARD and hole punching have no io_uring opcode on the kernels we support); flushes go through the ring
//! as fdatasync.
//!
//! The device must never free or reuse a buffer the kernel may still be using: `prepare` and `drop` first
//! wait for everything in flight.
//!
//! Over the page cache (`file:PATH?cache=page`, see [`UringDevice::over_page_cache`]) a read first asks the
//! cache alone (preadv2 with RWF_NOWAIT, inline) and goes through the ring only if the cache lacks some of it,
//! so a miss waits for the medium without stopping the caller; writes run inline while they cost what a copy
//! costs (see `InlineWrites`); flushes go through the ring.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::{IoUring, opcode, squeue, types};
use ssdlab_core::device::{Completion, Device, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op};

use crate::common::{
    Backing, Caching, Done, EXTENTS_PER_QUERY, RealClock, Sibling, SlotBuffers, completion_result,
    run_sync_op,
};

pub struct UringDevice {
    info: DeviceInfo,
    backing: Backing,
    clock: RealClock,
    ring: IoUring,
    slots: SlotBuffers,
    /// Buffers registered with the ring (READ_FIXED/WRITE_FIXED); otherwise plain READ/WRITE.
    fixed_buffers: bool,
    /// Entries queued in the submission ring but not yet handed to the kernel.
    unsubmitted: usize,
    /// The ring defers completion work until we enter the kernel for events (see `new_ring`).
    deferred_task_work: bool,
    /// Over the page cache: reads the cache holds and cheap writes run inline (see `over_page_cache`).
    page_cache: Option<PageCache>,
    /// The slots last prepared (count, bytes each, alignment), registered with the ring: preparing the same again
    /// keeps them, so a ring kept for many files (`retarget`) registers its buffers once.
    prepared: Option<(u32, usize, u32)>,
}

/// What the page-cache mode keeps: how writes are doing inline, and whether reads may ask the cache alone.
#[derive(Debug, Clone, Copy)]
struct PageCache {
    writes: InlineWrites,
    /// preadv2 with RWF_NOWAIT works on this file (a file system that refuses it says so once, and every read
    /// then goes through the ring rather than pay a refused system call each time).
    nowait_reads: bool,
}

/// Writes into the page cache, run inline in `submit` while they are cheap.
///
/// On file systems without non-blocking buffered writes (ext4) io_uring cannot start a buffered write in the
/// enter that submits it, so it hands every one to a worker thread; when the write is a copy of a few
/// microseconds, that hand-over costs more than the copy (4 KiB random writes at QD32 over NBD on a 2-core VM:
/// about 115-130K IOPS through the ring against 130-160K inline). But a write can cost far more than a copy (a
/// page-cache folio filled block by block, dirty-page throttling, a block to read first), and inline it stops
/// everything else the caller does; through the ring, writes then run side by side on the other cores (there
/// 49-64K IOPS against 40-47K inline, where nbdkit's thread pool made 32-38K). So a write runs inline while the
/// recent inline writes were cheap, or when the caller has nothing else in hand (nothing to overlap it with);
/// otherwise, slow and with a queue behind it, it goes through the ring, and one in `PROBE_EVERY` of those still
/// runs inline, so the cost is measured again and writes come back inline once it falls. "Nothing else in hand"
/// means nothing in the ring, nothing submitted since the last reap, and at most one operation between the two
/// reaps before: a server answering a client at queue depth 32 submits its requests one after another between
/// reaps, and runs them side by side in the ring.
#[derive(Debug, Clone, Copy)]
struct InlineWrites {
    /// A running mean of what an inline write cost, in nanoseconds per 4 KiB.
    mean_ns_per_4k: u64,
    /// Writes sent through the ring since the last inline one.
    since_inline: u32,
    /// Operations submitted since the last reap: the caller has more work in hand than this one write.
    submitted_since_reap: usize,
    /// Operations submitted between the last two reaps that followed any: more than one means a caller with a
    /// queue of work (a server answering a client at queue depth 32), whose next write overlaps the rest.
    last_batch: usize,
}

/// Above this mean cost per 4 KiB, inline writes are no longer a copy and go through the ring when others are
/// in flight (a 4 KiB page-cache write measured 2-6 us on the machines above, a slow one 20-28 us).
const SLOW_INLINE_WRITE_NS_PER_4K: u64 = 10_000;
/// While writes go through the ring, every this many runs inline to measure the cost again.
const PROBE_EVERY: u32 = 32;

impl InlineWrites {
    fn new() -> Self {
        InlineWrites {
            mean_ns_per_4k: 0,
            since_inline: 0,
            submitted_since_reap: 0,
            last_batch: 0,
        }
    }

    /// Whether the next write runs inline, with `in_ring` operations in the ring.
    fn choose_inline(&mut self, in_ring: usize) -> bool {
        let alone = in_ring == 0 && self.submitted_since_reap == 0 && self.last_batch <= 1;
        if alone || self.mean_ns_per_4k <= SLOW_INLINE_WRITE_NS_PER_4K {
            self.since_inline = 0;
            return true;
        }
        self.since_inline += 1;
        if self.since_inline >= PROBE_EVERY {
            self.since_inline = 0;
            return true;
        }
        false
    }

    /// Folds in what an inline write of `len` bytes cost (a mean over about the last eight).
    fn record(&mut self, len: u64, elapsed_ns: u64) {
        let per_4k = elapsed_ns.saturating_mul(4096) / len.max(1);
        self.mean_ns_per_4k = self.mean_ns_per_4k - self.mean_ns_per_4k / 8 + per_4k / 8;
    }
}

/// Whether this kernel lets us create an io_uring at all (it may be compiled out, disabled by
/// `kernel.io_uring_disabled`, or blocked by seccomp).
pub fn probe() -> io::Result<()> {
    IoUring::new(2).map(drop)
}

/// Makes a ring, asking for the cheapest completion handling this kernel offers.
///
/// Deferred task work (Linux 6.1) runs completions only when this thread enters the kernel asking for
/// events, so a wait for one completion sleeps until it is there instead of waking for each piece of kernel
/// work; fio asks for the same. Its price is that completions never appear by themselves: `harvest` must
/// enter the kernel when the ring says task work is pending (the task-run flag). Older kernels reject the
/// flags, so each step down asks for less: single issuer and cooperative task running (5.19, 6.0), then none.
/// `allow_deferral` false starts at the second step (the tests drive both).
pub(crate) fn new_ring(entries: u32, allow_deferral: bool) -> io::Result<(IoUring, bool)> {
    if allow_deferral
        && let Ok(ring) = IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_cqsize(entries * 2)
            .build(entries)
    {
        return Ok((ring, true));
    }
    IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
        .map(|ring| (ring, false))
}

fn os_error(what: &str, e: io::Error) -> DeviceError {
    DeviceError::os(what, e)
}

/// A device that could not be set up, handed back so the caller can fall back to another backend.
pub struct Refused {
    pub reason: String,
    pub info: DeviceInfo,
    pub backing: Backing,
}

impl UringDevice {
    /// The open file or block device behind it (for identity checks and ioctls on the very descriptor the
    /// safety gate judged).
    pub fn backing_file(&self) -> &std::fs::File {
        &self.backing.file
    }

    /// Over a file whose page cache is kept (`cache=page`): a read the page cache holds whole runs inline, and
    /// one it does not goes through the ring (through the ring alone, 4 KiB reads from the cache at QD32 over
    /// NBD ran at 0.83x pread's rate; with pread alone, every miss stopped the server: 25K IOPS from a cold
    /// 1 GiB image at QD32, against 79-87K through the ring); writes run inline while they are cheap (see
    /// `InlineWrites`); flushes go through the ring.
    pub fn over_page_cache(mut self) -> Self {
        assert_eq!(
            self.backing.caching,
            Caching::Kept,
            "inline page-cache writes over a file that bypasses the page cache"
        );
        self.page_cache = Some(PageCache {
            writes: InlineWrites::new(),
            nowait_reads: true,
        });
        self.describe();
        self
    }

    /// Says in `info.backend` how I/O is issued.
    fn describe(&mut self) {
        let registered = if self.fixed_buffers {
            "registered file and buffers"
        } else {
            "registered file"
        };
        self.info.backend = if self.page_cache.is_some() {
            format!("io_uring ({registered}; page-cache hits and cheap page-cache writes inline)")
        } else {
            format!("io_uring ({registered})")
        };
    }

    /// Reads from the page cache alone, inline (RWF_NOWAIT: no waiting for the medium), started at
    /// `started_ns`: true, with the completion ready for the next reap, if the cache held every byte; false,
    /// with nothing started, otherwise (the read then goes through the ring, which fills what the cache lacked).
    fn read_from_cache(&mut self, io: &Io, started_ns: u64) -> bool {
        let len = io.len as usize;
        // SAFETY: preadv2 is synchronous: the kernel writes the slot's buffer only during the call, and the slot
        // is idle (checked by the caller's `check`), so no ring entry targets it.
        let buf = unsafe { self.slots.pool.slot_mut(io.slot) };
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: len,
        };
        // SAFETY: one iovec over the live slot buffer, `len` bytes long (within it: `check` bounds the length).
        let got = unsafe {
            libc::preadv2(
                self.backing.file.as_raw_fd(),
                &iov,
                1,
                io.offset as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        if got != len as isize {
            // EAGAIN (the cache lacks a page), a short read (it lacks a later one) or any error: the ring reads
            // the whole range and reports what the medium says. A file system that does not take RWF_NOWAIT
            // is not asked again.
            if got < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP)
                && let Some(mode) = &mut self.page_cache
            {
                mode.nowait_reads = false;
            }
            return false;
        }
        self.slots.slots.start(io, started_ns);
        self.slots.ready.push(Done {
            slot: io.slot,
            result: len as i64,
            completed_ns: self.clock.now_ns(),
        });
        true
    }

    /// Runs a write inline (over the page cache: a copy, or what the kernel makes of it), as a completion
    /// ready for the next reap, and folds its cost into the running mean.
    fn write_inline(&mut self, io: &Io) {
        let started_ns = self.clock.now_ns();
        self.slots.slots.start(io, started_ns);
        let len = io.len as usize;
        // SAFETY: pwrite is synchronous: the kernel reads the slot's buffer only during the call, and the slot
        // was idle (checked by the caller's `check`), so no ring entry targets it.
        let buf = unsafe { self.slots.pool.slot(io.slot) };
        let written = std::os::unix::fs::FileExt::write_all_at(&self.backing.file, &buf[..len], io.offset);
        let result = completion_result(written.map(|()| len));
        let completed_ns = self.clock.now_ns();
        if let Some(mode) = &mut self.page_cache {
            mode.writes.record(io.len, completed_ns - started_ns);
        }
        self.slots.ready.push(Done {
            slot: io.slot,
            result,
            completed_ns,
        });
    }

    /// What a job's device on another thread is made of ([`UringDevice::from_sibling`]).
    pub fn sibling(&self) -> io::Result<Sibling> {
        Ok(Sibling {
            info: self.info.clone(),
            backing: self.backing.duplicate()?,
            clock: self.clock,
            page_cache: self.page_cache.is_some(),
        })
    }

    /// A device over a sibling's duplicate descriptor, timed on the same clock, with its own ring and buffers.
    /// Call it on the thread that will use the device.
    pub fn from_sibling(sibling: Sibling) -> Result<Self, Box<Refused>> {
        let mut device = UringDevice::new(sibling.info, sibling.backing)?;
        device.clock = sibling.clock;
        Ok(if sibling.page_cache {
            device.over_page_cache()
        } else {
            device
        })
    }

    pub fn new(mut info: DeviceInfo, backing: Backing) -> Result<Self, Box<Refused>> {
        let ring = match new_ring(8, true).and_then(|(ring, deferred)| {
            ring.submitter()
                .register_files(&[backing.file.as_raw_fd()])
                .map(|()| (ring, deferred))
        }) {
            Ok(made) => made,
            Err(e) => {
                return Err(Box::new(Refused {
                    reason: e.to_string(),
                    info,
                    backing,
                }));
            }
        };
        info.backend = "io_uring (registered file and buffers)".into();
        let align = info.memory_align_bytes as usize;
        let (ring, deferred_task_work) = ring;
        Ok(UringDevice {
            info,
            backing,
            clock: RealClock::new(),
            ring,
            slots: SlotBuffers::new(align),
            fixed_buffers: false,
            unsubmitted: 0,
            page_cache: None,
            deferred_task_work,
            prepared: None,
        })
    }

    /// Points this device, ring and buffers kept, at another opened file (the psync engine's `into_parts`):
    /// the ring's one registered file is replaced in place, so a scan of many small files sets up one ring and
    /// registers its buffers once per thread instead of per file. Nothing may be in flight, and the new file must
    /// bypass the page cache as this device's did (a kept page cache has a mode of its own). A ring that cannot
    /// take the file hands it back, and still reads the file it had.
    pub fn retarget(&mut self, info: DeviceInfo, backing: Backing) -> Result<(), Box<Refused>> {
        assert_eq!(
            self.slots.slots.in_flight(),
            0,
            "retarget with operations in flight"
        );
        assert!(
            self.page_cache.is_none() && backing.caching != Caching::Kept,
            "a ring kept over the page cache is not retargeted"
        );
        if let Err(e) = self
            .ring
            .submitter()
            .register_files_update(0, &[backing.file.as_raw_fd()])
        {
            return Err(Box::new(Refused {
                reason: e.to_string(),
                info,
                backing,
            }));
        }
        if self.info.memory_align_bytes != info.memory_align_bytes {
            self.prepared = None;
        }
        self.backing = backing;
        self.info = info;
        self.describe();
        Ok(())
    }

    /// Waits for everything in flight, discarding the completions (used before buffers are released). Returns
    /// false if the ring failed with operations still in flight: their buffers must then never be freed.
    fn drain(&mut self) -> bool {
        let mut sink = Vec::new();
        while self.slots.slots.in_flight() > 0 {
            if self.reap(1, None, &mut sink).is_err() {
                return false;
            }
            sink.clear();
        }
        true
    }

    /// Gives up on the buffers the kernel may still write into: leaking them is the only sound choice.
    fn abandon_buffers(&mut self) {
        // The slots are gone: a later prepare of the same shape must make them again.
        self.prepared = None;
        let align = self.info.memory_align_bytes as usize;
        std::mem::forget(std::mem::replace(&mut self.slots, SlotBuffers::new(align)));
    }

    fn queue(&mut self, io: &Io) -> Result<(), ()> {
        let file = types::Fixed(0);
        let ptr = self.slots.pool.ptr(io.slot);
        let len = io.len as u32;
        let entry = match (io.op, self.fixed_buffers) {
            (Op::Read, true) => opcode::ReadFixed::new(file, ptr, len, io.slot as u16)
                .offset(io.offset)
                .build(),
            (Op::Write, true) => opcode::WriteFixed::new(file, ptr, len, io.slot as u16)
                .offset(io.offset)
                .build(),
            (Op::Read, false) => opcode::Read::new(file, ptr, len).offset(io.offset).build(),
            (Op::Write, false) => opcode::Write::new(file, ptr, len).offset(io.offset).build(),
            (Op::Flush, _) => opcode::Fsync::new(file)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            (Op::Discard, _) => unreachable!("discards run synchronously"),
        };
        let entry: squeue::Entry = entry.user_data(io.slot as u64);
        // SAFETY: the entry points into the slot's buffer, which the pool keeps alive and which nothing else
        // touches until the slot's completion is reaped (Slots marks it busy; buffer access asserts idle;
        // prepare and drop drain the ring first).
        unsafe { self.ring.submission().push(&entry) }.map_err(|_| ())
    }

    /// Moves every completion in the completion ring to `out`.
    fn harvest(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        let mut now = None;
        n += self.slots.drain_ready(0, out);
        if self.deferred_task_work && self.ring.submission().taskrun() {
            // Finished operations are waiting as deferred task work: an enter asking for events (the crate
            // adds GETEVENTS when the task-run flag is up) posts them. It also submits whatever is queued.
            if let Ok(taken) = self.ring.submit() {
                self.unsubmitted = self.unsubmitted.saturating_sub(taken);
            }
        }
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let completed_ns = *now.get_or_insert_with(|| self.clock.now_ns());
            let completion =
                self.slots
                    .slots
                    .finish(cqe.user_data() as u32, cqe.result() as i64, completed_ns);
            if self.backing.caching == Caching::DroppedAfterEachTransfer
                && matches!(completion.op, Op::Read | Op::Write)
            {
                // Rare path (no O_DIRECT): drop the page cache so later reads reach the medium.
                self.backing.after_buffered_transfer(completion.op, 0, 0);
            }
            out.push(completion);
            n += 1;
        }
        n
    }
}

impl Device for UringDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        if !self.drain() {
            self.abandon_buffers();
            return Err(DeviceError::Invalid(
                "the io_uring failed with operations in flight".into(),
            ));
        }
        let shape = (slots, buffer_bytes, self.info.memory_align_bytes);
        if self.fixed_buffers && self.prepared == Some(shape) {
            // The same slots again (the next file of a scan): the registered buffers are kept.
            return Ok(());
        }
        self.prepared = None;
        if self.fixed_buffers {
            let _ = self.ring.submitter().unregister_buffers();
            self.fixed_buffers = false;
        }
        let entries = slots.max(2).next_power_of_two();
        if self.ring.params().sq_entries() < entries {
            let (ring, deferred_task_work) =
                new_ring(entries, true).map_err(|e| os_error("io_uring setup", e))?;
            self.ring = ring;
            self.deferred_task_work = deferred_task_work;
            self.ring
                .submitter()
                .register_files(&[self.backing.file.as_raw_fd()])
                .map_err(|e| os_error("io_uring file registration", e))?;
        }
        self.slots
            .prepare(slots, buffer_bytes, self.info.memory_align_bytes as usize);
        let iovecs = self.slots.pool.iovecs();
        // SAFETY: the iovecs describe the pool's live allocation, which stays alive and in place until the
        // buffers are unregistered (next prepare) or the ring is dropped (drop drains first; the ring field is
        // dropped before the pool field).
        match unsafe { self.ring.submitter().register_buffers(&iovecs) } {
            Ok(()) => {
                self.fixed_buffers = true;
                self.prepared = Some(shape);
                self.describe();
            }
            Err(e) => {
                self.describe();
                let note = format!("io_uring buffer registration failed ({e}); using unregistered buffers");
                if !self.info.notes.contains(&note) {
                    self.info.notes.push(note);
                }
            }
        }
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        self.slots.buffer(slot)
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.slots.buffer_mut(slot)
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        for (accepted, io) in ios.iter().enumerate() {
            self.slots.slots.check(io, self.slots.pool.buffer_len())?;
            if let Some(tail) = &self.backing.tail
                && tail.covers(io)
            {
                self.slots.slots.start(io, self.clock.now_ns());
                // SAFETY: the slot was free (checked above) and the tail's transfer is synchronous: no
                // submitted entry uses its buffer, and the kernel touches it only during the call.
                let buf = unsafe { self.slots.pool.slot_mut(io.slot) };
                let result = tail.transfer(io, buf);
                self.slots.ready.push(Done {
                    slot: io.slot,
                    result,
                    completed_ns: self.clock.now_ns(),
                });
                continue;
            }
            // A read that misses the page cache is timed from its try at the cache.
            let mut started_ns = None;
            if let Some(mode) = &mut self.page_cache {
                let in_ring = self.slots.slots.in_flight() - self.slots.ready.len();
                let inline = io.op == Op::Write && mode.writes.choose_inline(in_ring);
                let ask_cache = io.op == Op::Read && mode.nowait_reads;
                mode.writes.submitted_since_reap += 1;
                if inline {
                    self.write_inline(io);
                    continue;
                }
                if ask_cache {
                    let now = self.clock.now_ns();
                    if self.read_from_cache(io, now) {
                        continue;
                    }
                    started_ns = Some(now);
                }
            }
            if io.op == Op::Discard {
                self.slots.slots.start(io, self.clock.now_ns());
                let result = run_sync_op(&self.backing, io);
                self.slots.ready.push(Done {
                    slot: io.slot,
                    result,
                    completed_ns: self.clock.now_ns(),
                });
                continue;
            }
            if self.queue(io).is_err() {
                // The submission ring is full: hand what is queued to the kernel and try once more. The entries
                // before this one are started and accepted whatever happens; this one and the rest are not.
                match self.ring.submit() {
                    Ok(taken) => self.unsubmitted = self.unsubmitted.saturating_sub(taken),
                    Err(_) => return Ok(accepted),
                }
                if self.queue(io).is_err() {
                    return Ok(accepted);
                }
            }
            // Each entry's own submit time: the enters of the entries before it (which may also post completions)
            // are not its latency.
            self.slots
                .slots
                .start(io, started_ns.unwrap_or_else(|| self.clock.now_ns()));
            self.unsubmitted += 1;
            // Hand each entry over as it is queued, as fio does (iodepth_batch_submit=1): the enter that
            // submits it also runs the completions the ring has deferred (the crate asks for events when the
            // task-run flag is up), so a freed slot is seen, refilled and running again without a wait. If the
            // kernel refuses the early hand-over, the entry stays queued and the next reap submits it (or
            // reports why not).
            if let Ok(taken) = self.ring.submit() {
                self.unsubmitted = self.unsubmitted.saturating_sub(taken);
            }
        }
        Ok(ios.len())
    }

    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        if let Some(PageCache { writes, .. }) = &mut self.page_cache
            && writes.submitted_since_reap > 0
        {
            writes.last_batch = std::mem::take(&mut writes.submitted_since_reap);
        }
        let mut got = self.harvest(out);
        loop {
            let want = if got >= min {
                0
            } else {
                (min - got).min(self.slots.slots.in_flight() - self.slots.ready.len())
            };
            if want == 0 && self.unsubmitted == 0 {
                return Ok(got);
            }
            let entered = match deadline_ns {
                Some(deadline) if want > 0 => {
                    let now = self.clock.now_ns();
                    if now >= deadline {
                        // Past the deadline: still hand queued entries to the kernel, without waiting.
                        if self.unsubmitted > 0 {
                            self.ring.submit().map_err(|e| os_error("io_uring submit", e))?;
                            self.unsubmitted = 0;
                        }
                        return Ok(got + self.harvest(out));
                    }
                    if !self.ring.params().is_feature_ext_arg() {
                        // Kernels before 5.11 cannot wait with a timeout: poll briefly instead.
                        self.ring.submit().map_err(|e| os_error("io_uring submit", e))?;
                        self.unsubmitted = 0;
                        got += self.harvest(out);
                        if got < min {
                            self.clock.sleep_until(deadline.min(now + 20_000));
                        }
                        continue;
                    }
                    let left = deadline - now;
                    let ts = types::Timespec::new()
                        .sec(left / 1_000_000_000)
                        .nsec((left % 1_000_000_000) as u32);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(want, &args)
                }
                _ => self.ring.submit_and_wait(want),
            };
            match entered {
                Ok(_) => self.unsubmitted = 0,
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                    self.unsubmitted = 0;
                    return Ok(got + self.harvest(out));
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(os_error("io_uring enter", e)),
            }
            got += self.harvest(out);
            if want == 0 {
                return Ok(got);
            }
        }
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn wait_until(&mut self, t_ns: u64) {
        if self.unsubmitted > 0 && self.ring.submit().is_ok() {
            self.unsubmitted = 0;
        }
        self.clock.sleep_until(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.slots.slots.in_flight()
    }

    /// The file's own descriptor when the page cache is kept (`cache=page`): every read is a read of it.
    fn page_cache(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        (self.backing.caching == Caching::Kept).then(|| self.backing.file.as_fd())
    }

    fn page_cache_holds(&self, offset: u64, len: u64) -> bool {
        use std::os::fd::AsFd;
        self.backing.caching == Caching::Kept
            && crate::sys::page_cache_holds(self.backing.file.as_fd(), offset, len)
    }

    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        self.backing
            .extents(offset, len, EXTENTS_PER_QUERY, out)
            .map_err(|e| DeviceError::os("looking for holes (SEEK_DATA/SEEK_HOLE)", e))
    }
}

impl Drop for UringDevice {
    fn drop(&mut self) {
        // The kernel may still be transferring into our buffers; they must outlive every in-flight operation.
        if !self.drain() {
            self.abandon_buffers();
        }
        // Release the registered file now: left to the ring's teardown, the kernel closes it asynchronously,
        // and an exclusive claim on a block device would outlive this process for a moment.
        let _ = self.ring.submitter().unregister_files();
        let _ = self.ring.submitter().unregister_buffers();
    }
}

#[cfg(test)]
#[allow(
    clippy::too_many_lines,
    reason = "a test reads as one story; the 80-line rule is for production code"
)]
mod tests {
    use super::*;
    use crate::open::{OpenRequest, RealDevice, open_target};
    use ssdlab_core::target::TargetSpec;

    fn uring_file(dir: &std::path::Path) -> UringDevice {
        let target = format!("file:{}:1m", dir.join("ring.img").display());
        let spec = TargetSpec::parse(&target).unwrap();
        let request = OpenRequest {
            write: true,
            engine: crate::Engine::IoUring,
            ..OpenRequest::default()
        };
        match open_target(&target, &spec, request).unwrap().device {
            RealDevice::Uring(device) => device,
            _ => panic!("io_uring is unavailable on this kernel"),
        }
    }

    /// Writes a pattern at QD8, reads it back at QD1 (waiting without a deadline) and at QD8 (waiting with one,
    /// and past one), and checks every byte: completions must appear whether or not the ring defers its work.
    fn round_trip(device: &mut UringDevice) {
        const BLOCK: u64 = 4096;
        device.prepare(8, BLOCK as usize).unwrap();
        let io = |op, block: u64, slot: u32| Io {
            op,
            offset: block * BLOCK,
            len: BLOCK,
            slot,
            tag: block,
        };
        let mut done = Vec::new();
        for batch in 0..4u64 {
            let ios: Vec<Io> = (0..8)
                .map(|slot| {
                    let block = batch * 8 + u64::from(slot);
                    device.buffer_mut(slot).fill(block as u8 + 1);
                    io(Op::Write, block, slot)
                })
                .collect();
            assert_eq!(device.submit(&ios).unwrap(), 8);
            done.clear();
            while done.len() < 8 {
                device.reap(1, None, &mut done).unwrap();
            }
            assert!(done.iter().all(|c| c.result == BLOCK as i64), "{done:?}");
        }
        for block in 0..32u64 {
            device.submit(&[io(Op::Read, block, 0)]).unwrap();
            done.clear();
            assert_eq!(device.reap(1, None, &mut done).unwrap(), 1);
            assert!(
                device.buffer(0).iter().all(|&b| b == block as u8 + 1),
                "block {block}"
            );
        }
        let ios: Vec<Io> = (0..8)
            .map(|slot| io(Op::Read, 24 + u64::from(slot), slot))
            .collect();
        device.submit(&ios).unwrap();
        done.clear();
        // A deadline already past still hands over and harvests; a later one waits for the rest.
        device.reap(8, Some(0), &mut done).unwrap();
        while done.len() < 8 {
            let deadline = device.now_ns() + 1_000_000_000;
            device.reap(8 - done.len(), Some(deadline), &mut done).unwrap();
        }
        for c in &done {
            assert!(
                device.buffer(c.slot).iter().all(|&b| b == c.tag as u8 + 1),
                "block {}",
                c.tag
            );
        }
        // A poll that does not wait (min 0) still sees what finished meanwhile.
        device.submit(&[io(Op::Read, 5, 0)]).unwrap();
        done.clear();
        let start = std::time::Instant::now();
        while done.is_empty() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            device.reap(0, None, &mut done).unwrap();
        }
        assert_eq!(done.len(), 1, "a polling reap never saw the completion");
        assert_eq!(device.in_flight(), 0);
    }

    /// Over the page cache, cheap writes run inline and slow ones go through the ring whenever the caller has
    /// more in hand; either way every byte arrives and every completion is reaped once.
    #[test]
    fn page_cache_writes_run_inline_while_cheap_and_through_the_ring_when_slow() {
        let dir = tempfile::tempdir().unwrap();
        let target = format!("file:{}:1m?cache=page", dir.path().join("page.img").display());
        let spec = TargetSpec::parse(&target).unwrap();
        let request = OpenRequest {
            write: true,
            ..OpenRequest::default()
        };
        let mut device = match open_target(&target, &spec, request).unwrap().device {
            RealDevice::Uring(device) => device,
            _ => panic!("io_uring is unavailable on this kernel"),
        };
        assert!(device.page_cache.is_some());
        round_trip(&mut device);
        assert!(device.info.backend.contains("inline"), "{}", device.info.backend);
        let writes = |device: &mut UringDevice| -> Vec<Io> {
            (0..8u32)
                .map(|slot| {
                    device.buffer_mut(slot).fill(0x5a);
                    Io {
                        op: Op::Write,
                        offset: u64::from(slot) * 4096,
                        len: 4096,
                        slot,
                        tag: 0,
                    }
                })
                .collect()
        };
        let settle = |device: &mut UringDevice| {
            let mut done = Vec::new();
            while device.in_flight() > 0 {
                device.reap(1, None, &mut done).unwrap();
            }
            assert_eq!(done.len(), 8);
            assert!(done.iter().all(|c| c.result == 4096), "{done:?}");
        };
        // Cheap (as measured so far): inline, ready before any reap (the first for certain; the others unless
        // a stall of the test's thread made one of them look slow).
        fn mode(device: &mut UringDevice) -> &mut InlineWrites {
            &mut device.page_cache.as_mut().expect("the page-cache mode").writes
        }
        mode(&mut device).mean_ns_per_4k = 1_000;
        let ios = writes(&mut device);
        device.submit(&ios).unwrap();
        assert!(!device.slots.ready.is_empty());
        settle(&mut device);
        // Slow, from a caller that had a queue of work last time (eight between reaps): all eight through the
        // ring, side by side.
        mode(&mut device).mean_ns_per_4k = 50_000;
        mode(&mut device).since_inline = 0;
        let ios = writes(&mut device);
        device.submit(&ios).unwrap();
        assert_eq!(device.slots.ready.len(), 0);
        settle(&mut device);
        // Still slow, one at a time with a reap between: once the caller is seen to have no queue (the first
        // of them), each runs inline (no overlap to gain), and brings the measured cost back down.
        for i in 0..64 {
            device.buffer_mut(0).fill(0x5a);
            let io = Io {
                op: Op::Write,
                offset: 0,
                len: 4096,
                slot: 0,
                tag: 0,
            };
            device.submit(&[io]).unwrap();
            assert_eq!(device.slots.ready.len(), usize::from(i > 0), "write {i}");
            device.reap(1, None, &mut Vec::new()).unwrap();
        }
        assert!(mode(&mut device).mean_ns_per_4k < 50_000);
        round_trip(&mut device);
        // A read the page cache holds completes inside submit; once the cache has dropped the pages, it goes
        // through the ring and still brings the bytes.
        let read = Io {
            op: Op::Read,
            offset: 3 * 4096,
            len: 4096,
            slot: 0,
            tag: 0,
        };
        device.submit(&[read]).unwrap();
        assert_eq!(device.slots.ready.len(), 1, "a cached read went through the ring");
        device.reap(1, None, &mut Vec::new()).unwrap();
        assert!(
            device.buffer(0).iter().all(|&b| b == 4),
            "block 3 holds round_trip's pattern"
        );
        device.backing.file.sync_all().unwrap();
        let drop_cache = |device: &UringDevice| {
            // SAFETY: a plain advice call on a live descriptor.
            let advised = unsafe {
                libc::posix_fadvise(device.backing.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
            };
            assert_eq!(advised, 0);
        };
        drop_cache(&device);
        // Whether this file system really drops the pages and refuses a read of them without waiting (tmpfs
        // keeps them; a synchronous device may read them back inside the call): the path is asserted only
        // where it can be told.
        let mut probe = vec![0u8; 4096];
        let probe_iov = libc::iovec {
            iov_base: probe.as_mut_ptr().cast(),
            iov_len: probe.len(),
        };
        // SAFETY: one iovec over a live 4 KiB vector.
        let refused = unsafe {
            libc::preadv2(
                device.backing.file.as_raw_fd(),
                &probe_iov,
                1,
                3 * 4096,
                libc::RWF_NOWAIT,
            )
        } < 0;
        drop_cache(&device);
        device.buffer_mut(0).fill(0);
        device.submit(&[read]).unwrap();
        if refused {
            assert_eq!(
                device.slots.ready.len(),
                0,
                "a read of dropped pages completed inline"
            );
        }
        let mut done = Vec::new();
        while device.in_flight() > 0 {
            device.reap(1, None, &mut done).unwrap();
        }
        assert_eq!(done[0].result, 4096);
        assert!(
            device.buffer(0).iter().all(|&b| b == 4),
            "the ring read the dropped block back"
        );
    }

    #[test]
    fn slow_writes_with_a_queue_behind_them_go_to_the_ring_and_are_measured_again() {
        let mut w = InlineWrites::new();
        // Cheap: inline, queue or not.
        assert!(w.choose_inline(0));
        w.submitted_since_reap = 5;
        assert!(w.choose_inline(3));
        // Slow (the running mean of 30 us writes of 4 KiB).
        for _ in 0..40 {
            w.record(4096, 30_000);
        }
        assert!(w.mean_ns_per_4k > SLOW_INLINE_WRITE_NS_PER_4K);
        // Slow but alone (nothing in the ring, nothing submitted since the reap, a last batch of one): inline.
        w.submitted_since_reap = 0;
        w.last_batch = 1;
        assert!(w.choose_inline(0));
        // Slow with a queue: through the ring, but every PROBE_EVERY-th inline.
        w.submitted_since_reap = 1;
        let inline: Vec<bool> = (0..2 * PROBE_EVERY).map(|_| w.choose_inline(4)).collect();
        assert_eq!(inline.iter().filter(|&&i| i).count(), 2);
        assert!(inline[PROBE_EVERY as usize - 1] && inline[2 * PROBE_EVERY as usize - 1]);
        // A last batch of several counts as a queue even with the ring empty.
        w.submitted_since_reap = 0;
        w.last_batch = 8;
        w.since_inline = 0;
        assert!(!w.choose_inline(0));
        // Cheap probes bring the mean down, and writes back inline.
        for _ in 0..40 {
            w.record(4096, 2_000);
        }
        assert!(w.choose_inline(4));
        // The cost is per 4 KiB: a 1 MiB write of 256 us is a copy, not a slow write.
        let mut big = InlineWrites::new();
        for _ in 0..40 {
            big.record(1 << 20, 256_000);
        }
        assert!(big.mean_ns_per_4k <= SLOW_INLINE_WRITE_NS_PER_4K);
    }

    #[test]
    fn completions_arrive_with_and_without_deferred_task_work() {
        let dir = tempfile::tempdir().unwrap();
        let mut device = uring_file(dir.path());
        round_trip(&mut device);
        // One file is written through one device at a time (its OFD write lock): the first goes first.
        drop(device);
        // The fallback of kernels before 6.1: the same device on a ring without deferral.
        let mut plain = uring_file(dir.path());
        let (ring, deferred) = new_ring(8, false).unwrap();
        assert!(!deferred);
        ring.submitter()
            .register_files(&[plain.backing.file.as_raw_fd()])
            .unwrap();
        plain.ring = ring;
        plain.deferred_task_work = false;
        round_trip(&mut plain);
    }
}
