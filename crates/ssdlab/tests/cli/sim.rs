//! The virtual SSD.

use crate::*;

#[test]
fn sim_runs_are_bit_identical_for_the_same_seed() {
    let args = [
        "run",
        "--target",
        "sim:840evo-250g?scale=1/256&fill=100%",
        "--rw",
        "randrw",
        "--norandommap",
        "--runtime",
        "30s",
        "--seed",
        "9",
        "--json",
    ];
    let strip = |out: &Output| -> Vec<Value> {
        json_lines(out)
            .into_iter()
            .filter(|e| e["type"] == "sample" || e["type"] == "summary")
            .map(|mut e| {
                // CPU time is the host's, not the simulation's.
                if let Some(s) = e["data"]["summary"].as_object_mut() {
                    s.remove("cpu_user_s");
                    s.remove("cpu_sys_s");
                }
                e
            })
            .collect()
    };
    let (a, b) = (run(&args), run(&args));
    expect_code(&a, 0);
    assert_eq!(
        strip(&a),
        strip(&b),
        "same profile, workload and seed must give identical results"
    );
    let mut other = args.to_vec();
    other[9] = "10";
    assert_ne!(strip(&a), strip(&run(&other)), "another seed gives another run");
}

/// Runs `ssdlab test consistency` into a fresh directory and returns (exit code, result.json).
pub(crate) fn consistency_result(target: &str, extra: &[&str]) -> (i32, Value) {
    let dir = tempdir();
    let out_dir = dir.path().join("r");
    let mut args = vec![
        "test",
        "consistency",
        "--target",
        target,
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "{}", stderr(&out));
    let result: Value = serde_json::from_slice(&std::fs::read(out_dir.join("result.json")).unwrap()).unwrap();
    assert!(out_dir.join("report.html").exists() && out_dir.join("random-write.csv").exists());
    (code, result)
}

#[test]
fn sim_consistency_shape_matches_the_840_evo() {
    // `ssdlab test consistency` on a 1/64-scale virtual 840 EVO 250 GB: 2000 virtual seconds.
    let (code, result) = consistency_result("sim:840evo-250g?scale=1/64", &[]);
    let a = &result["analysis"];
    // An initial plateau near the datasheet's 66K IOPS: at this scale the spare area lasts about a second, so the
    // plateau is the first second (the mean before the cliff includes the second it falls in)...
    let first_second = result["phases"][2]["samples"][0]["iops"].as_f64().unwrap();
    assert!(
        first_second > 0.8 * 66_000.0,
        "first second {first_second:.0} IOPS: {a}"
    );
    // ...a cliff after roughly the spare area's worth of writes (6.9% OP of 3.64 GiB is 0.27 GB)...
    let cliff_gb = a["cliff"]["bytes_written"].as_f64().expect("a cliff") / 1e9;
    assert!((0.1..1.0).contains(&cliff_gb), "cliff after {cliff_gb:.2} GB");
    // ...and a steady state in the low thousands, steady by SNIA's rules.
    let steady = a["steady_iops_mean"].as_f64().unwrap();
    assert!(
        (1500.0..9000.0).contains(&steady),
        "steady state {steady:.0} IOPS"
    );
    assert_eq!(a["snia"]["achieved"], true, "{a}");
    assert_eq!(code, 0);
    let phases: Vec<&str> = result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["purge", "fill", "random-write"]);
    assert_eq!(
        result["phases"][2]["samples"].as_array().unwrap().len(),
        2000,
        "one sample per second"
    );
    assert!(
        result["phases"][2]["summary"]["write_amplification"]
            .as_f64()
            .unwrap()
            > 3.0
    );

    // Testing 75% of the LBAs (25% extra OP) raises steady state several-fold.
    let (_, op25) = consistency_result("sim:840evo-250g?scale=1/64", &["--op", "25"]);
    let steady25 = op25["analysis"]["steady_iops_mean"].as_f64().unwrap();
    assert!(
        steady25 > 2.5 * steady,
        "25% OP: {steady25:.0} vs {steady:.0} IOPS"
    );
    assert_eq!(
        op25["analysis"]["tested_bytes"].as_f64().unwrap(),
        (result["analysis"]["tested_bytes"].as_f64().unwrap() * 0.75 / 131072.0).floor() * 131072.0
    );
}

