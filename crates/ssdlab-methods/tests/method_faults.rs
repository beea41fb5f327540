//! Every method over a device that fails mid-method: it ends with an error or with a failed, incomplete
//! verdict that says an I/O error stopped it (what was measured before is kept), never with a panic, a hang or
//! a passing verdict.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::sync::atomic::AtomicBool;

use ssdlab_core::device::{Device, Op};
use ssdlab_core::schema::options::{
    ConsistencyOptions, LatencyOptions, SweepAxis, SweepOptions, TrimOptions,
};
use ssdlab_core::schema::pts::PtsOptions;
use ssdlab_core::schema::replay::{ReplayFit, ReplayOptions, TraceFormat};
use ssdlab_core::schema::{PhaseResult, Verdict};
use ssdlab_core::trace::TraceOp;
use ssdlab_engine::Observer;
use ssdlab_methods::erase::{EraseMethod, PurgeFailure, Purger, erase};
use ssdlab_methods::fanout::measure::{ReadLoad, run_independent, run_synchronized_virtual};
use ssdlab_methods::op::{OpPlan, apply, disk_layout};
use ssdlab_methods::replay::TraceInput;
use ssdlab_methods::{
    MethodError, MethodObserver, MethodOutcome, Session, consistency, latency, pts, replay, sweep, trim,
};
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, Rule};

const MIB: u64 = 1 << 20;
const S: u64 = 1_000_000_000;

/// Watches nothing; counts the phases that ended.
#[derive(Default)]
struct Watch(Vec<String>);
impl Observer for Watch {}
impl MethodObserver for Watch {
    fn begin_phase(&mut self, _name: &str) {}
    fn end_phase(&mut self, phase: &PhaseResult) {
        self.0.push(phase.name.clone());
    }
}

/// A 16 MiB memory device, 20 µs per operation, with `rule`.
fn device(rule: Rule) -> FaultDevice<MemDevice> {
    FaultDevice::new(MemDevice::new(16 * MIB, 20_000), 4).rule(rule)
}

/// Runs `method` on `device` and checks the outcome of a method an I/O error stopped: incomplete, failed,
/// saying why, and the failed phase kept.
fn stopped_by_the_fault(
    device: &mut FaultDevice<MemDevice>,
    method: impl FnOnce(Session<'_>) -> Result<MethodOutcome, MethodError>,
) -> MethodOutcome {
    let mut watch = Watch::default();
    let outcome =
        method(Session::new(device, &mut watch, 1)).expect("an I/O error is a verdict, not an error");
    assert_eq!(device.log().len(), 1, "the fault was injected once");
    assert!(!outcome.complete, "{:?}", outcome.verdict);
    assert_failed_by_io(&outcome.verdict);
    assert!(
        outcome.phases.iter().any(|p| !p.complete),
        "the phase that failed is kept, marked incomplete"
    );
    assert!(
        outcome
            .analysis
            .notes()
            .iter()
            .any(|n| n.contains("Input/output error")),
        "{:?}",
        outcome.analysis.notes()
    );
    assert_eq!(device.in_flight(), 0);
    outcome
}

#[track_caller]
fn assert_failed_by_io(verdict: &Verdict) {
    assert!(!verdict.passed, "{verdict:?}");
    assert!(
        verdict.reasons.iter().any(|r| r.contains("I/O error")),
        "the verdict says an I/O error stopped it: {verdict:?}"
    );
}

fn nth(op: Op, n: u64) -> Rule {
    Rule::new(Fault::eio()).on(&[op]).after(n).once()
}

#[test]
fn consistency_stops_at_a_failed_write_with_the_fill_kept() {
    let options = ConsistencyOptions {
        runtime_ns: 20 * S,
        round_s: 1,
        steady_window_s: 5,
        ..ConsistencyOptions::default()
    };
    // The fill is 128 writes of 128 KiB; the 2000th write is a random one.
    let mut dev = device(nth(Op::Write, 2000));
    let outcome = stopped_by_the_fault(&mut dev, |s| consistency::consistency(s, &options));
    let names: Vec<&str> = outcome.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["purge", "fill", "random-write"]);
    assert!(outcome.phases[1].complete);
    // A purge that fails stops it before the fill.
    let mut dev = device(nth(Op::Discard, 0));
    let outcome = stopped_by_the_fault(&mut dev, |s| consistency::consistency(s, &options));
    assert_eq!(outcome.phases.len(), 1);
}

