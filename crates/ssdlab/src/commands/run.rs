//! `ssdlab run`: the flags as a run plan, run by `ssdlab_app::run`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::run::{Plan, RunFlags};

use super::{Outcome, with_terminal};
use crate::cli::RunArgs;

pub fn run(args: &RunArgs) -> Result<Outcome> {
    let flags = RunFlags {
        rw: args.rw,
        mix: args.mix,
        block_bytes: args.bs,
        qd: args.qd,
        span: args.span,
        runtime_ns: args.runtime,
        bytes: args.bytes,
        passes: args.passes,
        rate: args.rate,
        seed: args.seed,
        norandommap: args.norandommap,
        verify: args.verify,
        ramp_ns: args.ramp_time.unwrap_or(0),
        jobs: args.jobs,
    };
    let plan = Plan::new(
        args.target.plan(),
        flags,
        args.out.clone().map(|d| OutDir::new(d, args.replace)),
    )?;
    with_terminal(args.json, |ports| ssdlab_app::run::run(&plan, ports))
}
