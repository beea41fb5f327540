//! `fanout`: the same random reads on every drive of a fleet, the latency of a query that waits for all of them,
//! and the straggler. The flags as given ([`FanoutFlags`]) become a checked [`Plan`] (the drives, each once);
//! the run opens every drive read-only before any reads, measures, analyzes and records.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::histogram::Histogram;
use ssdlab_core::schema::Analysis;
use ssdlab_core::schema::options::{FanoutFlags as RecordedFlags, RunOptions};
use ssdlab_core::target::TargetSpec;
use ssdlab_methods::fanout::fleet::{FleetDrive, field_report_fleet, parse_fleet_file};
use ssdlab_methods::fanout::measure::{
    DriveReads, ReadLoad, run_independent, run_independent_sets, run_synchronized_real,
    run_synchronized_sets, run_synchronized_virtual,
};
use ssdlab_methods::fanout::{RunShape, WhatIf, analyze, verdict};
use ssdlab_methods::session::MethodError;

use crate::export;
use crate::flags::Given;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// How the query's latency is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every drive reads on its own; the query is computed from their histograms.
    Computed,
    /// Synchronized queries: one read to every drive at once, waiting for all.
    Measured,
}

/// Which fleet `--fleet` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetFlag {
    /// The field report's 25 virtual 840 EVO 1 TB shards.
    FieldReport,
    /// A file listing one target a line.
    File(PathBuf),
}

impl std::str::FromStr for FleetFlag {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "field-report" => FleetFlag::FieldReport,
            path => FleetFlag::File(PathBuf::from(path)),
        })
    }
}

impl std::fmt::Display for FleetFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetFlag::FieldReport => f.write_str("field-report"),
            FleetFlag::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// `fanout`'s flags, typed by the command line (the demo builds them too).
#[derive(Debug, Clone)]
pub struct FanoutFlags {
    pub targets: Vec<Given<TargetSpec>>,
    pub fleet: Option<FleetFlag>,
    /// With the field report's fleet: nanoseconds more of age on every drive's data.
    pub age_by: Option<Given<u64>>,
    pub refresh_all: bool,
    pub shards: Vec<u32>,
    /// The percentile of the fleet's read latency after which a read is hedged.
    pub hedge: Given<f64>,
    pub mode: Mode,
    /// Nanoseconds every drive reads.
    pub runtime: Given<u64>,
    /// Bytes per read.
    pub bs: Given<u64>,
    pub seed: u64,
    pub out: Option<crate::export::OutDir>,
    pub prom: Option<PathBuf>,
    pub engine: ssdlab_io::Engine,
    /// Saved fan-out results to merge instead of measuring (`--from DIR...`).
    pub from: Vec<PathBuf>,
}

/// Shards computed when `--shards` is not given: the "what if we had 100 shards like these" of the issue.
const DEFAULT_WHAT_IF_SHARDS: u32 = 100;

/// The fleet the flags describe.
fn fleet(args: &FanoutFlags) -> Result<Vec<FleetDrive>> {
    if (args.age_by.is_some() || args.refresh_all) && args.fleet != Some(FleetFlag::FieldReport) {
        bail!(
            "--age-by and --refresh-all change the virtual fleet: add --fleet field-report (a fleet of your own ages with its data)"
        );
    }
    match &args.fleet {
        Some(FleetFlag::FieldReport) => {
            let age_by_s = args.age_by.as_ref().map_or(0.0, |a| a.value as f64 / 1e9);
            Ok(field_report_fleet(age_by_s, args.refresh_all, args.seed))
        }
        Some(FleetFlag::File(path)) => {
            let shown = path.display();
            let text = crate::inputs::read_text(
                &format!("--fleet {shown}"),
                path,
                crate::inputs::MAX_SMALL_INPUT_BYTES,
                "give field-report, or a file of targets",
            )?;
            let drives = parse_fleet_file(&text).map_err(|e| anyhow!("--fleet {shown}: {e}"))?;
            // Every target of the file is read now, so a typo on line 20 is refused before any drive reads.
            for drive in &drives {
                TargetSpec::parse(&drive.target).map_err(|e| anyhow!("--fleet {shown}: {e}"))?;
            }
            Ok(drives)
        }
        None => Ok(args
            .targets
            .iter()
            .map(|t| FleetDrive {
                name: t.text.clone(),
                target: t.text.clone(),
                data_age_months: None,
            })
            .collect()),
    }
}

