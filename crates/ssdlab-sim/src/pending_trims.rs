//! Which physical units hold stale data of a TRIM the firmware has not processed yet (deferred reclamation).
//!
//! Such a unit still counts as valid, so garbage collection copies it, until the TRIM is processed. Its logical
//! unit is already unmapped, so the forward map cannot vouch for it: a bit per unit says it. The bits are kept
//! per block and only for blocks that hold a pending TRIM, so a drive that trims at once pays nothing. This
//! module owns the bits; it never counts valid units.

/// One bit per physical unit, allocated a block at a time.
pub(crate) struct PendingTrims {
    units_per_block: u32,
    blocks: Vec<Option<Box<[u64]>>>,
}

impl PendingTrims {
    pub(crate) fn new(blocks: usize, units_per_block: u32) -> Self {
        PendingTrims {
            units_per_block,
            blocks: (0..blocks).map(|_| None).collect(),
        }
    }

    #[inline]
    fn split(&self, physical: u32) -> (usize, usize, u64) {
        let offset = physical % self.units_per_block;
        (
            (physical / self.units_per_block) as usize,
            (offset / 64) as usize,
            1u64 << (offset % 64),
        )
    }

    /// Whether `physical` holds data of a pending TRIM.
    #[inline]
    pub(crate) fn get(&self, physical: u32) -> bool {
        let (block, word, bit) = self.split(physical);
        self.blocks[block]
            .as_ref()
            .is_some_and(|bits| bits[word] & bit != 0)
    }

    pub(crate) fn set(&mut self, physical: u32) {
        let (block, word, bit) = self.split(physical);
        let words = (self.units_per_block as usize).div_ceil(64);
        self.blocks[block].get_or_insert_with(|| vec![0; words].into_boxed_slice())[word] |= bit;
    }

    pub(crate) fn clear(&mut self, physical: u32) {
        let (block, word, bit) = self.split(physical);
        if let Some(bits) = self.blocks[block].as_mut() {
            bits[word] &= !bit;
        }
    }

    /// Forgets `block`'s bits (it was erased).
    pub(crate) fn clear_block(&mut self, block: u32) {
        self.blocks[block as usize] = None;
    }

    /// Whether any unit of `block` holds a pending TRIM (cheap: lets the common case skip the bit tests).
    #[inline]
    pub(crate) fn block_has_any(&self, block: u32) -> bool {
        self.blocks[block as usize].is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_per_unit_and_forgotten_with_the_block() {
        let mut pending = PendingTrims::new(3, 100);
        assert!(!pending.get(150) && !pending.block_has_any(1));
        pending.set(150);
        pending.set(199);
        assert!(pending.get(150) && pending.get(199) && !pending.get(151) && !pending.get(50));
        pending.clear(150);
        assert!(!pending.get(150) && pending.get(199));
        pending.clear_block(1);
        assert!(!pending.get(199) && !pending.block_has_any(1));
    }
}
