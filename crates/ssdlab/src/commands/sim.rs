//! `ssdlab sim`: the virtual SSD's own commands.

use anyhow::{Result, bail};
use ssdlab_sim::ftl::GcPolicy;
use ssdlab_sim::wa::{self, WaRun};

use super::Outcome;
use crate::cli::{GcPolicyArg, SimCommand, SimWaArgs};

pub fn run(command: &SimCommand) -> Result<Outcome> {
    match command {
        SimCommand::Wa(args) => write_amplification(args),
    }
}

fn write_amplification(args: &SimWaArgs) -> Result<Outcome> {
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
        policy: match args.gc {
            GcPolicyArg::Greedy => GcPolicy::Greedy,
            GcPolicyArg::CostBenefit => GcPolicy::CostBenefit,
        },
        seed: args.seed,
        warmup_capacities: args.warmup,
        measure_capacities: args.measure,
    };
    let started = std::time::Instant::now();
    let result = wa::measure(&run);
    let wall_s = started.elapsed().as_secs_f64();
    let host_writes =
        (run.warmup_capacities as u64 + run.measure_capacities as u64 + 1) * run.logical_units as u64;
    eprintln!(
        "sim wa    OP {:.2}% (spare factor {:.2}%), {} units per block, {} logical units, {:?} GC, seed {}",
        100.0 * result.op,
        100.0 * result.spare_factor,
        result.units_per_block,
        result.logical_units,
        run.policy,
        run.seed
    );
    eprintln!(
        "measured  WA {:.4} over {} host writes; model (greedy, Desnoyers) {:.4}; difference {:+.2}%",
        result.write_amplification,
        result.host_units_measured,
        result.model_write_amplification,
        100.0 * (result.write_amplification / result.model_write_amplification - 1.0)
    );
    eprintln!(
        "speed     {:.1} M simulated host writes per wall second",
        host_writes as f64 / wall_s / 1e6
    );
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    }
    Ok(Outcome::Passed)
}
