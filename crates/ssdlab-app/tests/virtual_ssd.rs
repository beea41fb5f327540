//! The virtual SSD through whole commands, in-process: runs repeat bit for bit by seed, the consistency test
//! draws the 840 EVO's shape, `sim wa` agrees with Desnoyers' model, `sim profiles` and `sim info` describe the
//! drives, and the 840 EVO reclaims trimmed space in the background. Virtual time makes every figure a result of
//! the model, so the assertions are the same as when these ran through the binary.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use common::*;
use serde_json::Value;
use ssdlab_app::methodology::options::{self, TrimMeasure};
use ssdlab_app::methodology::{MethodPlan, options::ConsistencyFlags};
use ssdlab_app::ports::Outcome;
use ssdlab_app::sim;

#[test]
fn sim_runs_are_bit_identical_for_the_same_seed() {
    let run = |seed: u64| {
        let flags = ssdlab_app::run::RunFlags {
            rw: ssdlab_app::flags::rw_arg("randrw").unwrap(),
            norandommap: true,
            runtime_ns: Some(ns("30s")),
            seed,
            ..run_defaults()
        };
        run_command("sim:840evo-250g?scale=1/256&fill=100%", flags, None)
    };
    let strip = |ran: &Ran| -> Vec<Value> {
        ran.events()
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
    let (a, b) = (run(9), run(9));
    assert_eq!(a.outcome, Outcome::Passed, "{}", a.text());
    assert_eq!(
        strip(&a),
        strip(&b),
        "same profile, workload and seed must give identical results"
    );
    assert_ne!(strip(&a), strip(&run(10)), "another seed gives another run");
}

/// Runs `test consistency` into a fresh directory and returns (outcome, result.json).
fn consistency_result(target: &str, flags: ConsistencyFlags) -> (Outcome, Value) {
    let dir = tempdir();
    let out_dir = dir.path().join("r");
    let method = MethodPlan::Consistency(options::consistency(flags).unwrap());
    let ran = test_command(target, method, Some(&out_dir));
    assert!(
        matches!(ran.outcome, Outcome::Passed | Outcome::Failed),
        "{:?}: {}",
        ran.outcome,
        ran.text()
    );
    let result = read_result(&out_dir);
    assert!(out_dir.join("report.html").exists() && out_dir.join("random-write.csv").exists());
    (ran.outcome, result)
}

#[test]
fn sim_consistency_shape_matches_the_840_evo() {
    // `test consistency` on a 1/64-scale virtual 840 EVO 250 GB: 2000 virtual seconds.
    let (outcome, result) = consistency_result("sim:840evo-250g?scale=1/64", consistency_defaults());
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
    assert_eq!(outcome, Outcome::Passed);
    assert_eq!(phase_names(&result), ["purge", "fill", "random-write"]);
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
    let (_, op25) = consistency_result(
        "sim:840evo-250g?scale=1/64",
        ConsistencyFlags {
            op: 25,
            ..consistency_defaults()
        },
    );
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
    // `sim wa --op 25 --pages-per-block 64 --logical-units 65536 --json`, the other flags at their defaults.
    let plan = sim::Plan::wa(
        sim::WaFlags {
            op: 25.0,
            pages_per_block: 64,
            logical_units: 65536,
            gc: ssdlab_sim::ftl::GcPolicy::Greedy,
            warmup: 10,
            measure: 10,
            seed: 1,
        },
        true,
    )
    .unwrap();
    let ran = ran(|ports| sim::run(&plan, ports));
    assert_eq!(ran.outcome, Outcome::Passed);
    let printed = ran.printed_json();
    assert_eq!(printed.len(), 1, "one JSON value: {:?}", ran.console.printed);
    let r = &printed[0];
    let (measured, model) = (
        r["write_amplification"].as_f64().unwrap(),
        r["model_write_amplification"].as_f64().unwrap(),
    );
    assert!((measured / model - 1.0).abs() < 0.03, "{measured} vs {model}");
}

#[test]
fn sim_profiles_and_info_describe_the_drives() {
    let info = |profile: &str, json: bool| {
        ran(|ports| {
            sim::run(
                &sim::Plan::Info {
                    profile: profile.into(),
                    json,
                },
                ports,
            )
        })
    };
    assert_eq!(
        info("enterprise-mlc-400g?scale=1/16", false).outcome,
        Outcome::Passed
    );
    let profiles = |json: bool| ran(|ports| sim::run(&sim::Plan::Profiles { json }, ports));
    let table = profiles(false);
    assert_eq!(table.outcome, Outcome::Passed);
    assert!(table.console.printed.len() >= 7, "{:?}", table.console.printed);
    // As JSON Lines, one profile each; and sim info's JSON names its ratios as ratios.
    let listed = profiles(true).printed_json();
    assert!(listed.len() >= 7);
    assert!(
        listed
            .iter()
            .any(|p| p["name"] == "840evo-250g" && p["dies"].is_u64())
    );
    let described = info("840evo-250g", true).printed_json();
    assert!(
        (described[0]["op_ratio"].as_f64().unwrap() - 0.062).abs() < 0.001,
        "{}",
        described[0]
    );
}

#[test]
fn the_840_evo_reclaims_trimmed_space_in_the_background() {
    let restored = |target: &str, idle: Option<&str>| {
        let dir = tempdir();
        let out_dir = dir.path().join("t");
        let method = MethodPlan::Trim(
            options::trim(options::TrimFlags {
                torture_ns: ns("5m"),
                measure: TrimMeasure::For(ns("10s")),
                idle_ns: idle.map(ns),
            })
            .unwrap(),
        );
        test_command(target, method, Some(&out_dir));
        read_result(&out_dir)["analysis"]["restored_fraction"]
            .as_f64()
            .unwrap()
    };
    // Right after the TRIM the queued TRIMs still count as data, so writes pay for garbage collection...
    let at_once = restored("sim:840evo-120g?scale=1/16", None);
    assert!(at_once < 0.75, "restored {at_once:.2} right after the TRIM");
    // ...and an hour of idle time lets the firmware reclaim all of it.
    let after_idle = restored("sim:840evo-120g?scale=1/16", Some("1h"));
    assert!(after_idle > 0.95, "restored {after_idle:.2} after an hour idle");
    // A drive that processes TRIM at once needs no idle time (it still erases its free pool back in the
    // foreground, since it collects early: 95% of clean here).
    let enterprise = restored("sim:enterprise-mlc-400g?scale=1/32", None);
    assert!(enterprise > 0.9, "restored {enterprise:.2}");
    assert!(
        enterprise > at_once + 0.15,
        "restored {enterprise:.2} against {at_once:.2}"
    );
}
