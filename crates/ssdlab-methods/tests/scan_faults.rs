//! The scan over devices that fail: a file whose chunk fails or comes back short is reported (named, with the
//! chunk) and the scan goes on with the other files; nothing is left in flight on a device that is read again;
//! a region that fails is kept unmeasured and fails the region scan with the region named; `--refresh-flagged`'s rewrite that fails is said, not counted
//! as a refresh.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use ssdlab_core::device::{Device, Op};
use ssdlab_methods::scan::dataset::{DatasetFile, DatasetScanOptions, scan_dataset};
use ssdlab_methods::scan::files::{OpenedFile, ScanCandidate, ScanOpener, ScanRefusal, scan_files};
use ssdlab_methods::scan::read::{Reader, ScanItem, ScanReads, scan_item};
use ssdlab_methods::scan::region::{RegionScanOptions, region_scan};
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, Rule};

const MIB: u64 = 1 << 20;

fn chunks(qd: u32) -> ScanReads {
    ScanReads {
        reader: Reader::Chunks {
            chunk_bytes: 64 << 10,
            queue_depth: qd,
        },
        random_reads: 4,
    }
}

fn item(name: &str, ranges: Vec<(u64, u64)>) -> ScanItem {
    ScanItem {
        name: name.into(),
        name_bytes_hex: None,
        device: "mem".into(),
        age_s: 86_400.0 * 40.0,
        ranges,
    }
}

fn faulty(rule: Rule) -> FaultDevice<MemDevice> {
    FaultDevice::new(MemDevice::new(16 * MIB, 20_000), 2).rule(rule)
}

#[test]
fn a_failing_chunk_fails_its_file_with_the_chunk_named_and_nothing_left_in_flight() {
    let mut device = faulty(
        Rule::new(Fault::eio())
            .on(&[Op::Read])
            .within(MIB + 100..MIB + 200),
    );
    let err = scan_item(&mut device, &item("f", vec![(0, 4 * MIB)]), &chunks(8)).unwrap_err();
    assert!(err.to_string().contains(&format!("at offset {}", MIB)), "{err}");
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert_eq!(device.in_flight(), 0, "the reads still in flight were drained");
    // The same device reads the next file.
    let next = scan_item(&mut device, &item("g", vec![(8 * MIB, MIB)]), &chunks(8)).unwrap();
    assert_eq!(next.bytes, MIB);
}

#[test]
fn a_short_read_inside_a_file_fails_it_and_one_at_its_end_is_its_end() {
    let mut device = faulty(
        Rule::new(Fault::Short { keep_bytes: 1000 })
            .on(&[Op::Read])
            .within(MIB..MIB + 1),
    );
    let err = scan_item(&mut device, &item("f", vec![(0, 2 * MIB)]), &chunks(4)).unwrap_err();
    assert!(err.to_string().contains("1000 of 65536 bytes"), "{err}");
    assert_eq!(device.in_flight(), 0);
    // A file of 5000 bytes is read as 5120; a read that stops at its end moved all of its data.
    let mut device = faulty(
        Rule::new(Fault::Short { keep_bytes: 5000 })
            .on(&[Op::Read])
            .within(0..1),
    );
    let scan = scan_item(&mut device, &item("tail", vec![(0, 5000)]), &chunks(1)).unwrap();
    assert_eq!(scan.bytes, 5000);
}

#[test]
fn a_stalled_chunk_is_a_slow_file_not_a_failed_one() {
    let mut device = faulty(
        Rule::new(Fault::Stall { ns: 2_000_000_000 })
            .on(&[Op::Read])
            .within(0..1)
            .once(),
    );
    let scan = scan_item(&mut device, &item("f", vec![(0, MIB)]), &chunks(1)).unwrap();
    assert!(scan.seconds >= 2.0, "{}", scan.seconds);
    assert_eq!(
        scan.slow_chunks.first().map(|c| c.0),
        Some(0),
        "the stalled chunk is re-read"
    );
}

/// Opens every file as its own faulty memory device; `bad` fails the second of its chunks.
struct Opener;

impl ScanOpener for Opener {
    fn open(&self, path: &Path) -> Result<OpenedFile, ScanRefusal> {
        let mut device = FaultDevice::new(MemDevice::new(4 * MIB, 10_000), 1);
        if path.ends_with("bad") {
            device.add(Rule::new(Fault::eio()).on(&[Op::Read]).after(1).once());
        }
        Ok(OpenedFile {
            device: Box::new(device),
            data_ranges: vec![(0, 2 * MIB)],
        })
    }
}

#[test]
fn a_file_that_fails_mid_scan_is_reported_and_the_scan_goes_on() {
    let candidates: Vec<ScanCandidate> = ["a", "bad", "c"]
        .iter()
        .map(|name| ScanCandidate {
            path: Path::new("/virtual").join(name),
            name: name.to_string(),
            name_bytes_hex: None,
            device_id: 1,
            device_name: "mem".into(),
            age_s: 86_400.0 * 10.0,
        })
        .collect();
    let (scans, skipped) = scan_files(candidates, &Opener, chunks(4));
    let names: Vec<&str> = scans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].name, "bad");
    assert!(
        skipped[0].reason.contains("Input/output error"),
        "{}",
        skipped[0].reason
    );
}

