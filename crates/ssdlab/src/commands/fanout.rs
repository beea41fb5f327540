//! `ssdlab fanout`: the flags as a fan-out plan, run by `ssdlab_app::fanout`.

use anyhow::Result;
use ssdlab_app::fanout::{FanoutFlags, Mode, Plan};

use super::{Outcome, with_terminal};
use crate::cli::{FanoutArgs, FanoutModeArg};

pub fn run(args: &FanoutArgs) -> Result<Outcome> {
    let plan = Plan::new(FanoutFlags {
        targets: args.targets.clone(),
        fleet: args.fleet.clone(),
        age_by: args.age_by.clone(),
        refresh_all: args.refresh_all,
        shards: args.shards.clone(),
        hedge: args.hedge.clone(),
        mode: match args.mode {
            FanoutModeArg::Computed => Mode::Computed,
            FanoutModeArg::Measured => Mode::Measured,
        },
        runtime: args.runtime.clone(),
        bs: args.bs.clone(),
        seed: args.seed,
        out: args.out.clone(),
        prom: args.prom.clone(),
        engine: crate::cli::engine(args.engine),
    })?;
    with_terminal(args.json, |ports| ssdlab_app::fanout::run(&plan, ports))
}
