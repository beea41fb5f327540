//! Read retries of aged data: how many read-retry steps a page read needs, drawn per page.
//!
//! Charge leaks out of NAND cells over time, so the threshold voltages of old data drift away from the read
//! reference voltages; when the raw bit errors of a page exceed what ECC corrects, the controller reads the
//! page again with shifted references, one retry step at a time, until a decode succeeds. Each step costs a
//! page read, a transfer of the data to the controller and a decode attempt. How far a page has drifted
//! depends on its cells (page to page), on the block (wear, position on the die) and on the drive (its NAND
//! lot), and it grows with the data's age.
//!
//! The model: a page of data `a` months old needs `floor(m(a) x d x b x exp(s(a) z))` steps, where `m` is the
//! profile's median-steps curve, `d` and `b` are log-normal factors of median 1 drawn from the drive's seed for
//! the drive and for the block, `z` is the page's standard normal draw and `s(a)` the page spread, which widens
//! with age (a weak page stays weak and grows weaker faster). The draws are stateless hashes of (seed, block) and (seed, page), so
//! a page needs the same number of steps every time it is read at one age (a slow chunk is slow again when read
//! again, as on a real drive), and a drive with another seed is a different but statistically equal drive.
//!
//! A page that needs more steps than the retry table holds takes the whole table and then the controller's
//! last resort (soft decoding, parity): rare on young data, and the source of the very slow reads whose chance
//! rises with age.
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
    /// (age in months, spread of the page factor), interpolated like the median: the standard deviation of the
    /// natural log of a page's factor. It widens with age, because weak cells keep leaking faster than strong
    /// ones, so old data's slowest reads grow more than its typical ones (seed 000: the median search time
    /// stays flat from 4 to 7 months while the quartiles move apart and bulk reads slow by another 20%).
    pub page_sigma: Vec<(f64, f64)>,
    /// Spread of the block and drive factors, the same at every age.
    pub block_sigma: f64,
    pub drive_sigma: f64,
    /// One decode attempt by the controller's ECC engine, per retry step.
    pub decode_ns: u64,
    /// The read-retry table's length. A page that needs more steps has run out of shifted references: the
    /// controller's last resort (soft-decision decoding, rebuilding from parity across dies) takes over.
    pub table_steps: u32,
    /// What that last resort costs on top of the whole table.
    pub recovery_ns: u64,
}

/// How a page read went: retry steps, and whether the table ran out and recovery was needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    pub steps: u32,
    pub recovery: bool,
}

impl ReadRetry {
    /// The median number of steps a page of `months`-old data needs: none before the curve's first age.
    pub fn median_steps(&self, months: f64) -> f64 {
        match self.median_steps.first() {
            Some(&(first_age, _)) if months > first_age => log_age_interpolate(&self.median_steps, months),
            _ => 0.0,
        }
    }

    /// The spread of the page factor for `months`-old data.
    pub fn page_sigma(&self, months: f64) -> f64 {
        log_age_interpolate(&self.page_sigma, months)
    }

    /// The steps a page needs, given its draws: the drive's and its block's factor together, and the page's
    /// standard normal draw, which the age's spread scales. Past the table's end it takes the whole table and
    /// recovery.
    pub fn retries(&self, months: f64, drive_and_block: f64, page_z: f64) -> Retries {
        let m = self.median_steps(months);
        if m <= 0.0 {
            return Retries {
                steps: 0,
                recovery: false,
            };
        }
        let needed = m * drive_and_block * (self.page_sigma(months) * page_z).exp();
        if needed >= self.table_steps as f64 + 1.0 {
            Retries {
                steps: self.table_steps,
                recovery: true,
            }
        } else {
            Retries {
                steps: needed.floor() as u32,
                recovery: false,
            }
        }
    }
}

/// Linear interpolation in log(age) between (age, value) points, flat beyond the ends (0 without points).
fn log_age_interpolate(points: &[(f64, f64)], months: f64) -> f64 {
    let Some(&(first_age, first)) = points.first() else {
        return 0.0;
    };
    if months <= first_age {
        return first;
    }
    for pair in points.windows(2) {
        let ((a0, v0), (a1, v1)) = (pair[0], pair[1]);
        if months <= a1 {
            let f = (months.ln() - a0.ln()) / (a1.ln() - a0.ln());
            return v0 + f.clamp(0.0, 1.0) * (v1 - v0);
        }
    }
    points[points.len() - 1].1
}

/// The seeded variation of one drive: its own factor, and the per-block and per-page factors it draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variation {
    seed: u64,
    drive_factor: f64,
    block_sigma: f64,
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
        }
    }

    /// The drive's own factor (1.0 is the median drive).
    pub fn drive_factor(&self) -> f64 {
        self.drive_factor
    }

    /// The factor of a block on this drive: the drive's times the block's.
    pub fn block_factor(&self, block: u32) -> f64 {
        self.drive_factor * (self.block_sigma * standard_normal(self.seed, BLOCK_STREAM, block as u64)).exp()
    }

    /// A page's standard normal draw: where it sits among the drive's pages, whatever the age.
    pub fn page_z(&self, page: u32) -> f64 {
        standard_normal(self.seed, PAGE_STREAM, page as u64)
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
            page_sigma: vec![(1.0, 0.4), (8.0, 0.8)],
            block_sigma: 0.3,
            drive_sigma: 0.1,
            decode_ns: 10_000,
            table_steps: 200,
            recovery_ns: 5_000_000,
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
        assert!((c.page_sigma(8f64.sqrt()) - 0.6).abs() < 1e-9);
        assert_eq!(c.page_sigma(0.2), 0.4);
        assert_eq!(c.retries(0.2, 5.0, 3.0).steps, 0, "fresh data never retries");
        let exhausted = c.retries(8.0, 1e9, 0.0);
        assert_eq!((exhausted.steps, exhausted.recovery), (200, true));
        assert!(!c.retries(8.0, 1.0, 0.0).recovery);
        // A weak page (z = 2) falls further behind the median with age.
        let lead = |months: f64| c.retries(months, 1.0, 2.0).steps as f64 / c.median_steps(months);
        assert!(lead(8.0) > 1.5 * lead(1.5), "{} vs {}", lead(8.0), lead(1.5));
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
        assert_ne!(a.block_factor(3), b.block_factor(3));
        assert_ne!(a.page_z(17), b.page_z(17));
        assert_eq!(a.block_factor(3), Variation::new(&c, 1).block_factor(3));
        // Over many blocks the median factor is the drive's own.
        for v in [a, b] {
            let mut f: Vec<f64> = (0..20_001).map(|block| v.block_factor(block)).collect();
            f.sort_by(f64::total_cmp);
            let median = f[f.len() / 2];
            assert!((median / v.drive_factor() - 1.0).abs() < 0.02, "{median}");
        }
    }
}
