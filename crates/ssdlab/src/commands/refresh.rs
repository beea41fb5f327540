//! `ssdlab refresh PATH...`: the flags as a refresh plan, run by `ssdlab_app::refresh`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::refresh::{Plan, RefreshFlags};

use super::{Outcome, with_terminal};
use crate::cli::RefreshArgs;

pub fn run(args: &RefreshArgs) -> Result<Outcome> {
    let plan = Plan::new(RefreshFlags {
        paths: args.paths.clone(),
        forget: args.forget.clone(),
        from: args.from.clone(),
        slower_than: args.slower_than,
        older_than: args.older_than.clone(),
        rate: args.rate.clone(),
        chunk: args.chunk.clone(),
        dry_run: args.dry_run,
        state_dir: args.state_dir.clone(),
        out: args.out.clone().map(|d| OutDir::new(d, args.replace)),
    })?;
    with_terminal(args.json, |ports| ssdlab_app::refresh::run(&plan, ports))
}
