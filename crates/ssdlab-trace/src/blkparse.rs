//! `blkparse`'s default text output: one line per event,
//! `MAJ,MIN CPU SEQ SECONDS.NANOS PID ACTION RWBS SECTOR + SECTORS [PROCESS]`.
//!
//! A request appears several times (queued Q, dispatched D, completed C, and merges, plugs, ...). The queue
//! events are what the application asked for, so they are replayed; a trace without Q events (recorded with a
//! filter) falls back to the dispatch events. RWBS: R read, W write, D discard, F flush (a flush without a range
//! is a flush; with one, a write with FUA), N none. The per-CPU summary blkparse prints at the end is skipped.

use ssdlab_core::device::Op;

use crate::{Distinct, Lines, Trace, TraceError, TraceFormat, TraceOp, number, quote};

/// The event fields every line has: `MAJ,MIN CPU SEQ SECONDS.NANOS PID ACTION`, as (device, time, action, rest).
fn prefix(line: &str) -> Option<(&str, u64, &str, Vec<&str>)> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() < 6 {
        return None;
    }
    let (major, minor) = tokens[0].split_once(',')?;
    major.parse::<u32>().ok()?;
    minor.parse::<u32>().ok()?;
    tokens[1].parse::<u32>().ok()?;
    tokens[2].parse::<u64>().ok()?;
    let at_ns = seconds_ns(tokens[3])?;
    tokens[4].parse::<u64>().ok()?;
    let action = tokens[5];
    Some((tokens[0], at_ns, action, tokens[6..].to_vec()))
}

/// `12.000345678` seconds as nanoseconds, without a float's rounding.
fn seconds_ns(text: &str) -> Option<u64> {
    let (s, frac) = text.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ns: u64 = format!("{frac:0<9}").parse().ok()?;
    s.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(ns)
}

pub(crate) fn is_event_line(line: &str) -> bool {
    prefix(line).is_some()
}

/// The summary blkparse prints after the events: `CPU0 (sda):`, `Total (sda):` and what follows.
fn is_summary_start(line: &str) -> bool {
    let head = line.split_whitespace().next().unwrap_or("");
    (head.starts_with("CPU") && head[3..].bytes().all(|b| b.is_ascii_digit()) && line.contains('('))
        || head == "Total"
}

/// Reads blkparse's text: the queue (Q) events of the first device, or its dispatch (D) events when it has no
/// queue events, up to the summary blkparse prints at the end.
pub(crate) fn read(lines: &mut Lines<'_>) -> Result<Trace, TraceError> {
    let mut events = Events {
        queued: Vec::new(),
        dispatched: Vec::new(),
        device: None,
        others: Distinct::new(),
    };
    for raw in lines {
        let (n, raw) = raw?;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if is_summary_start(line) {
            break;
        }
        events.read_event(n, line)?;
    }
    Ok(events.into_trace())
}

/// The requests read so far, as queued and as dispatched, and the devices seen.
struct Events {
    queued: Vec<TraceOp>,
    dispatched: Vec<TraceOp>,
    /// The first device's `MAJ,MIN`: its events are the ones replayed.
    device: Option<String>,
    /// A recording of several devices (or of a device-mapper stack, where a request is queued at each layer) is
    /// not one address space: the other devices' events are left out, and said.
    others: Distinct<String>,
}

impl Events {
    /// Reads event line `n`, keeping it when it is the first device's queue or dispatch of a request.
    fn read_event(&mut self, n: usize, line: &str) -> Result<(), TraceError> {
        let Some((dev, at_ns, action, rest)) = prefix(line) else {
            return Err(TraceError::line(
                n,
                format!(
                    "not a blkparse event ('MAJ,MIN CPU SEQ SECONDS PID ACTION RWBS ...'): {}",
                    quote(line)
                ),
            ));
        };
        if !matches!(action, "Q" | "D") {
            return Ok(()); // completions, merges, plugs, notes: not requests
        }
        match &self.device {
            None => self.device = Some(dev.to_string()),
            Some(first) if first != dev => {
                self.others.insert(&dev.to_string());
                return Ok(());
            }
            Some(_) => {}
        }
        let list = match action {
            "Q" => &mut self.queued,
            "D" => &mut self.dispatched,
            _ => return Ok(()), // completions, merges, plugs, notes: not requests
        };
        if let Some(op) = request(n, at_ns, &rest)? {
            list.push(op);
        }
        Ok(())
    }

    /// The trace: the queue events (the dispatch events when there are none), timed from the first request.
    fn into_trace(self) -> Trace {
        let (ops, events) = if self.queued.is_empty() {
            (self.dispatched, "dispatch (D)")
        } else {
            (self.queued, "queue (Q)")
        };
        // blkparse's times are from the first event; start the replay at the first request.
        let first = ops.iter().map(|o| o.at_ns).min().unwrap_or(0);
        let ops = ops
            .into_iter()
            .map(|o| TraceOp {
                at_ns: o.at_ns - first,
                ..o
            })
            .collect();
        let mut notes = vec![format!(
            "blkparse text: the {events} events of device {}",
            self.device.unwrap_or_default()
        )];
        if self.others.len() > 0 {
            notes.push(format!(
                "the events of device(s) {} were left out: one device is one address space",
                self.others.named()
            ));
        }
        Trace {
            format: TraceFormat::Blkparse,
            ops,
            notes,
        }
    }
}

