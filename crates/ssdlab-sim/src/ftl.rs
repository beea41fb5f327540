//! The flash translation layer: a page-mapped FTL with greedy (or cost-benefit) garbage collection.
//!
//! Logical mapping units (4 KiB) map to physical units; a physical unit lives in an erase block of
//! `units_per_block` units on one die. Each die keeps its own free-block list, one open write frontier (host
//! writes and relocated data share it, as in the analytic models this FTL is checked against) and its closed
//! blocks bucketed by valid-unit count, so the greedy victim (fewest valid units) is found without scanning.
//! When taking a free block would leave fewer than `reserve_blocks_per_die` free, the die collects garbage until
//! the reserve is restored; a firmware that starts earlier (`gc_start_free_blocks_per_die`) collects from that
//! many free blocks on.
//!
//! Capacity convention: the blocks that can hold data are `blocks_per_die - reserve_blocks_per_die - 1` per die
//! (the reserve and the open frontier come on top), and over-provisioning is (data-holding physical units -
//! logical units) / logical units.
//!
//! This module owns mapping state only: no time, no I/O. The invariants (map and reverse map agree, valid counts
//! match, a block is in exactly one of free/open/closed) are asserted in release builds where it is cheap and
//! fully by [`Ftl::check_invariants`].

use serde::{Deserialize, Serialize};

/// A logical or physical unit that is not mapped.
pub const UNMAPPED: u32 = u32::MAX;
/// In the reverse map: a unit whose logical block was trimmed, but whose TRIM the firmware has not processed
/// yet (deferred reclamation). It still counts as valid, so garbage collection copies it, until
/// [`Ftl::reclaim_trimmed`] invalidates it.
const TRIM_PENDING: u32 = u32::MAX - 1;
const NIL: u32 = u32::MAX;

/// How the victim block is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GcPolicy {
    /// The block with the fewest valid units.
    Greedy,
    /// The block with the best (1 - u) / (2u) x age (Kawaguchi et al.): prefers old, mostly-invalid blocks.
    CostBenefit,
}

/// The shape of the FTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlConfig {
    pub logical_units: u32,
    pub dies: u32,
    /// Every block of a die: data-holding blocks + the free-block reserve + one open frontier.
    pub blocks_per_die: u32,
    pub reserve_blocks_per_die: u32,
    pub units_per_block: u32,
    pub policy: GcPolicy,
    /// Keep a 64-bit fingerprint per physical unit (for verification and model-equivalence tests).
    pub fingerprints: bool,
    /// Blocks per die run in SLC mode as a write cache (TurboWrite); on top of everything above.
    #[serde(default)]
    pub slc_blocks_per_die: u32,
    /// Mapping units an SLC-mode block holds (a third of a TLC block's).
    #[serde(default)]
    pub slc_units_per_block: u32,
    /// Mapping units per NAND page, to keep each page's program time (the age its retention counts from);
    /// 0 keeps none.
    #[serde(default)]
    pub units_per_page: u32,
    /// Free blocks per die below which the die starts collecting garbage, when the firmware starts earlier than
    /// the reserve forces it to (enterprise firmware keeps a free pool for consistency); at or below the
    /// reserve it changes nothing.
    #[serde(default)]
    pub gc_start_free_blocks_per_die: u32,
    /// Invalid units a die lets build up in its native blocks before it collects, whatever its free space
    /// (0: no such limit). Below the spare area it never binds on a full drive; with space the host never
    /// writes it starts collection long before the free blocks run out.
    #[serde(default)]
    pub gc_max_garbage_units_per_die: u32,
}

impl FtlConfig {
    /// A configuration whose data-holding capacity gives over-provisioning `op` (0.25 = 25%) over
    /// `logical_units`, rounded up to whole blocks per die.
    pub fn with_op(logical_units: u32, op: f64, dies: u32, units_per_block: u32, reserve: u32) -> Self {
        let physical_units = (logical_units as f64 * (1.0 + op)).ceil() as u64;
        let data_blocks_per_die = physical_units.div_ceil(units_per_block as u64 * dies as u64) as u32;
        FtlConfig {
            logical_units,
            dies,
            blocks_per_die: data_blocks_per_die + reserve + 1,
            reserve_blocks_per_die: reserve,
            units_per_block,
            policy: GcPolicy::Greedy,
            fingerprints: false,
            slc_blocks_per_die: 0,
            slc_units_per_block: 0,
            units_per_page: 0,
            gc_start_free_blocks_per_die: 0,
            gc_max_garbage_units_per_die: 0,
        }
    }

    /// Physical units that can hold data (excluding the reserve and the frontiers).
    pub fn data_units(&self) -> u64 {
        (self.blocks_per_die - self.reserve_blocks_per_die - 1) as u64
            * self.dies as u64
            * self.units_per_block as u64
    }

    /// Over-provisioning, industry convention: (physical - logical) / logical.
    pub fn op(&self) -> f64 {
        (self.data_units() as f64 - self.logical_units as f64) / self.logical_units as f64
    }

    /// Spare factor: (physical - logical) / physical.
    pub fn spare_factor(&self) -> f64 {
        (self.data_units() as f64 - self.logical_units as f64) / self.data_units() as f64
    }

    /// Blocks in the main (GC-managed) pool, all dies.
    pub fn total_blocks(&self) -> u32 {
        self.dies * self.blocks_per_die
    }

    /// Blocks in the main pool and the SLC cache, all dies.
    pub fn all_blocks(&self) -> u32 {
        self.dies * (self.blocks_per_die + self.slc_blocks_per_die)
    }

