//! The cache's memory: fixed-size frames of cached blocks, the index from block to frame, the LRU list of
//! clean frames, the dirty set in LBA order, and the flush epochs that say which dirty data a FLUSH waits for.
//!
//! It owns every state change of a frame (free, clean, dirty, destaging) and checks them with assertions that
//! stay on in release builds. It never talks to a device and never decides policy (what to admit, when to
//! destage): the device layer does.
//!
//! **Epochs.** Every FLUSH opens a new epoch. A frame that becomes dirty records the epoch it became dirty in;
//! a FLUSH of epoch E may go to the device once no frame dirtied in an epoch at or before E is still dirty or
//! being destaged. A frame written again while its destage is in flight keeps a second, later entry (it must be
//! destaged again, and never while the first destage is in flight, so the older data cannot land last).

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The cache's unit: every frame holds one aligned 4 KiB block of the device.
pub const BLOCK: u64 = 4096;
/// A frame's data is valid per 512-byte sector: a write aligned to sectors that covers part of a block not
/// cached is absorbed into a frame holding only those sectors (real traces of 512-byte-sector hosts write 4 KiB
/// at any sector), and reads of its other sectors go to the device.
pub const SECTOR: u64 = 512;
/// Every sector of a frame valid.
pub const FULL: u8 = 0xFF;
const NIL: u32 = u32::MAX;

/// The sectors of a block that the bytes `[within, within + len)` touch.
pub fn sectors_touched(within: usize, len: usize) -> u8 {
    if len == 0 {
        return 0;
    }
    let (first, last) = (within / SECTOR as usize, (within + len - 1) / SECTOR as usize);
    sector_run(first, last)
}

/// The sectors of a block that the bytes `[within, within + len)` cover whole.
pub fn sectors_covered(within: usize, len: usize) -> u8 {
    let first = within.div_ceil(SECTOR as usize);
    let end = (within + len) / SECTOR as usize;
    if end <= first {
        0
    } else {
        sector_run(first, end - 1)
    }
}

/// Sectors `first..=last` as a mask.
fn sector_run(first: usize, last: usize) -> u8 {
    assert!(first <= last && last < 8, "sectors {first}..={last} of a block");
    (((1u16 << (last + 1)) - (1u16 << first)) & 0xFF) as u8
}

/// Whether a mask is one run of sectors (what one destage write can carry).
pub fn one_run(mask: u8) -> bool {
    mask != 0 && {
        let shifted = mask >> mask.trailing_zeros();
        shifted & shifted.wrapping_add(1) == 0
    }
}

/// Where a destage run's write goes and how long it is: (byte offset on the device, bytes): from the first
/// frame's first held sector to the last frame's last, every byte between held (see [`Store::take_run`]).
pub fn run_write(run: &[Destaged]) -> (u64, u64) {
    let first = run.first().expect("a destage run holds a block");
    let mut expected_at = None;
    let mut len = 0;
    for (i, d) in run.iter().enumerate() {
        let (within, n) = run_bytes(d.valid);
        let at = d.block * BLOCK + within as u64;
        // Pair assertion around user data going to the device: the run's bytes are contiguous.
        assert!(
            d.block == first.block + i as u64,
            "a destage run's blocks are consecutive"
        );
        assert!(
            expected_at.is_none_or(|e| e == at),
            "a destage run has a gap at block {}",
            d.block
        );
        expected_at = Some(at + n as u64);
        len += n as u64;
    }
    (first.block * BLOCK + run_bytes(first.valid).0 as u64, len)
}

