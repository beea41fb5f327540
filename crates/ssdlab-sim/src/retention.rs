//! Read retries of aged data: how many read-retry steps a page read needs, drawn per page.
//!
//! Charge leaks out of NAND cells over time, so the threshold voltages of old data drift away from the read
//! reference voltages; when the raw bit errors of a page exceed what ECC corrects, the controller reads the
//! page again with shifted references, one retry step at a time, until a decode succeeds. Each step costs a
//! page read, a transfer of the data to the controller and a decode attempt. How far a page has drifted
//! depends on its cells (page to page), on the block (wear, position on the die) and on the drive (its NAND
//! lot), and it grows with the data's age.
//!
//! The model: a page of data `a` months old needs `floor(m(a) x d x b x p)` steps, where `m` is the profile's
//! median-steps curve, and `d`, `b`, `p` are log-normal factors of median 1 drawn from the drive's seed for the
//! drive, for the block and for the page. The draws are stateless hashes of (seed, block) and (seed, page), so
//! a page needs the same number of steps every time it is read at one age (a slow chunk is slow again when read
//! again, as on a real drive), and a drive with another seed is a different but statistically equal drive.
//!
//! This module only draws and counts steps; what a step costs in time is the timing model's business
//! (`device.rs`). It never reads the wall clock or any global state.

use serde::{Deserialize, Serialize};
use ssdlab_core::rng::splitmix64;

/// A profile's read-retry behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadRetry {
    /// (age in months, median retry steps per page read), interpolated linearly in log(age) (threshold
    /// voltage drift is roughly linear in log time); no retries before the first point, flat after the last.
    pub median_steps: Vec<(f64, f64)>,
    /// Spread (standard deviation of the natural log) of the page, block and drive factors.
    pub page_sigma: f64,
    pub block_sigma: f64,
    pub drive_sigma: f64,
    /// One decode attempt by the controller's ECC engine, per retry step.
    pub decode_ns: u64,
}

/// The most steps one page read can take: the end of the retry table, where the controller's last resort
/// (soft decoding, parity across dies) takes over, priced here as the table's last step.
pub const MAX_STEPS: u32 = 400;

impl ReadRetry {
    /// The median number of steps a page of `months`-old data needs.
    pub fn median_steps(&self, months: f64) -> f64 {
        let pts = &self.median_steps;
        let Some(&(first_age, _)) = pts.first() else {
            return 0.0;
        };
        if months <= first_age {
            return 0.0;
        }
        for pair in pts.windows(2) {
            let ((a0, m0), (a1, m1)) = (pair[0], pair[1]);
            if months <= a1 {
                let f = (months.ln() - a0.ln()) / (a1.ln() - a0.ln());
                return m0 + f.clamp(0.0, 1.0) * (m1 - m0);
            }
        }
        pts[pts.len() - 1].1
    }

    /// The steps a page needs given its combined variation factor (drive x block x page).
    pub fn steps(&self, months: f64, variation: f64) -> u32 {
        let m = self.median_steps(months);
        if m <= 0.0 {
            return 0;
        }
        ((m * variation).floor() as u32).min(MAX_STEPS)
    }
}

/// The seeded variation of one drive: its own factor, and the per-block and per-page factors it draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variation {
    seed: u64,
    drive_factor: f64,
    block_sigma: f64,
    page_sigma: f64,
}

/// Stream numbers that keep the drive, block and page draws independent.
const DRIVE_STREAM: u64 = 0x6472_6976_6500_0001;
const BLOCK_STREAM: u64 = 0x626c_6f63_6b00_0002;
const PAGE_STREAM: u64 = 0x7061_6765_0000_0003;

impl Variation {
    pub fn new(retry: &ReadRetry, seed: u64) -> Self {
        Variation {
            seed,
            drive_factor: (retry.drive_sigma * standard_normal(seed, DRIVE_STREAM, 0)).exp(),
            block_sigma: retry.block_sigma,
            page_sigma: retry.page_sigma,
        }
    }

    /// The drive's own factor (1.0 is the median drive).
    pub fn drive_factor(&self) -> f64 {
        self.drive_factor
    }

    /// The combined factor of a page: the drive's, its block's and its own.
    pub fn factor(&self, block: u32, page: u32) -> f64 {
        let z = self.block_sigma * standard_normal(self.seed, BLOCK_STREAM, block as u64)
            + self.page_sigma * standard_normal(self.seed, PAGE_STREAM, page as u64);
        self.drive_factor * z.exp()
    }
}

/// A standard normal draw that is a pure function of (seed, stream, index): Box-Muller on two hashed uniforms.
pub fn standard_normal(seed: u64, stream: u64, index: u64) -> f64 {
    let h = splitmix64(seed ^ splitmix64(stream ^ splitmix64(index)));
    let uniform = |x: u64| ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u1 = uniform(h);
    let u2 = uniform(splitmix64(h));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> ReadRetry {
        ReadRetry {
            median_steps: vec![(0.5, 0.0), (1.0, 2.0), (8.0, 20.0)],
            page_sigma: 0.4,
            block_sigma: 0.3,
            drive_sigma: 0.1,
            decode_ns: 10_000,
        }
    }

    #[test]
    fn the_median_rises_in_log_age_and_is_flat_past_the_ends() {
        let c = curve();
        assert_eq!(c.median_steps(0.1), 0.0);
        assert_eq!(c.median_steps(0.5), 0.0);
        assert!((c.median_steps(1.0) - 2.0).abs() < 1e-12);
        // Half-way in log(age) between 1 and 8 months is sqrt(8).
        assert!((c.median_steps(8f64.sqrt()) - 11.0).abs() < 1e-9);
        assert_eq!(c.median_steps(30.0), 20.0);
        assert_eq!(c.steps(0.2, 5.0), 0, "fresh data never retries");
        assert_eq!(c.steps(8.0, 1e9), MAX_STEPS);
    }

    #[test]
    fn draws_are_standard_normal_and_repeatable() {
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|i| standard_normal(7, PAGE_STREAM, i)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
        let above = draws.iter().filter(|&&z| z > 1.645).count() as f64 / n as f64;
        assert!((above - 0.05).abs() < 0.003, "P(z > 1.645) = {above}");
        assert_eq!(standard_normal(7, PAGE_STREAM, 42), draws[42]);
    }

    #[test]
    fn two_seeds_are_two_drives_of_one_population() {
        let c = curve();
        let (a, b) = (Variation::new(&c, 1), Variation::new(&c, 2));
        assert_ne!(a.factor(3, 17), b.factor(3, 17));
        assert_eq!(a.factor(3, 17), Variation::new(&c, 1).factor(3, 17));
        // Over many pages the median factor is the drive's own.
        for v in [a, b] {
            let mut f: Vec<f64> = (0..20_001).map(|p| v.factor(p / 192, p)).collect();
            f.sort_by(f64::total_cmp);
            let median = f[f.len() / 2];
            assert!((median / v.drive_factor() - 1.0).abs() < 0.05, "{median}");
        }
    }
}
