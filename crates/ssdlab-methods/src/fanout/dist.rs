//! Latency distributions and the fan-out arithmetic: a query that waits for every shard, more shards of the
//! same kind, hedged requests and replicas, and each shard's share of the query's tail.
//!
//! A distribution is a discrete one: values (nanoseconds) with probabilities, from a latency histogram (each
//! bucket at its reported value). Shards are independent, so the query's CDF is the product of theirs, exactly;
//! the only error is the histogram's (0.39% of a value). Pure functions: no I/O, no clock.

use ssdlab_core::histogram::SparseHistogram;
use ssdlab_core::schema::LatencyNs;

/// A discrete latency distribution: ascending distinct values and their probabilities (summing to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Dist {
    values_ns: Vec<u64>,
    /// P(X <= values_ns[k]).
    cdf: Vec<f64>,
}

impl Dist {
    /// The distribution of a histogram's values (None when it is empty).
    pub fn from_histogram(h: &SparseHistogram) -> Option<Self> {
        if h.count == 0 {
            return None;
        }
        let mut below = 0.0;
        let points: Vec<(u64, f64)> = h
            .cdf_points()
            .into_iter()
            .map(|(value, cdf)| {
                let p = cdf - below;
                below = cdf;
                (value, p)
            })
            .collect();
        Some(Self::from_points(&points))
    }

    /// A distribution from (value, probability) points in any order; probabilities are normalized.
    pub fn from_points(points: &[(u64, f64)]) -> Self {
        assert!(!points.is_empty(), "a distribution needs at least one value");
        let mut sorted = points.to_vec();
        sorted.sort_by_key(|p| p.0);
        let total: f64 = sorted.iter().map(|p| p.1).sum();
        assert!(total > 0.0, "a distribution needs positive probability");
        let mut values_ns = Vec::with_capacity(sorted.len());
        let mut cdf: Vec<f64> = Vec::with_capacity(sorted.len());
        let mut running = 0.0;
        for (value, p) in sorted {
            running += p / total;
            if values_ns.last() == Some(&value) {
                *cdf.last_mut().expect("a value was pushed") = running;
            } else {
                values_ns.push(value);
                cdf.push(running);
            }
        }
        *cdf.last_mut().expect("not empty") = 1.0;
        Dist { values_ns, cdf }
    }

    /// A distribution given by its CDF on a grid (ascending values; a non-decreasing CDF ending at 1).
    fn from_cdf(grid: &[u64], mut cdf_at: impl FnMut(u64) -> f64) -> Self {
        let mut values_ns = Vec::with_capacity(grid.len());
        let mut cdf: Vec<f64> = Vec::with_capacity(grid.len());
        let mut last = 0.0;
        for &x in grid {
            let f = cdf_at(x).clamp(last, 1.0);
            if f > last {
                values_ns.push(x);
                cdf.push(f);
                last = f;
            }
        }
        if let Some(end) = cdf.last_mut() {
            *end = 1.0;
        }
        Dist { values_ns, cdf }
    }

    /// A distribution given by its CDF at each point of an ascending grid (non-decreasing, ending at 1).
    pub fn on_grid(grid: &[u64], cdf: &[f64]) -> Self {
        assert_eq!(grid.len(), cdf.len(), "one probability per grid point");
        let mut k = 0;
        Self::from_cdf(grid, |_| {
            k += 1;
            cdf[k - 1]
        })
    }

    /// P(X <= x) at every point of an ascending grid, in one walk.
    pub fn cdf_on(&self, grid: &[u64]) -> Vec<f64> {
        let mut k = 0;
        grid.iter()
            .map(|&x| {
                while k < self.values_ns.len() && self.values_ns[k] <= x {
                    k += 1;
                }
                if k == 0 { 0.0 } else { self.cdf[k - 1] }
            })
            .collect()
    }

    /// P(X <= x).
    pub fn cdf(&self, x: u64) -> f64 {
        match self.values_ns.partition_point(|&v| v <= x) {
            0 => 0.0,
            k => self.cdf[k - 1],
        }
    }

    /// P(X < x).
    fn cdf_below(&self, x: u64) -> f64 {
        match self.values_ns.partition_point(|&v| v < x) {
            0 => 0.0,
            k => self.cdf[k - 1],
        }
    }

    /// The nearest-rank percentile: the smallest value whose CDF reaches q percent.
    pub fn percentile(&self, q: f64) -> u64 {
        // A hair under the exact level, so 0.99^69 products that round a bit low still count as reaching it.
        let level = (q / 100.0).clamp(0.0, 1.0) - 1e-12;
        let k = self.cdf.partition_point(|&f| f < level);
        self.values_ns[k.min(self.values_ns.len() - 1)]
    }

