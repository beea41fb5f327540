//! The device interface: submit and reap, shaped like io_uring, with the device's own clock.
//!
//! Every target ssdlab measures (a block device, a file, the null device, later the virtual SSD, a cache and an
//! NBD export) implements [`Device`]. The caller prepares a fixed number of *slots*; each slot owns one aligned
//! buffer and can carry one operation at a time. The caller fills a slot's buffer, submits operations naming
//! their slots, and reaps completions that carry the submit and completion times measured on the device's clock.
//!
//! The clock is real (monotonic nanoseconds) or virtual (a simulator's event time). Waiting is a device
//! operation ([`Device::wait_until`]) so a simulator always knows when the host is idle; on a real device it
//! sleeps.

use serde::{Deserialize, Serialize};

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Read,
    Write,
    /// Discard (TRIM/UNMAP) the byte range: BLKDISCARD on a block device, a punched hole in a file.
    Discard,
    /// Make every completed write durable (fdatasync / FLUSH).
    Flush,
}

/// One operation. `slot` names the buffer (for reads and writes) and the in-flight entry; a slot may carry
/// only one operation at a time. `tag` is the caller's, returned unchanged in the completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub slot: u32,
    pub tag: u64,
}

/// The outcome of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub slot: u32,
    pub tag: u64,
    pub op: Op,
    /// Bytes transferred, or a negative errno.
    pub result: i64,
    /// The device clock when the operation was handed to the device.
    pub submitted_ns: u64,
    /// The device clock when its completion was observed.
    pub completed_ns: u64,
}

impl Completion {
    /// The errno of a failed operation, if it failed.
    pub fn errno(&self) -> Option<i32> {
        (self.result < 0).then(|| (-self.result) as i32)
    }
}

/// Whether the device's clock is the host's or a simulator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// CLOCK_MONOTONIC nanoseconds since the device was opened.
    Real,
    /// Simulated nanoseconds since the device was created.
    Virtual,
}

/// What kind of target a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    BlockDevice,
    File,
    Null,
    Sim,
}

/// What a device is and what it can do. Everything here is known when the device is opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceInfo {
    /// The target as the user wrote it.
    pub target: String,
    pub kind: TargetKind,
    /// Vendor and model (from sysfs), or a description for files, null and sim.
    pub model: String,
    /// The device's exact size. It may end inside its last logical block (a file of any length): that block is
    /// still addressed whole ([`DeviceInfo::addressable_bytes`]), its bytes past the capacity read as zeroes
    /// and a write to them is dropped, so every byte of the capacity can be read and written.
    pub capacity_bytes: u64,
    /// Offsets and lengths must be multiples of this.
    pub logical_block_bytes: u32,
    pub physical_block_bytes: u32,
    /// Buffers must be aligned to this in memory.
    pub memory_align_bytes: u32,
    /// The largest single transfer the device accepts (larger requests are split by the kernel).
    /// u64::MAX in memory is no limit, written as `null` (JSON readers cannot hold 2^64 - 1 exactly).
    #[serde(with = "crate::device::no_limit", default = "crate::device::no_limit::none")]
    #[schemars(with = "Option<u64>")]
    pub max_transfer_bytes: u64,
    pub discard_supported: bool,
    /// 0 when discard is unsupported.
    #[serde(with = "crate::device::no_limit", default = "crate::device::no_limit::none")]
    #[schemars(with = "Option<u64>")]
    pub discard_max_bytes: u64,
    pub rotational: bool,
    pub clock: ClockKind,
    /// How I/O is issued, e.g. "io_uring (registered buffers and file)" or "pread/pwrite".
    pub backend: String,
    /// Whether the page cache is bypassed (O_DIRECT).
    pub direct_io: bool,
    /// Things the user should know about how this device is driven (fallbacks taken and why).
    pub notes: Vec<String>,
    /// What the kernel says of the drive behind a block device (serial, firmware, write cache); empty for files,
    /// null and virtual drives. A PTS report must carry them.
    #[serde(default, skip_serializing_if = "DriveFacts::is_empty")]
    pub drive: DriveFacts,
}

