//! Which blocks deserve a frame: a frequency sketch with aging (recency), and a detector of sequential
//! streams, which bypass the cache past a cutoff.
//!
//! Owns only counters; it never touches cached data and never sees a device.

/// Approximate access counts per block, halved periodically so that old popularity fades (TinyLFU's idea:
/// admit a block only if it has been seen recently more often than the block it would evict).
pub struct FrequencySketch {
    counters: Vec<u8>,
    mask: u64,
    increments: u64,
    /// After this many increments every counter is halved.
    sample: u64,
}

impl FrequencySketch {
    /// A sketch for a cache of `frames` frames: one counter per frame, rounded up to a power of two.
    pub fn new(frames: usize) -> Self {
        let len = frames.next_power_of_two().max(64);
        FrequencySketch {
            counters: vec![0; len],
            mask: len as u64 - 1,
            increments: 0,
            sample: 10 * len as u64,
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        self.counters.len() as u64
    }

    fn slot(&self, block: u64) -> usize {
        // A multiplicative hash spreads neighbouring blocks over the table.
        (block.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_right(29) & self.mask) as usize
    }

    /// Counts one access to `block`.
    pub fn record(&mut self, block: u64) {
        let slot = self.slot(block);
        self.counters[slot] = self.counters[slot].saturating_add(1).min(15);
        self.increments += 1;
        if self.increments >= self.sample {
            self.increments = 0;
            for c in &mut self.counters {
                *c /= 2;
            }
        }
    }

    pub fn estimate(&self, block: u64) -> u8 {
        self.counters[self.slot(block)]
    }
}

/// Recognises sequential streams: an access that starts where a recent one ended continues its stream.
pub struct Streams {
    /// (end offset, bytes so far, last use), a few streams at once (interleaved sequential readers).
    streams: [(u64, u64, u64); 8],
    clock: u64,
}

impl Default for Streams {
    fn default() -> Self {
        Streams {
            streams: [(u64::MAX, 0, 0); 8],
            clock: 0,
        }
    }
}

impl Streams {
    /// Records an access and returns the length of the sequential stream it belongs to, itself included.
    pub fn observe(&mut self, offset: u64, len: u64) -> u64 {
        self.clock += 1;
        let clock = self.clock;
        if let Some(s) = self.streams.iter_mut().find(|s| s.0 == offset) {
            *s = (offset + len, s.1 + len, clock);
            return s.1;
        }
        let oldest = self
            .streams
            .iter_mut()
            .min_by_key(|s| s.2)
            .expect("eight streams");
        *oldest = (offset + len, len, clock);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_seen_twice_counts_more_than_one_seen_once_and_counts_fade() {
        let mut sketch = FrequencySketch::new(1024);
        sketch.record(7);
        sketch.record(7);
        sketch.record(9);
        assert!(sketch.estimate(7) >= 2);
        assert!(sketch.estimate(9) >= 1);
        // Aging comes after ten accesses per counter, here all to one other block.
        let other = (1_000..).find(|&b| sketch.slot(b) != sketch.slot(7)).unwrap();
        for _ in 0..10 * 1024 {
            sketch.record(other);
        }
        assert_eq!(sketch.estimate(7), 1, "aging halves old counts");
    }

    #[test]
    fn interleaved_sequential_streams_are_each_recognised() {
        let mut streams = Streams::default();
        for i in 0..16u64 {
            let a = streams.observe(i * 4096, 4096);
            let b = streams.observe(1 << 30 | (i * 4096), 4096);
            assert_eq!(a, (i + 1) * 4096);
            assert_eq!(b, (i + 1) * 4096);
        }
        assert_eq!(streams.observe(12345 * 4096, 4096), 4096);
    }
}
