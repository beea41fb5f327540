//! Pieces every real backend shares: the monotonic clock, slot bookkeeping and the opened file behind a device.

use std::fs::File;
use std::time::{Duration, Instant};

use ssdlab_core::device::{Completion, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op};

use crate::buffers::BufferPool;
use crate::sys;

/// CLOCK_MONOTONIC nanoseconds since the device was opened.
#[derive(Debug, Clone, Copy)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    pub fn new() -> Self {
        RealClock {
            origin: Instant::now(),
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Waits until the clock reads `t_ns` (returns at once if it already does). It sleeps until shortly before
    /// and spins the rest, because a sleep overshoots by tens of microseconds (more on a VM), and a rate-limited
    /// run measures latency from the scheduled time: lateness here would be charged to the device.
    pub fn sleep_until(&self, t_ns: u64) {
        const SPIN_NS: u64 = 100_000;
        let now = self.now_ns();
        if t_ns > now + 2 * SPIN_NS {
            std::thread::sleep(Duration::from_nanos(t_ns - now - SPIN_NS));
        }
        while self.now_ns() < t_ns {
            std::hint::spin_loop();
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

/// What a job's own device is made of: the device's description, a duplicate of its backing descriptor and its
/// clock, so every job's completions are timed on one clock. Made where the device is, turned into a device on
/// the job's thread (an io_uring belongs to the thread that set it up).
#[derive(Debug)]
pub struct Sibling {
    pub info: DeviceInfo,
    pub backing: Backing,
    pub clock: RealClock,
    /// Over a kept page cache, the way the device it came from reads and writes it.
    pub page_cache: bool,
}

impl Sibling {
    /// Another sibling of the same device: a duplicate of this one's descriptor, on the same clock.
    pub fn duplicate(&self) -> std::io::Result<Sibling> {
        Ok(Sibling {
            info: self.info.clone(),
            backing: self.backing.duplicate()?,
            clock: self.clock,
            page_cache: self.page_cache,
        })
    }
}

/// Per-slot state: which slots are in flight, with the caller's tag and the submit time.
#[derive(Debug, Default)]
pub struct Slots {
    busy: Vec<bool>,
    tag: Vec<u64>,
    op: Vec<Op>,
    submitted_ns: Vec<u64>,
    in_flight: usize,
}

impl Slots {
    pub fn new(count: u32) -> Self {
        let n = count as usize;
        Slots {
            busy: vec![false; n],
            tag: vec![0; n],
            op: vec![Op::Read; n],
            submitted_ns: vec![0; n],
            in_flight: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Checks that `io` may start: its slot exists and is free, its length fits the slot's buffer.
    #[inline]
    pub fn check(&self, io: &Io, buffer_len: usize) -> DeviceResult<()> {
        let slot = io.slot as usize;
        if slot >= self.busy.len() {
            return Err(DeviceError::Invalid(format!(
                "slot {} does not exist ({} prepared)",
                io.slot,
                self.busy.len()
            )));
        }
        if self.busy[slot] {
            return Err(DeviceError::Invalid(format!(
                "slot {} is already in flight",
                io.slot
            )));
        }
        if matches!(io.op, Op::Read | Op::Write) && io.len as usize > buffer_len {
            return Err(DeviceError::Invalid(format!(
                "a {}-byte transfer does not fit the {buffer_len}-byte slot buffer",
                io.len
            )));
        }
        Ok(())
    }

    #[inline]
    pub fn start(&mut self, io: &Io, now_ns: u64) {
        let slot = io.slot as usize;
        self.busy[slot] = true;
        self.tag[slot] = io.tag;
        self.op[slot] = io.op;
        self.submitted_ns[slot] = now_ns;
        self.in_flight += 1;
    }

    #[inline]
    pub fn finish(&mut self, slot: u32, result: i64, completed_ns: u64) -> Completion {
        let s = slot as usize;
        assert!(
            self.busy[s],
            "completion for slot {slot}, which was not in flight"
        );
        self.busy[s] = false;
        self.in_flight -= 1;
        Completion {
            slot,
            tag: self.tag[s],
            op: self.op[s],
            result,
            submitted_ns: self.submitted_ns[s],
            completed_ns,
        }
    }

    /// Panics if a slot's buffer is touched while the kernel may be using it.
    #[inline]
    pub fn assert_idle(&self, slot: u32) {
        assert!(
            !self.busy[slot as usize],
            "slot {slot} buffer touched while in flight"
        );
    }
}

/// An operation that finished inside `submit`, waiting to be reaped.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    pub slot: u32,
    pub result: i64,
    pub completed_ns: u64,
}

/// The most extents one allocation query returns (each is a pair of system calls; a caller asks again).
pub const EXTENTS_PER_QUERY: usize = 1024;

/// The kind of file behind a real device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackingKind {
    BlockDevice,
    RegularFile,
}

/// The open file behind a real device, with what the backends need to know about it.
#[derive(Debug)]
pub struct Backing {
    pub file: File,
    pub kind: BackingKind,
    pub caching: Caching,
    /// A file whose length ends inside its last logical block: how that block is read and written.
    pub tail: Option<Tail>,
}

/// The last logical block of a file that ends inside it (an image of 1,000,001 bytes, say). O_DIRECT cannot
/// move part of a block, and a whole-block write there would extend the file, so every transfer that reaches
/// into this block goes through a descriptor of the same file without O_DIRECT, synchronously: a read gets the
/// file's bytes up to the capacity and zeroes after them, a write puts only the bytes before the capacity. The
/// device's clients (an NBD export of the exact size) can then read and write every byte of the file and never
/// change its length. Rare by nature, so its speed does not matter.
#[derive(Debug)]
pub struct Tail {
    /// Where the partial block starts (a multiple of the logical block).
    pub start_bytes: u64,
    /// The capacity: nothing at or past it is ever written.
    pub end_bytes: u64,
    /// The same file, opened without O_DIRECT.
    pub file: File,
}

impl Tail {
    /// Whether `io` is a transfer that reaches into the partial block.
    #[inline]
    pub fn covers(&self, io: &Io) -> bool {
        matches!(io.op, Op::Read | Op::Write) && io.offset.saturating_add(io.len) > self.start_bytes
    }

    /// Moves `io` (one this tail covers) between the file and `buf` (the operation's bytes), in the completion's
    /// convention: the whole length on success, as the device was asked for whole blocks.
    pub fn transfer(&self, io: &Io, buf: &mut [u8]) -> i64 {
        use std::os::unix::fs::FileExt;
        let len = io.len as usize;
        let inside = self.end_bytes.saturating_sub(io.offset).min(io.len) as usize;
        let outcome = match io.op {
            Op::Read => {
                let (data, past) = buf[..len].split_at_mut(inside);
                past.fill(0);
                self.file.read_exact_at(data, io.offset).map(|()| len)
            }
            Op::Write => self.file.write_all_at(&buf[..inside], io.offset).map(|()| len),
            Op::Discard | Op::Flush => unreachable!("only transfers go through the tail"),
        };
        completion_result(outcome)
    }
}

/// How a real device's transfers meet the kernel's page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// O_DIRECT: every transfer reaches the medium.
    Direct,
    /// O_DIRECT could not be used: the range is written back and dropped from the page cache after each
    /// transfer, so later reads still reach the medium.
    DroppedAfterEachTransfer,
    /// The page cache is used and kept, as the user asked (`file:PATH?cache=page`): only a flush makes writes
    /// durable.
    Kept,
}

impl Backing {
    /// The same file through duplicates of its descriptors (one open file description: the same flags, the
    /// same claim), for a job's device on another thread.
    pub fn duplicate(&self) -> std::io::Result<Backing> {
        Ok(Backing {
            file: self.file.try_clone()?,
            kind: self.kind,
            caching: self.caching,
            tail: match &self.tail {
                Some(tail) => Some(Tail {
                    start_bytes: tail.start_bytes,
                    end_bytes: tail.end_bytes,
                    file: tail.file.try_clone()?,
                }),
                None => None,
            },
        })
    }

    /// Discards a byte range, synchronously: BLKDISCARD on a block device, a punched hole in a file.
    pub fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        match self.kind {
            BackingKind::BlockDevice => sys::block_discard(&self.file, offset, len),
            BackingKind::RegularFile => sys::punch_hole(&self.file, offset, len),
        }
    }

    /// The allocation of `[offset, offset + len)`: holes of a regular file (SEEK_HOLE/SEEK_DATA; a hole reads as
    /// zeroes), everything allocated on a block device (the kernel cannot tell). At most `max_extents`.
    pub fn extents(
        &self,
        offset: u64,
        len: u64,
        max_extents: usize,
        out: &mut Vec<Extent>,
    ) -> std::io::Result<()> {
        let end = offset + len;
        if self.kind == BackingKind::BlockDevice {
            out.push(Extent::data(len));
            return Ok(());
        }
        let mut at = offset;
        let mut pushed = 0;
        while at < end && pushed < max_extents {
            let data = sys::seek_extent(&self.file, at, sys::SeekTo::Data)?
                .unwrap_or(end)
                .min(end);
            if data > at {
                Extent::push_merged(out, Extent::hole(data - at));
                pushed += 1;
                at = data;
                continue;
            }
            // Data at `at`: it runs to the next hole (every file has one at its end).
            let hole = sys::seek_extent(&self.file, at, sys::SeekTo::Hole)?
                .unwrap_or(end)
                .min(end);
            pushed += 1;
            // A hole at `at` means one was punched between the two calls: look again.
            if hole > at {
                Extent::push_merged(out, Extent::data(hole - at));
                at = hole;
            }
        }
        if at == offset {
            // Holes kept moving under us: claim nothing rather than describe nothing.
            out.push(Extent::data(len));
        }
        Ok(())
    }

    /// After a buffered transfer, drops the range from the page cache so later reads reach the medium.
    /// Dirty pages are written back first (fdatasync), since DONTNEED leaves dirty pages in place.
    pub fn after_buffered_transfer(&self, op: Op, offset: u64, len: u64) {
        if self.caching == Caching::DroppedAfterEachTransfer {
            if op == Op::Write {
                let _ = self.file.sync_data();
            }
            let _ = sys::drop_cache(&self.file, offset, len);
        }
    }
}

/// Runs a discard or flush synchronously and returns its result in the completion's convention.
pub fn run_sync_op(backing: &Backing, io: &Io) -> i64 {
    let outcome = match io.op {
        Op::Discard => backing.discard(io.offset, io.len),
        Op::Flush => backing.file.sync_data(),
        Op::Read | Op::Write => unreachable!("transfers are not synchronous operations"),
    };
    completion_result(outcome.map(|()| io.len as usize))
}

/// A synchronous operation's outcome in the completion's convention: the bytes moved, or the negated errno
/// (EIO for an error without one).
pub fn completion_result(outcome: std::io::Result<usize>) -> i64 {
    match outcome {
        Ok(n) => n as i64,
        Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
    }
}

/// The slot buffers and bookkeeping every real backend keeps: the aligned pool, which slots are in flight, and
/// completions that finished inside `submit` (synchronous backends, discards) waiting to be reaped.
pub struct SlotBuffers {
    pub pool: BufferPool,
    pub slots: Slots,
    pub ready: Vec<Done>,
}

impl SlotBuffers {
    /// No slots yet (until `prepare`).
    pub fn new(align: usize) -> Self {
        SlotBuffers {
            pool: BufferPool::new(1, align, align),
            slots: Slots::new(0),
            ready: Vec::new(),
        }
    }

    /// Replaces the slots; nothing may be in flight.
    pub fn prepare(&mut self, count: u32, buffer_bytes: usize, align: usize) {
        assert_eq!(self.slots.in_flight(), 0, "prepare with operations in flight");
        self.pool = BufferPool::new(count, buffer_bytes, align);
        self.slots = Slots::new(count);
        self.ready = Vec::with_capacity(count as usize);
    }

    pub fn buffer(&self, slot: u32) -> &[u8] {
        self.slots.assert_idle(slot);
        // SAFETY: the slot is idle (asserted above): no submitted operation targets its buffer, and none can be
        // submitted while this shared borrow of `self` lives.
        unsafe { self.pool.slot(slot) }
    }

    pub fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.slots.assert_idle(slot);
        // SAFETY: as for `buffer`, under an exclusive borrow.
        unsafe { self.pool.slot_mut(slot) }
    }

    /// Checks and marks an operation in flight.
    #[inline]
    pub fn begin(&mut self, io: &Io, now_ns: u64) -> DeviceResult<()> {
        self.slots.check(io, self.pool.buffer_len())?;
        self.slots.start(io, now_ns);
        Ok(())
    }

    /// Moves the completions finished inside `submit` to `out`, observed no earlier than `observed_ns`.
    #[inline]
    pub fn drain_ready(&mut self, observed_ns: u64, out: &mut Vec<Completion>) -> usize {
        let n = self.ready.len();
        for done in self.ready.drain(..) {
            out.push(
                self.slots
                    .finish(done.slot, done.result, observed_ns.max(done.completed_ns)),
            );
        }
        n
    }
}
