//! What the cache's test files share: a device that keeps no data and counts what reaches it, and one
//! operation waited for.
#![allow(dead_code)]

use ssdlab_cache::CachedDevice;
use ssdlab_core::device::{Completion, Device, Io};
use ssdlab_testdev::{MemDevice, MemOptions, Service};

/// A huge device that keeps no data and logs what reaches it: 4 KiB blocks, 1 MiB transfers, every operation
/// takes 50 µs.
pub fn counting(capacity: u64) -> MemDevice {
    MemDevice::with(MemOptions {
        name: "counting".into(),
        logical_block_bytes: 4096,
        max_transfer_bytes: 1 << 20,
        keep_data: false,
        service: Service::Fixed { ns: 50_000 },
        ..MemOptions::new(capacity)
    })
}

/// Submits one operation to a cache and waits for its completion.
pub fn one<D: Device>(cache: &mut CachedDevice<D>, io: Io) -> Completion {
    cache.submit(&[io]).unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        cache.reap(1, None, &mut out).unwrap();
    }
    out[0]
}
