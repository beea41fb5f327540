//! Who makes the query slow, at every percentile: for each drive, and for each cohort of drives by data age, its
//! share of the query's tail beyond p50, p95, p99 and p99.9, whether that share is beyond chance, and what
//! reading it like the other drives buys there and in the mean, against the percentile's noise.
//!
//! "Reading like the other drives" replaces each member's distribution with the pooled distribution of the
//! drives outside the group (DESIGN's rule for fan-out what-ifs). A group is named at a percentile when it takes
//! at least twice its fair share of that tail (for a cohort of over a third of the drives, where twice cannot
//! be reached: half of the rest beyond its fair share), when that many slow reads are beyond chance
//! (binomial, 1% over every test made), and when its fix brings the percentile under its noise floor. A drive
//! that only the p95 shows (the others' rare hiccups hold the p99) is named at the p95.
//!
//! Pure arithmetic over distributions; no I/O.

use ssdlab_core::Histogram;
use ssdlab_core::schema::fanout::{Attribution, PercentileAttribution};

use super::analysis::{STRAGGLER_SIGNIFICANCE, binomial_upper_tail};
use super::dist::{Dist, union_grid};

/// The percentiles a group is judged at, those the reads support.
pub const PERCENTILES: [f64; 4] = [50.0, 95.0, 99.0, 99.9];

/// A cohort's fix must buy at least this part of the best named cohort's gain at the same percentile to be the
/// one named: the fewest drives that give nearly all of what rewriting old data can give.
pub const COHORT_GAIN_KEPT: f64 = 0.9;

/// What every group's judgement shares: the drives' CDFs on one grid (every value any drive read), the query,
/// and per percentile the query's value, each drive's share of its tail and reads beyond it, and its noise floor.
/// On the grid, a group's what-if costs one pass over drives and grid points, so a hundred drives and their
/// cohorts take a fraction of a second.
pub struct Fleet<'a> {
    names: &'a [String],
    query: &'a Dist,
    grid: Vec<u64>,
    /// P(read <= grid[g]) per drive.
    cdfs: Vec<Vec<f64>>,
    /// Per grid point, over every drive: the product of the CDFs that are not zero, how many are zero, and their
    /// sum. A group's what-if takes its members out of these instead of multiplying every other drive's again,
    /// so judging every drive of a thousand costs a pass over the grid each, not over the grid and the fleet.
    all: Vec<GridTotals>,
    counts: Vec<u64>,
    levels: Vec<Level>,
    /// The tests made: groups times percentiles (the Bonferroni divisor).
    tests: usize,
}

/// Every drive's CDF at one grid point, gathered (see [`Fleet::fixed`]).
#[derive(Debug, Clone, Copy)]
struct GridTotals {
    nonzero_product: f64,
    zeros: u32,
    sum: f64,
}

/// One percentile of the query, seen from every drive.
struct Level {
    percentile: f64,
    query_ns: u64,
    shares: Vec<f64>,
    tail_reads: Vec<u64>,
    /// The fraction of all reads at or beyond the query's value: what chance gives every drive alike.
    pooled_tail_ratio: f64,
    noise_floor_ns: u64,
}

/// A group of drives by index, with its name.
pub struct Group {
    pub name: String,
    pub members: Vec<usize>,
}

