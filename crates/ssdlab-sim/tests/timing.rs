//! The virtual 840 EVO's timing against the figures of its seeds, in virtual time (exact and fast): the QD1 write
//! seed 001 measured, the spread of fresh reads across TLC page types, garbage collection that interleaves with
//! host writes instead of stopping the world, a seed that is a unit of its own on the write path, and enterprise
//! firmware that leaves its plateau when seed 004's did.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::device::{Device, Io, Op};
use ssdlab_core::rng::Rng;
use ssdlab_sim::device::SimDevice;
use ssdlab_sim::spec::SimSpec;

fn drive(target: &str) -> SimDevice {
    let spec = SimSpec::parse(target.strip_prefix("sim:").unwrap()).unwrap();
    SimDevice::new(target, &spec).unwrap()
}

/// What a run of 4 KiB random operations measured: every latency, and completions per virtual second.
struct Run {
    latencies_ns: Vec<u64>,
    per_second: Vec<u64>,
}

impl Run {
    fn mean_ns(&self) -> f64 {
        self.latencies_ns.iter().sum::<u64>() as f64 / self.latencies_ns.len() as f64
    }

    fn percentile_ns(&self, q: f64) -> u64 {
        let mut sorted = self.latencies_ns.clone();
        sorted.sort_unstable();
        sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
    }
}

/// 4 KiB random `op`s at `depth` over the first `span_bytes`, for `seconds` of virtual time.
fn random_4k(device: &mut SimDevice, op: Op, depth: u32, span_bytes: u64, seconds: u64, seed: u64) -> Run {
    device.prepare(depth, 4096).unwrap();
    let mut rng = Rng::new(seed);
    let blocks = span_bytes / 4096;
    let start = device.now_ns();
    let end = start + seconds * 1_000_000_000;
    let mut run = Run {
        latencies_ns: Vec::new(),
        per_second: vec![0; seconds as usize],
    };
    let mut free: Vec<u32> = (0..depth).collect();
    let mut done = Vec::new();
    loop {
        while device.now_ns() < end
            && let Some(slot) = free.pop()
        {
            let offset = rng.below(blocks) * 4096;
            let io = Io {
                op,
                offset,
                len: 4096,
                slot,
                tag: 0,
            };
            device.submit(&[io]).unwrap();
        }
        if device.in_flight() == 0 {
            return run;
        }
        done.clear();
        device.reap(1, None, &mut done).unwrap();
        for completion in &done {
            free.push(completion.slot);
            run.latencies_ns
                .push(completion.completed_ns - completion.submitted_ns);
            let second = ((completion.completed_ns - start) / 1_000_000_000) as usize;
            if let Some(count) = run.per_second.get_mut(second) {
                *count += 1;
            }
        }
    }
}

#[test]
fn a_qd1_4k_random_write_takes_seed_001s_43_us_with_rare_map_journal_stalls() {
    // RAPID review (seed 001), IOmeter 4K random writes at QD1 over 8 GB: 22.8K IOPS, 43.5 us average, 0.75 ms
    // maximum.
    let mut device = drive("sim:840evo-250g");
    let run = random_4k(&mut device, Op::Write, 1, 8 << 30, 60, 1);
    let mean_us = run.mean_ns() / 1e3;
    assert!(
        (43.5 * 0.9..=43.5 * 1.1).contains(&mean_us),
        "mean {mean_us:.1} us"
    );
    let max_ms = *run.latencies_ns.iter().max().unwrap() as f64 / 1e6;
    assert!((0.2..=2.0).contains(&max_ms), "max {max_ms:.2} ms");
}

#[test]
fn fresh_4k_reads_spread_with_the_tlc_page_they_sit_on() {
    let mut device = drive("sim:840evo-250g?scale=1/16&fill=100%");
    let span = device.info().capacity_bytes;
    let run = random_4k(&mut device, Op::Read, 1, span, 2, 1);
    let p50 = run.percentile_ns(0.5) as f64;
    let p99 = run.percentile_ns(0.99) as f64;
    assert!((50e3..=150e3).contains(&p50), "p50 {:.1} us", p50 / 1e3);
    assert!(
        p99 / p50 >= 1.3,
        "p99 {:.1} us over p50 {:.1} us",
        p99 / 1e3,
        p50 / 1e3
    );
    let p1 = run.percentile_ns(0.01) as f64;
    assert!(p1 < 0.8 * p50, "lower pages read faster: p1 {:.1} us", p1 / 1e3);
}

