//! `ssdlab test pts`: the SNIA Solid State Storage Performance Test Specification's IOPS, throughput and
//! latency tests, as the specification runs them. Purge; workload-independent preconditioning (twice the
//! capacity in 128 KiB sequential writes); then rounds of the test's matrix over the ActiveRange, one cell time
//! each, until the tracking variable's last five rounds meet the steady-state rule or the round limit is
//! reached. The reported matrix is every cell averaged over the measurement window.
//!
//! Generic over [`ssdlab_core::Device`]: the same rounds run on a real drive (hours, as the PTS intends), a
//! file, or the virtual SSD in virtual time. It never prints; the caller shows the outcome.

pub mod matrix;
pub mod steady;

use ssdlab_core::histogram::Histogram;
use ssdlab_core::schema::pts::{PtsAnalysis, PtsCell, PtsCellResult, PtsRound, PtsSubTest, size_token};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::erase::{EraseMethod, Purger};
use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::pts::{PtsFlavour, PtsOptions, PtsTest};

/// Every span the rounds use is a multiple of the largest block size, so every cell addresses the same range.
const ALIGN_BYTES: u64 = 1 << 20;

/// The workload of one cell over `span` for `cell_ns`, with its own seed: every cell of every round draws its
/// own offsets, so the rounds cover the ActiveRange instead of rewriting one cell's blocks each time.
fn cell_workload(session: &Session<'_>, cell: &PtsCell, span: Span, cell_ns: u64, seed: u64) -> Workload {
    let (rw, pattern) = match (cell.sequential, cell.read_percent) {
        (true, 100) => (RwMode::Read, Pattern::Sequential),
        (true, _) => (RwMode::Write, Pattern::Sequential),
        (false, 100) => (RwMode::RandRead, Pattern::Random { random_map: false }),
        (false, 0) => (RwMode::RandWrite, Pattern::Random { random_map: false }),
        (false, _) => (RwMode::RandRw, Pattern::Random { random_map: false }),
    };
    Workload {
        rw,
        mix_read_percent: cell.read_percent as u8,
        pattern,
        block_bytes: cell.block_bytes,
        queue_depth: cell.queue_depth,
        span,
        stop: StopAt {
            runtime_ns: Some(cell_ns),
            ..StopAt::default()
        },
        seed,
        ..session.workload_base()
    }
}

/// How many blocks a firmware purge's read-back samples (the first, the last and random ones).
const PURGE_SAMPLES: u32 = 16;

/// The rounds go past the specification's 25 only with this said in the result.
const PTS_MAX_ROUNDS: u32 = 25;

/// What the engine's writes carry, as the PTS report states it.
const DATA_PATTERN: &str = "incompressible random bytes (seeded), each write stamped unique";

/// Runs one PTS test. `purger` is the drive's own purges (sanitize, secure erase) where the target is a drive
/// that may offer them; without one, or when it offers neither, the device is purged by discard.
pub fn pts(
    mut session: Session<'_>,
    options: &PtsOptions,
    mut purger: Option<&mut dyn Purger>,
) -> Result<MethodOutcome, MethodError> {
    check_options(options)?;
    let info = session.device.info().clone();
    let whole = session.whole_device(ALIGN_BYTES);
    let active = active_range(whole, options, &info.target)?;
    let (plans, skipped) = fitting_plans(options, &info)?;

    // 56 cells a round for up to 25 rounds: a line per phase would be thousands; each round gets one line, and
    // the phases are still streamed and recorded.
    session.observer.show_phase_lines(false);
    let (tests, late_failure) = run_sub_tests(&mut session, options, &plans, (whole, active), &mut purger)?;

    let mut departures = departures(options, &tests);
    for test in &tests {
        if !test.purged {
            departures.push(format!("not purged before preconditioning ({})", test.purge));
        }
    }
    departures.dedup();
    let reasons = verdict_reasons(&session, &tests, late_failure.as_deref(), plans.len());
    let mut tests = tests.into_iter();
    let analysis = tests.next().map(|first| PtsAnalysis {
        test: options.test,
        flavour: options.flavour,
        capacity_bytes: info.capacity_bytes,
        active_range_bytes: active.len_bytes,
        active_range_percent: options.active_range_percent,
        cell_s: options.cell_ns as f64 / 1e9,
        first,
        further: tests.collect(),
        skipped,
        data_pattern: DATA_PATTERN.into(),
        departures,
    });
    // A drive that does not settle in the rounds allowed is a finding about the drive; a run that stopped is not.
    let finding = late_failure.is_none() && !session.stopped && !reasons.is_empty();
    let verdict = Verdict {
        finding,
        passed: reasons.is_empty() && analysis.is_some(),
        reasons: if analysis.is_none() && reasons.is_empty() {
            vec!["no round completed".into()]
        } else {
            reasons
        },
        unknown: false,
    };
    Ok(session.finish(Analysis::Pts, analysis, verdict))
}