#[test]
fn trim_stops_at_a_failed_discard_and_at_a_failed_zero_check() {
    let options = TrimOptions {
        torture_ns: S / 5,
        measure_ns: Some(S / 10),
        ..TrimOptions::default()
    };
    // The second purge (after the torture) fails: 16 MiB in 64 MiB pieces is one discard per purge.
    let mut dev = device(nth(Op::Discard, 1));
    stopped_by_the_fault(&mut dev, |s| trim::trim(s, &options));
    // The check that trimmed blocks read as zeroes fails: the measured phases are kept.
    let reads = Rule::new(Fault::eio()).on(&[Op::Read]).once();
    let mut dev = device(reads);
    let mut watch = Watch::default();
    let outcome = trim::trim(Session::new(&mut dev, &mut watch, 1), &options)
        .expect("a failed check is a verdict, not an error that loses the phases");
    assert!(!outcome.complete);
    assert_failed_by_io(&outcome.verdict);
    assert!(outcome.phases.len() >= 4, "{:?}", watch.0);
}

/// A size sweep of 4 KiB to 1 MiB over an 8 MiB region, a second a point.
fn size_sweep() -> SweepOptions {
    SweepOptions {
        test_bytes: 8 * MIB,
        from_bytes: 4096,
        to_bytes: MIB,
        size_runtime_ns: S,
        ..SweepOptions::default()
    }
}

#[test]
fn every_sweep_axis_stops_at_a_failed_operation() {
    let size = size_sweep();
    // The read phases come after their write phases: the 300th read is in the middle of the sizes.
    let mut dev = device(nth(Op::Read, 300));
    stopped_by_the_fault(&mut dev, |s| sweep::sweep(s, &size));
    // A fault in the third size's read (4 KiB, 8 KiB and 16 KiB read 2048, 1024 and 512 blocks of the 8 MiB
    // region): the two sizes before it are points, and the point it cut short is absent, never drawn from part of
    // a run (its read would show as zero), and said so.
    let mut dev = device(nth(Op::Read, 2048 + 1024 + 300));
    let outcome = stopped_by_the_fault(&mut dev, |s| sweep::sweep(s, &size));
    let ssdlab_core::schema::Analysis::Sweep(sweep) = &outcome.analysis else {
        panic!("a sweep analysis: {:?}", outcome.analysis);
    };
    let analysis = sweep
        .measured
        .as_ref()
        .expect("the points before the fault were measured");
    let sizes: Vec<u64> = analysis.rows.iter().map(|r| r.transfer_bytes).collect();
    assert_eq!(sizes, [4096, 8192], "{:?}", analysis.rows);
    assert!(
        analysis
            .rows
            .iter()
            .all(|r| r.read_bytes_per_s > 0.0 && r.write_bytes_per_s > 0.0)
    );
    assert!(
        analysis
            .skipped
            .iter()
            .any(|s| s.starts_with("16384 B: cut short")),
        "{:?}",
        analysis.skipped
    );
    for axis in [SweepAxis::Qd, SweepAxis::Mix] {
        let options = SweepOptions {
            axis,
            max_queue_depth: 8,
            size_runtime_ns: S / 10,
            ..size
        };
        let mut dev = device(nth(Op::Write, 100));
        stopped_by_the_fault(&mut dev, |s| sweep::sweep(s, &options));
    }
}

