//! `demo`: the main job on the embedded default device, a virtual Samsung 840 EVO 250 GB. Runs the consistency
//! test twice (as shipped, and with 25% extra over-provisioning), TRIM validation and transfer-size sweeps over
//! 2 GiB and 512 MiB, seed 000's field-report scan (files by data age, the slow ones rewritten) and its 25-drive
//! fan-out (the query that waits for every shard, and the stragglers), a quick SNIA PTS IOPS test (the drive at
//! 1/64 scale, 1 s cells), seed 001's storage-bench table (synthetic light and heavy desktop traces replayed with
//! and without the RAPID-like cache), each into its own result directory, reads the drive's health (host vs NAND
//! writes, write amplification, P/E used) from the consistency runs' counters, then draws them all into one
//! report. Every step is another command's plan, run through the same ports.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::target::{CacheSpec, TargetSpec};
use ssdlab_health::rating::RatingFlags;
use ssdlab_methods::pts::PtsTest;
use ssdlab_methods::sweep::SweepAxis;
use ssdlab_sim::spec::SimSpec;

use crate::fanout::{FanoutFlags, FleetFlag, Mode};
use crate::flags::Given;
use crate::methodology::MethodPlan;
use crate::methodology::options::{
    self, ConsistencyFlags, PtsFlags, ReplayFlags, SweepFlags, TrimFlags, TrimMeasure,
};
use crate::ports::{Outcome, Ports};
use crate::scan::{ReaderChoice, ScanFlags};
use crate::target::TargetPlan;
use crate::{export, fanout, health, methodology, report, scan};

mod side_by_side;

/// A demo: the virtual drive and the directory that takes every result.
#[derive(Debug, Clone)]
pub struct Plan {
    /// A `sim:` target (plain; the demo scales it and puts the cache over it where a step says so).
    pub target: Given<TargetSpec>,
    pub out: PathBuf,
    /// Whether the results of an earlier demo there are replaced (`--replace`, or the default directory holding
    /// ssdlab's own demo output: the main command works twice).
    pub replace: bool,
}

/// Where the demo writes when no `--out` is given.
pub const DEFAULT_OUT: &str = "ssdlab-demo";

impl Plan {
    /// `out` is None for the default directory.
    pub fn new(target: Given<TargetSpec>, out: Option<PathBuf>, replace: bool) -> Result<Plan> {
        if !target.value.is_virtual() {
            bail!(
                "--target {}: the demo runs on a virtual drive; give a sim: target, e.g. sim:840evo-250g",
                target.text
            );
        }
        let default = out.is_none();
        let out = out.unwrap_or_else(|| PathBuf::from(DEFAULT_OUT));
        if out.exists() && !out.is_dir() {
            bail!(
                "--out {}: exists and is not a directory; name a directory",
                out.display()
            );
        }
        // An earlier demo's results are replaced only when asked, or in the default directory when its page is
        // ssdlab's own demo report; anything of the user's there is never touched either way (each step checks).
        let holds_results = out.join("report.html").exists()
            || std::fs::read_dir(&out)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.path().join("result.json").exists());
        // ssdlab's own demo output: its page (if it got that far) and every step's result are ssdlab's.
        let ours_as = |dir: &std::path::Path, name: &str, kind: ssdlab_outputs::Kind| {
            ssdlab_outputs::OutputDir::open(dir)
                .and_then(|d| d.status(name))
                .is_ok_and(|s| s == ssdlab_outputs::Status::Absent || s == ssdlab_outputs::Status::Ours(kind))
        };
        let ours = || {
            ours_as(&out, "report.html", ssdlab_outputs::Kind::Report)
                && std::fs::read_dir(&out).into_iter().flatten().flatten().all(|e| {
                    !e.path().join("result.json").exists()
                        || ours_as(&e.path(), "result.json", ssdlab_outputs::Kind::Result)
                })
        };
        let replace = replace || (default && holds_results && ours());
        if holds_results && !replace {
            bail!(
                "--out {}: it already holds a demo's results; name a new directory, or add --replace to replace \
                 them (files of yours there are kept)",
                out.display()
            );
        }
        // The page and the traces the demo writes besides its steps' results: a file of the user's under one of
        // those names refuses the demo now, not after every step has run.
        for (dir, name, kind) in [
            (out.clone(), "report.html", ssdlab_outputs::Kind::Report),
            (out.join("traces"), "light.iolog", ssdlab_outputs::Kind::Trace),
            (out.join("traces"), "heavy.iolog", ssdlab_outputs::Kind::Trace),
        ] {
            if dir.is_dir() {
                ssdlab_outputs::OutputDir::open(&dir)
                    .and_then(|d| d.check(name, kind))
                    .map_err(|e| anyhow!("--out {}: {e}", out.display()))?;
            }
        }
        Ok(Plan { target, out, replace })
    }

    /// The result directory of one step.
    fn step_out(&self, name: &str) -> export::OutDir {
        export::OutDir::new(self.out.join(name), self.replace)
    }
}

