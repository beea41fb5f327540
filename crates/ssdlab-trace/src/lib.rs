//! ssdlab-trace: block I/O traces in, [`TraceOp`]s out.
//!
//! Readers for the formats people record with real tools (fio's `write_iolog`, `blktrace` + `blkparse`, the MSR
//! Cambridge traces), format detection, and the synthetic desktop traces of `ssdlab trace synth`, written as fio
//! iolog v3. Parsing reads the trace line by line from any reader (a file of millions of operations is never held
//! as text; only its operations are kept), and a malformed trace fails with the line at fault before anything
//! else happens. It never touches a device.
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

/// A trace's lines, one at a time, as the readers take them.
pub(crate) type Lines<'a> = dyn Iterator<Item = Result<String, TraceError>> + 'a;

/// Reads `text` as `format` (detected when None).
pub fn read(text: &str, format: Option<TraceFormat>, options: ReadOptions) -> Result<Trace, TraceError> {
    read_from(text.as_bytes(), format, options)
}

/// Reads a trace from `input` line by line as `format` (detected from its first meaningful line when None).
pub fn read_from(
    input: impl std::io::BufRead,
    format: Option<TraceFormat>,
    options: ReadOptions,
) -> Result<Trace, TraceError> {
    let mut numbered = input
        .lines()
        .enumerate()
        .map(|(i, line)| line.map_err(|e| TraceError::line(i + 1, format!("cannot be read as text ({e})"))));
    // The lines up to the first meaningful one are kept to detect the format, then read again by the reader.
    let mut head = Vec::new();
    if format.is_none() {
        for line in numbered.by_ref() {
            let line = line?;
            let meaningful =
                !line.trim().is_empty() && !line.trim().to_ascii_lowercase().starts_with("timestamp,");
            head.push(line);
            if meaningful {
                break;
            }
        }
    }
    let format = format
        .or_else(|| head.last().and_then(|line| detect(line)))
        .ok_or(TraceError::Unknown)?;
    let mut lines = head.into_iter().map(Ok).chain(numbered);
    let mut trace = match format {
        TraceFormat::FioIolog => fio::read(&mut lines)?,
        TraceFormat::Blkparse => blkparse::read(&mut lines)?,
        TraceFormat::Msr => msr::read(&mut lines, options.msr_disk)?,
    };
    if trace.ops.is_empty() {
        return Err(TraceError::Empty);
    }
    // Replay issues in time order; equal times keep the file's order.
    trace.ops.sort_by_key(|op| op.at_ns);
    Ok(trace)
}

/// A text's lines as a reader takes them, for the readers' own tests.
#[cfg(test)]
pub(crate) fn test_lines(text: &str) -> impl Iterator<Item = Result<String, TraceError>> + '_ {
    text.lines().map(|l| Ok(l.to_string()))
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