#[test]
fn a_seed_is_a_unit_of_its_own_on_the_write_path() {
    // Bad blocks and die speeds differ between units: the same random writes on a filled drive give another
    // write amplification and another pace.
    let result = |seed: u64| {
        let mut device = drive(&format!("sim:840evo-250g?scale=1/64&fill=100&seed={seed}"));
        let span = device.info().capacity_bytes;
        let run = random_4k(&mut device, Op::Write, 32, span, 120, 1);
        (
            device.device_counters().write_amplification,
            run.latencies_ns.len(),
        )
    };
    let (a, b) = (result(1), result(2));
    assert_ne!(a, b, "two units of one model behave alike, not identically");
    let ratio = a.1 as f64 / b.1 as f64;
    assert!((0.9..=1.1).contains(&ratio), "writes done: {} vs {}", a.1, b.1);
}

#[test]
fn the_full_size_steady_state_never_stops_the_world_and_differs_by_unit() {
    // The consistency test's random-write phase: a full 840 EVO 250 GB, 4 KiB random writes at QD32 for 2000 s.
    // Reviews measured 3,000-5,000 IOPS at steady state. Garbage collection is paid in slices between host
    // programs, so completions never stop for a whole second; before, whole seconds went by with none (p99.9
    // 1.41 s, maximum 1.99 s). Three units (seeds) of the model differ by a few percent.
    let mut steady_means = Vec::new();
    for seed in [1, 3, 4] {
        let mut device = drive(&format!("sim:840evo-250g?fill=100%&seed={seed}"));
        let span = device.info().capacity_bytes;
        let run = random_4k(&mut device, Op::Write, 32, span, 2000, 1);
        let silent: Vec<usize> = (60..run.per_second.len())
            .filter(|&s| run.per_second[s] == 0)
            .collect();
        assert!(
            silent.is_empty(),
            "seed {seed}: seconds without a completion: {silent:?}"
        );
        let steady = run.per_second[1600..].iter().sum::<u64>() as f64 / 400.0;
        assert!(
            (3_000.0..=5_000.0).contains(&steady),
            "seed {seed}: steady state {steady:.0} IOPS"
        );
        let p999_ms = run.percentile_ns(0.999) as f64 / 1e6;
        assert!(p999_ms <= 100.0, "seed {seed}: p99.9 {p999_ms:.1} ms");
        steady_means.push(steady);
    }
    let max = steady_means.iter().copied().fold(f64::MIN, f64::max);
    let min = steady_means.iter().copied().fold(f64::MAX, f64::min);
    let spread = max / min - 1.0;
    assert!(
        (0.01..=0.10).contains(&spread),
        "steady states {steady_means:?}: spread {spread:.3}"
    );
}

/// Writes `[from, from + len)` sequentially in 128 KiB commands, eight in flight; returns MB/s in each `window`
/// of bytes.
fn sequential_write_speeds(device: &mut SimDevice, from: u64, len: u64, window: u64) -> Vec<f64> {
    const CHUNK: u64 = 128 << 10;
    device.prepare(8, CHUNK as usize).unwrap();
    let mut speeds = Vec::new();
    let mut window_start = device.now_ns();
    let (mut next, mut acked) = (from, 0);
    let mut free: Vec<u32> = (0..8).collect();
    let mut done = Vec::new();
    while acked < len {
        while next < from + len
            && let Some(slot) = free.pop()
        {
            let io = Io {
                op: Op::Write,
                offset: next,
                len: CHUNK,
                slot,
                tag: 0,
            };
            device.submit(&[io]).unwrap();
            next += CHUNK;
        }
        done.clear();
        device.reap(1, None, &mut done).unwrap();
        for completion in &done {
            free.push(completion.slot);
            acked += CHUNK;
            if acked.is_multiple_of(window) {
                let seconds = (completion.completed_ns - window_start) as f64 / 1e9;
                speeds.push(window as f64 / seconds / 1e6);
                window_start = completion.completed_ns;
            }
        }
    }
    speeds
}

#[test]
fn turbowrite_shows_on_500_gb_and_larger_then_the_after_buffer_speed() {
    // Samsung's sheet: 520 MB/s inside TurboWrite (6, 9 and 12 GB on the 500 GB, 750 GB and 1 TB), about 420 MB/s
    // after it. At 1/8 scale the buffers hold 750, 1,125 and 1,500 MB and the dies are the same.
    const WINDOW: u64 = 256 << 20;
    for (profile, buffer_gb) in [("840evo-500g", 6), ("840evo-750g", 9), ("840evo-1t", 12)] {
        let mut device = drive(&format!("sim:{profile}?scale=1/8"));
        let buffer = buffer_gb * 1_000_000_000 / 8;
        let speeds = sequential_write_speeds(&mut device, 0, buffer + 4 * WINDOW, WINDOW);
        assert!(
            (480.0..=530.0).contains(&speeds[0]),
            "{profile} inside the buffer: {speeds:?}"
        );
        let after = (buffer / WINDOW + 1) as usize;
        for speed in &speeds[after..] {
            assert!(
                (390.0..=440.0).contains(speed),
                "{profile} after the buffer: {speeds:?}"
            );
        }
    }
}

