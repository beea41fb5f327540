//! A drive's history: one JSON line per snapshot in a file named after the drive's model and serial, and the
//! write rates and write amplification over a window of it.
//!
//! The file is append-only and each line is whole JSON, so a line cut short by a crash is skipped when read
//! (and counted), never mistaken for data. A snapshot with the time of one already recorded is not recorded
//! again, so reading the same saved smartctl file twice adds nothing.

use ssdlab_core::schema::health::{DriveIdentity, HealthSnapshot, HistoryPoint, WriteRates};

pub const DAY_S: f64 = 86_400.0;

/// The history file's name for a drive, or None when it has no serial to key it.
pub fn file_name(identity: &DriveIdentity) -> Option<String> {
    if identity.serial.trim().is_empty() {
        return None;
    }
    let clean = |s: &str| -> String {
        s.trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    Some(format!(
        "{}_{}.jsonl",
        clean(&identity.model),
        clean(&identity.serial)
    ))
}

/// One snapshot as a line of the history file.
pub fn to_line(snapshot: &HealthSnapshot) -> String {
    let mut line = serde_json::to_string(snapshot).expect("a snapshot always serializes");
    line.push('\n');
    line
}

/// What a history file held.
#[derive(Debug, Default)]
pub struct Loaded {
    pub snapshots: Vec<HealthSnapshot>,
    /// Lines that were not a whole snapshot (a write cut short): skipped.
    pub skipped_lines: usize,
}

pub fn parse(text: &str) -> Loaded {
    let mut loaded = Loaded::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(s) => loaded.snapshots.push(s),
            Err(_) => loaded.skipped_lines += 1,
        }
    }
    loaded
}

/// Whether a snapshot taken at the same time is already in the history.
pub fn contains(history: &[HealthSnapshot], snapshot: &HealthSnapshot) -> bool {
    history.iter().any(|h| h.taken_at_s == snapshot.taken_at_s)
}

/// The history with `current` in it, oldest first, one snapshot per time.
pub fn merged(mut history: Vec<HealthSnapshot>, current: &HealthSnapshot) -> Vec<HealthSnapshot> {
    if !contains(&history, current) {
        history.push(current.clone());
    }
    history.sort_by_key(|s| s.taken_at_s);
    history.dedup_by_key(|s| s.taken_at_s);
    history
}

/// The snapshots inside the window that ends at the newest one (all of them without a window).
pub fn window(history: &[HealthSnapshot], window_s: Option<u64>) -> &[HealthSnapshot] {
    let Some(last) = history.last() else {
        return history;
    };
    let start = window_s.map_or(0, |w| last.taken_at_s.saturating_sub(w));
    let first = history.partition_point(|s| s.taken_at_s < start);
    &history[first..]
}

pub fn points(history: &[HealthSnapshot]) -> Vec<HistoryPoint> {
    history
        .iter()
        .map(|s| HistoryPoint {
            t_s: s.taken_at_s,
            host_written_bytes: s.host_written_bytes,
            nand_written_bytes: s.nand_written_bytes,
            wear_used_percent: s.wear_used_percent,
        })
        .collect()
}

