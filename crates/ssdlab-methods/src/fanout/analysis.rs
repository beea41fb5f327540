//! From each drive's read latencies to the fan-out's conclusions: the query over the drives given, what-ifs,
//! the stragglers ranked by their share of the query's tail, the query with them fixed, and the verdict.
//! Pure arithmetic over histograms ([`super::dist`]); no I/O.

use ssdlab_core::Histogram;
use ssdlab_core::schema::fanout::{
    Attribution, FanoutAnalysis, FanoutDrive, HistogramBuckets, MeasuredQueries, PercentileAttribution,
    PercentileNeed, QueryCase, StragglerShare,
};
use ssdlab_core::schema::{LatencyNs, Verdict};

use super::attribution::{Fleet, Group, PERCENTILES, age_cohorts, cohort_to_name};
use super::dist::{Dist, tail_shares};
use super::fleet::FleetDrive;
use super::measure::DriveReads;
use crate::session::MethodError;

/// What to compute besides the query over the drives given.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    /// Shard counts for "this many shards like these" (each shard a drive drawn from the fleet).
    pub shards: Vec<u32>,
    /// Hedge after this percentile of the fleet's read latency (95.0 = p95).
    pub hedge_percentile: f64,
}

/// A drive takes at least this many times its fair share (1/N) of the p99 tail to be named a straggler.
pub const DOMINANT_FAIR_SHARES: f64 = 2.0;

/// ... and more reads beyond the query's p99 than chance gives a drive like the others: a binomial upper tail
/// below this, divided by the number of drives (Bonferroni: with 100 identical drives, one in a hundred runs
/// names one by chance, not a quarter of them).
pub const STRAGGLER_SIGNIFICANCE: f64 = 0.01;

/// P(X >= k) for X binomial with `n` trials of probability `p`, summed in log space from k upward (the terms fall
/// once past the mean), so tiny tail probabilities and large counts keep their precision.
pub fn binomial_upper_tail(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    // ln C(n, k) as a sum of k logarithms.
    let ln_choose: f64 = (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum();
    let mut ln_term = ln_choose + k as f64 * ln_p + (n - k) as f64 * ln_q;
    let first = ln_term;
    let mut sum = 1.0; // terms relative to the first
    let mut j = k;
    while j < n {
        ln_term += ((n - j) as f64 / (j + 1) as f64).ln() + ln_p - ln_q;
        j += 1;
        let relative = (ln_term - first).exp();
        sum += relative;
        if relative < 1e-17 * sum && j as f64 > n as f64 * p {
            break;
        }
    }
    (first.exp() * sum).min(1.0)
}

/// How the reads were made, for the analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct RunShape {
    pub workload: String,
    pub mode: String,
    pub runtime_s: f64,
    /// The threads that read the drives live (None: merged from results read elsewhere).
    pub reading_threads: Option<u32>,
}

