//! `ssdlab op --target DEV [--set 25%] [--allow-destroy]`: the flags as an op plan, run by `ssdlab_app::op`.

use anyhow::Result;
use ssdlab_app::export::OutDir;

use super::{Outcome, with_terminal};
use crate::cli::OpArgs;

pub fn run(args: &OpArgs) -> Result<Outcome> {
    let plan = ssdlab_app::op::Plan::new(
        args.target.plan(),
        args.set.clone(),
        args.raw_nand.clone(),
        args.samples,
        args.seed,
        args.out.clone().map(|d| OutDir::new(d, args.replace)),
    )?;
    with_terminal(args.json, |ports| ssdlab_app::op::run(&plan, ports))
}
