//! `ssdlab demo`: the main job on the embedded default device, a virtual Samsung 840 EVO 250 GB. Runs the
//! consistency test twice (as shipped, and with 25% extra over-provisioning), TRIM validation and
//! transfer-size sweeps over 2 GiB and 512 MiB, seed 000's field-report scan (files by data age, the slow ones
//! rewritten) and its 25-drive fan-out (the query that waits for every shard, and the stragglers), a quick SNIA
//! PTS IOPS test (the drive at 1/64 scale, 1 s cells), seed 001's storage-bench table (synthetic light and heavy
//! desktop traces replayed with and without the RAPID-like cache), each into its own result directory, reads the
//! drive's health (host vs NAND writes, write amplification, P/E used) from the consistency runs' counters, then
//! draws them all into one report.

use anyhow::{Result, bail};

use super::Outcome;
use crate::cli::{
    ConsistencyArgs, DemoArgs, EngineArg, PtsArgs, PtsTestArg, ReplayArgs, ReplayFitArg, SweepArgs,
    TargetArgs, TestCommand, TestCommon, TrimArgs,
};
use crate::output;

pub fn run(args: &DemoArgs) -> Result<Outcome> {
    if !ssdlab_targets::is_virtual(&args.target) {
        bail!(
            "--target {}: the demo runs on a virtual drive; give a sim: target, e.g. sim:840evo-250g",
            args.target
        );
    }
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "--out {}: exists and is not a directory; name a directory",
            args.out.display()
        );
    }
    let steps = method_steps(args);
    let on = |target: &str, name: &str| step_common(args, target, name);
    let started = std::time::Instant::now();
    let mut directories = Vec::new();
    for (name, command) in &steps {
        eprintln!("\n== demo: {name}");
        if let Some(stop) = stopped(super::test::run(command)?) {
            return Ok(stop);
        }
        directories.push(args.out.join(name));
    }
    // Seed 000's finding on a drive of the same kind: files of the field report's ages read slower the older
    // they are, and rewriting the flagged ones in place makes them fresh again.
    eprintln!("\n== demo: field-report");
    let field_report = field_report_args(args);
    if let Some(stop) = stopped(super::scan::run(&field_report)?) {
        return Ok(stop);
    }
    directories.push(args.out.join("field-report"));
    // Seed 000's search machine: 25 virtual 1 TB drives whose data is 0.9 to 7 months old, one shard each; the
    // query that waits for all of them, and which drives make its tail.
    eprintln!("\n== demo: fanout");
    let fanout = fanout_args(args);
    if let Some(stop) = stopped(super::fanout::run(&fanout)?) {
        return Ok(stop);
    }
    directories.push(args.out.join("fanout"));
    // The drive's health after all that: host vs NAND writes, write amplification and P/E used, from the
    // counters of each consistency run.
    eprintln!("\n== demo: health");
    let health = health_args(args);
    if let Some(stop) = stopped(super::health::run(&health)?) {
        return Ok(stop);
    }
    directories.push(args.out.join("health"));
    // Seed 001's storage-bench table: synthetic light and heavy desktop traces replayed on the drive, then on the
    // same drive behind the RAPID-like cache.
    let traces = args.out.join("traces");
    std::fs::create_dir_all(&traces)?;
    for profile in [
        ssdlab_trace::synth::Profile::Light,
        ssdlab_trace::synth::Profile::Heavy,
    ] {
        let trace = traces.join(format!("{}.iolog", profile.name()));
        let ops = ssdlab_trace::synth::generate(profile, 1, 60_000_000_000, None);
        output::write_atomically(
            &trace,
            ssdlab_trace::synth::to_fio_iolog(&ops, "/dev/ssdlab-synth").as_bytes(),
        )?;
        for (kind, target) in [("plain", args.target.clone()), ("rapid", cached(&args.target))] {
            let name = format!("replay-{}-{kind}", profile.name());
            eprintln!("\n== demo: {name}");
            let command = TestCommand::Replay(ReplayArgs {
                common: on(&target, &name),
                trace: trace.clone(),
                format: None,
                time_scale: 1.0,
                as_fast_as_possible: false,
                qd: 32,
                fit: ReplayFitArg::Fold,
                disk: None,
            });
            if let Some(stop) = stopped(super::test::run(&command)?) {
                return Ok(stop);
            }
            directories.push(args.out.join(&name));
        }
    }
    let results = super::report::read_results(&directories)?;
    let report = args.out.join("report.html");
    output::write_report(&report, &results)?;
    eprintln!(
        "\ndemo      {} results in {:.0} s wall; open {}",
        results.len(),
        started.elapsed().as_secs_f64(),
        report.display()
    );
    Ok(Outcome::Passed)
}

/// `target` at `scale` (unless it names a scale already).
fn scaled(target: &str, scale: &str) -> String {
    if target.contains("scale=") {
        target.to_string()
    } else if target.contains('?') {
        format!("{target}&scale={scale}")
    } else {
        format!("{target}?scale={scale}")
    }
}

