//! `ssdlab op --target DEV [--set 25%] [--allow-destroy]`: a drive's spare area, what leaving part of it unused
//! adds, and applying that by discarding the tail. The arithmetic and the discard are `ssdlab_methods::op`'s;
//! this reads the flags, finds the partitions, and prints.

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::op::{OpAnalysis, OpPlanned};
use ssdlab_core::schema::options::{OpFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::{BinaryBytes, DecimalBytes, parse_size};
use ssdlab_io::layout::DriveKind;
use ssdlab_methods::op::{
    DiskLayout, OpPlan, Partition, RawNandSource, Spare, apply, disk_layout, plan_tail, raw_nand,
};
use ssdlab_sim::spec::SimSpec;

use super::Outcome;
use crate::cli::OpArgs;
use crate::output::{self, Reporter};
use crate::plan::{Use, open_target};
use ssdlab_targets::ForceScope;

/// Sim geometry counts 4 KiB mapping units.
const SIM_UNIT_BYTES: u64 = 4096;

pub fn run(args: &OpArgs) -> Result<Outcome> {
    crate::output::mark_command_start();
    if let Some(dir) = &args.out {
        crate::output::check_out_dir(dir)?;
    }
    let unused_percent = args.set.as_deref().map(parse_share).transpose()?;
    match TargetSpec::parse(&args.target.target).map_err(|e| anyhow!("{e}"))? {
        TargetSpec::Block { path } => drive(args, &path, unused_percent),
        TargetSpec::Sim { spec } => simulated(args, &spec, unused_percent),
        _ => bail!(
            "--target {}: over-provisioning is a property of a drive; give a whole block device (/dev/NAME) or a \
             virtual one (sim:PROFILE)",
            args.target.target
        ),
    }
}

/// `--set`: a share of the capacity, `25` or `25%`.
fn parse_share(text: &str) -> Result<f64> {
    let share: f64 = text
        .trim()
        .strip_suffix('%')
        .unwrap_or(text.trim())
        .parse()
        .map_err(|_| {
            anyhow!(
                "--set {text}: give the share of the capacity to leave unused as a percentage, e.g. --set 25%"
            )
        })?;
    // The range is checked where the plan is made, with the same message.
    OpPlan::new(u64::MAX / 2, share).map_err(|e| anyhow!("{e}"))?;
    Ok(share)
}

fn describe(spare: &Spare) -> String {
    format!(
        "OP {:.1}% = (physical - logical) / logical; spare factor {:.1}% = (physical - logical) / physical",
        100.0 * spare.op_ratio(),
        100.0 * spare.spare_factor_ratio()
    )
}

fn bytes(n: u64) -> String {
    format!("{} ({})", DecimalBytes(n as f64), BinaryBytes(n))
}

fn drive(args: &OpArgs, path: &std::path::Path, unused_percent: Option<f64>) -> Result<Outcome> {
    let shown = path.display();
    if ssdlab_io::layout::is_partition(path).with_context(|| format!("--target {shown}"))? {
        bail!(
            "--target {shown} is a partition: over-provisioning is a share of the whole drive's NAND, so give the \
             whole drive; to leave a partition's space unused, discard it with `ssdlab erase --target {shown} \
             --method discard --allow-destroy` and leave it empty"
        );
    }
    let applying = unused_percent.is_some() && args.target.allow_destroy;
    if args.target.allow_destroy && unused_percent.is_none() {
        bail!("--allow-destroy: there is nothing to apply without --set PCT (the share to leave unused)");
    }
    // Reports read the size and the partition table; applying goes through the safety gate, where --force lets
    // only a partition table through (op keeps clear of partitions, but a file system or volume on the whole
    // device lives in its end) and the exclusive claim holds until the discard.
    let opened = open_target(&args.target, if applying { Use::WritesTail } else { Use::Reads })?;
    let mut device = opened.device;
    let info = device.info().clone();
    if info.capacity_bytes == 0 {
        bail!("--target {shown}: the device holds 0 bytes; there is no capacity to over-provision");
    }
    let (physical_bytes, source) = match &args.raw_nand {
        Some(text) => (
            parse_size(text).map_err(|e| anyhow!("--raw-nand {text}: {e}"))?,
            RawNandSource::Given,
        ),
        None => raw_nand(&info.model, info.capacity_bytes),
    };
    if physical_bytes < info.capacity_bytes {
        bail!(
            "--raw-nand {}: smaller than the drive's logical capacity ({} bytes); give the NAND the drive carries",
            args.raw_nand.as_deref().unwrap_or(""),
            info.capacity_bytes
        );
    }
    // The kernel's view (sysfs) and the table on the disk: a kernel that has not re-read a changed table, or
    // has no partition support, still must not let the tail reach a partition.
    let kernel_partitions: Vec<Partition> = ssdlab_io::layout::partitions_of(path)
        .with_context(|| format!("--target {shown}: cannot list its partitions"))?
        .into_iter()
        .map(|p| Partition {
            name: p.name,
            start_bytes: p.start_bytes,
            len_bytes: p.len_bytes,
        })
        .collect();
    // A report still shows what it can when the table cannot be trusted; a plan refuses.
    let (on_disk, layout_note) = match disk_layout(&mut device) {
        Ok(layout) => (layout, None),
        Err(e) if unused_percent.is_none() => (DiskLayout::default(), Some(e.to_string())),
        Err(e) => bail!("--target {shown}: {e}"),
    };

    eprintln!(
        "drive       {shown} ({}), {} logical",
        info.model.trim(),
        bytes(info.capacity_bytes)
    );
    let virtual_block =
        ssdlab_io::layout::drive_kind(path).ok() == Some(DriveKind::Virtual) && args.raw_nand.is_none();
    if virtual_block {
        eprintln!(
            "note        {shown} is a virtual block device with no NAND of its own: the figures below show the \
             arithmetic only"
        );
    }
    eprintln!("raw NAND    {}: {}", bytes(physical_bytes), source_text(&source));
    let built_in = Spare {
        logical_bytes: info.capacity_bytes,
        physical_bytes,
    };
    eprintln!(
        "built in    {}{}",
        describe(&built_in),
        if source == RawNandSource::Assumed {
            " (at least)"
        } else {
            ""
        }
    );
    let partitions = distinct_partitions(&kernel_partitions, &on_disk.partitions);
    output::print_lines_stderr(ssdlab_report::text::partition_lines(
        &partitions,
        info.capacity_bytes,
    ));
    let mut record = OpAnalysis {
        raw_nand_source: source.clone(),
        built_in: built_in.recorded(),
        partitions,
        planned: None,
        applied: None,
        notes: vec![],
    };
    if virtual_block {
        record.notes.push(
            "a virtual block device with no NAND of its own: the figures show the arithmetic only".into(),
        );
    }
    if let Some(note) = layout_note {
        eprintln!("note        {note}");
        record.notes.push(note);
    }
    let Some(unused_percent) = unused_percent else {
        eprintln!(
            "to add spare area, leave a share of the drive unused: --set 25% shows what it means, and with \
             --allow-destroy discards that tail"
        );
        return publish(args, info, record);
    };
    let plan = OpPlan::new(info.capacity_bytes, unused_percent).map_err(|e| anyhow!("{e}"))?;
    eprintln!(
        "--set {unused_percent}% leaves the last {} unused: usable {}",
        bytes(info.capacity_bytes - plan.usable_bytes),
        bytes(plan.usable_bytes)
    );
    eprintln!("with it     {}", describe(&plan.spare(physical_bytes)));
    let sector = u64::from(info.logical_block_bytes.max(512));
    let first = (1u64 << 20) / sector;
    let size = (plan.usable_bytes / sector).saturating_sub(first);
    eprintln!(
        "partitions  must end at or before byte {} (sector {} of {sector} bytes){}",
        plan.usable_bytes,
        plan.usable_bytes / sector,
        if size > 0 {
            format!(
                "; e.g. one partition from 1 MiB: `printf 'label: gpt\\nstart={first}, size={size}\\n' | sfdisk \
                 {shown}`, and leave the rest unpartitioned"
            )
        } else {
            String::new()
        }
    );
    // The same decision the discard makes, so a preview that passes is one that applies.
    let tail = plan_tail(&plan, &on_disk, &kernel_partitions, sector)
        .map_err(|e| anyhow!("--target {shown}: {e}"))?;
    if !info.discard_supported {
        bail!("--target {shown}: {}", ssdlab_methods::op::OpError::NoDiscard);
    }
    record.planned = Some(OpPlanned {
        unused_percent,
        usable_bytes: plan.usable_bytes,
        with_tail_unused: plan.spare(physical_bytes).recorded(),
        tail_offset_bytes: Some(tail.offset_bytes),
        tail_len_bytes: Some(tail.len_bytes),
        equivalent_target: None,
    });
    if !applying {
        let findings =
            ssdlab_io::guard::destructive_findings(path).with_context(|| format!("--target {shown}"))?;
        for finding in ForceScope::PartitionTables.unforceable(&findings) {
            let note = format!(
                "{finding}: op would refuse to discard the tail of a file system or volume on the whole device"
            );
            eprintln!("note        {note}");
            record.notes.push(note);
        }
        eprintln!(
            "nothing was written: add --allow-destroy to discard bytes {}..{} so the drive can use them as spare \
             area",
            tail.offset_bytes,
            tail.offset_bytes + tail.len_bytes
        );
        return publish(args, info, record);
    }
    // The record's directory must take it before the discard, and only once the gate has let the discard through.
    if let Some(dir) = &args.out {
        output::prepare_out_dir(dir)?;
    }
    let applied = apply(&mut device, &plan, &kernel_partitions, args.samples, args.seed)
        .map_err(|e| anyhow!("--target {shown}: {e}"))?;
    eprintln!(
        "discarded   bytes {}..{} ({}){}",
        applied.offset_bytes,
        applied.offset_bytes + applied.len_bytes,
        bytes(applied.len_bytes),
        if applied.gpt_backup_bytes > 0 {
            format!(
                "; the last {} bytes hold the GPT's backup and were kept",
                applied.gpt_backup_bytes
            )
        } else {
            String::new()
        }
    );
    match &applied.read_back_error {
        Some(e) => {
            eprintln!("read back   failed after the discard: {e}; the tail was discarded all the same")
        }
        None => eprintln!(
            "read back   {} sampled tail blocks {}",
            applied.samples,
            if applied.tail_reads_zero {
                "read as zeroes"
            } else {
                "do not all read as zeroes (the drive does not promise zeroes after a discard; the blocks are unmapped all the same)"
            }
        ),
    }
    eprintln!(
        "done        keep every partition below byte {}: a write to the tail takes the spare area back",
        plan.usable_bytes
    );
    record.applied = Some(applied);
    publish(args, info, record)
}

/// Streams the record with `--json` and writes it with `--out`: what `op` found and did. Passed: `op` reports,
/// and what it could not do is an error, not a verdict.
fn publish(args: &OpArgs, info: ssdlab_core::DeviceInfo, analysis: OpAnalysis) -> Result<Outcome> {
    if !args.json && args.out.is_none() {
        return Ok(Outcome::Passed);
    }
    let options = RunOptions::Op(OpFlags {
        target: args.target.recorded(),
        set: args.set.clone(),
        raw_nand: args.raw_nand.clone(),
        samples: args.samples,
        seed: args.seed,
    });
    let verdict = Verdict {
        passed: true,
        reasons: vec![],
    };
    if let Some(dir) = &args.out {
        output::prepare_out_dir(dir)?;
    }
    let applied = analysis.applied.is_some();
    let mut reporter = Reporter::new(args.json);
    output::publish_analysis(
        &mut reporter,
        args.out.as_deref(),
        info,
        options,
        Analysis::Op(analysis),
        &verdict,
        true,
    )
    .with_context(|| {
        if applied {
            "--out: the tail WAS discarded, but the record could not be written"
        } else {
            "--out: the record could not be written"
        }
    })?;
    if let Some(dir) = &args.out {
        eprintln!("record      {} (result.json, report.html)", dir.display());
    }
    Ok(Outcome::Passed)
}

/// The partitions the kernel lists and the disk's table holds, each range once (the kernel's name first).
fn distinct_partitions(kernel: &[Partition], on_disk: &[Partition]) -> Vec<Partition> {
    let mut shown: Vec<Partition> = vec![];
    for p in kernel.iter().chain(on_disk) {
        if !shown
            .iter()
            .any(|q| (q.start_bytes, q.len_bytes) == (p.start_bytes, p.len_bytes))
        {
            shown.push(p.clone());
        }
    }
    shown
}

fn source_text(source: &RawNandSource) -> String {
    match source {
        RawNandSource::Given => "given by --raw-nand".into(),
        RawNandSource::Known(what) => format!("known drive: {what}"),
        RawNandSource::Simulated => "the virtual drive's data blocks".into(),
        RawNandSource::Assumed => {
            "assumed: a drive sold as N GB carries at least N GiB of NAND (the decimal/binary \
             difference); give --raw-nand SIZE for the exact figure"
                .into()
        }
    }
}

/// A virtual drive: its geometry says exactly how much NAND holds data, and its over-provisioning is a parameter.
fn simulated(args: &OpArgs, spec_text: &str, unused_percent: Option<f64>) -> Result<Outcome> {
    let target = &args.target.target;
    let spec = SimSpec::parse(spec_text).map_err(|e| anyhow!("--target {target}: {e}"))?;
    if let Some(raw) = &args.raw_nand {
        bail!(
            "--raw-nand {raw}: a virtual drive's NAND is its profile's; give it with sim:PROFILE?op=N instead"
        );
    }
    if args.target.allow_destroy && unused_percent.is_none() {
        bail!("--allow-destroy: there is nothing to apply without --set PCT (the share to leave unused)");
    }
    let geometry = spec.profile.geometry(spec.scale, spec.op);
    let logical_bytes = u64::from(geometry.logical_units) * SIM_UNIT_BYTES;
    let physical_bytes = geometry.data_units() * SIM_UNIT_BYTES;
    let built_in = Spare {
        logical_bytes,
        physical_bytes,
    };
    eprintln!(
        "drive       {target} (virtual {}), {} logical",
        spec.profile.name,
        bytes(logical_bytes)
    );
    eprintln!(
        "raw NAND    {} in data blocks: {} (GC reserve, open blocks and the SLC cache are extra)",
        bytes(physical_bytes),
        source_text(&RawNandSource::Simulated)
    );
    eprintln!("built in    {}", describe(&built_in));
    let info = ssdlab_core::DeviceInfo::subject(
        target.clone(),
        ssdlab_core::device::TargetKind::Sim,
        format!("virtual {}", spec.profile.name),
        logical_bytes,
        "the virtual SSD's geometry (nothing opened)".into(),
    );
    let mut record = OpAnalysis {
        raw_nand_source: RawNandSource::Simulated,
        built_in: built_in.recorded(),
        partitions: vec![],
        planned: None,
        applied: None,
        notes: vec![
            "the raw NAND counts data blocks only: the GC reserve, open blocks and the SLC cache are extra"
                .into(),
        ],
    };
    let Some(unused_percent) = unused_percent else {
        return publish(args, info, record);
    };
    let plan = OpPlan::new(logical_bytes, unused_percent).map_err(|e| anyhow!("{e}"))?;
    let spare = plan.spare(physical_bytes);
    eprintln!(
        "--set {unused_percent}% leaves the last {} unused: usable {}",
        bytes(logical_bytes - plan.usable_bytes),
        bytes(plan.usable_bytes)
    );
    eprintln!("with it     {}", describe(&spare));
    let built = with_op(spec_text, 100.0 * spare.op_ratio());
    eprintln!(
        "the same drive built that way: {built} (or `test consistency --op {unused_percent}` on this one, which \
         leaves the tail unused as a real drive would)"
    );
    if args.target.allow_destroy {
        bail!(
            "--allow-destroy: a virtual drive's over-provisioning is a parameter, not something to apply; use \
             --target '{built}'"
        );
    }
    record.planned = Some(OpPlanned {
        unused_percent,
        usable_bytes: plan.usable_bytes,
        with_tail_unused: spare.recorded(),
        tail_offset_bytes: None,
        tail_len_bytes: None,
        equivalent_target: Some(built),
    });
    publish(args, info, record)
}

/// The sim target with its `op=` set to `op_percent` and its other options kept.
fn with_op(spec_text: &str, op_percent: f64) -> String {
    let (name, query) = spec_text.split_once('?').unwrap_or((spec_text, ""));
    let mut options: Vec<String> = query
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("op="))
        .map(str::to_string)
        .collect();
    options.insert(0, format!("op={op_percent:.1}"));
    format!("sim:{name}?{}", options.join("&"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn with_op_keeps_the_other_options() {
        assert_eq!(super::with_op("840evo-250g", 46.55), "sim:840evo-250g?op=46.5");
        assert_eq!(
            super::with_op("840evo-250g?scale=1/64&op=10&seed=3", 25.0),
            "sim:840evo-250g?op=25.0&scale=1/64&seed=3"
        );
    }
}