/// Builds the analysis. `measured` holds the synchronized queries' latencies when they were measured.
pub fn analyze(
    drives: &[FleetDrive],
    reads: Vec<DriveReads>,
    measured: Option<Histogram>,
    what_if: &WhatIf,
    shape: RunShape,
) -> Result<FanoutAnalysis, MethodError> {
    assert_eq!(drives.len(), reads.len(), "one result per drive");
    let start_spread_ns = super::measure::start_spread_ns(&reads);
    let dists = drive_dists(drives, &reads)?;
    let all: Vec<&Dist> = dists.iter().collect();
    let n = drives.len() as u32;
    let query = Dist::max_of(&all);
    let pooled = Dist::pooled(&all);
    let cases = what_if_cases(&dists, &pooled, what_if, n);
    let stragglers = straggler_shares(drives, &reads, &all, &query);
    let total_reads: u64 = reads.iter().map(|r| r.histogram.count()).sum();
    let names: Vec<String> = drives.iter().map(|d| d.name.clone()).collect();
    let judged = attribute(drives, &reads, &dists, &query, total_reads, &names);
    let fixed = fixed_query(
        &judged,
        &judged.dominant,
        format!(
            "{} read like the other drives (their reads pooled; e.g. after a refresh)",
            judged.dominant.join(", ")
        ),
    );
    let cohort_fixed = judged.named_cohort.as_ref().and_then(|name| {
        let cohort = judged.cohorts.iter().find(|c| &c.name == name)?;
        let label = format!("{name} rewritten: read like the younger drives (their reads pooled)");
        fixed_query(&judged, &cohort.members, label)
    });
    let drives_out = drive_results(drives, reads);
    let mut analysis = FanoutAnalysis {
        workload: shape.workload,
        mode: shape.mode,
        runtime_s: shape.runtime_s,
        reading_threads: shape.reading_threads,
        start_spread_ns,
        drives: drives_out,
        query_cdf: thin(query.points().collect(), CDF_POINTS),
        query: QueryCase {
            case: format!("a query waiting for all {n} drives"),
            shards: n,
            latency_ns: query.latency_ns(),
            extra_load_ratio: 0.0,
            unsupported: vec![],
        },
        what_if: cases,
        stragglers,
        median_drive: None,
        dominant: judged.dominant,
        fixed,
        named_cohort: judged.named_cohort,
        cohort_fixed,
        attribution: judged.drives,
        cohorts: judged.cohorts,
        measured: measured.map(|h| MeasuredQueries {
            queries: h.count(),
            latency_ns: LatencyNs::from_histogram(&h),
            histogram: HistogramBuckets::of(&h.to_sparse()),
        }),
        notes: vec![],
    };
    if let Some(m) = &analysis.measured
        && let Some(note) = measured_disagreement(&analysis.query.latency_ns, &m.latency_ns, m.queries)
    {
        analysis.notes.push(note);
    }
    for case in std::iter::once(&mut analysis.query)
        .chain(analysis.what_if.iter_mut())
        .chain(analysis.fixed.iter_mut())
        .chain(analysis.cohort_fixed.iter_mut())
    {
        case.unsupported = unsupported(case.shards, total_reads);
    }
    Ok(analysis)
}

/// Each drive's latency distribution from its reads, in order, or why a drive has none (its first read failed,
/// or no read completed in the runtime).
fn drive_dists(drives: &[FleetDrive], reads: &[DriveReads]) -> Result<Vec<Dist>, MethodError> {
    let mut dists = Vec::with_capacity(drives.len());
    for (drive, r) in drives.iter().zip(reads) {
        dists.push(Dist::from_histogram(&r.histogram.to_sparse()).ok_or_else(|| {
            MethodError::Invalid(match &r.failure {
                Some(failure) => format!("--target {}: its first read failed: {failure}", drive.target),
                None => format!(
                    "--target {}: no read completed in the runtime; give a longer --runtime",
                    drive.target
                ),
            })
        })?);
    }
    Ok(dists)
}

