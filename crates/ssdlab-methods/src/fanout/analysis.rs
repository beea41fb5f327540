//! From each drive's read latencies to the fan-out's conclusions: the query over the drives given, what-ifs,
//! the stragglers ranked by their share of the query's tail, the query with them fixed, and the verdict.
//! Pure arithmetic over histograms ([`super::dist`]); no I/O.

use ssdlab_core::Histogram;
use ssdlab_core::schema::fanout::{
    FanoutAnalysis, FanoutDrive, HistogramBuckets, MeasuredQueries, QueryCase, StragglerShare,
};
use ssdlab_core::schema::{LatencyNs, Verdict};

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

/// How the reads were made, for the analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct RunShape {
    pub workload: String,
    pub mode: String,
    pub runtime_s: f64,
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
    let mut dists = Vec::with_capacity(drives.len());
    for (drive, r) in drives.iter().zip(&reads) {
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
    let all: Vec<&Dist> = dists.iter().collect();
    let n = drives.len() as u32;
    let query = Dist::max_of(&all);
    let pooled = Dist::pooled(&all);
    let mut cases = Vec::new();
    for &shards in &what_if.shards {
        cases.push(QueryCase {
            case: format!("{shards} shards like these (each a drive drawn from the fleet)"),
            shards,
            latency_ns: pooled.max_of_copies(shards).latency_ns(),
            extra_load_ratio: 0.0,
        });
    }
    let delay_ns = pooled.percentile(what_if.hedge_percentile);
    let hedged: Vec<(Dist, f64)> = dists.iter().map(|d| d.hedged(&pooled, delay_ns)).collect();
    let hedged_refs: Vec<&Dist> = hedged.iter().map(|h| &h.0).collect();
    cases.push(QueryCase {
        case: format!(
            "hedged: a second read to a replica after the fleet's p{} ({:.0} us)",
            what_if.hedge_percentile,
            delay_ns as f64 / 1e3
        ),
        shards: n,
        latency_ns: Dist::max_of(&hedged_refs).latency_ns(),
        extra_load_ratio: hedged.iter().map(|h| h.1).sum::<f64>() / n as f64,
    });
    let replicated: Vec<Dist> = dists
        .iter()
        .map(|d| d.fastest_with_replicas(&pooled, 1))
        .collect();
    cases.push(QueryCase {
        case: "two replicas asked at once, the first answer wins".into(),
        shards: n,
        latency_ns: Dist::max_of(&replicated.iter().collect::<Vec<_>>()).latency_ns(),
        extra_load_ratio: 1.0,
    });
    let p95 = tail_shares(&all, query.percentile(95.0));
    let p99 = tail_shares(&all, query.percentile(99.0));
    let mut stragglers: Vec<StragglerShare> = drives
        .iter()
        .enumerate()
        .map(|(i, d)| StragglerShare {
            name: d.name.clone(),
            share_of_p95_ratio: p95[i],
            share_of_p99_ratio: p99[i],
        })
        .collect();
    stragglers.sort_by(|a, b| b.share_of_p99_ratio.total_cmp(&a.share_of_p99_ratio));
    let fair = 1.0 / n as f64;
    let dominant: Vec<String> = if n < 2 {
        Vec::new()
    } else {
        stragglers
            .iter()
            .filter(|s| s.share_of_p99_ratio >= DOMINANT_FAIR_SHARES * fair)
            .map(|s| s.name.clone())
            .collect()
    };
    // The typical drive: the one whose p99 is the median of the drives' p99s.
    let mut by_p99: Vec<usize> = (0..dists.len()).collect();
    by_p99.sort_by_key(|&i| dists[i].percentile(99.0));
    let median = by_p99[(by_p99.len() - 1) / 2];
    let fixed = (!dominant.is_empty()).then(|| {
        let replaced: Vec<&Dist> = drives
            .iter()
            .zip(&dists)
            .map(|(d, dist)| {
                if dominant.contains(&d.name) {
                    &dists[median]
                } else {
                    dist
                }
            })
            .collect();
        QueryCase {
            case: format!(
                "{} read like the median drive {} (e.g. after a refresh)",
                dominant.join(", "),
                drives[median].name
            ),
            shards: n,
            latency_ns: Dist::max_of(&replaced).latency_ns(),
            extra_load_ratio: 0.0,
        }
    });
    let drives_out = drives
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
        })
        .collect();
    Ok(FanoutAnalysis {
        workload: shape.workload,
        mode: shape.mode,
        runtime_s: shape.runtime_s,
        drives: drives_out,
        query_cdf: thin(query.points().collect(), CDF_POINTS),
        query: QueryCase {
            case: format!("a query waiting for all {n} drives"),
            shards: n,
            latency_ns: query.latency_ns(),
            extra_load_ratio: 0.0,
        },
        what_if: cases,
        stragglers,
        median_drive: fixed.as_ref().map(|_| drives[median].name.clone()),
        dominant,
        fixed,
        measured: measured.map(|h| MeasuredQueries {
            queries: h.count(),
            latency_ns: LatencyNs::from_histogram(&h),
            histogram: HistogramBuckets::of(&h.to_sparse()),
        }),
    })
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

/// Passed when no drive failed a read and none takes twice its fair share of the query's p99 tail; otherwise
/// names the failing drives, or the stragglers and what fixing them would buy.
pub fn verdict(analysis: &FanoutAnalysis) -> Verdict {
    let failures: Vec<String> = analysis
        .drives
        .iter()
        .filter_map(|d| Some(format!("{} failed a read ({})", d.name, d.failure.as_ref()?)))
        .collect();
    if !failures.is_empty() {
        return Verdict {
            passed: false,
            reasons: failures,
        };
    }
    let Some(fixed) = &analysis.fixed else {
        return Verdict {
            passed: true,
            reasons: vec![format!(
                "no straggler: no drive takes {DOMINANT_FAIR_SHARES:.0}x its fair share of the query's p99 tail"
            )],
        };
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    let q = &analysis.query.latency_ns;
    Verdict {
        passed: false,
        reasons: vec![format!(
            "stragglers {}: the query's p99 is {:.2} ms and its mean {:.2} ms; if they read like the median drive, {:.2} and {:.2} ms",
            analysis.dominant.join(", "),
            ms(q.p99),
            q.mean / 1e6,
            ms(fixed.latency_ns.p99),
            fixed.latency_ns.mean / 1e6
        )],
    }
}
