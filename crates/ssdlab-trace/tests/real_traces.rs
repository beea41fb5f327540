//! The readers on real traces (tests/fixtures, sources in SOURCES.md there): what each holds, and what the timing
//! checks say of them. The MSR rows carry seconds where the format counts 100 ns ticks, as their
//! pre-processing left them; a trace made of the same recording twice goes back in time once.

use ssdlab_trace::{ReadOptions, TraceFormat, read};

fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/").to_string() + name;
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_msr_web_rows_are_read_and_their_seconds_called_out() {
    let text = fixture("msr_web_preprocessed_4000.csv");
    let trace = read(&text, None, ReadOptions { msr_disk: Some(0) }).unwrap();
    assert_eq!(trace.format, TraceFormat::Msr);
    assert_eq!(trace.ops.len(), 1000);
    let notes = trace.notes.join("\n");
    assert!(
        notes.contains("not Windows file times: the earliest, 0, would be the year 1601"),
        "{notes}"
    );
    assert!(notes.contains("1000 operations within 42.2 µs"), "{notes}");
    // Offsets are 512-byte aligned, not 4 KiB (what the cache must take).
    assert!(trace.ops.iter().any(|o| o.offset_bytes % 4096 != 0));
}

#[test]
fn the_derived_iolog_and_the_blkparse_excerpt_read_without_timing_notes() {
    let trace = read(
        &fixture("derived_msr_web_all_v3.iolog"),
        None,
        ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(trace.format, TraceFormat::FioIolog);
    assert_eq!(trace.ops.len(), 4000);
    assert_eq!(trace.ops.last().unwrap().at_ns, 60_005_895_000);
    assert!(
        !trace
            .notes
            .iter()
            .any(|n| n.contains("time order") || n.contains("within")),
        "{:?}",
        trace.notes
    );
    let trace = read(
        &fixture("blkparse_yuanguohuo_sde_excerpt.txt"),
        None,
        ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(trace.format, TraceFormat::Blkparse);
    assert_eq!(trace.ops.len(), 5);
    assert_eq!(trace.ops.iter().map(|o| o.len_bytes).sum::<u64>(), 28 << 10);
}

#[test]
fn one_recording_twice_is_not_replayed_as_recorded_and_says_so() {
    let text = fixture("derived_msr_web_all_v3.iolog");
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let twice = format!("fio version 3 iolog\n{body}{body}");
    let trace = read(&twice, None, ReadOptions::default()).unwrap();
    assert_eq!(trace.ops.len(), 8000);
    let notes = trace.notes.join("\n");
    assert!(
        notes.contains("the timestamps go back 1 time(s), by up to 60.0 s"),
        "{notes}"
    );
}
