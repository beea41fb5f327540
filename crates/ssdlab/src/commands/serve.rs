//! `ssdlab serve`: the flags as a serve plan, run by `ssdlab_app::serve`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::serve::{Plan, ServeFlags};

use super::{Outcome, with_terminal};
use crate::cli::ServeArgs;

pub fn run(args: &ServeArgs) -> Result<Outcome> {
    let plan = Plan::new(ServeFlags {
        target: args.target.plan(),
        socket: args.socket.clone(),
        listen: args.listen.clone(),
        allow_remote: args.allow_remote,
        read_only: args.read_only,
        name: args.name.clone(),
        qd: args.qd,
        max_connections: args.max_connections,
        poll_us: args.poll_us,
        out: args.out.clone().map(|d| OutDir::new(d, args.replace)),
    })?;
    with_terminal(args.json, |ports| ssdlab_app::serve::run(&plan, ports))
}
