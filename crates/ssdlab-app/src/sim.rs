//! `sim`: the virtual SSD's own commands: its profiles, one drive's geometry and timing, and the fast
//! write-amplification measurement against Desnoyers' model.

use anyhow::{Result, anyhow, bail};
use ssdlab_core::units::BinaryBytes;
use ssdlab_sim::ftl::GcPolicy;
use ssdlab_sim::profile::{Geometry, UNIT_BYTES, profiles};
use ssdlab_sim::spec::SimSpec;
use ssdlab_sim::wa::{self, WaRun};

use crate::ports::{Outcome, Ports};

/// A `sim` command.
#[derive(Debug, Clone)]
pub enum Plan {
    /// The profiles, as a table or as JSON lines.
    Profiles { json: bool },
    /// One drive (a profile with its options) described; with JSON on stdout too.
    Info { profile: String, json: bool },
    /// The write amplification of random writes over an FTL alone.
    Wa { run: WaRun, json: bool },
}

/// `sim wa`'s flags as given.
#[derive(Debug, Clone, Copy)]
pub struct WaFlags {
    /// Over-provisioning in percent.
    pub op: f64,
    pub pages_per_block: u32,
    pub logical_units: u32,
    pub gc: GcPolicy,
    pub warmup: u32,
    pub measure: u32,
    pub seed: u64,
}

/// Runs the `sim` command.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    match plan {
        Plan::Profiles { json } => list_profiles(*json, ports),
        Plan::Info { profile, json } => info(profile, *json, ports),
        Plan::Wa { run, json } => write_amplification(run, *json, ports),
    }
}

fn list_profiles(json: bool, ports: &mut Ports) -> Result<Outcome> {
    // The list is the command's output, so it goes to stdout.
    let mut lines = Vec::new();
    for p in profiles() {
        lines.push(if json {
            serde_json::to_string(&p)?
        } else {
            format!(
                "{:<20} {:>5} GB user / {:>4} GiB raw, {:>2} dies, SLC cache {:>2} GB  {}",
                p.name,
                p.user_bytes / 1_000_000_000,
                p.raw_nand_bytes >> 30,
                p.dies,
                p.slc_cache_bytes / 1_000_000_000,
                p.description
            )
        });
    }
    ports.print_lines(lines)
}

fn info(profile: &str, json: bool, ports: &mut Ports) -> Result<Outcome> {
    let spec = SimSpec::parse(profile).map_err(|e| anyhow!("PROFILE {profile}: {e}"))?;
    for line in &info_lines(&spec) {
        ports.console.say(line);
    }
    if json {
        let p = &spec.profile;
        let g = p.geometry(spec.scale, spec.op);
        let json = serde_json::json!({
            "profile": p,
            "scale": spec.scale,
            "geometry": g,
            "op_ratio": g.op(),
            "spare_factor_ratio": g.spare_factor(),
            "map_bytes": g.map_bytes(),
        });
        return ports.print_lines([json.to_string()]);
    }
    Ok(Outcome::Passed)
}

/// One drive described: profile, scale, capacity and spare area, geometry, NAND and interface timings, the
/// datasheet, retention, TRIM and the memory the maps take.
fn info_lines(spec: &SimSpec) -> Vec<String> {
    let g = spec.profile.geometry(spec.scale, spec.op);
    let mut lines = layout_lines(spec, &g);
    lines.extend(nand_lines(&spec.profile));
    lines.extend(behaviour_lines(spec, &g));
    lines
}

