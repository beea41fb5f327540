//! What the cache's promises cost: a FLUSH is proportional to the dirty data, not to the device, and the
//! bookkeeping stays within 2% of the cache's memory.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use common::{counting, one};
use ssdlab_cache::{BLOCK, CacheConfig, CachedDevice};
use ssdlab_core::device::{Device, Io, Op};
use ssdlab_core::target::CacheMode;

#[test]
fn a_flush_with_one_dirty_block_on_a_64_gib_device_is_one_write_and_one_device_flush() {
    let mut cache = CachedDevice::new(
        counting(64 << 30),
        "cached:counting",
        CacheConfig::new(64 << 20, CacheMode::Writeback),
    );
    cache.prepare(1, 4096).unwrap();
    let write = Io {
        op: Op::Write,
        offset: 40 << 30,
        len: 4096,
        slot: 0,
        tag: 1,
    };
    let c = one(&mut cache, write);
    assert_eq!(c.result, 4096);
    assert!(
        cache.inner().log().is_empty(),
        "the write was absorbed: {:?}",
        cache.inner().log()
    );
    assert!(
        c.completed_ns - c.submitted_ns < 10_000,
        "acknowledged from memory, not after the device's 50 µs"
    );
    let flush = Io {
        op: Op::Flush,
        offset: 0,
        len: 0,
        slot: 0,
        tag: 2,
    };
    let c = one(&mut cache, flush);
    assert_eq!(c.result, 0);
    assert_eq!(
        cache.inner().log(),
        vec![(Op::Write, 40 << 30, 4096), (Op::Flush, 0, 0)],
        "one destage write, then the device's own flush"
    );
    // The destage (50 µs) and the device flush (50 µs) one after the other, plus the cache's own work.
    assert!(
        c.completed_ns - c.submitted_ns < 1_000_000,
        "{} ns",
        c.completed_ns - c.submitted_ns
    );
    assert_eq!(cache.stats().dirty_bytes, 0);
}

#[test]
fn neighbouring_dirty_blocks_are_destaged_as_one_large_write() {
    let mut cache = CachedDevice::new(
        counting(1 << 30),
        "cached:counting",
        CacheConfig::new(64 << 20, CacheMode::Writeback),
    );
    cache.prepare(1, 4096).unwrap();
    // 64 blocks written backwards, so only the destage's LBA order makes them one run.
    for i in (0..64u64).rev() {
        one(
            &mut cache,
            Io {
                op: Op::Write,
                offset: (1 << 20) + i * BLOCK,
                len: 4096,
                slot: 0,
                tag: i,
            },
        );
    }
    one(
        &mut cache,
        Io {
            op: Op::Flush,
            offset: 0,
            len: 0,
            slot: 0,
            tag: 99,
        },
    );
    assert_eq!(
        cache.inner().log(),
        vec![(Op::Write, 1 << 20, 64 * BLOCK), (Op::Flush, 0, 0)]
    );
}

#[test]
fn the_bookkeeping_takes_at_most_two_percent_of_the_cache() {
    for size in [16u64 << 20, 256 << 20, 1 << 30] {
        let cache = CachedDevice::new(
            counting(1 << 40),
            "cached:counting",
            CacheConfig::new(size, CacheMode::Writeback),
        );
        let stats = cache.stats();
        let share = stats.metadata_bytes as f64 / stats.cache_bytes as f64;
        assert!(
            share <= 0.02,
            "{size} bytes: metadata {} bytes = {:.2}%",
            stats.metadata_bytes,
            share * 100.0
        );
    }
}
