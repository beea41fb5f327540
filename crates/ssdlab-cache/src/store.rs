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
const NIL: u32 = u32::MAX;

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
        self.push_front(frame);
        Some(frame)
    }

    /// Writes `src` at `offset` into the cached copy of `block`, allocating a frame for a whole-block write.
    /// With `dirty` the frame becomes dirty (write-back); otherwise a clean frame stays clean and a pinned one
    /// is dirtied again (its destage copy is now stale). Returns false only when a new frame was needed and
    /// none could be had.
    pub fn write(&mut self, block: u64, offset: usize, src: &[u8], dirty: bool) -> bool {
        let frame = match self.lookup(block) {
            Some(f) => f,
            None => {
                assert!(
                    offset == 0 && src.len() == BLOCK as usize,
                    "a partial write needs a cached block"
                );
                match self.allocate(block) {
                    Some(f) => {
                        self.frames[f as usize].state = if dirty { State::Free } else { State::Clean };
                        if !dirty {
                            self.push_front(f);
                        }
                        f
                    }
                    None => return false,
                }
            }
        };
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
    /// to the lowest), and marks them as being destaged. Empty when nothing is dirty.
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
        while out.len() < max_blocks && self.dirty.remove(&block) {
            let frame = self.index[&block];
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
                generation: f.generation,
                epoch: f.dirty_epoch,
            });
            block += 1;
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