/// The fleet's clock (virtual only when every drive's is) and its capacity. Queries measured in step need one
/// clock: a fleet of virtual and real drives is refused for them.
fn fleet_clock(
    devices: &[ssdlab_targets::AnyDevice],
    mode: Mode,
) -> Result<(ssdlab_core::device::ClockKind, u64)> {
    let virtual_clocks = devices
        .iter()
        .filter(|d| ssdlab_core::Device::info(*d).clock == ssdlab_core::device::ClockKind::Virtual)
        .count();
    if mode == Mode::Measured && virtual_clocks != 0 && virtual_clocks != devices.len() {
        bail!(
            "--mode measured: the fleet mixes virtual and real drives, whose clocks differ; measure them apart, or use --mode computed"
        );
    }
    let capacity_bytes: u64 = devices
        .iter()
        .map(|d| ssdlab_core::Device::info(d).capacity_bytes)
        .sum();
    let clock = if virtual_clocks == devices.len() {
        ssdlab_core::device::ClockKind::Virtual
    } else {
        ssdlab_core::device::ClockKind::Real
    };
    Ok((clock, capacity_bytes))
}

/// The verdict on what was measured; a run cut short names what it saw, but a straggler among part of the reads
/// is not a finding yet.
fn verdict_as_run(
    analysis: &ssdlab_core::schema::fanout::FanoutAnalysis,
    interrupted: bool,
) -> ssdlab_core::schema::Verdict {
    let mut verdict = verdict(analysis);
    if interrupted {
        verdict.finding = false;
        verdict.passed = false;
        verdict
            .reasons
            .push("interrupted: the analysis covers only the reads made before the stop".into());
    }
    verdict
}

/// How the drives are read, as the first line says it.
fn how_read(mode: Mode) -> &'static str {
    match mode {
        Mode::Computed => "all at once, each on its own (the query computed from their histograms)",
        Mode::Measured => "in synchronized queries (one read to every drive at once, waiting for all)",
    }
}

/// Runs the fan-out and records it.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    if let Some(merged) = &plan.merged {
        return run_merged(plan, merged, ports);
    }
    let Plan {
        flags: args,
        runtime_ns,
        block_bytes,
        drives,
        merged: _,
    } = plan;
    let (runtime_ns, block_bytes) = (*runtime_ns, *block_bytes);
    // Every drive is opened here first, so a bad target is refused before any drive starts reading.
    let devices = drives
        .iter()
        .map(|d| open_drive(ports.targets, args, d))
        .collect::<Result<Vec<_>>>()?;
    let (clock, capacity_bytes) = fleet_clock(&devices, args.mode)?;
    let recording = Recording::begin(args.out.as_ref(), args.prom.as_deref(), ports.started_unix_s)?;
    let load = ReadLoad {
        block_bytes,
        runtime_ns,
        seed: args.seed,
        // A real drive's reads are timed on the host's clock, so a reading thread that waits for a CPU adds that
        // wait to them (a virtual drive's are not probed: see `measure::probe_for`).
        cpu_wait: ssdlab_io::sys::thread_cpu_wait,
    };
    let mode = match args.mode {
        Mode::Computed => "computed",
        Mode::Measured => "measured",
    };
    let workload = format!(
        "{} random reads at QD1 on every drive for {}",
        ssdlab_core::units::BinaryBytes(block_bytes),
        ssdlab_core::units::Nanos(args.runtime.value as f64)
    );
    ports.console.say(&format!(
        "fanout    {} drives, {workload}, {}",
        drives.len(),
        how_read(args.mode)
    ));
    let stop = ports.stop.flag();
    let (reads, measured, reading_threads) =
        read_every_drive(ports.targets, plan, devices, clock, &load, stop)?;
    say_readers(ports, reading_threads, drives.len(), clock, plan.flags.mode);
    let interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    if interrupted {
        if reads.iter().any(|r| r.histogram.is_empty()) {
            ports
                .console
                .say("fanout    interrupted before every drive had read: nothing to analyze");
            return Ok(Outcome::Interrupted);
        }
        ports
            .console
            .say("fanout    interrupted: the analysis covers the reads made so far");
    }
    let runtime_s = reads.iter().map(|r| r.runtime_s).fold(0.0, f64::max);
    let what_if = what_if(args);
    let shape = RunShape {
        workload,
        mode: mode.into(),
        runtime_s,
        reading_threads: Some(reading_threads),
    };
    let analysis = analyze(drives, reads, measured, &what_if, shape)?;
    ports.say_lines(ssdlab_report::text::fanout_lines(&analysis));
    let verdict = verdict_as_run(&analysis, interrupted);
    let measured = Measured {
        block_bytes,
        clock,
        capacity_bytes,
        mode,
        shards: what_if.shards.clone(),
        interrupted,
        recorded: Recorded {
            targets: args.targets.iter().map(|t| t.text.clone()).collect(),
            runtime_ns: args.runtime.value,
            block_bytes: args.bs.value,
            seed: args.seed,
        },
    };
    publish(args, recording, ports, drives, analysis, verdict, measured)
}

