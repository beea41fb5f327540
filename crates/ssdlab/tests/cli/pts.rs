//! `ssdlab test pts` end to end: on a loop device, and what its command line refuses. The tests on the virtual
//! drive, and the flags its plan refuses, run in-process in `crates/ssdlab-app/tests/snia_pts.rs`.

use crate::*;

#[test]
fn pts_latency_on_a_loop_device_skips_cells_below_its_logical_block() {
    let dev = LoopDevice::with_sector_size(64 << 20, 4096);
    let dir = tempdir();
    let out_dir = dir.path().join("lat");
    let args = [
        "test",
        "pts",
        "--test",
        "latency",
        "--target",
        &dev.path,
        "--round-time",
        "100ms",
        "--max-rounds",
        "5",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    // A destructive test: refused without --allow-destroy, before any write.
    let refused = run(&args);
    expect_usage_error(&refused, "--allow-destroy");
    assert!(!out_dir.join("result.json").exists());
    let mut allowed = args.to_vec();
    allowed.push("--allow-destroy");
    let out = run(&allowed);
    // Five rounds of a real device may or may not settle: both are honest outcomes.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let result = read_result(&out_dir);
    let a = &result["analysis"];
    assert_eq!(a["rounds"].as_array().unwrap().len(), 5);
    let matrix = a["matrix"].as_array().unwrap();
    assert_eq!(matrix.len(), 6, "the 512 B cells cannot run on 4096-byte sectors");
    assert!(
        matrix
            .iter()
            .all(|c| c["queue_depth"] == 1 && c["latency_ns_mean"].as_f64().unwrap() > 0.0)
    );
    assert!(
        a["skipped"].as_array().unwrap()[0]
            .as_str()
            .unwrap()
            .contains("4096-byte logical block")
    );
    assert!(stderr(&out).contains("skipped   512 B cells"));
}

#[test]
fn pts_refuses_an_unknown_test_naming_the_ones_it_knows() {
    let out = run(&[
        "test",
        "pts",
        "--target",
        "sim:840evo-120g?scale=1/256",
        "--test",
        "endurance",
    ]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("possible values: iops, throughput, latency"));
}