/// What a step runs: a command on the ports it is given.
type StepRun<'a> = Box<dyn FnOnce(&mut Ports) -> Result<Outcome> + Send + 'a>;

/// A step that runs beside others: its name, the memory it is expected to hold at most, and what it runs.
struct Step<'a> {
    name: String,
    memory_bytes: u64,
    run: StepRun<'a>,
}

impl<'a> Step<'a> {
    fn new(
        name: &str,
        memory_bytes: u64,
        run: impl FnOnce(&mut Ports) -> Result<Outcome> + Send + 'a,
    ) -> Self {
        Step {
            name: name.into(),
            memory_bytes,
            run: Box::new(run),
        }
    }
}

/// The simulator's map and bookkeeping per 4 KiB unit of raw NAND (ARCHITECTURE.md: about 8.6 bytes).
const SIM_BYTES_PER_UNIT: u64 = 9;

/// The least a step is expected to hold, whatever its drive: the process, its histograms and tables.
const STEP_FLOOR_BYTES: u64 = 64 << 20;

/// The memory a step on `drives` drives like `target` is expected to hold at most: twice each virtual drive's map (a method's own
/// tables and histograms grow with the drive too), its cache's frames, and at least a floor. Measured alone on
/// the 250 GB drive (its map about 600 MB): consistency 527 MB, the 2 GiB sweep 971 MB, TRIM validation 770 MB,
/// the field-report scan 529 MB, the 2 GiB sweep behind RAPID's 1 GiB cache 2.13 GB (estimated 2.27); the PTS at
/// 1/64 scale 55 MB (estimated 64); the 25-drive fan-out 99 MB (estimated 118).
fn step_memory_bytes(target: &str, drives: u64) -> u64 {
    fn of(spec: &TargetSpec) -> u64 {
        match spec {
            TargetSpec::Sim { spec } => SimSpec::parse(spec).map_or(0, |drive| {
                drive.profile.raw_nand_bytes / u64::from(drive.scale.max(1)) / 4096 * SIM_BYTES_PER_UNIT
            }),
            TargetSpec::Cached { inner, cache, .. } => of(inner) + cache.size_bytes.unwrap_or(1 << 30),
            _ => 0,
        }
    }
    fn map(spec: &TargetSpec) -> u64 {
        match spec {
            TargetSpec::Sim { .. } => of(spec),
            TargetSpec::Cached { inner, .. } => map(inner),
            _ => 0,
        }
    }
    TargetSpec::parse(target).map_or(STEP_FLOOR_BYTES, |spec| {
        (drives * (of(&spec) + map(&spec))).max(STEP_FLOOR_BYTES)
    })
}

