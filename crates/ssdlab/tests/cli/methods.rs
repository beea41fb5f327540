//! The test methods at the command line: on loop devices, the refusal to write a block device without
//! --allow-destroy, Ctrl-C, and what the flags' parsers refuse. The methods on the virtual drive and on files run
//! in-process in `crates/ssdlab-app/tests/methodologies.rs`.

use crate::*;

pub(crate) fn read_result(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("result.json")).unwrap()).unwrap()
}

pub(crate) fn phase<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

#[test]
fn consistency_on_a_loop_device_records_every_second() {
    let dev = LoopDevice::new(64 << 20);
    let dir = tempdir();
    let out_dir = dir.path().join("c");
    let out = run(&[
        "test",
        "consistency",
        "--target",
        &dev.path,
        "--runtime",
        "3s",
        "--allow-destroy",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    // Three seconds hold no five 60-second rounds: steady state cannot be shown, so exit 1.
    expect_code(&out, 1);
    assert!(stderr(&out).contains("steady state not reached"));
    let result = read_result(&out_dir);
    assert_eq!(result["kind"], "consistency");
    assert_eq!(result["schema"], "ssdlab/4");
    assert_eq!(
        phase(&result, "fill")["summary"]["bytes"],
        64 << 20,
        "the fill writes the whole span once"
    );
    assert_eq!(phase(&result, "purge")["summary"]["discard"]["bytes"], 64 << 20);
    let random = phase(&result, "random-write");
    let samples = random["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3, "one sample per second of runtime");
    let sampled: u64 = samples.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        sampled,
        random["summary"]["bytes"].as_u64().unwrap(),
        "the samples add up"
    );
    assert_eq!(
        result["analysis"]["random_bytes_written"],
        random["summary"]["bytes"]
    );
    for key in [
        "plateau_iops",
        "steady_iops_mean",
        "steady_iops_std_dev",
        "snia",
        "tested_bytes",
    ] {
        assert!(!result["analysis"][key].is_null(), "analysis lacks {key}");
    }
    assert_eq!(result["verdict"]["passed"], false);
    let csv = std::fs::read_to_string(out_dir.join("random-write.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
}

#[test]
fn tests_refuse_block_devices_without_allow_destroy() {
    let dev = LoopDevice::new(16 << 20);
    for test in [
        &["test", "consistency", "--runtime", "1s"][..],
        &["test", "trim", "--torture", "1s"],
        &["test", "sweep", "--test-size", "1m"],
        &["test", "latency", "--runtime", "1s"],
    ] {
        let mut args = test.to_vec();
        args.extend(["--target", dev.path.as_str()]);
        expect_usage_error(&run(&args), "--allow-destroy");
    }
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
}

#[test]
fn sweep_on_a_loop_device_covers_every_power_of_two() {
    let dev = LoopDevice::new(32 << 20);
    let dir = tempdir();
    let out_dir = dir.path().join("s");
    let out = run(&[
        "test",
        "sweep",
        "--target",
        &dev.path,
        "--allow-destroy",
        "--test-size",
        "4m",
        "--from",
        "512",
        "--to",
        "1m",
        "--size-runtime",
        "5s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let rows = read_result(&out_dir)["analysis"]["rows"]
        .as_array()
        .unwrap()
        .clone();
    let sizes: Vec<u64> = rows
        .iter()
        .map(|r| r["transfer_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (9..=20).map(|e| 1u64 << e).collect::<Vec<_>>());
    for row in &rows {
        assert!(
            row["write_bytes_per_s"].as_f64().unwrap() > 0.0
                && row["read_bytes_per_s"].as_f64().unwrap() > 0.0
        );
        assert_eq!(
            row["write_bytes"],
            4 << 20,
            "one pass of the 4 MiB region at {}",
            row["transfer_bytes"]
        );
        assert_eq!(row["read_bytes"], 4 << 20);
    }
}

#[test]
fn an_interrupted_test_keeps_what_it_measured() {
    let dir = tempdir();
    let out_dir = dir.path().join("i");
    let mut child = ssdlab()
        .args([
            "test",
            "consistency",
            "--target",
            "sim:840evo-250g?scale=1/16",
            "--runtime",
            "100000s",
        ])
        .args(["--out", out_dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    for line in lines.by_ref() {
        if line.unwrap().contains("random-write started") {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    sh("kill", &["-INT", &child.id().to_string()]);
    let _rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let result = read_result(&out_dir);
    assert_eq!(result["complete"], false);
    let random = phase(&result, "random-write");
    assert_eq!(random["complete"], false);
    assert!(
        !random["samples"].as_array().unwrap().is_empty(),
        "what was measured is kept"
    );
}

#[test]
fn latency_reads_need_no_permission_to_destroy_and_report_the_tail() {
    let dev = LoopDevice::new(32 << 20);
    let dir = tempdir();
    let out_dir = dir.path().join("lat");
    let out = run(&[
        "test",
        "latency",
        "--target",
        &dev.path,
        "--rw",
        "randread",
        "--runtime",
        "500ms",
        "--span",
        "16m",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let result = read_result(&out_dir);
    assert_eq!(
        result["options"]["method"]["options"]["rw"], "randread",
        "{}",
        result["options"]
    );
    assert!(
        phase(&result, "qd1-random-read")["summary"]["ios"]
            .as_u64()
            .unwrap()
            > 10
    );
    let a = &result["analysis"];
    assert!(
        a["latency_ns_p999"].as_u64().unwrap() >= a["latency_ns_p99"].as_u64().unwrap(),
        "{a}"
    );
    assert!(stderr(&out).contains("99.9%"));
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("4 KiB randread"));
    assert_eq!(dev.image_blocks(), 0, "reads wrote nothing");
    // Writes still need --allow-destroy on a block device.
    expect_code(
        &run(&[
            "test",
            "latency",
            "--target",
            &dev.path,
            "--rw",
            "write",
            "--runtime",
            "200ms",
        ]),
        2,
    );
}

#[test]
fn trim_flags_refused_by_their_parsers_are_named() {
    let target = "sim:840evo-120g?scale=1/16";
    for (flag, value) in [("--measure", "soon"), ("--idle", "later")] {
        expect_usage_error(&run(&["test", "trim", "--target", target, flag, value]), flag);
    }
}

/// A typo next to quick's own --size is clap's to explain, not fio's --size hint.
#[test]
fn a_typo_beside_quicks_size_is_not_taken_for_fios_option() {
    let dir = tempdir();
    let target = format!("file:{}:16m", dir.path().join("t.bin").display());
    let typo = run(&["quick", "--target", &target, "--size", "8m", "--repeat", "3"]);
    expect_code(&typo, 2);
    assert!(!stderr(&typo).contains("fio's option"), "{}", stderr(&typo));
}
