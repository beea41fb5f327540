//! fio's iolog, versions 2 and 3 (what `write_iolog` writes and `read_iolog` replays).
//!
//! Version 2: `FILE add|open|close` and `FILE read|write|trim|sync|datasync OFFSET LENGTH`, with
//! `FILE wait USEC 0` lines moving the clock (relative to the previous wait; fio discards waits below 100 us).
//! Version 3: every line starts with a timestamp in microseconds from the start, and `wait` is not allowed.
//! Every file's operations go into one address space; more than one file is said in the notes.

use ssdlab_core::device::Op;

use crate::{Distinct, Lines, Trace, TraceError, TraceFormat, TraceOp, number, quote};

/// The actions that take `OFFSET LENGTH` (a `wait` takes `USEC 0`).
const IO_ACTIONS: [&str; 6] = ["read", "write", "trim", "sync", "datasync", "wait"];

/// Reads a fio iolog: its header, then one entry a line.
pub(crate) fn read(lines: &mut Lines<'_>) -> Result<Trace, TraceError> {
    let mut iolog = Iolog {
        version: header_version(lines)?,
        clock_ns: 0,
        files: Distinct::new(),
        ops: Vec::new(),
    };
    for line in lines {
        let (n, line) = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        iolog.read_entry(n, line)?;
    }
    Ok(iolog.into_trace())
}

/// The iolog's version (2 or 3) from its first line that is not blank.
fn header_version(lines: &mut Lines<'_>) -> Result<u32, TraceError> {
    let (header_line, header) = loop {
        match lines.next() {
            None => return Err(TraceError::Empty),
            Some(line) => {
                let (n, text) = line?;
                if !text.trim().is_empty() {
                    break (n, text);
                }
            }
        }
    };
    match header.trim() {
        "fio version 2 iolog" => Ok(2),
        "fio version 3 iolog" => Ok(3),
        other => Err(TraceError::line(
            header_line,
            format!(
                "expected 'fio version 2 iolog' or 'fio version 3 iolog', found {}",
                quote(other)
            ),
        )),
    }
}

/// An iolog being read: its version, the clock its version 2 waits move, and what it has read so far.
struct Iolog {
    version: u32,
    /// Version 2's time, in nanoseconds from the start, as its waits have moved it.
    clock_ns: u64,
    files: Distinct<String>,
    ops: Vec<TraceOp>,
}

impl Iolog {
    /// Reads entry `n`: `[TIME] FILE ACTION [OFFSET LENGTH]`, an operation or a file or clock action.
    fn read_entry(&mut self, n: usize, line: &str) -> Result<(), TraceError> {
        let mut tokens: Vec<&str> = line.split_whitespace().collect();
        let at_ns = if self.version == 3 {
            let t = tokens.remove(0);
            number(n, "timestamp", t)?.saturating_mul(1000)
        } else {
            self.clock_ns
        };
        let Entry { file, action, range } = split_entry(n, line, &tokens)?;
        let Some(op) = self.op_of(n, action, range)? else {
            return Ok(());
        };
        let (offset_bytes, len_bytes) = match (op, range) {
            (Op::Flush, _) => (0, 0),
            (_, Some((offset, length))) => (number(n, "offset", offset)?, number(n, "length", length)?),
            (_, None) => unreachable!("read, write and trim matched with a range"),
        };
        if op != Op::Flush && len_bytes == 0 {
            return Err(TraceError::line(n, format!("a {action} of 0 bytes")));
        }
        self.files.insert(&file);
        self.ops.push(TraceOp {
            at_ns,
            op,
            offset_bytes,
            len_bytes,
        });
        Ok(())
    }

    /// The operation an entry's action asks for; None for the file actions and version 2's waits (which move
    /// the clock, as fio does, only from 100 us up).
    fn op_of(
        &mut self,
        n: usize,
        action: &str,
        range: Option<(&str, &str)>,
    ) -> Result<Option<Op>, TraceError> {
        Ok(Some(match (action, range) {
            ("add" | "open" | "close", None) => return Ok(None),
            ("wait", Some((usec, _))) if self.version == 2 => {
                let usec = number(n, "wait", usec)?;
                if usec >= 100 {
                    self.clock_ns = self.clock_ns.saturating_add(usec.saturating_mul(1000));
                }
                return Ok(None);
            }
            ("wait", _) => {
                return Err(TraceError::line(
                    n,
                    "'wait' is not allowed in a version 3 iolog (its timestamps carry the time)",
                ));
            }
            ("read", Some(_)) => Op::Read,
            ("write", Some(_)) => Op::Write,
            ("trim", Some(_)) => Op::Discard,
            ("sync" | "datasync", _) => Op::Flush,
            (other, _) => {
                return Err(TraceError::line(
                    n,
                    format!(
                        "unknown action {} (fio's are add, open, close, read, write, trim, sync, datasync, wait)",
                        quote(other)
                    ),
                ));
            }
        }))
    }