/// Runs the independent steps side by side, then the ones that read their results, then draws the report.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let started = std::time::Instant::now();
    let mut directories = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    for (name, target, method) in method_steps(plan)? {
        let step_plan = test_plan(plan, &target, name, method)?;
        steps.push(Step::new(name, step_memory_bytes(&target, 1), move |ports| {
            methodology::run(step_plan, ports)
        }));
    }
    let drive_memory = step_memory_bytes(&plan.target.text, 1);
    // The fan-out's fleet: 25 virtual 1 TB drives at 1/1024 of their size.
    let fleet_memory = step_memory_bytes("sim:840evo-1t?scale=1/1024", 25);
    // Seed 000's finding on a drive of the same kind: files of the field report's ages read slower the older
    // they are, and rewriting the flagged ones in place makes them fresh again.
    let field_report = scan::Plan::new(field_report_flags(plan))?;
    steps.push(Step::new("field-report", drive_memory, move |ports| {
        scan::run(&field_report, ports)
    }));
    // Seed 000's search machine: 25 virtual 1 TB drives whose data is 0.9 to 7 months old, one shard each; the
    // query that waits for all of them, and which drives make its tail.
    let fanout = fanout::Plan::new(fanout_flags(plan))?;
    steps.push(Step::new("fanout", fleet_memory, move |ports| {
        fanout::run(&fanout, ports)
    }));
    // The seed's fix on the whole fleet: the same query once every drive's data has been rewritten, for the
    // report to show beside the query before.
    let refreshed = fanout::Plan::new(FanoutFlags {
        refresh_all: true,
        out: Some(plan.step_out("fanout-refreshed")),
        ..fanout_flags(plan)
    })?;
    steps.push(Step::new("fanout-refreshed", fleet_memory, move |ports| {
        fanout::run(&refreshed, ports)
    }));
    for step in &steps {
        directories.push(plan.out.join(&step.name));
    }
    if let Some(stop) = side_by_side::run(ports, steps, side_by_side::Pool::DEMO)? {
        return Ok(stop);
    }
    // The drive's health after all that: host vs NAND writes, write amplification and P/E used, from the
    // counters of each consistency run.
    let health = health_plan(plan)?;
    if let Some(stop) = step(ports, "health", |ports| health::run(&health, ports))? {
        return Ok(stop);
    }
    directories.push(plan.out.join("health"));
    // Seed 001's storage-bench table: synthetic light and heavy desktop traces replayed on the drive, then on the
    // same drive behind the RAPID-like cache.
    let traces = plan.out.join("traces");
    ssdlab_outputs::OutputDir::create(&traces).map_err(|e| anyhow!("--out {}: {e}", plan.out.display()))?;
    for profile in [
        ssdlab_trace::synth::Profile::Light,
        ssdlab_trace::synth::Profile::Heavy,
    ] {
        let trace = traces.join(format!("{}.iolog", profile.name()));
        let ops = ssdlab_trace::synth::generate(profile, 1, 60_000_000_000, None);
        export::write_output(
            "--out",
            &trace,
            ssdlab_outputs::Kind::Trace,
            ssdlab_trace::synth::to_fio_iolog(&ops, "/dev/ssdlab-synth").as_bytes(),
        )?;
        for (kind, target) in [
            ("plain", plan.target.text.clone()),
            ("rapid", cached(&plan.target.text)?),
        ] {
            let name = format!("replay-{}-{kind}", profile.name());
            let replay = || -> Result<MethodPlan> {
                Ok(MethodPlan::Replay(options::replay(ReplayFlags::at_trace_times(
                    &trace,
                ))?))
            };
            if let Some(stop) = step(ports, &name, |ports| {
                methodology::run(test_plan(plan, &target, &name, replay()?)?, ports)
            })? {
                return Ok(stop);
            }
            directories.push(plan.out.join(&name));
        }
    }
    let results = report::read_results(&directories)?;
    let page = plan.out.join("report.html");
    export::write_report("--out", &page, &results)?;
    tell_the_story(ports.console, &directories, &results, &page, started);
    Ok(Outcome::Passed)
}

