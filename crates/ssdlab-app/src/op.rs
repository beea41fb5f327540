//! `op`: a drive's spare area, what leaving part of it unused adds, and applying that by discarding the tail. The
//! arithmetic and the discard are `ssdlab_methods::op`'s; this checks the plan, finds the partitions, goes
//! through the safety gate only when applying, and says and records what it found and did.

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::op::{OpAnalysis, OpPlanned};
use ssdlab_core::schema::options::{OpFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::target::TargetSpec;
use ssdlab_io::layout::DriveKind;
use ssdlab_methods::op::{
    MAX_UNUSED_PERCENT, OpPlan, OpRequest, Partition, RawNandSource, Spare, apply, examine,
};
use ssdlab_report::text;
use ssdlab_sim::spec::SimSpec;

use ssdlab_targets::ForceScope;

use crate::export;
use crate::flags::Given;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// Sim geometry counts 4 KiB mapping units.
const SIM_UNIT_BYTES: u64 = 4096;

/// What `op` looks at.
#[derive(Debug, Clone)]
enum Drive {
    /// A whole block device.
    Block(std::path::PathBuf),
    /// A virtual drive, parsed.
    Sim { spec: Box<SimSpec> },
}

/// An `op` run, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: TargetPlan,
    drive: Drive,
    /// `--set`: the share of the capacity to leave unused, in percent.
    set: Option<Given<f64>>,
    /// `--raw-nand`: the drive's raw NAND in bytes.
    raw_nand: Option<Given<u64>>,
    pub samples: u32,
    pub seed: u64,
    pub out: Option<crate::export::OutDir>,
}

impl Plan {
    /// Checks the flags before anything opens: a whole block device or a virtual drive, a share that leaves
    /// something usable, `--allow-destroy` only with `--set`, `--raw-nand` only for a real drive.
    pub fn new(
        target: TargetPlan,
        set: Option<Given<f64>>,
        raw_nand: Option<Given<u64>>,
        samples: u32,
        seed: u64,
        out: Option<crate::export::OutDir>,
    ) -> Result<Self> {
        if let Some(dir) = &out {
            export::check_out_dir(dir)?;
        }
        let unused_percent = set.as_ref().map(|s| s.value);
        let drive = match &target.spec {
            TargetSpec::Block { path } => Drive::Block(path.clone()),
            TargetSpec::Sim { spec: text } => {
                let spec = SimSpec::parse(text).map_err(|e| anyhow!("--target {}: {e}", target.target))?;
                if let Some(raw) = &raw_nand {
                    bail!(
                        "--raw-nand {}: a virtual drive's NAND is its profile's; give it with sim:PROFILE?op=N \
                         instead",
                        raw.text
                    );
                }
                Drive::Sim { spec: Box::new(spec) }
            }
            _ => bail!(
                "--target {}: over-provisioning is a property of a drive; give a whole block device (/dev/NAME) or \
                 a virtual one (sim:PROFILE)",
                target.target
            ),
        };
        if target.allow_destroy && unused_percent.is_none() {
            bail!("--allow-destroy: there is nothing to apply without --set PCT (the share to leave unused)");
        }
        assert!(
            unused_percent.is_none_or(|p| p > 0.0 && p < 100.0),
            "the share left unused was checked where the plan is made"
        );
        Ok(Plan {
            target,
            drive,
            set,
            raw_nand,
            samples,
            seed,
            out,
        })
    }
}

/// Runs `op`: reports the spare area, and with `--set` and `--allow-destroy` discards the tail.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    match &plan.drive {
        Drive::Block(path) => drive(plan, ports, path),
        Drive::Sim { spec } => simulated(plan, ports, spec),
    }
}

/// `--set` for its value parser: a share of the capacity, `25` or `25%`, that leaves something usable.
pub fn share_arg(text: &str) -> std::result::Result<Given<f64>, String> {
    let share: f64 = text
        .trim()
        .strip_suffix('%')
        .unwrap_or(text.trim())
        .parse()
        .map_err(|_| {
            "give the share of the capacity to leave unused as a percentage, e.g. --set 25%".to_string()
        })?;
    // The range the plan the discard follows takes.
    if !(share > 0.0 && share <= MAX_UNUSED_PERCENT) {
        return Err(format!(
            "give the share of the capacity to leave unused, more than 0% and at most {MAX_UNUSED_PERCENT}% \
             (e.g. --set 25%)"
        ));
    }
    Ok(Given::of(text, share))
}

