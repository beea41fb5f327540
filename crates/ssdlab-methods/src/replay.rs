//! `ssdlab test replay`: a recorded trace replayed on any device, reported as a storage bench reports it
//! (average data rate over busy time, average service time) with the latency distribution, the per-second
//! series and how faithfully the replay kept the trace's times.
//!
//! The trace is fitted to the device first, and everything the fit changed is said: operations past the end are
//! folded or scaled onto it, ranges are widened to whole logical blocks (O_DIRECT), TRIMs are dropped on a device
//! without discard. It never reads trace files; the caller hands over parsed operations.

use ssdlab_core::device::{DeviceInfo, Op};
use ssdlab_core::schema::replay::{
    ReplayAnalysis, ReplayFidelity, ReplayFit, ReplayFitReport, ReplayOptions, TraceFormat,
};
use ssdlab_core::schema::{Analysis, LatencyNs, Verdict};
use ssdlab_core::trace::TraceOp;
use ssdlab_engine::replay::ReplayPlan;

use crate::session::{MethodError, MethodOutcome, Session};

/// A parsed trace as the method takes it: owned, so fitting it to the device rewrites the operations in place
/// rather than keeping a second copy of millions of them.
#[derive(Debug, Clone)]
pub struct TraceInput {
    pub format: TraceFormat,
    pub ops: Vec<TraceOp>,
    /// What the reader noticed (events used, files merged), carried into the result's notes.
    pub notes: Vec<String>,
}

impl TraceInput {
    /// Whether replaying it writes (a trace of reads and flushes alone opens a real device read-only).
    pub fn writes(&self) -> bool {
        self.ops
            .iter()
            .any(|o| matches!(o.op, ssdlab_core::Op::Write | ssdlab_core::Op::Discard))
    }
}

/// A trace fitted to a device.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub ops: Vec<TraceOp>,
    pub report: ReplayFitReport,
}

/// The largest read or write replayed (larger ones are dropped and said): a replay's buffers are this per slot.
pub const MAX_TRANSFER_BYTES: u64 = 64 << 20;

/// The byte range `op` covers once fitted to whole logical blocks: reads and writes widened outward, TRIMs shrunk
/// inward (a partial block must not lose data the trace never trimmed). None when nothing is left or the range
/// is past 2^64.
fn aligned_range(op: &TraceOp, logical: u64) -> Option<(u64, u64)> {
    let end = op.offset_bytes.checked_add(op.len_bytes)?;
    let (start, end) = if op.op == Op::Discard {
        (
            op.offset_bytes.checked_next_multiple_of(logical)?,
            end / logical * logical,
        )
    } else {
        (
            op.offset_bytes / logical * logical,
            end.checked_next_multiple_of(logical)?,
        )
    };
    (end > start).then_some((start, end))
}

/// Fits `ops` onto the device `info` describes, scaling times by `time_scale`.
pub fn fit(mut ops: Vec<TraceOp>, info: &DeviceInfo, how: ReplayFit, time_scale: f64) -> Fitted {
    let logical = u64::from(info.logical_block_bytes.max(512));
    let capacity = info.capacity_bytes / logical * logical;
    let fitting = Fitting {
        how,
        time_scale,
        logical,
        capacity,
        extent: replayed_extent(&ops, info, logical, capacity),
        discard_supported: info.discard_supported,
    };
    let mut counts = FitCounts::default();
    // Each operation is kept (rewritten in place) or dropped and counted.
    ops.retain_mut(|op| fitting.fit_op(op, &mut counts));
    let report = ReplayFitReport {
        fit: how,
        trace_extent_bytes: fitting.extent,
        capacity_bytes: capacity,
        remapped_ops: counts.remapped,
        aligned_ops: counts.aligned,
        dropped_ops: counts.no_discard + counts.too_large + counts.unusable,
        dropped_reasons: counts.dropped_reasons(info),
    };
    Fitted { ops, report }
}

/// The end of the furthest operation that will be replayed (aligned to `logical` bytes): a dropped outlier must
/// not fold or squeeze everything else.
fn replayed_extent(ops: &[TraceOp], info: &DeviceInfo, logical: u64, capacity: u64) -> u64 {
    let kept = |o: &&TraceOp| match o.op {
        Op::Flush => false,
        Op::Discard => info.discard_supported,
        Op::Read | Op::Write => o.len_bytes <= MAX_TRANSFER_BYTES,
    };
    ops.iter()
        .filter(kept)
        .filter_map(|o| aligned_range(o, logical))
        .filter(|&(start, end)| end - start <= capacity)
        .map(|(_, end)| end)
        .max()
        .unwrap_or(0)
}