/// What the kernel reports about a drive in sysfs, each when it reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DriveFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
    /// The kernel's view of the drive's volatile write cache: "write back" (a cache that FLUSH must empty) or
    /// "write through" (none, or one the drive keeps safe), as `queue/write_cache` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<String>,
}

impl DriveFacts {
    pub fn is_empty(&self) -> bool {
        self.serial.is_none() && self.firmware.is_none() && self.write_cache.is_none()
    }
}

impl DeviceInfo {
    /// Where addressing ends: the capacity rounded up to a whole logical block (see `capacity_bytes`).
    pub fn addressable_bytes(&self) -> u64 {
        let block = u64::from(self.logical_block_bytes.max(1));
        self.capacity_bytes.div_ceil(block).saturating_mul(block)
    }

    /// What a result is about when it is not one opened device (files, a virtual data set, a fleet, a set of
    /// drives): named, sized and described, on a virtual clock when it is virtual, with the usual 512/4096-byte
    /// blocks and no discard. Callers set what differs (`direct_io`, `max_transfer_bytes`) with struct update.
    pub fn subject(
        target: String,
        kind: TargetKind,
        model: String,
        capacity_bytes: u64,
        backend: String,
    ) -> Self {
        DeviceInfo {
            target,
            kind,
            model,
            capacity_bytes,
            logical_block_bytes: 512,
            physical_block_bytes: 4096,
            memory_align_bytes: 4096,
            max_transfer_bytes: 0,
            discard_supported: false,
            discard_max_bytes: 0,
            rotational: false,
            clock: if kind == TargetKind::Sim {
                ClockKind::Virtual
            } else {
                ClockKind::Real
            },
            backend,
            direct_io: false,
            notes: vec![],
            drive: DriveFacts::default(),
        }
    }
}

/// Why a device operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    // The cause is printed in the message, so it is not also the error's source (a field named `source`
    // would be): anyhow's `{:#}` would print it twice.
    #[error("{what}: {cause}")]
    Os { what: String, cause: std::io::Error },
    #[error("{0}")]
    Invalid(String),
    #[error("{0} is not supported by this device")]
    Unsupported(&'static str),
}

impl DeviceError {
    pub fn os(what: impl Into<String>, cause: std::io::Error) -> Self {
        DeviceError::Os {
            what: what.into(),
            cause,
        }
    }

    /// The errno a completion carries (negated) for this refusal: the system's own, EIO when it has none,
    /// EINVAL for an invalid request and EOPNOTSUPP for an unsupported one (Linux's numbers).
    pub fn errno(&self) -> i32 {
        const EIO: i32 = 5;
        const EINVAL: i32 = 22;
        const EOPNOTSUPP: i32 = 95;
        match self {
            DeviceError::Os { cause, .. } => cause.raw_os_error().unwrap_or(EIO),
            DeviceError::Invalid(_) => EINVAL,
            DeviceError::Unsupported(_) => EOPNOTSUPP,
        }
    }
}

pub type DeviceResult<T> = Result<T, DeviceError>;

impl Io {
    /// The checks every device makes before accepting an operation into a free slot: it lies within the
    /// device's addressable bytes ([`DeviceInfo::addressable_bytes`]), and a transfer fits the slot's buffer.
    pub fn check_bounds(&self, addressable_bytes: u64, buffer_bytes: usize) -> DeviceResult<()> {
        if self
            .offset
            .checked_add(self.len)
            .is_none_or(|end| end > addressable_bytes)
        {
            return Err(DeviceError::Invalid(format!(
                "I/O at {} + {} beyond the device",
                self.offset, self.len
            )));
        }
        if matches!(self.op, Op::Read | Op::Write) && self.len as usize > buffer_bytes {
            return Err(DeviceError::Invalid(format!(
                "a {}-byte transfer does not fit the {buffer_bytes}-byte slot buffer",
                self.len
            )));
        }
        Ok(())
    }
}