    /// Why this configuration cannot work, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.logical_units == 0 || self.dies == 0 || self.units_per_block < 2 {
            return Err("the FTL needs logical units, dies and at least 2 units per block".into());
        }
        if self.reserve_blocks_per_die < 2 {
            return Err("the free-block reserve must be at least 2 blocks per die".into());
        }
        if self.slc_blocks_per_die > 0 && !(1..=self.units_per_block).contains(&self.slc_units_per_block) {
            return Err("an SLC block must hold between 1 and units_per_block units".into());
        }
        if self.units_per_page > 0
            && (!self.units_per_block.is_multiple_of(self.units_per_page)
                || (self.slc_blocks_per_die > 0
                    && !self.slc_units_per_block.is_multiple_of(self.units_per_page)))
        {
            return Err("a block must hold whole pages".into());
        }
        let physical = self.all_blocks() as u64 * self.units_per_block as u64;
        if physical >= UNMAPPED as u64 {
            return Err(format!("{physical} physical units exceed the 32-bit map"));
        }
        if self.data_units() <= self.logical_units as u64 {
            return Err(format!(
                "no over-provisioning: {} data-holding units for {} logical units",
                self.data_units(),
                self.logical_units
            ));
        }
        Ok(())
    }
}

pub use crate::page_times::PAGE_TIME_SHIFT;
use crate::page_times::PageTimes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockState {
    Free,
    Open,
    Closed,
    /// A factory bad block: never written, never collected.
    Retired,
}

/// Garbage collection done while serving one write, for the timing model to charge to the die.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcWork {
    /// Valid units copied out of victim blocks.
    pub relocated_units: u32,
    /// NAND pages read to copy them: every page that held a valid unit (a sparse victim needs more reads per
    /// unit moved than a dense one).
    pub read_pages: u32,
    pub erased_blocks: u32,
}

/// Where a write landed and what it cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub die: u32,
    pub physical_unit: u32,
    pub gc: GcWork,
}

/// Counters like SMART's, in mapping units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlCounters {
    pub host_units_written: u64,
    pub nand_units_written: u64,
    pub relocated_units: u64,
    pub erases: u64,
    pub trimmed_units: u64,
    pub gc_runs: u64,
    /// Host writes absorbed by the SLC cache.
    #[serde(default)]
    pub slc_units_written: u64,
    /// Units moved from the SLC cache to the main pool.
    #[serde(default)]
    pub slc_drained_units: u64,
}

impl FtlCounters {
    /// NAND writes over host writes (1.0 before any write).
    pub fn write_amplification(&self) -> f64 {
        if self.host_units_written == 0 {
            1.0
        } else {
            self.nand_units_written as f64 / self.host_units_written as f64
        }
    }
}

/// The page-mapped FTL.
pub struct Ftl {
    config: FtlConfig,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    fingerprints: Vec<u64>,
    valid: Vec<u32>,
    written: Vec<u32>,
    state: Vec<BlockState>,
    erase_count: Vec<u32>,
    /// Time stamp of the block's first program since its erase, in the caller's time units (its oldest data:
    /// for retention and cost-benefit age).
    programmed_at: Vec<u64>,
    /// When each page was programmed (with [`FtlConfig::units_per_page`]).
    page_times: PageTimes,
    /// Doubly linked bucket lists of closed blocks by valid count, per die.
    next: Vec<u32>,
    prev: Vec<u32>,
    heads: Vec<u32>,
    free: Vec<Vec<u32>>,
    frontier: Vec<u32>,
    slc_free: Vec<Vec<u32>>,
    slc_frontier: Vec<u32>,
    /// Full SLC blocks per die, oldest first: the order the cache drains in.
    slc_closed: Vec<std::collections::VecDeque<u32>>,
    /// Per die, closed SLC blocks whose every unit was overwritten or trimmed: TurboWrite erases and reuses them
    /// at once instead of sending writes past a full cache.
    slc_reclaimable: Vec<u32>,
    /// Physical units trimmed with [`Ftl::trim_deferred`] and not yet reclaimed, oldest first (4 bytes per
    /// pending TRIM). GC queues a pending unit's new place when it moves one; the old entry is then stale, and
    /// an entry only counts where the reverse map still says [`TRIM_PENDING`], so a stale entry at worst
    /// reclaims another pending unit early, never anything else.
    trim_queue: std::collections::VecDeque<u32>,
    /// Units marked [`TRIM_PENDING`] now.
    trim_pending_units: u64,
    next_die: u32,
    in_gc: bool,
    now: u64,
    counters: FtlCounters,
    pending_gc: GcWork,
    /// Valid units per die (the sum of its blocks' valid counts), so the device can keep each die near its share
    /// of the data while it steers writes.
    valid_on_die: Vec<u64>,
    /// Invalid units in each die's native blocks (written minus valid, over blocks not free).
    garbage_on_die: Vec<u64>,
}

