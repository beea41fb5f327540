//! Fan-out: the query that waits for every drive, the straggler, the virtual fleet and real loop devices.

use serde_json::Value;

use crate::*;

/// The analysis a `fanout --json` run streamed.
fn fanout_analysis(args: &[&str]) -> (std::process::Output, Value) {
    let mut all = vec!["fanout", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let analysis = event(&json_lines(&out), "analysis")["data"].clone();
    (out, analysis)
}

fn ms(latency: &Value, key: &str) -> f64 {
    latency[key].as_f64().unwrap() / 1e6
}

#[test]
fn the_virtual_fleet_shows_the_field_reports_effect_and_its_fix() {
    let runtime = ["--fleet", "field-report", "--runtime", "120s"];
    // 25 drives: the tail chart draws the fastest, median and slowest, not 25 lines in repeating styles.
    let dir = tempdir();
    let out_dir = dir.path().join("fleet");
    let out = run(&[
        &["fanout"][..],
        &runtime[..],
        &["--out", out_dir.to_str().unwrap()],
    ]
    .concat());
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap_or_else(|_| stderr(&out));
    assert!(
        html.contains("fastest: ") && html.contains("slowest: ") && html.contains("drives are not drawn"),
        "{}",
        stderr(&out)
    );
    let (_, now) = fanout_analysis(&runtime);
    let (_, older) = fanout_analysis(&[&runtime[..], &["--age-by", "6w"]].concat());
    let (_, fixed) = fanout_analysis(&[&runtime[..], &["--refresh-all"]].concat());
    assert_eq!(now["drives"].as_array().unwrap().len(), 25);
    let q = |a: &Value, key: &str| ms(&a["query"]["latency_ns"], key);
    // Six weeks on, the chance that some shard reads very slowly has risen: the query's mean and p95 rise much
    // more than its median (seed 000: "the chances of very poor performance searches rises").
    let rise = |key: &str| q(&older, key) - q(&now, key);
    assert!(rise("p50") > 0.0, "the data got older");
    assert!(
        rise("mean") > 1.5 * rise("p50") && rise("p95") > 3.0 * rise("p50"),
        "median +{:.2} ms, mean +{:.2} ms, p95 +{:.2} ms",
        rise("p50"),
        rise("mean"),
        rise("p95")
    );
    // After the refresh every figure falls back, below a millisecond.
    for key in ["p50", "mean", "p95", "p99"] {
        assert!(
            q(&fixed, key) < 1.0,
            "{key} after the refresh: {} ms",
            q(&fixed, key)
        );
    }
    // The drives that take most of the tail are old ones, never the young ones. The fleet's finding is the
    // cohort of old data (seed 000: old data makes every query as slow as the slowest drive), with what rewriting
    // it buys; no single drive's fix moves the p99, which sits at the firmware's recovery ceiling every aged drive
    // reaches.
    let heaviest: Vec<&str> = now["stragglers"].as_array().unwrap()[..4]
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let age_of = |name: &str| {
        now["drives"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()["data_age_months"]
            .as_f64()
            .unwrap()
    };
    for name in heaviest {
        assert!(age_of(name) > 3.0, "{name}");
    }
    let named = now["named_cohort"].as_str().expect("the old cohort is named");
    let cohort = now["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == named)
        .unwrap();
    let members: Vec<&str> = cohort["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        members.contains(&"drive-23") && !members.contains(&"drive-01"),
        "{named}: {members:?}"
    );
    assert!(members.iter().all(|m| age_of(m) > 1.5), "{named}");
    let rewritten = |key: &str| ms(&now["cohort_fixed"]["latency_ns"], key);
    assert!(
        q(&now, "p99") > 20.0 && rewritten("p99") < 3.0,
        "p99 {} -> {} ms",
        q(&now, "p99"),
        rewritten("p99")
    );
    assert!(rewritten("mean") < 0.3 * q(&now, "mean"));
    let verdict = now_verdict(&runtime);
    assert!(
        verdict.starts_with(&format!("{named} makes queries slow at ")),
        "{verdict}"
    );
    for single in now["dominant"].as_array().unwrap() {
        let p99 = now["attribution"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == *single)
            .unwrap()["percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["percentile"] == 99.0)
            .cloned()
            .unwrap();
        assert_eq!(p99["named"], false, "no single drive moves the p99: {p99}");
    }
}

/// The first reason of the fan-out's verdict, as JSON Lines carry it.
fn now_verdict(args: &[&str]) -> String {
    let out = run(&[&["fanout", "--json"][..], args].concat());
    let verdict = event(&json_lines(&out), "verdict")["data"].clone();
    verdict["reasons"][0].as_str().unwrap_or_default().to_string()
}

#[test]
fn measured_queries_agree_with_the_computed_distribution() {
    // Independent virtual drives with three-month-old data: the product of their CDFs is the query's CDF, to
    // the histogram's 0.4% plus sampling error.
    let targets: Vec<String> = (1..=4)
        .map(|seed| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=3mo&seed={seed}"))
        .collect();
    let mut args = vec!["--mode", "measured", "--runtime", "120s"];
    for t in &targets {
        args.extend(["--target", t.as_str()]);
    }
    let (out, a) = fanout_analysis(&args);
    let measured = &a["measured"];
    assert!(measured["queries"].as_u64().unwrap() > 20_000, "{measured}");
    for key in ["p25", "p50", "p75", "p95", "mean"] {
        let (computed, seen) = (
            ms(&a["query"]["latency_ns"], key),
            ms(&measured["latency_ns"], key),
        );
        assert!(
            (seen / computed - 1.0).abs() < 0.05,
            "{key}: computed {computed:.3} ms, measured {seen:.3} ms"
        );
    }
    assert!(stderr(&out).contains("  measured") && stderr(&out).contains(" queries)"));
    // Independent virtual drives agree with the computation: no disagreement is noted.
    assert!(a.get("notes").is_none(), "{}", a["notes"]);
}

#[test]
fn the_old_drive_among_fresh_ones_is_named_and_fixing_it_is_priced() {
    let fresh = |seed: u32| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=2d&seed={seed}");
    let old = "sim:840evo-1t?scale=1/1024&fill=100%&age=7mo&seed=9".to_string();
    let targets = [fresh(1), fresh(2), old.clone(), fresh(3)];
    let mut args = vec!["--runtime", "20s"];
    for t in &targets {
        args.extend(["--target", t.as_str()]);
    }
    let (out, a) = fanout_analysis(&args);
    expect_code(&out, 1);
    assert_eq!(a["dominant"], serde_json::json!([old]));
    assert!(a["stragglers"][0]["share_of_p99_ratio"].as_f64().unwrap() > 0.9);
    let fixed = &a["fixed"]["latency_ns"];
    assert!(
        ms(fixed, "p99") < 0.5 && ms(&a["query"]["latency_ns"], "p99") > 2.0,
        "{a}"
    );
    assert!(stderr(&out).contains("stragglers"), "{}", stderr(&out));
    // Four fresh drives: nobody takes the tail, exit 0.
    let mut args = vec!["--runtime", "5s"];
    let fresh: Vec<String> = (1..=4).map(fresh).collect();
    for t in &fresh {
        args.extend(["--target", t.as_str()]);
    }
    let (out, a) = fanout_analysis(&args);
    expect_code(&out, 0);
    assert_eq!(a["dominant"], serde_json::json!([]));
}

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

#[test]
fn fanout_refuses_what_it_cannot_do() {
    let sim = "sim:840evo-1t?scale=1/1024&fill=100%";
    expect_usage_error(&run(&["fanout", "--target", sim, "--age-by", "6w"]), "--age-by");
    expect_usage_error(
        &run(&["fanout", "--fleet", "field-report", "--age-by", "6"]),
        "--age-by",
    );
    expect_usage_error(&run(&["fanout", "--target", sim, "--hedge", "p100"]), "--hedge");
    expect_usage_error(&run(&["fanout", "--target", sim, "--shards", "0"]), "--shards");
    expect_usage_error(
        &run(&["fanout", "--target", sim, "--runtime", "10ms"]),
        "--runtime",
    );
    expect_usage_error(&run(&["fanout", "--fleet", "/no/such/fleet"]), "--fleet");
    let dir = tempdir();
    let fleet = dir.path().join("fleet.txt");
    std::fs::write(&fleet, "sim:840evo-1t name extra\n").unwrap();
    let out = run(&["fanout", "--fleet", fleet.to_str().unwrap()]);
    expect_usage_error(&out, "--fleet");
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
    expect_usage_error(&run(&["fanout", "--target", "sim:no-such-drive"]), "--target");
    // A drive twice would break the independence the arithmetic assumes.
    expect_usage_error(&run(&["fanout", "--target", sim, "--target", sim]), "--target");
    std::fs::write(&fleet, "sim:840evo-1t?seed=1 a\nsim:840evo-1t?seed=2 a\n").unwrap();
    expect_usage_error(&run(&["fanout", "--fleet", fleet.to_str().unwrap()]), "--fleet");
    // A virtual and a real drive keep different clocks: no synchronized queries across them.
    let image = dir.path().join("d.img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let file = format!("file:{}", image.display());
    expect_usage_error(
        &run(&["fanout", "--target", sim, "--target", &file, "--mode", "measured"]),
        "--mode measured",
    );
}

/// Issue 32's sixth defect: among 100 drives of one model and age, a drive that took twice its fair share of
/// the query's tail by chance was named a straggler (27 of 100), and the command exited 1. A straggler now also
/// needs more slow reads than chance gives a drive like the others (binomial, 1% over the number of drives) and a
/// fix that moves the query's p99 beyond its noise. (Here the units differ by their seeds' drive factor: one of
/// the hundred passes the binomial test, and the noise floor is what keeps it from being named.)
#[test]
fn a_hundred_drives_alike_name_no_straggler() {
    let dir = tempdir();
    let fleet = dir.path().join("fleet");
    let lines: String = (1..=100)
        .map(|i| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=4mo&seed={i} d{i}\n"))
        .collect();
    std::fs::write(&fleet, lines).unwrap();
    let (out, a) = fanout_analysis(&["--fleet", fleet.to_str().unwrap(), "--runtime", "10s"]);
    expect_code(&out, 0);
    assert_eq!(a["dominant"], serde_json::json!([]));
    let stragglers = a["stragglers"].as_array().unwrap();
    let by_share_alone = stragglers
        .iter()
        .filter(|s| s["share_of_p99_ratio"].as_f64().unwrap() >= 0.02)
        .count();
    assert!(by_share_alone > 0, "the share alone would have named some");
    assert!(
        stderr(&out).contains("no straggler: the tail is shared"),
        "{}",
        stderr(&out)
    );
}

/// Issue 32's seventh defect: the 100-shard p99.9 was silently capped near the largest read measured. A
/// percentile with fewer than ten reads expected beyond it is marked, with the reads still needed.
#[test]
fn percentiles_the_reads_cannot_support_say_how_many_more_they_need() {
    let drive = |seed: u32| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=4mo&seed={seed}");
    let (a_drive, b_drive) = (drive(1), drive(2));
    let (out, a) = fanout_analysis(&[
        "--runtime",
        "5s",
        "--shards",
        "100",
        "--target",
        &a_drive,
        "--target",
        &b_drive,
    ]);
    expect_code(&out, 0);
    let reads: u64 = a["drives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reads"].as_u64().unwrap())
        .sum();
    let hundred = a["what_if"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["shards"] == 100)
        .unwrap();
    // p99.9 of 100 shards: ten reads beyond it need 10 x 100 / 0.001 = a million reads in all.
    let needs: Vec<(f64, u64)> = hundred["unsupported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["percentile"].as_f64().unwrap(),
                u["more_reads"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(reads < 1_000_000, "{reads} reads: the case needs a shorter run");
    assert!(
        needs.contains(&(99.9, 1_000_000 - reads)),
        "{needs:?} with {reads} reads"
    );
    assert!(stderr(&out).contains(&format!(
        "* needs  {} more reads for the p99.9 of 100 shards",
        1_000_000 - reads
    )));
    // The query over the two drives themselves supports its p99 (2,000 reads suffice).
    let query_needs = a["query"]["unsupported"].as_array().cloned().unwrap_or_default();
    assert!(
        query_needs.iter().all(|u| u["percentile"] != 99.0),
        "{query_needs:?}"
    );
}

/// #35: `fanout --from` over two hosts' results is the fan-out of the same drives measured together, exactly
/// (every drive reads the offsets of its own stream wherever it runs), and results that cannot be merged are
/// refused with the reason.
#[test]
fn results_from_two_hosts_merge_into_the_query_of_the_same_drives_measured_together() {
    let dir = tempdir();
    let drive = |months: u32| format!("sim:840evo-1t?scale=1/1024&fill=100%&age={months}mo");
    let (d1, d2, d3, d4) = (drive(1), drive(7), drive(2), drive(3));
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let fanout = |targets: &[&str], extra: &[&str], name: &str| {
        let mut args = vec!["fanout", "--out"];
        let out = out(name);
        args.push(&out);
        if !extra.contains(&"--runtime") {
            args.extend(["--runtime", "2s"]);
        }
        for t in targets {
            args.extend(["--target", t]);
        }
        args.extend(extra);
        let o = run(&args);
        assert!(
            o.status.code() == Some(0) || o.status.code() == Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    fanout(&[&d1, &d2], &[], "host-a");
    fanout(&[&d3, &d4], &[], "host-b");
    fanout(&[&d1, &d2, &d3, &d4], &[], "together");
    let merged = run(&[
        "fanout",
        "--from",
        &out("host-a"),
        "--from",
        &out("host-b"),
        "--out",
        &out("merged"),
    ]);
    assert_eq!(
        merged.status.code(),
        Some(1),
        "the old drive is a straggler: a finding"
    );
    let analysis = |name: &str| -> Value {
        let text = std::fs::read_to_string(dir.path().join(name).join("result.json")).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()["analysis"].clone()
    };
    let (together, merged) = (analysis("together"), analysis("merged"));
    assert_eq!(merged["query"]["latency_ns"], together["query"]["latency_ns"]);
    assert_eq!(merged["query_cdf"], together["query_cdf"]);
    // Merged drives are named by their host: two hosts' /dev/nvme0n1 are two drives.
    let host = sh("hostname", &[]).trim().to_string();
    let names = |v: &Value, prefix: &str| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| format!("{prefix}{}", n.as_str().unwrap()))
            .collect()
    };
    let on_host = format!("{host}:");
    assert_eq!(
        names(&merged["dominant"], ""),
        names(&together["dominant"], &on_host)
    );
    for (m, t) in merged["drives"]
        .as_array()
        .unwrap()
        .iter()
        .zip(together["drives"].as_array().unwrap())
    {
        assert_eq!(
            m["target"].as_str().unwrap(),
            format!("{on_host}{}", t["target"].as_str().unwrap())
        );
        assert_eq!(m["histogram"], t["histogram"]);
    }

    // Refusals, each with its reason, exit 2, and nothing written.
    fanout(&[&drive(5)], &["--bs", "8k"], "other-bs");
    fanout(&[&drive(5)], &["--runtime", "1s"], "other-runtime");
    fanout(&[&drive(5)], &["--seed", "2"], "other-seed");
    let o = run(&[
        "run",
        "--target",
        "null:64m",
        "--runtime",
        "200ms",
        "--out",
        &out("a-run"),
    ]);
    assert!(o.status.success());
    for (other, why) in [
        ("other-bs", "same --bs"),
        ("other-runtime", "same --runtime"),
        ("other-seed", "one seed"),
        ("a-run", "a run result"),
        ("host-a", "given twice"),
    ] {
        let o = run(&[
            "fanout",
            "--from",
            &out("host-a"),
            "--from",
            &out(other),
            "--out",
            &out("refused"),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{other}: {stderr}");
        assert!(
            stderr.contains(why) && stderr.contains("--from"),
            "{other}: {stderr}"
        );
        assert!(
            !dir.path().join("refused").exists(),
            "{other}: a refused merge wrote its directory"
        );
    }
}
