//! What the cache's test devices share: the description of a virtual-clock memory device.

use ssdlab_core::device::{ClockKind, DeviceInfo, TargetKind};

/// A virtual-clock device of `capacity` bytes with `block`-byte logical blocks.
pub fn virtual_info(
    name: &str,
    capacity: u64,
    block: u32,
    max_transfer_bytes: u64,
    discard: bool,
) -> DeviceInfo {
    DeviceInfo {
        target: name.into(),
        kind: TargetKind::Sim,
        model: name.into(),
        capacity_bytes: capacity,
        logical_block_bytes: block,
        physical_block_bytes: block,
        memory_align_bytes: block,
        max_transfer_bytes,
        discard_supported: discard,
        discard_max_bytes: if discard { u64::MAX } else { 0 },
        rotational: false,
        clock: ClockKind::Virtual,
        backend: "memory".into(),
        direct_io: true,
        notes: vec![],
    }
}