/// The request a Q or D event at `at_ns` on line `n` describes, from its fields after the action (`RWBS SECTOR +
/// SECTORS`); None for an event that carries no data (RWBS N, or zero sectors).
fn request(n: usize, at_ns: u64, rest: &[&str]) -> Result<Option<TraceOp>, TraceError> {
    let rwbs = *rest
        .first()
        .ok_or_else(|| TraceError::line(n, "a Q or D event without its RWBS field"))?;
    // `SECTOR + SECTORS`, absent for a bare flush.
    let range = match rest.get(1..4) {
        Some([sector, "+", sectors]) => {
            Some((number(n, "sector", sector)?, number(n, "sector count", sectors)?))
        }
        _ => None,
    };
    let op = if rwbs.contains('D') {
        Op::Discard
    } else if rwbs.contains('W') {
        Op::Write
    } else if rwbs.contains('R') {
        Op::Read
    } else if rwbs.contains('F') {
        Op::Flush
    } else if rwbs.contains('N') {
        return Ok(None);
    } else {
        return Err(TraceError::line(
            n,
            format!("RWBS {} names no read, write, discard or flush", quote(rwbs)),
        ));
    };
    let op = match (op, range) {
        (Op::Write, None) if rwbs.contains('F') => Op::Flush,
        (op, _) => op,
    };
    let (offset_bytes, len_bytes) = match (op, range) {
        (Op::Flush, _) => (0, 0),
        (_, Some((_, 0))) => return Ok(None), // a zero-length request carries no data (e.g. a flush's write half)
        (_, Some((sector, sectors))) => match (sector.checked_mul(512), sectors.checked_mul(512)) {
            (Some(offset), Some(len)) if offset.checked_add(len).is_some() => (offset, len),
            _ => {
                return Err(TraceError::line(
                    n,
                    format!("sector {sector} + {sectors} reaches past 2^64 bytes"),
                ));
            }
        },
        (_, None) => {
            return Err(TraceError::line(
                n,
                format!("a {rwbs} event without 'SECTOR + SECTORS'"),
            ));
        }
    };
    Ok(Some(TraceOp {
        at_ns,
        op,
        offset_bytes,
        len_bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader on a text, as the tests write traces.
    fn read(text: &str) -> Result<Trace, TraceError> {
        super::read(&mut crate::test_lines(text))
    }

    const SAMPLE: &str = "  7,0    0        1     0.000000000  4242  Q   W 0 + 128 [dd]
  7,0    0        2     0.000000500  4242  D   W 0 + 128 [dd]
  7,0    0        3     0.000009000  4242  C   W 0 + 128 [0]
  7,0    1        4     0.000049000  4242  Q   R 128 + 8 [dd]
  7,0    1        5     0.000049500  4242  P   N [dd]
  7,0    0        6     0.000089000  4242  Q   D 2048 + 2048 [blkdiscard]
  7,0    0        7     0.000090000  4242  Q FWS [kworker]
  7,0    0        8     0.100000000  4242  Q  WS 4096 + 8 [jbd2]
CPU0 (syn):
 Reads Queued:           1,        4KiB\t Writes Queued:           2,     1088KiB
Total (syn):
";

    #[test]
    fn queue_events_become_operations() {
        let t = read(SAMPLE).unwrap();
        assert_eq!(
            crate::tuples(&t),
            [
                (0, Op::Write, 0, 65536),
                (49_000, Op::Read, 65536, 4096),
                (89_000, Op::Discard, 1 << 20, 1 << 20),
                (90_000, Op::Flush, 0, 0),
                (100_000_000, Op::Write, 2 << 20, 4096),
            ]
        );
        assert!(t.notes[0].contains("queue (Q)"));
    }

    #[test]
    fn a_second_device_is_left_out_and_said() {
        let two = "  253,0 0 1 0.000000000 1 Q W 0 + 8 [x]\n  7,0 0 2 0.000001000 1 Q W 8 + 8 [x]\n";
        let t = read(two).unwrap();
        assert_eq!(t.ops.len(), 1);
        assert!(t.notes[1].contains("7,0"), "{:?}", t.notes);
    }

    #[test]
    fn dispatch_events_when_there_are_no_queue_events() {
        let only_d: String = SAMPLE
            .lines()
            .filter(|l| !l.contains(" Q "))
            .map(|l| format!("{l}\n"))
            .collect();
        let t = read(&only_d).unwrap();
        assert_eq!(t.ops.len(), 1);
        assert_eq!(t.ops[0].at_ns, 0, "times start at the first request");
        assert!(t.notes[0].contains("dispatch (D)"));
    }

    #[test]
    fn malformed_events_name_their_line() {
        for (text, line, needle) in [
            (
                "  7,0 0 1 0.000000000 1 Q W 0 + 8 [x]\n  7,0 0 2 zero 1 Q W 0 + 8 [x]\n",
                2,
                "not a blkparse event",
            ),
            ("  7,0 0 1 0.000000000 1 Q W x + 8 [x]\n", 1, "sector 'x'"),
            (
                "  7,0 0 1 0.000000000 1 Q W [x]\n",
                1,
                "without 'SECTOR + SECTORS'",
            ),
            ("  7,0 0 1 0.000000000 1 Q Z 0 + 8 [x]\n", 1, "RWBS 'Z'"),
            (
                "  7,0 0 1 0.000000000 1 Q W 36028797018963968 + 8 [x]\n",
                1,
                "past 2^64",
            ),
        ] {
            match read(text) {
                Err(TraceError::Line { line: l, message }) => {
                    assert_eq!(l, line, "{message}");
                    assert!(message.contains(needle), "{message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert_eq!(seconds_ns("1.5"), Some(1_500_000_000));
        assert_eq!(seconds_ns("1.5e3"), None);
    }
}
