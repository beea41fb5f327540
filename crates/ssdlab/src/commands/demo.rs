//! `ssdlab demo`: the main job on the embedded default device, run by `ssdlab_app::demo`.

use anyhow::Result;

use super::{Outcome, with_terminal};
use crate::cli::DemoArgs;

pub fn run(args: &DemoArgs) -> Result<Outcome> {
    let plan = ssdlab_app::demo::Plan::new(args.target.clone(), args.out.clone(), args.replace)?;
    with_terminal(false, |ports| ssdlab_app::demo::run(&plan, ports))
}