impl<'a> Fleet<'a> {
    /// The fleet's levels at the `supported` percentiles (of [`PERCENTILES`]); `groups` is how many groups will be
    /// judged (drives and cohorts), for the significance level.
    pub fn new(
        names: &'a [String],
        dists: &[Dist],
        histograms: &[&Histogram],
        query: &'a Dist,
        supported: &[f64],
        groups: usize,
    ) -> Self {
        let grid = union_grid(dists);
        let cdfs: Vec<Vec<f64>> = dists.iter().map(|d| d.cdf_on(&grid)).collect();
        let all: Vec<GridTotals> = (0..grid.len())
            .map(|g| {
                let mut totals = GridTotals {
                    nonzero_product: 1.0,
                    zeros: 0,
                    sum: 0.0,
                };
                for cdf in &cdfs {
                    if cdf[g] == 0.0 {
                        totals.zeros += 1;
                    } else {
                        totals.nonzero_product *= cdf[g];
                    }
                    totals.sum += cdf[g];
                }
                totals
            })
            .collect();
        let counts: Vec<u64> = histograms.iter().map(|h| h.count()).collect();
        let total_reads = counts.iter().sum::<u64>().max(1);
        let levels: Vec<Level> = supported
            .iter()
            .map(|&percentile| {
                let query_ns = query.percentile(percentile);
                let tail_reads: Vec<u64> = histograms.iter().map(|h| h.count_at_or_above(query_ns)).collect();
                let tail_total: u64 = tail_reads.iter().sum();
                Level {
                    percentile,
                    query_ns,
                    shares: shares_beyond(&grid, &cdfs, query_ns),
                    pooled_tail_ratio: tail_total as f64 / total_reads as f64,
                    noise_floor_ns: noise_floor_ns(query, percentile, tail_total),
                    tail_reads,
                }
            })
            .collect();
        Fleet {
            names,
            query,
            grid,
            cdfs,
            all,
            counts,
            tests: (groups * levels.len()).max(1),
            levels,
        }
    }

    /// The query with the `members` reading like the other drives: each member's CDF replaced by the mean of the
    /// others' (their reads pooled), the query's CDF the product. None when no drive is left to read like.
    pub fn fixed(&self, members: &[usize]) -> Option<Dist> {
        let n = self.cdfs.len();
        let m = members.len();
        if m == 0 || m >= n {
            return None;
        }
        let mut is_member = vec![false; n];
        for &i in members {
            is_member[i] = true;
        }
        // The others multiplied and summed directly: the way for a group of more than half the fleet (taking
        // most of the fleet out of its totals would lose precision, which the power below multiplies), and where
        // the members' product underflows.
        let others_directly = |g: usize| -> (f64, f64) {
            (0..n)
                .filter(|&i| !is_member[i])
                .fold((1.0, 0.0), |(product, sum), i| {
                    (product * self.cdfs[i][g], sum + self.cdfs[i][g])
                })
        };
        let cdf: Vec<f64> = (0..self.grid.len())
            .map(|g| {
                let (others_product, others_sum) = if 2 * m > n {
                    others_directly(g)
                } else {
                    let all = self.all[g];
                    let (mut members_product, mut members_zeros, mut members_sum) = (1.0, 0u32, 0.0);
                    for &i in members {
                        let p = self.cdfs[i][g];
                        if p == 0.0 {
                            members_zeros += 1;
                        } else {
                            members_product *= p;
                        }
                        members_sum += p;
                    }
                    // The others' product is the whole fleet's without the members'. It underflows to zero only
                    // where the query's CDF is far below any percentile judged.
                    if all.zeros > members_zeros {
                        (0.0, (all.sum - members_sum).max(0.0))
                    } else if members_product > f64::MIN_POSITIVE {
                        (
                            all.nonzero_product / members_product,
                            (all.sum - members_sum).max(0.0),
                        )
                    } else {
                        others_directly(g)
                    }
                };
                others_product * (others_sum / (n - m) as f64).powi(m as i32)
            })
            .collect();
        Some(Dist::on_grid(&self.grid, &cdf))
    }

