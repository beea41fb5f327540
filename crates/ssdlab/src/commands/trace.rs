//! `ssdlab trace synth`: the flags as a trace plan, run by `ssdlab_app::trace`.

use anyhow::Result;

use super::{Outcome, with_terminal};
use crate::cli::TraceCommand;

pub fn run(command: &TraceCommand) -> Result<Outcome> {
    let TraceCommand::Synth(args) = command;
    let plan = ssdlab_app::trace::Plan::new(
        args.profile.into(),
        args.seed,
        args.duration.clone(),
        args.span.clone(),
        args.out.clone(),
    )?;
    with_terminal(false, |ports| ssdlab_app::trace::run(&plan, ports))
}
