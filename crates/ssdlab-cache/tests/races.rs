//! Races the random model test reaches too rarely to prove, each played out step by step.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_cache::{BLOCK, CacheConfig, CachedDevice};
use ssdlab_core::device::{Completion, Device, Io, Op};
use ssdlab_core::target::CacheMode;
use ssdlab_testdev::{MemDevice, MemOptions, ReadsAt, Service, SlowReads};

/// A memory disk with 512-byte sectors that answers a read with the data it held when the read arrived, after
/// 100 ms for a read of more than one block and 10 µs for anything else: the slow read completes last.
fn disk(capacity: u64) -> MemDevice {
    MemDevice::with(MemOptions {
        name: "scripted disk".into(),
        max_transfer_bytes: 1 << 20,
        discard: false,
        service: Service::Fixed { ns: 10_000 },
        reads_at: ReadsAt::Arrival,
        slow_reads: Some(SlowReads {
            longer_than_bytes: BLOCK,
            one_in: 1,
            min_ns: 100_000_000,
            spread_ns: 0,
            one_at_a_time: false,
        }),
        ..MemOptions::new(capacity)
    })
}

fn io(op: Op, block: u64, blocks: u64, slot: u32) -> Io {
    Io {
        op,
        offset: block * BLOCK,
        len: blocks * BLOCK,
        slot,
        tag: 0,
    }
}

#[track_caller]
fn wait_for(cache: &mut CachedDevice<MemDevice>, slot: u32) -> Completion {
    let mut out = Vec::new();
    loop {
        assert!(cache.in_flight() > 0, "slot {slot} has nothing in flight");
        cache.reap(1, None, &mut out).unwrap();
        assert!(
            out.iter().all(|c| c.slot == slot),
            "an operation completed out of turn: {out:?}"
        );
        if let Some(c) = out.iter().find(|c| c.slot == slot) {
            return *c;
        }
    }
}

#[test]
fn a_slow_miss_returns_the_cached_data_it_overlapped_even_if_that_block_was_destaged_and_evicted_meanwhile() {
    // A cache of 64 frames: a single dirty block is left alone for a while (destaging starts at 4).
    let config = CacheConfig::new(64 * BLOCK, CacheMode::Writeback);
    let mut cache = CachedDevice::new(disk(1 << 20), "cached:disk", config);
    cache.prepare(2, 2 * BLOCK as usize).unwrap();
    // 1. Block 10 is written (absorbed, dirty): the disk still holds zeroes there.
    cache.buffer_mut(0)[..BLOCK as usize].fill(0xAB);
    cache.submit(&[io(Op::Write, 10, 1, 0)]).unwrap();
    assert_eq!(wait_for(&mut cache, 0).result, BLOCK as i64);
    assert_eq!(cache.stats().writes_absorbed, 1);
    assert_eq!(cache.stats().destage_writes, 0, "block 10 is only in the cache");
    // 2. A two-block read of 10..12 misses (11 is not cached); the disk answers it from what it holds now.
    cache.submit(&[io(Op::Read, 10, 2, 0)]).unwrap();
    // 3. Meanwhile a FLUSH destages block 10, which becomes clean.
    cache.submit(&[io(Op::Flush, 0, 0, 1)]).unwrap();
    assert_eq!(wait_for(&mut cache, 1).result, 0);
    assert_eq!(cache.stats().destage_writes, 1, "block 10 was destaged");
    // 4. 64 hot blocks are read twice each: the last ones are admitted over block 10, the least recently used.
    for block in (20..84).flat_map(|b| [b, b]) {
        cache.submit(&[io(Op::Read, block, 1, 1)]).unwrap();
        wait_for(&mut cache, 1);
    }
    let stats = cache.stats();
    assert!(stats.admissions >= 64 && stats.evictions >= 1, "{stats:?}");
    // 5. The slow read completes: block 10 is no longer cached, and the disk's answer predates the destage.
    let c = wait_for(&mut cache, 0);
    assert_eq!(c.result, 2 * BLOCK as i64);
    assert!(
        cache.buffer(0)[..BLOCK as usize].iter().all(|&b| b == 0xAB),
        "the read returned data older than a write acknowledged before it was issued"
    );
}

