//! `erase`: purge a whole block device and check it reads back erased, with the erase record. The plan is checked
//! before anything opens (a whole block device, an `--out` that can take the record); the run opens the device
//! through the safety gate, prepares the record's directory only once the gate let the erase through, purges
//! through the very descriptor the gate judged and claimed, and writes the record.

mod firmware;
mod kernel;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::erase::EraseAnalysis;
use ssdlab_core::schema::options::{EraseFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::target::TargetSpec;
use ssdlab_methods::erase::{EraseMethod, erase};

use crate::export;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

pub use kernel::KernelPurger;

/// An erase, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: TargetPlan,
    /// The block device the target names.
    path: PathBuf,
    /// One method, or None: the best the device offers whose result verifies.
    pub method: Option<EraseMethod>,
    /// Blocks read before and after to check they are erased.
    pub samples: u32,
    pub seed: u64,
    pub out: Option<crate::export::OutDir>,
}

impl Plan {
    /// Checks the flags: a whole block device (a file is erased by deleting it; sim:/null/cached: hold nothing to
    /// purge), and an `--out` that names a directory ssdlab may write.
    pub fn new(
        target: TargetPlan,
        method: Option<EraseMethod>,
        samples: u32,
        seed: u64,
        out: Option<crate::export::OutDir>,
    ) -> Result<Self> {
        if let Some(dir) = &out {
            export::check_out_dir(dir)?;
        }
        let TargetSpec::Block { path } = &target.spec else {
            bail!(
                "--target {}: erase works on a whole block device (/dev/NAME); a file is erased by deleting it, \
                 and sim:/null/cached: hold nothing to purge",
                target.target
            );
        };
        let path = path.clone();
        if samples < 2 {
            bail!("--samples {samples}: read back at least 2 blocks (the first and the last)");
        }
        Ok(Plan {
            target,
            path,
            method,
            samples,
            seed,
            out,
        })
    }
}

/// Runs the erase: the gate, the purge, the read-back, the record.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let path = &plan.path;
    // The safety gate: --allow-destroy, never a device in use, signs of past use only with --force. Its
    // exclusive claim holds until the device closes: nothing may mount the device while it is purged.
    let opened = plan.target.open(ports.targets, Use::Writes)?;
    // The record's directory must take it before anything is erased (a purge whose record cannot be written has
    // destroyed the data without the proof), and only once the gate has let the erase through, so a refusal
    // leaves nothing behind.
    let recording = Recording::begin(plan.out.as_ref(), None, ports.started_unix_s)?;
    let mut device = opened.device;
    let info = device.info().clone();
    // The purges' ioctls go to the very descriptor the gate judged and claimed.
    let gated = device
        .backing_file()
        .context("the gate opened a block device")?
        .try_clone()
        .with_context(|| format!("--target {}: cannot duplicate its descriptor", path.display()))?;
    // Said only once the purge can start: a device that changed since the gate is refused before "erasing".
    kernel::check_size_unchanged(&gated, &info)
        .with_context(|| format!("--target {}: cannot prepare the purge", path.display()))?;
    ports.console.say(&format!(
        "erasing  {} ({}, {} bytes)",
        path.display(),
        info.model,
        info.capacity_bytes
    ));
    let report = {
        let mut purger = KernelPurger::new(
            gated,
            path,
            &info,
            ports.tools,
            ports.clock,
            Some(&mut *ports.console),
        )
        .with_context(|| format!("--target {}: cannot prepare the purge", path.display()))?;
        erase(&mut device, &mut purger, plan.method, plan.samples, plan.seed)
            .with_context(|| format!("--target {}", path.display()))?
    };
    if let (Some(method), [step]) = (plan.method, report.steps.as_slice())
        && step.outcome.starts_with("not offered")
    {
        bail!(
            "--method {}: {}; nothing was erased (try --method auto)",
            method.name(),
            step.outcome
        );
    }
    // What happened is said before the record is written, so a record that cannot be written never hides it.
    ports.say_lines(ssdlab_report::text::erase_lines(&report));
    publish(plan, recording, ports, info, report)
}

/// The erase record: result.json and report.html with `--out`, JSON Lines with `--json`; and the exit the erase
/// calls for.
fn publish(
    plan: &Plan,
    recording: Recording,
    ports: &mut Ports,
    info: ssdlab_core::DeviceInfo,
    report: EraseAnalysis,
) -> Result<Outcome> {
    let verdict = verdict_of(&report);
    let options = RunOptions::Erase(EraseFlags {
        target: plan.target.recorded(),
        erase_method: plan.method.map_or("auto", EraseMethod::name).to_string(),
        samples: plan.samples,
        seed: plan.seed,
    });
    let done = match report.method {
        Some(m) => format!("the device WAS erased with {}", m.name()),
        None => "the steps above ran on the device".into(),
    };
    recording.finish(
        &mut Reporter::new(&mut *ports.console),
        Finished::new(info, options, Analysis::Erase(report), verdict).done(Some(done)),
    )
}

/// An erase passes when a method left the sampled blocks readable as erased.
fn verdict_of(report: &EraseAnalysis) -> Verdict {
    Verdict {
        finding: false,
        passed: report.method.is_some(),
        reasons: match report.method {
            Some(_) => vec![],
            None => vec![
                "no method that was tried left the sampled blocks readable as erased (each step says why)"
                    .into(),
            ],
        },
        unknown: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_block_device_is_erased() {
        for target in ["file:/tmp/x:1m", "null", "sim:840evo-250", "cached:null"] {
            let e = Plan::new(TargetPlan::plain(target).unwrap(), None, 2, 1, None).unwrap_err();
            assert!(e.to_string().contains("whole block device"), "{target}: {e}");
        }
        let plan = Plan::new(TargetPlan::plain("/dev/sdz").unwrap(), None, 2, 1, None).unwrap();
        assert_eq!(plan.path, PathBuf::from("/dev/sdz"));
    }

    #[test]
    fn an_out_that_is_a_file_is_refused_before_anything_opens() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = Plan::new(
            TargetPlan::plain("/dev/sdz").unwrap(),
            None,
            2,
            1,
            Some(crate::export::OutDir::new(file, false)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