/// The profile's name, scale, capacity, over-provisioning and geometry.
fn layout_lines(spec: &SimSpec, g: &Geometry) -> Vec<String> {
    let p = &spec.profile;
    vec![
        format!("profile          {} — {}", p.name, p.description),
        format!("scale            1/{}", spec.scale),
        format!(
            "capacity         {} logical ({} x 4 KiB units); raw NAND {} at full scale",
            BinaryBytes(g.logical_units as u64 * UNIT_BYTES),
            g.logical_units,
            BinaryBytes(p.raw_nand_bytes)
        ),
        format!(
            "over-provision   OP {:.2}% = (physical - logical) / logical; spare factor {:.2}% = (physical - logical) / physical",
            100.0 * g.op(),
            100.0 * g.spare_factor()
        ),
        "                 physical counts data-holding blocks only; GC reserve, open frontier and SLC cache are extra".into(),
        format!(
            "geometry         {} dies on {} channels; per die {} data + {} reserve + 1 frontier blocks of {} units ({}), {} SLC blocks of {} units",
            g.dies,
            p.channels,
            g.data_blocks_per_die,
            g.reserve_blocks_per_die,
            g.units_per_block,
            BinaryBytes(g.units_per_block as u64 * UNIT_BYTES),
            g.slc_blocks_per_die,
            g.slc_units_per_block
        ),
        gc_start_line(g),
    ]
}

/// The NAND's timings, the interfaces and the datasheet figures.
fn nand_lines(p: &ssdlab_sim::profile::Profile) -> Vec<String> {
    let ms = |ns: u64| ns as f64 / 1e6;
    let us = |ns: u64| ns as f64 / 1e3;
    vec![
        format!(
            "NAND {:?}         tR {:.0} µs, tPROG {:.2} ms, tBERS {:.1} ms per {} page (all planes)",
            p.cell,
            us(p.native.read_ns),
            ms(p.native.program_ns),
            ms(p.native.erase_ns),
            BinaryBytes(p.program_bytes as u64)
        ),
        format!(
            "NAND SLC mode    tR {:.0} µs, tPROG {:.2} ms, tBERS {:.1} ms; SLC cache {} at full scale",
            us(p.slc.read_ns),
            ms(p.slc.program_ns),
            ms(p.slc.erase_ns),
            BinaryBytes(p.slc_cache_bytes)
        ),
        format!(
            "interfaces       channel {:.0} MB/s, host link {:.0} MB/s, controller {:.0}K read / {:.0}K write commands per s, DRAM write buffer {}",
            p.channel_bytes_per_s / 1e6,
            p.link_bytes_per_s / 1e6,
            1e6 / p.controller_read_ns as f64,
            1e6 / p.controller_write_ns as f64,
            BinaryBytes(p.write_buffer_units as u64 * UNIT_BYTES)
        ),
        format!(
            "datasheet        4K QD32 random read {}K / write {}K IOPS, sequential read {:.0} / write {:.0} MB/s",
            p.spec_random_read_iops / 1000,
            p.spec_random_write_iops / 1000,
            p.spec_seq_read_bytes_per_s / 1e6,
            p.spec_seq_write_bytes_per_s / 1e6
        ),
    ]
}

/// Retention, TRIM and the memory the maps take.
fn behaviour_lines(spec: &SimSpec, g: &Geometry) -> Vec<String> {
    let p = &spec.profile;
    let us = |ns: u64| ns as f64 / 1e3;
    vec![
        match (&p.retention, p.retry_step_ns()) {
            (Some(r), Some(step_ns)) => format!(
                "retention        median read-retry steps per page {:.1} at 1 month, {:.1} at 3, {:.1} at 7 ({:.0} µs each); spread x{:.2} per page at 3 months (x{:.2} at 7), x{:.2} per block, x{:.2} per drive (1 sigma); this seed's drive x{:.2}",
                r.median_steps(1.0),
                r.median_steps(3.0),
                r.median_steps(7.0),
                us(step_ns),
                r.page_sigma(3.0).exp(),
                r.page_sigma(7.0).exp(),
                r.block_sigma.exp(),
                r.drive_sigma.exp(),
                ssdlab_sim::retention::Variation::new(r, spec.seed).drive_factor()
            ),
            _ => "retention        none: data reads at full speed at any age".into(),
        },
        match p.deferred_trim {
            Some(t) => format!(
                "TRIM             queued and reclaimed in the background: {:.0} MB/s while idle, {:.0} MB/s under host I/O",
                t.idle_bytes_per_s / 1e6,
                t.busy_bytes_per_s / 1e6
            ),
            None => "TRIM             processed at once".into(),
        },
        format!(
            "memory           about {} for the maps",
            BinaryBytes(g.map_bytes())
        ),
    ]
}

