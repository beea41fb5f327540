//! Reverse maps (physical unit to logical unit) for the few blocks that need one now.
//!
//! A drive keeps each unit's logical address in the page's spare area and reads it back when it collects the
//! block. The simulator has no spare area, and a reverse map for every physical unit would cost as much memory
//! as the forward map. So the FTL keeps reverse maps only for the blocks that are being written (the open
//! frontiers and the SLC cache, filled in as units are programmed) and for the next garbage-collection victims
//! (rebuilt together by one pass over the forward map). This module owns the slots those maps live in; it never
//! decides which blocks get one, and an entry it returns is only a claim: the unit is valid only while the
//! forward map still points back at it.

/// A unit whose logical address is not known (never programmed since the map was attached).
pub(crate) const NO_LOGICAL: u32 = u32::MAX;
const NO_SLOT: u32 = u32::MAX;

/// Reverse maps for blocks `first_block..first_block + blocks`, `units` entries each.
pub(crate) struct ReverseMaps {
    first_block: u32,
    units: u32,
    /// Per block, the slot of its map, or [`NO_SLOT`].
    slot_of: Vec<u32>,
    /// Slot `s` holds entries `s * units .. (s + 1) * units`.
    entries: Vec<u32>,
    free_slots: Vec<u32>,
}

impl ReverseMaps {
    pub(crate) fn new(first_block: u32, blocks: u32, units: u32) -> Self {
        ReverseMaps {
            first_block,
            units,
            slot_of: vec![NO_SLOT; blocks as usize],
            entries: Vec::new(),
            free_slots: Vec::new(),
        }
    }

    #[inline]
    fn slot(&self, block: u32) -> u32 {
        self.slot_of[(block - self.first_block) as usize]
    }

    /// Whether `block` has a map.
    #[inline]
    pub(crate) fn has(&self, block: u32) -> bool {
        self.slot(block) != NO_SLOT
    }

    /// Gives `block` an empty map (every entry [`NO_LOGICAL`]); a map it had is cleared.
    pub(crate) fn attach(&mut self, block: u32) {
        let slot = match self.slot(block) {
            NO_SLOT => match self.free_slots.pop() {
                Some(slot) => slot,
                None => {
                    let slot = (self.entries.len() / self.units as usize) as u32;
                    self.entries
                        .resize(self.entries.len() + self.units as usize, NO_LOGICAL);
                    slot
                }
            },
            slot => slot,
        };
        self.slot_of[(block - self.first_block) as usize] = slot;
        let at = (slot * self.units) as usize;
        self.entries[at..at + self.units as usize].fill(NO_LOGICAL);
    }

    /// Drops `block`'s map, if it has one.
    pub(crate) fn detach(&mut self, block: u32) {
        let slot = self.slot(block);
        if slot != NO_SLOT {
            self.free_slots.push(slot);
            self.slot_of[(block - self.first_block) as usize] = NO_SLOT;
        }
    }

    /// The logical unit recorded at `offset` of `block`, which must have a map.
    #[inline]
    pub(crate) fn get(&self, block: u32, offset: u32) -> u32 {
        let slot = self.slot(block);
        assert!(slot != NO_SLOT, "block {block} has no reverse map");
        self.entries[(slot * self.units + offset) as usize]
    }

    /// Records `logical` at `offset` of `block`, which must have a map.
    #[inline]
    pub(crate) fn set(&mut self, block: u32, offset: u32, logical: u32) {
        let slot = self.slot(block);
        assert!(slot != NO_SLOT, "block {block} has no reverse map");
        self.entries[(slot * self.units + offset) as usize] = logical;
    }

    /// Records `logical` at `offset` of `block` if `block` has a map (the rebuilding pass).
    #[inline]
    pub(crate) fn set_if_mapped(&mut self, block: u32, offset: u32, logical: u32) {
        let slot = self.slot(block);
        if slot != NO_SLOT {
            self.entries[(slot * self.units + offset) as usize] = logical;
        }
    }

    /// Blocks that have a map now.
    pub(crate) fn attached(&self) -> usize {
        self.slots() - self.free_slots.len()
    }

    /// Slots ever allocated: the most maps held at once.
    pub(crate) fn slots(&self) -> usize {
        self.entries.len() / self.units as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_cleared() {
        let mut maps = ReverseMaps::new(10, 5, 4);
        maps.attach(11);
        maps.set(11, 2, 77);
        assert_eq!(maps.get(11, 2), 77);
        assert!(maps.has(11) && !maps.has(12));
        maps.detach(11);
        maps.attach(13);
        assert_eq!(maps.slots(), 1, "the freed slot is reused");
        assert_eq!(maps.get(13, 2), NO_LOGICAL, "a reused slot starts empty");
        maps.set_if_mapped(12, 0, 5);
        maps.set_if_mapped(13, 0, 5);
        assert_eq!(maps.get(13, 0), 5);
        assert_eq!(maps.attached(), 1);
    }
}
