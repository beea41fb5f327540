//! A memory-backed device with a virtual clock, for testing the runner without the operating system.
//! Each operation takes a fixed virtual service time per queue slot, so runs are exact and instant.

use ssdlab_core::device::{
    ClockKind, Completion, Device, DeviceError, DeviceInfo, DeviceResult, Io, Op, TargetKind,
};

pub struct MemDevice {
    info: DeviceInfo,
    pub data: Vec<u8>,
    buffers: Vec<Vec<u8>>,
    now_ns: u64,
    service_ns: u64,
    /// (completion time, completion), in submission order.
    pending: Vec<Completion>,
    /// Every operation seen, for assertions.
    pub log: Vec<(Op, u64, u64)>,
}

impl MemDevice {
    pub fn new(capacity: u64, service_ns: u64) -> Self {
        let info = DeviceInfo {
            target: "mem".into(),
            kind: TargetKind::Sim,
            model: "memory test device".into(),
            capacity_bytes: capacity,
            logical_block_bytes: 512,
            physical_block_bytes: 512,
            memory_align_bytes: 512,
            max_transfer_bytes: u64::MAX,
            discard_supported: true,
            discard_max_bytes: u64::MAX,
            rotational: false,
            clock: ClockKind::Virtual,
            backend: "memory".into(),
            direct_io: true,
            notes: vec![],
        };
        MemDevice {
            info,
            data: vec![0; capacity as usize],
            buffers: vec![],
            now_ns: 0,
            service_ns,
            pending: vec![],
            log: vec![],
        }
    }
}

impl Device for MemDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.buffers = vec![vec![0; buffer_bytes]; slots as usize];
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        &self.buffers[slot as usize]
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        &mut self.buffers[slot as usize]
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        for io in ios {
            let slot = io.slot as usize;
            if slot >= self.buffers.len() || self.pending.iter().any(|c| c.slot == io.slot) {
                return Err(DeviceError::Invalid(format!("slot {} is not free", io.slot)));
            }
            io.check_bounds(self.info.capacity_bytes, self.buffers[slot].len())?;
            let range = io.offset as usize..(io.offset + io.len) as usize;
            match io.op {
                Op::Read => {
                    self.buffers[io.slot as usize][..io.len as usize].copy_from_slice(&self.data[range])
                }
                Op::Write => {
                    self.data[range].copy_from_slice(&self.buffers[io.slot as usize][..io.len as usize])
                }
                Op::Discard => self.data[range].fill(0),
                Op::Flush => {}
            }
            self.log.push((io.op, io.offset, io.len));
            self.pending.push(Completion {
                slot: io.slot,
                tag: io.tag,
                op: io.op,
                result: io.len as i64,
                submitted_ns: self.now_ns,
                completed_ns: self.now_ns + self.service_ns,
            });
        }
        Ok(ios.len())
    }

    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        self.pending.sort_by_key(|c| c.completed_ns);
        let mut n = 0;
        while let Some(first) = self.pending.first() {
            let due = first.completed_ns;
            if due > self.now_ns {
                if n >= min || deadline_ns.is_some_and(|d| d < due) {
                    if let Some(d) = deadline_ns {
                        self.now_ns = self.now_ns.max(d.min(due));
                    }
                    break;
                }
                self.now_ns = due;
            }
            out.push(self.pending.remove(0));
            n += 1;
        }
        Ok(n)
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn wait_until(&mut self, t_ns: u64) {
        self.now_ns = self.now_ns.max(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }
}
