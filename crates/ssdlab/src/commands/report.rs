//! `ssdlab report RESULT_DIR... [--out report.html]`: the flags as a report plan, run by `ssdlab_app::report`.

use anyhow::Result;

use super::{Outcome, with_terminal};
use crate::cli::ReportArgs;

pub fn run(args: &ReportArgs) -> Result<Outcome> {
    let plan = ssdlab_app::report::Plan {
        results: args.results.clone(),
        out: args.out.clone(),
        label: args.label.clone(),
        baseline: args.baseline.clone(),
    };
    with_terminal(false, |ports| ssdlab_app::report::run(&plan, ports))
}
