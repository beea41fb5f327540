//! `ssdlab scan`: the flags as a scan plan, run by `ssdlab_app::scan`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::scan::{Plan, ScanFlags};

use super::{Outcome, with_terminal};
use crate::cli::ScanArgs;

pub fn run(args: &ScanArgs) -> Result<Outcome> {
    let plan = Plan::new(ScanFlags {
        paths: args.paths.clone(),
        target: args.target.clone(),
        device: args.device.clone(),
        regions: args.regions,
        region_bytes: args.region_bytes.clone(),
        dataset: args.dataset.clone(),
        refresh_flagged: args.refresh_flagged,
        min_size: args.min_size.clone(),
        reader: args.reader.map(Into::into),
        chunk: args.chunk.clone(),
        qd: args.qd,
        random_reads: args.random_reads,
        slower_than: args.slower_than,
        out: args.out.clone().map(|d| OutDir::new(d, args.replace)),
        prom: args.prom.clone(),
        allow_atime: args.allow_atime,
        state_dir: args.state_dir.clone(),
    })?;
    with_terminal(args.json, |ports| ssdlab_app::scan::run(&plan, ports))
}