impl Plan {
    /// The share of the capacity `--set` leaves unused, in percent.
    fn unused_percent(&self) -> Option<f64> {
        self.set.as_ref().map(|s| s.value)
    }

    /// `--raw-nand` in bytes.
    fn raw_nand_bytes(&self) -> Option<u64> {
        self.raw_nand.as_ref().map(|r| r.value)
    }
}

fn drive(plan: &Plan, ports: &mut Ports, path: &std::path::Path) -> Result<Outcome> {
    let unused_percent = plan.unused_percent();
    let shown = path.display().to_string();
    if ssdlab_io::layout::is_partition(path).with_context(|| format!("--target {shown}"))? {
        bail!(
            "--target {shown} is a partition: over-provisioning is a share of the whole drive's NAND, so give the \
             whole drive; to leave a partition's space unused, discard it with `ssdlab erase --target {shown} \
             --method discard --allow-destroy` and leave it empty"
        );
    }
    let applying = unused_percent.is_some() && plan.target.allow_destroy;
    // Reports read the size and the partition table; applying goes through the safety gate, where --force lets
    // only a partition table through (op keeps clear of partitions, but a file system or volume on the whole
    // device lives in its end).
    let opened = plan
        .target
        .open(ports.targets, if applying { Use::WritesTail } else { Use::Reads })?;
    let mut device = opened.device;
    let info = device.info().clone();
    // After the gate, before the discard: a refusal leaves no directory behind, and a directory that cannot take
    // the record is known before anything is discarded.
    let recording = Recording::begin(plan.out.as_ref(), None, ports.started_unix_s)?;
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
    let request = OpRequest {
        raw_nand_bytes: plan.raw_nand_bytes(),
        kernel_partitions: kernel_partitions.clone(),
        unused_percent,
        virtual_block: ssdlab_io::layout::drive_kind(path).ok() == Some(DriveKind::Virtual)
            && plan.raw_nand.is_none(),
    };
    let examined = examine(&mut device, &request).map_err(|e| anyhow!("--target {shown}: {e}"))?;
    let mut record = examined.record;
    ports.say_lines(text::op::drive_lines(&record, &info, &shown));
    let Some((op_plan, tail)) = examined.plan else {
        return publish(plan, recording, ports, info, record);
    };
    if !applying {
        let findings =
            ssdlab_io::guard::destructive_findings(path).with_context(|| format!("--target {shown}"))?;
        for finding in ForceScope::PartitionTables.unforceable(&findings) {
            let note = format!(
                "{finding}: op would refuse to discard the tail of a file system or volume on the whole device"
            );
            ports.console.say(&format!("note        {note}"));
            record.notes.push(note);
        }
        ports.console.say(&format!(
            "nothing was written: add --allow-destroy to discard bytes {}..{} so the drive can use them as spare \
             area",
            tail.offset_bytes,
            tail.offset_bytes + tail.len_bytes
        ));
        return publish(plan, recording, ports, info, record);
    }
    let applied = apply(&mut device, &op_plan, &kernel_partitions, plan.samples, plan.seed)
        .map_err(|e| anyhow!("--target {shown}: {e}"))?;
    ports.say_lines(text::op::applied_lines(&applied, op_plan.usable_bytes));
    record.applied = Some(applied);
    publish(plan, recording, ports, info, record)
}