/// The bytes of a block a one-run mask (or [`FULL`]) holds: (offset in the block, length).
pub fn run_bytes(mask: u8) -> (usize, usize) {
    assert!(one_run(mask), "sectors {mask:#010b} are not one run");
    (
        mask.trailing_zeros() as usize * SECTOR as usize,
        mask.count_ones() as usize * SECTOR as usize,
    )
}

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Free,
    /// The same data as the device: may be evicted.
    Clean,
    /// Newer than the device, waiting to be destaged: never evicted.
    Dirty,
    /// A destage write of it is in flight; `redirtied` says whether it was written again since.
    Destaging,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    block: u64,
    state: State,
    /// The sectors whose data is held ([`FULL`] for a whole block); never empty for an indexed frame, and one
    /// run for a frame that is not whole (so a partial frame's destage is one write).
    valid: u8,
    /// Bumped by every write into the frame.
    generation: u32,
    /// Written while its destage was in flight: destage again when that completes.
    redirtied: bool,
    /// The epoch of the oldest write not yet destaged (Dirty, or Destaging and redirtied).
    dirty_epoch: u64,
    prev: u32,
    next: u32,
}

const EMPTY: Frame = Frame {
    block: 0,
    state: State::Free,
    valid: 0,
    generation: 0,
    redirtied: false,
    dirty_epoch: 0,
    prev: NIL,
    next: NIL,
};

/// One block handed to a destage write: which frame, and the generation whose data was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destaged {
    pub block: u64,
    pub frame: u32,
    /// The sectors written: a run is an optional tail frame, whole frames and an optional head frame (see
    /// [`Store::take_run`]).
    pub valid: u8,
    pub generation: u32,
    /// The epoch of the data being destaged (kept here, not in the frame, to keep frames small).
    pub epoch: u64,
}

pub struct Store {
    data: Vec<u8>,
    frames: Vec<Frame>,
    index: HashMap<u64, u32>,
    free: Vec<u32>,
    /// Most recently used clean frame.
    lru_head: u32,
    lru_tail: u32,
    /// Dirty frames not being destaged, by block (destage order).
    dirty: BTreeSet<u64>,
    /// How many undestaged writes (frame entries) each epoch still has.
    unsettled: BTreeMap<u64, u64>,
    epoch: u64,
    /// Frames that may not be evicted (Dirty or Destaging).
    pinned: usize,
    pub evictions: u64,
}

impl Store {
    pub fn new(frame_count: usize) -> Self {
        assert!(
            frame_count > 0 && frame_count < NIL as usize,
            "frame count {frame_count}"
        );
        Store {
            // Zeroed allocations are mapped lazily: an idle cache costs no memory.
            data: vec![0; frame_count * BLOCK as usize],
            frames: vec![EMPTY; frame_count],
            index: HashMap::with_capacity(frame_count),
            free: (0..frame_count as u32).rev().collect(),
            lru_head: NIL,
            lru_tail: NIL,
            dirty: BTreeSet::new(),
            unsettled: BTreeMap::new(),
            epoch: 0,
            pinned: 0,
            evictions: 0,
        }
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// The bookkeeping's memory: frame table, index, free list, and the dirty set at its fullest.
    pub fn metadata_bytes(&self, dirty_limit_frames: usize) -> u64 {
        let index = self.index.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        let frames = self.frames.capacity() * std::mem::size_of::<Frame>();
        let free = self.free.capacity() * 4;
        // A B-tree of u64 keys costs about 16 bytes a key at its usual fill.
        let dirty = dirty_limit_frames * 16;
        (index + frames + free + dirty) as u64
    }

    pub fn lookup(&self, block: u64) -> Option<u32> {
        self.index.get(&block).copied()
    }

    pub fn state(&self, frame: u32) -> State {
        self.frames[frame as usize].state
    }

    /// The sectors the frame holds.
    pub fn valid(&self, frame: u32) -> u8 {
        self.frames[frame as usize].valid
    }

    /// Whether the frame holds every sector the bytes `[within, within + len)` of its block touch.
    pub fn holds(&self, frame: u32, within: usize, len: usize) -> bool {
        let touched = sectors_touched(within, len);
        self.frames[frame as usize].valid & touched == touched
    }

    pub fn data(&self, frame: u32) -> &[u8] {
        let at = frame as usize * BLOCK as usize;
        &self.data[at..at + BLOCK as usize]
    }

    /// Frames that hold data newer than the device (dirty or being destaged).
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// Dirty frames waiting for a destage.
    pub fn dirty_waiting(&self) -> usize {
        self.dirty.len()
    }

    /// Whether `count` more frames (new blocks, or clean ones about to be dirtied) can be pinned without going
    /// past `pinned_limit`. Every frame that is not pinned is free or clean, so they can all be had.
    pub fn can_pin(&self, count: usize, pinned_limit: usize) -> bool {
        self.pinned + count <= pinned_limit
    }

    /// Marks a clean frame most recently used.
    pub fn touch(&mut self, frame: u32) {
        if self.frames[frame as usize].state == State::Clean {
            self.unlink(frame);
            self.push_front(frame);
        }
    }

    /// Every cached block, most recently used first: pinned (dirty or destaging) frames first, as the most
    /// recently written (in frame order among themselves), then clean frames in LRU order.
    pub fn blocks_by_recency(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.index.len());
        for (i, f) in self.frames.iter().enumerate() {
            if matches!(f.state, State::Dirty | State::Destaging) {
                debug_assert_eq!(self.index.get(&f.block), Some(&(i as u32)));
                out.push(f.block);
            }
        }
        let mut at = self.lru_head;
        while at != NIL {
            out.push(self.frames[at as usize].block);
            at = self.frames[at as usize].next;
        }
        out
    }

