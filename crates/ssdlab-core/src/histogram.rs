//! The log-linear latency histogram.
//!
//! Values (nanoseconds) below 256 are counted exactly; above that every power of two is split into 128 equal
//! buckets, so a bucket is never wider than 1/128 of its lower bound. Percentiles report the bucket's midpoint
//! clamped to the exact minimum and maximum, so a reported percentile is within [`RELATIVE_ERROR`] (0.39%) of
//! the exact nearest-rank percentile of the recorded values. Histograms merge exactly by adding counts, which
//! is what lets per-second histograms give exact-to-resolution percentiles of any window.
//!
//! [`Histogram`] is dense (7424 counters, 58 KiB) and meant for the hot path: recording is an index
//! computation and one increment. [`SparseHistogram`] is the compact form kept per second and serialized.

use serde::{Deserialize, Serialize};

/// Sub-bucket bits: 2^7 = 128 buckets per power of two.
const SUB_BITS: u32 = 7;
const SUB_COUNT: u64 = 1 << SUB_BITS;
/// Buckets needed to cover every u64 value.
pub const BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB_COUNT as usize) + SUB_COUNT as usize;
/// The largest relative distance between a reported percentile and the exact one: half a bucket width.
pub const RELATIVE_ERROR: f64 = 1.0 / (2 * SUB_COUNT) as f64;

/// The bucket index of a value.
#[inline(always)]
pub fn bucket_of(value: u64) -> usize {
    let msb = 63 - (value | 1).leading_zeros();
    let shift = msb.saturating_sub(SUB_BITS);
    ((shift as u64) * SUB_COUNT + (value >> shift)) as usize
}

/// The smallest value and the width of a bucket.
#[inline]
pub fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < 2 * SUB_COUNT {
        (index, 1)
    } else {
        let shift = (index >> SUB_BITS) - 1;
        let mantissa = index - shift * SUB_COUNT;
        (mantissa << shift, 1 << shift)
    }
}

/// The value reported for a bucket: its midpoint (exact for unit-width buckets).
#[inline]
fn bucket_value(index: usize) -> u64 {
    let (low, width) = bucket_range(index);
    low + (width - 1) / 2
}

/// A dense histogram for recording.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("max", &self.max())
            .finish()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        self.counts[bucket_of(value)] += 1;
        self.count += 1;
        self.sum += value as u128;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The exact smallest recorded value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min }
    }

    /// The exact largest recorded value.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The exact mean of the recorded values.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The nearest-rank percentile `q` in [0, 100], to within [`RELATIVE_ERROR`].
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = rank_for(q, self.count);
        let mut seen = 0u64;
        for (index, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_value(index).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// How many recorded values are above `value`, to the bucket resolution: a bucket counts as above when its
    /// lower edge is.
    pub fn count_above(&self, value: u64) -> u64 {
        if self.count == 0 || value >= self.max {
            return 0;
        }
        self.counts
            .iter()
            .enumerate()
            .filter(|(index, _)| bucket_range(*index).0 > value)
            .map(|(_, &c)| c)
            .sum()
    }

    /// How many recorded values are at least `value`, to the bucket resolution: the bucket holding `value`
    /// counts whole (a tail that piles up in one bucket, as reads at a firmware's recovery ceiling do, is in it).
    pub fn count_at_or_above(&self, value: u64) -> u64 {
        let first = bucket_of(value);
        // The bucket holding `value` counts whole even when `value` lies above this histogram's largest value
        // in that bucket (another drive's midpoint, say).
        if self.count == 0 || first > bucket_of(self.max) {
            return 0;
        }
        self.counts[first..].iter().sum()
    }

    /// Adds every count of `other` into this histogram.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.merge_moments(other.count, other.sum, other.min, other.max);
    }

    /// Adds a sparse histogram into this one.
    pub fn merge_sparse(&mut self, other: &SparseHistogram) {
        for &(index, c) in &other.buckets {
            self.counts[index as usize] += c;
        }
        self.merge_moments(other.count, other.sum_ns, other.min_ns, other.max_ns);
    }

    fn merge_moments(&mut self, count: u64, sum: u128, min: u64, max: u64) {
        if count == 0 {
            return;
        }
        self.count += count;
        self.sum += sum;
        self.min = self.min.min(min);
        self.max = self.max.max(max);
    }

    /// Empties the histogram, keeping its allocation.
    pub fn clear(&mut self) {
        if self.count != 0 {
            self.counts.fill(0);
        }
        self.count = 0;
        self.sum = 0;
        self.min = u64::MAX;
        self.max = 0;
    }

    /// The compact form: only non-empty buckets.
    pub fn to_sparse(&self) -> SparseHistogram {
        let buckets = if self.count == 0 {
            Vec::new()
        } else {
            self.counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c != 0)
                .map(|(i, c)| (i as u32, *c))
                .collect()
        };
        SparseHistogram {
            count: self.count,
            sum_ns: self.sum,
            min_ns: self.min(),
            max_ns: self.max,
            buckets,
        }
    }
}

/// The 1-based rank of percentile `q` among `count` values (nearest-rank definition: ceil(q/100 x count)).
/// Computed in integer parts per billion so that e.g. p99.9 of 1000 values is rank 999, not 1000 as floating
/// point rounding would make it.
fn rank_for(q: f64, count: u64) -> u64 {
    let ppb = (q.clamp(0.0, 100.0) * 1e7).round() as u128; // q percent in parts per billion
    let rank = (ppb * count as u128).div_ceil(1_000_000_000);
    (rank as u64).clamp(1, count)
}

