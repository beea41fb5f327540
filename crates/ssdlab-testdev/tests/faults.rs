//! The fault wrapper over the memory device: each fault does what it says to the data, the completion and the
//! clock, is recorded, and leaves every other operation alone.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::device::{Completion, Device, Io, Op};
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, MemOptions, Rule, Switch};

fn io(op: Op, offset: u64, len: u64, slot: u32) -> Io {
    Io {
        op,
        offset,
        len,
        slot,
        tag: 10 + slot as u64,
    }
}

fn reap_all<D: Device>(device: &mut D) -> Vec<Completion> {
    let mut out = Vec::new();
    while device.in_flight() > 0 {
        device.reap(1, None, &mut out).unwrap();
    }
    out
}

/// A 1 MiB memory device, 10 µs per operation, 4 slots of 8 KiB, under `rules`.
fn faulty(rules: Vec<Rule>) -> FaultDevice<MemDevice> {
    let mut device = FaultDevice::new(MemDevice::new(1 << 20, 10_000), 7);
    for rule in rules {
        device.add(rule);
    }
    device.prepare(4, 8192).unwrap();
    device
}

fn write<D: Device>(device: &mut D, offset: u64, len: u64, fill: u8) -> Completion {
    device.buffer_mut(0)[..len as usize].fill(fill);
    device.submit(&[io(Op::Write, offset, len, 0)]).unwrap();
    reap_all(device)[0]
}

#[test]
fn an_error_fails_the_chosen_write_which_writes_nothing() {
    let mut device = faulty(vec![Rule::new(Fault::eio()).on(&[Op::Write]).after(1).once()]);
    assert_eq!(write(&mut device, 0, 4096, 1).result, 4096);
    let failed = write(&mut device, 4096, 4096, 2);
    assert_eq!(failed.result, -5);
    assert_eq!(failed.tag, 10, "the caller's tag comes back");
    assert_eq!(write(&mut device, 8192, 4096, 3).result, 4096, "once");
    let data = device.inner().data();
    assert!(data[..4096].iter().all(|&b| b == 1));
    assert!(
        data[4096..8192].iter().all(|&b| b == 0),
        "the failed write wrote nothing"
    );
    let log = device.log().entries();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].number, log[0].io.offset, &log[0].fault),
        (1, 4096, &Fault::eio())
    );
    assert_eq!(
        device.inner().log().len(),
        2,
        "the failed write never reached the device"
    );
}

#[test]
fn a_short_transfer_moves_only_its_prefix_and_says_so() {
    let mut device = faulty(vec![
        Rule::new(Fault::Short { keep_bytes: 1500 })
            .on(&[Op::Read])
            .once(),
    ]);
    write(&mut device, 0, 4096, 9);
    device.buffer_mut(1).fill(0);
    device.submit(&[io(Op::Read, 0, 4096, 1)]).unwrap();
    let c = reap_all(&mut device)[0];
    assert_eq!(c.result, 1500, "to the byte, as a read at the end of a file");
    assert!(device.buffer(1)[..1500].iter().all(|&b| b == 9));
    assert!(device.buffer(1)[1500..4096].iter().all(|&b| b == 0));
}

#[test]
fn a_torn_write_lands_in_part_and_fails() {
    let mut device = faulty(vec![
        Rule::new(Fault::Torn { landed_bytes: 2048 }).on(&[Op::Write]),
    ]);
    let c = write(&mut device, 0, 8192, 4);
    assert_eq!(c.result, -5, "the caller cannot know how much landed");
    let data = device.inner().data();
    assert!(data[..2048].iter().all(|&b| b == 4));
    assert!(data[2048..8192].iter().all(|&b| b == 0));
}

#[test]
fn a_failing_flush_makes_nothing_durable() {
    let options = MemOptions {
        volatile_cache: true,
        ..MemOptions::new(1 << 20)
    };
    let mut device =
        FaultDevice::new(MemDevice::with(options), 1).rule(Rule::new(Fault::eio()).on(&[Op::Flush]).once());
    device.prepare(1, 4096).unwrap();
    write(&mut device, 0, 4096, 6);
    device.submit(&[io(Op::Flush, 0, 0, 0)]).unwrap();
    assert_eq!(reap_all(&mut device)[0].result, -5);
    assert_eq!(
        device.inner().durable()[0],
        0,
        "the failed flush made nothing durable"
    );
    device.submit(&[io(Op::Flush, 0, 0, 0)]).unwrap();
    assert_eq!(reap_all(&mut device)[0].result, 0);
    assert_eq!(device.inner().durable()[0], 6, "the next flush did");
}