#[test]
fn sim_wa_mode_matches_the_model() {
    let out = run(&[
        "sim",
        "wa",
        "--op",
        "25",
        "--pages-per-block",
        "64",
        "--logical-units",
        "65536",
        "--json",
    ]);
    expect_code(&out, 0);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (measured, model) = (
        r["write_amplification"].as_f64().unwrap(),
        r["model_write_amplification"].as_f64().unwrap(),
    );
    assert!((measured / model - 1.0).abs() < 0.03, "{measured} vs {model}");
}

#[test]
fn sim_targets_are_validated() {
    for (target, says) in [
        ("sim:850pro", "840evo-250g"),
        ("sim:840evo-250g?scale=0", "scale"),
        ("sim:840evo-250g?colour=red", "unknown key"),
    ] {
        let out = run(&["run", "--target", target]);
        expect_usage_error(&out, says);
        assert!(stderr(&out).contains("--target"));
    }
    let out = run(&[
        "run",
        "--target",
        "sim:840evo-120g?scale=1/64",
        "--rw",
        "write",
        "--verify",
    ]);
    expect_usage_error(&out, "--verify");
    expect_code(&run(&["sim", "info", "enterprise-mlc-400g?scale=1/16"]), 0);
    assert!(
        String::from_utf8(run(&["sim", "profiles"]).stdout)
            .unwrap()
            .lines()
            .count()
            >= 7
    );
    // As JSON Lines, one profile each; and sim info's JSON names its ratios as ratios.
    let profiles = json_lines(&run(&["sim", "profiles", "--json"]));
    assert!(profiles.len() >= 7);
    assert!(
        profiles
            .iter()
            .any(|p| p["name"] == "840evo-250g" && p["dies"].is_u64())
    );
    let info = json_lines(&run(&["sim", "info", "840evo-250g", "--json"]));
    assert!(
        (info[0]["op_ratio"].as_f64().unwrap() - 0.062).abs() < 0.001,
        "{}",
        info[0]
    );
    // A reader that went away (`| head`) ends the listing quietly: exit 0, no panic. Its end of the pipe is
    // closed before ssdlab starts, so the first write fails with EPIPE every time.
    for args in [
        &["sim", "profiles"][..],
        &["sim", "profiles", "--json"],
        &["devices"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = ssdlab().args(args).stdout(writer).output().unwrap();
        expect_code(&out, 0);
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn the_840_evo_reclaims_trimmed_space_in_the_background() {
    let restored = |target: &str, extra: &[&str]| {
        let dir = tempdir();
        let out_dir = dir.path().join("t");
        let mut args = vec![
            "test",
            "trim",
            "--target",
            target,
            "--torture",
            "5m",
            "--measure",
            "10s",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend(extra);
        run(&args);
        read_result(&out_dir)["analysis"]["restored_fraction"]
            .as_f64()
            .unwrap()
    };
    // Right after the TRIM the queued TRIMs still count as data, so writes pay for garbage collection...
    let at_once = restored("sim:840evo-120g?scale=1/16", &[]);
    assert!(at_once < 0.75, "restored {at_once:.2} right after the TRIM");
    // ...and an hour of idle time lets the firmware reclaim all of it.
    let after_idle = restored("sim:840evo-120g?scale=1/16", &["--idle", "1h"]);
    assert!(after_idle > 0.95, "restored {after_idle:.2} after an hour idle");
    // A drive that processes TRIM at once needs no idle time (it still erases its free pool back in the
    // foreground, since it collects early: 95% of clean here).
    let enterprise = restored("sim:enterprise-mlc-400g?scale=1/32", &[]);
    assert!(enterprise > 0.9, "restored {enterprise:.2}");
    assert!(
        enterprise > at_once + 0.15,
        "restored {enterprise:.2} against {at_once:.2}"
    );
}
