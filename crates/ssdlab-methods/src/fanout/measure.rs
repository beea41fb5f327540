//! Reading on every drive of a fan-out: random reads at queue depth 1, each drive's latencies kept in a
//! histogram overall and per second. Two ways: independent loads (one worker thread per drive, all at once, as
//! shards in one box are loaded together), or synchronized queries (one read to every drive at the same instant,
//! waiting for all, as a distributed search does), which measures the query latency itself.
//!
//! It only reads, through [`Device`]; opening the drives (read-only) is the caller's job. It never writes.

use std::sync::atomic::{AtomicBool, Ordering};

use ssdlab_core::Histogram;
use ssdlab_core::device::{ClockKind, Completion, Device, DeviceError, Io, Op};
use ssdlab_core::rng::Rng;

use crate::session::MethodError;

/// The read every drive makes, over and over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLoad {
    pub block_bytes: u64,
    /// How long to read, on each drive's clock.
    pub runtime_ns: u64,
    pub seed: u64,
}

/// One drive's reads.
#[derive(Debug, Clone)]
pub struct DriveReads {
    pub histogram: Histogram,
    /// (seconds since the start, median ns, p99 ns) per second.
    pub per_second: Vec<(f64, u64, u64)>,
    pub runtime_s: f64,
}

/// Per-second windows of one drive's latencies.
struct Windows {
    start_ns: u64,
    second: u64,
    current: Histogram,
    total: Histogram,
    per_second: Vec<(f64, u64, u64)>,
}

impl Windows {
    fn new(start_ns: u64) -> Self {
        Windows {
            start_ns,
            second: 0,
            current: Histogram::new(),
            total: Histogram::new(),
            per_second: Vec::new(),
        }
    }

    fn record(&mut self, completed_ns: u64, latency_ns: u64) {
        let second = completed_ns.saturating_sub(self.start_ns) / 1_000_000_000;
        while second > self.second {
            self.close();
        }
        self.current.record(latency_ns);
        self.total.record(latency_ns);
    }

    fn close(&mut self) {
        self.second += 1;
        if !self.current.is_empty() {
            self.per_second.push((
                self.second as f64,
                self.current.percentile(50.0),
                self.current.percentile(99.0),
            ));
        }
        self.current.clear();
    }

    fn finish(mut self, end_ns: u64) -> DriveReads {
        if !self.current.is_empty() {
            self.close();
        }
        DriveReads {
            histogram: self.total,
            per_second: self.per_second,
            runtime_s: end_ns.saturating_sub(self.start_ns) as f64 / 1e9,
        }
    }
}

/// Random aligned offsets over a whole device, from a seeded stream per drive.
struct Offsets {
    rng: Rng,
    blocks: u64,
    block_bytes: u64,
}

impl Offsets {
    fn new(device: &dyn Device, load: &ReadLoad, drive: usize) -> Result<Self, MethodError> {
        let blocks = device.info().capacity_bytes / load.block_bytes;
        if blocks == 0 {
            return Err(MethodError::Invalid(format!(
                "--target {}: smaller than one {}-byte read",
                device.info().target,
                load.block_bytes
            )));
        }
        Ok(Offsets {
            rng: Rng::stream(load.seed, drive as u64),
            blocks,
            block_bytes: load.block_bytes,
        })
    }

    fn next(&mut self) -> u64 {
        self.rng.below(self.blocks) * self.block_bytes
    }
}

fn read_io(offset: u64, len: u64) -> Io {
    Io {
        op: Op::Read,
        offset,
        len,
        slot: 0,
        tag: 0,
    }
}

fn failed(device: &dyn Device, c: &Completion) -> MethodError {
    MethodError::Device(DeviceError::os(
        format!("reading {}", device.info().target),
        std::io::Error::from_raw_os_error((-c.result) as i32),
    ))
}

/// Opens drive `i` of the fan-out on the thread that will use it (an io_uring ring belongs to the thread that
/// made it).
pub type DriveOpener<'a> = dyn Fn(usize) -> Result<Box<dyn Device>, MethodError> + Sync + 'a;

