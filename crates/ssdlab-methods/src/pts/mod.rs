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

use ssdlab_core::schema::pts::{PtsAnalysis, PtsCell, PtsCellResult, PtsRound};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::pts::{PtsOptions, PtsTest};

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

/// Runs one PTS test.
pub fn pts(mut session: Session<'_>, options: &PtsOptions) -> Result<MethodOutcome, MethodError> {
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
    let info = session.device.info().clone();
    let whole = session.whole_device(ALIGN_BYTES);
    let active = Span {
        offset_bytes: 0,
        len_bytes: (whole.len_bytes as f64 * options.active_range_percent / 100.0) as u64 / ALIGN_BYTES
            * ALIGN_BYTES,
    };
    if active.len_bytes == 0 {
        return Err(MethodError::Invalid(format!(
            "--span {}%: on {} that ActiveRange holds less than one 1 MiB block; the PTS needs at least that",
            options.active_range_percent, info.target
        )));
    }
    let (tracking_cell, tracking_metric) = matrix::tracking(options.test, options.queue_depth);
    let mut cells = matrix::cells(options.test, options.queue_depth);
    let mut skipped = Vec::new();
    let logical = u64::from(info.logical_block_bytes.max(1));
    cells.retain(|c| {
        let fits = c.block_bytes >= logical && c.block_bytes.is_multiple_of(logical);
        let why = format!(
            "{} KiB cells: below the device's {logical}-byte logical block",
            c.block_bytes as f64 / 1024.0
        );
        if !fits && !skipped.contains(&why) {
            skipped.push(why);
        }
        fits
    });
    // Refused before the purge: without its tracking cell the test cannot decide steady state.
    if !cells.contains(&tracking_cell) {
        return Err(MethodError::Invalid(format!(
            "{}: the tracking cell ({} KiB) is below the device's {logical}-byte logical block",
            info.target,
            tracking_cell.block_bytes / 1024
        )));
    }

    let purged = session.purge(whole)?;
    if !purged {
        session.notes.push(
            "the PTS requires a purge before preconditioning: these results are not PTS-conformant".into(),
        );
    }
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
        && let Some(i) = session.phase("precondition", &precondition)?
    {
        preconditioning_bytes = session.phases[i].summary.bytes;
    }

    let mut rounds: Vec<PtsRound> = Vec::new();
    for round in 1..=options.max_rounds {
        let mut results = Vec::with_capacity(cells.len());
        for (index, cell) in cells.iter().enumerate() {
            let seed = ssdlab_core::rng::splitmix64(session.seed ^ ((round as u64) << 32 | index as u64));
            let workload = cell_workload(&session, cell, active, options.cell_ns, seed);
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
            });
            // 56 cells a round for up to 25 rounds: the round table holds each cell's figures, so the per-second
            // samples and histograms are kept only for the tracking cell.
            phase.summary.latency_histogram = None;
            if *cell != tracking_cell {
                phase.samples.clear();
            }
        }
        if results.len() < cells.len() {
            break; // interrupted inside the round: it does not count
        }
        let tracking = results
            .iter()
            .find(|r| r.cell == tracking_cell)
            .map(|r| matrix::value(r, tracking_metric))
            .expect("the tracking cell is one of the cells, checked before the purge");
        rounds.push(PtsRound {
            round,
            tracking,
            cells: results,
        });
        let series: Vec<f64> = rounds.iter().map(|r| r.tracking).collect();
        if steady::last_window_passes(&series) {
            break;
        }
    }

    let series: Vec<f64> = rounds.iter().map(|r| r.tracking).collect();
    let steady_state = steady::determine(&series, options.max_rounds);
    let window: Vec<PtsRound> = match (steady_state.window_first_round, steady_state.window_last_round) {
        (Some(first), Some(last)) => rounds
            .iter()
            .filter(|r| (first..=last).contains(&r.round))
            .cloned()
            .collect(),
        _ => rounds.clone(),
    };
    let mut reasons = Vec::new();
    if session.stopped {
        reasons.push(format!(
            "{} after {} complete round(s)",
            session.stop_reason(),
            rounds.len()
        ));
    } else if !steady_state.achieved {
        reasons.push(format!(
            "steady state not achieved in {} rounds: the last five moved {:.1}% (range, limit 20%) and {:.1}% \
             (slope, limit 10%)",
            rounds.len(),
            100.0 * steady_state.range_excursion.unwrap_or(f64::NAN),
            100.0 * steady_state.slope_excursion.unwrap_or(f64::NAN)
        ));
    }
    let analysis = (!rounds.is_empty()).then(|| PtsAnalysis {
        test: options.test,
        capacity_bytes: info.capacity_bytes,
        active_range_bytes: active.len_bytes,
        active_range_percent: options.active_range_percent,
        cell_s: options.cell_ns as f64 / 1e9,
        purged,
        preconditioning_bytes,
        tracking_cell,
        tracking_metric,
        matrix: matrix::window_average(&window),
        rounds,
        steady_state,
        skipped,
    });
    let verdict = Verdict {
        passed: reasons.is_empty() && analysis.is_some(),
        reasons: if analysis.is_none() && reasons.is_empty() {
            vec!["no round completed".into()]
        } else {
            reasons
        },
    };
    Ok(session.finish(Analysis::Pts, analysis, verdict))
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
        let outcome = pts(Session::new(&mut device, &mut watch, 1), &options).unwrap();
        let Analysis::Pts(analysis) = &outcome.analysis else {
            panic!("a pts analysis");
        };
        let a = analysis.measured.as_ref().expect("measured");
        assert!(outcome.verdict.passed, "{:?}", outcome.verdict);
        assert!(
            a.steady_state.achieved && a.rounds.len() == 5,
            "{:?}",
            a.steady_state
        );
        assert_eq!(a.steady_state.window_first_round, Some(1));
        assert_eq!(a.matrix.len(), 56);
        assert!(a.purged && a.skipped.is_empty());

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
        assert_eq!(a.preconditioning_bytes, 2 * capacity);
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
            a.rounds.iter().all(|r| (r.tracking - 64_000.0).abs() < 64.0),
            "{:?}",
            a.rounds[0].tracking
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
        let err = pts(Session::new(&mut device, &mut watch, 1), &bad).unwrap_err();
        assert!(err.to_string().contains("--span"), "{err}");
        let few = PtsOptions {
            max_rounds: 4,
            ..PtsOptions::default()
        };
        let err = pts(Session::new(&mut device, &mut watch, 1), &few).unwrap_err();
        assert!(err.to_string().contains("--max-rounds"), "{err}");
        assert!(device.log().is_empty(), "refused before any I/O");
    }
}
