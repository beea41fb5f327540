//! `ssdlab erase --target DEV --allow-destroy`: the flags as an erase plan, run by `ssdlab_app::erase`.

use anyhow::Result;
use ssdlab_app::erase::Plan;
use ssdlab_app::export::OutDir;

use super::{Outcome, with_terminal};
use crate::cli::EraseArgs;

pub fn run(args: &EraseArgs) -> Result<Outcome> {
    let plan = Plan::new(
        args.target.plan(),
        args.method.into(),
        args.samples,
        args.seed,
        args.out.clone().map(|d| OutDir::new(d, args.replace)),
    )?;
    with_terminal(args.json, |ports| ssdlab_app::erase::run(&plan, ports))
}
