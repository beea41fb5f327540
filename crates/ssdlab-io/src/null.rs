//! The null device: every operation completes the moment it is submitted, touching no data.
//!
//! It measures the engine's own per-I/O cost (the ceiling of what ssdlab can drive), so it must stay as cheap as
//! possible: one clock read per submitted batch and per reap, no system calls, no allocation.

use ssdlab_core::device::{ClockKind, Completion, Device, DeviceInfo, DeviceResult, Io, TargetKind};

use crate::common::{Done, RealClock, SlotBuffers};

pub struct NullDevice {
    info: DeviceInfo,
    clock: RealClock,
    slots: SlotBuffers,
}

impl NullDevice {
    pub fn new(target: &str, size: u64) -> Self {
        let info = DeviceInfo {
            target: target.to_string(),
            kind: TargetKind::Null,
            model: "null device (completes every I/O at once)".into(),
            capacity_bytes: size,
            logical_block_bytes: 512,
            physical_block_bytes: 512,
            memory_align_bytes: 512,
            max_transfer_bytes: u64::MAX,
            discard_supported: true,
            discard_max_bytes: u64::MAX,
            rotational: false,
            clock: ClockKind::Real,
            backend: "null".into(),
            direct_io: true,
            notes: Vec::new(),
            drive: Default::default(),
        };
        NullDevice {
            info,
            clock: RealClock::new(),
            slots: SlotBuffers::new(512),
        }
    }
}

impl Device for NullDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.slots
            .prepare(slots, buffer_bytes, self.info.memory_align_bytes as usize);
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        self.slots.buffer(slot)
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.slots.buffer_mut(slot)
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        let now = self.clock.now_ns();
        for io in ios {
            self.slots.begin(io, now)?;
            self.slots.ready.push(Done {
                slot: io.slot,
                result: io.len as i64,
                completed_ns: now,
            });
        }
        Ok(ios.len())
    }

    #[inline]
    fn reap(
        &mut self,
        _min: usize,
        _deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        // Completion is observed now, as a real device's would be at reap time.
        Ok(self.slots.drain_ready(self.clock.now_ns(), out))
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn wait_until(&mut self, t_ns: u64) {
        self.clock.sleep_until(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.slots.slots.in_flight()
    }
}
