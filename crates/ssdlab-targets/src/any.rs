//! One enum over every backend, so generic code is compiled once per backend (the engine's hot loop stays
//! monomorphic inside each arm) and dynamic code can hold any target as one type.

use ssdlab_cache::CachedDevice;
use ssdlab_core::device::{Completion, Device, DeviceInfo, DeviceResult, Extent, Io};
use ssdlab_core::schema::{CacheStats, DeviceCounters};
use ssdlab_io::null::NullDevice;
use ssdlab_io::psync::PsyncDevice;
use ssdlab_io::uring::UringDevice;
use ssdlab_sim::device::SimDevice;

/// Any opened target. Opened once per run, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum AnyDevice {
    Uring(UringDevice),
    Psync(PsyncDevice),
    Null(NullDevice),
    Sim(SimDevice),
    /// The DRAM cache over another target (never over a cache).
    Cached(Box<CachedDevice<AnyDevice>>),
    /// A device a caller built and handed in through the app's target port (tests: a fault-injecting device over
    /// a real file or the simulator), run like any other.
    Dyn(Box<dyn Device + Send>),
}

impl AnyDevice {
    /// Makes a virtual drive (plain or under a cache) keep the data written, as an NBD export needs; other
    /// devices keep their data anyway. Returns whether it was a virtual drive.
    pub fn keep_virtual_data(&mut self) -> bool {
        match self {
            AnyDevice::Sim(d) => {
                d.keep_data();
                true
            }
            AnyDevice::Cached(c) => c.inner_mut().keep_virtual_data(),
            AnyDevice::Uring(_) | AnyDevice::Psync(_) | AnyDevice::Null(_) | AnyDevice::Dyn(_) => false,
        }
    }

    /// The open file or block device behind a real target (not through a cache): ioctls and identity checks
    /// go to the very descriptor the safety gate judged.
    pub fn backing_file(&self) -> Option<&std::fs::File> {
        match self {
            AnyDevice::Uring(d) => Some(d.backing_file()),
            AnyDevice::Psync(d) => Some(d.backing_file()),
            AnyDevice::Null(_) | AnyDevice::Sim(_) | AnyDevice::Cached(_) | AnyDevice::Dyn(_) => None,
        }
    }
}

/// Calls `$body` with `$d` bound to the concrete device in every arm.
macro_rules! each {
    ($self:expr, $d:ident => $body:expr) => {
        match $self {
            AnyDevice::Uring($d) => $body,
            AnyDevice::Psync($d) => $body,
            AnyDevice::Null($d) => $body,
            AnyDevice::Sim($d) => $body,
            AnyDevice::Cached($d) => $body,
            AnyDevice::Dyn($d) => $body,
        }
    };
}

impl Device for AnyDevice {
    fn info(&self) -> &DeviceInfo {
        each!(self, d => d.info())
    }
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        each!(self, d => d.prepare(slots, buffer_bytes))
    }
    fn buffer(&self, slot: u32) -> &[u8] {
        each!(self, d => d.buffer(slot))
    }
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        each!(self, d => d.buffer_mut(slot))
    }
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        each!(self, d => d.submit(ios))
    }
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        each!(self, d => d.reap(min, deadline_ns, out))
    }
    fn now_ns(&self) -> u64 {
        each!(self, d => d.now_ns())
    }
    fn wait_until(&mut self, t_ns: u64) {
        each!(self, d => d.wait_until(t_ns))
    }
    fn in_flight(&self) -> usize {
        each!(self, d => d.in_flight())
    }
    fn idle(&mut self) {
        each!(self, d => d.idle())
    }
    fn counters(&self) -> Option<DeviceCounters> {
        each!(self, d => d.counters())
    }
    fn cache_stats(&self) -> Option<CacheStats> {
        each!(self, d => d.cache_stats())
    }
    fn page_cache(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        each!(self, d => d.page_cache())
    }
    fn page_cache_holds(&self, offset: u64, len: u64) -> bool {
        each!(self, d => d.page_cache_holds(offset, len))
    }
    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        each!(self, d => d.extents(offset, len, out))
    }
}

/// Generic code to run on whichever concrete device a target turned out to be.
pub trait DeviceVisitor {
    type Output;
    fn visit<D: Device>(self, device: D) -> Self::Output;
}

impl AnyDevice {
    /// Hands the concrete device to `visitor`, so generic code (the engine's hot loop) is instantiated per
    /// backend instead of matching on this enum for every operation.
    pub fn visit<V: DeviceVisitor>(self, visitor: V) -> V::Output {
        match self {
            AnyDevice::Uring(d) => visitor.visit(d),
            AnyDevice::Psync(d) => visitor.visit(d),
            AnyDevice::Null(d) => visitor.visit(d),
            AnyDevice::Sim(d) => visitor.visit(d),
            AnyDevice::Cached(d) => visitor.visit(*d),
            AnyDevice::Dyn(d) => visitor.visit(d),
        }
    }
}