/// A histogram holding only its non-empty buckets, in ascending bucket order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SparseHistogram {
    pub count: u64,
    pub sum_ns: u128,
    pub min_ns: u64,
    pub max_ns: u64,
    /// (bucket index, count) pairs; bucket `i` covers [`bucket_range`]`(i)`.
    pub buckets: Vec<(u32, u64)>,
}

impl SparseHistogram {
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = rank_for(q, self.count);
        let mut seen = 0u64;
        for &(index, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                return bucket_value(index as usize).clamp(self.min_ns, self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The empirical CDF: each non-empty bucket at its reported value (clamped to the exact extremes, as
    /// percentiles are), with the fraction of values at or below it. Ascending; empty when the histogram is.
    pub fn cdf_points(&self) -> Vec<(u64, f64)> {
        let mut seen = 0u64;
        self.buckets
            .iter()
            .map(|&(index, count)| {
                seen += count;
                (
                    bucket_value(index as usize).clamp(self.min_ns, self.max_ns),
                    seen as f64 / self.count as f64,
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_above_counts_whole_buckets_past_the_value() {
        let mut h = Histogram::new();
        for v in [10, 500_000, 2_000_000, 9_000_000] {
            h.record(v);
        }
        assert_eq!(h.count_above(1_000_000), 2);
        assert_eq!(h.count_above(9_000_000), 0);
        assert_eq!(h.count_above(0), 4);
        assert_eq!(Histogram::new().count_above(0), 0);
        // At or above counts the bucket holding the value: a tail piled at one ceiling is in it.
        assert_eq!(h.count_at_or_above(9_000_000), 1);
        assert_eq!(h.count_at_or_above(2_000_000), 2);
        assert_eq!(h.count_at_or_above(9_000_001), 1, "the same bucket as 9,000,000");
        assert_eq!(h.count_at_or_above(10_000_000), 0);
        assert_eq!(Histogram::new().count_at_or_above(0), 0);
    }
    use proptest::prelude::*;

    fn exact_percentile(sorted: &[u64], q: f64) -> u64 {
        sorted[(rank_for(q, sorted.len() as u64) - 1) as usize]
    }

    #[test]
    fn buckets_tile_the_value_range() {
        let mut expected_low = 0u64;
        for index in 0..BUCKETS {
            let (low, width) = bucket_range(index);
            assert_eq!(low, expected_low, "bucket {index}");
            assert_eq!(bucket_of(low), index);
            assert_eq!(bucket_of(low + (width - 1)), index);
            assert!(index < 2 * SUB_COUNT as usize || width as f64 <= low as f64 / SUB_COUNT as f64);
            expected_low = low.wrapping_add(width);
        }
        assert_eq!(expected_low, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn ranks_are_exact_at_round_counts() {
        assert_eq!(rank_for(99.9, 1000), 999);
        assert_eq!(rank_for(99.0, 100), 99);
        assert_eq!(rank_for(50.0, 3), 2);
        assert_eq!(rank_for(0.0, 10), 1);
        assert_eq!(rank_for(100.0, 10), 10);
        let mut h = Histogram::new();
        for _ in 0..999 {
            h.record(100);
        }
        h.record(200);
        assert_eq!(
            h.percentile(99.9),
            100,
            "p99.9 of 1000 values is the 999th, not the maximum"
        );
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 0..256 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 127);
        assert_eq!(h.percentile(100.0), 255);
        assert_eq!(h.percentile(0.0), 0);
        assert_eq!(h.mean(), 127.5);
    }

    fn samples() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(
            prop_oneof![
                0u64..1_000,
                1_000u64..10_000_000,
                10_000_000u64..100_000_000_000,
                any::<u64>()
            ],
            1..2_000,
        )
    }

    proptest! {
        #[test]
        fn percentiles_are_within_the_stated_error(values in samples(), q in 0.0f64..=100.0) {
            let mut h = Histogram::new();
            for &v in &values { h.record(v); }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let exact = exact_percentile(&sorted, q) as f64;
            let reported = h.percentile(q) as f64;
            prop_assert!((reported - exact).abs() <= exact * RELATIVE_ERROR,
                "q={} exact={} reported={}", q, exact, reported);
            prop_assert_eq!(h.min(), sorted[0]);
            prop_assert_eq!(h.max(), *sorted.last().unwrap());
            let sparse = h.to_sparse();
            prop_assert_eq!(sparse.percentile(q), h.percentile(q));
        }

        #[test]
        fn merging_equals_recording_everything(a in samples(), b in samples()) {
            let (mut ha, mut hb, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
            for &v in &a { ha.record(v); all.record(v); }
            for &v in &b { hb.record(v); all.record(v); }
            let mut sparse_merged = Histogram::new();
            sparse_merged.merge_sparse(&ha.to_sparse());
            sparse_merged.merge_sparse(&hb.to_sparse());
            ha.merge(&hb);
            prop_assert_eq!(ha.to_sparse(), all.to_sparse());
            prop_assert_eq!(sparse_merged.to_sparse(), all.to_sparse());
        }
    }
}
