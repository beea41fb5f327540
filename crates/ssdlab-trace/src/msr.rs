//! The MSR Cambridge block traces (SNIA IOTTA): CSV rows of
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, no header, the timestamp a Windows FILETIME
//! (100 ns ticks since 1601), Type `Read` or `Write`, offset and size in bytes. A file may hold several disks;
//! one is replayed. The recorded response time is not used: the replay measures its own.

use ssdlab_core::device::Op;

use crate::{Lines, Trace, TraceError, TraceFormat, TraceOp, number};

fn fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

pub(crate) fn looks_like_row(line: &str) -> bool {
    let f = fields(line);
    f.len() == 7
        && f[0].parse::<u64>().is_ok()
        && matches!(f[3].to_ascii_lowercase().as_str(), "read" | "write")
}

fn is_header(line: &str) -> bool {
    line.to_ascii_lowercase().starts_with("timestamp,")
}

pub(crate) fn read(lines: &mut Lines<'_>, disk: Option<u32>) -> Result<Trace, TraceError> {
    let mut ops: Vec<TraceOp> = Vec::new();
    // Every disk number seen, in the order first seen.
    // Sorted for the messages, looked up in logarithmic time so a trace of many disks stays fast.
    let mut disks: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut first_disk: Option<u64> = None;
    for raw in lines {
        let (n, raw) = raw?;
        let line = raw.trim();
        if line.is_empty() || (disks.is_empty() && is_header(line)) {
            continue;
        }
        let f = fields(line);
        if f.len() != 7 {
            return Err(TraceError::line(
                n,
                format!(
                    "expected 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), found {}",
                    f.len()
                ),
            ));
        }
        let ticks = number(n, "timestamp", f[0])?;
        let disk_number = number(n, "disk number", f[2])?;
        let op = match f[3].to_ascii_lowercase().as_str() {
            "read" => Op::Read,
            "write" => Op::Write,
            other => {
                return Err(TraceError::line(
                    n,
                    format!("type {} is neither Read nor Write", crate::quote(other)),
                ));
            }
        };
        let offset = number(n, "offset", f[4])?;
        let size = number(n, "size", f[5])?;
        if size == 0 {
            return Err(TraceError::line(n, "an operation of 0 bytes"));
        }
        // Only the disk that will be replayed is kept (the one asked for, or the first seen: a second one is an
        // error below), with its raw ticks until the trace's start is known.
        disks.insert(disk_number);
        let first = *first_disk.get_or_insert(disk_number);
        if disk.map_or(disk_number == first, |d| u64::from(d) == disk_number) {
            ops.push(TraceOp {
                at_ns: ticks,
                op,
                offset_bytes: offset,
                len_bytes: size,
            });
        }
    }
    let listed: Vec<u64> = disks.iter().copied().take(2).collect();
    let chosen = match (disk, listed.as_slice()) {
        (Some(d), _) if disks.contains(&u64::from(d)) => u64::from(d),
        (Some(d), _) => {
            return Err(TraceError::Invalid(format!(
                "--disk {d}: the trace holds disk(s) {}",
                list(&disks)
            )));
        }
        (None, [one]) => *one,
        (None, []) => return Err(TraceError::Empty),
        (None, _) => {
            return Err(TraceError::Invalid(format!(
                "the trace holds disks {}: choose one with --disk N",
                list(&disks)
            )));
        }
    };
    assert!(disks.contains(&chosen));
    let first = ops.iter().map(|o| o.at_ns).min().unwrap_or(0);
    let mut notes = vec![format!("MSR Cambridge CSV: disk {chosen}")];
    notes.extend(not_file_time(first));
    for op in &mut ops {
        op.at_ns = (op.at_ns - first).saturating_mul(100);
    }
    Ok(Trace {
        format: TraceFormat::Msr,
        ops,
        notes,
    })
}

