//! The NBD server over a device that fails: every failure reaches the client as the errno the protocol has for
//! it, on the request that failed, and the server keeps serving that client and every other one (the next
//! request works). The server runs in-process on the test thread over an abstract Unix socket; the clients are
//! plain fixed-newstyle clients on their own threads, with generous socket timeouts only as a hang guard.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use std::time::Duration;

use common::{Client, with_server};
use ssdlab_cache::{CacheConfig, CachedDevice};
use ssdlab_core::device::Op;
use ssdlab_core::target::CacheMode;
use ssdlab_nbd::protocol;
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, MemOptions, Rule, Service, Switch};

const KIB: u64 = 1024;

/// A 1 MiB memory disk with a volatile cache, 10 µs per operation and 64 KiB transfers (so larger requests go
/// in chunks), under the faults of `rules`.
fn disk(rules: Vec<Rule>) -> FaultDevice<MemDevice> {
    let mem = MemDevice::with(MemOptions {
        max_transfer_bytes: 64 * KIB,
        volatile_cache: true,
        service: Service::Fixed { ns: 10_000 },
        ..MemOptions::new(1 << 20)
    });
    let mut device = FaultDevice::new(mem, 3);
    for rule in rules {
        device.add(rule);
    }
    device
}

#[test]
fn every_failure_reaches_the_client_as_its_errno_and_the_next_request_works() {
    let fua_flush_fails = Switch::new(false);
    let refusing = Switch::new(false);
    let mut device = disk(vec![
        Rule::new(Fault::eio()).on(&[Op::Read]).within(4 * KIB..8 * KIB),
        Rule::new(Fault::eio())
            .on(&[Op::Write])
            .within(64 * KIB..68 * KIB)
            .once(),
        Rule::new(Fault::eio()).on(&[Op::Flush]).once(),
        Rule::new(Fault::eio()).on(&[Op::Flush]).when(&fua_flush_fails),
        Rule::new(Fault::Error(28))
            .on(&[Op::Write])
            .within(128 * KIB..132 * KIB),
        Rule::new(Fault::Short { keep_bytes: 512 })
            .on(&[Op::Read])
            .within(256 * KIB..260 * KIB),
        Rule::new(Fault::Torn { landed_bytes: 1024 })
            .on(&[Op::Write])
            .within(300 * KIB..304 * KIB),
        Rule::new(Fault::Refuse("gone for a moment".into())).when(&refusing),
        // A block inside a 192 KiB read that the server sends in 64 KiB chunks.
        Rule::new(Fault::eio())
            .on(&[Op::Read])
            .within(520 * KIB..524 * KIB),
        // The head block of an unaligned write, read before the write (read-modify-write).
        Rule::new(Fault::eio())
            .on(&[Op::Read])
            .within(700 * KIB..701 * KIB),
    ]);
    let log = device.log();
    let stats = with_server(&mut device, |addr| {
        let mut c = Client::connect(addr);
        assert_eq!(c.size, 1 << 20);
        let block = vec![0x5a; 4096];
        assert_eq!(c.write(0, &block, 0), 0);
        assert_eq!(c.read(0, 4096), (0, block.clone()));
        // A read the device fails: EIO, and the connection goes on.
        assert_eq!(c.read(4 * KIB, 4096).0, protocol::EIO);
        assert_eq!(c.read(0, 4096), (0, block.clone()), "the next request works");
        // A write that fails once, then works.
        assert_eq!(c.write(64 * KIB, &block, 0), protocol::EIO);
        assert_eq!(c.write(64 * KIB, &block, 0), 0);
        // A FLUSH that fails once, then works.
        assert_eq!(c.flush(), protocol::EIO);
        assert_eq!(c.flush(), 0);
        // Out of space is said as such.
        assert_eq!(c.write(128 * KIB, &block, 0), protocol::ENOSPC);
        // A short read and a torn write are errors, never partial successes.
        assert_eq!(c.read(256 * KIB, 4096).0, protocol::EIO);
        assert_eq!(c.write(300 * KIB, &block, 0), protocol::EIO);
        // A FUA write whose flush fails is not acknowledged.
        fua_flush_fails.set(true);
        assert_eq!(c.write(400 * KIB, &block, protocol::CMD_FLAG_FUA), protocol::EIO);
        fua_flush_fails.set(false);
        assert_eq!(c.write(400 * KIB, &block, protocol::CMD_FLAG_FUA), 0);
        // A device that refuses work outright.
        refusing.set(true);
        assert_eq!(c.read(0, 4096).0, protocol::EIO);
        refusing.set(false);
        assert_eq!(c.read(0, 4096), (0, block.clone()));
        // A chunk in the middle of a long read fails: the whole read fails, no partial data.
        assert_eq!(c.read(480 * KIB, 192 * KIB).0, protocol::EIO);
        // An unaligned write whose edge block cannot be read first is not made.
        assert_eq!(c.write(700 * KIB + 100, &[1; 300], 0), protocol::EIO);
        // Another client, and this one, are served as before.
        let mut other = Client::connect(addr);
        assert_eq!(other.read(0, 4096), (0, block.clone()));
        assert_eq!(
            c.write(800 * KIB + 7, &[9; 10], 0),
            0,
            "an unaligned write that can be made"
        );
        assert_eq!(other.read(800 * KIB, 4096).1[7..17], [9; 10]);
        // A read past the end is the client's mistake, not the device's.
        assert_eq!(other.read(1 << 20, 4096).0, protocol::EINVAL);
        other.disconnect();
        c.disconnect();
    })
    .expect("the server ran to its stop and flushed");
    assert_eq!(stats.errors, 11, "{stats:?}");
    assert_eq!(
        stats.device_errors,
        Some(10),
        "the device's failures, apart: {stats:?}"
    );
    // Every fault asked for was injected, on the request the client heard about.
    let kinds: Vec<(Op, u64)> = log.entries().iter().map(|f| (f.io.op, f.io.offset)).collect();
    assert!(kinds.contains(&(Op::Read, 4 * KIB)), "{kinds:?}");
    assert!(
        kinds.contains(&(Op::Read, 480 * KIB)),
        "the 64 KiB chunk holding 520 KiB: {kinds:?}"
    );
    assert!(kinds.contains(&(Op::Read, 700 * KIB)), "{kinds:?}");
    assert_eq!(device.inner().data()[..4096], [0x5a; 4096]);
    assert_eq!(
        device.inner().durable()[64 * KIB as usize..68 * KIB as usize],
        [0x5a; 4096],
        "the final flush made the retried write durable"
    );
    assert!(
        device.inner().data()[700 * KIB as usize..701 * KIB as usize]
            .iter()
            .all(|&b| b == 0),
        "the refused unaligned write wrote nothing"
    );
}