/// The what-ifs over `n` drives like `dists` (`pooled` is their reads together): a query over each number of
/// shards asked for, hedged reads, and two replicas asked at once.
fn what_if_cases(dists: &[Dist], pooled: &Dist, what_if: &WhatIf, n: u32) -> Vec<QueryCase> {
    let mut cases = Vec::new();
    for &shards in &what_if.shards {
        cases.push(QueryCase {
            case: format!("{shards} shards like these (each a drive drawn from the fleet)"),
            shards,
            latency_ns: pooled.max_of_copies(shards).latency_ns(),
            extra_load_ratio: 0.0,
            unsupported: vec![],
        });
    }
    let delay_ns = pooled.percentile(what_if.hedge_percentile);
    let hedged: Vec<(Dist, f64)> = dists.iter().map(|d| d.hedged(pooled, delay_ns)).collect();
    let hedged_refs: Vec<&Dist> = hedged.iter().map(|h| &h.0).collect();
    cases.push(QueryCase {
        case: format!(
            "hedged: a second read to a replica after the fleet's p{} ({:.2} ms)",
            what_if.hedge_percentile,
            delay_ns as f64 / 1e6
        ),
        shards: n,
        latency_ns: Dist::max_of(&hedged_refs).latency_ns(),
        extra_load_ratio: hedged.iter().map(|h| h.1).sum::<f64>() / n as f64,
        unsupported: vec![],
    });
    let replicated: Vec<Dist> = dists.iter().map(|d| d.fastest_with_replicas(pooled, 1)).collect();
    cases.push(QueryCase {
        case: "two replicas asked at once, the first answer wins".into(),
        shards: n,
        latency_ns: Dist::max_of(&replicated.iter().collect::<Vec<_>>()).latency_ns(),
        extra_load_ratio: 1.0,
        unsupported: vec![],
    });
    cases
}

/// Every drive's share of the query's p95 and p99 tails, with its reads beyond the query's p99 against what
/// drives all alike would give it, ranked by the p99 share (largest first); and each drive's reads beyond the
/// p99, in the drives' order.
fn straggler_shares(
    drives: &[FleetDrive],
    reads: &[DriveReads],
    all: &[&Dist],
    query: &Dist,
) -> Vec<StragglerShare> {
    let p95 = tail_shares(all, query.percentile(95.0));
    let threshold_ns = query.percentile(99.0);
    let p99 = tail_shares(all, threshold_ns);
    // Reads beyond the query's p99, per drive, against what drives all alike would give each.
    let tail: Vec<u64> = reads
        .iter()
        .map(|r| r.histogram.count_at_or_above(threshold_ns))
        .collect();
    let total_reads: u64 = reads.iter().map(|r| r.histogram.count()).sum();
    let pooled_tail = tail.iter().sum::<u64>() as f64 / total_reads.max(1) as f64;
    let mut stragglers: Vec<StragglerShare> = drives
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let count = reads[i].histogram.count();
            StragglerShare {
                name: d.name.clone(),
                share_of_p95_ratio: p95[i],
                share_of_p99_ratio: p99[i],
                tail_reads: tail[i],
                tail_reads_expected: count as f64 * pooled_tail,
                tail_p_value: binomial_upper_tail(tail[i], count, pooled_tail),
            }
        })
        .collect();
    stragglers.sort_by(|a, b| b.share_of_p99_ratio.total_cmp(&a.share_of_p99_ratio));
    stragglers
}

/// Every drive's and every age cohort's part in the query, judged together (one significance level over all
/// their tests), with the drives named and the cohort to name.
struct Judged<'a> {
    fleet: Fleet<'a>,
    drives: Vec<Attribution>,
    cohorts: Vec<Attribution>,
    dominant: Vec<String>,
    named_cohort: Option<String>,
    names: &'a [String],
}

fn attribute<'a>(
    drives: &[FleetDrive],
    reads: &[DriveReads],
    dists: &[Dist],
    query: &'a Dist,
    total_reads: u64,
    names: &'a [String],
) -> Judged<'a> {
    let n = drives.len() as u32;
    let needs = unsupported(n, total_reads);
    let supported: Vec<f64> = PERCENTILES
        .into_iter()
        .filter(|p| !needs.iter().any(|need| need.percentile == *p))
        .collect();
    let ages: Vec<Option<f64>> = drives.iter().map(|d| d.data_age_months).collect();
    let cohort_groups = age_cohorts(&ages);
    let histograms: Vec<&Histogram> = reads.iter().map(|r| &r.histogram).collect();
    let fleet = Fleet::new(
        names,
        dists,
        &histograms,
        query,
        &supported,
        drives.len() + cohort_groups.len(),
    );
    let attribution: Vec<Attribution> = (0..drives.len())
        .filter_map(|i| {
            fleet.judge(&Group {
                name: names[i].clone(),
                members: vec![i],
            })
        })
        .collect();
    let cohorts: Vec<Attribution> = cohort_groups.iter().filter_map(|g| fleet.judge(g)).collect();
    let dominant = attribution
        .iter()
        .filter(|a| a.percentiles.iter().any(|p| p.named))
        .map(|a| a.name.clone())
        .collect();
    let named_cohort = cohort_to_name(&cohorts).map(|c| c.name.clone());
    Judged {
        fleet,
        drives: attribution,
        cohorts,
        dominant,
        named_cohort,
        names,
    }
}

