//! `ssdlab erase --target DEV --allow-destroy`: purge a whole block device and check it reads back erased; with
//! `--out` or `--json`, the erase record.

use anyhow::{Context, Result, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{EraseFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::target::TargetSpec;
use ssdlab_methods::erase::{EraseMethod, erase};

use super::Outcome;
use crate::cli::{EraseArgs, EraseMethodArg};
use crate::kernel_purge::KernelPurger;
use crate::output::{self, Reporter};
use crate::plan::{Use, open_target};

pub fn run(args: &EraseArgs) -> Result<Outcome> {
    crate::output::mark_command_start();
    if let Some(dir) = &args.out {
        crate::output::check_out_dir(dir)?;
    }
    let path = match TargetSpec::parse(&args.target.target) {
        Ok(TargetSpec::Block { path }) => path,
        Ok(_) => bail!(
            "--target {}: erase works on a whole block device (/dev/NAME); a file is erased by deleting it, and \
             sim:/null/cached: hold nothing to purge",
            args.target.target
        ),
        Err(e) => bail!("{e}"),
    };
    // The safety gate: --allow-destroy, never a device in use, signs of past use only with --force. Its
    // exclusive claim holds until the device closes: nothing may mount the device while it is purged.
    let opened = open_target(&args.target, Use::Writes)?;
    // The record's directory must take it before anything is erased (a purge whose record cannot be written has
    // destroyed the data without the proof), and only once the gate has let the erase through, so a refusal
    // leaves nothing behind.
    if let Some(dir) = &args.out {
        output::prepare_out_dir(dir)?;
    }
    let mut device = opened.device;
    let info = device.info().clone();
    // The purges' ioctls go to the very descriptor the gate judged and claimed.
    let gated = device
        .backing_file()
        .context("the gate opened a block device")?
        .try_clone()
        .with_context(|| format!("--target {}: cannot duplicate its descriptor", path.display()))?;
    let mut purger = KernelPurger::new(gated, &path, &info)
        .with_context(|| format!("--target {}: cannot prepare the purge", path.display()))?;
    let requested = match args.method {
        EraseMethodArg::Auto => None,
        EraseMethodArg::Sanitize => Some(EraseMethod::Sanitize),
        EraseMethodArg::SecureErase => Some(EraseMethod::SecureErase),
        EraseMethodArg::Secdiscard => Some(EraseMethod::SecDiscard),
        EraseMethodArg::Discard => Some(EraseMethod::Discard),
        EraseMethodArg::Zero => Some(EraseMethod::Zero),
    };
    eprintln!(
        "erasing  {} ({}, {} bytes)",
        path.display(),
        info.model,
        info.capacity_bytes
    );
    let report = erase(&mut device, &mut purger, requested, args.samples, args.seed)
        .with_context(|| format!("--target {}", path.display()))?;

    if let (Some(method), [step]) = (requested, report.steps.as_slice())
        && step.outcome.starts_with("not offered")
    {
        bail!(
            "--method {}: {}; nothing was erased (try --method auto)",
            method.name(),
            step.outcome
        );
    }
    let verdict = Verdict {
        passed: report.method.is_some(),
        reasons: match report.method {
            Some(_) => vec![],
            None => vec![
                "no method that was tried left the sampled blocks readable as erased (each step says why)"
                    .into(),
            ],
        },
    };
    let options = RunOptions::Erase(EraseFlags {
        target: args.target.recorded(),
        erase_method: requested.map_or("auto", EraseMethod::name).to_string(),
        samples: args.samples,
        seed: args.seed,
    });
    // What happened is said before the record is written, so a record that cannot be written never hides it.
    let outcome = summarize(&report);
    let mut reporter = Reporter::new(args.json);
    output::publish_analysis(
        &mut reporter,
        args.out.as_deref(),
        info,
        options,
        Analysis::Erase(report.clone()),
        &verdict,
        true,
    )
    .with_context(|| {
        let what = match report.method {
            Some(m) => format!("the device WAS erased with {}", m.name()),
            None => "the steps above ran on the device".into(),
        };
        format!("--out: {what}, but its record could not be written")
    })?;
    if let Some(dir) = &args.out {
        eprintln!("record    {} (result.json, report.html)", dir.display());
    }
    Ok(outcome)
}

/// Prints how the erase ended (the report crate's text), and the exit it calls for.
fn summarize(report: &ssdlab_core::schema::erase::EraseAnalysis) -> Outcome {
    output::print_lines_stderr(ssdlab_report::text::erase_lines(report));
    if report.method.is_some() {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}
