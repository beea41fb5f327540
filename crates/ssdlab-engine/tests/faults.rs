//! The engine under injected faults: an I/O error or a short transfer ends the phase, which comes back marked
//! incomplete with the failure named (the binary exits 1 on it and keeps the result); a device that refuses a
//! submission does the same; a stall is measured, not an error; nothing ever hangs and nothing is left in flight.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::device::{Device, Op};
use ssdlab_core::trace::TraceOp;
use ssdlab_engine::replay::{ReplayPlan, run_trace};
use ssdlab_engine::runner::Quiet;
use ssdlab_engine::{Pattern, RwMode, Span, StopAt, Workload, run_phase};
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, Rule};

const MIB: u64 = 1 << 20;

fn workload(rw: RwMode, stop: StopAt) -> Workload {
    Workload {
        rw,
        mix_read_percent: 50,
        pattern: if rw.is_random() {
            Pattern::Random { random_map: true }
        } else {
            Pattern::Sequential
        },
        block_bytes: 4096,
        queue_depth: 8,
        span: Span {
            offset_bytes: 0,
            len_bytes: MIB,
        },
        stop,
        rate: None,
        seed: 3,
        verify: false,
    }
}

fn passes(n: u64) -> StopAt {
    StopAt {
        passes: Some(n),
        ..StopAt::default()
    }
}

fn device(rule: Rule) -> FaultDevice<MemDevice> {
    FaultDevice::new(MemDevice::new(MIB, 100_000), 9).rule(rule)
}

#[test]
fn an_io_error_ends_the_phase_incomplete_with_the_error_named() {
    // Four passes would be 1024 writes; the 100th fails.
    let mut dev = device(Rule::new(Fault::eio()).on(&[Op::Write]).after(99).once());
    let w = Workload {
        stop: StopAt {
            passes: Some(4),
            runtime_ns: Some(3_600_000_000_000),
            ..StopAt::default()
        },
        ..workload(RwMode::RandWrite, StopAt::default())
    };
    let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
    let injected = dev.log().entries();
    assert_eq!(injected.len(), 1);
    assert!(!out.complete, "an I/O error leaves the phase incomplete");
    let failure = out.io_failure.expect("the failure is named");
    assert_eq!(
        (failure.op, failure.offset, failure.len, failure.result),
        (Op::Write, injected[0].io.offset, 4096, -5)
    );
    assert!(failure.to_string().contains("Input/output error"), "{failure}");
    assert_eq!(out.summary.io_errors, 1);
    assert_eq!(
        out.summary.ios,
        dev.inner().log().len() as u64,
        "every write that reached the device succeeded and was counted"
    );
    // It stopped issuing once the failure came back: what it issued after is what was already in flight.
    assert!(
        dev.inner().log().len() < 99 + 8,
        "{} writes issued",
        dev.inner().log().len()
    );
    assert_eq!(dev.in_flight(), 0, "nothing left in flight");
    assert!(
        out.summary.seconds < 1.0,
        "it ended at the failure, not at the runtime"
    );
}

