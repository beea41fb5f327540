//! `ssdlab fanout`: the flags as a fan-out plan, run by `ssdlab_app::fanout`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::fanout::{FanoutFlags, Plan};

use super::{Outcome, with_terminal};
use crate::cli::FanoutArgs;

pub fn run(args: &FanoutArgs) -> Result<Outcome> {
    let plan = Plan::new(FanoutFlags {
        targets: args.targets.clone(),
        fleet: args.fleet.clone(),
        age_by: args.age_by.clone(),
        refresh_all: args.refresh_all,
        shards: args.shards.clone(),
        hedge: args.hedge.clone(),
        mode: args.mode.into(),
        runtime: args.runtime.clone(),
        bs: args.bs.clone(),
        seed: args.seed,
        out: args.out.clone().map(|d| OutDir::new(d, args.replace)),
        prom: args.prom.clone(),
        engine: args.engine.into(),
        from: args.from.clone(),
    })?;
    with_terminal(args.json, |ports| ssdlab_app::fanout::run(&plan, ports))
}