    /// The group's part in the query, or None when it holds every drive (there are no others to read like).
    pub fn judge(&self, group: &Group) -> Option<Attribution> {
        let fixed = self.fixed(&group.members)?;
        let fair = group.members.len() as f64 / self.cdfs.len() as f64;
        let enough_share = (2.0 * fair).min(f64::midpoint(1.0, fair));
        let members_reads: u64 = group.members.iter().map(|&i| self.counts[i]).sum();
        let percentiles = self
            .levels
            .iter()
            .map(|level| {
                let share: f64 = group.members.iter().map(|&i| level.shares[i]).sum();
                let tail_reads: u64 = group.members.iter().map(|&i| level.tail_reads[i]).sum();
                let p_value = binomial_upper_tail(tail_reads, members_reads, level.pooled_tail_ratio);
                let fixed_ns = fixed.percentile(level.percentile);
                PercentileAttribution {
                    percentile: level.percentile,
                    share_ratio: share,
                    tail_reads,
                    tail_reads_expected: members_reads as f64 * level.pooled_tail_ratio,
                    tail_p_value: p_value,
                    query_ns: level.query_ns,
                    fixed_ns,
                    noise_floor_ns: level.noise_floor_ns,
                    named: share >= enough_share
                        && p_value < STRAGGLER_SIGNIFICANCE / self.tests as f64
                        && fixed_ns < level.noise_floor_ns,
                }
            })
            .collect();
        Some(Attribution {
            name: group.name.clone(),
            members: group.members.iter().map(|&i| self.names[i].clone()).collect(),
            fair_share_ratio: fair,
            percentiles,
            query_mean_ns: self.query.mean_ns(),
            fixed_mean_ns: fixed.mean_ns(),
        })
    }
}

/// Each drive's share of the queries at or beyond `threshold_ns`: the chance it is the slowest shard of such a
/// query (as [`super::dist::tail_shares`], on the grid: drives tied on the slowest value each count it, and the
/// shares are scaled to sum to 1).
fn shares_beyond(grid: &[u64], cdfs: &[Vec<f64>], threshold_ns: u64) -> Vec<f64> {
    let n = cdfs.len();
    let mut shares = vec![0.0; n];
    let mut before = vec![1.0; n + 1];
    let mut after = vec![1.0; n + 1];
    for g in grid.partition_point(|&x| x < threshold_ns)..grid.len() {
        // The product of every other drive's CDF here, from prefix and suffix products.
        for i in 0..n {
            before[i + 1] = before[i] * cdfs[i][g];
        }
        for i in (0..n).rev() {
            after[i] = after[i + 1] * cdfs[i][g];
        }
        for i in 0..n {
            let here = cdfs[i][g] - if g == 0 { 0.0 } else { cdfs[i][g - 1] };
            if here > 0.0 {
                shares[i] += here * before[i] * after[i + 1];
            }
        }
    }
    let total: f64 = shares.iter().sum();
    if total > 0.0 {
        shares.iter_mut().for_each(|s| *s /= total);
    }
    shares
}

/// The value of the query's `percentile` a fix must come under to count: with K reads beyond it (all drives),
/// the tail's probability is known to about 2/sqrt(K) of itself, so the percentile could as well sit at
/// p - (100 - p) x 2/sqrt(K); and the histograms place a value only to within their relative error (twice it
/// between two readings).
pub fn noise_floor_ns(query: &Dist, percentile: f64, tail_reads: u64) -> u64 {
    let spread = (100.0 - percentile) * 2.0 / (tail_reads.max(1) as f64).sqrt();
    let sampling_floor_ns = query.percentile((percentile - spread).max(0.0));
    let resolution_floor_ns =
        (query.percentile(percentile) as f64 * (1.0 - 2.0 * ssdlab_core::histogram::RELATIVE_ERROR)) as u64;
    sampling_floor_ns.min(resolution_floor_ns)
}

/// The cohorts by data age: for every age that parts the drives, those with data at least that old (oldest-only
/// first). None when some drive's age is unknown or fewer than three drives are given.
pub fn age_cohorts(ages_months: &[Option<f64>]) -> Vec<Group> {
    let Some(ages) = ages_months.iter().copied().collect::<Option<Vec<f64>>>() else {
        return Vec::new();
    };
    if ages.len() < 3 {
        return Vec::new();
    }
    let mut oldest_first: Vec<usize> = (0..ages.len()).collect();
    oldest_first.sort_by(|&a, &b| ages[b].total_cmp(&ages[a]));
    (1..ages.len())
        .filter(|&k| ages[oldest_first[k - 1]] > ages[oldest_first[k]])
        .map(|k| {
            let youngest = ages[oldest_first[k - 1]];
            let mut members = oldest_first[..k].to_vec();
            members.sort_unstable();
            Group {
                name: format!("data at least {youngest:.1} months old ({k} drives)"),
                members,
            }
        })
        .collect()
}