/// The first second below `fraction` of the first second's rate that stays below it for ten seconds.
fn first_below_s(per_second: &[u64], fraction: f64) -> Option<usize> {
    let limit = *per_second.first()? as f64 * fraction;
    (1..per_second.len().saturating_sub(10))
        .find(|&s| per_second[s..s + 10].iter().all(|&n| (n as f64) < limit))
}

#[test]
fn enterprise_firmware_collects_early_and_leaves_its_plateau_when_seed_004s_did() {
    // Seed 004: the P400m holds its plateau for about 600 s of 4 KiB QD32 random writes after a sequential fill
    // ("incredibly consistent"), then turns erratic and settles near its datasheet's 26K IOPS. At 1/8 of the
    // capacity the spare area lasts an eighth as long at the same rate: 75 s, within 25%. (At full size the
    // consistency analysis finds the cliff at 620 s: see docs/sim.md's seed table.)
    let mut device = drive("sim:enterprise-mlc-400g?scale=1/8&fill=100%");
    let span = device.info().capacity_bytes;
    let run = random_4k(&mut device, Op::Write, 32, span, 300, 1);
    let left_s = first_below_s(&run.per_second, 0.8).expect("the plateau ends") as f64;
    assert!(
        (0.75 * 75.0..=1.25 * 75.0).contains(&left_s),
        "the plateau ends at {left_s} s"
    );
    let steady = run.per_second[200..].iter().sum::<u64>() as f64 / 100.0;
    assert!((20_000.0..=32_000.0).contains(&steady), "steady {steady:.0} IOPS");
}

#[test]
fn the_msata_firmware_dips_early_with_extra_spare_area_as_seed_003_saw() {
    // Seed 003: the 840 EVO mSATA 1 TB, tested over 75% of its LBAs (25% extra spare area), drops after about
    // 300 s of 4 KiB QD32 random writes, dips to about 1,000 IOPS, and evens out by 800 s. At 1/8 of the capacity
    // the same happens eight times sooner: a drop between 25 and 50 s, then a rise. The 2.5" profile, which
    // collects only at its reserve, holds its plateau until its free space runs out, far later.
    let mean = |per_second: &[u64]| per_second.iter().sum::<u64>() as f64 / per_second.len() as f64;
    let mut msata = drive("sim:840evo-msata-1t?scale=1/8&fill=75%");
    let span = msata.info().capacity_bytes / 4 * 3;
    let run = random_4k(&mut msata, Op::Write, 32, span, 200, 1);
    let drop_s = first_below_s(&run.per_second, 0.5).expect("a drop");
    assert!((25..=50).contains(&drop_s), "first drop at {drop_s} s");
    let dip = mean(&run.per_second[drop_s + 5..drop_s + 15]);
    let later = mean(&run.per_second[150..200]);
    assert!(
        later > 1.3 * dip,
        "evens out: {dip:.0} IOPS after the drop, {later:.0} later"
    );

    let mut two_and_a_half_inch = drive("sim:840evo-1t?scale=1/8&fill=75%");
    let run = random_4k(&mut two_and_a_half_inch, Op::Write, 32, span, 90, 1);
    assert_eq!(
        first_below_s(&run.per_second, 0.5),
        None,
        "the 2.5\" drive holds its plateau"
    );
}

/// Reads `[0, len)` sequentially in `request` commands at QD1; returns MB/s.
fn sequential_read_qd1(device: &mut SimDevice, len: u64, request: u64) -> f64 {
    device.prepare(1, request as usize).unwrap();
    let start = device.now_ns();
    let mut done = Vec::new();
    for i in 0..len / request {
        let io = Io {
            op: Op::Read,
            offset: i * request,
            len: request,
            slot: 0,
            tag: 0,
        };
        device.submit(&[io]).unwrap();
        done.clear();
        device.reap(1, None, &mut done).unwrap();
    }
    len as f64 / ((device.now_ns() - start) as f64 / 1e9) / 1e6
}

