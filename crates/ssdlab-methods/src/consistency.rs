//! The performance-consistency test (seeds 002-004): purge, sequential fill, then 4 KiB random writes at QD32
//! for a fixed time, one IOPS sample per second, through the write cliff to steady state.
//!
//! Random offsets are drawn uniformly with replacement, as IOmeter does in the reviews (a random map would
//! rewrite every block exactly once per pass, which flatters garbage collection). `op_percent` simulates extra
//! over-provisioning the reviewers' way: only the first (100 - op)% of the LBAs are tested, and the whole
//! device is purged first so the rest stays unmapped.

pub use ssdlab_core::schema::ConsistencyAnalysis;
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::analysis::{find_cliff, plateau, snia_steady_state, tail_stats};
use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::options::ConsistencyOptions;

/// The span a consistency test uses: (100 - op)% of the device, in whole 128 KiB units.
pub fn tested_span(capacity: u64, op_percent: u32) -> Span {
    let unit = 128 << 10;
    let len = (capacity as u128 * (100 - op_percent.min(99)) as u128 / 100) as u64 / unit * unit;
    Span {
        offset_bytes: 0,
        len_bytes: len,
    }
}

pub fn run(
    session: &mut Session<'_>,
    options: &ConsistencyOptions,
) -> Result<(Option<ConsistencyAnalysis>, Verdict), MethodError> {
    if options.op_percent >= 100 {
        return Err(MethodError::Invalid(format!(
            "--op {}: must be below 100",
            options.op_percent
        )));
    }
    let whole = session.whole_device(128 << 10);
    let span = tested_span(session.device.info().capacity_bytes, options.op_percent);
    if span.len_bytes < (128 << 10) {
        return Err(MethodError::Invalid(
            "the target is smaller than one 128 KiB fill block".into(),
        ));
    }
    session.purge(whole)?;
    let fill = Workload {
        rw: RwMode::Write,
        block_bytes: 128 << 10,
        queue_depth: 32,
        span,
        stop: StopAt {
            passes: Some(options.fill_passes.max(1) as u64),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    session.phase("fill", &fill)?;
    let random = Workload {
        rw: RwMode::RandWrite,
        pattern: Pattern::Random { random_map: false },
        block_bytes: 4096,
        queue_depth: 32,
        span,
        stop: StopAt {
            runtime_ns: Some(options.runtime_ns),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    let Some(index) = session.phase("random-write", &random)? else {
        let verdict = Verdict {
            finding: false,
            passed: false,
            reasons: vec![format!("{} before the random-write phase", session.stop_reason())],
            unknown: false,
        };
        return Ok((None, verdict));
    };
    let phase = &session.phases[index];
    let analysis = analyze(&phase.samples, span.len_bytes, options);
    let mut reasons = Vec::new();
    match (analysis.snia.achieved, analysis.snia.range_excursion, analysis.snia.slope_excursion) {
        (true, _, _) => {}
        (false, Some(range), Some(slope)) => reasons.push(format!(
            "steady state not reached by SNIA PTS rules over the last 5 rounds of {} s: {} (of the mean)",
            options.round_s,
            crate::analysis::snia_tests_in_words(range, slope)
        )),
        (false, _, _) => reasons.push(format!(
            "steady state not reached: the run holds {} rounds of {} s, fewer than the 5 SNIA PTS needs (use --runtime {}s or more)",
            analysis.snia.rounds,
            options.round_s,
            5 * options.round_s
        )),
    }
    if !phase.complete {
        reasons.push(format!(
            "{} before the end of the random-write phase",
            session.stop_reason()
        ));
    }
    // A drive still moving after a full run is a finding about the drive; a run too short to judge is not.
    let finding = phase.complete && !analysis.snia.achieved && analysis.snia.range_excursion.is_some();
    let verdict = Verdict {
        finding,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    Ok((Some(analysis), verdict))
}

/// The analysis of the random-write phase's per-second samples.
pub fn analyze(
    samples: &[ssdlab_core::schema::Sample],
    tested_bytes: u64,
    options: &ConsistencyOptions,
) -> ConsistencyAnalysis {
    let iops: Vec<f64> = samples
        .iter()
        .map(|s| s.ios as f64 / s.seconds.max(1e-9))
        .collect();
    let bytes: Vec<u64> = samples.iter().map(|s| s.bytes).collect();
    let (steady_mean, steady_sd) = tail_stats(&iops, options.steady_window_s as usize);
    let cliff = find_cliff(&iops, &bytes);
    ConsistencyAnalysis {
        tested_bytes,
        op_percent: options.op_percent,
        plateau_iops: plateau(&iops, cliff.as_ref()),
        cliff,
        steady_window_s: options.steady_window_s.min(samples.len() as u32),
        steady_iops_mean: steady_mean,
        steady_iops_std_dev: steady_sd,
        steady_consistency_ratio: (steady_sd > 0.0).then(|| steady_mean / steady_sd),
        snia: snia_steady_state(&iops, options.round_s),
        random_bytes_written: bytes.iter().sum(),
        samples: samples.len() as u32,
    }
}

/// Runs the method and wraps it into an outcome.
pub fn consistency(
    mut session: Session<'_>,
    options: &ConsistencyOptions,
) -> Result<MethodOutcome, MethodError> {
    let (analysis, verdict) = run(&mut session, options)?;
    Ok(session.finish(Analysis::Consistency, analysis, verdict))
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Consistency;

crate::method::method_of_options!(Consistency, ConsistencyOptions, consistency);