fn what_if(args: &FanoutFlags) -> WhatIf {
    WhatIf {
        shards: if args.shards.is_empty() {
            vec![DEFAULT_WHAT_IF_SHARDS]
        } else {
            args.shards.clone()
        },
        hedge_percentile: args.hedge.value,
    }
}

/// The query over the drives of saved results, computed as a fan-out computes it from what it measured.
fn run_merged(plan: &Plan, merged: &crate::fanout_from::Merged, ports: &mut Ports) -> Result<Outcome> {
    let args = &plan.flags;
    let recording = Recording::begin(args.out.as_ref(), args.prom.as_deref(), ports.started_unix_s)?;
    let workload = format!(
        "{} random reads at QD1 on every drive for {}",
        ssdlab_core::units::BinaryBytes(merged.block_bytes),
        ssdlab_core::units::Nanos(merged.runtime_ns as f64)
    );
    ports.console.say(&format!(
        "fanout    {} drives from {} results, {workload} (the query computed from their histograms)",
        merged.drives.len(),
        args.from.len()
    ));
    let what_if = what_if(args);
    let runtime_s = merged.reads.iter().map(|r| r.runtime_s).fold(0.0, f64::max);
    let shape = RunShape {
        workload,
        mode: "computed".into(),
        runtime_s,
        reading_threads: None,
    };
    let analysis = analyze(&merged.drives, merged.reads.clone(), None, &what_if, shape)?;
    ports.say_lines(ssdlab_report::text::fanout_lines(&analysis));
    let verdict = verdict(&analysis);
    let measured = Measured {
        block_bytes: merged.block_bytes,
        clock: merged.clock,
        capacity_bytes: merged.capacity_bytes,
        mode: "computed",
        shards: what_if.shards.clone(),
        interrupted: false,
        recorded: Recorded {
            targets: merged.drives.iter().map(|d| d.target.clone()).collect(),
            runtime_ns: merged.runtime_ns,
            block_bytes: merged.block_bytes,
            seed: merged.seed,
        },
    };
    publish(
        args,
        recording,
        ports,
        &merged.drives,
        analysis,
        verdict,
        measured,
    )
}

/// Opens a drive of the fleet read-only: the opener never creates, extends or claims anything for writing.
fn open_drive(
    targets: &dyn crate::ports::Targets,
    args: &FanoutFlags,
    drive: &FleetDrive,
) -> Result<ssdlab_targets::AnyDevice> {
    let target = TargetPlan::new(&drive.target, false, false, args.engine)?;
    Ok(target.open(targets, Use::Reads)?.device)
}

/// Says when fewer threads than real drives read them (and how).
fn say_readers(
    ports: &mut Ports,
    reading_threads: u32,
    drives: usize,
    clock: ssdlab_core::device::ClockKind,
    mode: Mode,
) {
    if clock == ssdlab_core::device::ClockKind::Real && (reading_threads as usize) < drives {
        ports.console.say(&match mode {
            Mode::Computed => format!(
                "fanout    read by {reading_threads} threads (more drives than CPUs), each keeping a read in flight \
                 on every drive of its share through one io_uring"
            ),
            Mode::Measured => format!(
                "fanout    read by {reading_threads} threads (more drives than CPUs), each sending a query's reads \
                 to every drive of its share in one io_uring submission: a query includes the time to issue them"
            ),
        });
    }
}