/// Streams the record with `--json` and writes it with `--out`: what `op` found and did. Passed: `op` reports,
/// and what it could not do is an error, not a verdict.
fn publish(
    plan: &Plan,
    recording: Recording,
    ports: &mut Ports,
    info: ssdlab_core::DeviceInfo,
    analysis: OpAnalysis,
) -> Result<Outcome> {
    let options = RunOptions::Op(OpFlags {
        target: plan.target.recorded(),
        set_ratio: plan.set.as_ref().map(|s| s.value / 100.0),
        raw_nand_bytes: plan.raw_nand.as_ref().map(|r| r.value),
        samples: plan.samples,
        seed: plan.seed,
    });
    let verdict = Verdict {
        finding: false,
        passed: true,
        reasons: vec![],
        unknown: false,
    };
    let done = analysis
        .applied
        .is_some()
        .then(|| "the tail WAS discarded".to_string());
    recording.finish(
        &mut Reporter::new(&mut *ports.console),
        Finished::new(info, options, Analysis::Op(analysis), verdict).done(done),
    )
}

/// A virtual drive: its geometry says exactly how much NAND holds data, and its over-provisioning is a parameter.
fn simulated(plan: &Plan, ports: &mut Ports, spec: &SimSpec) -> Result<Outcome> {
    let recording = Recording::begin(plan.out.as_ref(), None, ports.started_unix_s)?;
    let target = &plan.target.target;
    let geometry = spec.profile.geometry(spec.scale, spec.op);
    let logical_bytes = u64::from(geometry.logical_units) * SIM_UNIT_BYTES;
    let physical_bytes = geometry.data_units() * SIM_UNIT_BYTES;
    let built_in = Spare {
        logical_bytes,
        physical_bytes,
    };
    ports.console.say(&format!(
        "drive       {target} (virtual {}), {} logical",
        spec.profile.name,
        text::op::bytes(logical_bytes)
    ));
    ports.console.say(&format!(
        "raw NAND    {} in data blocks: {} (GC reserve, open blocks and the SLC cache are extra)",
        text::op::bytes(physical_bytes),
        text::op::source_text(&RawNandSource::Simulated)
    ));
    ports.console.say(&format!(
        "built in    {}",
        text::op::describe(&built_in.recorded())
    ));
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
    let Some(unused_percent) = plan.unused_percent() else {
        return publish(plan, recording, ports, info, record);
    };
    let op_plan = OpPlan::new(logical_bytes, unused_percent).map_err(|e| anyhow!("{e}"))?;
    let spare = op_plan.spare(physical_bytes);
    ports.console.say(&format!(
        "--set {unused_percent}% leaves the last {} unused: usable {}",
        text::op::bytes(logical_bytes - op_plan.usable_bytes),
        text::op::bytes(op_plan.usable_bytes)
    ));
    ports
        .console
        .say(&format!("with it     {}", text::op::describe(&spare.recorded())));
    let built = with_op(spec, 100.0 * spare.op_ratio());
    ports.console.say(&format!(
        "the same drive built that way: {built} (or `test consistency --op {unused_percent}` on this one, which \
         leaves the tail unused as a real drive would)"
    ));
    if plan.target.allow_destroy {
        bail!(
            "--allow-destroy: a virtual drive's over-provisioning is a parameter, not something to apply; use \
             --target '{built}'"
        );
    }
    record.planned = Some(OpPlanned {
        unused_percent,
        usable_bytes: op_plan.usable_bytes,
        with_tail_unused: spare.recorded(),
        tail_offset_bytes: None,
        tail_len_bytes: None,
        equivalent_target: Some(built),
    });
    publish(plan, recording, ports, info, record)
}

/// The same virtual drive with its over-provisioning set to `op_percent` (to a tenth of a percent).
fn with_op(spec: &SimSpec, op_percent: f64) -> String {
    let mut drive = spec.clone();
    drive.op = Some((op_percent * 10.0).round() / 1000.0);
    drive.to_string()
}

#[cfg(test)]
mod tests {
    use ssdlab_sim::spec::SimSpec;

    #[test]
    fn with_op_keeps_the_other_options() {
        let drive = |text: &str| SimSpec::parse(text).unwrap();
        assert_eq!(
            super::with_op(&drive("840evo-250g"), 46.54),
            "sim:840evo-250g?op=46.5"
        );
        assert_eq!(
            super::with_op(&drive("840evo-250g?scale=1/64&op=10&seed=3"), 25.0),
            "sim:840evo-250g?op=25&scale=1/64&seed=3"
        );
    }
}
