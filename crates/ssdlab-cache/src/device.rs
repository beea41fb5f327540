//! [`CachedDevice`]: the cache as a [`Device`] over any other device, so every command can measure a drive
//! through it and the NBD server can export it.
//!
//! It owns the life of each host operation (served from memory, sent to the device, or waiting), the destage
//! writes, and the order in which FLUSHes reach the device. It must never acknowledge a FLUSH before every
//! write acknowledged before it is on the device and the device has been flushed, never evict dirty data, and
//! never have two destage writes of one block in flight.
//!
//! **Slots.** The host's slot `i` is the inner device's slot `i`, so its buffer is the inner device's (registered
//! on io_uring) and a miss or a write-around needs no copy. Destage writes use extra inner slots after the
//! host's, each with a buffer of at least [`DESTAGE_CHUNK_BYTES`].
//!
//! **Background work without threads.** Destaging happens inside `submit`, `reap` and `wait_until`: whenever
//! the host calls in, finished destages are settled and new ones issued, up to `destage_qd` at a time. Dirty
//! data is destaged in LBA order (an elevator over the dirty set) once enough has accumulated to coalesce,
//! at once when a FLUSH or a write is waiting for it, and whenever the host is idle (`wait_until`).
//!
//! **Time.** On a real device the cache's own work takes real time and completions carry the clock after it.
//! On a virtual one (`sim:`) that work is charged by [`crate::cost::CostModel`] on a single virtual CPU, and
//! the inner device's clock is advanced to each completion before the host sees it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use ssdlab_core::device::{
    ClockKind, Completion, Device, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op, mark_allocated,
};
use ssdlab_core::schema::{CacheStats, DeviceCounters};
use ssdlab_core::target::CacheMode;

use crate::admission::{FrequencySketch, Streams};
use crate::cost::CostModel;
use crate::store::{self, BLOCK, Destaged, State, Store};
use crate::watch::{MissWatch, Ticket};

/// The largest destage write: dirty blocks are coalesced into runs of up to this many bytes.
pub const DESTAGE_CHUNK_BYTES: u64 = 1 << 20;
/// The most memory the destage slots' buffers may take together.
const DESTAGE_BUFFER_BUDGET_BYTES: usize = 64 << 20;
/// The most blocks one allocation query looks up in the cache (a caller asks again from where it ends).
const EXTENTS_QUERY_BLOCKS: u64 = 1 << 16;

/// How to build a cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheConfig {
    pub size_bytes: u64,
    pub mode: CacheMode,
    pub seq_cutoff_bytes: u64,
    pub dirty_limit_percent: u8,
    /// Destage writes in flight at most.
    pub destage_qd: u32,
    /// While the host CPU is busier than this (percent of all CPUs, as the load probe measures it), new reads
    /// are not admitted and writes go around the cache: it costs CPU the applications need. 100: never.
    pub cpu_limit_percent: u8,
    /// How often (device clock) the load probe is asked.
    pub load_check_ns: u64,
}

/// Measures how busy the host's CPUs were since it was last asked, as a fraction of all of them; `None` when it
/// cannot tell (yet). Given by the opener for devices with a real clock: the cache does no I/O of its own.
pub type LoadProbe = Box<dyn FnMut() -> Option<f64> + Send>;

/// Pass-through ends only when the load falls this many points below the limit (or to half a low limit), so it
/// does not flap.
const PASS_THROUGH_HYSTERESIS_PERCENT: f64 = 10.0;

impl CacheConfig {
    pub fn new(size_bytes: u64, mode: CacheMode) -> Self {
        CacheConfig {
            size_bytes,
            mode,
            seq_cutoff_bytes: 4 << 20,
            dirty_limit_percent: 50,
            destage_qd: 16,
            cpu_limit_percent: 100,
            load_check_ns: 100_000_000,
        }
    }
}

/// Where a host operation is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    Idle,
    /// At the inner device on the same slot.
    Inner(Forwarded),
    /// A write waiting for frames (the dirty limit), in `waiting_writes` order.
    WaitingFrames,
    /// A FLUSH waiting for its epoch to be destaged before it goes to the device.
    WaitingFlush {
        epoch: u64,
    },
    /// Finished; delivered by `reap` once the clock reaches its completion time.
    Ready,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Forwarded {
    MissRead { admit: bool },
    WriteAround,
    Flush,
    Discard,
}

#[derive(Debug, Clone, Copy)]
struct HostOp {
    io: Io,
    submitted_ns: u64,
    waiting_since_ns: u64,
    stage: Stage,
    completion: Option<Completion>,
}

const IDLE: HostOp = HostOp {
    io: Io {
        op: Op::Read,
        offset: 0,
        len: 0,
        slot: 0,
        tag: 0,
    },
    submitted_ns: 0,
    waiting_since_ns: 0,
    stage: Stage::Idle,
    completion: None,
};