/// Host and NAND writes per day and the write amplification between the first and last snapshot of the
/// window. None with fewer than two snapshots at different times. A counter that went backwards (a different
/// drive under the same serial, or a reset) gives no rate for that counter.
pub fn rates(window: &[HealthSnapshot]) -> Option<WriteRates> {
    let (first, last) = (window.first()?, window.last()?);
    if last.taken_at_s <= first.taken_at_s {
        return None;
    }
    let days = (last.taken_at_s - first.taken_at_s) as f64 / DAY_S;
    let delta = |a: Option<u128>, b: Option<u128>| match (a, b) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as f64),
        _ => None,
    };
    let host = delta(first.host_written_bytes, last.host_written_bytes);
    let nand = delta(first.nand_written_bytes, last.nand_written_bytes);
    Some(WriteRates {
        from_s: first.taken_at_s,
        to_s: last.taken_at_s,
        snapshots: window.len() as u32,
        host_written_bytes_per_day: host.map(|h| h / days),
        nand_written_bytes_per_day: nand.map(|n| n / days),
        write_amplification_ratio: match (host, nand) {
            (Some(h), Some(n)) if h > 0.0 => Some(n / h),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtual_drive::{VirtualDrive, snapshot};
    use ssdlab_core::schema::DeviceCounters;

    fn at(t_s: u64, host: u64, nand: u64) -> HealthSnapshot {
        let drive = VirtualDrive {
            target: "sim:x".into(),
            model: "m".into(),
            capacity_bytes: 1 << 30,
            counters: DeviceCounters {
                host_bytes_written: host,
                nand_bytes_written: nand,
                ..DeviceCounters::default()
            },
            host_read_bytes: None,
            rated_pe_cycles: 1000,
            powered_s: 0.0,
            origin: None,
        };
        snapshot(&drive, t_s)
    }

    #[test]
    fn write_amplification_over_the_window_is_the_ratio_of_deltas() {
        // Lifetime: 100 GB host, 300 GB NAND (3.0). Over the last 10 days: +20 GB host, +30 GB NAND (1.5).
        let gb = 1_000_000_000;
        let history = vec![
            at(0, 50 * gb, 100 * gb),
            at(20 * 86_400, 80 * gb, 270 * gb),
            at(30 * 86_400, 100 * gb, 300 * gb),
        ];
        let all = rates(window(&history, None)).unwrap();
        assert_eq!(all.snapshots, 3);
        assert!((all.write_amplification_ratio.unwrap() - 4.0).abs() < 1e-12);
        let recent = rates(window(&history, Some(10 * 86_400))).unwrap();
        assert_eq!(recent.snapshots, 2);
        assert!((recent.write_amplification_ratio.unwrap() - 1.5).abs() < 1e-12);
        assert!((recent.host_written_bytes_per_day.unwrap() - 2e9).abs() < 1e-3);
        assert!((recent.nand_written_bytes_per_day.unwrap() - 3e9).abs() < 1e-3);
    }

    #[test]
    fn one_snapshot_or_a_counter_going_backwards_gives_no_rate() {
        assert!(rates(&[at(0, 1, 1)]).is_none());
        let reset = rates(&[at(0, 100, 100), at(86_400, 50, 200)]).unwrap();
        assert_eq!(reset.host_written_bytes_per_day, None);
        assert_eq!(reset.write_amplification_ratio, None);
        assert_eq!(reset.nand_written_bytes_per_day, Some(100.0));
    }

    #[test]
    fn lines_round_trip_and_a_torn_line_is_skipped() {
        let a = at(10, 1 << 40, 3 << 40);
        let mut text = to_line(&a);
        text.push_str(&to_line(&at(20, 2, 2))[..40]);
        let loaded = parse(&text);
        assert_eq!(loaded.snapshots, vec![a.clone()]);
        assert_eq!(loaded.skipped_lines, 1);
        let merged = merged(loaded.snapshots, &a);
        assert_eq!(merged.len(), 1, "the same time is recorded once");
    }

    #[test]
    fn counters_past_2_pow_64_survive_the_history_file() {
        let mut s = at(10, 0, 0);
        s.host_written_bytes = Some(u128::from(u64::MAX) * 512_000 + 7);
        assert_eq!(
            parse(&to_line(&s)).snapshots[0].host_written_bytes,
            s.host_written_bytes
        );
    }

    #[test]
    fn file_names_are_safe_and_need_a_serial() {
        let mut s = at(0, 0, 0);
        s.identity.model = "Samsung SSD 840 EVO 1TB".into();
        s.identity.serial = "S1D9/../x".into();
        assert_eq!(
            file_name(&s.identity).unwrap(),
            "Samsung_SSD_840_EVO_1TB_S1D9_.._x.jsonl"
        );
        s.identity.serial = " ".into();
        assert_eq!(file_name(&s.identity), None);
    }
}
