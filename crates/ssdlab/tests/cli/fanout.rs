//! Fan-out over real loop devices (every output, read only) and what the flags' parsers refuse. The virtual
//! fleets, the straggler, merged results and the plan's refusals are tested in-process in
//! `crates/ssdlab-app/tests/fanouts.rs`.

use crate::*;

#[test]
fn fanout_over_loop_devices_writes_every_output_and_reads_only() {
    let (one, two) = (LoopDevice::new(64 << 20), LoopDevice::new(64 << 20));
    let dir = tempdir();
    let fleet = dir.path().join("fleet.txt");
    std::fs::write(
        &fleet,
        format!("# two shards\n{} shard-a\n{} shard-b\n", one.path, two.path),
    )
    .unwrap();
    let out_dir = dir.path().join("fanout");
    let prom = dir.path().join("fanout.prom");
    for mode in ["computed", "measured"] {
        let out = run(&[
            "fanout",
            "--fleet",
            fleet.to_str().unwrap(),
            "--runtime",
            "1s",
            "--mode",
            mode,
            "--out",
            out_dir.to_str().unwrap(),
            // The second mode replaces the first's result (and its metrics, ssdlab's own, are replaced too).
            "--replace",
            "--prom",
            prom.to_str().unwrap(),
        ]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
        let result = read_result(&out_dir);
        assert_eq!(result["kind"], "fanout");
        let a = &result["analysis"];
        assert_eq!(a["drives"][0]["name"], "shard-a");
        assert!(a["drives"][1]["reads"].as_u64().unwrap() > 10);
        assert_eq!(a["measured"].is_object(), mode == "measured");
    }
    let text = promtool_checked(&prom);
    assert!(
        text.contains("ssdlab_fanout_read_latency_seconds{drive=\"shard-b\""),
        "{text}"
    );
    let csv = std::fs::read_to_string(out_dir.join("drives.csv")).unwrap();
    assert!(
        csv.starts_with("drive,target,") && csv.lines().count() == 3,
        "{csv}"
    );
    // Nanoseconds as in every other CSV, and the p99 column agrees with result.json's.
    assert!(csv.contains(",latency_ns_p99,") && !csv.contains("_us"), "{csv}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("Read latency tail") && html.contains("class=\"chart bars\""));
    assert_eq!(one.image_blocks() + two.image_blocks(), 0, "nothing was written");
}

/// What the flags' value parsers refuse, before any plan: an age without its unit and a percentile out of range.
#[test]
fn fanout_refuses_what_its_flags_cannot_read() {
    expect_usage_error(
        &run(&["fanout", "--fleet", "field-report", "--age-by", "6"]),
        "--age-by",
    );
    let sim = "sim:840evo-1t?scale=1/1024&fill=100%";
    expect_usage_error(&run(&["fanout", "--target", sim, "--hedge", "p100"]), "--hedge");
}

/// Forty drives read live on a host of a few CPUs: a thread a drive would measure the scheduler (the outside
/// check's 1,000 drives reported "passed" with reads per drive down 70x and finished seconds late). Each CPU's
/// worker reads a share of the drives through one ring instead, in both modes (independent loads, and
/// synchronized queries whose every read goes to every drive of a share at once), and the result says how many
/// threads read.
#[test]
fn a_fanout_of_many_more_drives_than_cpus_reads_them_from_a_worker_per_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let drives = 20 * cpus;
    let dir = tempdir();
    let mut targets = Vec::new();
    for i in 0..drives {
        // Sparse files: reads of holes never wait for a device.
        let path = dir.path().join(format!("drive-{i:03}.img"));
        std::fs::File::create(&path).unwrap().set_len(4 << 20).unwrap();
        targets.extend(["--target".to_string(), format!("file:{}", path.display())]);
    }
    for mode in ["computed", "measured"] {
        let out_dir = dir.path().join(format!("fanout-{mode}"));
        let mut args = vec!["fanout".to_string()];
        args.extend(targets.iter().cloned());
        args.extend(
            [
                "--mode",
                mode,
                "--runtime",
                "1s",
                "--out",
                out_dir.to_str().unwrap(),
            ]
            .map(String::from),
        );
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&argv);
        let result = read_result(&out_dir);
        // Other tests share the CPUs: the run may still be judged untrustworthy for the wait they cause, and for
        // no other reason.
        match out.status.code() {
            Some(0) => {}
            Some(1) => {
                let reasons = result["verdict"]["reasons"].as_array().unwrap();
                assert!(
                    reasons
                        .iter()
                        .all(|r| r.as_str().unwrap().contains("not trustworthy")),
                    "{mode}: {reasons:?}"
                );
            }
            _ => panic!("{mode}: {}", stderr(&out)),
        }
        assert!(
            stderr(&out).contains(&format!("read by {cpus} threads")),
            "{mode}: {}",
            stderr(&out)
        );
        let analysis = &result["analysis"];
        assert_eq!(analysis["reading_threads"].as_u64(), Some(cpus as u64), "{mode}");
        // How far apart the drives started is measured on the host's clock and recorded (its size is the host's).
        assert!(
            analysis["start_spread_ns"].as_u64().is_some(),
            "{mode}: {analysis}"
        );
        assert!(stderr(&out).contains("start     every drive's first read was submitted within"));
        let drives_read = analysis["drives"].as_array().unwrap();
        assert_eq!(drives_read.len(), drives);
        for d in drives_read {
            assert!(d["reads"].as_u64().unwrap() > 100, "{mode}: {d}");
            assert!(
                d["host_wait_ratio"].as_f64().is_some(),
                "{mode}: measured on every real drive: {d}"
            );
        }
        if mode == "measured" {
            // Every query read every drive once, and each was timed.
            let queries = analysis["measured"]["queries"].as_u64().unwrap();
            assert!(queries > 100, "{analysis}");
            for d in drives_read {
                assert_eq!(d["reads"].as_u64(), Some(queries), "{d}");
            }
        }
    }
}

/// Two drives read on one CPU that a busy process shares: the reading thread waits for the CPU about half the
/// run, so the latencies are partly the scheduler's. The kernel's run-queue time says so, and the verdict fails
/// the run as not trustworthy instead of naming stragglers.
#[test]
fn a_fanout_whose_readers_wait_for_a_cpu_is_not_trusted() {
    let dir = tempdir();
    let mut args = vec!["-c", "0", env!("CARGO_BIN_EXE_ssdlab"), "fanout"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    for i in 0..2 {
        let path = dir.path().join(format!("drive-{i}.img"));
        std::fs::File::create(&path).unwrap().set_len(4 << 20).unwrap();
        args.extend(["--target".to_string(), format!("file:{}", path.display())]);
    }
    let out_dir = dir.path().join("fanout");
    args.extend(["--runtime", "1s", "--out", out_dir.to_str().unwrap()].map(String::from));
    // A busy loop on CPU 0, where the fan-out is pinned too (util-linux's taskset).
    let _spinner = Killed(
        Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset (util-linux) runs"),
    );
    let out = Command::new("taskset")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("taskset runs ssdlab");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let result = read_result(&out_dir);
    let reasons = result["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("not trustworthy") && reasons.contains("waiting behind other threads for a CPU"),
        "{reasons}"
    );
    for d in result["analysis"]["drives"].as_array().unwrap() {
        let wait = d["host_wait_ratio"]
            .as_f64()
            .expect("measured on every real drive");
        assert!(
            wait > 0.2,
            "a reader beside a busy loop on its one CPU waited only {wait:.2}: {d}"
        );
    }
}