#[test]
fn a_short_read_is_a_failure_with_its_count() {
    let mut dev = device(
        Rule::new(Fault::Short { keep_bytes: 1024 })
            .on(&[Op::Read])
            .after(9)
            .once(),
    );
    let out = run_phase(&mut dev, &workload(RwMode::Read, passes(1)), &mut Quiet).unwrap();
    let failure = out.io_failure.expect("a short transfer fails the phase");
    assert_eq!(failure.result, 1024);
    assert_eq!(failure.offset, 9 * 4096);
    assert!(
        failure.to_string().contains("transferred 1024 of 4096 bytes"),
        "{failure}"
    );
    assert!(!out.complete);
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn a_torn_write_and_a_failing_discard_fail_the_phase_too() {
    for (rw, rule) in [
        (
            RwMode::Write,
            Rule::new(Fault::Torn { landed_bytes: 2048 })
                .on(&[Op::Write])
                .after(5)
                .once(),
        ),
        (
            RwMode::Trim,
            Rule::new(Fault::eio()).on(&[Op::Discard]).after(5).once(),
        ),
    ] {
        let mut dev = device(rule);
        let out = run_phase(&mut dev, &workload(rw, passes(1)), &mut Quiet).unwrap();
        assert!(!out.complete, "{rw:?}");
        assert_eq!(out.io_failure.map(|f| f.result), Some(-5), "{rw:?}");
        assert_eq!(dev.in_flight(), 0);
    }
}

#[test]
fn a_stall_is_measured_not_an_error_and_does_not_hang() {
    let hour = 3_600_000_000_000;
    let mut dev = device(Rule::new(Fault::Stall { ns: hour }).after(50).once());
    let w = Workload {
        stop: StopAt {
            runtime_ns: Some(2_000_000_000),
            ..StopAt::default()
        },
        ..workload(RwMode::RandRead, StopAt::default())
    };
    let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
    assert!(out.complete, "a slow operation is not a failed one");
    assert!(out.io_failure.is_none());
    assert!(
        out.summary.latency_ns.max >= hour,
        "{}",
        out.summary.latency_ns.max
    );
    // The other seven slots kept going until the runtime; then the phase waited for the stalled read.
    assert!(out.summary.ios > 100_000, "{}", out.summary.ios);
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn a_read_that_fails_during_the_verify_pass_is_a_verify_failure() {
    // One pass of verified writes (256 of them), then the read-back pass: its 10th read fails.
    let mut dev = device(Rule::new(Fault::eio()).on(&[Op::Read]).after(9).once());
    let w = Workload {
        verify: true,
        ..workload(RwMode::RandWrite, passes(1))
    };
    let out = run_phase(&mut dev, &w, &mut Quiet).unwrap();
    assert_eq!(dev.log().len(), 1, "the read-back reached the fault");
    assert_eq!(out.summary.verify_errors, 1, "the block could not be checked");
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn read_backs_the_device_refuses_are_verify_failures_and_the_result_is_kept() {
    // The write pass's 256 blocks are read back; from the 200th read on the device refuses reads.
    let mut dev = device(
        Rule::new(Fault::Refuse("media gone".into()))
            .on(&[Op::Read])
            .after(199),
    );
    let w = Workload {
        verify: true,
        ..workload(RwMode::RandWrite, passes(1))
    };
    let out = run_phase(&mut dev, &w, &mut Quiet).expect("a refused read-back does not lose the phase");
    let read_back = dev.inner().log().iter().filter(|l| l.0 == Op::Read).count() as u64;
    assert!(
        (192..200).contains(&read_back),
        "{read_back} read back before the refusals"
    );
    assert_eq!(
        out.summary.verify_errors,
        256 - read_back,
        "every block that could not be read back is counted"
    );
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn a_refused_submission_ends_the_phase_incomplete_with_the_reason() {
    let mut dev = device(
        Rule::new(Fault::Refuse("the device went away".into()))
            .after(40)
            .once(),
    );
    let out = run_phase(&mut dev, &workload(RwMode::RandRead, passes(1)), &mut Quiet)
        .expect("a refusal is the phase's failure, not an error that loses the result");
    assert!(!out.complete);
    let failure = out.io_failure.expect("the refusal is named");
    assert!(failure.to_string().contains("the device went away"), "{failure}");
    assert_eq!(out.summary.io_errors, 1);
    assert_eq!(dev.in_flight(), 0, "what was in flight was drained");
}

fn op(at_us: u64, op: Op, offset: u64, len: u64) -> TraceOp {
    TraceOp {
        at_ns: at_us * 1000,
        op,
        offset_bytes: offset,
        len_bytes: len,
    }
}

#[test]
fn a_replay_stops_at_a_failed_flush_and_says_how_far_it_got() {
    let mut ops = Vec::new();
    for i in 0..40u64 {
        ops.push(op(i * 100, Op::Write, i * 4096, 4096));
        if i % 10 == 9 {
            ops.push(op(i * 100 + 50, Op::Flush, 0, 0));
        }
    }
    // The second flush fails.
    let mut dev = device(Rule::new(Fault::eio()).on(&[Op::Flush]).after(1).once());
    let plan = ReplayPlan {
        ops: &ops,
        as_fast_as_possible: false,
        queue_depth: 4,
        seed: 1,
    };
    let out = run_trace(&mut dev, &plan, &mut Quiet).unwrap();
    assert!(!out.phase.complete);
    let failure = out.phase.io_failure.expect("the flush's failure");
    assert_eq!((failure.op, failure.result), (Op::Flush, -5));
    assert!(
        out.facts.issued < ops.len() as u64 && out.facts.issued >= 22,
        "issued {} of {}",
        out.facts.issued,
        ops.len()
    );
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn a_replay_refused_by_the_device_keeps_what_it_measured() {
    let ops: Vec<TraceOp> = (0..50).map(|i| op(i * 100, Op::Read, i * 4096, 4096)).collect();
    let mut dev = device(Rule::new(Fault::Refuse("gone".into())).after(20));
    let plan = ReplayPlan {
        ops: &ops,
        as_fast_as_possible: true,
        queue_depth: 4,
        seed: 1,
    };
    let out = run_trace(&mut dev, &plan, &mut Quiet).expect("a refusal ends the replay, it does not lose it");
    assert!(!out.phase.complete);
    assert!(
        out.phase
            .io_failure
            .is_some_and(|f| f.to_string().contains("gone"))
    );
    assert!(out.phase.summary.ios >= 20);
    assert_eq!(dev.in_flight(), 0);
}
