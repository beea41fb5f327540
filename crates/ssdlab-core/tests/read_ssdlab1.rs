//! Every `result.json` an earlier ssdlab wrote still reads back into its typed kind, with its figures.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::schema::options::{MethodOptions, RunOptions, TestOptions};
use ssdlab_core::schema::{Analysis, RunResult};

fn read(kind: &str) -> RunResult {
    let path = format!(
        "{}/tests/fixtures/ssdlab1/{kind}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    RunResult::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_kind_reads_back_typed() {
    for kind in [
        "run",
        "consistency",
        "trim",
        "sweep",
        "latency",
        "scan",
        "region-scan",
        "health",
        "fanout",
        "refresh",
        "pts",
        "replay",
    ] {
        let result = read(kind);
        assert_eq!(result.kind(), kind);
        let measured = match &result.analysis {
            Analysis::Run => true,
            Analysis::Consistency(m) => m.measured.is_some(),
            Analysis::Trim(m) => m.measured.as_ref().is_some_and(|t| t.discard_supported),
            Analysis::Sweep(m) => m.measured.as_ref().is_some_and(|s| !s.rows.is_empty()),
            Analysis::Latency(m) => m.measured.as_ref().is_some_and(|l| l.iops > 0.0),
            Analysis::Pts(m) => m
                .measured
                .as_ref()
                .is_some_and(|p| p.first.matrix.len() == 4 && p.first.steady_state.achieved),
            Analysis::Replay(m) => m
                .measured
                .as_ref()
                .is_some_and(|r| r.replayed_ops > 0 && r.average_data_rate_bytes_per_s > 0.0),
            Analysis::Scan(s) => !s.files.is_empty(),
            Analysis::RegionScan(r) => r.regions.len() == 4,
            Analysis::Health(h) => h.drives.iter().all(|d| d.snapshot.host_written_bytes.is_some()),
            Analysis::Fanout(f) => f.drives.len() == 2 && f.measured.is_some() && f.query.latency_ns.p50 > 0,
            Analysis::Refresh(r) => r.files.len() == 2 && r.rewritten_bytes == 5_000_000,
            // Erase records began with ssdlab/2; the CLI's erase test reads one back.
            Analysis::Erase(_) | Analysis::Op(_) | Analysis::Serve(_) | Analysis::Quick(_) => {
                unreachable!("no ssdlab/1 erase, op, serve or quick records")
            }
        };
        assert!(
            measured,
            "{kind}: the figures did not read back: {:?}",
            result.analysis
        );
        // The options read back as the shape of their own kind.
        let method = |m: &MethodOptions| match m {
            MethodOptions::Consistency(_) => "consistency",
            MethodOptions::Sweep(_) => "sweep",
            MethodOptions::Trim(_) => "trim",
            MethodOptions::Latency(_) => "latency",
            MethodOptions::Pts(_) => "pts",
            MethodOptions::Replay(_) => "replay",
            MethodOptions::Quick(_) => "quick",
        };
        let options_kind = match &result.options {
            RunOptions::Run(job) => {
                assert_eq!(job.workload.block_bytes, 4096, "{kind}");
                "run"
            }
            RunOptions::Test(TestOptions { method: m, .. }) => method(m),
            RunOptions::FileScan(_) => "scan",
            RunOptions::RegionScan(r) => {
                assert_eq!(r.regions, 4, "{kind}");
                "region-scan"
            }
            RunOptions::Health(_) => "health",
            RunOptions::Fanout(_) => "fanout",
            RunOptions::Refresh(_) => "refresh",
            RunOptions::Erase(_) => "erase",
            RunOptions::Op(_) => "op",
            RunOptions::Serve(_) => "serve",
        };
        assert_eq!(options_kind, kind, "{kind}: options {:?}", result.options);
        // Written again, it reads back the same.
        let again: RunResult = serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
        assert_eq!(again, result, "{kind}");
    }
}

#[test]
fn old_scan_forms_read_back() {
    let Analysis::Scan(scan) = read("scan").analysis else {
        panic!("not a scan")
    };
    assert_eq!(scan.buckets.last().unwrap().months_to, None);
    assert_eq!(scan.skipped[0].name, "/data/gone");
    assert!(scan.skipped[0].reason.starts_with("vanished"));
    // Version 1's MB/s and its inverted threshold, in version 2's units: the flag's own 0.5.
    assert!((scan.baseline_bytes_per_s - 56.575_723e6).abs() < 1.0);
    assert!((scan.buckets[0].speed_bytes_per_s.p50 - 56.575_723e6).abs() < 1.0);
    assert_eq!(scan.slower_than_ratio, 0.5);
    let Analysis::RegionScan(region) = read("region-scan").analysis else {
        panic!("not a region scan")
    };
    assert!((region.median_bytes_per_s - 12_914.561_159e6).abs() < 1.0);
}