/// The query with the `named` drives reading like the others, described as `case` (None when no drive or every
/// drive is named).
fn fixed_query(judged: &Judged<'_>, named: &[String], case: String) -> Option<QueryCase> {
    let members: Vec<usize> = (0..judged.names.len())
        .filter(|&i| named.contains(&judged.names[i]))
        .collect();
    let fixed = judged.fleet.fixed(&members)?;
    Some(QueryCase {
        case,
        shards: judged.names.len() as u32,
        latency_ns: fixed.latency_ns(),
        extra_load_ratio: 0.0,
        unsupported: vec![],
    })
}

/// Each drive's part of the analysis: its reads, latencies, histogram and per-second series.
fn drive_results(drives: &[FleetDrive], reads: Vec<DriveReads>) -> Vec<FanoutDrive> {
    drives
        .iter()
        .zip(reads)
        .map(|(d, r)| FanoutDrive {
            name: d.name.clone(),
            target: d.target.clone(),
            data_age_months: d.data_age_months,
            reads: r.histogram.count(),
            latency_ns: LatencyNs::from_histogram(&r.histogram),
            histogram: HistogramBuckets::of(&r.histogram.to_sparse()),
            per_second: r.per_second,
            failure: r.failure,
            host_wait_ratio: r
                .host_wait
                .filter(|_| r.runtime_s > 0.0)
                .map(|w| w.wait_ns as f64 / (r.runtime_s * 1e9)),
            host_wait_mean_ns: r.host_wait.map(|w| w.wait_ns / w.scheduled.max(1)),
        })
        .collect()
}

/// A note when synchronized queries, as measured, are slower than the query computed from each drive's own reads
/// by more than the histograms' error and the sampling error of `queries` medians: the drives then were not
/// independent while measured, most often because the host could not issue every read at once.
pub fn measured_disagreement(computed: &LatencyNs, measured: &LatencyNs, queries: u64) -> Option<String> {
    let tolerance =
        2.0 * ssdlab_core::histogram::RELATIVE_ERROR + 3.0 / (queries.max(1) as f64).sqrt() + 0.02;
    let off = |c: f64, m: f64| if c > 0.0 { m / c - 1.0 } else { 0.0 };
    let (median, mean) = (
        off(computed.p50 as f64, measured.p50 as f64),
        off(computed.mean, measured.mean),
    );
    (median.abs() > tolerance || mean.abs() > tolerance).then(|| {
        format!(
            "measured queries differ from the computed ones beyond the histograms' and sampling error (median \
             {:+.0}%, mean {:+.0}%, tolerance {:.0}%): the drives were not independent while measured; the likely \
             cause is host CPU contention (more drives than cores issuing reads at once), or a shared bus or \
             controller",
            100.0 * median,
            100.0 * mean,
            100.0 * tolerance
        )
    })
}

/// A percentile is supported when at least this many reads are expected beyond it.
pub const MIN_TAIL_READS: u32 = 10;

