//! Offset generators: sequential, random with a random map (each block exactly once per pass) and random
//! without one. Each yields block numbers within the span and counts completed passes.

use ssdlab_core::rng::{Permutation, Rng, splitmix64};

use crate::workload::{Pattern, Workload};

/// Yields block indexes `0..blocks` in the workload's order.
#[derive(Debug, Clone)]
pub struct Access {
    blocks: u64,
    kind: Kind,
    /// Blocks handed out in the current pass.
    in_pass: u64,
    /// Passes completed.
    passes: u64,
    seed: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Sequential,
    RandomMap(Permutation),
    Uniform(Rng),
}

impl Access {
    pub fn new(workload: &Workload) -> Self {
        let blocks = workload.blocks();
        let seed = workload.seed;
        let kind = match workload.pattern {
            Pattern::Sequential => Kind::Sequential,
            Pattern::Random { random_map: true } => {
                Kind::RandomMap(Permutation::new(blocks, pass_seed(seed, 0)))
            }
            Pattern::Random { random_map: false } => Kind::Uniform(Rng::stream(seed, 0xACCE55)),
        };
        Access {
            blocks,
            kind,
            in_pass: 0,
            passes: 0,
            seed,
        }
    }

    /// The next block index.
    #[inline]
    pub fn next_block(&mut self) -> u64 {
        if self.in_pass == self.blocks {
            self.in_pass = 0;
            self.passes += 1;
            if let Kind::RandomMap(perm) = &mut self.kind {
                *perm = Permutation::new(self.blocks, pass_seed(self.seed, self.passes));
            }
        }
        let block = match &mut self.kind {
            Kind::Sequential => self.in_pass,
            Kind::RandomMap(perm) => perm.next_value().expect("a pass holds exactly `blocks` values"),
            Kind::Uniform(rng) => rng.below(self.blocks),
        };
        self.in_pass += 1;
        block
    }

    /// Passes completed, counting the current one once all its blocks have been handed out.
    pub fn passes_completed(&self) -> u64 {
        self.passes + u64::from(self.in_pass == self.blocks)
    }

    /// Blocks handed out so far, over all passes.
    pub fn issued(&self) -> u64 {
        self.passes * self.blocks + self.in_pass
    }
}

fn pass_seed(seed: u64, pass: u64) -> u64 {
    splitmix64(seed ^ splitmix64(pass ^ 0x005E_ED0F_9A55))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{RwMode, Span, StopAt};

    fn workload(pattern: Pattern, blocks: u64) -> Workload {
        Workload {
            rw: RwMode::RandWrite,
            mix_read_percent: 0,
            pattern,
            block_bytes: 4096,
            queue_depth: 1,
            span: Span {
                offset_bytes: 0,
                len_bytes: blocks * 4096,
            },
            stop: StopAt::default(),
            rate: None,
            seed: 9,
            verify: false,
        }
    }

    #[test]
    fn sequential_walks_in_order_and_wraps() {
        let mut a = Access::new(&workload(Pattern::Sequential, 4));
        let got: Vec<u64> = (0..6).map(|_| a.next_block()).collect();
        assert_eq!(got, [0, 1, 2, 3, 0, 1]);
        assert_eq!(a.passes_completed(), 1);
    }

    #[test]
    fn random_map_covers_each_pass_exactly_once() {
        let mut a = Access::new(&workload(Pattern::Random { random_map: true }, 1000));
        for pass in 0..3 {
            let mut seen = vec![0u8; 1000];
            for _ in 0..1000 {
                seen[a.next_block() as usize] += 1;
            }
            assert!(seen.iter().all(|&c| c == 1), "pass {pass}");
            assert_eq!(a.passes_completed(), pass + 1);
        }
    }

    #[test]
    fn passes_differ_in_order() {
        let mut a = Access::new(&workload(Pattern::Random { random_map: true }, 1000));
        let first: Vec<u64> = (0..1000).map(|_| a.next_block()).collect();
        let second: Vec<u64> = (0..1000).map(|_| a.next_block()).collect();
        assert_ne!(first, second);
    }

    #[test]
    fn uniform_without_map_repeats_blocks() {
        let mut a = Access::new(&workload(Pattern::Random { random_map: false }, 1000));
        let mut seen = vec![0u8; 1000];
        for _ in 0..1000 {
            seen[a.next_block() as usize] += 1;
        }
        assert!(
            seen.contains(&0),
            "a uniform draw of n from n almost surely misses some"
        );
    }
}