/// What one stretch of a device holds, as far as the device can tell without reading it (the answer to NBD's
/// `base:allocation` query). `allocated: true, reads_zero: false` is always a truthful answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len_bytes: u64,
    /// False only where the device knows nothing is stored (a hole in a file, an unmapped LBA).
    pub allocated: bool,
    /// True only where the device knows every byte reads as zero.
    pub reads_zero: bool,
}

impl Extent {
    /// The answer that claims nothing: allocated, contents unknown.
    pub fn data(len_bytes: u64) -> Self {
        Extent {
            len_bytes,
            allocated: true,
            reads_zero: false,
        }
    }

    /// A hole: nothing stored, reads as zeroes.
    pub fn hole(len_bytes: u64) -> Self {
        Extent {
            len_bytes,
            allocated: false,
            reads_zero: true,
        }
    }

    /// Appends `next` to `out`, merging it into the last extent when their states are equal.
    pub fn push_merged(out: &mut Vec<Extent>, next: Extent) {
        if next.len_bytes == 0 {
            return;
        }
        match out.last_mut() {
            Some(last) if last.allocated == next.allocated && last.reads_zero == next.reads_zero => {
                last.len_bytes += next.len_bytes;
            }
            _ => out.push(next),
        }
    }
}

/// Rewrites `extents` (which describe the device from `start` on) so that every byte inside `ranges` is
/// reported as allocated with unknown contents, appending the result to `out`. `ranges` must be sorted and
/// disjoint. A layer that holds data its lower device does not know about (a cache's blocks) uses this so that
/// data is never reported as a hole or as zeroes.
pub fn mark_allocated(
    extents: &[Extent],
    start: u64,
    ranges: &[std::ops::Range<u64>],
    out: &mut Vec<Extent>,
) {
    let mut ranges = ranges.iter().peekable();
    let mut pos = start;
    for e in extents {
        let end = pos + e.len_bytes;
        let mut at = pos;
        while at < end {
            while ranges.next_if(|r| r.end <= at).is_some() {}
            let piece_end = match ranges.peek() {
                Some(r) if r.start <= at => {
                    let q = r.end.min(end);
                    Extent::push_merged(out, Extent::data(q - at));
                    at = q;
                    continue;
                }
                Some(r) if r.start < end => r.start,
                _ => end,
            };
            Extent::push_merged(
                out,
                Extent {
                    len_bytes: piece_end - at,
                    ..*e
                },
            );
            at = piece_end;
        }
        pos = end;
    }
}

/// A block device in the io_uring shape. See the module documentation.
pub trait Device {
    fn info(&self) -> &DeviceInfo;

    /// Prepares `slots` in-flight slots, each with a buffer of `buffer_bytes` aligned to
    /// `info().memory_align_bytes`. Any earlier slots are released; nothing may be in flight.
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()>;