    /// The clean frame that would be evicted next.
    pub fn victim(&self) -> Option<u64> {
        (self.lru_tail != NIL).then(|| self.frames[self.lru_tail as usize].block)
    }

    pub fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// A frame for `block`, from the free list or by evicting the least recently used clean frame.
    fn allocate(&mut self, block: u64) -> Option<u32> {
        assert!(
            !self.index.contains_key(&block),
            "block {block} is already cached"
        );
        let frame = match self.free.pop() {
            Some(f) => f,
            None => {
                let victim = self.lru_tail;
                if victim == NIL {
                    return None;
                }
                let f = &self.frames[victim as usize];
                assert_eq!(f.state, State::Clean, "only clean frames are on the LRU list");
                let old = f.block;
                self.unlink(victim);
                self.index.remove(&old);
                self.evictions += 1;
                victim
            }
        };
        self.frames[frame as usize] = Frame { block, ..EMPTY };
        self.index.insert(block, frame);
        Some(frame)
    }

    /// Caches a clean copy of `block` (read from the device). None if every frame is pinned.
    pub fn insert_clean(&mut self, block: u64, src: &[u8]) -> Option<u32> {
        let frame = self.allocate(block)?;
        self.copy_in(frame, 0, src);
        self.frames[frame as usize].state = State::Clean;
        self.frames[frame as usize].valid = FULL;
        self.push_front(frame);
        Some(frame)
    }

    /// Writes `src` at `offset` into the cached copy of `block`, allocating a frame for a write of whole
    /// sectors (a whole block, or with `dirty` any one run of sectors). With `dirty` the frame becomes dirty
    /// (write-back) and holds the sectors written too; otherwise a clean frame stays clean and a pinned one is
    /// dirtied again (its destage copy is now stale), and the frame holds no more sectors than before (the
    /// device has the rest). Returns false only when a new frame was needed and none could be had.
    pub fn write(&mut self, block: u64, offset: usize, src: &[u8], dirty: bool) -> bool {
        let covered = sectors_covered(offset, src.len());
        let frame = match self.lookup(block) {
            Some(f) => f,
            None => {
                assert!(
                    covered == sectors_touched(offset, src.len())
                        && (covered == FULL || (dirty && one_run(covered))),
                    "a write of part of a block not cached is whole sectors, and absorbed"
                );
                match self.allocate(block) {
                    Some(f) => {
                        self.frames[f as usize].state = if dirty { State::Free } else { State::Clean };
                        if !dirty {
                            // A whole block written through: held whole.
                            self.frames[f as usize].valid = FULL;
                            self.push_front(f);
                        }
                        f
                    }
                    None => return false,
                }
            }
        };
        if dirty {
            // Pair assertion around user data: a partly touched sector must already be held, so the frame never
            // claims a sector it holds only part of.
            let touched = sectors_touched(offset, src.len());
            let f = &mut self.frames[frame as usize];
            assert_eq!(
                touched & !covered & !f.valid,
                0,
                "block {block}: a write into a sector the frame does not hold"
            );
            f.valid |= covered;
            assert!(
                f.valid == FULL || one_run(f.valid),
                "block {block}: sectors {:#010b} are not one run",
                f.valid
            );
        }
        self.copy_in(frame, offset, src);
        let state = self.frames[frame as usize].state;
        if dirty || state != State::Clean {
            self.mark_dirty(frame);
        } else {
            self.touch(frame);
        }
        true
    }