/// The reported percentiles (p99, p99.9) of a query over `shards` that `total_reads` cannot support. The query's
/// p-th percentile is where each shard exceeds with probability (1 - p) / shards, so the reads pooled over the
/// drives put about total x (1 - p) / shards beyond it; fewer than ten, and the percentile is only the largest
/// reads seen.
pub fn unsupported(shards: u32, total_reads: u64) -> Vec<PercentileNeed> {
    [99.0, 99.9]
        .into_iter()
        .filter_map(|percentile: f64| {
            // The tail in thousandths (10 for p99, 1 for p99.9), in integers so p99.9 needs exactly 10^6 reads.
            let tail_permille = ((100.0 - percentile) * 10.0).round() as u64;
            let needed = u64::from(MIN_TAIL_READS) * u64::from(shards.max(1)) * 1000 / tail_permille;
            (total_reads < needed).then(|| PercentileNeed {
                percentile,
                more_reads: needed - total_reads,
            })
        })
        .collect()
}

/// The query CDF kept in the analysis has at most this many points.
const CDF_POINTS: usize = 400;

/// Keeps at most `max` points, evenly by index, always the last (where the CDF reaches 1).
fn thin(points: Vec<(u64, f64)>, max: usize) -> Vec<(u64, f64)> {
    if points.len() <= max {
        return points;
    }
    let step = points.len().div_ceil(max);
    let last = *points.last().expect("more than max points");
    let mut kept: Vec<(u64, f64)> = points.into_iter().step_by(step).collect();
    if kept.last() != Some(&last) {
        kept.push(last);
    }
    kept
}

/// The share of a drive's run its reading thread may wait for a CPU before its latencies are the host's more
/// than the drive's: a tenth.
pub const HOST_WAIT_LIMIT: f64 = 0.10;

/// The mean wait for a CPU beyond which the waits are other threads holding the CPUs, not wake-ups. Every read
/// at QD1 ends in a wake-up whose run-queue time is a few microseconds (13 us measured per read on a 2-CPU VM
/// with two drives, a fifth of a 66 us read; every QD1 benchmark pays it, fio's too); a thread that waits
/// behind others waits a scheduler's slice, hundreds of microseconds to milliseconds.
pub const HOST_WAIT_CONTENDED_NS: u64 = 100_000;

/// Why the host, not the drives, limited the measurement, when it did: the drives whose reading threads waited
/// for a CPU behind other threads (a mean wait above [`HOST_WAIT_CONTENDED_NS`]) more than [`HOST_WAIT_LIMIT`]
/// of their run.
pub fn host_limited(analysis: &FanoutAnalysis) -> Option<String> {
    let waited: Vec<(&str, f64)> = analysis
        .drives
        .iter()
        .filter(|d| d.host_wait_mean_ns.is_some_and(|ns| ns > HOST_WAIT_CONTENDED_NS))
        .filter_map(|d| Some((d.name.as_str(), d.host_wait_ratio?)))
        .filter(|&(_, ratio)| ratio > HOST_WAIT_LIMIT)
        .collect();
    let (worst, ratio) = waited.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "not trustworthy: the host kept {} of {} drives' reading threads waiting behind other threads for a CPU \
         for more than {:.0}% of the run (at most {:.0}%, {worst}), so their latencies include the wait; read \
         fewer drives per run (each host's drives with --out, merged with --from) or on a host with more CPUs",
        waited.len(),
        analysis.drives.len(),
        100.0 * HOST_WAIT_LIMIT,
        100.0 * ratio
    ))
}