impl Ftl {
    /// A fresh (erased) FTL. Panics on an invalid configuration; call [`FtlConfig::validate`] first to get the
    /// reason as a value.
    pub fn new(config: FtlConfig) -> Self {
        if let Err(reason) = config.validate() {
            panic!("invalid FTL configuration: {reason}");
        }
        let blocks = config.all_blocks() as usize;
        let physical = blocks * config.units_per_block as usize;
        let buckets = config.dies as usize * (config.units_per_block as usize + 1);
        let free = (0..config.dies)
            .map(|die| {
                (0..config.blocks_per_die)
                    .rev()
                    .map(|i| die * config.blocks_per_die + i)
                    .collect()
            })
            .collect();
        let first_slc = config.total_blocks();
        let slc_free = (0..config.dies)
            .map(|die| {
                (0..config.slc_blocks_per_die)
                    .rev()
                    .map(|i| first_slc + die * config.slc_blocks_per_die + i)
                    .collect()
            })
            .collect();
        Ftl {
            config,
            l2p: vec![UNMAPPED; config.logical_units as usize],
            p2l: vec![UNMAPPED; physical],
            fingerprints: if config.fingerprints {
                vec![0; physical]
            } else {
                Vec::new()
            },
            valid: vec![0; blocks],
            written: vec![0; blocks],
            state: vec![BlockState::Free; blocks],
            erase_count: vec![0; blocks],
            programmed_at: vec![0; blocks],
            page_times: PageTimes::new(blocks, config.units_per_block, config.units_per_page),
            next: vec![NIL; blocks],
            prev: vec![NIL; blocks],
            heads: vec![NIL; buckets],
            free,
            frontier: vec![NIL; config.dies as usize],
            slc_free,
            slc_frontier: vec![NIL; config.dies as usize],
            slc_closed: vec![Default::default(); config.dies as usize],
            slc_reclaimable: vec![0; config.dies as usize],
            trim_queue: Default::default(),
            trim_pending_units: 0,
            next_die: 0,
            in_gc: false,
            now: 0,
            counters: FtlCounters::default(),
            pending_gc: GcWork::default(),
            valid_on_die: vec![0; config.dies as usize],
            garbage_on_die: vec![0; config.dies as usize],
        }
    }

    pub fn config(&self) -> &FtlConfig {
        &self.config
    }

    pub fn counters(&self) -> FtlCounters {
        self.counters
    }

    /// Sets the time stamp given to blocks programmed from now on.
    pub fn set_time(&mut self, now: u64) {
        self.now = now;
    }

    #[inline]
    fn block_of(&self, physical: u32) -> u32 {
        physical / self.config.units_per_block
    }

    #[inline]
    fn die_of_block(&self, block: u32) -> u32 {
        let first_slc = self.config.total_blocks();
        if block < first_slc {
            block / self.config.blocks_per_die
        } else {
            (block - first_slc) / self.config.slc_blocks_per_die
        }
    }

    /// Whether a block belongs to the SLC cache.
    #[inline]
    pub fn is_slc(&self, block: u32) -> bool {
        block >= self.config.total_blocks()
    }

    #[inline]
    fn bucket(&self, die: u32, valid: u32) -> usize {
        (die * (self.config.units_per_block + 1) + valid) as usize
    }

    fn link(&mut self, block: u32) {
        let head = self.bucket(self.die_of_block(block), self.valid[block as usize]);
        let first = self.heads[head];
        self.next[block as usize] = first;
        self.prev[block as usize] = NIL;
        if first != NIL {
            self.prev[first as usize] = block;
        }
        self.heads[head] = block;
    }

