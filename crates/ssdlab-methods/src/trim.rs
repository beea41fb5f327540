//! TRIM validation (seeds 002/003): how fast sequential writes are on a clean drive, after a 4 KiB random-write
//! torture, and after the whole span is discarded. A drive that honours TRIM gets most of its clean speed back.
//!
//! Phases: purge; "clean" (sequential 128 KiB writes at QD32 from the span's start, for `measure_ns` as Iometer
//! ran them in seeds 002/003, or a whole pass as HD Tach did); "fill" (the rest of a pass over the span, when the
//! clean measurement did not cover it); "torture" (4 KiB random writes at QD32, uniform, for `torture_ns`);
//! "dirty" (the same measurement); discard of the span (and a check that discarded blocks read back as zeroes);
//! an optional idle time, for drives that reclaim trimmed space in the background; "after-trim" (the
//! measurement once more).

pub use ssdlab_core::schema::TrimAnalysis;
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::options::TrimOptions;

/// Runs the TRIM validation: clean, dirty and after-TRIM sequential write speeds, and whether discarded blocks
/// read back as zeroes.
pub fn trim(mut session: Session<'_>, options: &TrimOptions) -> Result<MethodOutcome, MethodError> {
    let span = session.whole_device(128 << 10);
    if span.len_bytes == 0 {
        return Err(MethodError::Invalid(
            "the target is smaller than one 128 KiB block".into(),
        ));
    }
    let info = session.device.info().clone();
    if !info.discard_supported {
        return Ok(without_discard(session, &info.target));
    }
    let workloads = TrimWorkloads::new(&session, span, options);
    session.purge(span)?;
    let clean = session.phase("clean", &workloads.measured)?;
    fill_rest(&mut session, &workloads, clean, options)?;
    session.phase("torture", &workloads.torture)?;
    let dirty = session.phase("dirty", &workloads.measured)?;
    let trimmed_reads_zero = discard_and_check(&mut session, span)?;
    if !session.stopped && options.idle_ns > 0 {
        session.idle(options.idle_ns);
    }
    let after = session.phase("after-trim", &workloads.measured)?;
    let states = StateFigures::of(&session, [clean, dirty, after]);
    let [clean, dirty, after] = states.bytes_per_s;
    let analysis = TrimAnalysis {
        span_bytes: span.len_bytes,
        clean_bytes_per_s: clean,
        dirty_bytes_per_s: dirty,
        after_trim_bytes_per_s: after,
        restored_fraction: if clean > 0.0 { after / clean } else { 0.0 },
        discard_supported: true,
        discard_max_bytes: info.discard_max_bytes,
        trimmed_reads_zero,
        measure_s: options.measure_ns.map(|ns| ns as f64 / 1e9),
        idle_after_trim_s: options.idle_ns as f64 / 1e9,
        state_seconds: Some(states.seconds),
        state_bytes: Some(states.bytes),
    };
    let verdict = trim_verdict(&session, &analysis, options);
    Ok(session.finish(Analysis::Trim, Some(analysis), verdict))
}

/// The outcome on a device that does not advertise discard: nothing run, and a failed verdict saying why.
fn without_discard(session: Session<'_>, target: &str) -> MethodOutcome {
    let verdict = Verdict {
        finding: false,
        passed: false,
        reasons: vec![format!(
            "{target} does not advertise discard (discard_max_bytes is 0): TRIM cannot be tested"
        )],
        unknown: false,
    };
    let analysis = TrimAnalysis {
        discard_supported: false,
        ..TrimAnalysis::default()
    };
    session.finish(Analysis::Trim, Some(analysis), verdict)
}

/// The workloads of the test: a sequential pass of 128 KiB writes at QD32, the 4 KiB random-write torture, and
/// the timed measurement of each state.
struct TrimWorkloads {
    sequential: Workload,
    torture: Workload,
    measured: Workload,
}

impl TrimWorkloads {
    /// The workloads over `span` as `options` time them.
    fn new(session: &Session<'_>, span: Span, options: &TrimOptions) -> Self {
        let sequential = Workload {
            rw: RwMode::Write,
            block_bytes: 128 << 10,
            queue_depth: 32,
            span,
            stop: StopAt {
                passes: Some(1),
                ..StopAt::default()
            },
            ..session.workload_base()
        };
        let torture = Workload {
            rw: RwMode::RandWrite,
            pattern: Pattern::Random { random_map: false },
            block_bytes: 4096,
            queue_depth: 32,
            span,
            stop: StopAt {
                runtime_ns: Some(options.torture_ns),
                ..StopAt::default()
            },
            ..session.workload_base()
        };
        // A timed measurement stops at the time or at the end of the span, whichever comes first.
        let measured = Workload {
            stop: StopAt {
                passes: Some(1),
                runtime_ns: options.measure_ns,
                ..StopAt::default()
            },
            ..sequential.clone()
        };
        TrimWorkloads {
            sequential,
            torture,
            measured,
        }
    }
}