/// Passed when no drive failed a read and none takes twice its fair share of the query's p99 tail; otherwise
/// names the failing drives, or the stragglers and what fixing them would buy. A run the host limited (see
/// [`host_limited`]) is failed as not trustworthy whatever the drives did.
pub fn verdict(analysis: &FanoutAnalysis) -> Verdict {
    let mut failures: Vec<String> = analysis
        .drives
        .iter()
        .filter_map(|d| Some(format!("{} failed a read ({})", d.name, d.failure.as_ref()?)))
        .collect();
    failures.extend(host_limited(analysis));
    if !failures.is_empty() {
        return Verdict {
            finding: false,
            passed: false,
            reasons: failures,
            unknown: false,
        };
    }
    let cohort = analysis
        .cohorts
        .iter()
        .find(|c| analysis.named_cohort.as_ref() == Some(&c.name));
    let (within, outside): (Vec<&Attribution>, Vec<&Attribution>) = analysis
        .attribution
        .iter()
        .filter(|a| analysis.dominant.contains(&a.name))
        .partition(|a| cohort.is_some_and(|c| c.members.contains(&a.name)));
    // The cohort first (it is the fix), then the drives outside it, then its own heaviest drives in one line.
    let mut named: Vec<String> = cohort.into_iter().chain(outside).map(what_it_does).collect();
    named.extend(heaviest_within(&within));
    if named.is_empty() {
        let checked: Vec<String> = analysis
            .attribution
            .first()
            .map(|a| {
                a.percentiles
                    .iter()
                    .map(|p| format!("p{}", p.percentile))
                    .collect()
            })
            .unwrap_or_default();
        return Verdict {
            finding: false,
            passed: true,
            reasons: vec![format!(
                "no straggler: the tail is shared (at {}, no drive{} takes {DOMINANT_FAIR_SHARES:.0}x its fair share \
                 of the query's tail beyond chance with a fix that moves the percentile beyond its noise)",
                if checked.is_empty() {
                    "every percentile".to_string()
                } else {
                    checked.join(", ")
                },
                if analysis.cohorts.is_empty() {
                    ""
                } else {
                    " and no cohort by data age"
                }
            )],
            unknown: false,
        };
    }
    // A straggler is what a fan-out analysis looks for: a finding about the drives.
    Verdict {
        finding: true,
        passed: false,
        reasons: named,
        unknown: false,
    }
}

/// The drives of the named cohort that are named on their own, in one line: how far past their fair share they
/// go, and the most that reading any one of them alone like the others buys (little, when the cohort shares the
/// tail: the fix is the cohort's).
fn heaviest_within(within: &[&Attribution]) -> Option<String> {
    let named: Vec<(&str, &PercentileAttribution, f64)> = within
        .iter()
        .flat_map(|a| {
            a.percentiles
                .iter()
                .filter(|p| p.named)
                .map(move |p| (a.name.as_str(), p, a.fair_share_ratio))
        })
        .collect();
    let (_, best, _) = named.iter().max_by(|a, b| {
        let gain = |p: &PercentileAttribution| 1.0 - p.fixed_ns as f64 / p.query_ns.max(1) as f64;
        gain(a.1).total_cmp(&gain(b.1))
    })?;
    let multiples = named.iter().map(|(_, p, fair)| p.share_ratio / fair);
    let (low, high) = multiples.fold((f64::MAX, 0.0f64), |(lo, hi), m| (lo.min(m), hi.max(m)));
    let names: Vec<&str> = within.iter().map(|a| a.name.as_str()).collect();
    Some(format!(
        "within that cohort {} each take {low:.1}-{high:.1}x their fair share of a tail; reading any one alone like \
         the others buys at most p{} {} ms",
        names.join(", "),
        best.percentile,
        ms_change(best.query_ns as f64, best.fixed_ns as f64)
    ))
}

