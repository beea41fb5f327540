//! `ssdlab test consistency|trim|sweep|latency|replay|pts`: each method's flags as its checked options, run by
//! `ssdlab_app::methodology`.

use anyhow::Result;
use ssdlab_app::export::OutDir;
use ssdlab_app::methodology::options::{
    self, ConsistencyFlags, LatencyFlags, PtsFlags, QuickFlags, ReplayFlags, SweepFlags, TrimFlags,
};
use ssdlab_app::methodology::{MethodPlan, Plan};

use super::{Outcome, with_terminal};
use crate::cli::{QuickArgs, TestCommand, TestCommon};

pub fn run(command: &TestCommand) -> Result<Outcome> {
    let (common, method) = match command {
        TestCommand::Consistency(a) => (
            &a.common,
            MethodPlan::Consistency(options::consistency(ConsistencyFlags {
                runtime_ns: a.runtime,
                op: a.op,
                fill_passes: a.fill_passes,
            })?),
        ),
        TestCommand::Trim(a) => (
            &a.common,
            MethodPlan::Trim(options::trim(TrimFlags {
                torture_ns: a.torture,
                measure: a.measure,
                idle_ns: a.idle,
            })?),
        ),
        TestCommand::Sweep(a) => (
            &a.common,
            MethodPlan::Sweep(options::sweep(SweepFlags {
                test_bytes: a.test_size,
                qd: a.qd,
                from_bytes: a.from,
                to_bytes: a.to,
                size_runtime_ns: a.size_runtime,
                axis: a.axis.into(),
                block_bytes: a.bs,
                max_qd: a.max_qd,
                jobs: a.jobs,
            })?),
        ),
        TestCommand::Latency(a) => (
            &a.common,
            MethodPlan::Latency(options::latency(LatencyFlags {
                rw: a.rw.into(),
                span_bytes: a.span,
                runtime_ns: a.runtime,
            })?),
        ),
        TestCommand::Replay(a) => {
            let (options, input) = options::replay(ReplayFlags {
                trace: &a.trace,
                format: a.format.map(Into::into),
                time_scale: a.time_scale,
                as_fast_as_possible: a.as_fast_as_possible,
                qd: a.qd,
                fit: a.fit.into(),
                disk: a.disk,
            })?;
            (&a.common, MethodPlan::Replay((options, input)))
        }
        TestCommand::Pts(a) => (
            &a.common,
            MethodPlan::Pts(options::pts(PtsFlags {
                test: a.test.into(),
                round_ns: a.round_time,
                span: a.span,
                qd: a.qd,
                max_rounds: a.max_rounds,
                flavour: a.flavour.into(),
            })?),
        ),
    };
    let plan = plan(common, method)?;
    with_terminal(common.json, |ports| ssdlab_app::methodology::run(plan, ports))
}

/// `ssdlab quick`: the disk-mark set, run as a test method.
pub fn quick(args: &QuickArgs) -> Result<Outcome> {
    let method = MethodPlan::Quick(options::quick(QuickFlags {
        repeats: args.repeats,
        runtime_ns: args.runtime,
        span_bytes: args.size,
        keep: args.keep,
        profile: args.profile.into(),
    })?);
    let plan = plan(&args.common, method)?;
    with_terminal(args.common.json, |ports| {
        ssdlab_app::methodology::run(plan, ports)
    })
}

/// The flags every test shares, with its method.
pub fn plan(common: &TestCommon, method: MethodPlan) -> Result<Plan> {
    Plan::new(
        common.target.plan(),
        common.seed,
        common.out.clone().map(|d| OutDir::new(d, common.replace)),
        method,
    )
}