    /// The trace read, with its version and, when it named more than one file, that they share one address space.
    fn into_trace(self) -> Trace {
        let mut notes = vec![format!("fio iolog version {}", self.version)];
        if self.files.len() > 1 {
            notes.push(format!(
                "{} files in the trace ({}) were replayed as one address space",
                self.files.len(),
                self.files.named()
            ));
        }
        Trace {
            format: TraceFormat::FioIolog,
            ops: self.ops,
            notes,
        }
    }
}

/// An entry's parts: the file it names, its action, and its `OFFSET LENGTH` when it has them.
struct Entry<'a> {
    file: String,
    action: &'a str,
    range: Option<(&'a str, &'a str)>,
}

/// An entry's `FILE ACTION` or `FILE ACTION OFFSET LENGTH` (its time already taken off) in its parts. A file name
/// may hold spaces, so the entry is read from the right.
fn split_entry<'a>(n: usize, line: &str, tokens: &[&'a str]) -> Result<Entry<'a>, TraceError> {
    match tokens {
        [name @ .., action, offset, length] if !name.is_empty() && IO_ACTIONS.contains(action) => Ok(Entry {
            file: name.join(" "),
            action,
            range: Some((*offset, *length)),
        }),
        [name @ .., action]
            if !name.is_empty() && (!IO_ACTIONS.contains(action) || action.ends_with("sync")) =>
        {
            Ok(Entry {
                file: name.join(" "),
                action,
                range: None,
            })
        }
        _ => Err(TraceError::line(
            n,
            format!(
                "expected '[TIME] FILE ACTION [OFFSET LENGTH]', found {}",
                quote(line)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader on a text, as the tests write traces.
    fn read(text: &str) -> Result<Trace, TraceError> {
        super::read(&mut crate::test_lines(text))
    }

    #[test]
    fn version_3_as_fio_writes_it() {
        let text = "fio version 3 iolog\n22 /tmp/fio.dat add\n119 /tmp/fio.dat open\n\
                    123 /tmp/fio.dat read 249856 4096\n431 /tmp/fio.dat write 3104768 8192\n\
                    500 /tmp/fio.dat trim 0 1048576\n600 /tmp/fio.dat sync 0 0\n700 /tmp/fio.dat close\n";
        let t = read(text).unwrap();
        assert_eq!(t.ops.len(), 4);
        assert_eq!(
            t.ops[0],
            TraceOp {
                at_ns: 123_000,
                op: Op::Read,
                offset_bytes: 249856,
                len_bytes: 4096
            }
        );
        assert_eq!((t.ops[1].op, t.ops[1].len_bytes), (Op::Write, 8192));
        assert_eq!((t.ops[2].op, t.ops[3].op), (Op::Discard, Op::Flush));
    }

    #[test]
    fn version_2_waits_move_the_clock() {
        let text = "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb read 0 4096\n\
                    /dev/sdb wait 50 0\n/dev/sdb write 4096 4096\n/dev/sdb wait 2000 0\n\
                    /dev/sdb read 8192 512\n/dev/sdb close\n";
        let t = read(text).unwrap();
        let times: Vec<u64> = t.ops.iter().map(|o| o.at_ns).collect();
        assert_eq!(
            times,
            [0, 0, 2_000_000],
            "waits below 100 us are discarded, as fio does"
        );
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let bad = [
            ("fio version 4 iolog\n", 1, "expected 'fio version 2"),
            ("fio version 3 iolog\n10 /f read x 4096\n", 2, "offset 'x'"),
            ("fio version 3 iolog\n10 /f read\n", 2, "expected '[TIME] FILE"),
            (
                "fio version 3 iolog\n10 /f read 0 4096\nabc /f read 0 4096\n",
                3,
                "timestamp 'abc'",
            ),
            ("fio version 3 iolog\n10 /f wait 100 0\n", 2, "not allowed"),
            ("fio version 2 iolog\n/f frobnicate 0 1\n", 2, "unknown action"),
            ("fio version 2 iolog\n/f write 0 0\n", 2, "0 bytes"),
        ];
        for (text, line, needle) in bad {
            match read(text) {
                Err(TraceError::Line { line: l, message }) => {
                    assert_eq!(l, line, "{text}: {message}");
                    assert!(message.contains(needle), "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn several_files_are_said() {
        let t = read("fio version 3 iolog\n1 /a read 0 4096\n2 /b read 0 4096\n").unwrap();
        assert!(t.notes.iter().any(|n| n.contains("2 files")), "{:?}", t.notes);
    }
}