    /// The buffer of a slot that is not in flight, to fill before a write or read after a read.
    fn buffer(&self, slot: u32) -> &[u8];
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8];

    /// Queues and submits operations; returns how many were accepted (the rest may be retried after a reap).
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize>;

    /// Waits until at least `min` completions are available, nothing is left in flight, or the device clock
    /// reaches `deadline_ns`; then appends every available completion to `out` and returns how many it appended.
    /// Submitted operations are guaranteed to be on their way to the device once this returns.
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize>;

    /// The device's clock in nanoseconds.
    fn now_ns(&self) -> u64;

    /// Keeps the host idle until the device clock reads `t_ns` (sleeps on a real device; advances virtual time
    /// and lets background work happen on a simulated one).
    fn wait_until(&mut self, t_ns: u64);

    /// Operations submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// The host has nothing in flight and nothing to do for now: a chance for background work that returns
    /// within a few milliseconds (a cache destages). Devices without background work do nothing.
    fn idle(&mut self) {}

    /// Appends extents describing `[offset, offset + len)` in order, starting at `offset`. They may cover less
    /// than `len` (never more, never nothing), so a caller asks again from where they end. A device that cannot
    /// tell reports the whole range as allocated with unknown contents, which is always true. Called between
    /// operations, with others possibly in flight: it answers for what has completed.
    fn extents(&mut self, _offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        out.push(Extent::data(len));
        Ok(())
    }

    /// NAND-level counters, cumulative since the device was opened, if the device knows them.
    fn counters(&self) -> Option<crate::schema::DeviceCounters> {
        None
    }

    /// The DRAM cache's cumulative statistics, if this device is a cache.
    fn cache_stats(&self) -> Option<crate::schema::CacheStats> {
        None
    }

    /// The descriptor whose page cache this device's reads are, when they are exactly that: a file opened
    /// without O_DIRECT and kept in the page cache (`file:PATH?cache=page`), every byte below the capacity at
    /// the same offset in the file, with nothing of the device's own in between (no cache, no fault
    /// injection, no virtual drive). A reader may then take completed writes' data straight from the page
    /// cache (an NBD export sends it with sendfile, without a copy through a slot's buffer). None otherwise,
    /// which is always safe.
    fn page_cache(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Whether a read of `[offset, offset + len)` would find every byte in [`Device::page_cache`] now, without
    /// waiting for the medium. False where the device has no page cache or cannot tell, which is always safe.
    fn page_cache_holds(&self, _offset: u64, _len: u64) -> bool {
        false
    }

    /// Submits one operation with nothing else in flight and waits for it (the methods' occasional direct reads,
    /// discards and flushes; never the runner's hot loop). Returns its completion, whatever its result.
    fn complete(&mut self, io: Io) -> DeviceResult<Completion> {
        debug_assert_eq!(self.in_flight(), 0, "complete() waits for one operation alone");
        if self.submit(&[io])? != 1 {
            return Err(DeviceError::Invalid(format!(
                "the device did not accept {:?}",
                io.op
            )));
        }
        let mut done = Vec::with_capacity(1);
        while done.is_empty() {
            self.reap(1, None, &mut done)?;
        }
        Ok(done[0])
    }
}