#[test]
fn a_stalled_request_is_answered_correctly_and_other_clients_are_served() {
    // A read of block 0 stalls for a second of the device's clock.
    let mut device = disk(vec![
        Rule::new(Fault::Stall { ns: 1_000_000_000 })
            .on(&[Op::Read])
            .within(0..4096)
            .once(),
    ]);
    with_server(&mut device, |addr| {
        let mut slow = Client::connect(addr);
        let mut quick = Client::connect(addr);
        let cookie = slow.send(protocol::CMD_READ, 0, 0, 4096, &[]);
        for i in 1..20u64 {
            assert_eq!(quick.write(i * 4096, &[i as u8; 4096], 0), 0);
            assert_eq!(quick.read(i * 4096, 4096), (0, vec![i as u8; 4096]));
        }
        assert_eq!(
            slow.reply(cookie, 4096),
            (0, vec![0; 4096]),
            "a stall is slow, not wrong"
        );
        quick.disconnect();
        slow.disconnect();
    })
    .unwrap();
}

#[test]
fn a_final_flush_that_fails_is_the_servers_error() {
    let stopping = Switch::new(false);
    let mut device = disk(vec![Rule::new(Fault::eio()).on(&[Op::Flush]).when(&stopping)]);
    let result = with_server(&mut device, |addr| {
        let mut c = Client::connect(addr);
        assert_eq!(c.write(0, &[1; 4096], 0), 0);
        c.disconnect();
        stopping.set(true);
    });
    match result {
        Err(e) => assert!(e.to_string().contains("final flush"), "{e}"),
        Ok(stats) => panic!("a failed final flush was not reported: {stats:?}"),
    }
}

#[test]
fn a_cached_export_fails_the_flush_whose_destage_failed_and_the_next_flush_makes_the_write_durable() {
    let failing = Switch::new(true);
    let disk = disk(vec![Rule::new(Fault::eio()).on(&[Op::Write]).when(&failing)]);
    let mut cache = CachedDevice::new(
        disk,
        "cached:faulty",
        CacheConfig::new(1 << 20, CacheMode::Writeback),
    );
    with_server(&mut cache, |addr| {
        let mut c = Client::connect(addr);
        assert_eq!(c.write(8192, &[0x77; 4096], 0), 0, "absorbed by the cache");
        assert_eq!(c.flush(), protocol::EIO, "its destage failed, so the FLUSH does");
        assert_eq!(
            c.read(8192, 4096),
            (0, vec![0x77; 4096]),
            "the write is still there"
        );
        failing.set(false);
        assert_eq!(c.flush(), 0);
        c.disconnect();
    })
    .unwrap();
    assert_eq!(cache.inner().inner().durable()[8192..12288], [0x77; 4096]);
}

/// Sends a read of `first` (offset, length) and a 16 MiB read of the start together, on a 32 MiB memory disk,
/// from a client that negotiated no block sizes (so reads of up to 32 MiB go); returns the first read's NBD error
/// and asserts the 16 MiB read is answered (a hang fails after 10 s, not 60).
fn a_big_read_behind(first: (u64, u32)) -> u32 {
    let mut device = MemDevice::with(MemOptions::new(32 << 20));
    let mut first_error = None;
    with_server(&mut device, |addr| {
        let mut client = Client::connect_waiting(addr, Duration::from_secs(10));
        let small = client.send(protocol::CMD_READ, 0, first.0, first.1, &[]);
        let big = client.send(protocol::CMD_READ, 0, 0, 16 << 20, &[]);
        let (error, _) = client.reply(small, first.1 as usize);
        first_error = Some(error);
        assert_eq!(client.reply(big, 16 << 20).0, 0, "the read behind was answered");
        client.disconnect();
    })
    .unwrap();
    first_error.expect("the client ran")
}

#[test]
fn a_request_held_back_by_unsent_replies_is_taken_once_they_are_sent() {
    // The 16 MiB read waits while the 4 KiB read's reply is owed (8 MiB of backlog at most), and must be taken as
    // soon as that reply has left, though nothing else is in flight to wake the server.
    assert_eq!(a_big_read_behind((4096, 4096)), 0);
}

#[test]
fn a_request_behind_one_answered_at_once_is_taken() {
    // A read past the end is answered at once (EINVAL) while the requests are parsed; the 16 MiB read behind it
    // must not wait for a backlog that only that unsent answer made.
    assert_ne!(a_big_read_behind((64 << 20, 4096)), 0);
}
