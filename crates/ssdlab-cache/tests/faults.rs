//! The cache over a device that fails, step by step: a failed destage keeps its blocks dirty and fails the
//! FLUSH that needed it, a failed device flush fails the FLUSH, a failed host operation fails as the device
//! did, and nothing acknowledged is lost: once the device works again a FLUSH makes every acknowledged write
//! durable. (`model.rs`'s fault tier checks the same promises at random.)

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use common::one;
use ssdlab_cache::{BLOCK, CacheConfig, CachedDevice};
use ssdlab_core::device::{Completion, Device, Io, Op};
use ssdlab_core::target::CacheMode;
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, MemOptions, Rule, Service, Switch};

type Disk = FaultDevice<MemDevice>;

/// A 1 MiB disk with a volatile write cache, 10 µs per operation, under `rules` while `switch` is on, behind
/// a 64-frame write-back cache with one host slot of 64 KiB.
fn cached(rules: Vec<Rule>, switch: &Switch, mode: CacheMode) -> CachedDevice<Disk> {
    let disk = MemDevice::with(MemOptions {
        volatile_cache: true,
        service: Service::Fixed { ns: 10_000 },
        ..MemOptions::new(1 << 20)
    });
    let mut disk = FaultDevice::new(disk, 5);
    for rule in rules {
        disk.add(rule.when(switch));
    }
    let mut cache = CachedDevice::new(disk, "cached:faulty", CacheConfig::new(64 * BLOCK, mode));
    cache.prepare(1, 64 << 10).unwrap();
    cache
}

fn io(op: Op, block: u64, blocks: u64) -> Io {
    Io {
        op,
        offset: block * BLOCK,
        len: blocks * BLOCK,
        slot: 0,
        tag: block,
    }
}

fn write(cache: &mut CachedDevice<Disk>, block: u64, blocks: u64, fill: u8) -> Completion {
    cache.buffer_mut(0)[..(blocks * BLOCK) as usize].fill(fill);
    one(cache, io(Op::Write, block, blocks))
}

fn read(cache: &mut CachedDevice<Disk>, block: u64) -> (i64, Vec<u8>) {
    let c = one(cache, io(Op::Read, block, 1));
    (c.result, cache.buffer(0)[..BLOCK as usize].to_vec())
}

fn flush(cache: &mut CachedDevice<Disk>) -> i64 {
    one(cache, io(Op::Flush, 0, 0)).result
}

/// Whether the disk's durable contents hold `fill` over `blocks` blocks at `block`.
fn durable_is(cache: &CachedDevice<Disk>, block: u64, blocks: u64, fill: u8) -> bool {
    let range = (block * BLOCK) as usize..((block + blocks) * BLOCK) as usize;
    cache.inner().inner().durable()[range].iter().all(|&b| b == fill)
}

#[test]
fn a_failed_destage_keeps_the_blocks_dirty_fails_the_flush_and_the_next_flush_makes_them_durable() {
    for fault in [
        Fault::eio(),
        Fault::Torn { landed_bytes: BLOCK },
        Fault::Short { keep_bytes: BLOCK },
    ] {
        let on = Switch::new(true);
        let rule = Rule::new(fault.clone()).on(&[Op::Write]);
        let mut cache = cached(vec![rule], &on, CacheMode::Writeback);
        assert_eq!(
            write(&mut cache, 8, 4, 0xA1).result,
            (4 * BLOCK) as i64,
            "absorbed"
        );
        assert_eq!(
            flush(&mut cache),
            -5,
            "{fault:?}: the FLUSH fails as its destage did"
        );
        assert!(
            !cache.inner().log().is_empty(),
            "{fault:?}: the destage reached the fault"
        );
        assert_eq!(
            cache.stats().dirty_bytes,
            4 * BLOCK,
            "{fault:?}: the blocks stay dirty"
        );
        let (result, data) = read(&mut cache, 10);
        assert_eq!(result, BLOCK as i64);
        assert!(
            data.iter().all(|&b| b == 0xA1),
            "{fault:?}: reads still see the write"
        );
        assert!(
            !durable_is(&cache, 8, 4, 0xA1),
            "{fault:?}: nothing claims to be durable"
        );
        on.set(false);
        assert_eq!(
            flush(&mut cache),
            0,
            "{fault:?}: the next FLUSH retries the destage"
        );
        assert_eq!(cache.stats().dirty_bytes, 0);
        assert!(
            durable_is(&cache, 8, 4, 0xA1),
            "{fault:?}: the acknowledged write is durable"
        );
        cache.check_invariants();
    }
}

#[test]
fn a_failed_device_flush_fails_the_flush_and_the_next_flush_covers_its_writes() {
    let on = Switch::new(true);
    let mut cache = cached(
        vec![Rule::new(Fault::eio()).on(&[Op::Flush])],
        &on,
        CacheMode::Writeback,
    );
    write(&mut cache, 3, 1, 0xB2);
    assert_eq!(
        flush(&mut cache),
        -5,
        "the device's flush failed, so the FLUSH does"
    );
    assert_eq!(cache.stats().dirty_bytes, 0, "the destage itself succeeded");
    assert!(
        !durable_is(&cache, 3, 1, 0xB2),
        "and is still only in the disk's volatile cache"
    );
    on.set(false);
    assert_eq!(flush(&mut cache), 0);
    assert!(
        durable_is(&cache, 3, 1, 0xB2),
        "a FLUSH after a failed one covers the writes the failed one did not"
    );
}

