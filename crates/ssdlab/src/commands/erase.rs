//! `ssdlab erase --target DEV --allow-destroy`: the flags as an erase plan, run by `ssdlab_app::erase`.

use anyhow::Result;
use ssdlab_app::erase::Plan;
use ssdlab_methods::erase::EraseMethod;

use super::{Outcome, with_terminal};
use crate::cli::{EraseArgs, EraseMethodArg};

pub fn run(args: &EraseArgs) -> Result<Outcome> {
    let method = match args.method {
        EraseMethodArg::Auto => None,
        EraseMethodArg::Sanitize => Some(EraseMethod::Sanitize),
        EraseMethodArg::SecureErase => Some(EraseMethod::SecureErase),
        EraseMethodArg::Secdiscard => Some(EraseMethod::SecDiscard),
        EraseMethodArg::Discard => Some(EraseMethod::Discard),
        EraseMethodArg::Zero => Some(EraseMethod::Zero),
    };
    let plan = Plan::new(
        args.target.plan(),
        method,
        args.samples,
        args.seed,
        args.out.clone(),
    )?;
    with_terminal(args.json, |ports| ssdlab_app::erase::run(&plan, ports))
}
