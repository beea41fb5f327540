//! `ssdlab trace synth`: the flags as a trace plan, run by `ssdlab_app::trace`.

use anyhow::Result;
use ssdlab_trace::synth::Profile;

use super::{Outcome, with_terminal};
use crate::cli::{SynthProfileArg, TraceCommand};

pub fn run(command: &TraceCommand) -> Result<Outcome> {
    let TraceCommand::Synth(args) = command;
    let profile = match args.profile {
        SynthProfileArg::Light => Profile::Light,
        SynthProfileArg::Heavy => Profile::Heavy,
    };
    let plan = ssdlab_app::trace::Plan::new(
        profile,
        args.seed,
        &args.duration,
        args.span.as_deref(),
        args.out.clone(),
    )?;
    with_terminal(false, |ports| ssdlab_app::trace::run(&plan, ports))
}
