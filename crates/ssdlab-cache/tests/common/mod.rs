//! What the cache's test devices share: the description of a virtual-clock memory device, and a device that
//! counts what reaches it.
#![allow(dead_code)]

use ssdlab_core::device::{ClockKind, Completion, Device, DeviceInfo, DeviceResult, Io, Op, TargetKind};

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

/// A huge device that keeps no data and counts what reaches it; every operation takes 50 µs.
pub struct Counting {
    pub info: DeviceInfo,
    pub buffers: Vec<Vec<u8>>,
    pub now_ns: u64,
    pub pending: Vec<Completion>,
    pub ops: Vec<(Op, u64, u64)>,
}

impl Counting {
    pub fn new(capacity: u64) -> Self {
        Counting {
            info: virtual_info("counting", capacity, 4096, 1 << 20, true),
            buffers: vec![],
            now_ns: 0,
            pending: vec![],
            ops: vec![],
        }
    }
}

impl Device for Counting {
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
            self.ops.push((io.op, io.offset, io.len));
            self.pending.push(Completion {
                slot: io.slot,
                tag: io.tag,
                op: io.op,
                result: if io.op == Op::Flush { 0 } else { io.len as i64 },
                submitted_ns: self.now_ns,
                completed_ns: self.now_ns + 50_000,
            });
        }
        Ok(ios.len())
    }
    fn reap(&mut self, min: usize, _deadline: Option<u64>, out: &mut Vec<Completion>) -> DeviceResult<usize> {
        if min > 0 && !self.pending.is_empty() {
            self.now_ns = self
                .pending
                .iter()
                .map(|c| c.completed_ns)
                .min()
                .unwrap()
                .max(self.now_ns);
        }
        let now = self.now_ns;
        let (done, left): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|c| c.completed_ns <= now);
        self.pending = left;
        let n = done.len();
        out.extend(done);
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

/// Submits one operation to a cache over a counting device and waits for its completion.
pub fn one(cache: &mut ssdlab_cache::CachedDevice<Counting>, io: Io) -> Completion {
    cache.submit(&[io]).unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        cache.reap(1, None, &mut out).unwrap();
    }
    out[0]
}