/// Refuses an ActiveRange that is not a share above 0 and at most 100%, and fewer rounds than the steady-state
/// window.
fn check_options(options: &PtsOptions) -> Result<(), MethodError> {
    if !(options.active_range_percent > 0.0 && options.active_range_percent <= 100.0) {
        return Err(MethodError::Invalid(format!(
            "--span {}%: the ActiveRange is a share of the LBAs above 0 and at most 100%",
            options.active_range_percent
        )));
    }
    if options.max_rounds < 5 {
        return Err(MethodError::Invalid(format!(
            "--max-rounds {}: steady state needs a window of 5 rounds",
            options.max_rounds
        )));
    }
    Ok(())
}

/// The ActiveRange the rounds address: the given share of `whole` from its start in whole MiB, or why it holds
/// less than one on `target`.
fn active_range(whole: Span, options: &PtsOptions, target: &str) -> Result<Span, MethodError> {
    let active = Span {
        offset_bytes: 0,
        len_bytes: (whole.len_bytes as f64 * options.active_range_percent / 100.0) as u64 / ALIGN_BYTES
            * ALIGN_BYTES,
    };
    if active.len_bytes == 0 {
        return Err(MethodError::Invalid(format!(
            "--span {}%: on {} that ActiveRange holds less than one 1 MiB block; the PTS needs at least that",
            options.active_range_percent, target
        )));
    }
    Ok(active)
}

/// The tests the run makes, without the cells below the device's logical block (said once per size in the
/// second list); refused before the purge when a test's tracking cell is one of them.
fn fitting_plans(
    options: &PtsOptions,
    info: &ssdlab_core::device::DeviceInfo,
) -> Result<(Vec<matrix::SubTestPlan>, Vec<String>), MethodError> {
    let mut skipped = Vec::new();
    let logical = u64::from(info.logical_block_bytes.max(1));
    let mut plans = matrix::sub_tests(options.test, options.flavour, options.queue_depth);
    for plan in &mut plans {
        plan.cells.retain(|c| {
            let fits = c.block_bytes >= logical && c.block_bytes.is_multiple_of(logical);
            let why = format!(
                "{} cells: below the device's {logical}-byte logical block",
                ssdlab_core::units::BinaryBytes(c.block_bytes)
            );
            if !fits && !skipped.contains(&why) {
                skipped.push(why);
            }
            fits
        });
        // Refused before the purge: without its tracking cell a test cannot decide steady state.
        if !plan.cells.contains(&plan.tracking_cell) {
            return Err(MethodError::Invalid(format!(
                "{}: the tracking cell ({} KiB) is below the device's {logical}-byte logical block",
                info.target,
                plan.tracking_cell.block_bytes / 1024
            )));
        }
    }
    Ok((plans, skipped))
}