#[test]
fn a_stall_holds_one_completion_while_others_pass_it() {
    let mut device = faulty(vec![
        Rule::new(Fault::Stall {
            ns: 3_600_000_000_000,
        })
        .within(0..4096)
        .on(&[Op::Read]),
    ]);
    device
        .submit(&[io(Op::Read, 0, 4096, 0), io(Op::Read, 4096, 4096, 1)])
        .unwrap();
    let mut out = Vec::new();
    device.reap(1, None, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].slot, out[0].completed_ns), (1, 10_000));
    // A deadline is honoured while the stalled read is held.
    assert_eq!(device.reap(1, Some(1_000_000), &mut out).unwrap(), 0);
    assert_eq!(device.now_ns(), 1_000_000);
    assert_eq!(device.in_flight(), 1);
    device.reap(1, None, &mut out).unwrap();
    assert_eq!(out[1].slot, 0);
    assert_eq!(out[1].result, 4096, "a stall is slow, not wrong");
    assert_eq!(out[1].completed_ns, 3_600_000_010_000);
    assert_eq!(device.now_ns(), out[1].completed_ns);
}

#[test]
fn a_refusal_takes_nothing_of_the_batch_and_a_switch_arms_it() {
    let switch = Switch::new(false);
    let mut device = faulty(vec![
        Rule::new(Fault::Refuse("sanitize in progress".into()))
            .on(&[Op::Read])
            .when(&switch),
    ]);
    let batch = [io(Op::Write, 0, 512, 0), io(Op::Read, 0, 512, 1)];
    assert_eq!(device.submit(&batch).unwrap(), 2);
    reap_all(&mut device);
    switch.set(true);
    let err = device.submit(&batch).unwrap_err();
    assert!(err.to_string().contains("sanitize in progress"), "{err}");
    assert_eq!(device.in_flight(), 0);
    assert_eq!(
        device.inner().in_flight(),
        0,
        "the write of the refused batch was not sent"
    );
}

#[test]
fn a_busy_slot_is_refused_even_when_its_operation_never_reached_the_device() {
    let mut device = faulty(vec![Rule::new(Fault::eio())]);
    device.submit(&[io(Op::Read, 0, 512, 0)]).unwrap();
    assert!(device.submit(&[io(Op::Read, 0, 512, 0)]).is_err());
    assert_eq!(reap_all(&mut device).len(), 1);
    assert!(
        device.submit(&[io(Op::Read, 1 << 20, 512, 0)]).is_err(),
        "past the end"
    );
}

#[test]
fn chance_faults_replay_from_the_seed() {
    let run = |seed: u64| {
        let mut device = FaultDevice::new(MemDevice::new(1 << 20, 1000), seed)
            .rule(Rule::new(Fault::eio()).chance(0.1))
            .rule(Rule::new(Fault::Stall { ns: 1_000_000 }).chance(0.1));
        device.prepare(4, 4096).unwrap();
        let mut results = Vec::new();
        for round in 0..50u64 {
            let ios: Vec<Io> = (0..4)
                .map(|s| io(Op::Read, (round * 4 + s as u64) * 4096, 4096, s))
                .collect();
            device.submit(&ios).unwrap();
            results.extend(
                reap_all(&mut device)
                    .iter()
                    .map(|c| (c.slot, c.result, c.completed_ns)),
            );
        }
        (results, device.log().len())
    };
    let (a, faults) = run(11);
    assert_eq!((a.clone(), faults), run(11), "seed 11 replays");
    assert!(
        (20..=60).contains(&faults),
        "seed 11: {faults} faults on 200 reads at 10% + 9%"
    );
    assert_ne!(a, run(12).0);
}

#[test]
fn with_no_rule_the_device_below_is_unchanged() {
    let mut plain = MemDevice::new(1 << 20, 1000);
    let mut wrapped = FaultDevice::new(MemDevice::new(1 << 20, 1000), 1);
    let mut runs = Vec::new();
    for device in [&mut plain as &mut dyn Device, &mut wrapped] {
        device.prepare(4, 4096).unwrap();
        let mut seen = Vec::new();
        for round in 0..10u64 {
            let ios: Vec<Io> = (0..4)
                .map(|s| {
                    io(
                        if s % 2 == 0 { Op::Write } else { Op::Read },
                        (round + s as u64) * 512,
                        4096,
                        s,
                    )
                })
                .collect();
            device.submit(&ios).unwrap();
            let mut out = Vec::new();
            while device.in_flight() > 0 {
                device.reap(1, None, &mut out).unwrap();
            }
            seen.extend(out);
        }
        runs.push(seen);
    }
    assert_eq!(runs[0], runs[1]);
}

