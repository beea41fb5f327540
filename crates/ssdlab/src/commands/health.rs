//! `ssdlab health [DEVICE...] [--from FILE...]`: the flags as a health plan, run by `ssdlab_app::health`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_health::rating::RatingFlags;

use super::{Outcome, with_terminal};
use crate::cli::HealthArgs;

pub fn run(args: &HealthArgs) -> Result<Outcome> {
    let history = (!args.no_history).then(|| {
        args.history
            .clone()
            .unwrap_or_else(ssdlab_app::health::default_history_dir)
    });
    let rating = RatingFlags {
        tbw_tb: args.rated_tbw,
        dwpd: args.rated_dwpd,
        warranty_years: args.warranty_years,
        pe_cycles: args.rated_pe,
    };
    let plan = ssdlab_app::health::Plan::new(
        args.devices.clone(),
        args.scan,
        args.from.clone(),
        history,
        args.window.clone(),
        rating,
        args.prom.clone(),
        args.out.clone().map(|d| OutDir::new(d, args.replace)),
        args.smartctl.clone(),
        args.wear_warn,
    )?;
    with_terminal(args.json, |ports| ssdlab_app::health::run(&plan, ports))
}