    pub fn mean_ns(&self) -> f64 {
        let mut previous = 0.0;
        let mut sum = 0.0;
        for (&x, &f) in self.values_ns.iter().zip(&self.cdf) {
            sum += x as f64 * (f - previous);
            previous = f;
        }
        sum
    }

    pub fn min_ns(&self) -> u64 {
        self.values_ns[0]
    }

    pub fn max_ns(&self) -> u64 {
        *self.values_ns.last().expect("never empty")
    }

    /// The columns every latency table shows.
    pub fn latency_ns(&self) -> LatencyNs {
        LatencyNs {
            min: self.min_ns(),
            mean: self.mean_ns(),
            max: self.max_ns(),
            p25: self.percentile(25.0),
            p50: self.percentile(50.0),
            p75: self.percentile(75.0),
            p95: self.percentile(95.0),
            p99: self.percentile(99.0),
            p999: self.percentile(99.9),
        }
    }

    /// The values and CDF, for charts.
    pub fn points(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.values_ns.iter().copied().zip(self.cdf.iter().copied())
    }

    /// The mixture of several distributions with equal weight: a shard on a drive picked at random among them.
    pub fn pooled(dists: &[&Dist]) -> Dist {
        let grid = union_grid(dists.iter().copied());
        let n = dists.len() as f64;
        Dist::from_cdf(&grid, |x| dists.iter().map(|d| d.cdf(x)).sum::<f64>() / n)
    }

    /// The latency of a query that waits for all of `shards`: the maximum, whose CDF is the product.
    pub fn max_of(shards: &[&Dist]) -> Dist {
        let grid = union_grid(shards.iter().copied());
        Dist::from_cdf(&grid, |x| shards.iter().map(|d| d.cdf(x)).product())
    }

    /// The maximum of `n` independent copies of this distribution: `n` shards like it.
    pub fn max_of_copies(&self, n: u32) -> Dist {
        Dist::from_cdf(&self.values_ns, |x| self.cdf(x).powi(n as i32))
    }

    /// A hedged request (Dean and Barroso, "The Tail at Scale"): the first copy goes to this shard; if it has
    /// not answered after `delay_ns`, a second copy goes to a replica whose latency follows `replica`; the
    /// first answer wins. Returns the hedged latency and the probability a second copy is sent (extra load).
    pub fn hedged(&self, replica: &Dist, delay_ns: u64) -> (Dist, f64) {
        let mut grid: Vec<u64> = self
            .values_ns
            .iter()
            .copied()
            .chain(replica.values_ns.iter().map(|&v| v.saturating_add(delay_ns)))
            .collect();
        grid.sort_unstable();
        grid.dedup();
        let hedged = Dist::from_cdf(&grid, |t| {
            let second = if t >= delay_ns {
                replica.cdf(t - delay_ns)
            } else {
                0.0
            };
            1.0 - (1.0 - self.cdf(t)) * (1.0 - second)
        });
        (hedged, 1.0 - self.cdf(delay_ns))
    }

    /// The fastest of this shard and `extra` replicas asked at once (each following `replica`).
    pub fn fastest_with_replicas(&self, replica: &Dist, extra: u32) -> Dist {
        let grid = union_grid([self, replica]);
        Dist::from_cdf(&grid, |t| {
            1.0 - (1.0 - self.cdf(t)) * (1.0 - replica.cdf(t)).powi(extra as i32)
        })
    }
}

/// Every value of every distribution, ascending and distinct.
pub fn union_grid<'a>(dists: impl IntoIterator<Item = &'a Dist>) -> Vec<u64> {
    let mut grid: Vec<u64> = dists
        .into_iter()
        .flat_map(|d| d.values_ns.iter().copied())
        .collect();
    grid.sort_unstable();
    grid.dedup();
    grid
}