/// What a named drive or cohort does to the query, with the figures: where it is named, its share there against
/// its fair share and chance, what reading like the other drives buys there and in the mean, and the
/// percentiles its fix does not move beyond their noise.
fn what_it_does(a: &Attribution) -> String {
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let (named, unmoved): (Vec<_>, Vec<_>) = a.percentiles.iter().partition(|p| p.named);
    let wheres: Vec<String> = named.iter().map(|p| format!("p{}", p.percentile)).collect();
    let mut shares: Vec<String> = named
        .iter()
        .map(|p| format!("{:.0}%", 100.0 * p.share_ratio))
        .collect();
    if shares.len() > 1 && shares.iter().all(|x| *x == shares[0]) {
        shares = vec![format!("{} of each", shares[0])];
    }
    let tail = named.last().expect("a named group is named at some percentile");
    let shares = format!(
        "it takes {} of {} against a fair share of {:.0}% ({} reads beyond the query's p{} where chance gives {:.0})",
        and_list(&shares),
        if named.len() == 1 {
            "that tail"
        } else {
            "those tails"
        },
        100.0 * a.fair_share_ratio,
        tail.tail_reads,
        tail.percentile,
        tail.tail_reads_expected
    );
    let gains: Vec<String> = named
        .iter()
        .map(|p| {
            format!(
                "p{} {} ms",
                p.percentile,
                ms_change(p.query_ns as f64, p.fixed_ns as f64)
            )
        })
        .chain(std::iter::once(format!(
            "mean {} ms",
            ms_change(a.query_mean_ns, a.fixed_mean_ns)
        )))
        .collect();
    let mut said = format!(
        "{} makes queries slow at {}: {shares}; reading like the other drives: {}",
        a.name,
        and_list(&wheres),
        gains.join(", ")
    );
    let still: Vec<String> = unmoved
        .iter()
        .filter(|p| p.fixed_ns >= p.noise_floor_ns)
        .map(|p| format!("p{} {} ms", p.percentile, ms(p.query_ns)))
        .collect();
    if !still.is_empty() {
        said.push_str(&format!("; {} unchanged within noise", and_list(&still)));
    }
    said
}

/// "4.93 -> 1.05" in milliseconds, with as many decimals (two to four) as it takes for a change to show: a
/// verdict that names a change never prints the same figure on both sides.
fn ms_change(from_ns: f64, to_ns: f64) -> String {
    let at = |digits: usize| {
        (
            format!("{:.digits$}", from_ns / 1e6),
            format!("{:.digits$}", to_ns / 1e6),
        )
    };
    let (from, to) = (2..=4).map(at).find(|(a, b)| a != b).unwrap_or_else(|| at(4));
    format!("{from} -> {to}")
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::binomial_upper_tail;

    #[test]
    fn measured_queries_slower_than_computed_name_the_likely_cause() {
        let at = |p50: u64, mean: f64| ssdlab_core::schema::LatencyNs {
            p50,
            mean,
            ..Default::default()
        };
        let computed = at(1_000_000, 1_200_000.0);
        assert!(super::measured_disagreement(&computed, &at(1_010_000, 1_210_000.0), 20_000).is_none());
        let note = super::measured_disagreement(&computed, &at(1_400_000, 1_700_000.0), 20_000)
            .expect("40% slower is beyond any error");
        assert!(
            note.contains("median +40%") && note.contains("CPU contention"),
            "{note}"
        );
        assert!(
            super::measured_disagreement(&computed, &at(1_400_000, 1_700_000.0), 4).is_none(),
            "four queries say nothing"
        );
    }

    #[test]
    fn the_binomial_tail_matches_closed_forms() {
        // P(X >= 1) = 1 - (1-p)^n.
        let p = binomial_upper_tail(1, 3000, 1e-4);
        assert!((p - (1.0 - (1.0f64 - 1e-4).powi(3000))).abs() < 1e-12, "{p}");
        // A fair coin: P(X >= 6 of 10) = 386/1024.
        assert!((binomial_upper_tail(6, 10, 0.5) - 386.0 / 1024.0).abs() < 1e-12);
        // Far in the tail, where 1 - P(X < k) would have rounded to 0: P(X >= 100 of 3000, p 1e-4) is about
        // e^-0.3 0.3^100 / 100! (the first term dominates).
        let tiny = binomial_upper_tail(100, 3000, 1e-4);
        assert!(tiny > 0.0 && tiny < 1e-200, "{tiny}");
        assert_eq!(binomial_upper_tail(0, 10, 0.5), 1.0);
        assert_eq!(binomial_upper_tail(11, 10, 0.5), 0.0);
    }
}
