//! ssdlab-trace: block I/O traces in, [`TraceOp`]s out.
//!
//! Readers for the formats people record with real tools (fio's `write_iolog`, `blktrace` + `blkparse`, the MSR
//! Cambridge traces), format detection, and the synthetic desktop traces of `ssdlab trace synth`, written as fio
//! iolog v3. Parsing is pure: the caller reads the file and hands over its text, so a malformed trace fails with
//! the line at fault and nothing else happens. It never touches a device.
#![forbid(unsafe_code)]

mod blkparse;
mod fio;
mod msr;
pub mod synth;

pub use ssdlab_core::schema::replay::TraceFormat;
pub use ssdlab_core::trace::TraceOp;

/// Why a trace could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("the trace holds no operations")]
    Empty,
    #[error(
        "not a trace this reader knows: the first line is neither fio's iolog header, a blkparse event nor an \
         MSR CSV row; name the format with --format"
    )]
    Unknown,
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl TraceError {
    pub(crate) fn line(line: usize, message: impl Into<String>) -> Self {
        TraceError::Line {
            line,
            message: message.into(),
        }
    }
}

/// A parsed trace: its operations in time order, and what the reader noticed (events chosen, files merged).
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub format: TraceFormat,
    pub ops: Vec<TraceOp>,
    pub notes: Vec<String>,
}

/// What a reader needs beyond the text.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// MSR traces: the disk to take when the file holds several.
    pub msr_disk: Option<u32>,
}

/// The format of a trace's text, from its first meaningful line.
pub fn detect(text: &str) -> Option<TraceFormat> {
    // The first meaningful line; an MSR file's optional CSV header does not count.
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("timestamp,"))?;
    if first.starts_with("fio version 2 iolog") || first.starts_with("fio version 3 iolog") {
        Some(TraceFormat::FioIolog)
    } else if blkparse::is_event_line(first) {
        Some(TraceFormat::Blkparse)
    } else if msr::looks_like_row(first) {
        Some(TraceFormat::Msr)
    } else {
        None
    }
}

/// Reads `text` as `format` (detected when None).
pub fn read(text: &str, format: Option<TraceFormat>, options: ReadOptions) -> Result<Trace, TraceError> {
    let format = format.or_else(|| detect(text)).ok_or(TraceError::Unknown)?;
    let mut trace = match format {
        TraceFormat::FioIolog => fio::read(text)?,
        TraceFormat::Blkparse => blkparse::read(text)?,
        TraceFormat::Msr => msr::read(text, options.msr_disk)?,
    };
    if trace.ops.is_empty() {
        return Err(TraceError::Empty);
    }
    // Replay issues in time order; equal times keep the file's order.
    trace.ops.sort_by_key(|op| op.at_ns);
    Ok(trace)
}

/// A trace's operations as (time, op, offset, length), for tests to compare whole lists.
#[cfg(test)]
pub(crate) fn tuples(trace: &Trace) -> Vec<(u64, ssdlab_core::device::Op, u64, u64)> {
    trace
        .ops
        .iter()
        .map(|o| (o.at_ns, o.op, o.offset_bytes, o.len_bytes))
        .collect()
}

/// Parses a decimal number field, naming it in the error.
pub(crate) fn number(line: usize, what: &str, text: &str) -> Result<u64, TraceError> {
    text.parse()
        .map_err(|_| TraceError::line(line, format!("{what} '{text}' is not a whole number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_detected_from_the_first_line() {
        assert_eq!(
            detect("fio version 3 iolog\n0 /dev/x add\n"),
            Some(TraceFormat::FioIolog)
        );
        assert_eq!(
            detect("  7,0    0        1     0.000000000  4242  Q   W 0 + 128 [dd]\n"),
            Some(TraceFormat::Blkparse)
        );
        assert_eq!(
            detect("128166372003061629,hm,1,Read,3420143616,65536,1366\n"),
            Some(TraceFormat::Msr)
        );
        assert_eq!(
            detect("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,hm,1,Read,0,4096,1\n"),
            Some(TraceFormat::Msr)
        );
        assert_eq!(detect("hello\n"), None);
        assert_eq!(
            read("hello\n", None, ReadOptions::default()),
            Err(TraceError::Unknown)
        );
        assert_eq!(
            read("fio version 3 iolog\n0 /f add\n", None, ReadOptions::default()),
            Err(TraceError::Empty)
        );
    }
}