#[test]
fn large_reads_at_qd1_reach_the_familys_sequential_read_rating_on_every_capacity() {
    // Samsung rates every 840 EVO at 540 MB/s sequential read; a large transfer at QD1 reaches it because the
    // drive streams each unit over the link as soon as its page is read (CrystalDiskMark's SEQ1M Q1T1).
    for profile in [
        "840evo-120g",
        "840evo-250g",
        "840evo-500g",
        "840evo-750g",
        "840evo-1t",
    ] {
        for request in [128u64 << 10, 1 << 20, 16 << 20] {
            let mut device = drive(&format!("sim:{profile}?scale=1/64&fill=100%"));
            let mb_s = sequential_read_qd1(&mut device, 512 << 20, request);
            // 128 KiB at QD1 pays one unit's latency per 32 units: Tom's Hardware's 2013 chart of the family's
            // 128 KB sequential reads starts its axis at 300 MB/s and has the 120 GB under 400 at QD1.
            let (low, high) = if request < 1 << 20 {
                (300.0, 450.0)
            } else {
                (540.0 * 0.85, 540.0 * 1.15)
            };
            assert!(
                (low..=high).contains(&mb_s),
                "{profile}, {} KiB reads at QD1: {mb_s:.0} MB/s",
                request >> 10
            );
        }
    }
}

/// How many of `len` bytes written sequentially from `from` went at the SLC buffer's speed: the windows of 8 MiB
/// above 400 MB/s (the first may be slower while a block move the idle time began finishes).
fn bytes_at_buffer_speed(device: &mut SimDevice, from: u64, len: u64) -> u64 {
    const WINDOW: u64 = 8 << 20;
    let speeds = sequential_write_speeds(device, from, len, WINDOW);
    speeds.iter().filter(|&&mb_s| mb_s > 400.0).count() as u64 * WINDOW
}

#[test]
fn turbowrite_empties_while_idle_in_the_time_anandtech_measured() {
    // AnandTech's 840 EVO review (July 2013, TurboWrite): the buffer is written out to TLC "in a matter of 15 - 30
    // seconds" of idle time, and new writes stream into what was emptied. A burst that fills the 250 GB's 3 GB
    // buffer, an idle gap, a second burst: the second runs at buffer speed for what the gap emptied.
    let buffer = 3_000_000_000u64 / 16;
    let second_burst = |gap_s: u64| {
        let mut device = drive("sim:840evo-250g?scale=1/16");
        let first = bytes_at_buffer_speed(&mut device, 0, buffer + (64 << 20));
        assert!(
            first as f64 >= 0.9 * buffer as f64,
            "the first burst fills the buffer: {first}"
        );
        let idle_until = device.now_ns() + gap_s * 1_000_000_000;
        device.wait_until(idle_until);
        bytes_at_buffer_speed(&mut device, 1 << 30, buffer) as f64 / buffer as f64
    };
    let emptied: Vec<(u64, f64)> = [1, 7, 12, 17, 22, 30]
        .into_iter()
        .map(|gap| (gap, second_burst(gap)))
        .collect();
    let share = |gap: u64| emptied.iter().find(|e| e.0 == gap).unwrap().1;
    // Nothing moves in the first seconds of quiet, then the buffer empties at an even pace: about a third after
    // 7 s, well over half after 12 s, not yet all after 17 s, and all of it by 22 s (AnandTech: 15-30 s).
    assert!(share(1) < 0.1, "{emptied:?}");
    assert!((0.2..=0.45).contains(&share(7)), "{emptied:?}");
    assert!((0.45..=0.75).contains(&share(12)), "{emptied:?}");
    assert!(share(17) < 0.95, "not yet empty after 17 s: {emptied:?}");
    assert!(share(22) > 0.95 && share(30) > 0.95, "{emptied:?}");
}

#[test]
fn random_reads_at_qd32_reach_each_capacitys_rating() {
    // Samsung's sheet: 94K 4 KiB random reads at QD32 on the 120 GB (eight dies), 97K on the 250 GB, 98K from
    // 500 GB up; Tom's Hardware (2013): every capacity past 90K at QD32 and at 10K at QD1.
    for (profile, rated) in [
        ("840evo-120g", 94_000.0),
        ("840evo-250g", 97_000.0),
        ("840evo-500g", 98_000.0),
        ("840evo-1t", 98_000.0),
    ] {
        let mut device = drive(&format!("sim:{profile}?scale=1/64&fill=100%"));
        let span = device.info().capacity_bytes;
        let deep = random_4k(&mut device, Op::Read, 32, span, 2, 1);
        let iops = deep.latencies_ns.len() as f64 / 2.0;
        assert!(
            (rated * 0.85..=rated * 1.15).contains(&iops),
            "{profile}: {iops:.0} IOPS at QD32, rated {rated}"
        );
        let one = random_4k(&mut device, Op::Read, 1, span, 2, 2);
        let one_iops = one.latencies_ns.len() as f64 / 2.0;
        assert!(
            (10_000.0..=12_500.0).contains(&one_iops),
            "{profile}: {one_iops:.0} IOPS at QD1 on the drive alone"
        );
    }
}
