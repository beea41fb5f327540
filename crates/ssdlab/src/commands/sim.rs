//! `ssdlab sim`: the flags as a sim plan, run by `ssdlab_app::sim`.

use anyhow::Result;
use ssdlab_app::sim::{Plan, WaFlags};

use super::{Outcome, with_terminal};
use crate::cli::SimCommand;

pub fn run(command: &SimCommand) -> Result<Outcome> {
    let plan = match command {
        SimCommand::Profiles(args) => Plan::Profiles { json: args.json },
        SimCommand::Info(args) => Plan::Info {
            profile: args.profile.clone(),
            json: args.json,
        },
        SimCommand::Wa(args) => Plan::wa(
            WaFlags {
                op: args.op,
                pages_per_block: args.pages_per_block,
                logical_units: args.logical_units,
                gc: args.gc.into(),
                warmup: args.warmup,
                measure: args.measure,
                seed: args.seed,
            },
            args.json,
        )?,
    };
    with_terminal(false, |ports| ssdlab_app::sim::run(&plan, ports))
}
