//! `ssdlab devices`: the machine's block devices and what the safety gate says of each, by `ssdlab_app::devices`.

use anyhow::Result;

use super::{Outcome, with_terminal};
use crate::cli::DevicesArgs;

pub fn run(args: &DevicesArgs) -> Result<Outcome> {
    with_terminal(false, |ports| ssdlab_app::devices::run(args.json, ports))
}