/// Writes what the timed clean measurement (phase `clean`) did not reach, so the torture starts on a full drive.
fn fill_rest(
    session: &mut Session<'_>,
    workloads: &TrimWorkloads,
    clean: Option<usize>,
    options: &TrimOptions,
) -> Result<(), MethodError> {
    let span = workloads.sequential.span;
    // The torture needs a full drive, as the seeds' drives were: what the timed clean measurement did not
    // reach is written now. (None: the session was stopped, and every later phase is skipped anyway.)
    let clean_bytes = clean.map(|i| session.phases[i].summary.bytes);
    if let Some(written) = clean_bytes
        && options.measure_ns.is_some()
        && written < span.len_bytes
    {
        let rest = Workload {
            span: Span {
                offset_bytes: span.offset_bytes + written,
                len_bytes: span.len_bytes - written,
            },
            ..workloads.sequential.clone()
        };
        session.phase("fill", &rest)?;
    }
    Ok(())
}

/// Discards the span unless the session stopped, and checks its start, middle and end read back as zeroes:
/// Some(whether they do), or None when it was not discarded or a read failed.
fn discard_and_check(session: &mut Session<'_>, span: Span) -> Result<Option<bool>, MethodError> {
    let mut trimmed_reads_zero = None;
    if !session.stopped && session.purge(span)? {
        // Check the start, the middle and the end of the span.
        let probe = 64 << 10;
        let mut zero = Some(true);
        for offset in [0, span.len_bytes / 2 / probe * probe, span.len_bytes - probe] {
            // A read that fails leaves the answer unknown and stops the session.
            let Some(this) = session.reads_as_zero(offset, probe)? else {
                zero = None;
                break;
            };
            zero = zero.map(|all| all && this);
        }
        trimmed_reads_zero = zero;
    }
    Ok(trimmed_reads_zero)
}

/// The figures of the three measured states (clean, dirty, after TRIM), 0 for a state whose phase did not run.
struct StateFigures {
    bytes_per_s: [f64; 3],
    seconds: [f64; 3],
    bytes: [u64; 3],
}

impl StateFigures {
    /// The figures of the phases at `phases` (None: the phase did not run).
    fn of(session: &Session<'_>, phases: [Option<usize>; 3]) -> Self {
        let speed = |index: Option<usize>| index.map_or(0.0, |i| session.phases[i].summary.bytes_per_s);
        let ran = |index: Option<usize>| index.map(|i| &session.phases[i].summary);
        let states = phases.map(ran);
        StateFigures {
            bytes_per_s: phases.map(speed),
            seconds: states.map(|s| s.map_or(0.0, |s| s.seconds)),
            bytes: states.map(|s| s.map_or(0, |s| s.bytes)),
        }
    }
}

/// Passed when every phase ran and TRIM restored at least the threshold's share of clean speed; less is a
/// finding about the drive.
fn trim_verdict(session: &Session<'_>, analysis: &TrimAnalysis, options: &TrimOptions) -> Verdict {
    let mut reasons = Vec::new();
    // A drive that keeps only part of its speed after TRIM is what the test measures: a finding about the drive.
    let mut finding = false;
    if session.stopped {
        reasons.push(format!("{} before all phases ran", session.stop_reason()));
    } else if analysis.restored_fraction < options.restore_threshold {
        finding = true;
        // Measured at once, a drive that reclaims trimmed blocks only while idle reads as one whose TRIM does not
        // work: say so, and how to give it the idle time (seed 003's reader saw an 840 restored over hours).
        let when = if options.idle_ns == 0 {
            "; measured at once after the TRIM: a drive that reclaims trimmed blocks in the background while \
             idle (the 840 EVO does, over hours) gets its speed back later, so this is not proof that its TRIM \
             is broken; --idle DURATION (e.g. --idle 2h) lets it sit idle first"
                .to_string()
        } else {
            format!(
                ", after {} of idle time following the TRIM",
                ssdlab_core::units::Nanos(options.idle_ns as f64)
            )
        };
        reasons.push(format!(
            "TRIM restored {} of clean sequential write speed, below the {:.0}% threshold{when}",
            crate::analysis::percent_beside(analysis.restored_fraction, options.restore_threshold),
            100.0 * options.restore_threshold
        ));
    }
    Verdict {
        finding,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    }
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Trim;

crate::method::method_of_options!(Trim, TrimOptions, trim);
