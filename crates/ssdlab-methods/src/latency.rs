//! The QD1 latency test (seeds 000/001, IOmeter): 4 KiB operations at queue depth 1 over a span (8 GiB by
//! default): random writes by default, as IOmeter's 4K QD1 write, or random or sequential reads, sequential
//! writes, or a 70/30 random mix. Reports IOPS, MB/s, the mean and maximum latency, CPU use and the field
//! report's percentile columns (25% / median / 75% / 95% / mean) with p99 and p99.9.

pub use ssdlab_core::schema::LatencyAnalysis;
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::options::{LatencyOptions, LatencyRw};

pub fn latency(mut session: Session<'_>, options: &LatencyOptions) -> Result<MethodOutcome, MethodError> {
    let capacity = session.device.info().capacity_bytes;
    if options.span_bytes > capacity {
        session.note_larger_than_target(
            "--span",
            options.span_bytes,
            capacity,
            "the whole device is the span",
        );
    }
    let span = Span {
        offset_bytes: 0,
        len_bytes: options.span_bytes.min(capacity) / 4096 * 4096,
    };
    let (rw, pattern, phase) = match options.rw {
        LatencyRw::RandWrite => (
            RwMode::RandWrite,
            Pattern::Random { random_map: false },
            "qd1-random-write",
        ),
        LatencyRw::RandRead => (
            RwMode::RandRead,
            Pattern::Random { random_map: false },
            "qd1-random-read",
        ),
        LatencyRw::RandRw => (
            RwMode::RandRw,
            Pattern::Random { random_map: false },
            "qd1-random-mixed",
        ),
        LatencyRw::Read => (RwMode::Read, Pattern::Sequential, "qd1-sequential-read"),
        LatencyRw::Write => (RwMode::Write, Pattern::Sequential, "qd1-sequential-write"),
    };
    let workload = Workload {
        rw,
        mix_read_percent: 70,
        pattern,
        block_bytes: 4096,
        queue_depth: 1,
        span,
        stop: StopAt {
            runtime_ns: Some(options.runtime_ns),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    let index = session.phase(phase, &workload)?;
    let mut reasons = Vec::new();
    let analysis = index.map(|i| {
        let s = &session.phases[i].summary;
        let l = &s.latency_ns;
        LatencyAnalysis {
            span_bytes: span.len_bytes,
            iops: s.iops,
            bytes_per_s: s.bytes_per_s,
            latency_ns_mean: l.mean,
            latency_ns_max: l.max,
            latency_ns_p25: l.p25,
            latency_ns_p50: l.p50,
            latency_ns_p75: l.p75,
            latency_ns_p95: l.p95,
            latency_ns_p99: l.p99,
            latency_ns_p999: l.p999,
            cpu_percent: 100.0 * (s.cpu_user_s + s.cpu_sys_s) / s.seconds.max(1e-9),
        }
    });
    if session.stopped {
        reasons.push(format!("{} before the end of the run", session.stop_reason()));
    }
    let verdict = Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    Ok(session.finish(Analysis::Latency, analysis, verdict))
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Latency;

impl crate::method::Method for Latency {
    type Options = LatencyOptions;
    type Plan = LatencyOptions;

    fn recorded(plan: &Self::Plan) -> Self::Options {
        *plan
    }

    fn writes(plan: &Self::Plan) -> bool {
        plan.rw.writes()
    }

    fn run(
        session: Session<'_>,
        plan: Self::Plan,
        _context: crate::method::MethodContext<'_>,
    ) -> Result<MethodOutcome, MethodError> {
        latency(session, &plan)
    }
}
