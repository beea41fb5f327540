//! What a trace's timestamps look like, said before it is replayed: operations out of time order (a few
//! microseconds, as events from several CPUs are, or whole recordings joined one after another), and timestamps
//! too close together for the format's unit (whole seconds where the format counts 100 ns ticks). Replay issues
//! in time order, so a trace that is not one recording in order is not replayed as recorded; these notes say so
//! with the figures. It only looks; it changes no operation.

use ssdlab_core::trace::TraceOp;
use ssdlab_core::units::Nanos;

use crate::TraceFormat;

/// Out of order by less than this is how traces of several CPUs look; more is a different recording.
const CPU_SKEW_NS: u64 = 1_000_000;

/// More operations per second than this, sustained over a trace, is beyond any drive's completions: the
/// timestamps are in another unit than the format's.
const MOST_OPS_PER_S: f64 = 10e6;

/// Below this many operations, a rate says little.
const FEW_OPS: usize = 100;

/// The notes about `ops`' timestamps, in the file's order (before sorting).
pub(crate) fn notes(ops: &[TraceOp], format: TraceFormat) -> Vec<String> {
    let mut notes = Vec::new();
    notes.extend(out_of_order(ops));
    notes.extend(implausible_rate(ops, format));
    notes
}

/// How often a timestamp is earlier than the one before it, and by how much at most.
fn out_of_order(ops: &[TraceOp]) -> Option<String> {
    let (mut backs, mut largest) = (0usize, 0u64);
    for pair in ops.windows(2) {
        if pair[1].at_ns < pair[0].at_ns {
            backs += 1;
            largest = largest.max(pair[0].at_ns - pair[1].at_ns);
        }
    }
    (backs > 0).then(|| {
        if largest < CPU_SKEW_NS {
            format!(
                "{backs} operation(s) are out of time order by at most {} (as events recorded on several CPUs are); \
                 replayed in time order",
                Nanos(largest as f64)
            )
        } else {
            format!(
                "the timestamps go back {backs} time(s), by up to {}: this is not one recording in time order \
                 (several joined one after another?); it is replayed in time order, which interleaves the parts, \
                 so its timing is not the recording's",
                Nanos(largest as f64)
            )
        }
    })
}

/// A note when the trace's operations are closer together than any drive completes them.
fn implausible_rate(ops: &[TraceOp], format: TraceFormat) -> Option<String> {
    if ops.len() < FEW_OPS {
        return None;
    }
    let first = ops.iter().map(|o| o.at_ns).min()?;
    let last = ops.iter().map(|o| o.at_ns).max()?;
    let unit = match format {
        TraceFormat::FioIolog => "microseconds",
        TraceFormat::Blkparse => "seconds",
        TraceFormat::Msr => "100 ns ticks (Windows file time)",
    };
    if last == first {
        return Some(format!(
            "all {} operations carry the same time: the trace holds no timing; replay it as fast as possible",
            ops.len()
        ));
    }
    let span_s = (last - first) as f64 / 1e9;
    let per_s = ops.len() as f64 / span_s;
    (per_s > MOST_OPS_PER_S).then(|| {
        format!(
            "{} operations within {} ({:.0} million a second, more than any drive completes): the timestamps are \
             likely not in {unit}, as this format counts them; replaying at these times is not the recording's pace",
            ops.len(),
            Nanos((last - first) as f64),
            per_s / 1e6
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::device::Op;

    fn at(times_ns: &[u64]) -> Vec<TraceOp> {
        times_ns
            .iter()
            .map(|&at_ns| TraceOp {
                at_ns,
                op: Op::Read,
                offset_bytes: 0,
                len_bytes: 4096,
            })
            .collect()
    }

    #[test]
    fn joined_recordings_and_cpu_skew_are_told_apart() {
        // Two recordings of 60 s joined: the second starts again at 0.
        let joined = at(&[0, 30_000_000_000, 59_900_000_000, 1_000, 30_000_000_000]);
        let note = out_of_order(&joined).expect("out of order");
        assert!(
            note.starts_with("the timestamps go back 1 time(s), by up to 59.9 s"),
            "{note}"
        );
        let skewed = at(&[0, 5_000, 4_000, 10_000]);
        let note = out_of_order(&skewed).expect("out of order");
        assert!(
            note.starts_with("1 operation(s) are out of time order by at most 1.00 µs"),
            "{note}"
        );
        assert!(out_of_order(&at(&[0, 0, 1, 2])).is_none());
    }

    #[test]
    fn whole_seconds_read_as_ticks_are_called_out() {
        // 1,000 operations a second apart, read as 100 ns ticks: within 99.9 us.
        let ticks: Vec<u64> = (0..1000).map(|s| s * 100).collect();
        let note = implausible_rate(&at(&ticks), TraceFormat::Msr).expect("implausible");
        assert!(note.starts_with("1000 operations within 99.9 µs"), "{note}");
        assert!(note.contains("100 ns ticks"), "{note}");
        // A real pace (100K a second) says nothing.
        let real: Vec<u64> = (0..1000).map(|i| i * 10_000).collect();
        assert!(implausible_rate(&at(&real), TraceFormat::Msr).is_none());
        let same = implausible_rate(&at(&[5; 200]), TraceFormat::FioIolog).expect("no timing");
        assert!(
            same.starts_with("all 200 operations carry the same time"),
            "{same}"
        );
    }
}