/// How a trace is fitted onto a device: the fit for a trace reaching past it, the time factor, and the device's
/// logical block, capacity (in whole blocks) and discard support, with the trace's extent.
struct Fitting {
    how: ReplayFit,
    time_scale: f64,
    logical: u64,
    capacity: u64,
    extent: u64,
    discard_supported: bool,
}

/// What fitting changed: operations aligned and remapped, and those dropped by reason.
#[derive(Debug, Default)]
struct FitCounts {
    aligned: u64,
    remapped: u64,
    no_discard: u64,
    too_large: u64,
    unusable: u64,
}

impl Fitting {
    /// Rewrites `op` in place to fit the device and returns true, or returns false to drop it; either way
    /// counted in `counts`.
    fn fit_op(&self, op: &mut TraceOp, counts: &mut FitCounts) -> bool {
        // Saturating: a float cast past u64::MAX gives u64::MAX.
        let at_ns = (op.at_ns as f64 * self.time_scale) as u64;
        if op.op == Op::Flush {
            op.at_ns = at_ns;
            return true;
        }
        if op.op == Op::Discard && !self.discard_supported {
            counts.no_discard += 1;
            return false;
        }
        let Some((start, end)) = aligned_range(op, self.logical) else {
            counts.unusable += 1;
            return false;
        };
        let len = end - start;
        if len > self.capacity || (op.op != Op::Discard && len > MAX_TRANSFER_BYTES) {
            counts.too_large += 1;
            return false;
        }
        if start != op.offset_bytes || len != op.len_bytes {
            counts.aligned += 1;
        }
        let offset = self.placed(start, len);
        if offset != start {
            counts.remapped += 1;
        }
        *op = TraceOp {
            at_ns,
            op: op.op,
            offset_bytes: offset,
            len_bytes: len,
        };
        true
    }

    /// Where an aligned range of `len` bytes at `start` lands on the device: folded or scaled when the trace
    /// reaches past the capacity, and moved back to end at the capacity if it would run past it.
    fn placed(&self, start: u64, len: u64) -> u64 {
        let mut offset = start;
        if self.extent > self.capacity {
            offset = match self.how {
                ReplayFit::Fold => offset % self.capacity,
                ReplayFit::Scale => {
                    (offset as u128 * self.capacity as u128 / self.extent as u128) as u64 / self.logical
                        * self.logical
                }
            };
        }
        if offset + len > self.capacity {
            offset = self.capacity - len;
        }
        offset
    }
}

impl FitCounts {
    /// Why operations were dropped, one reason a line, for the fit report.
    fn dropped_reasons(&self, info: &DeviceInfo) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.no_discard > 0 {
            reasons.push(format!(
                "{} TRIM(s): {} does not support discard",
                self.no_discard, info.target
            ));
        }
        if self.too_large > 0 {
            reasons.push(format!(
                "{} operation(s) larger than the whole device, or reads and writes over {} MiB",
                self.too_large,
                MAX_TRANSFER_BYTES >> 20
            ));
        }
        if self.unusable > 0 {
            reasons.push(format!(
                "{} operation(s) with a range past 2^64 bytes, or TRIMs smaller than one logical block",
                self.unusable
            ));
        }
        reasons
    }
}

fn direction(summary: Option<&ssdlab_core::schema::DirectionSummary>) -> Option<Box<LatencyNs>> {
    summary.map(|d| Box::new(d.latency_ns.clone()))
}

/// What the trace was, before fitting rewrites it: its format, operation count and first and last times.
struct TraceShape {
    format: TraceFormat,
    ops: u64,
    first_ns: u64,
    last_ns: u64,
}

impl TraceShape {
    /// The shape of `trace` as read.
    fn of(trace: &TraceInput) -> Self {
        TraceShape {
            format: trace.format,
            ops: trace.ops.len() as u64,
            first_ns: trace.ops.iter().map(|o| o.at_ns).min().unwrap_or(0),
            last_ns: trace.ops.iter().map(|o| o.at_ns).max().unwrap_or(0),
        }
    }
}

