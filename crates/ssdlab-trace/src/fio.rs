//! fio's iolog, versions 2 and 3 (what `write_iolog` writes and `read_iolog` replays).
//!
//! Version 2: `FILE add|open|close` and `FILE read|write|trim|sync|datasync OFFSET LENGTH`, with
//! `FILE wait USEC 0` lines moving the clock (relative to the previous wait; fio discards waits below 100 us).
//! Version 3: every line starts with a timestamp in microseconds from the start, and `wait` is not allowed.
//! Every file's operations go into one address space; more than one file is said in the notes.

use ssdlab_core::device::Op;

use crate::{Distinct, Lines, Trace, TraceError, TraceFormat, TraceOp, number, quote};

#[expect(
    clippy::too_many_lines,
    reason = "over 80 lines before the rule; split when next changed"
)]
pub(crate) fn read(lines: &mut Lines<'_>) -> Result<Trace, TraceError> {
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
    let version = match header.trim() {
        "fio version 2 iolog" => 2,
        "fio version 3 iolog" => 3,
        other => {
            return Err(TraceError::line(
                header_line,
                format!(
                    "expected 'fio version 2 iolog' or 'fio version 3 iolog', found {}",
                    quote(other)
                ),
            ));
        }
    };
    let mut ops = Vec::new();
    let mut files: Distinct<String> = Distinct::new();
    let mut clock_ns: u64 = 0;
    for line in lines {
        let (n, line) = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut tokens: Vec<&str> = line.split_whitespace().collect();
        let at_ns = if version == 3 {
            let t = tokens.remove(0);
            number(n, "timestamp", t)?.saturating_mul(1000)
        } else {
            clock_ns
        };
        // FILE ACTION, or FILE ACTION OFFSET LENGTH; a file name may hold spaces, so read from the right.
        const IO_ACTIONS: [&str; 6] = ["read", "write", "trim", "sync", "datasync", "wait"];
        let (file, action, range) = match tokens.as_slice() {
            [name @ .., action, offset, length] if !name.is_empty() && IO_ACTIONS.contains(action) => {
                (name.join(" "), *action, Some((*offset, *length)))
            }
            [name @ .., action]
                if !name.is_empty() && (!IO_ACTIONS.contains(action) || action.ends_with("sync")) =>
            {
                (name.join(" "), *action, None)
            }
            _ => {
                return Err(TraceError::line(
                    n,
                    format!(
                        "expected '[TIME] FILE ACTION [OFFSET LENGTH]', found {}",
                        quote(line)
                    ),
                ));
            }
        };
        let op = match (action, range) {
            ("add" | "open" | "close", None) => continue,
            ("wait", Some((usec, _))) if version == 2 => {
                let usec = number(n, "wait", usec)?;
                if usec >= 100 {
                    clock_ns = clock_ns.saturating_add(usec.saturating_mul(1000));
                }
                continue;
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
        };
        let (offset_bytes, len_bytes) = match (op, range) {
            (Op::Flush, _) => (0, 0),
            (_, Some((offset, length))) => (number(n, "offset", offset)?, number(n, "length", length)?),
            (_, None) => unreachable!("read, write and trim matched with a range"),
        };
        if op != Op::Flush && len_bytes == 0 {
            return Err(TraceError::line(n, format!("a {action} of 0 bytes")));
        }
        files.insert(&file);
        ops.push(TraceOp {
            at_ns,
            op,
            offset_bytes,
            len_bytes,
        });
    }
    let mut notes = vec![format!("fio iolog version {version}")];
    if files.len() > 1 {
        notes.push(format!(
            "{} files in the trace ({}) were replayed as one address space",
            files.len(),
            files.named()
        ));
    }
    Ok(Trace {
        format: TraceFormat::FioIolog,
        ops,
        notes,
    })
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
