//! Seeded randomness: a fast generator and a seeded permutation.
//!
//! All randomness in ssdlab comes from here and from an explicit seed, so any run, and any failing simulation,
//! can be replayed exactly. Nothing here reads entropy from the operating system.

/// SplitMix64: used to expand one seed into independent generator states and as a stateless mixer.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ (Blackman and Vigna): fast, 256 bits of state, good statistical quality.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut s = [0u64; 4];
        for word in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            *word = splitmix64(x);
        }
        Rng { s }
    }

    /// An independent stream derived from this seed and a stream number (e.g. one per pass or per job).
    pub fn stream(seed: u64, stream: u64) -> Self {
        Rng::new(splitmix64(
            seed ^ splitmix64(stream.wrapping_add(0xA076_1D64_78BD_642F)),
        ))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform integer in `0..n` (Lemire's multiply-shift; the bias is below 2^-64 * n, negligible here).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform float in [0, 1).
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

/// A seeded bijection on `0..n`, walked by a counter: each value appears exactly once per pass.
///
/// It is a keyed mix of invertible steps on `k` bits (multiply by an odd constant, xor with a right shift,
/// add a key), where `2^k` is the smallest power of two not below `n`; values at or above `n` are skipped
/// ("cycle walking"), so on average fewer than two steps are taken per output. It needs no memory, unlike a
/// bitmap random map, so it serves devices of any size.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    bits: u32,
    mask: u64,
    keys: [u64; 4],
    counter: u64,
    emitted: u64,
}

impl Permutation {
    /// A permutation of `0..n` (n > 0) chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        assert!(n > 0, "a permutation needs a non-empty domain");
        let bits = (64 - (n - 1).leading_zeros()).max(2);
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut rng = Rng::new(seed);
        let keys = [
            rng.next_u64() | 1,
            rng.next_u64(),
            rng.next_u64() | 1,
            rng.next_u64(),
        ];
        Permutation {
            n,
            bits,
            mask,
            keys,
            counter: 0,
            emitted: 0,
        }
    }

    /// The image of `x` under the bijection on `0..2^bits`.
    #[inline]
    fn mix(&self, mut x: u64) -> u64 {
        let half = self.bits / 2;
        x = x.wrapping_mul(self.keys[0]).wrapping_add(self.keys[1]) & self.mask;
        x ^= x >> half.max(1);
        x = x.wrapping_mul(self.keys[2]).wrapping_add(self.keys[3]) & self.mask;
        x ^= x >> (half + 1).min(self.bits - 1);
        x = x.wrapping_mul(self.keys[0] ^ self.keys[2] | 1) & self.mask;
        x ^= x >> half.max(1);
        x
    }

    /// The next value of this pass, or `None` when all `n` values have been produced.
    #[inline]
    pub fn next_value(&mut self) -> Option<u64> {
        if self.emitted == self.n {
            return None;
        }
        loop {
            let value = self.mix(self.counter);
            self.counter += 1;
            if value < self.n {
                self.emitted += 1;
                return Some(value);
            }
        }
    }

    /// The size of the domain.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..100).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[rng.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }

    #[test]
    fn permutation_emits_each_value_once() {
        for n in [1u64, 2, 3, 5, 64, 1000, 4097, 65_536, 100_003] {
            for seed in [0u64, 1, 42] {
                let mut perm = Permutation::new(n, seed);
                let mut seen = vec![false; n as usize];
                while let Some(v) = perm.next_value() {
                    assert!(!seen[v as usize], "n={n} seed={seed}: {v} twice");
                    seen[v as usize] = true;
                }
                assert!(
                    seen.iter().all(|&s| s),
                    "n={n} seed={seed}: a value was never produced"
                );
            }
        }
    }

    #[test]
    fn permutation_is_not_sequential() {
        let mut perm = Permutation::new(1 << 20, 3);
        let first: Vec<u64> = (0..64).map(|_| perm.next_value().unwrap()).collect();
        let ascending = first.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(ascending < 4, "too many sequential neighbours: {first:?}");
        let mean = first.iter().sum::<u64>() as f64 / 64.0;
        assert!(
            (mean / (1u64 << 20) as f64 - 0.5).abs() < 0.15,
            "mean {mean} far from the middle"
        );
    }
}