pub struct CachedDevice<D: Device> {
    inner: D,
    info: DeviceInfo,
    config: CacheConfig,
    store: Store,
    sketch: FrequencySketch,
    streams: Streams,
    /// Charged on virtual clocks only.
    cost: Option<CostModel>,
    /// When the virtual CPU is next free.
    cpu_free_ns: u64,
    host: Vec<HostOp>,
    host_in_flight: usize,
    /// Host buffer size as prepared by the caller.
    buffer_bytes: usize,
    ready: BinaryHeap<Reverse<(u64, u32)>>,
    waiting_writes: VecDeque<u32>,
    waiting_flushes: VecDeque<u32>,
    /// Per destage slot, the blocks its write carries.
    destages: Vec<Vec<Destaged>>,
    free_destage: Vec<u32>,
    destage_chunk_blocks: usize,
    cursor: u64,
    /// Destage everything now (host idle, closing).
    draining: bool,
    /// The errno of a failed destage: destaging pauses until the next FLUSH, which reports it.
    destage_error: Option<i64>,
    pinned_limit: usize,
    stats: CacheStats,
    inner_out: Vec<Completion>,
    run: Vec<Destaged>,
    /// Per host slot, for a read miss at the device: the cached blocks of its range as they were when it was
    /// sent (the device may serve it before a destage of them lands, and they may be evicted meanwhile), and
    /// its ticket for admission.
    misses: Vec<Miss>,
    /// The blocks the host changed while a miss of them was at the device: those are never admitted from it.
    watch: MissWatch,
    /// Blocks to read in at the first `prepare`, most recently used first (a warm start from a hot map).
    warm_blocks: Vec<u64>,
    /// Called with the cached blocks, most recently used first, when the cache is dropped (saves the hot map).
    on_close: Option<CloseHook>,
    load_probe: Option<LoadProbe>,
    next_load_check_ns: u64,
    /// Since when the cache has been passing I/O through because the host is busy.
    pass_through_since_ns: Option<u64>,
}

/// What the cache hands its owner when it closes: every cached block, most recently used first.
pub type CloseHook = Box<dyn FnOnce(Vec<u64>) + Send>;

#[derive(Debug, Clone, Default)]
struct Miss {
    /// The blocks cached when it was sent: each with the sectors it held and its data then.
    cached: Vec<(u64, u8, Vec<u8>)>,
    /// When it was sent, for [`MissWatch::unchanged_since`]; meaningful only for a miss that may admit.
    ticket: Ticket,
}

impl<D: Device> CachedDevice<D> {
    /// A cache of `config.size_bytes` over `inner`. `target` is the whole target as written.
    /// The inner device's logical block must divide [`BLOCK`] (the opener refuses others).
    pub fn new(inner: D, target: &str, config: CacheConfig) -> Self {
        assert!(
            BLOCK.is_multiple_of(u64::from(inner.info().logical_block_bytes)),
            "the inner device's logical block divides the cache block"
        );
        let frames = (config.size_bytes / BLOCK).max(1) as usize;
        let inner_info = inner.info().clone();
        let cost = (inner_info.clock == ClockKind::Virtual).then(CostModel::default);
        let mut info = inner_info.clone();
        info.target = target.to_string();
        info.model = format!(
            "{} behind a {} MiB DRAM cache ({})",
            inner_info.model,
            (frames as u64 * BLOCK) >> 20,
            config.mode.name()
        );
        info.backend = format!("ssdlab-cache over {}", inner_info.backend);
        if let Some(cost) = &cost {
            info.notes.push(cost.describe());
        }
        let store = Store::new(frames);
        let pinned_limit = (frames * config.dirty_limit_percent as usize / 100).max(1);
        let stats = CacheStats {
            mode: config.mode,
            cache_bytes: frames as u64 * BLOCK,
            writes_around_partial: Some(0),
            writes_around_large: Some(0),
            ..CacheStats::default()
        };
        let mut device = CachedDevice {
            inner,
            info,
            config,
            sketch: FrequencySketch::new(frames),
            store,
            streams: Streams::default(),
            cost,
            cpu_free_ns: 0,
            host: Vec::new(),
            host_in_flight: 0,
            buffer_bytes: 0,
            ready: BinaryHeap::new(),
            waiting_writes: VecDeque::new(),
            waiting_flushes: VecDeque::new(),
            destages: Vec::new(),
            free_destage: Vec::new(),
            destage_chunk_blocks: 1,
            cursor: 0,
            draining: false,
            destage_error: None,
            pinned_limit,
            stats,
            inner_out: Vec::new(),
            run: Vec::new(),
            misses: Vec::new(),
            watch: MissWatch::default(),
            warm_blocks: Vec::new(),
            on_close: None,
            load_probe: None,
            next_load_check_ns: 0,
            pass_through_since_ns: None,
        };
        device.stats.metadata_bytes = device.metadata_bytes();
        device
    }

    fn metadata_bytes(&self) -> u64 {
        self.store.metadata_bytes(self.pinned_limit) + self.sketch.memory_bytes()
    }