/// The story in one screen: each step's verdict by its kind, a finding (what the step exists to find) told apart
/// from a failure; then where the page is.
fn tell_the_story(
    console: &mut dyn crate::ports::Console,
    directories: &[PathBuf],
    results: &[ssdlab_core::schema::RunResult],
    page: &std::path::Path,
    started: std::time::Instant,
) {
    console.say("\ndemo      what each step found");
    for (dir, result) in directories.iter().zip(results) {
        let name = dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let line = format!(
            "  {name:<24} {:<8} {}",
            result.verdict.kind(),
            result.verdict.reasons.first().map_or("", String::as_str)
        );
        console.say(line.trim_end());
    }
    console.say(&format!(
        "\ndemo      {} results in {:.0} s wall; open {}",
        results.len(),
        started.elapsed().as_secs_f64(),
        page.display()
    ));
}

/// Runs one step under its heading, as a command that begins now; the outcome at which the demo stops
/// (interrupted, or its output's reader gone), or None to go on.
fn step(
    ports: &mut Ports,
    name: &str,
    run: impl FnOnce(&mut Ports) -> Result<Outcome>,
) -> Result<Option<Outcome>> {
    ports.console.say(&format!("\n== demo: {name}"));
    ports.mark_start();
    Ok(match run(ports)? {
        outcome @ (Outcome::Interrupted | Outcome::PipeClosed) => Some(outcome),
        Outcome::Passed | Outcome::Failed | Outcome::Unknown => None,
    })
}

/// The virtual drive at 1/`divisor` of its size (unless it names a scale already).
fn scaled(target: &str, divisor: u32) -> Result<String> {
    let TargetSpec::Sim { spec } = TargetSpec::parse(target)? else {
        bail!("--target {target}: the demo scales a sim: target");
    };
    let mut drive = SimSpec::parse(&spec).map_err(|e| anyhow!("--target {target}: {e}"))?;
    if drive.scale == 1 {
        drive.scale = divisor;
    }
    Ok(drive.to_string())
}

/// `target` behind a 1 GiB DRAM cache, RAPID's most.
fn cached(target: &str) -> Result<String> {
    let cache = CacheSpec {
        size_bytes: Some(1 << 30),
        ..CacheSpec::default()
    };
    Ok(TargetSpec::cached(TargetSpec::parse(target)?, cache)?.to_string())
}

/// `target` behind seed 001's RAPID as its ATTO runs met it: 1 GiB of DRAM that caches sequential transfers of
/// any length up to the 2 GiB test file.
fn rapid(target: &str) -> Result<String> {
    let cache = CacheSpec {
        size_bytes: Some(1 << 30),
        seq_cutoff_bytes: 2 << 30,
        ..CacheSpec::default()
    };
    Ok(TargetSpec::cached(TargetSpec::parse(target)?, cache)?.to_string())
}

/// A step's plan: its target and result directory (`DIR/NAME`), on the demo's seed.
fn test_plan(plan: &Plan, target: &str, name: &str, method: MethodPlan) -> Result<methodology::Plan> {
    methodology::Plan::new(TargetPlan::plain(target)?, 1, Some(plan.step_out(name)), method)
}

/// Seed 000's field-report scan of the virtual data set, read as `cat` read it, the flagged files rewritten.
fn field_report_flags(plan: &Plan) -> ScanFlags {
    ScanFlags {
        paths: vec![],
        target: Some(plan.target.clone()),
        device: None,
        regions: None,
        region_bytes: None,
        dataset: "field-report".into(),
        refresh_flagged: true,
        min_size: Given::of("64k", 64 << 10),
        // Read as the field report read (cat), with the random reads of its second experiment.
        reader: Some(ReaderChoice::Cat),
        chunk: None,
        qd: None,
        random_reads: None,
        slower_than: 0.5,
        out: Some(plan.step_out("field-report")),
        prom: None,
        allow_atime: false,
        state_dir: None,
    }
}