#[test]
fn a_miss_is_not_admitted_across_a_write_that_went_around_the_cache() {
    // Read-only mode: every write goes to the disk and only updates copies already cached.
    let config = CacheConfig::new(64 * BLOCK, CacheMode::Readonly);
    let mut cache = CachedDevice::new(disk(1 << 20), "cached:disk", config);
    cache.prepare(2, 2 * BLOCK as usize).unwrap();
    // Block 30 is seen once (not admitted), then a slow two-block read of 30..32 is sent (seen twice: hot).
    cache.submit(&[io(Op::Read, 30, 1, 1)]).unwrap();
    wait_for(&mut cache, 1);
    cache.submit(&[io(Op::Read, 30, 2, 0)]).unwrap();
    // While it is at the disk, a write to block 30 goes around the cache and completes.
    cache.buffer_mut(1)[..BLOCK as usize].fill(0xCD);
    cache.submit(&[io(Op::Write, 30, 1, 1)]).unwrap();
    assert_eq!(wait_for(&mut cache, 1).result, BLOCK as i64);
    // The slow read may return either value (it overlapped the write), but must not cache the old one.
    wait_for(&mut cache, 0);
    cache.submit(&[io(Op::Read, 30, 1, 1)]).unwrap();
    wait_for(&mut cache, 1);
    assert!(
        cache.buffer(1)[..BLOCK as usize].iter().all(|&b| b == 0xCD),
        "a read after the write completed returned the data the write replaced"
    );
}

/// Writes `fill` over `blocks` whole blocks at `block` from slot 1 and waits for it.
fn write(cache: &mut CachedDevice<MemDevice>, block: u64, blocks: u64, fill: u8) {
    cache.buffer_mut(1)[..(blocks * BLOCK) as usize].fill(fill);
    cache.submit(&[io(Op::Write, block, blocks, 1)]).unwrap();
    assert_eq!(wait_for(cache, 1).result, (blocks * BLOCK) as i64);
}

/// Reads one block on slot 1 and returns its bytes.
fn read(cache: &mut CachedDevice<MemDevice>, block: u64) -> Vec<u8> {
    cache.submit(&[io(Op::Read, block, 1, 1)]).unwrap();
    assert_eq!(wait_for(cache, 1).result, BLOCK as i64);
    cache.buffer(1)[..BLOCK as usize].to_vec()
}

fn flush(cache: &mut CachedDevice<MemDevice>) {
    cache.submit(&[io(Op::Flush, 0, 0, 1)]).unwrap();
    assert_eq!(wait_for(cache, 1).result, 0);
}

/// Absorbs 80 whole-block writes elsewhere and flushes them: their frames push every older clean frame out,
/// whatever its frequency (a write is never refused a frame for being cold).
fn evict_with_writes(cache: &mut CachedDevice<MemDevice>) {
    let evictions = cache.stats().evictions;
    for b in 100..180 {
        write(cache, b, 1, 0xEE);
    }
    flush(cache);
    assert!(cache.stats().evictions > evictions, "{:?}", cache.stats());
}

/// After the slow miss of block 10 completed: a read of block 10 returns `current`, and a 512-byte write into
/// it followed by a FLUSH leaves the rest of the block as `current` on the disk (a stale clean frame would be
/// merged into and destaged over it).
#[track_caller]
fn expect_block_10_is(cache: &mut CachedDevice<MemDevice>, current: u8) {
    let data = read(cache, 10);
    assert!(
        data.iter().all(|&b| b == current),
        "a read after the slow miss returned {:#x}, not the flushed {current:#x}: the miss cached older data",
        data[0]
    );
    cache.buffer_mut(1)[..512].fill(0x11);
    cache
        .submit(&[Io {
            op: Op::Write,
            offset: 10 * BLOCK,
            len: 512,
            slot: 1,
            tag: 0,
        }])
        .unwrap();
    assert_eq!(wait_for(cache, 1).result, 512);
    flush(cache);
    let disk = &cache.inner().data()[(10 * BLOCK) as usize..(11 * BLOCK) as usize];
    assert!(disk[..512].iter().all(|&b| b == 0x11), "the partial write landed");
    assert!(
        disk[512..].iter().all(|&b| b == current),
        "the partial write's destage put {:#x} over the rest of the flushed {current:#x}",
        disk[512]
    );
}