/// Every drive's reads, with `--mode measured` the synchronized queries' latencies, and how many threads read.
fn read_every_drive(
    targets: &dyn crate::ports::Targets,
    plan: &Plan,
    mut devices: Vec<ssdlab_targets::AnyDevice>,
    clock: ssdlab_core::device::ClockKind,
    load: &ReadLoad,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(Vec<DriveReads>, Option<Histogram>, u32)> {
    let (args, drives) = (&plan.flags, &plan.drives);
    // Real drives are read on threads of their own, and each worker opens its drive again there: an io_uring
    // ring serves only the thread that made it.
    let reopen = |i: usize| -> Result<Box<dyn ssdlab_core::Device>, MethodError> {
        open_drive(targets, args, &drives[i])
            .map(|d| Box::new(d) as Box<dyn ssdlab_core::Device>)
            .map_err(|e| MethodError::Invalid(format!("{e:#}")))
    };
    Ok(match (args.mode, clock) {
        (Mode::Computed, ssdlab_core::device::ClockKind::Real) => {
            let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
            let siblings = set_siblings(&devices, workers)?;
            // The siblings hold the drives (their descriptors share the gate's open file descriptions): the
            // devices themselves, with their rings and buffers, go before the reading starts.
            drop(devices);
            match siblings {
                Some(siblings) => (
                    read_in_shares(siblings, workers, load, stop)?,
                    None,
                    workers as u32,
                ),
                None => (
                    run_independent(drives.len(), &reopen, load, stop)?,
                    None,
                    drives.len() as u32,
                ),
            }
        }
        (Mode::Computed, ssdlab_core::device::ClockKind::Virtual) => {
            drop(devices);
            (
                run_independent(drives.len(), &reopen, load, stop)?,
                None,
                drives.len() as u32,
            )
        }
        (Mode::Measured, ssdlab_core::device::ClockKind::Virtual) => {
            let (reads, queries) = run_synchronized_virtual(&mut devices, load, stop)?;
            (reads, Some(queries), 1)
        }
        (Mode::Measured, ssdlab_core::device::ClockKind::Real) => {
            let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
            let siblings = set_siblings(&devices, workers)?;
            drop(devices);
            match siblings {
                Some(siblings) => {
                    let (reads, queries) = run_synchronized_sets(
                        drives.len(),
                        workers,
                        &set_opener(siblings, load),
                        load,
                        stop,
                    )?;
                    (reads, Some(queries), workers as u32)
                }
                None => {
                    let (reads, queries) = run_synchronized_real(drives.len(), &reopen, load, stop)?;
                    (reads, Some(queries), drives.len() as u32)
                }
            }
        }
    })
}

/// With more drives than `workers` CPUs, each read live, a sibling of every drive for the workers' drive sets: a
/// thread a drive would measure the scheduler (and start and stop the drives seconds apart). None when the drives
/// are no more than the CPUs, or one of them cannot be in a set (the caller then reads each on a thread of its
/// own).
fn set_siblings(
    devices: &[ssdlab_targets::AnyDevice],
    workers: usize,
) -> Result<Option<Vec<ssdlab_io::Sibling>>> {
    if devices.len() <= workers {
        return Ok(None);
    }
    Ok(devices
        .iter()
        .map(|d| d.set_sibling())
        .collect::<Result<Option<Vec<_>>, _>>()?)
}

/// Every drive read from `workers` threads, each a share of the drives through one ring over their siblings.
fn read_in_shares(
    siblings: Vec<ssdlab_io::Sibling>,
    workers: usize,
    load: &ReadLoad,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<DriveReads>> {
    let drives = siblings.len();
    Ok(run_independent_sets(
        drives,
        workers,
        &set_opener(siblings, load),
        load,
        stop,
    )?)
}

/// Opens a worker's share of the drives as one set, from the siblings (each taken once).
fn set_opener(
    siblings: Vec<ssdlab_io::Sibling>,
    load: &ReadLoad,
) -> impl Fn(&[usize]) -> Result<Box<dyn ssdlab_core::device::DriveSet>, MethodError> + Sync {
    let siblings = std::sync::Mutex::new(siblings.into_iter().map(Some).collect::<Vec<_>>());
    let block_bytes = load.block_bytes as usize;
    move |share: &[usize]| {
        let mine = {
            let mut all = siblings.lock().expect("no worker panics holding it");
            share
                .iter()
                .map(|&i| all[i].take().expect("each drive is in one share"))
                .collect()
        };
        Ok(ssdlab_targets::drive_set(mine, block_bytes)?)
    }
}

/// A fan-out, checked: how long and how much each read, the hedge, and the drives (each once).
#[derive(Debug, Clone)]
pub struct Plan {
    flags: FanoutFlags,
    runtime_ns: u64,
    block_bytes: u64,
    drives: Vec<FleetDrive>,
    /// With `--from`: the saved results' drives and reads, merged.
    merged: Option<crate::fanout_from::Merged>,
}

impl Plan {
    /// Checks every flag and reads the fleet; `--out` is made ready and `--prom` checked.
    pub fn new(flags: FanoutFlags) -> Result<Plan> {
        let args = &flags;
        if args.runtime.value < 100_000_000 {
            bail!("--runtime {}: read for at least 100ms", args.runtime.text);
        }
        let block_bytes = args.bs.value;
        if !(512..=1 << 20).contains(&block_bytes) || !block_bytes.is_multiple_of(512) {
            bail!("--bs {}: use a multiple of 512 from 512 to 1m", args.bs.text);
        }
        if let Some(bad) = args.shards.iter().find(|&&n| !(1..=100_000).contains(&n)) {
            bail!("--shards {bad}: use 1 to 100000");
        }
        let merged = (!args.from.is_empty())
            .then(|| crate::fanout_from::merge(&args.from))
            .transpose()?;
        let (runtime_ns, block_bytes, drives) = match &merged {
            Some(m) => (m.runtime_ns, m.block_bytes, m.drives.clone()),
            None => (args.runtime.value, block_bytes, fleet(args)?),
        };
        // A drive twice breaks the independence the query arithmetic assumes, and its metrics would collide.
        for (i, drive) in drives.iter().enumerate() {
            if let Some(twin) = drives[..i]
                .iter()
                .find(|d| d.name == drive.name || d.target == drive.target)
            {
                let flag = if !args.from.is_empty() {
                    "--from"
                } else if args.fleet.is_some() {
                    "--fleet"
                } else {
                    "--target"
                };
                bail!(
                    "{flag} {}: a drive given twice ({} and {}); list every drive once, with a name of its own",
                    drive.target,
                    twin.name,
                    drive.name
                );
            }
        }
        if drives.is_empty() {
            bail!("--target T (repeatable) or --fleet: a fan-out needs at least one drive");
        }
        if let Some(prom) = &args.prom {
            export::check_prom_path(prom)?;
        }
        // Checked now, created by the recording once every drive has opened.
        if let Some(dir) = &args.out {
            export::check_out_dir(dir)?;
        }
        let plan = Plan {
            runtime_ns,
            block_bytes,
            drives,
            merged,
            flags,
        };
        // What every measurement and the query arithmetic rely on.
        assert!(plan.runtime_ns >= 100_000_000 && plan.block_bytes.is_multiple_of(512));
        assert!((50.0..100.0).contains(&plan.flags.hedge.value));
        assert!(
            plan.drives.iter().enumerate().all(|(i, d)| plan.drives[..i]
                .iter()
                .all(|e| e.name != d.name && e.target != d.target)),
            "every drive once"
        );
        Ok(plan)
    }
}

/// How the reads were made, for the record.
struct Measured {
    block_bytes: u64,
    clock: ssdlab_core::device::ClockKind,
    capacity_bytes: u64,
    mode: &'static str,
    shards: Vec<u32>,
    interrupted: bool,
    recorded: Recorded,
}

/// The fleet in words: how many drives, and what each one is when they are alike (a virtual fleet's drives
/// differ only by their seed and data age): "a fan-out over 25 drives (sim:840evo-1t at scale 1/1024, 0.91 GiB
/// each)". A scaled-down virtual drive is said to be one wherever the fleet is named.
fn fleet_description(drives: &[FleetDrive], capacity_bytes: u64) -> String {
    let n = drives.len();
    let profile = |t: &str| t.split('?').next().unwrap_or(t).to_string();
    let scale = |t: &str| {
        t.split_once('?')
            .and_then(|(_, query)| query.split('&').find_map(|kv| kv.strip_prefix("scale=")))
            .map(str::to_string)
    };
    let first = drives.first().map(|d| d.target.as_str()).unwrap_or_default();
    let alike = drives
        .iter()
        .all(|d| profile(&d.target) == profile(first) && scale(&d.target) == scale(first));
    if n == 0 || !alike {
        return format!("a fan-out over {n} drives");
    }
    let scale = scale(first).map_or(String::new(), |s| format!(" at scale {s}"));
    format!(
        "a fan-out over {n} drives ({}{scale}, {} each)",
        profile(first),
        ssdlab_core::units::BinaryBytes(capacity_bytes / n as u64)
    )
}

/// What the record says was run: the flags, or with `--from` the drives and reads of the merged results.
struct Recorded {
    targets: Vec<String>,
    runtime_ns: u64,
    block_bytes: u64,
    seed: u64,
}

/// Writes the record (--json, --out, --prom) and says the verdict; the exit it calls for.
fn publish(
    args: &FanoutFlags,
    recording: Recording,
    ports: &mut Ports,
    drives: &[FleetDrive],
    analysis: ssdlab_core::schema::fanout::FanoutAnalysis,
    verdict: ssdlab_core::schema::Verdict,
    measured: Measured,
) -> Result<Outcome> {
    let Measured {
        block_bytes,
        clock,
        capacity_bytes,
        mode,
        shards,
        interrupted,
        recorded,
    } = measured;
    let info = ssdlab_core::DeviceInfo {
        max_transfer_bytes: block_bytes,
        clock,
        direct_io: true,
        ..ssdlab_core::DeviceInfo::subject(
            match &args.fleet {
                Some(fleet) => format!("fleet {fleet}"),
                None => drives
                    .iter()
                    .map(|d| d.target.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            },
            if drives.iter().all(|d| ssdlab_targets::is_virtual(&d.target)) {
                ssdlab_core::device::TargetKind::Sim
            } else {
                ssdlab_core::device::TargetKind::BlockDevice
            },
            fleet_description(drives, capacity_bytes),
            capacity_bytes,
            match (args.mode, analysis.reading_threads) {
                (Mode::Computed, Some(threads)) if (threads as usize) < drives.len() => format!(
                    "random reads at QD1, {threads} workers each keeping a read in flight on every drive of its \
                     share through one io_uring"
                ),
                (Mode::Computed, _) => "random reads at QD1, one worker per drive".into(),
                (Mode::Measured, _) => "random reads at QD1 in synchronized queries".into(),
            },
        )
    };
    let options = RunOptions::Fanout(RecordedFlags {
        targets: recorded.targets,
        fleet: args.fleet.as_ref().map(ToString::to_string),
        age_by_ns: args.age_by.as_ref().map(|a| a.value),
        refresh_all: args.refresh_all,
        shards,
        hedge_percentile: args.hedge.value,
        mode: mode.into(),
        runtime_ns: recorded.runtime_ns,
        block_bytes: recorded.block_bytes,
        seed: recorded.seed,
    });
    let now_s = ports.unix_now_s();
    let mut reporter = Reporter::new(&mut *ports.console);
    let metrics = args.prom.as_ref().map(|_| {
        let mut exposition = ssdlab_core::prom::Exposition::new();
        ssdlab_methods::fanout::export::fanout_metrics(&mut exposition, &analysis, now_s);
        exposition
    });
    reporter.say_lines(ssdlab_report::text::verdict_lines(&verdict));
    recording.finish(
        &mut reporter,
        Finished::new(info, options, Analysis::Fanout(Box::new(analysis)), verdict)
            .interrupted(interrupted)
            .metrics(metrics),
    )
}
