//! The null device: every operation completes the moment it is submitted, and a read reads zeroes.
//!
//! It measures the engine's own per-I/O cost (the ceiling of what ssdlab can drive), so it must stay as cheap as
//! possible: one clock read per submitted batch and per reap, no system calls, no allocation. A read must still
//! hand back zeroes, never what an earlier operation left in the slot's buffer (over NBD that would be another
//! client's data), so a slot the caller has written into is zeroed by its next read; a slot that only reads
//! stays zero and costs nothing.

use ssdlab_core::device::{ClockKind, Completion, Device, DeviceInfo, DeviceResult, Io, Op, TargetKind};

use crate::common::{Done, RealClock, SlotBuffers};

pub struct NullDevice {
    info: DeviceInfo,
    clock: RealClock,
    slots: SlotBuffers,
    /// Per slot, how many leading bytes of its buffer may not be zero (the caller was handed it to write).
    dirty_bytes: Vec<usize>,
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
            dirty_bytes: Vec::new(),
        }
    }
}

impl NullDevice {
    /// Another null device like this one, on the same clock, for a job on another thread.
    pub fn sibling(&self) -> NullDevice {
        NullDevice {
            info: self.info.clone(),
            clock: self.clock,
            slots: SlotBuffers::new(self.info.memory_align_bytes as usize),
            dirty_bytes: Vec::new(),
        }
    }

    /// Makes the bytes a read hands back zeroes: those of its slot's buffer the caller may have written.
    #[inline]
    fn zero_for_read(&mut self, io: &Io) -> DeviceResult<()> {
        let Some(dirty) = self.dirty_bytes.get_mut(io.slot as usize) else {
            // An unknown slot: `begin` refuses it with the reason.
            return Ok(());
        };
        if *dirty == 0 {
            return Ok(());
        }
        let len = (io.len as usize).min(*dirty);
        if len == *dirty {
            *dirty = 0;
        }
        let buffer = self.slots.buffer_mut(io.slot);
        let len = len.min(buffer.len());
        buffer[..len].fill(0);
        Ok(())
    }
}

impl Device for NullDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.slots
            .prepare(slots, buffer_bytes, self.info.memory_align_bytes as usize);
        // A new pool is allocated zeroed.
        self.dirty_bytes = vec![0; slots as usize];
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        self.slots.buffer(slot)
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        let buffer = self.slots.buffer_mut(slot);
        self.dirty_bytes[slot as usize] = buffer.len();
        buffer
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        let now = self.clock.now_ns();
        for io in ios {
            if io.op == Op::Read {
                // Checked first: an operation on a busy or unknown slot is refused, its buffer untouched.
                self.slots.slots.check(io, self.slots.pool.buffer_len())?;
                self.zero_for_read(io)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(device: &mut NullDevice, slot: u32, len: u64) -> Vec<u8> {
        let io = Io {
            op: Op::Read,
            offset: 0,
            len,
            slot,
            tag: 0,
        };
        assert_eq!(device.submit(&[io]).unwrap(), 1);
        let mut out = Vec::new();
        device.reap(1, None, &mut out).unwrap();
        assert_eq!(out[0].result, len as i64);
        device.buffer(slot)[..len as usize].to_vec()
    }

    /// A read is zeroes whatever the slot carried before: a write's payload (another NBD client's data) is never
    /// handed back, also when a shorter read came between.
    #[test]
    fn a_read_is_zeroes_whatever_the_slot_held_before() {
        let mut device = NullDevice::new("null", 1 << 20);
        device.prepare(2, 8192).unwrap();
        assert!(read(&mut device, 0, 8192).iter().all(|&b| b == 0));
        device.buffer_mut(1).fill(0xA5);
        let write = Io {
            op: Op::Write,
            offset: 0,
            len: 8192,
            slot: 1,
            tag: 1,
        };
        device.submit(&[write]).unwrap();
        device.reap(1, None, &mut Vec::new()).unwrap();
        assert!(
            read(&mut device, 1, 4096).iter().all(|&b| b == 0),
            "a short read after a write"
        );
        assert!(
            read(&mut device, 1, 8192).iter().all(|&b| b == 0),
            "then a whole one"
        );
        assert!(
            device.buffer(0).iter().all(|&b| b == 0),
            "a slot that only read stays zero"
        );
    }
}