    fn copy_in(&mut self, frame: u32, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= BLOCK as usize);
        let at = frame as usize * BLOCK as usize + offset;
        self.data[at..at + src.len()].copy_from_slice(src);
        let f = &mut self.frames[frame as usize];
        f.generation = f.generation.wrapping_add(1);
    }

    fn mark_dirty(&mut self, frame: u32) {
        let epoch = self.epoch;
        let f = self.frames[frame as usize];
        match f.state {
            // A newly allocated frame (Free here means "just allocated for a dirty write").
            State::Free | State::Clean => {
                if f.state == State::Clean {
                    self.unlink(frame);
                }
                self.pinned += 1;
                let f = &mut self.frames[frame as usize];
                f.state = State::Dirty;
                f.dirty_epoch = epoch;
                self.dirty.insert(f.block);
                *self.unsettled.entry(epoch).or_default() += 1;
            }
            State::Dirty => {}
            State::Destaging if f.redirtied => {}
            State::Destaging => {
                let f = &mut self.frames[frame as usize];
                f.redirtied = true;
                f.dirty_epoch = epoch;
                *self.unsettled.entry(epoch).or_default() += 1;
            }
        }
    }

    /// Takes up to `max_blocks` consecutive dirty blocks, starting at the first at or after `cursor` (wrapping
    /// to the lowest), and marks them as being destaged; their held bytes are contiguous (a frame holding a
    /// block's tail may begin the run, one holding a block's head may end it, any other partial frame goes
    /// alone). Empty when nothing is dirty.
    pub fn take_run(&mut self, cursor: u64, max_blocks: usize, out: &mut Vec<Destaged>) {
        out.clear();
        let Some(&first) = self
            .dirty
            .range(cursor..)
            .next()
            .or_else(|| self.dirty.iter().next())
        else {
            return;
        };
        let mut block = first;
        while out.len() < max_blocks && self.dirty.contains(&block) {
            let frame = self.index[&block];
            // One write carries contiguous bytes: a run may begin with a frame holding a block's tail, go on
            // through whole blocks and end with a frame holding a block's head; any other partial frame goes
            // alone.
            let valid = self.frames[frame as usize].valid;
            let joins = out.is_empty() || valid == FULL || valid & 1 != 0;
            if !joins {
                break;
            }
            let goes_on = valid == FULL || (out.is_empty() && valid & 0x80 != 0);
            self.dirty.remove(&block);
            let f = &mut self.frames[frame as usize];
            assert_eq!(
                f.state,
                State::Dirty,
                "block {block} in the dirty set is not dirty"
            );
            f.state = State::Destaging;
            f.redirtied = false;
            out.push(Destaged {
                block,
                frame,
                valid: f.valid,
                generation: f.generation,
                epoch: f.dirty_epoch,
            });
            block += 1;
            if !goes_on {
                break;
            }
        }
    }

    /// Settles a destage write: on success its blocks become clean (or dirty again if written meanwhile); on
    /// failure they are dirty again, keeping their oldest epoch.
    pub fn destage_done(&mut self, run: &[Destaged], ok: bool) {
        for d in run {
            let f = self.frames[d.frame as usize];
            assert_eq!(
                f.state,
                State::Destaging,
                "block {} was not being destaged",
                d.block
            );
            assert_eq!(
                f.block, d.block,
                "frame {} changed block during its destage",
                d.frame
            );
            self.settle(d.epoch);
            if !ok {
                if f.redirtied {
                    // The newer write's entry goes; the failed data is needed again under its older epoch.
                    self.settle(f.dirty_epoch);
                }
                *self.unsettled.entry(d.epoch).or_default() += 1;
                let frame = &mut self.frames[d.frame as usize];
                frame.dirty_epoch = d.epoch;
                frame.state = State::Dirty;
                frame.redirtied = false;
                self.dirty.insert(d.block);
                continue;
            }
            let frame = &mut self.frames[d.frame as usize];
            if frame.redirtied {
                frame.state = State::Dirty;
                frame.redirtied = false;
                self.dirty.insert(d.block);
            } else {
                assert_eq!(
                    frame.generation, d.generation,
                    "a clean frame holds what was destaged"
                );
                frame.state = State::Clean;
                self.pinned -= 1;
                self.push_front(d.frame);
            }
        }
    }

    /// Drops the cached copy of `block` (a discard): its data is no longer wanted, dirty or not. A block whose
    /// destage is in flight keeps its copy: a discarded block's content is undefined, and a second frame for
    /// the block would let a later destage race the one in flight.
    pub fn discard(&mut self, block: u64) {
        let Some(&frame) = self.index.get(&block) else {
            return;
        };
        let f = self.frames[frame as usize];
        if f.state == State::Destaging {
            return;
        }
        self.index.remove(&block);
        match f.state {
            State::Free | State::Destaging => unreachable!("an indexed frame is never free"),
            State::Clean => {
                self.unlink(frame);
                self.frames[frame as usize] = EMPTY;
                self.free.push(frame);
            }
            State::Dirty => {
                self.dirty.remove(&block);
                self.settle(f.dirty_epoch);
                self.frames[frame as usize] = EMPTY;
                self.free.push(frame);
                self.pinned -= 1;
            }
        }
    }

    /// Drops a clean copy (its data may not match the device after a failed write).
    pub fn drop_clean(&mut self, block: u64) {
        if let Some(frame) = self.lookup(block)
            && self.frames[frame as usize].state == State::Clean
        {
            self.discard(block);
        }
    }

    fn settle(&mut self, epoch: u64) {
        let count = self
            .unsettled
            .get_mut(&epoch)
            .expect("a settled entry was counted");
        *count -= 1;
        if *count == 0 {
            self.unsettled.remove(&epoch);
        }
    }

    /// Opens a new epoch for a FLUSH and returns the one it waits for.
    pub fn begin_flush(&mut self) -> u64 {
        let epoch = self.epoch;
        // 64 bits: a client doing a million FUA writes a second needs half a million years to wrap it.
        self.epoch += 1;
        epoch
    }

    /// Whether everything written in `epoch` or before has been destaged.
    pub fn settled(&self, epoch: u64) -> bool {
        self.unsettled.keys().next().is_none_or(|&first| first > epoch)
    }

    fn unlink(&mut self, frame: u32) {
        let Frame { prev, next, .. } = self.frames[frame as usize];
        if prev == NIL {
            self.lru_head = next;
        } else {
            self.frames[prev as usize].next = next;
        }
        if next == NIL {
            self.lru_tail = prev;
        } else {
            self.frames[next as usize].prev = prev;
        }
        let f = &mut self.frames[frame as usize];
        f.prev = NIL;
        f.next = NIL;
    }

    fn push_front(&mut self, frame: u32) {
        let head = self.lru_head;
        let f = &mut self.frames[frame as usize];
        f.prev = NIL;
        f.next = head;
        if head == NIL {
            self.lru_tail = frame;
        } else {
            self.frames[head as usize].prev = frame;
        }
        self.lru_head = frame;
    }

    /// Checks every structural invariant (for tests; linear in the cache size); `in_flight` lists the blocks of
    /// every destage write in flight.
    pub fn check(&self, in_flight: &[Destaged]) {
        let mut pinned = 0;
        let mut unsettled: BTreeMap<u64, u64> = BTreeMap::new();
        let indexed: std::collections::HashSet<u32> = self.index.values().copied().collect();
        for (i, f) in self.frames.iter().enumerate() {
            if f.state != State::Free {
                assert!(
                    f.valid == FULL || one_run(f.valid),
                    "frame {i}: sectors {:#010b}",
                    f.valid
                );
            }
            match f.state {
                State::Free => assert!(!indexed.contains(&(i as u32))),
                State::Clean => assert_eq!(self.index.get(&f.block), Some(&(i as u32))),
                State::Dirty => {
                    pinned += 1;
                    assert!(self.dirty.contains(&f.block));
                    *unsettled.entry(f.dirty_epoch).or_default() += 1;
                }
                State::Destaging => {
                    pinned += 1;
                    assert!(!self.dirty.contains(&f.block));
                    let d = in_flight
                        .iter()
                        .find(|d| d.frame == i as u32)
                        .expect("a destaging frame is in a destage write in flight");
                    *unsettled.entry(d.epoch).or_default() += 1;
                    if f.redirtied {
                        *unsettled.entry(f.dirty_epoch).or_default() += 1;
                    }
                }
            }
        }
        assert_eq!(pinned, self.pinned, "pinned count");
        assert_eq!(unsettled, self.unsettled, "unsettled epochs");
        let mut lru = 0;
        let mut at = self.lru_head;
        while at != NIL {
            assert_eq!(self.frames[at as usize].state, State::Clean);
            lru += 1;
            at = self.frames[at as usize].next;
        }
        let clean = self.frames.iter().filter(|f| f.state == State::Clean).count();
        assert_eq!(lru, clean, "every clean frame is on the LRU list once");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_masks() {
        assert_eq!(sectors_touched(0, 4096), FULL);
        assert_eq!(sectors_covered(0, 4096), FULL);
        assert_eq!(sectors_touched(512, 1024), 0b0000_0110);
        assert_eq!(sectors_covered(100, 1024), 0b0000_0010);
        assert_eq!(sectors_touched(100, 1024), 0b0000_0111);
        assert_eq!(sectors_covered(3584, 512), 0b1000_0000);
        assert_eq!(sectors_covered(10, 20), 0);
        assert!(one_run(0b0111_0000) && one_run(FULL) && one_run(1));
        assert!(!one_run(0b1000_0001) && !one_run(0));
        assert_eq!(run_bytes(0b0111_0000), (2048, 1536));
    }

    #[test]
    fn a_partial_frame_is_destaged_alone_and_holds_only_its_sectors() {
        let mut store = Store::new(8);
        // Blocks 1 and 2 whole, block 3's last three sectors, block 4 whole.
        for b in [1, 2, 4] {
            assert!(store.write(b, 0, &[b as u8; 4096], true));
        }
        assert!(store.write(3, 2560, &[3; 1536], true));
        let frame = store.lookup(3).unwrap();
        assert_eq!(store.valid(frame), 0b1110_0000);
        assert!(store.holds(frame, 3000, 100) && !store.holds(frame, 2000, 600));
        let (mut run, mut in_flight) = (Vec::new(), Vec::new());
        // Whole blocks 1 and 2 go on; block 3 holds a tail, which cannot be followed: the run ends before it.
        store.take_run(0, 16, &mut run);
        assert_eq!(run.iter().map(|d| d.block).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(run_write(&run), (4096, 8192));
        in_flight.extend(run.iter().copied());
        // A tail begins a run and whole block 4 follows it.
        store.take_run(3, 16, &mut run);
        assert_eq!(
            run.iter().map(|d| (d.block, d.valid)).collect::<Vec<_>>(),
            vec![(3, 0b1110_0000), (4, FULL)]
        );
        assert_eq!(run_write(&run), (3 * 4096 + 2560, 1536 + 4096));
        in_flight.extend(run.iter().copied());
        // Growing it from below keeps one run; a write that would leave a hole is refused by the caller, and
        // the store asserts it.
        assert!(store.write(5, 0, &[5; 512], true));
        assert!(store.write(5, 512, &[5; 1024], true));
        assert_eq!(store.valid(store.lookup(5).unwrap()), 0b0000_0111);
        store.check(&in_flight);
    }
}
