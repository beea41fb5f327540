//! When each NAND page was programmed: the age its retention counts from.
//!
//! Pages of a block are programmed in order, and a block usually fills within minutes, so the times are kept as
//! runs per block: (first page of the run, time step), one run for every change of step. A block that filled
//! within one step costs one entry instead of one per page, which is what keeps the simulator's memory near its
//! forward map. This module owns only the times; it never decides what a page holds.

/// Page program times are kept in steps of 2^42 time units: about 73 minutes when the caller counts nanoseconds,
/// so 16 bits reach nine years. Retention ages are months; an hour's error does not show.
pub const PAGE_TIME_SHIFT: u32 = 42;

/// The program times of every page, as runs per block.
pub(crate) struct PageTimes {
    units_per_page: u32,
    units_per_block: u32,
    /// Per block, (first page in the block, step) for each run of pages programmed in the same step, in page
    /// order. Cleared when the block's first page is programmed again after its erase.
    runs: Vec<Vec<(u16, u16)>>,
}

impl PageTimes {
    /// Times for `blocks` blocks of `units_per_block` units, `units_per_page` to a page (0: keep none).
    pub(crate) fn new(blocks: usize, units_per_block: u32, units_per_page: u32) -> Self {
        assert!(
            units_per_page == 0 || (units_per_block / units_per_page) <= u16::MAX as u32 + 1,
            "a block of more than 65536 pages"
        );
        PageTimes {
            units_per_page,
            units_per_block,
            runs: if units_per_page == 0 {
                Vec::new()
            } else {
                vec![Vec::new(); blocks]
            },
        }
    }

    /// Records that the unit `physical` was programmed at `now`; only the first unit of a page counts (pages are
    /// programmed whole, in order).
    #[inline]
    pub(crate) fn stamp(&mut self, physical: u32, now: u64) {
        let per_page = self.units_per_page;
        if per_page == 0 || !physical.is_multiple_of(per_page) {
            return;
        }
        let block = (physical / self.units_per_block) as usize;
        let page = ((physical % self.units_per_block) / per_page) as u16;
        let step = (now >> PAGE_TIME_SHIFT).min(u16::MAX as u64) as u16;
        let runs = &mut self.runs[block];
        if page == 0 {
            runs.clear();
        }
        match runs.last() {
            Some(&(_, last)) if last == step => {}
            _ => runs.push((page, step)),
        }
    }

    /// When the page holding `physical` was programmed, in the caller's time units rounded down to a step (None
    /// without page times). A page not programmed since its block's erase reads as the block's latest run.
    pub(crate) fn programmed_at(&self, physical: u32) -> Option<u64> {
        let per_page = self.units_per_page;
        if per_page == 0 {
            return None;
        }
        let block = (physical / self.units_per_block) as usize;
        let page = ((physical % self.units_per_block) / per_page) as u16;
        let runs = &self.runs[block];
        let at = runs.partition_point(|&(first, _)| first <= page);
        let step = if at == 0 { 0 } else { runs[at - 1].1 };
        Some((step as u64) << PAGE_TIME_SHIFT)
    }

    /// Runs held over all blocks.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: u64 = 1 << PAGE_TIME_SHIFT;

    #[test]
    fn a_block_filled_in_one_step_keeps_one_run_and_every_page_its_time() {
        let mut times = PageTimes::new(2, 16, 4);
        for unit in 0..16 {
            times.stamp(unit, 5 * STEP + 7);
        }
        assert_eq!(times.entries(), 1);
        for unit in 0..16 {
            assert_eq!(times.programmed_at(unit), Some(5 * STEP));
        }
        // The second block, filled slowly: each page its own step, then erased and refilled.
        for (page, step) in [(0u32, 1u64), (1, 1), (2, 9), (3, 12)] {
            for unit in 0..4 {
                times.stamp(16 + page * 4 + unit, step * STEP);
            }
        }
        let read: Vec<u64> = (0..4)
            .map(|page| times.programmed_at(16 + page * 4 + 3).unwrap() / STEP)
            .collect();
        assert_eq!(read, [1, 1, 9, 12]);
        times.stamp(16, 20 * STEP);
        assert_eq!(times.programmed_at(17), Some(20 * STEP));
        assert_eq!(times.entries(), 2);
    }

    #[test]
    fn steps_saturate_and_no_times_without_pages() {
        let mut times = PageTimes::new(1, 8, 2);
        times.stamp(0, u64::MAX);
        assert_eq!(times.programmed_at(1), Some((u16::MAX as u64) << PAGE_TIME_SHIFT));
        let none = PageTimes::new(1, 8, 0);
        assert_eq!(none.programmed_at(3), None);
    }
}