/// Replays `trace` on the session's device.
pub fn replay(
    mut session: Session<'_>,
    trace: TraceInput,
    options: &ReplayOptions,
) -> Result<MethodOutcome, MethodError> {
    check_options(options)?;
    let info = session.device.info().clone();
    let shape = TraceShape::of(&trace);
    let fitted = fit(trace.ops, &info, options.fit, options.time_scale);
    if fitted.ops.is_empty() {
        return Err(MethodError::Invalid(format!(
            "nothing of the trace can be replayed on {}: {}",
            info.target,
            fitted.report.dropped_reasons.join("; ")
        )));
    }
    session.notes.extend(trace.notes);
    note_fit(&mut session, &fitted.report, &info);
    check_buffers(options, &fitted.ops)?;
    let plan = ReplayPlan {
        ops: &fitted.ops,
        as_fast_as_possible: options.as_fast_as_possible,
        queue_depth: options.queue_depth,
        seed: session.seed,
    };
    let ran = session.replay("replay", &plan)?;
    let analysis = ran.map(|(index, facts)| {
        let replayed = Replayed {
            index,
            facts,
            fitted: &fitted,
            shape: &shape,
        };
        replay_analysis(&session, replayed, options)
    });
    if let Some(f) = analysis.as_ref().and_then(|a| a.fidelity)
        && f.late_over_1ms_ratio > 0.01
    {
        session.notes.push(format!(
            "the device fell behind the trace: {:.1}% of operations were issued more than 1 ms late (p99 {:.1} ms), \
             and their latency includes the wait",
            100.0 * f.late_over_1ms_ratio,
            f.late_ns_p99 as f64 / 1e6
        ));
    }
    let mut reasons = Vec::new();
    if session.stopped {
        reasons.push(format!("{} before the end of the trace", session.stop_reason()));
    }
    let verdict = Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    Ok(session.finish(Analysis::Replay, analysis, verdict))
}

/// Refuses a time scale that is not a positive factor and a queue depth outside 1 to 1024.
fn check_options(options: &ReplayOptions) -> Result<(), MethodError> {
    if !(options.time_scale.is_finite() && options.time_scale > 0.0) {
        return Err(MethodError::Invalid(format!(
            "--time-scale {}: a factor above 0 (0.5 replays twice as fast)",
            options.time_scale
        )));
    }
    if !(1..=1024).contains(&options.queue_depth) {
        return Err(MethodError::Invalid(format!(
            "--qd {}: between 1 and 1024 operations in flight",
            options.queue_depth
        )));
    }
    Ok(())
}

/// Says in the session's notes everything the fit changed: operations remapped, widened and dropped.
fn note_fit(session: &mut Session<'_>, r: &ReplayFitReport, info: &DeviceInfo) {
    if r.remapped_ops > 0 {
        session.notes.push(format!(
            "the trace reaches {} bytes, beyond the device's {}: {} operation(s) were {} onto it",
            r.trace_extent_bytes,
            r.capacity_bytes,
            r.remapped_ops,
            match r.fit {
                ReplayFit::Fold => "folded (offset modulo the capacity)",
                ReplayFit::Scale => "scaled (offset x capacity / extent)",
            }
        ));
    }
    if r.aligned_ops > 0 {
        session.notes.push(format!(
            "{} operation(s) widened to whole {}-byte logical blocks",
            r.aligned_ops, info.logical_block_bytes
        ));
    }
    for reason in &r.dropped_reasons {
        session.notes.push(format!("not replayed: {reason}"));
    }
}

/// Refuses a queue depth whose slots, each as large as the trace's largest transfer, would need more buffers than
/// the engine allows.
fn check_buffers(options: &ReplayOptions, ops: &[TraceOp]) -> Result<(), MethodError> {
    let largest = ops
        .iter()
        .filter(|o| matches!(o.op, Op::Read | Op::Write))
        .map(|o| o.len_bytes)
        .max()
        .unwrap_or(0);
    if largest.saturating_mul(options.queue_depth as u64) > ssdlab_core::workload::BUFFER_LIMIT_BYTES {
        return Err(MethodError::Invalid(format!(
            "--qd {}: {} slots of the trace's largest transfer ({} bytes) need more than {} GiB of buffers; use a \
             smaller --qd",
            options.queue_depth,
            options.queue_depth,
            largest,
            ssdlab_core::workload::BUFFER_LIMIT_BYTES >> 30
        )));
    }
    Ok(())
}

/// A replay that ran: its phase's index, the engine's facts, the fitted trace it replayed and the trace's shape.
struct Replayed<'a> {
    index: usize,
    facts: ssdlab_engine::replay::ReplayFacts,
    fitted: &'a Fitted,
    shape: &'a TraceShape,
}