/// The slow two-block read of 10..12 on slot 0, sent after block 10 was read once (so it is hot when the read
/// completes: seen twice).
fn send_slow_miss(cache: &mut CachedDevice<MemDevice>) {
    cache.submit(&[io(Op::Read, 10, 2, 0)]).unwrap();
}

#[test]
fn a_slow_miss_does_not_cache_data_older_than_a_write_absorbed_destaged_and_evicted_while_it_was_at_the_disk()
{
    let config = CacheConfig::new(64 * BLOCK, CacheMode::Writeback);
    let mut cache = CachedDevice::new(disk(1 << 20), "cached:disk", config);
    cache.prepare(2, 2 * BLOCK as usize).unwrap();
    // Block 10 is seen once (a miss, not admitted), then the slow read takes the disk's zeroes.
    read(&mut cache, 10);
    send_slow_miss(&mut cache);
    // Meanwhile block 10 is written (absorbed), flushed (destaged: the disk holds 0xAB) and evicted.
    write(&mut cache, 10, 1, 0xAB);
    flush(&mut cache);
    evict_with_writes(&mut cache);
    assert!(!cache.hot_blocks().contains(&10), "block 10 was evicted");
    // The slow read returns either value (it overlapped the write); what it leaves behind must be current.
    assert_eq!(wait_for(&mut cache, 0).result, 2 * BLOCK as i64);
    expect_block_10_is(&mut cache, 0xAB);
    cache.check_invariants();
}

#[test]
fn a_slow_miss_does_not_cache_its_copy_of_a_dirty_block_rewritten_destaged_and_evicted_while_it_was_at_the_disk()
 {
    let config = CacheConfig::new(64 * BLOCK, CacheMode::Writeback);
    let mut cache = CachedDevice::new(disk(1 << 20), "cached:disk", config);
    cache.prepare(2, 2 * BLOCK as usize).unwrap();
    // Block 10 is dirty (0xAA) and read once (a hit) when the slow read is sent: the read keeps a copy of it.
    write(&mut cache, 10, 1, 0xAA);
    read(&mut cache, 10);
    send_slow_miss(&mut cache);
    // Meanwhile block 10 is written again (0xBB), flushed and evicted: the read's copy is now old.
    write(&mut cache, 10, 1, 0xBB);
    flush(&mut cache);
    evict_with_writes(&mut cache);
    assert!(!cache.hot_blocks().contains(&10), "block 10 was evicted");
    assert_eq!(wait_for(&mut cache, 0).result, 2 * BLOCK as i64);
    expect_block_10_is(&mut cache, 0xBB);
    cache.check_invariants();
}

#[test]
fn a_miss_sent_while_a_write_around_of_its_block_is_at_the_disk_is_not_admitted() {
    // Read-only mode: writes go to the disk.
    let config = CacheConfig::new(64 * BLOCK, CacheMode::Readonly);
    let mut cache = CachedDevice::new(disk(1 << 20), "cached:disk", config);
    cache.prepare(2, 2 * BLOCK as usize).unwrap();
    read(&mut cache, 10);
    // The write reaches the disk first but lands 10 µs later; the slow read sent right after it takes the
    // disk's data as it is now (zeroes), as a device may serve requests that overlap in time in any order.
    cache.buffer_mut(1)[..BLOCK as usize].fill(0xCD);
    cache.submit(&[io(Op::Write, 10, 1, 1)]).unwrap();
    send_slow_miss(&mut cache);
    assert_eq!(wait_for(&mut cache, 1).result, BLOCK as i64);
    assert_eq!(wait_for(&mut cache, 0).result, 2 * BLOCK as i64);
    let data = read(&mut cache, 10);
    assert!(
        data.iter().all(|&b| b == 0xCD),
        "a read after the write completed returned {:#x}: the overlapping miss cached the data it replaced",
        data[0]
    );
}
