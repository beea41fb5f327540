//! What `op` finds on a drive before it changes anything: the raw NAND and where the figure comes from, the
//! built-in spare area in both conventions, every partition (the kernel's and the disk's own table, each range
//! once), and with `--set` the plan and the exact tail a discard would take, decided as the discard decides it
//! ([`super::plan_tail`]), so a preview that passes is one that applies.
//!
//! It reads the device's partition table through the `Device` and nothing else; it never writes, never asks the
//! operating system (the kernel's partitions and whether the device is a virtual one come in the request) and
//! never decides whether writing is allowed: the caller's gate does.

use ssdlab_core::device::Device;
use ssdlab_core::schema::op::{OpAnalysis, OpPlanned, Partition, RawNandSource};

use super::{DiskLayout, OpError, OpPlan, Spare, Tail, disk_layout, plan_tail, raw_nand};

/// What `op` is asked to look at.
#[derive(Debug, Clone)]
pub struct OpRequest {
    /// `--raw-nand`, when given.
    pub raw_nand_bytes: Option<u64>,
    /// The partitions the kernel lists for the device.
    pub kernel_partitions: Vec<Partition>,
    /// `--set`: the share of the capacity to leave unused.
    pub unused_percent: Option<f64>,
    /// A virtual block device (a loop device, a RAM disk) with no NAND of its own: the figures are arithmetic.
    pub virtual_block: bool,
}

/// What `op` found.
#[derive(Debug, Clone)]
pub struct Examined {
    /// The record so far (partitions, spare area, the plan with its tail; nothing applied yet).
    pub record: OpAnalysis,
    pub physical_bytes: u64,
    /// With `--set`: the plan and the tail the discard would take.
    pub plan: Option<(OpPlan, Tail)>,
}

/// Examines the drive behind `device` as `request` asks.
pub fn examine<D: Device>(device: &mut D, request: &OpRequest) -> Result<Examined, OpError> {
    let info = device.info().clone();
    if info.capacity_bytes == 0 {
        return Err(OpError::Invalid(
            "the device holds 0 bytes; there is no capacity to over-provision".into(),
        ));
    }
    let (physical_bytes, source) = match request.raw_nand_bytes {
        Some(bytes) => (bytes, RawNandSource::Given),
        None => raw_nand(&info.model, info.capacity_bytes),
    };
    if physical_bytes < info.capacity_bytes {
        return Err(OpError::Invalid(format!(
            "--raw-nand: smaller than the drive's logical capacity ({} bytes); give the NAND the drive carries",
            info.capacity_bytes
        )));
    }
    // A report still shows what it can when the table cannot be trusted; a plan refuses.
    let (on_disk, layout_note) = match disk_layout(device) {
        Ok(layout) => (layout, None),
        Err(e) if request.unused_percent.is_none() => (DiskLayout::default(), Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let built_in = Spare {
        logical_bytes: info.capacity_bytes,
        physical_bytes,
    };
    let mut record = OpAnalysis {
        raw_nand_source: source,
        built_in: built_in.recorded(),
        partitions: distinct_partitions(&request.kernel_partitions, &on_disk.partitions),
        planned: None,
        applied: None,
        notes: vec![],
    };
    if request.virtual_block {
        record.notes.push(
            "a virtual block device with no NAND of its own: the figures show the arithmetic only".into(),
        );
    }
    record.notes.extend(layout_note);
    let Some(unused_percent) = request.unused_percent else {
        return Ok(Examined {
            record,
            physical_bytes,
            plan: None,
        });
    };
    let plan = OpPlan::new(info.capacity_bytes, unused_percent)?;
    let sector = u64::from(info.logical_block_bytes.max(512));
    let tail = plan_tail(&plan, &on_disk, &request.kernel_partitions, sector)?;
    if !info.discard_supported {
        return Err(OpError::NoDiscard);
    }
    record.planned = Some(OpPlanned {
        unused_percent,
        usable_bytes: plan.usable_bytes,
        with_tail_unused: plan.spare(physical_bytes).recorded(),
        tail_offset_bytes: Some(tail.offset_bytes),
        tail_len_bytes: Some(tail.len_bytes),
        equivalent_target: None,
    });
    Ok(Examined {
        record,
        physical_bytes,
        plan: Some((plan, tail)),
    })
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
