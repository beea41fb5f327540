//! Which blocks the host changed while a read miss of them was at the device: the rule that decides whether a
//! miss's data may be cached.
//!
//! A device may answer a read with the data it held at any moment between the read's submission and its
//! completion. So a block the host changed in that window (a write absorbed, sent around the cache or written
//! through, a discard), even one destaged and evicted before the read completed, may come back older than the
//! device now holds, and caching it as clean would serve it, and destage it around a later partial write, after
//! the newer data was acknowledged and flushed. The same holds for a block whose write to the device was still
//! in flight when the miss was sent: the device may serve the read before the write lands.
//!
//! [`MissWatch`] keeps, for every block under a miss in flight, the sequence number of the last change to it,
//! and hands each miss a ticket: a block may be admitted only if nothing changed it after the ticket was
//! issued. It keeps nothing for blocks no miss is reading, so its memory follows the misses in flight. It never
//! looks at cached data and never decides what is hot: the device layer does.

use std::collections::HashMap;
use std::ops::Range;

/// The change sequence number a miss was sent at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticket(u64);

#[derive(Debug, Clone, Copy)]
struct Watched {
    /// Misses in flight that cover the block.
    misses: u32,
    /// The sequence number of the last change to the block while it was watched (0: none).
    changed_at: u64,
}

#[derive(Debug, Default)]
pub struct MissWatch {
    /// Bumped by every host operation that changes blocks.
    seq: u64,
    watched: HashMap<u64, Watched>,
}

impl MissWatch {
    /// A miss of `blocks` is sent: they are watched until [`MissWatch::finish`].
    pub fn start(&mut self, blocks: Range<u64>) -> Ticket {
        for b in blocks {
            self.watched
                .entry(b)
                .or_insert(Watched {
                    misses: 0,
                    changed_at: 0,
                })
                .misses += 1;
        }
        Ticket(self.seq)
    }

    /// The host changes `blocks` (one operation): every miss in flight over them loses the right to cache them.
    pub fn changed(&mut self, blocks: Range<u64>) {
        self.seq += 1;
        if self.watched.is_empty() {
            return;
        }
        // A change as wide as a whole-device discard walks the few watched blocks, not its own range.
        if blocks.end.saturating_sub(blocks.start) > self.watched.len() as u64 {
            for (b, w) in self.watched.iter_mut() {
                if blocks.contains(b) {
                    w.changed_at = self.seq;
                }
            }
            return;
        }
        for b in blocks {
            if let Some(w) = self.watched.get_mut(&b) {
                w.changed_at = self.seq;
            }
        }
    }

    /// Whether the miss holding `ticket` may cache `block`: nothing changed it since the miss was sent.
    pub fn unchanged_since(&self, block: u64, ticket: Ticket) -> bool {
        let w = self
            .watched
            .get(&block)
            .expect("a block of a miss in flight is watched");
        w.changed_at <= ticket.0
    }

    /// The miss of `blocks` completed: they are no longer watched for it.
    pub fn finish(&mut self, blocks: Range<u64>) {
        for b in blocks {
            let w = self
                .watched
                .get_mut(&b)
                .expect("a block of a miss in flight is watched");
            assert!(w.misses > 0, "block {b} watched by no miss");
            w.misses -= 1;
            if w.misses == 0 {
                self.watched.remove(&b);
            }
        }
    }

    /// Blocks watched now (for the invariant check: zero when no miss is in flight).
    pub fn watched_blocks(&self) -> usize {
        self.watched.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_during_a_miss_forbids_only_the_blocks_it_touched_and_only_for_misses_sent_before_it() {
        let mut w = MissWatch::default();
        w.changed(0..100);
        let early = w.start(10..12);
        w.changed(11..12);
        let late = w.start(10..13);
        assert!(w.unchanged_since(10, early));
        assert!(
            !w.unchanged_since(11, early),
            "changed after the early miss was sent"
        );
        assert!(
            w.unchanged_since(11, late),
            "changed before the late miss was sent"
        );
        w.finish(10..12);
        assert!(w.unchanged_since(11, late));
        w.changed(12..13);
        assert!(!w.unchanged_since(12, late));
        w.finish(10..13);
        // A change wider than what is watched (a whole-device discard) is found by walking the watched blocks.
        let miss = w.start(5..7);
        w.changed(0..u64::MAX);
        assert!(!w.unchanged_since(5, miss) && !w.unchanged_since(6, miss));
        w.finish(5..7);
        assert_eq!(w.watched_blocks(), 0, "nothing is kept once no miss is in flight");
    }
}