#[test]
fn latency_stops_at_a_failed_write() {
    let options = LatencyOptions {
        span_bytes: 8 * MIB,
        runtime_ns: 2 * S,
        ..LatencyOptions::default()
    };
    let mut dev = device(nth(Op::Write, 500));
    let outcome = stopped_by_the_fault(&mut dev, |s| latency::latency(s, &options));
    assert!(outcome.phases[0].summary.ios >= 500, "what it measured is kept");
}

#[test]
fn pts_stops_inside_a_round() {
    let options = PtsOptions {
        cell_ns: 20_000_000,
        active_range_percent: 50.0,
        ..PtsOptions::default()
    };
    // Purge and preconditioning (writes) come first; the rounds begin with 1 MiB random reads.
    let mut dev = device(nth(Op::Read, 50));
    stopped_by_the_fault(&mut dev, |s| pts::pts(s, &options, None));
}

#[test]
fn replay_stops_at_a_failed_flush() {
    let ops: Vec<TraceOp> = (0..200u64)
        .map(|i| TraceOp {
            at_ns: i * 100_000,
            op: if i % 20 == 19 { Op::Flush } else { Op::Write },
            offset_bytes: i * 4096,
            len_bytes: if i % 20 == 19 { 0 } else { 4096 },
        })
        .collect();
    let trace = TraceInput {
        format: TraceFormat::FioIolog,
        ops,
        notes: vec![],
    };
    let options = ReplayOptions {
        trace: "t".into(),
        format: TraceFormat::FioIolog,
        time_scale: 1.0,
        as_fast_as_possible: false,
        queue_depth: 4,
        fit: ReplayFit::Fold,
        msr_disk: None,
    };
    let mut dev = device(nth(Op::Flush, 3));
    stopped_by_the_fault(&mut dev, |s| replay::replay(s, trace, &options));
}

/// Offers discard only and "runs" it as told.
struct DiscardOnly;

impl Purger for DiscardOnly {
    fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
        (method == EraseMethod::Discard)
            .then_some(())
            .ok_or_else(|| "no".into())
    }
    fn purge(&mut self, _: EraseMethod) -> Result<String, PurgeFailure> {
        Ok("discarded".into())
    }
}