/// A boxed device is a device: a test hands a whole command a device it built (a fault-injecting device over a
/// file) through the app's target port, behind `dyn Device`.
impl<D: Device + ?Sized> Device for Box<D> {
    fn info(&self) -> &DeviceInfo {
        (**self).info()
    }
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        (**self).prepare(slots, buffer_bytes)
    }
    fn buffer(&self, slot: u32) -> &[u8] {
        (**self).buffer(slot)
    }
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        (**self).buffer_mut(slot)
    }
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        (**self).submit(ios)
    }
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        (**self).reap(min, deadline_ns, out)
    }
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn wait_until(&mut self, t_ns: u64) {
        (**self).wait_until(t_ns)
    }
    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }
    fn idle(&mut self) {
        (**self).idle()
    }
    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        (**self).extents(offset, len, out)
    }
    fn counters(&self) -> Option<crate::schema::DeviceCounters> {
        (**self).counters()
    }
    fn cache_stats(&self) -> Option<crate::schema::CacheStats> {
        (**self).cache_stats()
    }
    fn page_cache(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        (**self).page_cache()
    }
    fn page_cache_holds(&self, offset: u64, len: u64) -> bool {
        (**self).page_cache_holds(offset, len)
    }
    fn complete(&mut self, io: Io) -> DeviceResult<Completion> {
        (**self).complete(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_ranges_become_data_and_the_rest_keeps_its_state() {
        // From 1000: a 3000-byte hole, 1000 bytes of data, a 4000-byte hole.
        let inner = [Extent::hole(3000), Extent::data(1000), Extent::hole(4000)];
        let mut out = Vec::new();
        mark_allocated(&inner, 1000, &[1500..2000, 3500..4500, 7000..9000], &mut out);
        assert_eq!(
            out,
            vec![
                Extent::hole(500),
                Extent::data(500),
                Extent::hole(1500),
                Extent::data(1500),
                Extent::hole(2000),
                Extent::data(2000),
            ]
        );
        assert_eq!(out.iter().map(|e| e.len_bytes).sum::<u64>(), 8000);
        let mut plain = Vec::new();
        mark_allocated(&inner, 1000, &[], &mut plain);
        assert_eq!(plain, inner);
    }
}

/// A byte limit whose largest value means "none": written as `null` rather than 18446744073709551615, which a
/// JSON reader holding numbers as doubles (JavaScript, jq) cannot represent, and read back from either.
pub mod no_limit {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        match *value {
            u64::MAX => serializer.serialize_none(),
            v => serializer.serialize_u64(v),
        }
    }

    /// A field left out is no limit, as the schema (an optional integer) allows.
    pub fn none() -> u64 {
        u64::MAX
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod no_limit_tests {
    use super::*;

    #[test]
    fn no_limit_is_written_as_null_and_read_back_from_null_or_a_number() {
        let info = DeviceInfo {
            max_transfer_bytes: u64::MAX,
            discard_max_bytes: 1 << 30,
            ..DeviceInfo::subject(
                "null".into(),
                TargetKind::Null,
                "null".into(),
                1 << 20,
                "null".into(),
            )
        };
        let json = serde_json::to_value(&info).unwrap();
        assert!(json["max_transfer_bytes"].is_null(), "{json}");
        assert_eq!(json["discard_max_bytes"], 1u64 << 30);
        let back: DeviceInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back, info);
        // A result written before: the number itself.
        let mut old = serde_json::to_value(&info).unwrap();
        old["max_transfer_bytes"] = serde_json::json!(u64::MAX);
        assert_eq!(
            serde_json::from_value::<DeviceInfo>(old)
                .unwrap()
                .max_transfer_bytes,
            u64::MAX
        );
    }
}

/// One job's device, not yet made (fio's numjobs, a thread per job): a sibling of an opened device, sharing its
/// target and its clock, made on the job's own thread since an io_uring belongs to the thread that set it up.
pub trait JobDevice: Send {
    /// Makes this job's device on the calling thread and runs `run` on it.
    fn with_device<R: JobRun>(self, run: R) -> DeviceResult<R::Output>;
}

/// What runs on a job's device, whatever its concrete type (so the hot loop is compiled per backend).
pub trait JobRun {
    type Output;
    fn on<D: Device>(self, device: D) -> Self::Output;
}

/// Many drives read by one thread through one queue, each with at most one read in flight: how a fan-out over
/// more drives than CPUs keeps every drive reading without a thread per drive (a thousand threads on two CPUs
/// measure the scheduler, and start and stop seconds apart). Made on the thread that reads through it.
pub trait DriveSet {
    /// The drives, in the order the set was made with.
    fn infos(&self) -> &[DeviceInfo];
    /// Queues a read of `len` bytes at `offset` on drive `drive`, which has no read in flight; its submit time is
    /// taken now.
    fn read(&mut self, drive: usize, offset: u64, len: u64) -> DeviceResult<()>;
    /// Hands the queued reads to the kernel and waits until at least one read has completed; appends every
    /// completion there is, each timed once per batch as it is collected.
    fn wait(&mut self, out: &mut Vec<DriveCompletion>) -> DeviceResult<()>;
    /// Reads queued or in flight.
    fn in_flight(&self) -> usize;
    fn now_ns(&self) -> u64;
}

/// One read of a [`DriveSet`], completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriveCompletion {
    pub drive: usize,
    /// Bytes read, or a negative errno.
    pub result: i64,
    pub submitted_ns: u64,
    pub completed_ns: u64,
}
