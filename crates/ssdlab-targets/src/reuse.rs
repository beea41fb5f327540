//! One io_uring per thread across many files: a scan of a hundred thousand small files must not set up and tear
//! down a ring (and register its buffers) for every one of them.
//!
//! A file opened with the psync engine (which sets up nothing) is handed to this thread's idle ring, pointed at
//! the file in place (`UringDevice::retarget`); when the caller drops the device, its ring goes back to this
//! thread to wait for the next file. A ring is only ever used by the thread that set it up (io_uring's single
//! issuer), so the idle ring is kept per thread. It opens nothing and judges nothing: the file was opened through
//! the safety gate like any other target.

use std::cell::RefCell;

use ssdlab_core::device::{Completion, Device, DeviceInfo, DeviceResult, Extent, Io};
use ssdlab_core::schema::{CacheStats, DeviceCounters};
use ssdlab_io::psync::PsyncDevice;
use ssdlab_io::uring::UringDevice;

use crate::AnyDevice;

thread_local! {
    /// This thread's ring between files.
    static IDLE: RefCell<Option<UringDevice>> = const { RefCell::new(None) };
}

/// `device` (a target opened with the psync engine) on this thread's kept io_uring, or on a new one that is kept
/// once dropped; any other device is returned as it is, and a file io_uring cannot take stays with psync.
pub fn on_this_threads_ring(device: AnyDevice) -> Box<dyn Device + Send> {
    let AnyDevice::Psync(psync) = device else {
        return Box::new(device);
    };
    let (mut info, mut backing) = psync.into_parts();
    if let Some(mut ring) = IDLE.with(|idle| idle.borrow_mut().take()) {
        match ring.retarget(info, backing) {
            Ok(()) => return Box::new(KeptRing(Some(ring))),
            Err(refused) => (info, backing) = (refused.info, refused.backing),
        }
    }
    match UringDevice::new(info, backing) {
        Ok(ring) => Box::new(KeptRing(Some(ring))),
        Err(refused) => Box::new(PsyncDevice::new(refused.info, refused.backing)),
    }
}

/// An io_uring device that goes back to its thread's idle slot when dropped, with nothing in flight.
struct KeptRing(Option<UringDevice>);

impl KeptRing {
    fn ring(&self) -> &UringDevice {
        self.0.as_ref().expect("held until dropped")
    }

    fn ring_mut(&mut self) -> &mut UringDevice {
        self.0.as_mut().expect("held until dropped")
    }
}

impl Drop for KeptRing {
    fn drop(&mut self) {
        let Some(ring) = self.0.take() else { return };
        if ring.in_flight() > 0 {
            // A ring left busy (a caller that gave up mid-read) is dropped, which waits for it.
            return;
        }
        // The thread's slot may be gone (a device dropped while the thread exits): then the ring is dropped.
        let _ = IDLE.try_with(|idle| {
            let mut idle = idle.borrow_mut();
            if idle.is_none() {
                *idle = Some(ring);
            }
        });
    }
}

impl Device for KeptRing {
    fn info(&self) -> &DeviceInfo {
        self.ring().info()
    }
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.ring_mut().prepare(slots, buffer_bytes)
    }
    fn buffer(&self, slot: u32) -> &[u8] {
        self.ring().buffer(slot)
    }
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.ring_mut().buffer_mut(slot)
    }
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        self.ring_mut().submit(ios)
    }
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        self.ring_mut().reap(min, deadline_ns, out)
    }
    fn now_ns(&self) -> u64 {
        self.ring().now_ns()
    }
    fn wait_until(&mut self, t_ns: u64) {
        self.ring_mut().wait_until(t_ns);
    }
    fn in_flight(&self) -> usize {
        self.ring().in_flight()
    }
    fn idle(&mut self) {
        self.ring_mut().idle();
    }
    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        self.ring_mut().extents(offset, len, out)
    }
    fn counters(&self) -> Option<DeviceCounters> {
        self.ring().counters()
    }
    fn cache_stats(&self) -> Option<CacheStats> {
        self.ring().cache_stats()
    }
}