#[test]
fn erase_fails_on_a_sample_it_cannot_read_before_and_records_one_after() {
    let mut dev = device(nth(Op::Read, 3));
    let err = erase(&mut dev, &mut DiscardOnly, None, 8, 1).unwrap_err();
    assert!(err.to_string().contains("Input/output error"), "{err}");
    // A short read after the purge is part of the record, not an error that would lose it.
    let short = Rule::new(Fault::Short { keep_bytes: 512 })
        .on(&[Op::Read])
        .after(10)
        .once();
    let mut dev = device(short);
    let report = erase(&mut dev, &mut DiscardOnly, None, 8, 1).unwrap();
    assert_eq!(report.method, None);
    assert!(
        report.steps.iter().any(|s| s.outcome.contains("not verified")),
        "{:?}",
        report.steps
    );
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn op_refuses_on_an_unreadable_table_and_records_a_failed_read_back() {
    let plan = OpPlan::new(16 * MIB, 25.0).unwrap();
    let mut dev = device(nth(Op::Read, 0));
    assert!(disk_layout(&mut dev).is_err());
    let mut dev = device(nth(Op::Discard, 0));
    let err = apply(&mut dev, &plan, &[], 4, 1).unwrap_err();
    assert!(err.to_string().contains("partly discarded"), "{err}");
    // The discard and the flush went through; a read of the tail after them fails: recorded.
    let mut dev = device(nth(Op::Read, 2));
    let applied = apply(&mut dev, &plan, &[], 4, 1).expect("the tail was discarded: a record");
    assert!(applied.read_back_error.is_some_and(|e| e.contains("-5")));
    // A failed flush after the discard is recorded the same way.
    let mut dev = device(nth(Op::Flush, 0));
    let applied = apply(&mut dev, &plan, &[], 4, 1).unwrap();
    assert!(applied.read_back_error.is_some());
}

#[test]
fn fanout_reports_a_drive_whose_read_fails_or_comes_back_short() {
    let load = ReadLoad {
        block_bytes: 4096,
        runtime_ns: S,
        seed: 3,
        cpu_wait: ssdlab_methods::fanout::measure::no_cpu_wait,
    };
    let stop = AtomicBool::new(false);
    for fault in [Fault::eio(), Fault::Short { keep_bytes: 2048 }] {
        let mut drives = vec![
            device(Rule::new(Fault::Stall { ns: 0 }).on(&[Op::Write])),
            device(Rule::new(fault.clone()).on(&[Op::Read]).after(50).once()),
        ];
        let (reads, _) = run_synchronized_virtual(&mut drives, &load, &stop).unwrap();
        assert!(reads[0].failure.is_none());
        let failure = reads[1].failure.as_ref().expect("the second drive's read failed");
        assert_eq!(
            reads[1].histogram.count(),
            50,
            "{fault:?}: the reads before it are kept"
        );
        assert!(failure.contains("at offset"), "{fault:?}: {failure}");
    }
    let open = |i: usize| -> Result<Box<dyn Device>, MethodError> {
        let rule = Rule::new(Fault::eio())
            .on(&[Op::Read])
            .after(if i == 1 { 7 } else { u64::MAX })
            .once();
        Ok(Box::new(device(rule)))
    };
    let reads = run_independent(3, &open, &load, &stop).unwrap();
    assert_eq!(
        reads.iter().map(|r| r.failure.is_some()).collect::<Vec<_>>(),
        [false, true, false]
    );
}

/// Asks the session to stop once the phase `at` has issued `after` operations: a Ctrl-C in the middle of it.
struct InterruptAt {
    at: &'static str,
    after: u32,
    in_phase: bool,
    asked: std::cell::Cell<u32>,
}

impl Observer for InterruptAt {
    fn stop_requested(&self) -> bool {
        if !self.in_phase {
            return false;
        }
        self.asked.set(self.asked.get() + 1);
        self.asked.get() > self.after
    }
}

impl MethodObserver for InterruptAt {
    fn begin_phase(&mut self, name: &str) {
        self.in_phase = name == self.at;
    }
    fn end_phase(&mut self, _phase: &PhaseResult) {}
}

/// An interrupt in the middle of a size's read keeps that point, marked partial with its figures over the part
/// that ran, and says so; a failed operation at the same place leaves it out (above).
#[test]
fn a_sweep_point_an_interrupt_cut_short_is_kept_marked_partial() {
    let size = size_sweep();
    let mut dev = FaultDevice::new(MemDevice::new(16 * MIB, 20_000), 4);
    let mut observer = InterruptAt {
        at: "read-16k",
        after: 100,
        in_phase: false,
        asked: std::cell::Cell::new(0),
    };
    let outcome = sweep::sweep(Session::new(&mut dev, &mut observer, 1), &size).unwrap();
    assert!(!outcome.complete);
    let ssdlab_core::schema::Analysis::Sweep(sweep) = &outcome.analysis else {
        panic!("a sweep analysis: {:?}", outcome.analysis);
    };
    let analysis = sweep.measured.as_ref().expect("measured points");
    let rows: Vec<(u64, bool)> = analysis
        .rows
        .iter()
        .map(|r| (r.transfer_bytes, r.partial))
        .collect();
    assert_eq!(
        rows,
        [(4096, false), (8192, false), (16384, true)],
        "{:?}",
        analysis.rows
    );
    let cut = &analysis.rows[2];
    assert!(
        cut.read_bytes > 0 && cut.read_bytes < 8 * MIB && cut.read_bytes_per_s > 0.0,
        "its read figures are over the part that ran: {cut:?}"
    );
    assert!(
        analysis
            .skipped
            .iter()
            .any(|s| s.starts_with("16384 B: cut short by the interrupt")),
        "{:?}",
        analysis.skipped
    );
}
