//! `ssdlab erase --target DEV --allow-destroy`: purge a whole block device and check it reads back erased.

use anyhow::{Context, Result, bail};
use ssdlab_core::Device;
use ssdlab_core::target::TargetSpec;
use ssdlab_methods::erase::{EraseMethod, erase};

use super::Outcome;
use crate::cli::{EraseArgs, EraseMethodArg};
use crate::kernel_purge::KernelPurger;
use crate::plan::{Use, open_target};

pub fn run(args: &EraseArgs) -> Result<Outcome> {
    let path = match TargetSpec::parse(&args.target.target) {
        Ok(TargetSpec::Block { path }) => path,
        Ok(_) => bail!(
            "--target {}: erase works on a whole block device (/dev/NAME); a file is erased by deleting it, and \
             sim:/null/cached: hold nothing to purge",
            args.target.target
        ),
        Err(e) => bail!("{e}"),
    };
    let gated_rdev = std::os::unix::fs::MetadataExt::rdev(
        &std::fs::metadata(&path).with_context(|| format!("--target {}", path.display()))?,
    );
    // The safety gate: --allow-destroy, never a device in use, signs of past use only with --force.
    // The exclusive claim holds even with --force: nothing may mount the device while it is purged.
    let opened = open_target(&args.target, Use::WritesClaimed)?;
    let mut device = opened.device;
    let info = device.info().clone();
    let mut purger = KernelPurger::open(&path, &info, gated_rdev)
        .with_context(|| format!("--target {}: cannot open it for the purge", path.display()))?;
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
    for (method, what) in &report.steps {
        eprintln!("  {:<13} {what}", method.name());
    }
    if let (Some(method), [(_, what)]) = (requested, report.steps.as_slice())
        && what.starts_with("not offered")
    {
        bail!(
            "--method {}: {what}; nothing was erased (try --method auto)",
            method.name()
        );
    }
    match report.method {
        Some(method) => {
            eprintln!(
                "erased    with {}; {} sampled blocks read back erased",
                method.name(),
                report.samples
            );
            if let Some(caveat) = method.caveat() {
                eprintln!("note      {caveat}");
            }
            if report.held_data_before == 0 {
                eprintln!(
                    "note      none of the sampled blocks held data before the erase (all zeroes or ones), so reading \
                     them back shows little"
                );
            }
            Ok(Outcome::Passed)
        }
        None => {
            eprintln!(
                "NOT ERASED: no method that ran left the sampled blocks erased{}",
                if report.not_erased.is_empty() {
                    String::new()
                } else {
                    format!(" ({} still hold data)", report.not_erased.len())
                }
            );
            Ok(Outcome::Failed)
        }
    }
}