#[test]
fn a_stalled_destage_delays_the_flush_without_hanging() {
    let on = Switch::new(true);
    let stall = 10_000_000_000;
    let mut cache = cached(
        vec![Rule::new(Fault::Stall { ns: stall }).on(&[Op::Write]).once()],
        &on,
        CacheMode::Writeback,
    );
    write(&mut cache, 5, 2, 0xC3);
    let c = one(&mut cache, io(Op::Flush, 0, 0));
    assert_eq!(c.result, 0);
    assert!(c.completed_ns - c.submitted_ns >= stall, "{c:?}");
    assert!(durable_is(&cache, 5, 2, 0xC3));
}

#[test]
fn host_operations_the_device_fails_fail_as_it_did_and_leave_nothing_stale() {
    // Write-through: every write goes to the disk and updates the cached copy.
    let on = Switch::new(false);
    let mut cache = cached(
        vec![Rule::new(Fault::eio()).on(&[Op::Write, Op::Read])],
        &on,
        CacheMode::Writethrough,
    );
    assert_eq!(write(&mut cache, 20, 1, 0x11).result, BLOCK as i64);
    assert_eq!(read(&mut cache, 20).1[0], 0x11, "cached by the write");
    on.set(true);
    assert_eq!(
        write(&mut cache, 20, 1, 0x22).result,
        -5,
        "the host hears the device's error"
    );
    // A read miss that fails is the host's failure too, and caches nothing.
    assert_eq!(read(&mut cache, 30).0, -5);
    on.set(false);
    let (result, data) = read(&mut cache, 20);
    assert_eq!(result, BLOCK as i64);
    assert_eq!(
        data[0],
        cache.inner().inner().data()[(20 * BLOCK) as usize],
        "after a failed write the cache says what the disk holds, not the data that failed"
    );
    cache.check_invariants();
}

#[test]
fn a_refusing_device_fails_host_operations_and_flushes_but_keeps_dirty_data() {
    let on = Switch::new(false);
    let mut cache = cached(
        vec![Rule::new(Fault::Refuse("device gone".into()))],
        &on,
        CacheMode::Writeback,
    );
    write(&mut cache, 40, 2, 0xD4);
    on.set(true);
    assert!(flush(&mut cache) < 0, "the destage could not be sent");
    assert_eq!(read(&mut cache, 50).0, -22, "a miss the device refuses fails");
    assert_eq!(read(&mut cache, 41).1[0], 0xD4, "dirty data is still served");
    assert_eq!(cache.stats().dirty_bytes, 2 * BLOCK);
    on.set(false);
    assert_eq!(flush(&mut cache), 0);
    assert!(durable_is(&cache, 40, 2, 0xD4));
}

#[test]
fn a_destage_refused_while_a_flush_waits_fails_the_flush_instead_of_stopping_the_cache() {
    // Two runs of dirty blocks destaged one at a time: the first destage goes, the second is refused while
    // the FLUSH waits for it.
    let disk = MemDevice::with(MemOptions {
        volatile_cache: true,
        service: Service::Fixed { ns: 10_000 },
        ..MemOptions::new(1 << 20)
    });
    let disk = FaultDevice::new(disk, 5).rule(
        Rule::new(Fault::Refuse("busy".into()))
            .on(&[Op::Write])
            .after(1)
            .once(),
    );
    let mut config = CacheConfig::new(64 * BLOCK, CacheMode::Writeback);
    config.destage_qd = 1;
    let mut cache = CachedDevice::new(disk, "cached:faulty", config);
    cache.prepare(1, 64 << 10).unwrap();
    write(&mut cache, 8, 1, 0xF1);
    write(&mut cache, 20, 1, 0xF2);
    assert!(
        flush(&mut cache) < 0,
        "the FLUSH fails as the refused destage did"
    );
    assert_eq!(cache.stats().dirty_bytes, BLOCK, "the refused block stays dirty");
    assert_eq!(flush(&mut cache), 0);
    assert!(durable_is(&cache, 8, 1, 0xF1) && durable_is(&cache, 20, 1, 0xF2));
    cache.check_invariants();
}

#[test]
fn a_clean_shutdown_that_cannot_destage_says_so_and_loses_nothing_it_may_still_write() {
    let on = Switch::new(true);
    let mut cache = cached(
        vec![Rule::new(Fault::eio()).on(&[Op::Write])],
        &on,
        CacheMode::Writeback,
    );
    write(&mut cache, 60, 1, 0xE5);
    assert!(cache.flush_all().is_err(), "the failed destage is reported");
    assert_eq!(cache.stats().dirty_bytes, BLOCK, "and its block is still dirty");
    on.set(false);
    cache.flush_all().unwrap();
    assert!(durable_is(&cache, 60, 1, 0xE5));
}
