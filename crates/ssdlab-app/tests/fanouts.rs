//! `fanout` in-process on virtual fleets: the field report's effect and its fix, measured queries against the
//! computed distribution, the old drive among fresh ones named and priced, a hundred drives alike naming nobody,
//! percentiles the reads cannot support, results of two hosts merged as if measured together, and the flags and
//! fleets the plan refuses. Virtual time makes every figure a result of the model, so the assertions are the same
//! as when these ran through the binary. Loop devices and what the flags' parsers refuse stay with the binary's
//! tests.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use ssdlab_app::fanout::{FanoutFlags, FleetFlag, Mode, Plan};
use ssdlab_app::flags::{self, Given};
use ssdlab_app::ports::Outcome;
use ssdlab_app::run::RunFlags;

/// `fanout`'s flags as the binary defaults them (no drives yet, p95 hedge, computed, 30 s of 4 KiB reads,
/// seed 1).
fn fanout_defaults() -> FanoutFlags {
    FanoutFlags {
        targets: vec![],
        fleet: None,
        age_by: None,
        refresh_all: false,
        shards: vec![],
        hedge: flags::given_percentile("p95").unwrap(),
        mode: Mode::Computed,
        runtime: flags::given_duration("30s").unwrap(),
        bs: flags::given_size("4k").unwrap(),
        seed: 1,
        out: None,
        prom: None,
        engine: ssdlab_io::Engine::Auto,
        from: vec![],
    }
}

/// `--target T...`, each as the binary's parser reads it.
fn targets<S: AsRef<str>>(targets: &[S]) -> Vec<Given<ssdlab_core::target::TargetSpec>> {
    targets
        .iter()
        .map(|t| flags::given_target(t.as_ref()).unwrap())
        .collect()
}

fn runtime(text: &str) -> Given<u64> {
    flags::given_duration(text).unwrap()
}

/// A fan-out in-process that ran (passed, or failed with a finding), and the analysis it streamed.
fn fanout(flags: FanoutFlags) -> (Ran, Value) {
    let plan = Plan::new(flags).unwrap();
    let ran = ran(|ports| ssdlab_app::fanout::run(&plan, ports));
    assert!(
        matches!(ran.outcome, Outcome::Passed | Outcome::Failed),
        "{:?}: {}",
        ran.outcome,
        ran.text()
    );
    let analysis = event(&ran.events(), "analysis")["data"].clone();
    (ran, analysis)
}

/// What `fanout` refuses with these flags, by its plan or when it opens the drives, as the binary would say it.
fn fanout_refusal(flags: FanoutFlags) -> String {
    match Plan::new(flags) {
        Err(e) => format!("{e:#}"),
        Ok(plan) => refusal(|ports| ssdlab_app::fanout::run(&plan, ports)),
    }
}

fn ms(latency: &Value, key: &str) -> f64 {
    latency[key].as_f64().unwrap() / 1e6
}