/// Seed 000's 25-shard fleet, the query computed from each drive's reads.
fn fanout_flags(plan: &Plan) -> FanoutFlags {
    FanoutFlags {
        targets: vec![],
        fleet: Some(FleetFlag::FieldReport),
        age_by: None,
        refresh_all: false,
        shards: vec![],
        hedge: Given::of("p95", 95.0),
        mode: Mode::Computed,
        runtime: Given::of("60s", 60_000_000_000),
        bs: Given::of("4k", 4096),
        seed: 1,
        out: Some(plan.step_out("fanout")),
        prom: None,
        engine: ssdlab_io::Engine::Auto,
        from: vec![],
    }
}

/// The drive's health from the counters of both consistency runs.
fn health_plan(plan: &Plan) -> Result<health::Plan> {
    health::Plan::new(
        vec![],
        false,
        vec![plan.out.join("consistency"), plan.out.join("consistency-op25")],
        None,
        Given::of("all", None),
        RatingFlags::default(),
        None,
        Some(plan.step_out("health")),
        "smartctl".into(),
        ssdlab_health::verdict::WEAR_WARN_PERCENT,
    )
}

/// A second, in nanoseconds.
const S: u64 = 1_000_000_000;

/// The test methods the demo runs, each with its result directory's name and target.
fn method_steps(plan: &Plan) -> Result<Vec<(&'static str, String, MethodPlan)>> {
    let consistency = |op: u32| -> Result<MethodPlan> {
        Ok(MethodPlan::Consistency(options::consistency(ConsistencyFlags {
            runtime_ns: 2000 * S,
            op,
            fill_passes: 1,
        })?))
    };
    let sweep = |test_bytes: u64| -> Result<MethodPlan> {
        Ok(MethodPlan::Sweep(options::sweep(SweepFlags {
            test_bytes,
            qd: 4,
            from_bytes: 512,
            to_bytes: 64 << 20,
            size_runtime_ns: 10 * S,
            axis: SweepAxis::Size,
            block_bytes: None,
            max_qd: None,
            jobs: 1,
        })?))
    };
    let on = plan.target.text.clone();
    Ok(vec![
        ("consistency", on.clone(), consistency(0)?),
        ("consistency-op25", on.clone(), consistency(25)?),
        (
            "trim",
            on.clone(),
            MethodPlan::Trim(options::trim(TrimFlags {
                torture_ns: 40 * 60 * S,
                measure: TrimMeasure::For(60 * S),
                idle_ns: None,
            })?),
        ),
        // ATTO's default 2 GB test file and seed 001's 512 MB one: both overwrite a region inside TurboWrite's
        // 3 GB, whose overwritten SLC blocks are reclaimed, so both run at the SLC cache's speed.
        ("sweep", on.clone(), sweep(2 << 30)?),
        ("sweep-512m", on.clone(), sweep(512 << 20)?),
        // The same two behind seed 001's RAPID: a 1 GiB DRAM cache that, like RAPID, caches large sequential
        // transfers too (no sequential cutoff below the test file), so the report draws what the cache does to
        // reads and writes by transfer size beside the drive alone, as the seed's ATTO charts do.
        ("sweep-rapid", rapid(&on)?, sweep(2 << 30)?),
        ("sweep-512m-rapid", rapid(&on)?, sweep(512 << 20)?),
        // The PTS on a 1/64-scale drive with 1-second cells: a full-scale drive needs the specification's minute
        // per cell (56 minutes a round) to reach steady state.
        (
            "pts",
            scaled(&on, 64)?,
            MethodPlan::Pts(options::pts(PtsFlags {
                test: PtsTest::Iops,
                round_ns: S,
                span: 100.0,
                qd: None,
                max_rounds: 25,
                flavour: ssdlab_methods::pts::PtsFlavour::Enterprise,
            })?),
        ),
    ])
}