    /// Checks every invariant of the cache's state (linear in its size: for tests and debugging).
    pub fn check_invariants(&self) {
        let in_flight: Vec<Destaged> = self.destages.iter().flatten().copied().collect();
        self.store.check(&in_flight);
        let busy = self.host.iter().filter(|op| op.stage != Stage::Idle).count();
        assert_eq!(busy, self.host_in_flight, "host operations in flight");
        let destaging: usize = self.destages.iter().map(Vec::len).sum();
        assert_eq!(
            self.free_destage.len() + self.destages.iter().filter(|d| !d.is_empty()).count(),
            self.destages.len(),
            "every destage slot is free or carries blocks"
        );
        assert!(destaging <= self.store.pinned(), "destaged blocks are pinned");
        let admitting = self
            .host
            .iter()
            .any(|op| op.stage == Stage::Inner(Forwarded::MissRead { admit: true }));
        assert!(
            admitting || self.watch.watched_blocks() == 0,
            "blocks are watched with no miss at the device"
        );
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The device below, to change how it behaves before any I/O (a virtual drive told to keep its data).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Reads `blocks` (most recently used first) into the cache when it is first prepared, so a restarted cache
    /// starts warm. Blocks beyond the device or the cache's size are ignored. Only data the device holds then
    /// is cached: the list is a hint and never data.
    pub fn warm_at_start(&mut self, blocks: Vec<u64>) {
        let end = self.info.capacity_bytes / BLOCK;
        let mut seen = std::collections::HashSet::new();
        self.warm_blocks = blocks
            .into_iter()
            .filter(|&b| b < end && seen.insert(b))
            .take(self.store.frame_count())
            .collect();
    }

    /// Installs the probe that says how busy the host is; without one the cache never passes through.
    pub fn set_load_probe(&mut self, probe: LoadProbe) {
        self.load_probe = Some(probe);
    }

    /// Whether new I/O should pass the cache by because the host CPU is busy: asks the probe at most every
    /// `load_check_ns` and keeps the time spent passing through.
    fn passing_through(&mut self) -> bool {
        let Some(probe) = self.load_probe.as_mut() else {
            return false;
        };
        let now = self.inner.now_ns();
        if now >= self.next_load_check_ns {
            self.next_load_check_ns = now + self.config.load_check_ns;
            if let Some(busy) = probe() {
                let busy_percent = busy * 100.0;
                let limit = f64::from(self.config.cpu_limit_percent);
                match self.pass_through_since_ns {
                    None if limit < 100.0 && busy_percent >= limit => {
                        self.pass_through_since_ns = Some(now);
                        self.stats.pass_through_episodes += 1;
                    }
                    Some(since)
                        if busy_percent < limit - PASS_THROUGH_HYSTERESIS_PERCENT.min(limit / 2.0) =>
                    {
                        self.stats.pass_through_ns += now - since;
                        self.pass_through_since_ns = None;
                    }
                    _ => {}
                }
            }
        }
        self.pass_through_since_ns.is_some()
    }

    /// Adds a line to what the device tells the user about itself (a warm start, a hot map not used).
    pub fn add_note(&mut self, note: String) {
        self.info.notes.push(note);
    }

    /// Calls `hook` with every cached block, most recently used first, when the cache is dropped (after it has
    /// destaged everything).
    pub fn on_close(&mut self, hook: CloseHook) {
        self.on_close = Some(hook);
    }

    /// The cached blocks, most recently used first.
    pub fn hot_blocks(&self) -> Vec<u64> {
        self.store.blocks_by_recency()
    }

    /// Reads the warm list in LBA order, coalesced into runs, on the destage slots, and caches every block
    /// clean; then orders them by their old recency. A read that fails or is refused leaves its blocks out; only
    /// a device that cannot even report completions fails the `prepare`.
    fn warm(&mut self) -> DeviceResult<()> {
        let order = std::mem::take(&mut self.warm_blocks);
        if order.is_empty() {
            return Ok(());
        }
        let mut sorted = order.clone();
        sorted.sort_unstable();
        let mut runs: Vec<(u64, usize)> = Vec::new();
        for b in sorted {
            match runs.last_mut() {
                Some((start, n)) if *start + *n as u64 == b && *n < self.destage_chunk_blocks => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        let base = self.host.len() as u32;
        let mut pending = runs.into_iter();
        let mut carrying: Vec<Option<(u64, usize)>> = vec![None; self.destages.len()];
        let mut in_flight = 0;
        let mut failure = None;
        loop {
            while failure.is_none() {
                let Some(slot) = self.free_destage.pop() else {
                    break;
                };
                let Some((start, n)) = pending.next() else {
                    self.free_destage.push(slot);
                    break;
                };
                let io = Io {
                    op: Op::Read,
                    offset: start * BLOCK,
                    len: n as u64 * BLOCK,
                    slot: base + slot,
                    tag: 0,
                };
                match self.inner.submit(&[io]) {
                    Ok(1) => {
                        carrying[slot as usize] = Some((start, n));
                        in_flight += 1;
                    }
                    // Not taken: these blocks are left out, and so is the rest (the device is struggling).
                    Ok(_) | Err(_) => {
                        self.free_destage.push(slot);
                        failure = Some(());
                    }
                }
            }
            if in_flight == 0 {
                break;
            }
            self.inner_out.clear();
            // A device that cannot report completions fails the `prepare`: reads may still be in flight on
            // destage slots, so the cache must not be used.
            self.inner.reap(1, None, &mut self.inner_out)?;
            for c in std::mem::take(&mut self.inner_out) {
                let slot = c.slot - base;
                let (start, n) = carrying[slot as usize].take().expect("a warm read on this slot");
                in_flight -= 1;
                if c.result == (n as u64 * BLOCK) as i64 {
                    for k in 0..n {
                        let block = start + k as u64;
                        if self.store.lookup(block).is_some() {
                            continue;
                        }
                        let at = k * BLOCK as usize;
                        let data = &self.inner.buffer(c.slot)[at..at + BLOCK as usize];
                        if self.store.insert_clean(block, data).is_some() {
                            self.stats.warmed_bytes += BLOCK;
                        }
                    }
                }
                self.free_destage.push(slot);
            }
        }
        // Least recent first, so the most recently used block ends at the front of the LRU list.
        for &b in order.iter().rev() {
            if let Some(frame) = self.store.lookup(b) {
                self.store.touch(frame);
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> CacheStats {
        let mut stats = self.stats;
        if let Some(since) = self.pass_through_since_ns {
            stats.pass_through_ns += self.inner.now_ns().saturating_sub(since);
        }
        stats.evictions = self.store.evictions;
        stats.dirty_bytes = self.store.pinned() as u64 * BLOCK;
        stats
    }

    /// Destages every dirty block and flushes the device: what a clean shutdown does. Host operations in
    /// flight are left to be reaped.
    pub fn flush_all(&mut self) -> DeviceResult<()> {
        if self.destages.is_empty() {
            assert_eq!(self.store.pinned(), 0, "dirty data without prepared slots");
            return Ok(());
        }
        self.draining = true;
        self.destage_error = None;
        // A destage that was in flight when the shutdown began may fail from what the device did then; its
        // blocks are dirty again and are tried once more. A device that keeps failing fails the shutdown after
        // as many failures as destages can be in flight.
        let mut retries_left = self.destages.len();
        while self.store.pinned() > 0 {
            self.pump();
            if self.destage_error.is_some() && retries_left > 0 {
                retries_left -= 1;
                self.destage_error = None;
                continue;
            }
            if let Some(errno) = self.destage_error {
                self.draining = false;
                return Err(DeviceError::os(
                    "destaging the cache",
                    std::io::Error::from_raw_os_error(errno as i32),
                ));
            }
            if self.inner.in_flight() == 0 {
                self.draining = false;
                return Err(DeviceError::Invalid(format!(
                    "destaging made no progress with {} dirty blocks",
                    self.store.pinned()
                )));
            }
            self.wait_inner(None)?;
        }
        self.draining = false;
        // The device's own volatile cache: one FLUSH on a destage slot.
        // Every destage has completed, so a slot is free, unless a failed warm start left reads in flight.
        let slot = self.free_destage.pop().ok_or_else(|| {
            DeviceError::Invalid(
                "no free slot for the device flush: reads from a failed warm start are in flight".into(),
            )
        })?;
        let flush = Io {
            op: Op::Flush,
            offset: 0,
            len: 0,
            slot: self.host.len() as u32 + slot,
            tag: 0,
        };
        let accepted = self.inner.submit(&[flush])?;
        assert_eq!(accepted, 1, "the inner device takes a flush on a free slot");
        let result = loop {
            self.inner_out.clear();
            self.inner.reap(1, None, &mut self.inner_out)?;
            let mut result = None;
            for c in std::mem::take(&mut self.inner_out) {
                if c.slot == flush.slot {
                    result = Some(c.result);
                } else {
                    self.finish_inner(c)?;
                }
            }
            if let Some(r) = result {
                break r;
            }
        };
        self.free_destage.push(slot);
        if result < 0 {
            return Err(DeviceError::os(
                "flushing the device",
                std::io::Error::from_raw_os_error(-result as i32),
            ));
        }
        Ok(())
    }

    fn block_span(offset: u64, len: u64) -> std::ops::Range<u64> {
        offset / BLOCK..(offset + len).div_ceil(BLOCK)
    }

    /// The part of block `b` that `[offset, offset + len)` covers: (offset in the buffer, offset in the
    /// block, length).
    fn overlap(b: u64, offset: u64, len: u64) -> (usize, usize, usize) {
        let start = (b * BLOCK).max(offset);
        let end = ((b + 1) * BLOCK).min(offset + len);
        (
            (start - offset) as usize,
            (start - b * BLOCK) as usize,
            (end - start) as usize,
        )
    }

    /// Finishes a host operation served here: its completion is due after the cache's own work.
    fn finish_here(&mut self, slot: u32, result: i64, copied_bytes: u64) {
        let now = self.inner.now_ns();
        let completed_ns = match &self.cost {
            Some(cost) => {
                let start = now.max(self.cpu_free_ns);
                self.cpu_free_ns = start + cost.op_ns(copied_bytes);
                self.cpu_free_ns
            }
            None => now,
        };
        self.complete(slot, result, completed_ns);
    }

    fn complete(&mut self, slot: u32, result: i64, completed_ns: u64) {
        let op = &mut self.host[slot as usize];
        op.stage = Stage::Ready;
        op.completion = Some(Completion {
            slot,
            tag: op.io.tag,
            op: op.io.op,
            result,
            submitted_ns: op.submitted_ns,
            completed_ns,
        });
        self.ready.push(Reverse((completed_ns, slot)));
    }

    /// Sends a host operation to the inner device on its own slot. If the device refuses it, the host
    /// operation completes with the device's error: nothing is left half-issued.
    fn forward(&mut self, slot: u32, how: Forwarded) {
        let io = self.host[slot as usize].io;
        match self.inner.submit(&[io]) {
            Ok(1) => self.host[slot as usize].stage = Stage::Inner(how),
            Ok(_) => self.finish_here(slot, -i64::from(EAGAIN), 0),
            Err(e) => self.finish_here(slot, -i64::from(e.errno()), 0),
        }
    }

    fn read(&mut self, slot: u32) {
        let io = self.host[slot as usize].io;
        let stream = self.streams.observe(io.offset, io.len);
        let sequential = stream > self.config.seq_cutoff_bytes;
        if sequential {
            self.stats.sequential_bypass_bytes += io.len;
        }
        // Hits are still served (a copy is cheaper than a device read, and a dirty block must come from here);
        // misses are not admitted.
        let passing = self.passing_through();
        let bypass = sequential || passing;
        let blocks = Self::block_span(io.offset, io.len);
        if !bypass {
            for b in blocks.clone() {
                self.sketch.record(b);
            }
        }
        let held = |b: u64| {
            let (_, within, n) = Self::overlap(b, io.offset, io.len);
            self.store
                .lookup(b)
                .is_some_and(|f| self.store.holds(f, within, n))
        };
        if blocks.clone().all(held) {
            let buf = self.inner.buffer_mut(slot);
            for b in blocks {
                let frame = self.store.lookup(b).expect("checked cached");
                let (at, within, n) = Self::overlap(b, io.offset, io.len);
                buf[at..at + n].copy_from_slice(&self.store.data(frame)[within..within + n]);
                self.store.touch(frame);
            }
            self.stats.read_hits += 1;
            self.finish_here(slot, io.len as i64, io.len);
            return;
        }
        self.stats.read_misses += 1;
        if passing {
            self.stats.pass_through_ops += 1;
        }
        // A block whose write is still at the device may be served as it was before that write lands: such a
        // miss returns what it gets, but caches none of it.
        let admit = !bypass && !self.device_write_in_flight(io);
        let miss = &mut self.misses[slot as usize];
        miss.cached.clear();
        for b in blocks.clone() {
            if let Some(frame) = self.store.lookup(b) {
                miss.cached
                    .push((b, self.store.valid(frame), self.store.data(frame).to_vec()));
            }
        }
        if admit {
            miss.ticket = self.watch.start(blocks.clone());
        }
        self.forward(slot, Forwarded::MissRead { admit });
        if admit && !matches!(self.host[slot as usize].stage, Stage::Inner(_)) {
            // The device refused it: it will never complete there.
            self.watch.finish(blocks);
        }
    }

    /// Whether a write or discard of the host overlapping `io`'s blocks is at the device now.
    fn device_write_in_flight(&self, io: Io) -> bool {
        let blocks = Self::block_span(io.offset, io.len);
        self.host.iter().any(|op| {
            matches!(
                op.stage,
                Stage::Inner(Forwarded::WriteAround | Forwarded::Discard)
            ) && {
                let other = Self::block_span(op.io.offset, op.io.len);
                other.start < blocks.end && blocks.start < other.end
            }
        })
    }

    /// A read from the device finished: the cache's copies win (as they are now, or as they were when the read
    /// was sent if they have been evicted since), and hot whole blocks are admitted unless the host changed
    /// them while the read was at the device (the device's answer, or the copy kept, may be older than what
    /// the device holds now).
    fn miss_done(&mut self, slot: u32, admit: bool, c: &Completion) {
        let io = self.host[slot as usize].io;
        let miss = std::mem::take(&mut self.misses[slot as usize]);
        let mut copied = 0;
        if c.result == io.len as i64 {
            let buf = self.inner.buffer_mut(slot);
            for b in Self::block_span(io.offset, io.len) {
                let (at, within, n) = Self::overlap(b, io.offset, io.len);
                // What the cache held when the read was sent, then what it holds now over that: a frame evicted
                // and cached again meanwhile may hold fewer sectors than the copy taken then. (The copy then is
                // needed only for sectors the frame does not hold now.)
                let now_held = self.store.lookup(b).map_or(0, |f| self.store.valid(f));
                if let Some((_, valid, data)) = miss.cached.iter().find(|(block, _, _)| *block == b)
                    && valid & !now_held != 0
                {
                    copied += copy_held(&mut buf[at..at + n], within, *valid & !now_held, data);
                }
                if let Some(frame) = self.store.lookup(b) {
                    copied += copy_held(
                        &mut buf[at..at + n],
                        within,
                        self.store.valid(frame),
                        self.store.data(frame),
                    );
                    continue;
                }
                if admit && n == BLOCK as usize && self.watch.unchanged_since(b, miss.ticket) {
                    let hot = self.sketch.estimate(b);
                    let room = self.store.has_free()
                        || self.store.victim().is_some_and(|v| self.sketch.estimate(v) < hot);
                    if hot >= 2 && room && self.store.insert_clean(b, &buf[at..at + n]).is_some() {
                        self.stats.admissions += 1;
                        copied += n as u64;
                    }
                }
            }
        }
        if admit {
            self.watch.finish(Self::block_span(io.offset, io.len));
        }
        self.misses[slot as usize] = miss;
        let completed_ns = match &self.cost {
            Some(cost) => {
                let start = c.completed_ns.max(self.cpu_free_ns);
                self.cpu_free_ns = start + cost.op_ns(copied);
                self.cpu_free_ns
            }
            None => c.completed_ns,
        };
        self.complete(slot, c.result, completed_ns);
    }

    fn write(&mut self, slot: u32) {
        let io = self.host[slot as usize].io;
        let stream = self.streams.observe(io.offset, io.len);
        let sequential = stream > self.config.seq_cutoff_bytes || io.len > self.config.seq_cutoff_bytes;
        if sequential {
            self.stats.sequential_bypass_bytes += io.len;
        }
        if self.config.mode == CacheMode::Writeback && !sequential && self.passing_through() {
            self.stats.pass_through_ops += 1;
            self.write_around(slot);
            return;
        }
        let writeback = self.config.mode == CacheMode::Writeback && !sequential;
        let absorbable = writeback.then(|| self.absorbable(io)).flatten();
        let Some(pins) = absorbable else {
            if writeback {
                self.count_why_around(io);
            }
            self.write_around(slot);
            return;
        };
        if !self.waiting_writes.is_empty() || !self.store.can_pin(pins, self.pinned_limit) {
            let now = self.inner.now_ns();
            let op = &mut self.host[slot as usize];
            op.stage = Stage::WaitingFrames;
            op.waiting_since_ns = now;
            self.waiting_writes.push_back(slot);
            return;
        }
        self.absorb(slot);
    }

    /// How many frames absorbing a write would newly pin, if it can be taken into the cache at all: every block
    /// it covers in part can take it (see [`Self::takes_part`]), and it needs no large share of the dirty
    /// allowance (it would wait for ever).
    fn absorbable(&self, io: Io) -> Option<usize> {
        let all_take = Self::block_span(io.offset, io.len).all(|b| {
            let (_, within, n) = Self::overlap(b, io.offset, io.len);
            n == BLOCK as usize || self.takes_part(b, within, n)
        });
        let pins = self.frames_to_pin(io);
        (all_take && pins <= self.pinned_limit / 4).then_some(pins)
    }

    /// Counts why a write-back write goes around the cache: part of a block it cannot merge, or its size.
    fn count_why_around(&mut self, io: Io) {
        let partial = Self::block_span(io.offset, io.len).any(|b| {
            let (_, within, n) = Self::overlap(b, io.offset, io.len);
            n < BLOCK as usize && !self.takes_part(b, within, n)
        });
        let counter = if partial {
            &mut self.stats.writes_around_partial
        } else {
            &mut self.stats.writes_around_large
        };
        *counter.get_or_insert(0) += 1;
    }

    /// Whether block `b` can take the write of its bytes `[within, within + n)`: a sector it touches in part
    /// must be held already (there is nothing to merge it with otherwise), and what the frame then holds must be
    /// whole, or one run of sectors the device can be written with (its logical block at most a sector).
    fn takes_part(&self, b: u64, within: usize, n: usize) -> bool {
        let valid = self.store.lookup(b).map_or(0, |f| self.store.valid(f));
        let covered = store::sectors_covered(within, n);
        let touched = store::sectors_touched(within, n);
        let merged = valid | covered;
        let sectors_writable = u64::from(self.inner.info().logical_block_bytes) <= store::SECTOR;
        touched & !covered & !valid == 0
            && (merged == store::FULL || (sectors_writable && store::one_run(merged)))
    }

    /// How many frames absorbing `io` would newly pin: blocks not cached and clean blocks.
    fn frames_to_pin(&self, io: Io) -> usize {
        Self::block_span(io.offset, io.len)
            .filter(|&b| {
                self.store
                    .lookup(b)
                    .is_none_or(|f| self.store.state(f) == State::Clean)
            })
            .count()
    }

    /// Copies a write into the cache as dirty data and acknowledges it. Blocks already cached are written
    /// first: once dirty they cannot be the victims of the new blocks' allocations.
    fn absorb(&mut self, slot: u32) {
        let io = self.host[slot as usize].io;
        self.watch.changed(Self::block_span(io.offset, io.len));
        let buf = self.inner.buffer(slot);
        for cached_first in [true, false] {
            for b in Self::block_span(io.offset, io.len) {
                if self.store.lookup(b).is_some() != cached_first {
                    continue;
                }
                let (at, within, n) = Self::overlap(b, io.offset, io.len);
                let stored = self.store.write(b, within, &buf[at..at + n], true);
                assert!(stored, "frames were checked before absorbing");
            }
        }
        self.stats.writes_absorbed += 1;
        let pinned_bytes = self.store.pinned() as u64 * BLOCK;
        self.stats.dirty_bytes_peak = self.stats.dirty_bytes_peak.max(pinned_bytes);
        self.finish_here(slot, io.len as i64, io.len);
    }

    /// Sends a write to the device, keeping the cached copies it overlaps current.
    fn write_around(&mut self, slot: u32) {
        let io = self.host[slot as usize].io;
        let admit = self.config.mode == CacheMode::Writethrough;
        self.watch.changed(Self::block_span(io.offset, io.len));
        let buf = self.inner.buffer(slot);
        for b in Self::block_span(io.offset, io.len) {
            let (at, within, n) = Self::overlap(b, io.offset, io.len);
            let cached = self.store.lookup(b).is_some();
            if cached || (admit && n == BLOCK as usize) {
                // Not dirty: a clean copy stays clean (the device is being written with the same data); a
                // pinned copy is dirtied again so that its stale destage is followed by a current one.
                self.store.write(b, within, &buf[at..at + n], false);
            }
        }
        self.stats.writes_around += 1;
        self.forward(slot, Forwarded::WriteAround);
    }

    fn flush(&mut self, slot: u32) {
        self.stats.flushes += 1;
        let epoch = self.store.begin_flush();
        self.host[slot as usize].stage = Stage::WaitingFlush { epoch };
        self.waiting_flushes.push_back(slot);
        // Anything paused by an earlier failure is retried for this FLUSH.
        self.destage_error = None;
    }

    fn discard(&mut self, slot: u32) {
        let io = self.host[slot as usize].io;
        self.watch.changed(Self::block_span(io.offset, io.len));
        for b in Self::block_span(io.offset, io.len) {
            if Self::overlap(b, io.offset, io.len).2 == BLOCK as usize {
                self.store.discard(b);
            }
        }
        self.forward(slot, Forwarded::Discard);
    }

    /// Issues what can go now: waiting writes that fit, FLUSHes whose data is destaged, and destage writes. A
    /// destage the device refuses here fails what waits for destaging at once (a write at the dirty limit, a
    /// FLUSH): nothing else would ever wake them.
    fn pump(&mut self) {
        loop {
            self.settle_waiting();
            let failing_before = self.destage_error.is_some();
            self.destage();
            if failing_before || self.destage_error.is_none() {
                return;
            }
        }
    }

    /// Takes the waiting writes that now fit, sends the FLUSHes whose data is destaged, and fails both when
    /// destaging has failed.
    fn settle_waiting(&mut self) {
        while let Some(&slot) = self.waiting_writes.front() {
            if let Some(errno) = self.destage_error {
                // Nothing can be destaged: the write cannot be absorbed and fails as the device did.
                self.waiting_writes.pop_front();
                self.finish_here(slot, -errno, 0);
                continue;
            }
            let io = self.host[slot as usize].io;
            let absorbable = self.absorbable(io);
            if absorbable.is_some_and(|pins| !self.store.can_pin(pins, self.pinned_limit)) {
                break;
            }
            self.waiting_writes.pop_front();
            let waited = self
                .inner
                .now_ns()
                .saturating_sub(self.host[slot as usize].waiting_since_ns);
            self.stats.dirty_limit_wait_ns += waited;
            if absorbable.is_some() {
                self.absorb(slot);
            } else {
                // A block it would merge into was evicted while it waited.
                self.count_why_around(io);
                self.write_around(slot);
            }
        }
        while let Some(&slot) = self.waiting_flushes.front() {
            let Stage::WaitingFlush { epoch } = self.host[slot as usize].stage else {
                unreachable!("a waiting flush is in the flush queue");
            };
            if self.store.settled(epoch) {
                self.waiting_flushes.pop_front();
                self.forward(slot, Forwarded::Flush);
                continue;
            }
            // Its data cannot be destaged now: the FLUSH fails as the device did (the data stays cached).
            let Some(errno) = self.destage_error else { break };
            self.waiting_flushes.pop_front();
            self.finish_here(slot, -errno, 0);
        }
    }

    fn destage(&mut self) {
        if self.destage_error.is_some() {
            return;
        }
        let urgent = self.draining || !self.waiting_flushes.is_empty() || !self.waiting_writes.is_empty();
        // Left alone until an eighth of the allowance is dirty, so neighbours can accumulate and coalesce.
        let enough = self.store.dirty_waiting() >= (self.pinned_limit / 8).max(1);
        if !(urgent || enough) {
            return;
        }
        while let Some(&d) = self.free_destage.last() {
            self.store
                .take_run(self.cursor, self.destage_chunk_blocks, &mut self.run);
            let Some(first) = self.run.first() else {
                break;
            };
            self.free_destage.pop();
            let inner_slot = self.host.len() as u32 + d;
            let buf = self.inner.buffer_mut(inner_slot);
            // The held bytes of each frame, one after another: whole blocks, perhaps a tail before them and a
            // head after.
            let (offset, bytes) = store::run_write(&self.run);
            let mut at = 0;
            for entry in &self.run {
                let (within, n) = store::run_bytes(entry.valid);
                buf[at..at + n].copy_from_slice(&self.store.data(entry.frame)[within..within + n]);
                at += n;
            }
            assert_eq!(at as u64, bytes, "a destage write carries its run's bytes");
            let io = Io {
                op: Op::Write,
                offset,
                len: bytes,
                slot: inner_slot,
                tag: 0,
            };
            self.cursor = first.block + self.run.len() as u64;
            if let Some(cost) = &self.cost {
                let start = self.inner.now_ns().max(self.cpu_free_ns);
                self.cpu_free_ns = start + cost.op_ns(bytes);
            }
            match self.inner.submit(&[io]) {
                Ok(1) => self.destages[d as usize] = std::mem::take(&mut self.run),
                refused => {
                    // Not issued: the blocks are dirty again and destaging pauses until the next FLUSH.
                    self.store.destage_done(&self.run, false);
                    self.free_destage.push(d);
                    self.destage_error = Some(match refused {
                        Err(e) => i64::from(e.errno()),
                        Ok(_) => i64::from(EAGAIN),
                    });
                    return;
                }
            }
        }
    }

    /// Handles one completion from the inner device.
    fn finish_inner(&mut self, c: Completion) -> DeviceResult<()> {
        let host_slots = self.host.len() as u32;
        if c.slot >= host_slots {
            let d = c.slot - host_slots;
            let run = &mut self.destages[d as usize];
            let (_, bytes) = store::run_write(run);
            let ok = c.result == bytes as i64;
            self.store.destage_done(run, ok);
            // Cleared, not dropped: the slot's list keeps its allocation for the next destage.
            run.clear();
            if ok {
                self.stats.destaged_bytes += bytes;
                self.stats.destage_writes += 1;
            } else {
                self.destage_error = Some(if c.result < 0 { -c.result } else { EIO });
            }
            self.free_destage.push(d);
            return Ok(());
        }
        let Stage::Inner(how) = self.host[c.slot as usize].stage else {
            panic!("a completion for host slot {} that is not at the device", c.slot);
        };
        match how {
            Forwarded::MissRead { admit } => self.miss_done(c.slot, admit, &c),
            Forwarded::WriteAround => {
                let io = self.host[c.slot as usize].io;
                if c.result != io.len as i64 {
                    // The device may hold anything there now: clean copies no longer match it.
                    for b in Self::block_span(io.offset, io.len) {
                        self.store.drop_clean(b);
                    }
                }
                self.complete(c.slot, c.result, c.completed_ns);
            }
            Forwarded::Flush | Forwarded::Discard => self.complete(c.slot, c.result, c.completed_ns),
        }
        Ok(())
    }

    /// Waits for the inner device once (until a completion or `until`), handling what completes.
    fn wait_inner(&mut self, until: Option<u64>) -> DeviceResult<()> {
        if self.inner.in_flight() == 0 {
            if let Some(t) = until {
                self.inner.wait_until(t);
            }
            return Ok(());
        }
        let mut out = std::mem::take(&mut self.inner_out);
        out.clear();
        let result = self.inner.reap(1, until, &mut out);
        for c in out.drain(..) {
            self.finish_inner(c)?;
        }
        self.inner_out = out;
        result.map(drop)
    }

    fn deliver(&mut self, out: &mut Vec<Completion>) -> usize {
        let now = self.inner.now_ns();
        let mut got = 0;
        while let Some(&Reverse((t, slot))) = self.ready.peek() {
            if t > now {
                break;
            }
            self.ready.pop();
            let op = &mut self.host[slot as usize];
            let completion = op
                .completion
                .take()
                .expect("a ready operation has its completion");
            *op = IDLE;
            self.host_in_flight -= 1;
            out.push(completion);
            got += 1;
        }
        got
    }
}

/// EIO, for a destage the device shortened without an error.
const EIO: i64 = 5;
const EAGAIN: i32 = 11;

/// The errno a device error stands for, for a completion's result.
impl<D: Device> Device for CachedDevice<D> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        assert_eq!(self.host_in_flight, 0, "prepare with operations in flight");
        while self.inner.in_flight() > 0 {
            self.wait_inner(None)?;
        }
        let chunk = DESTAGE_CHUNK_BYTES.min(self.inner.info().max_transfer_bytes) / BLOCK * BLOCK;
        let chunk = chunk.max(BLOCK) as usize;
        let inner_buffer = buffer_bytes.max(chunk);
        let destage_slots =
            (DESTAGE_BUFFER_BUDGET_BYTES / inner_buffer).clamp(1, self.config.destage_qd as usize);
        self.inner.prepare(slots + destage_slots as u32, inner_buffer)?;
        self.host = vec![IDLE; slots as usize];
        self.misses = vec![Miss::default(); slots as usize];
        self.buffer_bytes = buffer_bytes;
        self.destages = vec![Vec::new(); destage_slots];
        self.free_destage = (0..destage_slots as u32).rev().collect();
        self.destage_chunk_blocks = chunk / BLOCK as usize;
        self.warm()
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        &self.inner.buffer(slot)[..self.buffer_bytes]
    }

    /// The inner device's answer, with every block the cache holds (dirty ones above all: the device has not
    /// seen them yet) reported as allocated data.
    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        let len = len.min(EXTENTS_QUERY_BLOCKS * BLOCK);
        let mut inner = Vec::new();
        self.inner.extents(offset, len, &mut inner)?;
        let covered: u64 = inner.iter().map(|e| e.len_bytes).sum();
        if covered == 0 || covered > len {
            return Err(DeviceError::Invalid(format!(
                "the device below described {covered} bytes of a {len}-byte allocation query"
            )));
        }
        let end = offset + covered;
        let mut held: Vec<std::ops::Range<u64>> = Vec::new();
        for b in Self::block_span(offset, covered) {
            if self.store.lookup(b).is_some() {
                let r = (b * BLOCK).max(offset)..((b + 1) * BLOCK).min(end);
                match held.last_mut() {
                    Some(last) if last.end == r.start => last.end = r.end,
                    _ => held.push(r),
                }
            }
        }
        mark_allocated(&inner, offset, &held, out);
        Ok(())
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        let n = self.buffer_bytes;
        &mut self.inner.buffer_mut(slot)[..n]
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        // Every operation is checked before any is taken, so an error means none was accepted.
        let block = self.info.logical_block_bytes as u64;
        for (k, io) in ios.iter().enumerate() {
            let slot = io.slot as usize;
            let repeated = ios[..k].iter().any(|other| other.slot == io.slot);
            if slot >= self.host.len() || self.host[slot].stage != Stage::Idle || repeated {
                return Err(DeviceError::Invalid(format!("slot {} is not free", io.slot)));
            }
            io.check_bounds(self.info.addressable_bytes(), self.buffer_bytes)?;
            if io.op != Op::Flush && (io.offset % block != 0 || io.len % block != 0 || io.len == 0) {
                return Err(DeviceError::Invalid(format!(
                    "I/O at {} + {} is not aligned to the {block}-byte logical block",
                    io.offset, io.len
                )));
            }
        }
        for io in ios {
            let slot = io.slot as usize;
            self.host[slot] = HostOp {
                io: *io,
                submitted_ns: self.inner.now_ns(),
                ..IDLE
            };
            self.host_in_flight += 1;
            match io.op {
                Op::Read => self.read(io.slot),
                Op::Write => self.write(io.slot),
                Op::Flush => self.flush(io.slot),
                Op::Discard => self.discard(io.slot),
            }
        }
        self.pump();
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
            self.pump();
            got += self.deliver(out);
            if got >= min || self.host_in_flight == 0 {
                return Ok(got);
            }
            let now = self.inner.now_ns();
            if deadline_ns.is_some_and(|d| now >= d) {
                return Ok(got);
            }
            let next_ready = self.ready.peek().map(|r| r.0.0);
            let until = match (next_ready, deadline_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            assert!(
                self.inner.in_flight() > 0 || until.is_some(),
                "host operations wait on nothing: {} waiting writes, {} waiting flushes, {} pinned frames",
                self.waiting_writes.len(),
                self.waiting_flushes.len(),
                self.store.pinned()
            );
            self.wait_inner(until)?;
        }
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn wait_until(&mut self, t_ns: u64) {
        // The host is idle: destage meanwhile, as RAPID does. An error here surfaces at the next FLUSH.
        self.draining = true;
        while self.inner.now_ns() < t_ns {
            self.pump();
            if self.wait_inner(Some(t_ns)).is_err() {
                break;
            }
        }
        self.draining = false;
        if self.inner.now_ns() < t_ns {
            self.inner.wait_until(t_ns);
        }
    }

    fn in_flight(&self) -> usize {
        self.host_in_flight
    }

    fn idle(&mut self) {
        // Destage while nobody is asking for anything, waiting at most a few milliseconds for the device.
        self.draining = true;
        let until = self.inner.now_ns() + 5_000_000;
        self.pump();
        if self.inner.in_flight() > 0 {
            let _ = self.wait_inner(Some(until));
        }
        self.draining = false;
        self.inner.idle();
    }

    fn counters(&self) -> Option<DeviceCounters> {
        self.inner.counters()
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(self.stats())
    }
}

impl<D: Device> Drop for CachedDevice<D> {
    fn drop(&mut self) {
        // A clean shutdown writes everything back; a failure here cannot be reported, only not made worse.
        if self.host_in_flight == 0 {
            let _ = self.flush_all();
        }
        if let Some(hook) = self.on_close.take() {
            // A cache closed before it was ever prepared still holds the list it was to warm with: keep that
            // rather than replace a good map with an empty one.
            let blocks = if self.warm_blocks.is_empty() {
                self.store.blocks_by_recency()
            } else {
                std::mem::take(&mut self.warm_blocks)
            };
            hook(blocks);
        }
    }
}

/// Copies into `out` (the bytes of a block from `within`) the sectors `valid` says `data` (the whole block)
/// holds; the rest of `out` keeps what the device returned. Returns the bytes copied.
fn copy_held(out: &mut [u8], within: usize, valid: u8, data: &[u8]) -> u64 {
    if valid == store::FULL {
        out.copy_from_slice(&data[within..within + out.len()]);
        return out.len() as u64;
    }
    let mut copied = 0;
    for sector in (0..8).filter(|s| valid & (1 << s) != 0) {
        let start = (sector * store::SECTOR as usize).max(within);
        let end = ((sector + 1) * store::SECTOR as usize).min(within + out.len());
        if start < end {
            out[start - within..end - within].copy_from_slice(&data[start..end]);
            copied += (end - start) as u64;
        }
    }
    copied
}