#[test]
fn the_virtual_fleet_shows_the_field_reports_effect_and_its_fix() {
    let field_report = || FanoutFlags {
        fleet: Some(FleetFlag::FieldReport),
        runtime: runtime("120s"),
        ..fanout_defaults()
    };
    // 25 drives: the tail chart draws the fastest, median and slowest, not 25 lines in repeating styles.
    let dir = tempdir();
    let out_dir = dir.path().join("fleet");
    let (ran, now) = fanout(FanoutFlags {
        out: out(&out_dir),
        ..field_report()
    });
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap_or_else(|_| ran.text());
    assert!(
        html.contains("fastest: ") && html.contains("slowest: ") && html.contains("drives are not drawn"),
        "{}",
        ran.text()
    );
    let (_, older) = fanout(FanoutFlags {
        age_by: Some(flags::given_age("6w").unwrap()),
        ..field_report()
    });
    let (_, fixed) = fanout(FanoutFlags {
        refresh_all: true,
        ..field_report()
    });
    assert_eq!(now["drives"].as_array().unwrap().len(), 25);
    // Virtual drives keep their own time: no start spread on the host's clock is claimed for them.
    assert!(now.get("start_spread_ns").is_none(), "{now}");
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
    // The first reason of the verdict, as JSON Lines carry it.
    let verdict = event(&ran.events(), "verdict")["data"]["reasons"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
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

#[test]
fn measured_queries_agree_with_the_computed_distribution() {
    // Independent virtual drives with three-month-old data: the product of their CDFs is the query's CDF, to
    // the histogram's 0.4% plus sampling error.
    let drives: Vec<String> = (1..=4)
        .map(|seed| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=3mo&seed={seed}"))
        .collect();
    let (ran, a) = fanout(FanoutFlags {
        targets: targets(&drives),
        mode: Mode::Measured,
        runtime: runtime("120s"),
        ..fanout_defaults()
    });
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
    assert!(ran.text().contains("  measured") && ran.text().contains(" queries)"));
    // Independent virtual drives agree with the computation: no disagreement is noted.
    assert!(a.get("notes").is_none(), "{}", a["notes"]);
}

#[test]
fn the_old_drive_among_fresh_ones_is_named_and_fixing_it_is_priced() {
    let fresh = |seed: u32| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=2d&seed={seed}");
    let old = "sim:840evo-1t?scale=1/1024&fill=100%&age=7mo&seed=9".to_string();
    let (ran, a) = fanout(FanoutFlags {
        targets: targets(&[fresh(1), fresh(2), old.clone(), fresh(3)]),
        runtime: runtime("20s"),
        ..fanout_defaults()
    });
    assert_eq!(ran.outcome, Outcome::Failed, "a finding: {}", ran.text());
    assert_eq!(a["dominant"], serde_json::json!([old]));
    assert!(a["stragglers"][0]["share_of_p99_ratio"].as_f64().unwrap() > 0.9);
    let fixed = &a["fixed"]["latency_ns"];
    assert!(
        ms(fixed, "p99") < 0.5 && ms(&a["query"]["latency_ns"], "p99") > 2.0,
        "{a}"
    );
    assert!(ran.text().contains("stragglers"), "{}", ran.text());
    // Four fresh drives: nobody takes the tail, exit 0.
    let fresh: Vec<String> = (1..=4).map(fresh).collect();
    let (ran, a) = fanout(FanoutFlags {
        targets: targets(&fresh),
        runtime: runtime("5s"),
        ..fanout_defaults()
    });
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    assert_eq!(a["dominant"], serde_json::json!([]));
}

#[test]
fn fanout_refuses_what_it_cannot_do() {
    let sim = "sim:840evo-1t?scale=1/1024&fill=100%";
    let on_sim = || FanoutFlags {
        targets: targets(&[sim]),
        ..fanout_defaults()
    };
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            age_by: Some(flags::given_age("6w").unwrap()),
            ..on_sim()
        }),
        "--age-by",
    );
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            shards: vec![0],
            ..on_sim()
        }),
        "--shards",
    );
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            runtime: runtime("10ms"),
            ..on_sim()
        }),
        "--runtime",
    );
    let file_fleet = |path: &Path| FanoutFlags {
        fleet: Some(FleetFlag::File(path.to_path_buf())),
        ..fanout_defaults()
    };
    assert_one_line_naming(
        &fanout_refusal(file_fleet(Path::new("/no/such/fleet"))),
        "--fleet",
    );
    let dir = tempdir();
    let fleet = dir.path().join("fleet.txt");
    std::fs::write(&fleet, "sim:840evo-1t name extra\n").unwrap();
    let refused = fanout_refusal(file_fleet(&fleet));
    assert_one_line_naming(&refused, "--fleet");
    assert!(refused.contains("line 1"), "{refused}");
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            targets: targets(&["sim:no-such-drive"]),
            ..fanout_defaults()
        }),
        "--target",
    );
    // A drive twice would break the independence the arithmetic assumes.
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            targets: targets(&[sim, sim]),
            ..fanout_defaults()
        }),
        "--target",
    );
    std::fs::write(&fleet, "sim:840evo-1t?seed=1 a\nsim:840evo-1t?seed=2 a\n").unwrap();
    assert_one_line_naming(&fanout_refusal(file_fleet(&fleet)), "--fleet");
    // A virtual and a real drive keep different clocks: no synchronized queries across them.
    let image = dir.path().join("d.img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let file = format!("file:{}", image.display());
    assert_one_line_naming(
        &fanout_refusal(FanoutFlags {
            targets: targets(&[sim, &file]),
            mode: Mode::Measured,
            ..fanout_defaults()
        }),
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
    let (ran, a) = fanout(FanoutFlags {
        fleet: Some(FleetFlag::File(fleet)),
        runtime: runtime("10s"),
        ..fanout_defaults()
    });
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    assert_eq!(a["dominant"], serde_json::json!([]));
    let stragglers = a["stragglers"].as_array().unwrap();
    let by_share_alone = stragglers
        .iter()
        .filter(|s| s["share_of_p99_ratio"].as_f64().unwrap() >= 0.02)
        .count();
    assert!(by_share_alone > 0, "the share alone would have named some");
    assert!(
        ran.text().contains("no straggler: the tail is shared"),
        "{}",
        ran.text()
    );
}

/// Issue 32's seventh defect: the 100-shard p99.9 was silently capped near the largest read measured. A
/// percentile with fewer than ten reads expected beyond it is marked, with the reads still needed.
#[test]
fn percentiles_the_reads_cannot_support_say_how_many_more_they_need() {
    let drive = |seed: u32| format!("sim:840evo-1t?scale=1/1024&fill=100%&age=4mo&seed={seed}");
    let (ran, a) = fanout(FanoutFlags {
        targets: targets(&[drive(1), drive(2)]),
        runtime: runtime("5s"),
        shards: vec![100],
        ..fanout_defaults()
    });
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
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
    assert!(ran.text().contains(&format!(
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
    let at = |name: &str| -> PathBuf { dir.path().join(name) };
    // A fan-out of 2 s (unless the flags say otherwise) into `name`.
    let fanout_into = |drives: &[&str], flags: FanoutFlags, name: &str| {
        fanout(FanoutFlags {
            targets: targets(drives),
            out: out(&at(name)),
            ..flags
        });
    };
    let two_seconds = || FanoutFlags {
        runtime: runtime("2s"),
        ..fanout_defaults()
    };
    fanout_into(&[&d1, &d2], two_seconds(), "host-a");
    fanout_into(&[&d3, &d4], two_seconds(), "host-b");
    fanout_into(&[&d1, &d2, &d3, &d4], two_seconds(), "together");
    let (merged, _) = fanout(FanoutFlags {
        from: vec![at("host-a"), at("host-b")],
        out: out(&at("merged")),
        ..fanout_defaults()
    });
    assert_eq!(
        merged.outcome,
        Outcome::Failed,
        "the old drive is a straggler: a finding"
    );
    let analysis = |name: &str| -> Value { read_result(&at(name))["analysis"].clone() };
    let (together, merged) = (analysis("together"), analysis("merged"));
    assert_eq!(merged["query"]["latency_ns"], together["query"]["latency_ns"]);
    assert_eq!(merged["query_cdf"], together["query_cdf"]);
    // Merged drives are named by their host: two hosts' /dev/nvme0n1 are two drives.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let names = |v: &Value, prefix: &str| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| format!("{prefix}{}", n.as_str().unwrap()))
            .collect()
    };
    let on_host = format!("{}:", host.trim());
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

    // Refusals, each with its reason, and nothing written.
    let d5 = drive(5);
    fanout_into(
        &[&d5],
        FanoutFlags {
            bs: flags::given_size("8k").unwrap(),
            ..two_seconds()
        },
        "other-bs",
    );
    fanout_into(
        &[&d5],
        FanoutFlags {
            runtime: runtime("1s"),
            ..fanout_defaults()
        },
        "other-runtime",
    );
    fanout_into(
        &[&d5],
        FanoutFlags {
            seed: 2,
            ..two_seconds()
        },
        "other-seed",
    );
    let a_run = run_command(
        "null:64m",
        RunFlags {
            runtime_ns: Some(ns("200ms")),
            ..run_defaults()
        },
        Some(&at("a-run")),
    );
    assert_eq!(a_run.outcome, Outcome::Passed, "{}", a_run.text());
    for (other, why) in [
        ("other-bs", "same --bs"),
        ("other-runtime", "same --runtime"),
        ("other-seed", "one seed"),
        ("a-run", "a run result"),
        ("host-a", "given twice"),
    ] {
        let refused = fanout_refusal(FanoutFlags {
            from: vec![at("host-a"), at(other)],
            out: out(&at("refused")),
            ..fanout_defaults()
        });
        assert!(
            refused.contains(why) && refused.contains("--from"),
            "{other}: {refused}"
        );
        assert!(
            !at("refused").exists(),
            "{other}: a refused merge wrote its directory"
        );
    }
}
