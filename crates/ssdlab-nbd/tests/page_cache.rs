//! An export whose reads are its file's page cache ([`Device::page_cache`]): large reads are sent from the
//! file (sendfile) whether the device read them first or the cache held them already, they carry writes
//! completed before them, small reads still go through the device, and a file cut short under the server
//! ends the connection (its reply's header had promised the bytes) and counts the read cut short, never sends
//! other bytes. The device here is a memory disk whose every write is mirrored into a real file, so the file
//! is what the device reads, as a `file:IMG?cache=page` target's is.

mod common;

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Client, with_server};
use ssdlab_core::device::{Completion, Device, DeviceInfo, DeviceResult, Io, Op};
use ssdlab_testdev::{MemDevice, MemOptions};

const MIB: u64 = 1 << 20;

/// A memory disk and a file that holds the same bytes: every write is put in the file as it is submitted.
struct Mirrored<'a> {
    mem: MemDevice,
    file: std::fs::File,
    /// What the device answers when the server asks whether the page cache holds a range.
    holds: &'a AtomicBool,
}

impl<'a> Mirrored<'a> {
    fn new(capacity: u64, holds: &'a AtomicBool) -> Self {
        // 1 MiB transfers, so a larger read goes to the device in chunks.
        let mut mem = MemDevice::with(MemOptions {
            keep_data: true,
            max_transfer_bytes: MIB,
            ..MemOptions::new(capacity)
        });
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for b in mem.data_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(mem.data()).unwrap();
        Mirrored { mem, file, holds }
    }

    /// How many reads reached the device.
    fn device_reads(&self) -> usize {
        self.mem.log().iter().filter(|(op, _, _)| *op == Op::Read).count()
    }
}

impl Device for Mirrored<'_> {
    fn info(&self) -> &DeviceInfo {
        self.mem.info()
    }
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.mem.prepare(slots, buffer_bytes)
    }
    fn buffer(&self, slot: u32) -> &[u8] {
        self.mem.buffer(slot)
    }
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.mem.buffer_mut(slot)
    }
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        for io in ios.iter().filter(|io| io.op == Op::Write) {
            let bytes = &self.mem.buffer(io.slot)[..io.len as usize];
            self.file.write_all_at(bytes, io.offset).unwrap();
        }
        self.mem.submit(ios)
    }
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        self.mem.reap(min, deadline_ns, out)
    }
    fn now_ns(&self) -> u64 {
        self.mem.now_ns()
    }
    fn wait_until(&mut self, t_ns: u64) {
        self.mem.wait_until(t_ns);
    }
    fn in_flight(&self) -> usize {
        self.mem.in_flight()
    }
    fn page_cache(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }
    fn page_cache_holds(&self, _offset: u64, _len: u64) -> bool {
        self.holds.load(Ordering::SeqCst)
    }
}

#[test]
fn large_reads_are_the_files_bytes_from_the_cache_or_after_the_device_and_carry_completed_writes() {
    let holds = AtomicBool::new(false);
    let mut device = Mirrored::new(8 * MIB, &holds);
    let expected = device.mem.data().to_vec();
    let mut after_write = expected.clone();
    let stats = with_server(&mut device, |addr| {
        let mut client = Client::connect(addr);
        // Through the device (the cache is said to lack it), in chunks of its largest transfer.
        let (error, data) = client.read(MIB, 3 * MIB);
        assert_eq!(error, 0);
        assert!(
            data[..] == expected[MIB as usize..4 * MIB as usize],
            "read after the device"
        );
        // Straight from the cache, and a write completed before it is in it.
        holds.store(true, Ordering::SeqCst);
        let written = vec![0xA5; 256 << 10];
        assert_eq!(client.write(5 * MIB + 4096, &written, 0), 0);
        after_write[(5 * MIB + 4096) as usize..][..written.len()].copy_from_slice(&written);
        let (error, data) = client.read(4 * MIB + 100, 2 * MIB);
        assert_eq!(error, 0);
        assert!(
            data[..] == after_write[(4 * MIB + 100) as usize..][..2 * MIB as usize],
            "read from the cache"
        );
        // A small read is copied through the device as before.
        let (error, data) = client.read(5 * MIB, 4096);
        assert_eq!((error, &data[..]), (0, &after_write[5 * MIB as usize..][..4096]));
        client.disconnect();
    })
    .unwrap();
    assert_eq!((stats.reads, stats.errors), (3, 0));
    assert_eq!(stats.bytes_read, 3 * MIB + 2 * MIB + 4096);
    // The 3 MiB read in three transfers, then the small one: the 2 MiB read never reached the device.
    assert_eq!(device.device_reads(), 3 + 1);
}

#[test]
fn a_file_cut_short_under_the_server_ends_the_connection_counts_the_read_cut_short_and_others_go_on() {
    let holds = AtomicBool::new(true);
    let mut device = Mirrored::new(8 * MIB, &holds);
    let expected = device.mem.data().to_vec();
    let file = device.file.try_clone().unwrap();
    let stats = with_server(&mut device, |addr| {
        let mut client = Client::connect(addr);
        file.set_len(2 * MIB).unwrap();
        // The cache is said to hold it, the header goes, and the file has no such bytes any more: the client
        // must not get a reply with other bytes in it.
        let stream = std::os::unix::net::UnixStream::connect_addr(addr).unwrap();
        // A hang guard: the server ends the connection at once.
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mut raw = ssdlab_nbd::client::Client::handshake(stream).unwrap();
        let cut = raw.read(3 * MIB, MIB as u32);
        assert!(
            cut.is_err(),
            "a read past the file's new end was answered: {:?}",
            cut.map(|r| r.0)
        );
        // Another connection is served.
        let (error, data) = client.read(0, MIB);
        assert_eq!(error, 0);
        assert!(data[..] == expected[..MIB as usize]);
        client.disconnect();
    })
    .unwrap();
    // Cut short, not answered with an error; its bytes were never delivered.
    assert_eq!(
        (stats.errors, stats.device_errors, stats.reads_cut_short),
        (0, Some(0), Some(1))
    );
    // And it says why: the file ended inside the range.
    let said = stats.first_cut_short_error.as_deref().unwrap_or_default();
    assert!(said.contains("ended inside a range"), "{said}");
    assert_eq!((stats.reads, stats.bytes_read), (2, MIB));
}