/// Windows file time of 1970-01-01, in 100 ns ticks since 1601: MSR's traces were recorded in 2007, and any
/// recording's file time is past this.
const FILE_TIME_1970: u64 = 116_444_736_000_000_000;

/// A note when the earliest timestamp cannot be a Windows file time of a recording (before 1970), as when a
/// tool has replaced the column with seconds since the first row: the trace is then replayed as if its
/// numbers were 100 ns ticks.
fn not_file_time(earliest: u64) -> Option<String> {
    (earliest < FILE_TIME_1970).then(|| {
        let year = 1601.0 + earliest as f64 / (1e7 * 86_400.0 * 365.2425);
        format!(
            "the timestamps are not Windows file times: the earliest, {earliest}, would be the year {year:.0}; they \
             are replayed as 100 ns ticks apart, as the format counts them (if they are seconds, the trace runs \
             ten million times faster than recorded)"
        )
    })
}

/// "1, 2, 3" or "1, 2, 3, 4, 5 and 9 more".
fn list(disks: &std::collections::BTreeSet<u64>) -> String {
    const NAMED: usize = 5;
    let shown: Vec<String> = disks.iter().take(NAMED).map(u64::to_string).collect();
    match disks.len().saturating_sub(NAMED) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader on a text, as the tests write traces.
    fn read(text: &str, disk: Option<u32>) -> Result<Trace, TraceError> {
        super::read(&mut crate::test_lines(text), disk)
    }

    const SAMPLE: &str = "128166372003061629,hm,1,Read,3420143616,65536,1366
128166372016382155,hm,1,Write,3420208128,4096,1150
128166372016383598,hm,1,Write,3420213248,512,1006
";

    #[test]
    fn rows_become_operations_in_100ns_ticks() {
        let t = read(SAMPLE, None).unwrap();
        assert_eq!(
            crate::tuples(&t),
            [
                (0, Op::Read, 3420143616, 65536),
                (1_332_052_600, Op::Write, 3420208128, 4096),
                (1_332_196_900, Op::Write, 3420213248, 512),
            ]
        );
        let with_header = format!("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n{SAMPLE}");
        assert_eq!(read(&with_header, None).unwrap().ops.len(), 3);
        // Real file times (2007) say nothing about the clock.
        assert_eq!(t.notes.len(), 1, "{:?}", t.notes);
    }

    #[test]
    fn seconds_in_the_time_column_are_called_out() {
        // As the fixture's pre-processing left them: seconds since the first row.
        let t = read("0,web,0,Read,0,4096,10\n3,web,0,Write,4096,4096,10\n", None).unwrap();
        let note = &t.notes[1];
        assert!(
            note.starts_with(
                "the timestamps are not Windows file times: the earliest, 0, would be the year 1601"
            ),
            "{note}"
        );
    }

    #[test]
    fn several_disks_need_a_choice() {
        let two = format!("{SAMPLE}128166372016383600,hm,2,Read,0,4096,10\n");
        let err = read(&two, None).unwrap_err().to_string();
        assert!(err.contains("disks 1, 2") && err.contains("--disk"), "{err}");
        assert_eq!(read(&two, Some(2)).unwrap().ops.len(), 1);
        assert!(read(&two, Some(3)).unwrap_err().to_string().contains("--disk 3"));
    }

    #[test]
    fn malformed_rows_name_their_line() {
        for (text, line, needle) in [
            ("1,hm,1,Read,0,4096,1\n2,hm,1,Read,0\n", 2, "7 comma-separated"),
            ("1,hm,1,Erase,0,4096,1\n", 1, "neither Read nor Write"),
            ("1,hm,1,Read,-5,4096,1\n", 1, "offset '-5'"),
            ("1,hm,1,Read,0,0,1\n", 1, "0 bytes"),
        ] {
            match read(text, None) {
                Err(TraceError::Line { line: l, message }) => {
                    assert_eq!(l, line, "{message}");
                    assert!(message.contains(needle), "{message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
