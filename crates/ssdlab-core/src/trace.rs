//! A block I/O trace as ssdlab replays it: operations with the time they were issued, relative to the trace's
//! start. The readers of trace formats (crate `ssdlab-trace`) produce it and the engine's replay runner issues
//! it; neither needs the other's code, only this vocabulary.

use crate::device::Op;

/// One operation of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOp {
    /// When it was issued, in nanoseconds from the trace's start.
    pub at_ns: u64,
    /// Read, write, discard (TRIM) or flush (a flush carries no range).
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}