fn read<D: Device>(device: &mut D, offset: u64, len: u64) -> (Completion, Vec<u8>) {
    device.buffer_mut(1)[..len as usize].fill(0xEE);
    device.submit(&[io(Op::Read, offset, len, 1)]).unwrap();
    let c = reap_all(device)[0];
    (c, device.buffer(1)[..len as usize].to_vec())
}

/// Silent corruption: the completion says all went well, one byte is wrong. A corrupted write stores it (and the
/// caller's buffer comes back as it was); a corrupted read returns it over good data.
#[test]
fn a_corrupted_write_stores_a_changed_byte_and_a_corrupted_read_returns_one_both_silently() {
    let mut device = faulty(vec![
        Rule::new(Fault::Corrupt {
            byte: 100,
            mask: 0x40,
        })
        .on(&[Op::Write])
        .once(),
        Rule::new(Fault::Corrupt {
            byte: 5000,
            mask: 0x01,
        })
        .on(&[Op::Read])
        .after(1)
        .once(),
    ]);
    let done = write(&mut device, 0, 4096, 7);
    assert_eq!(done.result, 4096, "nothing in the completion says so");
    assert!(
        device.buffer(0)[..4096].iter().all(|&b| b == 7),
        "the caller's buffer is given back as it was"
    );
    let stored = &device.inner().data()[..4096];
    assert_eq!(stored[100], 7 ^ 0x40);
    assert_eq!(stored.iter().filter(|&&b| b != 7).count(), 1);
    write(&mut device, 4096, 4096, 9);
    let (c, first) = read(&mut device, 4096, 4096);
    assert_eq!((c.result, first.iter().all(|&b| b == 9)), (4096, true));
    let (c, second) = read(&mut device, 4096, 4096);
    assert_eq!(c.result, 4096);
    assert_eq!(second[5000 % 4096], 9 ^ 0x01, "the second read is corrupted");
    assert!(
        device.inner().data()[4096..8192].iter().all(|&b| b == 9),
        "the data itself is whole"
    );
    assert!(device.log().entries().iter().all(|i| i.fault.is_silent()));
}

/// A lost write completes as written and never reaches the device; a lost flush flushes nothing; a read cannot be
/// lost and fails.
#[test]
fn a_lost_write_says_it_was_written_and_is_not() {
    let mut device = faulty(vec![
        Rule::new(Fault::Lost).on(&[Op::Write]).after(1).once(),
        Rule::new(Fault::Lost).on(&[Op::Read]).once(),
    ]);
    write(&mut device, 0, 4096, 1);
    let lost = write(&mut device, 4096, 4096, 2);
    assert_eq!(lost.result, 4096, "it says it was written");
    assert!(
        device.inner().data()[4096..8192].iter().all(|&b| b == 0),
        "it was not"
    );
    assert_eq!(device.inner().log().len(), 1, "it never reached the device");
    let (c, _) = read(&mut device, 0, 4096);
    assert_eq!(c.result, -5, "a read cannot be lost");
}

/// A misdirected write lands elsewhere (its own place keeps its old data, another place is overwritten); a
/// misdirected read returns another place's data. Both complete as if all went well.
#[test]
fn a_misdirected_write_lands_elsewhere_and_a_misdirected_read_reads_elsewhere() {
    let mut device = faulty(vec![
        Rule::new(Fault::Misdirect { by_bytes: 65536 })
            .on(&[Op::Write])
            .after(1)
            .once(),
        Rule::new(Fault::Misdirect { by_bytes: 4096 })
            .on(&[Op::Read])
            .once(),
    ]);
    write(&mut device, 0, 4096, 1);
    let c = write(&mut device, 4096, 4096, 2);
    assert_eq!((c.result, c.tag), (4096, 10));
    let data = device.inner().data();
    assert!(
        data[4096..8192].iter().all(|&b| b == 0),
        "its own place keeps its old data"
    );
    assert!(
        data[69632..73728].iter().all(|&b| b == 2),
        "it landed 64 KiB further on"
    );
    let (c, got) = read(&mut device, 0, 4096);
    assert_eq!(c.result, 4096);
    assert!(
        got.iter().all(|&b| b == 0),
        "the read returned the next block's data, not its own"
    );
    // Wrapping: a write near the end lands near the start, whole, inside the device.
    let mut wrap = faulty(vec![
        Rule::new(Fault::Misdirect { by_bytes: 8192 }).on(&[Op::Write]),
    ]);
    write(&mut wrap, (1 << 20) - 4096, 4096, 5);
    let data = wrap.inner().data();
    assert_eq!(data.iter().filter(|&&b| b == 5).count(), 4096);
    assert!(data[(1 << 20) - 4096..].iter().all(|&b| b == 0));
}