/// Every drive reads on its own worker thread, all at once, until the runtime has passed on its clock or `stop`
/// is set; one result per drive, in order. Each worker opens its drive with `open`.
pub fn run_independent(
    drives: usize,
    open: &DriveOpener,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<Vec<DriveReads>, MethodError> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..drives)
            .map(|i| {
                scope.spawn(move || {
                    let mut device = open(i)?;
                    read_alone(device.as_mut(), load, i, stop)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a fan-out worker panicked"))
            .collect()
    })
}

fn read_alone(
    device: &mut dyn Device,
    load: &ReadLoad,
    drive: usize,
    stop: &AtomicBool,
) -> Result<DriveReads, MethodError> {
    device.prepare(1, load.block_bytes as usize)?;
    let mut offsets = Offsets::new(device, load, drive)?;
    let start = device.now_ns();
    let mut windows = Windows::new(start);
    let mut done = Vec::with_capacity(1);
    while device.now_ns() - start < load.runtime_ns && !stop.load(Ordering::Relaxed) {
        device.submit(&[read_io(offsets.next(), load.block_bytes)])?;
        done.clear();
        device.reap(1, None, &mut done)?;
        let c = &done[0];
        if c.result < 0 {
            return Err(failed(device, c));
        }
        windows.record(c.completed_ns, c.completed_ns - c.submitted_ns);
    }
    Ok(windows.finish(device.now_ns()))
}

/// Synchronized queries: each query sends one read to every drive at the same instant and waits for all; the
/// query's latency is the slowest read's. Runs until the runtime has passed on the first drive's clock or `stop`
/// is set. Returns each drive's reads and the queries' latencies.
///
/// On a virtual drive each read is timed on its own clock, and a drive that answered early idles until the
/// query's end, as a real drive does while the host waits for the slowest. Real drives are polled without
/// blocking, so each completion is timed when it happens, not when its turn to be reaped comes.
pub fn run_synchronized<D: Device>(
    devices: &mut [D],
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<(Vec<DriveReads>, Histogram), MethodError> {
    let mut offsets = Vec::with_capacity(devices.len());
    for (i, device) in devices.iter_mut().enumerate() {
        device.prepare(1, load.block_bytes as usize)?;
        offsets.push(Offsets::new(device, load, i)?);
    }
    let start_ns: Vec<u64> = devices.iter().map(|d| d.now_ns()).collect();
    let mut windows: Vec<Windows> = start_ns.iter().map(|&s| Windows::new(s)).collect();
    let mut queries = Histogram::new();
    let mut latencies = vec![0u64; devices.len()];
    let mut done = Vec::with_capacity(1);
    while devices[0].now_ns() - start_ns[0] < load.runtime_ns && !stop.load(Ordering::Relaxed) {
        let submitted: Vec<u64> = devices.iter().map(|d| d.now_ns()).collect();
        for (device, offsets) in devices.iter_mut().zip(&mut offsets) {
            device.submit(&[read_io(offsets.next(), load.block_bytes)])?;
        }
        let mut pending: Vec<usize> = (0..devices.len()).collect();
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for &i in &pending {
                let device = &mut devices[i];
                let blocking = device.info().clock == ClockKind::Virtual;
                done.clear();
                device.reap(usize::from(blocking), None, &mut done)?;
                match done.first() {
                    Some(c) if c.result < 0 => return Err(failed(device, c)),
                    Some(c) => {
                        latencies[i] = c.completed_ns - c.submitted_ns;
                        windows[i].record(c.completed_ns, latencies[i]);
                    }
                    None => still.push(i),
                }
            }
            pending = still;
        }
        let query_ns = latencies.iter().copied().max().unwrap_or(0);
        queries.record(query_ns);
        // The next query starts when this one ended: every drive waits for the slowest.
        for (device, &at) in devices.iter_mut().zip(&submitted) {
            device.wait_until(at + query_ns);
        }
    }
    let reads = windows
        .into_iter()
        .zip(devices.iter())
        .map(|(w, d)| w.finish(d.now_ns()))
        .collect();
    Ok((reads, queries))
}
