//! Methodologies on real devices and files.

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
    assert_eq!(result["schema"], "ssdlab/3");
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
fn trim_test_on_a_file_compares_clean_dirty_and_after_trim() {
    let dir = tempdir();
    let out_dir = dir.path().join("t");
    let target = file_target(&dir.path().join("trim.img"), Some("32m"));
    let out = run(&[
        "test",
        "trim",
        "--target",
        &target,
        "--torture",
        "2s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let result = read_result(&out_dir);
    let a = &result["analysis"];
    let restored = a["restored_fraction"].as_f64().unwrap();
    assert_eq!(
        out.status.code(),
        Some(if restored >= 0.9 { 0 } else { 1 }),
        "exit code follows the verdict"
    );
    assert_eq!(a["trimmed_reads_zero"], true, "punched holes read back as zeroes");
    for key in ["clean_bytes_per_s", "dirty_bytes_per_s", "after_trim_bytes_per_s"] {
        assert!(a[key].as_f64().unwrap() > 0.0, "{key}");
    }
    let names: Vec<&str> = result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["purge", "clean", "torture", "dirty", "purge", "after-trim"]
    );
    assert_eq!(phase(&result, "clean")["summary"]["bytes"], 32 << 20);
    assert_eq!(phase(&result, "torture")["samples"].as_array().unwrap().len(), 2);
    assert!(stderr(&out).contains("After TRIM"));
}

#[test]
fn trim_measures_each_state_for_a_time_and_can_idle_after_the_trim() {
    let dir = tempdir();
    let out_dir = dir.path().join("t");
    let target = "sim:840evo-120g?scale=1/16";
    let out = run(&[
        "test",
        "trim",
        "--target",
        target,
        "--torture",
        "2m",
        "--measure",
        "5s",
        "--idle",
        "10m",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let result = read_result(&out_dir);
    let names: Vec<&str> = result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    // Five seconds do not cover 7 GB: the rest of the drive is filled before the torture, as the seeds' was.
    assert_eq!(
        names,
        [
            "purge",
            "clean",
            "fill",
            "torture",
            "dirty",
            "purge",
            "after-trim"
        ],
        "{}",
        stderr(&out)
    );
    for measured in ["clean", "dirty", "after-trim"] {
        let seconds = phase(&result, measured)["summary"]["seconds"].as_f64().unwrap();
        assert!((5.0..5.5).contains(&seconds), "{measured}: {seconds} s");
    }
    let a = &result["analysis"];
    assert_eq!(a["measure_s"], 5.0);
    assert_eq!(a["idle_after_trim_s"], 600.0);
    let err = stderr(&out);
    assert!(
        err.contains("measured  128 KiB sequential writes, at most 5 s or one pass per state; idle 600 s"),
        "{err}"
    );
    // What ran, state by state (#33 point 10): the recorded seconds are the phases'.
    let ran = err
        .lines()
        .find(|l| l.starts_with("ran "))
        .expect("a line of what ran");
    assert!(ran.matches(" s, ").count() == 3, "{ran}");
    let seconds = a["state_seconds"].as_array().unwrap();
    assert_eq!(seconds[0], phase(&result, "clean")["summary"]["seconds"]);
    let clean = phase(&result, "clean")["summary"]["bytes"].as_u64().unwrap();
    let fill = &phase(&result, "fill")["summary"];
    assert_eq!(
        clean + fill["bytes"].as_u64().unwrap(),
        a["span_bytes"].as_u64().unwrap(),
        "clean and fill together write the span once"
    );

    for (flag, value) in [("--measure", "soon"), ("--measure", "0.5s"), ("--idle", "later")] {
        expect_usage_error(&run(&["test", "trim", "--target", target, flag, value]), flag);
    }
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
fn latency_test_reports_the_field_report_columns() {
    let dir = tempdir();
    let out_dir = dir.path().join("l");
    let target = file_target(&dir.path().join("lat.img"), Some("16m"));
    let out = run(&[
        "test",
        "latency",
        "--target",
        &target,
        "--runtime",
        "2s",
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    expect_code(&out, 0);
    let result = read_result(&out_dir);
    let a = &result["analysis"];
    let p: Vec<f64> = [
        "latency_ns_p25",
        "latency_ns_p50",
        "latency_ns_p75",
        "latency_ns_p95",
    ]
    .iter()
    .map(|k| a[*k].as_f64().unwrap())
    .collect();
    assert!(p.windows(2).all(|w| w[0] <= w[1]) && p[0] > 0.0, "{a}");
    assert!(a["latency_ns_max"].as_f64().unwrap() >= p[3]);
    assert_eq!(
        a["span_bytes"],
        16 << 20,
        "the 8 GiB default span is clamped to the file"
    );
    let random = phase(&result, "qd1-random-write");
    assert_eq!(random["samples"].as_array().unwrap().len(), 2);
    assert!((random["summary"]["qd_mean"].as_f64().unwrap() - 1.0).abs() < 0.05);
    let events = json_lines(&out);
    assert_eq!(event(&events, "analysis")["data"], *a);
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
fn a_queue_depth_sweep_scales_random_iops_with_the_queue() {
    let dir = tempdir();
    let out_dir = dir.path().join("qd");
    let out = run(&[
        "test",
        "sweep",
        "--target",
        "sim:840evo-250g?scale=1/64",
        "--axis",
        "qd",
        "--max-qd",
        "32",
        "--test-size",
        "128m",
        "--size-runtime",
        "1s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let result = read_result(&out_dir);
    let a = &result["analysis"];
    assert_eq!(a["axis"], "qd");
    let rows = a["rows"].as_array().unwrap();
    let depths: Vec<u64> = rows.iter().map(|r| r["queue_depth"].as_u64().unwrap()).collect();
    assert_eq!(depths, vec![1, 2, 4, 8, 16, 32]);
    let read_iops: Vec<f64> = rows.iter().map(|r| r["read_iops"].as_f64().unwrap()).collect();
    // The dies answer in parallel: a deeper queue reads more, up to the controller's limit.
    assert!(read_iops[5] > 4.0 * read_iops[0], "{read_iops:?}");
    let csv = std::fs::read_to_string(out_dir.join("sweep.csv")).unwrap();
    assert!(
        csv.starts_with("transfer_bytes,queue_depth,") && csv.lines().count() == 7,
        "{csv}"
    );
    assert!(
        std::fs::read_to_string(out_dir.join("report.html"))
            .unwrap()
            .contains("IOPS by queue depth")
    );
    expect_usage_error(
        &run(&[
            "test",
            "sweep",
            "--target",
            "sim:840evo-250g?scale=1/64",
            "--bs",
            "8k",
        ]),
        "--axis qd",
    );
    expect_usage_error(
        &run(&[
            "test",
            "sweep",
            "--target",
            "sim:840evo-250g?scale=1/64",
            "--axis",
            "qd",
            "--max-qd",
            "0",
        ]),
        "--max-qd",
    );
}

#[test]
fn a_mix_sweep_runs_reads_from_none_to_all_and_counts_each_direction() {
    let dir = tempdir();
    let out_dir = dir.path().join("mix");
    let out = run(&[
        "test",
        "sweep",
        "--target",
        "sim:840evo-250g?scale=1/64",
        "--axis",
        "mix",
        "--test-size",
        "256m",
        "--size-runtime",
        "1s",
        "--qd",
        "32",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let a = &read_result(&out_dir)["analysis"];
    assert_eq!(a["axis"], "mix");
    let rows = a["rows"].as_array().unwrap();
    let percents: Vec<u64> = rows.iter().map(|r| r["read_percent"].as_u64().unwrap()).collect();
    assert_eq!(percents, (0..=100).step_by(10).collect::<Vec<u64>>());
    for row in rows {
        let (reads, writes) = (
            row["read_iops"].as_f64().unwrap(),
            row["write_iops"].as_f64().unwrap(),
        );
        let share = reads / (reads + writes);
        let wanted = row["read_percent"].as_f64().unwrap() / 100.0;
        assert!(
            (share - wanted).abs() < 0.03,
            "{wanted}: reads are {share} of the operations"
        );
    }
    // Mixed I/O is slower than either pure direction on a drive collecting garbage: the bathtub.
    let total = |i: usize| rows[i]["read_iops"].as_f64().unwrap() + rows[i]["write_iops"].as_f64().unwrap();
    assert!(
        total(5) < total(0) && total(5) < total(10),
        "{} {} {}",
        total(0),
        total(5),
        total(10)
    );
    let csv = std::fs::read_to_string(out_dir.join("sweep.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",read_iops,read_percent"));
    assert_eq!(csv.lines().count(), 12);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("by share of reads"));
    // --max-qd shapes a queue-depth sweep only.
    let out = run(&[
        "test",
        "sweep",
        "--target",
        "sim:840evo-250g?scale=1/64",
        "--axis",
        "mix",
        "--max-qd",
        "8",
    ]);
    expect_usage_error(&out, "--max-qd");
}

/// #33 point 4: the disk-mark set in one command, on a real file: eight cases with every repeat kept, one screen
/// on stderr (within 80 columns), the usual result directory.
#[test]
fn quick_measures_the_disk_mark_set_with_its_spread_on_one_screen() {
    let dir = tempdir();
    let out_dir = dir.path().join("quick");
    let target = format!("file:{}:16m", dir.path().join("t.bin").display());
    let out = run(&[
        "quick",
        "--target",
        &target,
        "--size",
        "8m",
        "--runtime",
        "100ms",
        "--repeats",
        "2",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let err = stderr(&out);
    let table: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("quick     "))
        .take_while(|l| !l.starts_with("verdict"))
        .collect();
    assert_eq!(table.len(), 6, "a heading, the column names and four rows: {err}");
    for case in ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"] {
        assert!(table.iter().any(|l| l.starts_with(case)), "{case}: {err}");
    }
    assert!(
        table.iter().all(|l| l.chars().count() <= 80),
        "fits 80 columns: {err}"
    );
    assert!(
        table[4].contains(" IOPS ") && table[4].contains('±'),
        "{}",
        table[4]
    );
    let result = read_result(&out_dir);
    assert_eq!(result["kind"], "quick");
    let cases = result["analysis"]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    assert!(
        cases
            .iter()
            .all(|c| c["bytes_per_s"].as_array().unwrap().len() == 2)
    );
    assert_eq!(result["analysis"]["prepared"], true);
    let csv = std::fs::read_to_string(out_dir.join("quick.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 16, "{csv}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("CrystalDiskMark") && html.contains("RND4K Q32T1"));
    // The options are tagged as quick's, and read back so, not as the latency test whose fields they include.
    assert_eq!(
        result["options"]["method"]["kind"], "quick",
        "{}",
        result["options"]
    );
    assert_eq!(
        result["options"]["method"]["options"]["repeats"], 2,
        "{}",
        result["options"]
    );
    let redrawn = dir.path().join("again.html");
    expect_code(
        &run(&[
            "report",
            out_dir.to_str().unwrap(),
            "--out",
            redrawn.to_str().unwrap(),
        ]),
        0,
    );
    let again = std::fs::read_to_string(&redrawn).unwrap();
    assert!(
        again.contains("\"repeats\": 2") && !again.contains("randwrite"),
        "the options block"
    );
    // A typo next to quick's own --size is clap's to explain, not fio's --size hint.
    let typo = run(&["quick", "--target", &target, "--size", "8m", "--repeat", "3"]);
    expect_code(&typo, 2);
    assert!(!stderr(&typo).contains("fio's option"), "{}", stderr(&typo));
    expect_usage_error(
        &run(&["quick", "--target", &target, "--repeats", "0"]),
        "--repeats",
    );
    expect_usage_error(&run(&["quick", "--target", &target, "--size", "4k"]), "--size");
}

/// #33 point 7: rounds are counted from 1 on the terminal as in the charts (the schema's index is 0-based).
#[test]
fn the_first_steady_window_is_named_by_round_as_the_charts_count() {
    let out = run(&[
        "test",
        "consistency",
        "--target",
        "sim:840evo-250g?scale=1/256",
        "--runtime",
        "420s",
        "--json",
    ]);
    expect_code(&out, 0);
    let events = json_lines(&out);
    let snia = &event(&events, "analysis")["data"]["snia"];
    let index = snia["first_window_start_round"]
        .as_u64()
        .expect("a steady window");
    assert!(
        stderr(&out).contains(&format!("first steady window from round {}", index + 1)),
        "{}",
        stderr(&out)
    );
}