/// The cohort to name among `cohorts`: at the percentile where a named cohort's fix gains most (relative to the
/// query's value), the named cohort with the fewest drives whose gain there is at least [`COHORT_GAIN_KEPT`] of
/// the best.
pub fn cohort_to_name(cohorts: &[Attribution]) -> Option<&Attribution> {
    let gain = |p: &PercentileAttribution| p.query_ns.saturating_sub(p.fixed_ns) as f64;
    let (best_percentile, _) = cohorts
        .iter()
        .flat_map(|c| c.percentiles.iter().filter(|p| p.named))
        .map(|p| (p.percentile, gain(p) / p.query_ns.max(1) as f64))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let at = |c: &'_ Attribution| {
        c.percentiles
            .iter()
            .find(|p| p.percentile == best_percentile && p.named)
            .map(gain)
    };
    let best_gain = cohorts.iter().filter_map(at).fold(0.0, f64::max);
    cohorts
        .iter()
        .filter(|c| at(c).is_some_and(|g| g >= COHORT_GAIN_KEPT * best_gain))
        .min_by_key(|c| c.members.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cohorts_part_the_drives_at_every_age_that_differs() {
        let ages = [Some(1.0), Some(7.0), Some(3.0), Some(3.0), Some(5.0)];
        let cohorts = age_cohorts(&ages);
        let members: Vec<Vec<usize>> = cohorts.iter().map(|c| c.members.clone()).collect();
        // 7; 7 and 5; 7, 5 and both 3s (never one 3 without the other); everything but the 1.
        assert_eq!(members, vec![vec![1], vec![1, 4], vec![1, 2, 3, 4]]);
        assert_eq!(cohorts[1].name, "data at least 5.0 months old (2 drives)");
        assert!(age_cohorts(&[Some(1.0), None, Some(2.0)]).is_empty());
    }

    /// A group's what-if from the fleet's totals agrees with multiplying every other drive out, for single drives,
    /// small groups, groups of most of the fleet, and drives whose CDFs are zero over part of the grid.
    #[test]
    fn a_groups_fix_from_the_totals_is_the_others_multiplied_out() {
        let mut rng = ssdlab_core::rng::Rng::new(5);
        let n = 40;
        let dists: Vec<Dist> = (0..n)
            .map(|d| {
                let base = 20_000 + 3_000 * (d as u64 % 7);
                let points: Vec<(u64, f64)> = (0..30)
                    .map(|_| (base + rng.below(200_000), 1.0 + rng.below(10) as f64))
                    .collect();
                Dist::from_points(&points)
            })
            .collect();
        let histograms: Vec<Histogram> = (0..n).map(|_| Histogram::new()).collect();
        let refs: Vec<&Histogram> = histograms.iter().collect();
        let names: Vec<String> = (0..n).map(|d| format!("d{d}")).collect();
        let all: Vec<&Dist> = dists.iter().collect();
        let query = Dist::max_of(&all);
        let fleet = Fleet::new(&names, &dists, &refs, &query, &[], n);
        for members in [
            vec![3],
            vec![0, 17],
            (0..10).collect(),
            (0..30).collect::<Vec<usize>>(),
            (1..n).collect(),
        ] {
            let fixed = fleet.fixed(&members).unwrap();
            let m = members.len();
            let brute: Vec<f64> = (0..fleet.grid.len())
                .map(|g| {
                    let others: Vec<f64> = (0..n)
                        .filter(|i| !members.contains(i))
                        .map(|i| fleet.cdfs[i][g])
                        .collect();
                    let mean = others.iter().sum::<f64>() / others.len() as f64;
                    others.iter().product::<f64>() * mean.powi(m as i32)
                })
                .collect();
            let want = Dist::on_grid(&fleet.grid, &brute);
            for p in [50.0, 90.0, 95.0, 99.0, 99.9] {
                assert_eq!(fixed.percentile(p), want.percentile(p), "{m} members, p{p}");
            }
        }
    }
}
