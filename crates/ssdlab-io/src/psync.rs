//! The pread/pwrite backend: every operation runs to completion inside `submit`, one at a time.
//!
//! It is the fallback when io_uring is unavailable (old kernels, seccomp, `io_uring_disabled`), and can be
//! chosen with `--engine psync`. Whatever queue depth is asked for, the device only ever sees one operation,
//! which the summary's `qd_mean` makes visible.

use std::os::unix::fs::FileExt;

use ssdlab_core::device::{Completion, Device, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op};

use crate::common::{
    Backing, Caching, Done, EXTENTS_PER_QUERY, RealClock, Sibling, SlotBuffers, completion_result,
    run_sync_op,
};

pub struct PsyncDevice {
    info: DeviceInfo,
    backing: Backing,
    clock: RealClock,
    slots: SlotBuffers,
}

impl PsyncDevice {
    /// The open file or block device behind it (for identity checks and ioctls on the very descriptor the
    /// safety gate judged).
    pub fn backing_file(&self) -> &std::fs::File {
        &self.backing.file
    }

    /// What a job's device on another thread is made of ([`PsyncDevice::from_sibling`]).
    pub fn sibling(&self) -> std::io::Result<Sibling> {
        Ok(Sibling {
            info: self.info.clone(),
            backing: self.backing.duplicate()?,
            clock: self.clock,
            page_cache: false,
        })
    }

    /// A device over a sibling's duplicate descriptor, timed on the same clock, with its own buffers.
    pub fn from_sibling(sibling: Sibling) -> Self {
        let mut device = PsyncDevice::new(sibling.info, sibling.backing);
        device.clock = sibling.clock;
        device
    }

    /// The device's description and its opened file, for a backend that takes the file over (an io_uring kept
    /// for many files: `UringDevice::retarget`).
    pub fn into_parts(self) -> (DeviceInfo, Backing) {
        (self.info, self.backing)
    }

    pub fn new(info: DeviceInfo, backing: Backing) -> Self {
        let align = info.memory_align_bytes as usize;
        PsyncDevice {
            info,
            backing,
            clock: RealClock::new(),
            slots: SlotBuffers::new(align),
        }
    }

    fn transfer(&mut self, io: &Io) -> i64 {
        let len = io.len as usize;
        if let Some(tail) = &self.backing.tail
            && tail.covers(io)
        {
            // SAFETY: the tail's transfer is synchronous, as pread/pwrite are below.
            let buf = unsafe { self.slots.pool.slot_mut(io.slot) };
            return tail.transfer(io, buf);
        }
        let outcome = match io.op {
            Op::Read => {
                // SAFETY: pread is synchronous: the kernel touches the buffer only during the call, and no
                // asynchronous transfer ever uses this pool.
                let buf = unsafe { self.slots.pool.slot_mut(io.slot) };
                read_full(&self.backing.file, &mut buf[..len], io.offset)
            }
            Op::Write => {
                // SAFETY: as for reads, pwrite is synchronous.
                let buf = unsafe { self.slots.pool.slot(io.slot) };
                write_full(&self.backing.file, &buf[..len], io.offset)
            }
            Op::Discard | Op::Flush => return run_sync_op(&self.backing, io),
        };
        self.backing.after_buffered_transfer(io.op, io.offset, io.len);
        completion_result(outcome)
    }
}

/// Reads until the buffer is full or end of file; returns the bytes read.
fn read_full(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn write_full(file: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<usize> {
    file.write_all_at(buf, offset)?;
    Ok(buf.len())
}

impl Device for PsyncDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.slots
            .prepare(slots, buffer_bytes, self.info.memory_align_bytes as usize);
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        self.slots.buffer(slot)
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.slots.buffer_mut(slot)
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        for io in ios {
            // The slot stays in flight until reaped, as on an asynchronous device.
            self.slots.begin(io, self.clock.now_ns())?;
            let result = self.transfer(io);
            self.slots.ready.push(Done {
                slot: io.slot,
                result,
                completed_ns: self.clock.now_ns(),
            });
        }
        Ok(ios.len())
    }

    fn reap(
        &mut self,
        _min: usize,
        _deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        Ok(self.slots.drain_ready(0, out))
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn wait_until(&mut self, t_ns: u64) {
        self.clock.sleep_until(t_ns);
    }

    fn in_flight(&self) -> usize {
        self.slots.slots.in_flight()
    }

    /// The file's own descriptor when the page cache is kept (`cache=page`): every read is a read of it.
    fn page_cache(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        (self.backing.caching == Caching::Kept).then(|| self.backing.file.as_fd())
    }

    fn page_cache_holds(&self, offset: u64, len: u64) -> bool {
        use std::os::fd::AsFd;
        self.backing.caching == Caching::Kept
            && crate::sys::page_cache_holds(self.backing.file.as_fd(), offset, len)
    }

    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        self.backing
            .extents(offset, len, EXTENTS_PER_QUERY, out)
            .map_err(|e| DeviceError::os("looking for holes (SEEK_DATA/SEEK_HOLE)", e))
    }
}