/// Each shard's share of the queries at least as slow as `threshold_ns`: the probability that it is the
/// slowest of such a query. Where several shards tie on the slowest value, each counts it, and the shares are then scaled
/// to sum to 1 (ties shared in proportion).
pub fn tail_shares(shards: &[&Dist], threshold_ns: u64) -> Vec<f64> {
    let grid: Vec<u64> = union_grid(shards.iter().copied())
        .into_iter()
        .filter(|&x| x >= threshold_ns)
        .collect();
    let mut shares = vec![0.0; shards.len()];
    for &x in &grid {
        for (i, shard) in shards.iter().enumerate() {
            let here = shard.cdf(x) - shard.cdf_below(x);
            if here <= 0.0 {
                continue;
            }
            let others: f64 = shards
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, d)| d.cdf(x))
                .product();
            shares[i] += here * others;
        }
    }
    let total: f64 = shares.iter().sum();
    if total > 0.0 {
        for s in &mut shares {
            *s /= total;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::Histogram;

    const MS: u64 = 1_000_000;

    /// A shard that answers in 10 ms, and in 1 s one time in a hundred (its p99).
    fn one_in_a_hundred_slow() -> Dist {
        Dist::from_points(&[(10 * MS, 0.99), (1000 * MS, 0.01)])
    }

    #[test]
    fn a_hundred_shards_make_most_queries_wait_for_a_slow_one() {
        let shard = one_in_a_hundred_slow();
        let query = shard.max_of_copies(100);
        let slow = 1.0 - query.cdf(999 * MS);
        assert!((slow - (1.0 - 0.99f64.powi(100))).abs() < 1e-12, "{slow}");
        assert!((slow - 0.634).abs() < 0.001);
        // The same through the general product of 100 distributions.
        let many: Vec<&Dist> = std::iter::repeat_n(&shard, 100).collect();
        assert!((1.0 - Dist::max_of(&many).cdf(999 * MS) - slow).abs() < 1e-12);
    }

    #[test]
    fn the_shard_p99_becomes_the_query_median_at_69_shards() {
        let shard = one_in_a_hundred_slow();
        assert_eq!(shard.max_of_copies(68).percentile(50.0), 10 * MS);
        assert_eq!(shard.max_of_copies(69).percentile(50.0), 1000 * MS);
    }

    #[test]
    fn hedging_a_two_point_distribution() {
        // 10 ms nine times in ten, else 100 ms; hedged after 20 ms to a replica like it. By hand: 10 ms (0.9),
        // else the replica answers at 20 + 10 = 30 ms (0.1 x 0.9 = 0.09), else both take 100 ms (0.01); a
        // second copy goes out one time in ten.
        let shard = Dist::from_points(&[(10 * MS, 0.9), (100 * MS, 0.1)]);
        let (hedged, extra) = shard.hedged(&shard, 20 * MS);
        assert!((extra - 0.1).abs() < 1e-12);
        let p = |x: u64| hedged.cdf(x) - hedged.cdf_below(x);
        assert!((p(10 * MS) - 0.9).abs() < 1e-12);
        assert!((p(30 * MS) - 0.09).abs() < 1e-12);
        assert!((p(100 * MS) - 0.01).abs() < 1e-12);
        assert!((hedged.mean_ns() - (0.9 * 10.0 + 0.09 * 30.0 + 0.01 * 100.0) * MS as f64).abs() < 1.0);
        // Asking a replica at once instead: the slower only when both are slow.
        let both = shard.fastest_with_replicas(&shard, 1);
        assert!((both.cdf(10 * MS) - 0.99).abs() < 1e-12);
    }

    #[test]
    fn the_straggler_takes_the_tail() {
        let fast = Dist::from_points(&[(MS, 0.99), (5 * MS, 0.01)]);
        let slow = Dist::from_points(&[(MS, 0.5), (20 * MS, 0.5)]);
        let shards = [&fast, &fast, &slow, &fast];
        let query = Dist::max_of(&shards);
        let shares = tail_shares(&shards, query.percentile(95.0));
        assert!(shares[2] > 0.95, "{shares:?}");
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // Equal drives share equally.
        let even = tail_shares(&[&slow, &slow], MS);
        assert!((even[0] - 0.5).abs() < 1e-9, "{even:?}");
    }

    #[test]
    fn a_histogram_becomes_its_distribution() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let d = Dist::from_histogram(&h.to_sparse()).unwrap();
        let exact = |q: f64| (q * 10.0) as u64 * 1000;
        for q in [50.0, 95.0, 99.0] {
            let got = d.percentile(q);
            assert!(
                (got as f64 / exact(q) as f64 - 1.0).abs() <= ssdlab_core::histogram::RELATIVE_ERROR,
                "p{q}: {got} vs {}",
                exact(q)
            );
        }
        assert_eq!(d.max_ns(), 1_000_000);
        assert!((d.mean_ns() / 500_500.0 - 1.0).abs() < 0.004);
        let pooled = Dist::pooled(&[&d, &Dist::from_points(&[(5_000_000, 1.0)])]);
        assert!((pooled.cdf(1_000_000) - 0.5).abs() < 1e-12);
    }
}