/// `target` behind a 1 GiB DRAM cache, RAPID's most.
fn cached(target: &str) -> String {
    if target.contains('?') {
        format!("cached:{target}&size=1g")
    } else {
        format!("cached:{target}?size=1g")
    }
}

/// Seed 000's field-report scan of the virtual data set, read as `cat` read it, the flagged files rewritten.
fn field_report_args(args: &DemoArgs) -> crate::cli::ScanArgs {
    crate::cli::ScanArgs {
        paths: vec![],
        target: Some(args.target.clone()),
        device: None,
        regions: None,
        region_bytes: None,
        dataset: "field-report".into(),
        refresh_flagged: true,
        min_size: "64k".into(),
        // Read as the field report read (cat), with the random reads of its second experiment.
        reader: Some(crate::cli::ReaderArg::Cat),
        chunk: None,
        qd: None,
        random_reads: None,
        slower_than: 0.5,
        out: Some(args.out.join("field-report")),
        prom: None,
        json: false,
        allow_atime: false,
        state_dir: None,
    }
}

/// Seed 000's 25-shard fleet, the query computed from each drive's reads.
fn fanout_args(args: &DemoArgs) -> crate::cli::FanoutArgs {
    crate::cli::FanoutArgs {
        targets: vec![],
        fleet: Some("field-report".into()),
        age_by: None,
        refresh_all: false,
        shards: vec![],
        hedge: "p95".into(),
        mode: crate::cli::FanoutModeArg::Computed,
        runtime: "60s".into(),
        bs: "4k".into(),
        seed: 1,
        out: Some(args.out.join("fanout")),
        prom: None,
        json: false,
        engine: crate::cli::EngineArg::Auto,
    }
}

/// The drive's health from the counters of both consistency runs.
fn health_args(args: &DemoArgs) -> crate::cli::HealthArgs {
    crate::cli::HealthArgs {
        devices: vec![],
        scan: false,
        from: vec![args.out.join("consistency"), args.out.join("consistency-op25")],
        history: None,
        no_history: true,
        window: "all".into(),
        rated_tbw: None,
        rated_dwpd: None,
        warranty_years: None,
        rated_pe: None,
        prom: None,
        json: false,
        out: Some(args.out.join("health")),
        smartctl: "smartctl".into(),
    }
}

/// The outcome at which the demo stops (interrupted, or its output's reader gone); None to go on.
fn stopped(outcome: Outcome) -> Option<Outcome> {
    match outcome {
        Outcome::Interrupted | Outcome::PipeClosed => Some(outcome),
        Outcome::Passed | Outcome::Failed => None,
    }
}

/// The test methods the demo runs, each with its result directory's name.
fn method_steps(args: &DemoArgs) -> Vec<(&'static str, TestCommand)> {
    let on = |target: &str, name: &str| step_common(args, target, name);
    let common = |name: &str| on(&args.target, name);
    let consistency = |name: &str, op: u32| {
        TestCommand::Consistency(ConsistencyArgs {
            common: common(name),
            runtime: "2000s".into(),
            op,
            fill_passes: 1,
        })
    };
    let sweep = |name: &str, test_size: &str| {
        TestCommand::Sweep(SweepArgs {
            common: common(name),
            test_size: test_size.into(),
            qd: 4,
            from: "512".into(),
            to: "64m".into(),
            size_runtime: "10s".into(),
            axis: crate::cli::SweepAxisArg::Size,
            bs: None,
            max_qd: None,
        })
    };
    vec![
        ("consistency", consistency("consistency", 0)),
        ("consistency-op25", consistency("consistency-op25", 25)),
        (
            "trim",
            TestCommand::Trim(TrimArgs {
                common: common("trim"),
                torture: "40m".into(),
                measure: "60s".into(),
                idle: None,
            }),
        ),
        // ATTO's default 2 GB test file and seed 001's 512 MB one: both overwrite a region inside TurboWrite's
        // 3 GB, whose overwritten SLC blocks are reclaimed, so both run at the SLC cache's speed.
        ("sweep", sweep("sweep", "2g")),
        ("sweep-512m", sweep("sweep-512m", "512m")),
        // The PTS on a 1/64-scale drive with 1-second cells: a full-scale drive needs the specification's minute
        // per cell (56 minutes a round) to reach steady state.
        (
            "pts",
            TestCommand::Pts(PtsArgs {
                common: on(&scaled(&args.target, "1/64"), "pts"),
                test: PtsTestArg::Iops,
                round_time: "1s".into(),
                span: 100.0,
                qd: None,
                max_rounds: 25,
            }),
        ),
    ]
}

/// A step's target and result directory (`--out DIR/NAME`), on the demo's seed.
fn step_common(args: &DemoArgs, target: &str, name: &str) -> TestCommon {
    TestCommon {
        target: TargetArgs {
            target: target.to_string(),
            allow_destroy: false,
            force: false,
            engine: EngineArg::Auto,
        },
        out: Some(args.out.join(name)),
        json: false,
        seed: 1,
    }
}