impl Plan {
    /// `sim wa`'s flags, checked.
    pub fn wa(args: WaFlags, json: bool) -> Result<Plan> {
        if !(args.op > 0.0 && args.op <= 1000.0) {
            bail!(
                "--op {}: over-provisioning must be above 0 and at most 1000 (percent)",
                args.op
            );
        }
        if !(2..=65_536).contains(&args.pages_per_block) {
            bail!(
                "--pages-per-block {}: use 2 to 65536 mapping units per erase block",
                args.pages_per_block
            );
        }
        if args.logical_units < args.pages_per_block * 4 {
            bail!(
                "--logical-units {}: use at least 4 erase blocks' worth ({})",
                args.logical_units,
                args.pages_per_block * 4
            );
        }
        if args.measure == 0 {
            bail!("--measure 0: measure at least one logical capacity of writes");
        }
        let run = WaRun {
            op: args.op / 100.0,
            units_per_block: args.pages_per_block,
            logical_units: args.logical_units,
            policy: args.gc,
            seed: args.seed,
            warmup_capacities: args.warmup,
            measure_capacities: args.measure,
        };
        Ok(Plan::Wa { run, json })
    }
}

fn write_amplification(run: &WaRun, json: bool, ports: &mut Ports) -> Result<Outcome> {
    let started = std::time::Instant::now();
    let result = wa::measure(run);
    let wall_s = started.elapsed().as_secs_f64();
    let host_writes =
        (run.warmup_capacities as u64 + run.measure_capacities as u64 + 1) * run.logical_units as u64;
    ports.console.say(&format!(
        "sim wa    OP {:.2}% (spare factor {:.2}%), {} units per block, {} logical units, {:?} GC, seed {}",
        100.0 * result.op,
        100.0 * result.spare_factor,
        result.units_per_block,
        result.logical_units,
        run.policy,
        run.seed
    ));
    ports.console.say(&format!(
        "measured  WA {:.4} over {} host writes; model (greedy, Desnoyers) {:.4}; difference {:+.2}%",
        result.write_amplification,
        result.host_units_measured,
        result.model_write_amplification,
        100.0 * (result.write_amplification / result.model_write_amplification - 1.0)
    ));
    ports.console.say(&format!(
        "speed     {:.1} M simulated host writes per wall second",
        host_writes as f64 / wall_s / 1e6
    ));
    if json {
        return ports.print_lines([serde_json::to_string(&result)?]);
    }
    Ok(Outcome::Passed)
}

/// When the profile's firmware starts garbage collection, in the geometry's own units.
fn gc_start_line(g: &Geometry) -> String {
    let mut when = vec![format!(
        "when a die would fall below its {} reserve blocks",
        g.reserve_blocks_per_die
    )];
    if g.gc_start_free_blocks_per_die > g.reserve_blocks_per_die {
        when.push(format!(
            "from {} free blocks per die ({}, kept while idle)",
            g.gc_start_free_blocks_per_die,
            BinaryBytes(g.gc_start_free_blocks_per_die as u64 * g.units_per_block as u64 * UNIT_BYTES)
        ));
    }
    if g.gc_max_garbage_units_per_die > 0 {
        when.push(format!(
            "once a die holds {} invalid units ({})",
            g.gc_max_garbage_units_per_die,
            BinaryBytes(g.gc_max_garbage_units_per_die as u64 * UNIT_BYTES)
        ));
    }
    format!("GC starts        {}", when.join("; or "))
}
