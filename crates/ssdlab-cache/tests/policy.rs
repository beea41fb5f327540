//! The cache's service policies on a counting device: pass-through while the host is busy (entered and left,
//! even with a low limit), and the warm start from a hot map (what is read in, and what is kept when the cache
//! closes before it was ever used).

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use std::sync::{Arc, Mutex};

use common::counting;
use ssdlab_cache::{BLOCK, CacheConfig, CachedDevice};
use ssdlab_core::device::{Completion, Device, Io, Op};
use ssdlab_core::target::CacheMode;
use ssdlab_testdev::MemDevice;

fn one(cache: &mut CachedDevice<MemDevice>, op: Op, block: u64) -> Completion {
    let io = Io {
        op,
        offset: block * BLOCK,
        len: if op == Op::Flush { 0 } else { BLOCK },
        slot: 0,
        tag: 0,
    };
    common::one(cache, io)
}

#[test]
fn a_busy_host_sends_writes_around_and_a_quiet_one_gets_the_cache_back_even_at_a_low_limit() {
    let mut config = CacheConfig::new(16 << 20, CacheMode::Writeback);
    config.cpu_limit_percent = 5;
    config.load_check_ns = 1;
    let mut cache = CachedDevice::new(counting(1 << 30), "cached:counting", config);
    let load = Arc::new(Mutex::new(0.5));
    let probe_load = Arc::clone(&load);
    cache.set_load_probe(Box::new(move || Some(*probe_load.lock().unwrap())));
    cache.prepare(1, 1 << 20).unwrap();
    // 50% busy against a 5% limit: writes go to the device.
    for b in 0..10 {
        one(&mut cache, Op::Write, b * 7);
    }
    let busy = cache.stats();
    assert_eq!((busy.writes_absorbed, busy.writes_around), (0, 10), "{busy:?}");
    assert_eq!(busy.pass_through_episodes, 1);
    // 3% is below the limit but not 10 points below it: the exit is at half a low limit, 2.5%.
    *load.lock().unwrap() = 0.03;
    one(&mut cache, Op::Write, 100);
    assert_eq!(cache.stats().writes_around, 11);
    *load.lock().unwrap() = 0.01;
    for b in 200..210 {
        one(&mut cache, Op::Write, b * 7);
    }
    let quiet = cache.stats();
    assert!(quiet.writes_absorbed >= 9, "{quiet:?}");
    assert!(
        quiet.pass_through_ns > 0 && quiet.pass_through_ops == 11,
        "{quiet:?}"
    );
    // Everything reaches the device at the next FLUSH, passed through or not.
    assert_eq!(one(&mut cache, Op::Flush, 0).result, 0);
    assert_eq!(cache.stats().dirty_bytes, 0);
}

#[test]
fn a_warm_start_reads_the_hot_blocks_in_and_an_unused_cache_keeps_its_list() {
    let saved: Arc<Mutex<Option<Vec<u64>>>> = Arc::default();
    // Never prepared: closing hands back the list it was given, not an empty one.
    let mut idle = CachedDevice::new(
        counting(1 << 30),
        "cached:counting",
        CacheConfig::new(16 << 20, CacheMode::Writeback),
    );
    idle.warm_at_start(vec![9, 3, 5]);
    let keep = Arc::clone(&saved);
    idle.on_close(Box::new(move |blocks| *keep.lock().unwrap() = Some(blocks)));
    drop(idle);
    assert_eq!(saved.lock().unwrap().take(), Some(vec![9, 3, 5]));

    // Prepared: the blocks are read in coalesced runs, then served from memory.
    let mut cache = CachedDevice::new(
        counting(1 << 30),
        "cached:counting",
        CacheConfig::new(16 << 20, CacheMode::Writeback),
    );
    // Duplicates and blocks beyond the device are dropped.
    cache.warm_at_start(vec![12, 10, 11, 40, 10, (1 << 30) / BLOCK + 5]);
    cache.prepare(1, 1 << 20).unwrap();
    let reads: Vec<(Op, u64, u64)> = cache.inner().log().to_vec();
    assert_eq!(
        reads,
        vec![(Op::Read, 10 * BLOCK, 3 * BLOCK), (Op::Read, 40 * BLOCK, BLOCK)],
        "one read per run of neighbours"
    );
    assert_eq!(cache.stats().warmed_bytes, 4 * BLOCK);
    for b in [10, 11, 12, 40] {
        one(&mut cache, Op::Read, b);
    }
    assert_eq!(cache.stats().read_hits, 4);
    // The order of recency survives: the hot list comes back most recent first.
    assert_eq!(cache.hot_blocks(), vec![40, 12, 11, 10]);
}
