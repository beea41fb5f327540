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
mod timing;

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

/// A trace's lines, one at a time with their numbers (from 1), as the readers take them.
pub(crate) type Lines<'a> = dyn Iterator<Item = Result<(usize, String), TraceError>> + 'a;

/// The longest line a trace may have: real trace lines are under 200 bytes; one without an end is not a trace.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Reads `text` as `format` (detected when None).
pub fn read(text: &str, format: Option<TraceFormat>, options: ReadOptions) -> Result<Trace, TraceError> {
    read_from(text.as_bytes(), format, options)
}

/// `input`'s lines with their numbers, each at most [`MAX_LINE_BYTES`] (a longer one is an error, quoted by a
/// short prefix only), so no input can make one line cost more memory than that.
fn numbered_lines(
    mut input: impl std::io::BufRead,
) -> impl Iterator<Item = Result<(usize, String), TraceError>> {
    let mut number = 0;
    let mut done = false;
    let mut buf = Vec::new();
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        number += 1;
        buf.clear();
        let read = std::io::BufRead::read_until(
            &mut std::io::Read::take(&mut input, MAX_LINE_BYTES as u64 + 1),
            b'\n',
            &mut buf,
        );
        match read {
            Err(e) => {
                done = true;
                Some(Err(TraceError::line(number, format!("cannot be read ({e})"))))
            }
            Ok(0) => None,
            Ok(_) => {
                let ended = buf.last() == Some(&b'\n');
                if ended {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                }
                if !ended && buf.len() > MAX_LINE_BYTES {
                    done = true;
                    return Some(Err(TraceError::line(
                        number,
                        format!(
                            "longer than {MAX_LINE_BYTES} bytes, which no trace line is (it starts {})",
                            quote(&String::from_utf8_lossy(&buf))
                        ),
                    )));
                }
                match String::from_utf8(std::mem::take(&mut buf)) {
                    Ok(line) => Some(Ok((number, line))),
                    Err(_) => {
                        done = true;
                        Some(Err(TraceError::line(
                            number,
                            "cannot be read as text (it is not UTF-8)",
                        )))
                    }
                }
            }
        }
    })
}

/// Distinct values seen (files, devices, disks), each looked up in constant time so a trace of many names stays
/// linear, with the first few kept in order to name them.
pub(crate) struct Distinct<T> {
    seen: std::collections::HashSet<T>,
    first: Vec<T>,
}

impl<T: std::hash::Hash + Eq + Clone + std::fmt::Display> Distinct<T> {
    /// How many values are named before the rest are counted.
    const NAMED: usize = 5;

    pub(crate) fn new() -> Self {
        Distinct {
            seen: std::collections::HashSet::new(),
            first: Vec::new(),
        }
    }

    /// Adds `value`; true when it was not seen before.
    pub(crate) fn insert(&mut self, value: &T) -> bool {
        if self.seen.contains(value) {
            return false;
        }
        if self.first.len() < Self::NAMED {
            self.first.push(value.clone());
        }
        self.seen.insert(value.clone());
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }

    /// "a, b, c" or "a, b, c, d, e and 7 more", in the order first seen.
    pub(crate) fn named(&self) -> String {
        let shown: Vec<String> = self.first.iter().map(|v| v.to_string()).collect();
        match self.seen.len() - self.first.len() {
            0 => shown.join(", "),
            more => format!("{} and {more} more", shown.join(", ")),
        }
    }
}

/// Quotes at most the first 60 characters of `text`, so a bad line of any length makes a short message.
pub(crate) fn quote(text: &str) -> String {
    const SHOWN: usize = 60;
    let mut chars = text.chars();
    let shown: String = chars.by_ref().take(SHOWN).collect();
    if chars.next().is_some() {
        format!("'{shown}...'")
    } else {
        format!("'{shown}'")
    }
}

/// Reads a trace from `input` line by line as `format` (detected from its first meaningful line when None).
pub fn read_from(
    input: impl std::io::BufRead,
    format: Option<TraceFormat>,
    options: ReadOptions,
) -> Result<Trace, TraceError> {
    let mut numbered = numbered_lines(input);
    // The first meaningful line decides the format and is then read again by the reader; blank lines and an MSR
    // header before it are kept only as a count (their numbers stay right).
    let mut head = Vec::new();
    if format.is_none() {
        for line in numbered.by_ref() {
            let (n, line) = line?;
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let header = trimmed.to_ascii_lowercase().starts_with("timestamp,");
            head.push((n, line));
            if !header {
                break;
            }
        }
    }
    let format = format
        .or_else(|| head.last().and_then(|(_, line)| detect(line)))
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
    // What the timestamps look like, said before they are sorted away.
    trace.notes.extend(timing::notes(&trace.ops, format));
    // Replay issues in time order; equal times keep the file's order.
    trace.ops.sort_by_key(|op| op.at_ns);
    Ok(trace)
}

/// A text's lines as a reader takes them, for the readers' own tests.
#[cfg(test)]
pub(crate) fn test_lines(text: &str) -> impl Iterator<Item = Result<(usize, String), TraceError>> + '_ {
    text.lines().enumerate().map(|(i, l)| Ok((i + 1, l.to_string())))
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
        .map_err(|_| TraceError::line(line, format!("{what} {} is not a whole number", quote(text))))
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

    #[test]
    fn a_line_without_an_end_is_refused_quoting_a_short_prefix() {
        // /dev/zero as a trace: NUL bytes and never a newline.
        let zeros = std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 1 << 30));
        let e = read_from(zeros, None, ReadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 1: longer than 65536 bytes"), "{e}");
        assert!(e.len() < 200, "a short message: {e}");
        let long = format!("fio version 3 iolog\n0 /f {} 0 4096\n", "x".repeat(200_000));
        let e = read(&long, None, ReadOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("line 2:") && e.len() < 200, "{e}");
    }

    #[test]
    fn blank_lines_before_the_header_are_counted_not_kept_and_numbers_stay_right() {
        let blanks = std::io::Read::take(std::io::repeat(b'\n'), 8 << 20);
        let rest: &[u8] = b"fio version 3 iolog\n0 /f add\n10 /f read 0 4096\n20 /f read x 4096\n";
        let input = std::io::BufReader::new(std::io::Read::chain(blanks, rest));
        let e = read_from(input, None, ReadOptions::default()).unwrap_err();
        assert_eq!(
            e,
            TraceError::line((8 << 20) + 4, "offset 'x' is not a whole number")
        );
    }

    #[test]
    fn many_distinct_names_are_counted_and_a_few_named() {
        let mut text = String::from("fio version 3 iolog\n");
        for i in 0..1000 {
            text.push_str(&format!("{i} /f{i} read 0 4096\n"));
        }
        let trace = read(&text, None, ReadOptions::default()).unwrap();
        assert_eq!(trace.ops.len(), 1000);
        assert_eq!(
            trace.notes[1],
            "1000 files in the trace (/f0, /f1, /f2, /f3, /f4 and 995 more) were replayed as one address space"
        );
    }
}