    fn unlink(&mut self, block: u32) {
        let (p, n) = (self.prev[block as usize], self.next[block as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            let head = self.bucket(self.die_of_block(block), self.valid[block as usize]);
            debug_assert_eq!(self.heads[head], block);
            self.heads[head] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
    }

    /// Marks a physical unit invalid (its data was overwritten, trimmed or relocated).
    fn invalidate(&mut self, physical: u32) {
        let block = self.block_of(physical);
        let closed = self.state[block as usize] == BlockState::Closed && !self.is_slc(block);
        if closed {
            self.unlink(block);
        }
        assert!(
            self.valid[block as usize] > 0,
            "invalidating a unit of block {block}, which holds no valid data"
        );
        self.valid[block as usize] -= 1;
        let die = self.die_of_block(block) as usize;
        self.valid_on_die[die] -= 1;
        if !self.is_slc(block) {
            self.garbage_on_die[die] += 1;
        }
        self.p2l[physical as usize] = UNMAPPED;
        if closed {
            self.link(block);
        }
        if self.valid[block as usize] == 0
            && self.is_slc(block)
            && self.state[block as usize] == BlockState::Closed
        {
            let die = self.die_of_block(block) as usize;
            self.slc_reclaimable[die] += 1;
        }
    }

    /// Closes `die`'s frontier, if it has one.
    fn close_frontier(&mut self, die: u32) {
        let old = self.frontier[die as usize];
        if old != NIL {
            self.state[old as usize] = BlockState::Closed;
            self.link(old);
            self.frontier[die as usize] = NIL;
        }
    }

    /// Replaces `die`'s full frontier, collecting garbage first if the free-block reserve would be breached.
    fn open_block(&mut self, die: u32) {
        self.close_frontier(die);
        if !self.in_gc {
            self.in_gc = true;
            let start_below = self
                .config
                .reserve_blocks_per_die
                .max(self.config.gc_start_free_blocks_per_die);
            while self.free[die as usize].len() as u32 <= start_below || self.over_garbage_limit(die) {
                if self.collect(die) {
                    continue;
                }
                // Nothing on this die holds invalid data, but TRIMs are queued: out of space, the firmware
                // processes them now, in the foreground (above the reserve it can wait).
                if self.trim_pending_units == 0
                    || self.free[die as usize].len() as u32 > self.config.reserve_blocks_per_die
                {
                    break;
                }
                self.reclaim_trimmed(u64::from(self.config.units_per_block));
            }
            self.in_gc = false;
            // Collection relocates into a frontier of its own; keep filling it while it has room.
            let current = self.frontier[die as usize];
            if current != NIL {
                if self.written[current as usize] < self.config.units_per_block {
                    return;
                }
                self.close_frontier(die);
            }
        }
        let block = self.free[die as usize].pop().unwrap_or_else(|| {
            panic!("die {die} ran out of free blocks: the reserve is too small for its frontier")
        });
        assert_eq!(self.written[block as usize], 0, "a free block must be erased");
        self.state[block as usize] = BlockState::Open;
        self.frontier[die as usize] = block;
    }

    /// Allocates the next unit of `die`'s frontier.
    fn allocate(&mut self, die: u32) -> u32 {
        let mut block = self.frontier[die as usize];
        if block == NIL || self.written[block as usize] == self.config.units_per_block {
            self.open_block(die);
            block = self.frontier[die as usize];
        }
        let offset = self.written[block as usize];
        self.written[block as usize] += 1;
        if offset == 0 {
            // A block's age is its oldest data's: cost-benefit GC and the firmware refresh count from it.
            self.programmed_at[block as usize] = self.now;
        }
        let physical = block * self.config.units_per_block + offset;
        self.page_times.stamp(physical, self.now);
        physical
    }

    /// When the page holding `physical` was programmed, to [`PAGE_TIME_SHIFT`] bits of the caller's time
    /// units, rounded down (None without page times).
    pub fn page_programmed_at(&self, physical: u32) -> Option<u64> {
        self.page_times.programmed_at(physical)
    }

    /// Chooses the victim block of `die`, if any closed block holds invalid data.
    fn victim(&self, die: u32) -> Option<u32> {
        match self.config.policy {
            GcPolicy::Greedy => (0..self.config.units_per_block)
                .map(|valid| self.heads[self.bucket(die, valid)])
                .find(|&head| head != NIL),
            GcPolicy::CostBenefit => {
                let first = die * self.config.blocks_per_die;
                (first..first + self.config.blocks_per_die)
                    .filter(|&b| {
                        self.state[b as usize] == BlockState::Closed
                            && self.valid[b as usize] < self.config.units_per_block
                    })
                    .max_by(|&a, &b| self.benefit(a).total_cmp(&self.benefit(b)))
            }
        }
    }

    fn benefit(&self, block: u32) -> f64 {
        let u = self.valid[block as usize] as f64 / self.config.units_per_block as f64;
        let age = self.now.saturating_sub(self.programmed_at[block as usize]) as f64 + 1.0;
        if u == 0.0 {
            f64::INFINITY
        } else {
            (1.0 - u) / (2.0 * u) * age
        }
    }

    /// Moves every valid unit of `block` into `die`'s main-pool frontier and erases the block (the caller puts it
    /// on a free list). Returns the units moved and the pages read to move them.
    fn empty_block(&mut self, block: u32, die: u32) -> (u32, u32) {
        let np = self.config.units_per_block;
        let per_page = self.config.units_per_page.max(1);
        let mut moved = 0;
        let mut read_pages = 0;
        let mut last_page = u32::MAX;
        for offset in 0..self.written[block as usize] {
            let physical = block * np + offset;
            let logical = self.p2l[physical as usize];
            if logical == UNMAPPED {
                continue;
            }
            if physical / per_page != last_page {
                last_page = physical / per_page;
                read_pages += 1;
            }
            let target = self.allocate(die);
            self.p2l[target as usize] = logical;
            if logical == TRIM_PENDING {
                // The firmware has not processed this TRIM: the stale data is copied like live data, and its
                // TRIM follows it to the new place.
                self.trim_queue.push_back(target);
            } else {
                self.l2p[logical as usize] = target;
            }
            if self.config.fingerprints {
                self.fingerprints[target as usize] = self.fingerprints[physical as usize];
            }
            let target_block = self.block_of(target);
            self.valid[target_block as usize] += 1;
            self.p2l[physical as usize] = UNMAPPED;
            moved += 1;
        }
        assert_eq!(
            moved, self.valid[block as usize],
            "block {block}: moved units must equal its valid count"
        );
        self.valid[block as usize] = 0;
        self.written[block as usize] = 0;
        self.erase_count[block as usize] += 1;
        (moved, read_pages)
    }

    /// Collects one victim on `die`: relocates its valid units into the frontier and erases it. Returns false
    /// when there is nothing to collect.
    fn collect(&mut self, die: u32) -> bool {
        let Some(victim) = self.victim(die) else {
            return false;
        };
        self.unlink(victim);
        self.garbage_on_die[die as usize] -=
            u64::from(self.written[victim as usize] - self.valid[victim as usize]);
        self.state[victim as usize] = BlockState::Free; // not linked anywhere while being emptied
        let (relocated, read_pages) = self.empty_block(victim, die);
        self.free[die as usize].push(victim);
        self.counters.relocated_units += relocated as u64;
        self.counters.nand_units_written += relocated as u64;
        self.counters.erases += 1;
        self.counters.gc_runs += 1;
        self.pending_gc.relocated_units += relocated;
        self.pending_gc.read_pages += read_pages;
        self.pending_gc.erased_blocks += 1;
        true
    }

    /// Whether `die` holds more invalid native units than its firmware lets build up.
    fn over_garbage_limit(&self, die: u32) -> bool {
        let limit = self.config.gc_max_garbage_units_per_die;
        limit > 0 && self.garbage_on_die[die as usize] > u64::from(limit)
    }

    /// Collects one victim on `die` in the background (the host idle) if the die has no more free blocks than
    /// the firmware's start threshold; returns the work, or None when the die is above it or holds no garbage.
    pub fn collect_in_background(&mut self, die: u32) -> Option<GcWork> {
        if self.free[die as usize].len() as u32 > self.config.gc_start_free_blocks_per_die
            && !self.over_garbage_limit(die)
        {
            return None;
        }
        self.pending_gc = GcWork::default();
        self.in_gc = true;
        let collected = self.collect(die);
        self.in_gc = false;
        collected.then_some(self.pending_gc)
    }

    /// Reads the forward-map entry a write of `logical` will need, so that it is in the CPU's cache when the write
    /// comes; changes nothing. A safe stand-in for a prefetch instruction (this crate has no `unsafe`).
    pub fn touch(&self, logical: u32) {
        std::hint::black_box(self.l2p[logical as usize]);
    }

    /// Writes logical unit `logical` (with an optional content fingerprint) to the next die in turn.
    pub fn write(&mut self, logical: u32, fingerprint: u64) -> Placement {
        let die = self.next_die;
        self.next_die = (self.next_die + 1) % self.config.dies;
        self.write_to(logical, fingerprint, die)
    }

    /// Writes logical unit `logical` to `die`'s main pool.
    pub fn write_to(&mut self, logical: u32, fingerprint: u64, die: u32) -> Placement {
        self.place(logical, fingerprint, die, false)
    }

    /// Whether `die`'s SLC cache can take another unit: room in its open block, a free block, or a closed block
    /// that holds nothing valid any more (reclaimed by an erase).
    pub fn slc_has_room(&self, die: u32) -> bool {
        let frontier = self.slc_frontier[die as usize];
        (frontier != NIL && self.written[frontier as usize] < self.config.slc_units_per_block)
            || !self.slc_free[die as usize].is_empty()
            || self.slc_reclaimable[die as usize] > 0
    }

    /// Writes logical unit `logical` into `die`'s SLC cache; the caller checks [`Ftl::slc_has_room`] first.
    pub fn write_slc(&mut self, logical: u32, fingerprint: u64, die: u32) -> Placement {
        assert!(self.slc_has_room(die), "die {die}: the SLC cache is full");
        let placement = self.place(logical, fingerprint, die, true);
        self.counters.slc_units_written += 1;
        placement
    }

    fn place(&mut self, logical: u32, fingerprint: u64, die: u32, slc: bool) -> Placement {
        assert!(
            logical < self.config.logical_units,
            "logical unit {logical} beyond the device"
        );
        let old = self.l2p[logical as usize];
        if old != UNMAPPED {
            self.invalidate(old);
        }
        self.pending_gc = GcWork::default();
        if !self.in_gc && self.over_garbage_limit(die) {
            // Overwrites elsewhere invalidate this die's units too, so its garbage is checked on every write it
            // takes, and paid down a victim at a time, not only when it opens a block.
            self.in_gc = true;
            self.collect(die);
            self.in_gc = false;
        }
        let physical = if slc {
            self.allocate_slc(die)
        } else {
            self.allocate(die)
        };
        self.p2l[physical as usize] = logical;
        self.l2p[logical as usize] = physical;
        let block = self.block_of(physical);
        self.valid[block as usize] += 1;
        self.valid_on_die[die as usize] += 1;
        if self.config.fingerprints {
            self.fingerprints[physical as usize] = fingerprint;
        }
        self.counters.host_units_written += 1;
        self.counters.nand_units_written += 1;
        Placement {
            die,
            physical_unit: physical,
            gc: self.pending_gc,
        }
    }

    fn allocate_slc(&mut self, die: u32) -> u32 {
        let mut block = self.slc_frontier[die as usize];
        if block == NIL || self.written[block as usize] == self.config.slc_units_per_block {
            if block != NIL {
                self.state[block as usize] = BlockState::Closed;
                self.slc_closed[die as usize].push_back(block);
                if self.valid[block as usize] == 0 {
                    self.slc_reclaimable[die as usize] += 1;
                }
            }
            block = match self.slc_free[die as usize].pop() {
                Some(free) => free,
                None => self.reclaim_slc(die),
            };
            self.state[block as usize] = BlockState::Open;
            self.slc_frontier[die as usize] = block;
        }
        let offset = self.written[block as usize];
        self.written[block as usize] += 1;
        if offset == 0 {
            // A block's age is its oldest data's: cost-benefit GC and the firmware refresh count from it.
            self.programmed_at[block as usize] = self.now;
        }
        let physical = block * self.config.units_per_block + offset;
        self.page_times.stamp(physical, self.now);
        physical
    }

    /// Takes the oldest closed SLC block of `die` that holds nothing valid and erases it for reuse (its erase is
    /// charged to the write that needed it). The caller checked [`Ftl::slc_has_room`].
    fn reclaim_slc(&mut self, die: u32) -> u32 {
        let closed = &mut self.slc_closed[die as usize];
        let at = closed
            .iter()
            .position(|&b| self.valid[b as usize] == 0)
            .expect("checked by slc_has_room: a closed SLC block holds nothing valid");
        let block = closed.remove(at).expect("position is in range");
        self.slc_reclaimable[die as usize] -= 1;
        assert_eq!(
            self.valid[block as usize], 0,
            "reclaiming an SLC block that holds data"
        );
        self.written[block as usize] = 0;
        self.erase_count[block as usize] += 1;
        self.counters.erases += 1;
        self.pending_gc.erased_blocks += 1;
        block
    }

    /// Units held in `die`'s SLC cache (valid or not) that a drain would process.
    pub fn slc_used_blocks(&self, die: u32) -> u32 {
        self.slc_closed[die as usize].len() as u32 + u32::from(self.slc_frontier[die as usize] != NIL)
    }

    /// Drains one SLC block of `die` into the main pool (oldest first; the open one last): its valid units are
    /// rewritten in the main pool and the block is erased. Returns the work done, or None when the cache is
    /// empty.
    pub fn drain_slc(&mut self, die: u32) -> Option<GcWork> {
        let block = match self.slc_closed[die as usize].pop_front() {
            Some(block) => block,
            None => {
                let open = self.slc_frontier[die as usize];
                if open == NIL {
                    return None;
                }
                self.slc_frontier[die as usize] = NIL;
                open
            }
        };
        if self.valid[block as usize] == 0 && self.state[block as usize] == BlockState::Closed {
            self.slc_reclaimable[die as usize] -= 1;
        }
        self.pending_gc = GcWork::default();
        let (moved, read_pages) = self.empty_block(block, die);
        self.state[block as usize] = BlockState::Free;
        self.slc_free[die as usize].push(block);
        self.counters.nand_units_written += moved as u64;
        self.counters.slc_drained_units += moved as u64;
        self.counters.erases += 1;
        let mut work = self.pending_gc;
        work.relocated_units += moved;
        work.read_pages += read_pages;
        work.erased_blocks += 1;
        Some(work)
    }

    /// Unmaps a logical unit at once for reads (it reads as unmapped) but leaves its data counted as valid until
    /// [`Ftl::reclaim_trimmed`] processes the TRIM, as drives that reclaim trimmed space in the background do.
    /// Returns whether it was mapped.
    pub fn trim_deferred(&mut self, logical: u32) -> bool {
        let old = self.l2p[logical as usize];
        if old == UNMAPPED {
            return false;
        }
        self.l2p[logical as usize] = UNMAPPED;
        self.p2l[old as usize] = TRIM_PENDING;
        self.trim_queue.push_back(old);
        self.trim_pending_units += 1;
        self.counters.trimmed_units += 1;
        true
    }

    /// Processes up to `max_units` deferred TRIMs, oldest first: their units become invalid, so garbage
    /// collection no longer copies them. Returns the TRIMs still pending.
    pub fn reclaim_trimmed(&mut self, max_units: u64) -> u64 {
        let mut done = 0;
        while done < max_units {
            let Some(physical) = self.trim_queue.pop_front() else {
                break;
            };
            if self.p2l[physical as usize] != TRIM_PENDING {
                continue; // moved by GC since (its new place is queued), or reclaimed through a stale entry
            }
            self.invalidate(physical);
            self.trim_pending_units -= 1;
            done += 1;
        }
        self.trim_pending_units
    }

    /// TRIMs not yet processed.
    pub fn trims_pending(&self) -> u64 {
        self.trim_pending_units
    }

    /// Unmaps a logical unit (TRIM). Returns whether it was mapped.
    pub fn trim(&mut self, logical: u32) -> bool {
        let old = self.l2p[logical as usize];
        if old == UNMAPPED {
            return false;
        }
        self.invalidate(old);
        self.l2p[logical as usize] = UNMAPPED;
        self.counters.trimmed_units += 1;
        true
    }

    /// The physical unit holding a logical unit, if mapped.
    pub fn lookup(&self, logical: u32) -> Option<u32> {
        let physical = self.l2p[logical as usize];
        (physical != UNMAPPED).then_some(physical)
    }

    /// The logical unit stored at a physical unit, if it holds valid data (not stale data awaiting its TRIM).
    pub fn reverse(&self, physical: u32) -> Option<u32> {
        let logical = self.p2l[physical as usize];
        (logical != UNMAPPED && logical != TRIM_PENDING).then_some(logical)
    }

    /// The fingerprint stored with a logical unit (None when unmapped or fingerprints are off).
    pub fn fingerprint(&self, logical: u32) -> Option<u64> {
        let physical = self.lookup(logical)?;
        self.config
            .fingerprints
            .then(|| self.fingerprints[physical as usize])
    }

    /// The die and block of a physical unit, and when that block was last programmed.
    pub fn locate(&self, physical: u32) -> (u32, u32, u64) {
        let block = self.block_of(physical);
        (
            self.die_of_block(block),
            block,
            self.programmed_at[block as usize],
        )
    }

    /// (min, mean, max) erase count over all blocks.
    pub fn erase_counts(&self) -> (u32, f64, u32) {
        // Blocks in service only: a retired block is never erased.
        let counts = || {
            self.erase_count
                .iter()
                .zip(&self.state)
                .filter(|(_, s)| **s != BlockState::Retired)
                .map(|(&c, _)| c)
        };
        let min = counts().min().unwrap_or(0);
        let max = counts().max().unwrap_or(0);
        let n = counts().count().max(1);
        let mean = counts().map(f64::from).sum::<f64>() / n as f64;
        (min, mean, max)
    }

    /// Takes `count` free blocks of `die` out of service, as a drive's factory bad blocks are: they never hold
    /// data, so the die has that much less spare area. At most the blocks beyond the logical capacity and the
    /// reserve can go (the drive must still hold every logical unit).
    pub fn retire_free_blocks(&mut self, die: u32, count: u32) {
        for _ in 0..count {
            let block = self.free[die as usize].pop().expect("a free block to retire");
            assert_eq!(self.state[block as usize], BlockState::Free);
            self.state[block as usize] = BlockState::Retired;
        }
        let usable = (self.config.dies * self.config.blocks_per_die - self.retired_blocks()) as u64
            * self.config.units_per_block as u64;
        let needed = self.config.logical_units as u64
            + (self.config.dies as u64 * (self.config.reserve_blocks_per_die as u64 + 1))
                * self.config.units_per_block as u64;
        assert!(
            usable > needed,
            "bad blocks left less than the logical capacity plus the reserve"
        );
    }

    /// Blocks out of service, over every die.
    pub fn retired_blocks(&self) -> u32 {
        self.state.iter().filter(|&&s| s == BlockState::Retired).count() as u32
    }

    /// Free blocks on a die.
    /// Units of valid data on `die` (trimmed units whose TRIM is still queued count, as they are still copied).
    pub fn valid_units(&self, die: u32) -> u64 {
        self.valid_on_die[die as usize]
    }

    /// Erased blocks on `die`'s free list.
    pub fn free_blocks(&self, die: u32) -> u32 {
        self.free[die as usize].len() as u32
    }

    /// Logical units currently mapped.
    pub fn mapped_units(&self) -> u64 {
        self.l2p.iter().filter(|&&p| p != UNMAPPED).count() as u64
    }

    /// Checks every invariant by brute force (tests and `--paranoid` runs); panics with the first violation.
    pub fn check_invariants(&self) {
        self.check_maps_agree();
        let tally = self.check_blocks();
        assert_eq!(
            tally.trim_pending_units, self.trim_pending_units,
            "pending TRIMs miscounted"
        );
        assert_eq!(
            tally.valid_on_die, self.valid_on_die,
            "valid units per die miscounted"
        );
        assert_eq!(
            tally.garbage_on_die, self.garbage_on_die,
            "invalid units per die miscounted"
        );
        assert!(
            self.trim_queue.len() as u64 >= tally.trim_pending_units,
            "a pending TRIM fell out of the queue"
        );
        for die in 0..self.config.dies {
            self.check_die(die);
        }
    }

    /// Every mapped logical unit's physical unit maps back to it.
    fn check_maps_agree(&self) {
        for (logical, &physical) in self.l2p.iter().enumerate() {
            if physical != UNMAPPED {
                assert_eq!(
                    self.p2l[physical as usize], logical as u32,
                    "l2p and p2l disagree at logical {logical}"
                );
            }
        }
    }

    /// Checks each block's valid count and units, and counts what the FTL keeps totals of: pending TRIMs, and
    /// valid and invalid units per die.
    fn check_blocks(&self) -> BlockTally {
        let np = self.config.units_per_block;
        let mut tally = BlockTally {
            trim_pending_units: 0,
            valid_on_die: vec![0u64; self.config.dies as usize],
            garbage_on_die: vec![0u64; self.config.dies as usize],
        };
        for block in 0..self.config.all_blocks() {
            let units = block * np..(block + 1) * np;
            let valid = units
                .clone()
                .filter(|&p| self.p2l[p as usize] != UNMAPPED)
                .count() as u32;
            assert_eq!(self.valid[block as usize], valid, "block {block}: valid count");
            tally.valid_on_die[self.die_of_block(block) as usize] += u64::from(valid);
            if !self.is_slc(block) && self.state[block as usize] != BlockState::Free {
                tally.garbage_on_die[self.die_of_block(block) as usize] +=
                    u64::from(self.written[block as usize] - valid);
            }
            tally.trim_pending_units += self.check_block_units(block);
        }
        tally
    }

    /// Checks that every unit of `block` holding data or a pending TRIM is below its write pointer and that its
    /// data's mapping points back at it; returns the block's pending TRIMs.
    fn check_block_units(&self, block: u32) -> u64 {
        let np = self.config.units_per_block;
        let mut pending = 0u64;
        for p in block * np..(block + 1) * np {
            let logical = self.p2l[p as usize];
            if logical == TRIM_PENDING {
                pending += 1;
                assert!(
                    p % np < self.written[block as usize],
                    "a pending TRIM beyond the write pointer"
                );
            } else if logical != UNMAPPED {
                assert_eq!(
                    self.l2p[logical as usize], p,
                    "p2l points at a stale mapping in block {block}"
                );
                assert!(
                    p % np < self.written[block as usize],
                    "valid data beyond the write pointer"
                );
            }
        }
        pending
    }

    /// Checks `die`'s block lists: each closed block in the bucket of its valid count, every SLC block and every
    /// block counted once, and the reclaimable SLC blocks counted right.
    fn check_die(&self, die: u32) {
        let np = self.config.units_per_block;
        let in_free = self.free[die as usize].len() as u32;
        let mut closed = 0;
        for valid in 0..=np {
            let mut b = self.heads[self.bucket(die, valid)];
            while b != NIL {
                assert_eq!(self.state[b as usize], BlockState::Closed);
                assert_eq!(self.valid[b as usize], valid, "block {b} in the wrong bucket");
                closed += 1;
                b = self.next[b as usize];
            }
        }
        let slc_total = self.slc_free[die as usize].len() as u32
            + self.slc_closed[die as usize].len() as u32
            + u32::from(self.slc_frontier[die as usize] != NIL);
        assert_eq!(
            slc_total, self.config.slc_blocks_per_die,
            "die {die}: SLC blocks lost or double-counted"
        );
        let reclaimable = self.slc_closed[die as usize]
            .iter()
            .filter(|&&b| self.valid[b as usize] == 0)
            .count() as u32;
        assert_eq!(
            reclaimable, self.slc_reclaimable[die as usize],
            "die {die}: reclaimable SLC blocks miscounted"
        );
        let open = u32::from(self.frontier[die as usize] != NIL);
        let first = die * self.config.blocks_per_die;
        let retired = (first..first + self.config.blocks_per_die)
            .filter(|&b| self.state[b as usize] == BlockState::Retired)
            .count() as u32;
        assert_eq!(
            in_free + closed + open + retired,
            self.config.blocks_per_die,
            "die {die}: blocks lost or double-counted"
        );
    }
}

/// What [`Ftl::check_invariants`] counts over every block, to set against the totals the FTL keeps.
struct BlockTally {
    trim_pending_units: u64,
    valid_on_die: Vec<u64>,
    garbage_on_die: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ssdlab_core::rng::Rng;
    use std::collections::HashMap;

    fn small(op: f64, fingerprints: bool) -> Ftl {
        let mut config = FtlConfig::with_op(2048, op, 2, 16, 2);
        config.fingerprints = fingerprints;
        Ftl::new(config)
    }

    #[test]
    fn op_and_spare_factor_follow_the_conventions() {
        let c = FtlConfig::with_op(1 << 16, 0.25, 4, 64, 2);
        assert!((c.op() - 0.25).abs() < 0.01, "op {}", c.op());
        assert!(
            (c.spare_factor() - 0.2).abs() < 0.01,
            "spare factor {}",
            c.spare_factor()
        );
    }

    #[test]
    fn overwrites_trigger_gc_and_keep_the_map_right() {
        let mut ftl = small(0.2, true);
        let mut rng = Rng::new(1);
        for l in 0..2048 {
            ftl.write(l, l as u64);
        }
        for i in 0..20_000u64 {
            let l = rng.below(2048) as u32;
            ftl.write(l, i << 16 | l as u64);
        }
        ftl.check_invariants();
        let c = ftl.counters();
        assert!(c.gc_runs > 0 && c.write_amplification() > 1.0, "{c:?}");
        assert_eq!(ftl.mapped_units(), 2048);
        let (min, _, max) = ftl.erase_counts();
        assert!(max >= min);
    }

    #[test]
    fn trim_unmaps_and_frees_space() {
        let mut ftl = small(0.1, false);
        for l in 0..2048 {
            ftl.write(l, 0);
        }
        for l in 0..2048 {
            assert!(ftl.trim(l));
        }
        assert!(!ftl.trim(5));
        assert_eq!(ftl.mapped_units(), 0);
        // With everything trimmed, rewriting the whole device needs no relocation at all.
        let before = ftl.counters().relocated_units;
        for l in 0..2048 {
            ftl.write(l, 0);
        }
        assert_eq!(ftl.counters().relocated_units, before);
        ftl.check_invariants();
    }

    #[derive(Debug, Clone)]
    enum Action {
        Write(u32),
        WriteSlc(u32),
        Drain(u32),
        Background(u32),
        Trim(u32),
        TrimDeferred(u32),
        Reclaim(u64),
        Read(u32),
    }

    fn actions() -> impl Strategy<Value = Vec<Action>> {
        prop::collection::vec(
            prop_oneof![
                6 => (0u32..512).prop_map(Action::Write),
                3 => (0u32..512).prop_map(Action::WriteSlc),
                1 => (0u32..2).prop_map(Action::Drain),
                1 => (0u32..2).prop_map(Action::Background),
                1 => (0u32..512).prop_map(Action::Trim),
                1 => (0u32..512).prop_map(Action::TrimDeferred),
                1 => (0u64..64).prop_map(Action::Reclaim),
                2 => (0u32..512).prop_map(Action::Read),
            ],
            1..3000,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The FTL behaves like a plain map: every read returns the last version written, trimmed data reads as
        /// unmapped, through any amount of garbage collection, with either policy.
        #[test]
        fn ftl_equals_a_plain_map(
            actions in actions(),
            cost_benefit in any::<bool>(),
            op in 0.07f64..0.5,
            early in 0u32..4,
            garbage_limit in 0u32..40,
        ) {
            let mut config = FtlConfig::with_op(512, op, 2, 8, 2);
            config.fingerprints = true;
            config.gc_start_free_blocks_per_die = early;
            config.gc_max_garbage_units_per_die = garbage_limit;
            config.policy = if cost_benefit { GcPolicy::CostBenefit } else { GcPolicy::Greedy };
            config.slc_blocks_per_die = 3;
            config.slc_units_per_block = 3;
            let mut ftl = Ftl::new(config);
            let mut oracle: HashMap<u32, u64> = HashMap::new();
            for (version, action) in actions.iter().enumerate() {
                ftl.set_time(version as u64);
                match *action {
                    Action::Write(l) => {
                        ftl.write(l, version as u64);
                        oracle.insert(l, version as u64);
                    }
                    Action::WriteSlc(l) => {
                        let die = l % 2;
                        if ftl.slc_has_room(die) {
                            ftl.write_slc(l, version as u64, die);
                        } else {
                            ftl.write_to(l, version as u64, die);
                        }
                        oracle.insert(l, version as u64);
                    }
                    Action::Drain(die) => {
                        ftl.drain_slc(die);
                    }
                    Action::Background(die) => {
                        ftl.collect_in_background(die);
                    }
                    Action::Trim(l) => {
                        prop_assert_eq!(ftl.trim(l), oracle.remove(&l).is_some());
                    }
                    Action::TrimDeferred(l) => {
                        prop_assert_eq!(ftl.trim_deferred(l), oracle.remove(&l).is_some());
                    }
                    Action::Reclaim(n) => {
                        ftl.reclaim_trimmed(n);
                    }
                    Action::Read(l) => prop_assert_eq!(ftl.fingerprint(l), oracle.get(&l).copied()),
                }
            }
            ftl.check_invariants();
            for l in 0..512 {
                prop_assert_eq!(ftl.fingerprint(l), oracle.get(&l).copied());
            }
            prop_assert_eq!(ftl.reclaim_trimmed(u64::MAX), 0, "every deferred TRIM is processed");
            ftl.check_invariants();
        }
    }
}