/// The analysis of a replay that ran: what was issued by kind, the bench's data rate and service time, the
/// latencies and how faithfully the trace's times were kept.
fn replay_analysis(session: &Session<'_>, replayed: Replayed<'_>, options: &ReplayOptions) -> ReplayAnalysis {
    let Replayed {
        index,
        facts,
        fitted,
        shape,
    } = replayed;
    // What was issued: the first `issued` of the fitted operations (all of them unless stopped).
    let issued = facts.issued as usize;
    let replayed = &fitted.ops[..issued.min(fitted.ops.len())];
    let count = |op: Op| replayed.iter().filter(|o| o.op == op).count() as u64;
    let bytes = |op: Op| {
        replayed
            .iter()
            .filter(|o| o.op == op)
            .map(|o| o.len_bytes)
            .sum::<u64>()
    };
    let (busy_ns, lateness) = (facts.busy_ns, facts.lateness);
    let s = &session.phases[index].summary;
    let moved = s.read.as_ref().map_or(0, |d| d.bytes) + s.write.as_ref().map_or(0, |d| d.bytes);
    let busy_s = busy_ns as f64 / 1e9;
    ReplayAnalysis {
        format: shape.format,
        trace_ops: shape.ops,
        replayed_ops: s.ios,
        reads: count(Op::Read),
        writes: count(Op::Write),
        trims: count(Op::Discard),
        flushes: count(Op::Flush),
        read_bytes: bytes(Op::Read),
        write_bytes: bytes(Op::Write),
        trim_bytes: bytes(Op::Discard),
        trace_duration_s: (shape.last_ns - shape.first_ns) as f64 / 1e9,
        replay_duration_s: s.seconds,
        time_scale: options.time_scale,
        as_fast_as_possible: options.as_fast_as_possible,
        queue_depth: options.queue_depth,
        fit: fitted.report.clone(),
        busy_s,
        average_data_rate_bytes_per_s: if busy_s > 0.0 { moved as f64 / busy_s } else { 0.0 },
        average_service_time_ns: s.latency_ns.mean,
        average_device_time_ns: facts.device_time_ns_mean,
        latency_ns: Box::new(s.latency_ns.clone()),
        read_latency_ns: direction(s.read.as_ref()),
        write_latency_ns: direction(s.write.as_ref()),
        fidelity: lateness.filter(|h| !h.is_empty()).map(|h| ReplayFidelity {
            late_ns_p50: h.percentile(50.0),
            late_ns_p99: h.percentile(99.0),
            late_ns_max: h.max(),
            late_over_1ms_ratio: h.count_above(1_000_000) as f64 / h.count() as f64,
        }),
    }
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Replay;

impl crate::method::Method for Replay {
    type Options = ReplayOptions;
    type Plan = (ReplayOptions, TraceInput);

    fn recorded(plan: &Self::Plan) -> Self::Options {
        plan.0.clone()
    }

    fn writes(plan: &Self::Plan) -> bool {
        plan.1.writes()
    }

    fn run(
        session: Session<'_>,
        plan: Self::Plan,
        _context: crate::method::MethodContext<'_>,
    ) -> Result<MethodOutcome, MethodError> {
        replay(session, plan.1, &plan.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::Device;
    use ssdlab_testdev::MemDevice;

    fn op(at_ns: u64, op: Op, offset_bytes: u64, len_bytes: u64) -> TraceOp {
        TraceOp {
            at_ns,
            op,
            offset_bytes,
            len_bytes,
        }
    }

    #[test]
    fn a_trace_is_aligned_folded_or_scaled_onto_a_smaller_device() {
        let info = MemDevice::new(1 << 20, 1000).info().clone();
        let ops = [
            op(1000, Op::Read, 100, 1000),               // widened to 0..1536
            op(2000, Op::Write, (1 << 20) + 4096, 4096), // past the end
            op(3000, Op::Write, (4 << 20) - 4096, 4096), // the trace's furthest operation
            op(4000, Op::Flush, 0, 0),
        ];
        let fold = fit(ops.to_vec(), &info, ReplayFit::Fold, 2.0);
        assert_eq!(fold.report.trace_extent_bytes, 4 << 20);
        assert_eq!(
            (
                fold.report.aligned_ops,
                fold.report.remapped_ops,
                fold.report.dropped_ops
            ),
            (1, 2, 0)
        );
        assert_eq!((fold.ops[0].offset_bytes, fold.ops[0].len_bytes), (0, 1536));
        assert_eq!(
            fold.ops[1].offset_bytes, 4096,
            "folded: offset modulo the capacity"
        );
        assert_eq!(fold.ops[2].offset_bytes, (1 << 20) - 4096);
        assert_eq!(
            fold.ops.iter().map(|o| o.at_ns).collect::<Vec<_>>(),
            [2000, 4000, 6000, 8000]
        );
        let scale = fit(ops.to_vec(), &info, ReplayFit::Scale, 1.0);
        assert_eq!(
            scale.ops[1].offset_bytes,
            ((1 << 20) + 4096) / 4 / 512 * 512,
            "scaled by capacity / extent"
        );
        assert!(scale.ops.iter().all(|o| o.offset_bytes + o.len_bytes <= 1 << 20));
    }

    #[test]
    fn trims_are_dropped_where_the_device_cannot_discard_and_said() {
        let mut info = MemDevice::new(1 << 20, 1000).info().clone();
        info.discard_supported = false;
        let fitted = fit(
            vec![op(0, Op::Discard, 0, 4096), op(1, Op::Read, 0, 4096)],
            &info,
            ReplayFit::Fold,
            1.0,
        );
        assert_eq!(fitted.ops.len(), 1);
        assert_eq!(fitted.report.dropped_ops, 1);
        assert!(fitted.report.dropped_reasons[0].contains("does not support discard"));
    }
}