/// Runs the tests in order over the (whole device, ActiveRange) until the session stops: the tests that
/// finished, and why a later test could not start when one could not (the session is then stopped; the first
/// test's failure is the run's error).
fn run_sub_tests(
    session: &mut Session<'_>,
    options: &PtsOptions,
    plans: &[matrix::SubTestPlan],
    (whole, active): (Span, Span),
    purger: &mut Option<&mut dyn Purger>,
) -> Result<(Vec<PtsSubTest>, Option<String>), MethodError> {
    let mut tests: Vec<PtsSubTest> = Vec::new();
    let mut late_failure = None;
    for (index, plan) in plans.iter().enumerate() {
        if session.stopped {
            break;
        }
        // The second test's purge and preconditioning phases are named for its block size.
        let suffix = match index {
            0 => String::new(),
            _ => format!("-{}", size_token(plan.tracking_cell.block_bytes)),
        };
        match sub_test(session, options, plan, whole, active, &suffix, purger) {
            Ok(Some(test)) => tests.push(test),
            Ok(None) => {}
            // A later test that cannot start keeps the finished ones (hours of work on a real drive).
            Err(e) if !tests.is_empty() => {
                session.stopped = true;
                late_failure = Some(format!(
                    "the {} KiB test did not run: {e}",
                    plan.tracking_cell.block_bytes >> 10
                ));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((tests, late_failure))
}

/// Why the run did not pass: a later test that could not start, the session's stop, or each test (named when
/// there are several of `plans`) that did not reach steady state.
fn verdict_reasons(
    session: &Session<'_>,
    tests: &[PtsSubTest],
    late_failure: Option<&str>,
    plans: usize,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(failure) = late_failure {
        reasons.push(failure.to_string());
    } else if session.stopped {
        let rounds: usize = tests.iter().map(|t| t.rounds.len()).sum();
        reasons.push(format!(
            "{} after {rounds} complete round(s)",
            session.stop_reason()
        ));
    } else {
        for test in tests.iter().filter(|t| !t.steady_state.achieved) {
            let s = &test.steady_state;
            reasons.push(format!(
                "{}steady state not achieved in {} rounds: over the last five, {}",
                match plans {
                    1 => String::new(),
                    _ => format!("{} KiB: ", test.tracking_cell.block_bytes >> 10),
                },
                test.rounds.len(),
                match (s.range_excursion, s.slope_excursion) {
                    (Some(range), Some(slope)) => crate::analysis::snia_tests_in_words(range, slope),
                    _ => "were not measured".into(),
                }
            ));
        }
    }
    reasons
}

/// The ways a run departs from the specification, said in the result so no one mistakes it for a conforming one.
fn departures(options: &PtsOptions, tests: &[PtsSubTest]) -> Vec<String> {
    let mut out = Vec::new();
    if options.cell_ns < 60_000_000_000 {
        out.push(format!(
            "cells of {} s: the PTS runs each cell for one minute",
            options.cell_ns as f64 / 1e9
        ));
    }
    if options.max_rounds > PTS_MAX_ROUNDS {
        let past = tests.iter().map(|t| t.rounds.len() as u32).max().unwrap_or(0);
        out.push(format!(
            "--max-rounds {}: the PTS stops at {PTS_MAX_ROUNDS} rounds{}",
            options.max_rounds,
            if past > PTS_MAX_ROUNDS {
                format!(", and this run went on to round {past}: it is not PTS-conforming")
            } else {
                ", though this run did not need more".into()
            }
        ));
    }
    if options.precondition_passes < 2 {
        out.push(format!(
            "{} preconditioning pass(es): the PTS writes twice the capacity",
            options.precondition_passes
        ));
    }
    out
}

/// Purges the device for a test: the drive's own sanitize, then its secure erase, each verified by reading back
/// sampled blocks; else discard. Returns whether it was purged and how, in words.
fn purge(
    session: &mut Session<'_>,
    whole: Span,
    suffix: &str,
    purger: &mut Option<&mut dyn Purger>,
) -> Result<(bool, String), MethodError> {
    let mut why_not = Vec::new();
    if let Some(purger) = purger.as_mut() {
        for method in [EraseMethod::Sanitize, EraseMethod::SecureErase] {
            // Said before the purge starts, as `erase` says them: a secure erase cut off leaves the drive locked
            // with a password only this line gives.
            for notice in purger.notices(method) {
                session.observer.alarm(&notice);
            }
            let seed = ssdlab_core::rng::splitmix64(session.seed ^ 0x5052_4745);
            let report = crate::erase::erase(
                &mut *session.device,
                &mut **purger,
                Some(method),
                PURGE_SAMPLES,
                seed,
            )
            .map_err(|e| MethodError::Invalid(format!("purge: {e}")))?;
            let outcome = report.steps.last().map(|s| s.outcome.clone()).unwrap_or_default();
            if report.method.is_some() {
                return Ok((true, format!("the drive's {}: {outcome}", method.name())));
            }
            if outcome.starts_with("failed after it started") || outcome.ends_with("nothing else was tried") {
                // A firmware purge still running in the drive: nothing else may touch it.
                return Err(MethodError::Invalid(format!(
                    "purge by {}: {outcome}",
                    method.name()
                )));
            }
            why_not.push(format!("{} {outcome}", method.name()));
        }
    }
    let purged = session.purge_as(&format!("purge{suffix}"), whole)?;
    let firmware = match why_not.is_empty() {
        true => String::new(),
        false => format!(" (the drive's own purges: {})", why_not.join("; ")),
    };
    Ok(match purged {
        true => (true, format!("discard over the whole device{firmware}")),
        false => (
            false,
            format!(
                "{} does not support discard{firmware}",
                session.device.info().target
            ),
        ),
    })
}

/// One test: purge, precondition, rounds to steady state, the window's matrix. None when it stopped before its
/// first round completed.
fn sub_test(
    session: &mut Session<'_>,
    options: &PtsOptions,
    plan: &matrix::SubTestPlan,
    whole: Span,
    active: Span,
    suffix: &str,
    purger: &mut Option<&mut dyn Purger>,
) -> Result<Option<PtsSubTest>, MethodError> {
    let (purged, how) = purge(session, whole, suffix, purger)?;
    let preconditioning_bytes = precondition(session, options, whole, suffix)?;
    let rounds = Rounds {
        options,
        plan,
        active,
        // The latency test reports the 99.999th percentile: its nine cells keep their histograms.
        keep_histograms: options.test == PtsTest::Latency,
    };
    let rounds_run = rounds.run(session)?;
    if rounds_run.is_empty() {
        return Ok(None);
    }
    let series: Vec<f64> = rounds_run.iter().map(|r| r.tracking).collect();
    let steady_state = steady::determine(&series, options.max_rounds);
    let matrix = rounds.window_matrix(session, &rounds_run, &steady_state);
    Ok(Some(PtsSubTest {
        purged,
        purge: how,
        preconditioning_bytes,
        tracking_cell: plan.tracking_cell,
        tracking_metric: plan.tracking_metric,
        rounds: rounds_run,
        steady_state,
        matrix,
    }))
}

/// Workload-independent preconditioning: `precondition_passes` passes of 128 KiB sequential writes at QD32 over
/// `whole`; the bytes written (0 when none ran).
fn precondition(
    session: &mut Session<'_>,
    options: &PtsOptions,
    whole: Span,
    suffix: &str,
) -> Result<u64, MethodError> {
    let precondition = Workload {
        rw: RwMode::Write,
        pattern: Pattern::Sequential,
        block_bytes: 128 << 10,
        queue_depth: 32,
        span: whole,
        stop: StopAt {
            passes: Some(options.precondition_passes as u64),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    let mut preconditioning_bytes = 0;
    if options.precondition_passes > 0
        && let Some(i) = session.phase(&format!("precondition{suffix}"), &precondition)?
    {
        preconditioning_bytes = session.phases[i].summary.bytes;
    }
    Ok(preconditioning_bytes)
}

/// The rounds of one test: its plan over the ActiveRange, and whether its cells keep their latency histograms.
struct Rounds<'a> {
    options: &'a PtsOptions,
    plan: &'a matrix::SubTestPlan,
    active: Span,
    keep_histograms: bool,
}

impl Rounds<'_> {
    /// Runs rounds until the tracking variable's last five pass the steady-state rule, the round limit, or an
    /// interruption (a round cut short does not count): the complete rounds.
    fn run(&self, session: &mut Session<'_>) -> Result<Vec<PtsRound>, MethodError> {
        let plan = self.plan;
        let mut rounds: Vec<PtsRound> = Vec::new();
        for round in 1..=self.options.max_rounds {
            let results = self.cells(session, round)?;
            if results.len() < plan.cells.len() {
                break; // interrupted inside the round: it does not count
            }
            let tracking = results
                .iter()
                .find(|r| r.cell == plan.tracking_cell)
                .map(|r| matrix::value(r, plan.tracking_metric))
                .expect("the tracking cell is one of the cells, checked before the purge");
            rounds.push(PtsRound {
                round,
                tracking,
                cells: results,
            });
            let series: Vec<f64> = rounds.iter().map(|r| r.tracking).collect();
            let steady = steady::last_window_passes(&series);
            session.observer.say(&format!(
                "round     {} {round:>2}: {}{}",
                size_token(plan.tracking_cell.block_bytes),
                matrix::format_value(tracking, plan.tracking_metric),
                if steady {
                    "  (steady: the last five rounds pass)"
                } else {
                    ""
                }
            ));
            if steady {
                break;
            }
        }
        Ok(rounds)
    }

    /// Runs the cells of round `round` in order: each cell's figures, fewer than the plan's cells when the
    /// session stopped or a cell did not complete.
    fn cells(&self, session: &mut Session<'_>, round: u32) -> Result<Vec<PtsCellResult>, MethodError> {
        let plan = self.plan;
        let mut results = Vec::with_capacity(plan.cells.len());
        for (index, cell) in plan.cells.iter().enumerate() {
            let seed = ssdlab_core::rng::splitmix64(session.seed ^ ((round as u64) << 32 | index as u64));
            let workload = cell_workload(session, cell, self.active, self.options.cell_ns, seed);
            let Some(i) = session.phase(&matrix::phase_name(round, cell), &workload)? else {
                break;
            };
            let phase = &mut session.phases[i];
            if !phase.complete {
                break;
            }
            let s = &phase.summary;
            results.push(PtsCellResult {
                cell: *cell,
                iops: s.iops,
                bytes_per_s: s.bytes_per_s,
                latency_ns_mean: s.latency_ns.mean,
                latency_ns_max: s.latency_ns.max,
                latency_ns_p99_999: self
                    .keep_histograms
                    .then(|| s.latency_histogram.as_ref().map(|h| h.percentile(99.999)))
                    .flatten(),
            });
            // 56 cells a round for up to 25 rounds: the round table holds each cell's figures, so the per-second
            // samples are kept only for the tracking cell, and histograms only where the test reports them.
            if !self.keep_histograms {
                phase.summary.latency_histogram = None;
            }
            if *cell != plan.tracking_cell {
                phase.samples.clear();
            }
        }
        Ok(results)
    }

    /// The reported matrix: every cell averaged over the measurement window of `rounds` (all of them when the
    /// steady state names no window), with the 99.999th percentile from the window's histograms merged.
    fn window_matrix(
        &self,
        session: &Session<'_>,
        rounds: &[PtsRound],
        steady_state: &ssdlab_core::schema::pts::PtsSteadyState,
    ) -> Vec<PtsCellResult> {
        let window: Vec<&PtsRound> = match (steady_state.window_first_round, steady_state.window_last_round) {
            (Some(first), Some(last)) => rounds
                .iter()
                .filter(|r| (first..=last).contains(&r.round))
                .collect(),
            _ => rounds.iter().collect(),
        };
        let mut matrix = matrix::window_average(&window);
        if self.keep_histograms {
            // The window's 99.999th percentile comes from its rounds' histograms merged, never an average of
            // percentiles.
            for result in &mut matrix {
                let mut merged = Histogram::new();
                for round in &window {
                    let name = matrix::phase_name(round.round, &result.cell);
                    if let Some(h) = session
                        .phases
                        .iter()
                        .rev()
                        .find(|p| p.name == name)
                        .and_then(|p| p.summary.latency_histogram.as_ref())
                    {
                        merged.merge_sparse(h);
                    }
                }
                result.latency_ns_p99_999 = (!merged.is_empty()).then(|| merged.percentile(99.999));
            }
        }
        matrix
    }
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Pts;

impl crate::method::Method for Pts {
    type Options = PtsOptions;
    type Plan = PtsOptions;
    const PURGES: bool = true;

    fn recorded(plan: &Self::Plan) -> Self::Options {
        *plan
    }

    fn run(
        session: Session<'_>,
        plan: Self::Plan,
        context: crate::method::MethodContext<'_>,
    ) -> Result<MethodOutcome, MethodError> {
        pts(session, &plan, context.purger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MethodObserver;
    use ssdlab_core::device::Op;
    use ssdlab_core::schema::PhaseResult;
    use ssdlab_engine::Observer;
    use ssdlab_testdev::MemDevice;

    struct Watch(Vec<String>);
    impl Observer for Watch {}
    impl MethodObserver for Watch {
        fn begin_phase(&mut self, name: &str) {
            self.0.push(name.to_string());
        }
        fn end_phase(&mut self, _phase: &PhaseResult) {}
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn purge_preconditioning_and_the_matrix_order_counted_on_the_device() {
        // A device whose every operation takes the same time: every round is alike, so the first window of five
        // rounds is steady and the test stops after round 5.
        let capacity = 64 * MIB;
        let mut device = MemDevice::new(capacity, 500_000);
        let mut watch = Watch(Vec::new());
        let options = PtsOptions {
            cell_ns: 20_000_000,
            active_range_percent: 50.0,
            ..PtsOptions::default()
        };
        let outcome = pts(Session::new(&mut device, &mut watch, 1), &options, None).unwrap();
        let Analysis::Pts(analysis) = &outcome.analysis else {
            panic!("a pts analysis");
        };
        let a = analysis.measured.as_ref().expect("measured");
        assert!(outcome.verdict.passed, "{:?}", outcome.verdict);
        assert!(
            a.first.steady_state.achieved && a.first.rounds.len() == 5,
            "{:?}",
            a.first.steady_state
        );
        assert_eq!(a.first.steady_state.window_first_round, Some(1));
        assert_eq!(a.first.matrix.len(), 56);
        assert!(a.first.purged && a.skipped.is_empty());

        // Purge: discards covering the device once, before anything else.
        let first_write = device
            .log()
            .iter()
            .position(|(op, _, _)| *op != Op::Discard)
            .unwrap();
        let discarded: u64 = device.log()[..first_write].iter().map(|(_, _, len)| len).sum();
        assert_eq!(discarded, capacity);
        // Preconditioning: 128 KiB sequential writes, twice the capacity, in order.
        let pre = &device.log()[first_write..first_write + 2 * (capacity / (128 << 10)) as usize];
        assert!(
            pre.iter()
                .all(|&(op, _, len)| op == Op::Write && len == 128 << 10)
        );
        assert_eq!(pre.iter().map(|(_, _, len)| len).sum::<u64>(), 2 * capacity);
        assert_eq!(a.first.preconditioning_bytes, 2 * capacity);
        assert!(pre.windows(2).take(511).all(|w| w[1].1 == w[0].1 + (128 << 10)));

        // The rounds: every cell in the specification's order, each one's operations of its size and mix,
        // inside the ActiveRange.
        let expected: Vec<String> = (1..=5)
            .flat_map(|round| {
                matrix::cells(PtsTest::Iops, 32)
                    .iter()
                    .map(|c| matrix::phase_name(round, c))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(&watch.0[2..], expected.as_slice());
        let rounds = &device.log()[first_write + pre.len()..];
        assert!(
            rounds
                .iter()
                .all(|&(_, offset, len)| offset + len <= capacity / 2)
        );
        let first_cell = matrix::cells(PtsTest::Iops, 32)[0];
        let first_ops: Vec<_> = rounds
            .iter()
            .take_while(|(_, _, len)| *len == first_cell.block_bytes)
            .collect();
        assert!(first_ops.len() > 10 && first_ops.iter().all(|(op, _, _)| *op == Op::Read));
        let writes_4k = rounds
            .iter()
            .filter(|&&(op, _, len)| op == Op::Write && len == 4096)
            .count();
        let reads_4k = rounds
            .iter()
            .filter(|&&(op, _, len)| op == Op::Read && len == 4096)
            .count();
        // Seven mixes at 4 KiB: 100+95+65+50+35+5+0 = 350 of 700 read percent-points, so about half are reads.
        let share = reads_4k as f64 / (reads_4k + writes_4k) as f64;
        assert!((share - 0.5).abs() < 0.02, "4 KiB read share {share}");
        // The tracking cell: 32 outstanding at 500 us each = 64K IOPS, the same every round.
        assert!(
            a.first
                .rounds
                .iter()
                .all(|r| (r.tracking - 64_000.0).abs() < 64.0),
            "{:?}",
            a.first.rounds[0].tracking
        );
    }

    /// Drive purges that offer what they are told, count their calls, and erase nothing themselves (a fresh
    /// MemDevice reads zeroes, so the read-back verifies).
    struct DrivePurges {
        offered: Vec<EraseMethod>,
        ran: Vec<EraseMethod>,
    }
    impl Purger for DrivePurges {
        fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
            match self.offered.contains(&method) {
                true => Ok(()),
                false => Err("the drive does not offer it".into()),
            }
        }
        fn purge(&mut self, method: EraseMethod) -> Result<String, crate::erase::PurgeFailure> {
            self.ran.push(method);
            Ok("format with secure erase settings".into())
        }
    }

    fn measured(outcome: &MethodOutcome) -> &PtsAnalysis {
        let Analysis::Pts(analysis) = &outcome.analysis else {
            panic!("a pts analysis");
        };
        analysis.measured.as_ref().expect("measured")
    }

    #[test]
    fn pts_e_throughput_is_two_tests_each_purged_and_preconditioned_and_pts_c_one() {
        let capacity = 16 * MIB;
        let quick = |flavour| PtsOptions {
            test: PtsTest::Throughput,
            flavour,
            cell_ns: 20_000_000,
            ..PtsOptions::default()
        };
        let mut device = MemDevice::new(capacity, 500_000);
        let mut watch = Watch(Vec::new());
        let outcome = pts(
            Session::new(&mut device, &mut watch, 1),
            &quick(PtsFlavour::Enterprise),
            None,
        )
        .unwrap();
        let a = measured(&outcome);
        let tests: Vec<&PtsSubTest> = a.sub_tests().collect();
        assert_eq!(tests.len(), 2);
        assert_eq!(
            tests
                .iter()
                .map(|t| t.tracking_cell.block_bytes)
                .collect::<Vec<_>>(),
            vec![1 << 20, 128 << 10]
        );
        for t in &tests {
            // Each test's own matrix: its block size read and written, nothing else; its own steady state.
            assert!(t.purged && t.preconditioning_bytes == 2 * capacity, "{t:?}");
            assert!(t.steady_state.achieved && t.rounds.len() == 5);
            assert!(
                t.matrix
                    .iter()
                    .all(|c| c.cell.block_bytes == t.tracking_cell.block_bytes)
            );
            assert_eq!(t.matrix.len(), 2);
        }
        // Two purges (discards over the whole device), the second after the first test's rounds.
        let purges: Vec<&String> = watch.0.iter().filter(|n| n.starts_with("purge")).collect();
        assert_eq!(purges, ["purge", "purge-128k"]);
        let second = watch.0.iter().position(|n| n == "purge-128k").unwrap();
        assert_eq!(watch.0[second + 1], "precondition-128k");
        assert!(watch.0[..second].iter().any(|n| n.ends_with("-1m")));
        assert!(watch.0[second..].iter().all(|n| !n.ends_with("-1m")));
        // The first test's figure heads the result, as PTS-C's only test.
        let mut device = MemDevice::new(capacity, 500_000);
        let mut watch = Watch(Vec::new());
        let client = pts(
            Session::new(&mut device, &mut watch, 1),
            &quick(PtsFlavour::Client),
            None,
        )
        .unwrap();
        let c = measured(&client);
        assert!(c.further.is_empty() && c.first.tracking_cell.block_bytes == 1 << 20);
        assert_eq!(c.flavour, PtsFlavour::Client);
        assert!(
            c.departures.iter().any(|d| d.contains("one minute")),
            "{:?}",
            c.departures
        );
    }

    #[test]
    fn the_latency_test_reports_the_99_999th_percentile_from_kept_histograms() {
        let mut device = MemDevice::new(16 * MIB, 100_000);
        let mut watch = Watch(Vec::new());
        let options = PtsOptions {
            test: PtsTest::Latency,
            cell_ns: 20_000_000,
            ..PtsOptions::default()
        };
        let session = Session::new(&mut device, &mut watch, 1);
        let outcome = pts(session, &options, None).unwrap();
        let a = measured(&outcome);
        assert_eq!(a.first.matrix.len(), 9);
        for cell in a
            .first
            .matrix
            .iter()
            .chain(a.first.rounds.iter().flat_map(|r| &r.cells))
        {
            // Every operation takes 100 us: the tail is that, within the histogram's resolution.
            let p = cell.latency_ns_p99_999.expect("reported");
            assert!(
                p.abs_diff(100_000) <= 1_000 && p <= cell.latency_ns_max,
                "{cell:?}"
            );
        }
        // Each cell's histogram stays in its phase (the result keeps them).
        let cells: Vec<_> = outcome
            .phases
            .iter()
            .filter(|p| p.name.starts_with('r'))
            .collect();
        assert_eq!(cells.len(), 9 * a.first.rounds.len());
        assert!(cells.iter().all(|p| p.summary.latency_histogram.is_some()));
        // The IOPS test keeps none and reports none.
        let mut device = MemDevice::new(16 * MIB, 100_000);
        let iops = PtsOptions {
            cell_ns: 20_000_000,
            ..PtsOptions::default()
        };
        let outcome = pts(Session::new(&mut device, &mut watch, 1), &iops, None).unwrap();
        assert!(
            measured(&outcome)
                .first
                .matrix
                .iter()
                .all(|c| c.latency_ns_p99_999.is_none())
        );
    }

    #[test]
    fn a_drive_that_offers_secure_erase_is_purged_by_it_not_by_discard() {
        let mut device = MemDevice::new(16 * MIB, 500_000);
        let mut watch = Watch(Vec::new());
        let mut drive = DrivePurges {
            offered: vec![EraseMethod::SecureErase],
            ran: vec![],
        };
        let options = PtsOptions {
            cell_ns: 20_000_000,
            test: PtsTest::Latency,
            ..PtsOptions::default()
        };
        let outcome = pts(
            Session::new(&mut device, &mut watch, 1),
            &options,
            Some(&mut drive),
        )
        .unwrap();
        let a = measured(&outcome);
        assert_eq!(drive.ran, [EraseMethod::SecureErase]);
        assert!(
            a.first.purged && a.first.purge.starts_with("the drive's secure-erase"),
            "{}",
            a.first.purge
        );
        assert!(
            !device.log().iter().any(|(op, _, _)| *op == Op::Discard),
            "no discard"
        );
        assert!(!watch.0.iter().any(|n| n == "purge"));

        // A drive that offers neither is discarded, and the result says why its own purges were not used.
        let mut device = MemDevice::new(16 * MIB, 500_000);
        let mut drive = DrivePurges {
            offered: vec![],
            ran: vec![],
        };
        let outcome = pts(
            Session::new(&mut device, &mut watch, 1),
            &options,
            Some(&mut drive),
        )
        .unwrap();
        let t = &measured(&outcome).first;
        assert!(drive.ran.is_empty());
        assert!(
            t.purged && t.purge.starts_with("discard over the whole device"),
            "{}",
            t.purge
        );
        assert!(
            t.purge
                .contains("sanitize not offered: the drive does not offer it"),
            "{}",
            t.purge
        );
        assert!(device.log().iter().any(|(op, _, _)| *op == Op::Discard));
    }

    #[test]
    fn more_than_25_rounds_are_said_to_depart_from_the_pts() {
        let mut device = MemDevice::new(16 * MIB, 500_000);
        let mut watch = Watch(Vec::new());
        let options = PtsOptions {
            cell_ns: 20_000_000,
            test: PtsTest::Latency,
            max_rounds: 30,
            ..PtsOptions::default()
        };
        let outcome = pts(Session::new(&mut device, &mut watch, 1), &options, None).unwrap();
        let a = measured(&outcome);
        let d = a.departures.join("; ");
        assert!(d.contains("--max-rounds 30: the PTS stops at 25 rounds"), "{d}");
        // This device settles in five, so the note says the extra rounds were not used.
        assert!(d.contains("did not need more"), "{d}");
        // A run that went past round 25 is said not to conform.
        let mut long = a.first.clone();
        while long.rounds.len() < 27 {
            let mut next = long.rounds[0].clone();
            next.round = long.rounds.len() as u32 + 1;
            long.rounds.push(next);
        }
        let d = departures(&options, std::slice::from_ref(&long)).join("; ");
        assert!(d.contains("went on to round 27: it is not PTS-conforming"), "{d}");
        // A run with the specification's settings departs from nothing.
        let conforming = PtsOptions {
            cell_ns: 60_000_000_000,
            max_rounds: 25,
            ..options
        };
        assert_eq!(
            departures(&conforming, std::slice::from_ref(&a.first)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn refusals_come_before_any_io() {
        let mut device = MemDevice::new(8 * MIB, 10_000);
        let mut watch = Watch(Vec::new());
        let bad = PtsOptions {
            active_range_percent: 0.0,
            ..PtsOptions::default()
        };
        let err = pts(Session::new(&mut device, &mut watch, 1), &bad, None).unwrap_err();
        assert!(err.to_string().contains("--span"), "{err}");
        let few = PtsOptions {
            max_rounds: 4,
            ..PtsOptions::default()
        };
        let err = pts(Session::new(&mut device, &mut watch, 1), &few, None).unwrap_err();
        assert!(err.to_string().contains("--max-rounds"), "{err}");
        assert!(device.log().is_empty(), "refused before any I/O");
    }
}
