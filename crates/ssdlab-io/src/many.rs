//! Many drives read through one io_uring by one thread ([`ssdlab_core::device::DriveSet`]), at most one read in
//! flight per drive: a fan-out over more drives than CPUs gives each worker thread a share of the drives instead
//! of a thread each. Each drive is a sibling of the device the gate opened (a duplicate of its claimed
//! descriptor), read with the descriptor's own caching (O_DIRECT, or the page cache), into a buffer of its own.
//!
//! Timestamps: the submit time as each read is queued (it is handed to the kernel at the next wait, with the
//! others queued since), the completion time once per collected batch. It only reads, and it never frees a
//! buffer the kernel may still be filling: dropping it first waits for every read in flight.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::{IoUring, opcode, types};
use ssdlab_core::device::{DeviceError, DeviceInfo, DeviceResult, DriveCompletion, DriveSet, Io, Op};

use crate::buffers::BufferPool;
use crate::common::{Backing, RealClock, Sibling, Slots};

/// The drives of one worker, read through one ring.
pub struct ManyReads {
    infos: Vec<DeviceInfo>,
    /// Kept open for as long as reads may use them.
    backings: Vec<Backing>,
    ring: IoUring,
    buffers: BufferPool,
    block_bytes: usize,
    /// A slot a drive: its read in flight and when it was submitted.
    slots: Slots,
    clock: RealClock,
}

impl ManyReads {
    /// A set over `siblings`, reading at most `block_bytes` at a time from each. Refused (the caller reads such
    /// drives another way) for a drive whose length ends inside its last logical block, which only the device's
    /// own tail path reads, and for an empty set.
    pub fn new(siblings: Vec<Sibling>, block_bytes: usize) -> io::Result<Self> {
        if siblings.is_empty() || siblings.iter().any(|s| s.backing.tail.is_some()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a drive set needs drives that end on a whole logical block",
            ));
        }
        let drives = siblings.len();
        let entries = (drives as u32).next_power_of_two().clamp(8, 32_768);
        let (ring, _) = crate::uring::new_ring(entries, true)?;
        let align = siblings
            .iter()
            .map(|s| s.info.memory_align_bytes as usize)
            .max()
            .unwrap_or(4096)
            .max(4096);
        // All drives of a set share one clock, the first's: their figures are compared with each other.
        let clock = siblings[0].clock;
        let mut infos = Vec::with_capacity(drives);
        let mut backings = Vec::with_capacity(drives);
        for sibling in siblings {
            infos.push(sibling.info);
            backings.push(sibling.backing);
        }
        Ok(ManyReads {
            infos,
            backings,
            ring,
            buffers: BufferPool::new(drives as u32, block_bytes, align),
            block_bytes,
            slots: Slots::new(drives as u32),
            clock,
        })
    }

    /// Collects every completion the ring holds, timed now.
    fn harvest(&mut self, out: &mut Vec<DriveCompletion>) -> usize {
        let now = self.clock.now_ns();
        let mut got = 0;
        for cqe in self.ring.completion() {
            let done = self
                .slots
                .finish(cqe.user_data() as u32, i64::from(cqe.result()), now);
            out.push(DriveCompletion {
                drive: done.slot as usize,
                result: done.result,
                submitted_ns: done.submitted_ns,
                completed_ns: now,
            });
            got += 1;
        }
        got
    }
}

impl DriveSet for ManyReads {
    fn infos(&self) -> &[DeviceInfo] {
        &self.infos
    }

    fn read(&mut self, drive: usize, offset: u64, len: u64) -> DeviceResult<()> {
        let io = Io {
            op: Op::Read,
            offset,
            len,
            slot: drive as u32,
            tag: 0,
        };
        // The drive is in the set, has no read in flight, and the read fits its buffer.
        self.slots.check(&io, self.block_bytes)?;
        let entry = opcode::Read::new(
            types::Fd(self.backings[drive].file.as_raw_fd()),
            self.buffers.ptr(drive as u32),
            len as u32,
        )
        .offset(offset)
        .build()
        .user_data(drive as u64);
        // SAFETY: the buffer is the drive's own slot, which lives as long as `self` and is not read or written
        // by us until its completion is collected (the slot stays busy until then; drop waits for it), and the
        // descriptor is kept open in `backings` as long as `self`.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // The ring holds an entry per drive: a full queue means a read already queued for each.
            return Err(DeviceError::Invalid("the drive set's queue is full".into()));
        }
        self.slots.start(&io, self.clock.now_ns());
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<DriveCompletion>) -> DeviceResult<()> {
        if self.slots.in_flight() == 0 {
            return Ok(());
        }
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(DeviceError::os("io_uring enter", e)),
            }
            if self.harvest(out) > 0 {
                return Ok(());
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
}

impl Drop for ManyReads {
    fn drop(&mut self) {
        // The kernel may still be filling buffers: they are freed only once every read is back.
        let mut done = Vec::new();
        while self.slots.in_flight() > 0 {
            done.clear();
            if self.wait(&mut done).is_err() {
                // A ring that cannot be entered any more: leak the buffers rather than free them under the kernel.
                std::mem::forget(std::mem::replace(&mut self.buffers, BufferPool::new(1, 1, 4096)));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drive_of_a_set_reads_its_own_bytes_one_read_each_at_most() {
        let dir = std::env::temp_dir().join(format!("ssdlab-many-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut siblings = Vec::new();
        for d in 0..5u8 {
            let path = dir.join(format!("d{d}"));
            std::fs::write(&path, vec![d; 64 << 10]).unwrap();
            let target = format!("file:{}", path.display());
            let spec = ssdlab_core::target::TargetSpec::parse(&target).unwrap();
            let request = crate::open::OpenRequest {
                engine: crate::Engine::IoUring,
                ..crate::open::OpenRequest::default()
            };
            match crate::open::open_target(&target, &spec, request).unwrap().device {
                crate::open::RealDevice::Uring(device) => siblings.push(device.sibling().unwrap()),
                _ => panic!("io_uring is unavailable on this kernel"),
            }
        }
        let mut set = ManyReads::new(siblings, 4096).unwrap();
        assert_eq!(set.infos().len(), 5);
        for d in 0..5 {
            set.read(d, 4096 * d as u64, 4096).unwrap();
        }
        assert!(
            set.read(2, 0, 4096).is_err(),
            "a second read in flight on one drive"
        );
        assert!(set.read(1, 0, 8192).is_err(), "a read larger than the buffer");
        let mut seen = Vec::new();
        while set.in_flight() > 0 {
            set.wait(&mut seen).unwrap();
        }
        seen.sort_by_key(|c| c.drive);
        assert_eq!(seen.len(), 5);
        for (d, c) in seen.iter().enumerate() {
            assert_eq!((c.drive, c.result), (d, 4096));
            assert!(c.completed_ns >= c.submitted_ns);
            // SAFETY: the read is complete, so the kernel is done with the drive's buffer.
            let buf = unsafe { std::slice::from_raw_parts(set.buffers.ptr(d as u32), 4096) };
            assert!(buf.iter().all(|&b| b == d as u8), "drive {d}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