#[test]
fn a_virtual_file_that_fails_is_skipped_with_the_reason_and_the_others_are_scanned() {
    let files = vec![
        DatasetFile {
            size_bytes: MIB,
            age_ns: 86_400 * 10 * 1_000_000_000,
        };
        4
    ];
    let ranges: Vec<(u64, u64)> = (0..4).map(|i| (i * 2 * MIB, MIB)).collect();
    let mut device = faulty(Rule::new(Fault::eio()).on(&[Op::Read]).within(2 * MIB..3 * MIB));
    let options = DatasetScanOptions {
        reads: chunks(4),
        slower_than: 0.5,
        refresh_flagged: false,
    };
    let analysis = scan_dataset(&mut device, "mem", &files, &ranges, &options)
        .expect("one failing file does not end the scan");
    assert_eq!(analysis.files.len(), 3);
    assert_eq!(analysis.skipped.len(), 1, "{:?}", analysis.skipped);
    assert!(
        analysis.skipped[0].name.ends_with("file-1"),
        "{:?}",
        analysis.skipped
    );
    assert!(analysis.skipped[0].reason.contains("Input/output error"));
    assert_eq!(device.in_flight(), 0);
}

#[test]
fn a_failing_refresh_rewrite_is_said_and_not_measured_as_refreshed() {
    // Two old files read slowly (a stall on each of their chunks) and are flagged; the rewrite of the first
    // one fails.
    let old_ns = 86_400 * 200 * 1_000_000_000;
    let files = vec![
        DatasetFile {
            size_bytes: MIB,
            age_ns: old_ns,
        },
        DatasetFile {
            size_bytes: MIB,
            age_ns: old_ns,
        },
        DatasetFile {
            size_bytes: MIB,
            age_ns: 86_400 * 5 * 1_000_000_000,
        },
    ];
    let ranges = vec![(0, MIB), (2 * MIB, MIB), (4 * MIB, MIB)];
    let mut device = FaultDevice::new(MemDevice::new(16 * MIB, 20_000), 2)
        .rule(
            Rule::new(Fault::Stall { ns: 5_000_000 })
                .on(&[Op::Read])
                .within(0..3 * MIB)
                .times(64),
        )
        .rule(Rule::new(Fault::eio()).on(&[Op::Write]).within(0..MIB));
    let options = DatasetScanOptions {
        reads: chunks(1),
        slower_than: 0.5,
        refresh_flagged: true,
    };
    let analysis = scan_dataset(&mut device, "mem", &files, &ranges, &options).unwrap();
    assert_eq!(analysis.flagged.len(), 2, "{:?}", analysis.flagged);
    let after = analysis.after_refresh.expect("the refresh ran");
    assert_eq!(after.files.len(), 1, "only the file rewritten is measured again");
    assert!(after.files[0].name.ends_with("file-1"));
    assert!(
        analysis
            .skipped
            .iter()
            .any(|s| s.name.ends_with("file-0") && s.reason.contains("rewrite")),
        "{:?}",
        analysis.skipped
    );
    assert_eq!(device.in_flight(), 0);
}

#[test]
fn a_region_that_fails_is_kept_unmeasured_and_fails_the_scan_with_its_offset() {
    // Regions of 2 MiB, the first 1 MiB of each read: one block of the third region's fails.
    let mut device = faulty(
        Rule::new(Fault::eio())
            .on(&[Op::Read])
            .within(4 * MIB + 300_000..4 * MIB + 300_001),
    );
    let options = RegionScanOptions {
        regions: 8,
        read_bytes: Some(MIB),
        reader: Reader::Chunks {
            chunk_bytes: 128 << 10,
            queue_depth: 4,
        },
        slower_than: 0.5,
    };
    let (analysis, verdict) = region_scan(&mut device, &options).unwrap();
    // The failed region is a row without a speed, its error said; the seven others are measured.
    let row = &analysis.regions[2];
    assert!(!row.measured && row.bytes_per_s.is_none());
    let error = row.error.as_deref().unwrap();
    assert!(
        error.contains(&format!("the region at byte {}", 4 * MIB)),
        "{error}"
    );
    assert!(error.contains("Input/output error"), "{error}");
    assert_eq!(analysis.unreadable_region_offsets, [4 * MIB]);
    assert_eq!(analysis.regions.iter().filter(|r| r.measured).count(), 7);
    assert!(
        analysis.min_bytes_per_s > 0.0,
        "the statistics are of the regions read"
    );
    // Not passed, and not a finding: the drive failed to return data it holds.
    assert!(!verdict.passed && !verdict.finding, "{verdict:?}");
    assert!(
        verdict.reasons[0].starts_with("1 of 8 regions could not be read"),
        "{verdict:?}"
    );
    assert_eq!(device.in_flight(), 0);
    // A device none of whose regions can be read ends the scan with the first region's error.
    let mut dead = faulty(Rule::new(Fault::eio()).on(&[Op::Read]));
    let err = region_scan(&mut dead, &options).unwrap_err();
    assert!(err.to_string().contains("the region at byte 0"), "{err}");
}
