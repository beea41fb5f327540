//! Reading on every drive of a fan-out: random reads at queue depth 1, each drive's latencies kept in a
//! histogram overall and per second. Two ways: independent loads (one worker thread per drive, all at once, as
//! shards in one box are loaded together), or synchronized queries (one read to every drive at the same instant,
//! waiting for all, as a distributed search does), which measures the query latency itself. Past the CPUs, both
//! run from a worker per CPU over a [`DriveSet`] of its share of the drives instead of a thread a drive. A read that fails
//! ends its drive's part (and a synchronized run) and is reported with the reads made before it.
//!
//! It only reads, through [`Device`]; opening the drives (read-only) is the caller's job. It never writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

use ssdlab_core::Histogram;
use ssdlab_core::device::{ClockKind, Completion, Device, DeviceInfo, DriveCompletion, DriveSet, Io, Op};
use ssdlab_core::rng::Rng;

use crate::session::MethodError;

/// The read every drive makes, over and over.
#[derive(Debug, Clone, Copy)]
pub struct ReadLoad {
    pub block_bytes: u64,
    /// How long to read, on each drive's clock.
    pub runtime_ns: u64,
    pub seed: u64,
    /// How long the calling thread has waited for a CPU so far and how many times it was put on one (the app's
    /// probe of the kernel's run-queue time), for drives read on threads of their own; None where it cannot be
    /// told.
    pub cpu_wait: fn() -> Option<(u64, u64)>,
}

/// A probe that never knows: for drives on a virtual clock, where a host's CPU does not enter the figures.
pub fn no_cpu_wait() -> Option<(u64, u64)> {
    None
}

/// What a drive's thread waited for a CPU while it read: the time, and the times it was put on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostWait {
    pub wait_ns: u64,
    pub scheduled: u64,
}

/// The probe for `device`: the load's on a drive timed on the host's clock, none on a virtual one (its times are
/// virtual, whatever its thread waited).
fn probe_for(device: &dyn Device, load: &ReadLoad) -> fn() -> Option<(u64, u64)> {
    probe_on(Some(device.info().clock), load)
}

/// The wait between two readings of the probe.
fn waited(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<HostWait> {
    let ((w0, n0), (w1, n1)) = (before?, after?);
    Some(HostWait {
        wait_ns: w1.saturating_sub(w0),
        scheduled: n1.saturating_sub(n0),
    })
}

/// One drive's reads.
#[derive(Debug, Clone)]
pub struct DriveReads {
    pub histogram: Histogram,
    /// (seconds since the start, median ns, p99 ns) per second.
    pub per_second: Vec<(f64, u64, u64)>,
    pub runtime_s: f64,
    /// The first read that failed, in words; the drive read no more after it.
    pub failure: Option<String>,
    /// How long the drive's thread waited for a CPU while it read (None: not known, or no thread of its own).
    pub host_wait: Option<HostWait>,
    /// When the drive's first read was submitted, on the host's clock (None for a virtual drive, whose time is its
    /// own, and for reads saved by another run): the drives' start spread is the largest difference.
    pub started: Option<std::time::Instant>,
}

/// Per-second windows of one drive's latencies.
struct Windows {
    start_ns: u64,
    second: u64,
    current: Histogram,
    total: Histogram,
    per_second: Vec<(f64, u64, u64)>,
    failure: Option<String>,
}

impl Windows {
    fn new(start_ns: u64) -> Self {
        Windows {
            start_ns,
            second: 0,
            current: Histogram::new(),
            total: Histogram::new(),
            per_second: Vec::new(),
            failure: None,
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
            failure: self.failure,
            host_wait: None,
            started: None,
        }
    }
}

/// Random aligned offsets over a whole device, from a seeded stream per drive. The stream is the drive's own
/// (keyed by its target, not its place in the list), so a drive reads the same offsets whether it is measured
/// alone, with others, or on another host: `fanout --from` merges such runs into the query they make together.
struct Offsets {
    rng: Rng,
    blocks: u64,
    block_bytes: u64,
}

impl Offsets {
    fn new(device: &dyn Device, load: &ReadLoad) -> Result<Self, MethodError> {
        Self::of(device.info(), load)
    }

    fn of(info: &DeviceInfo, load: &ReadLoad) -> Result<Self, MethodError> {
        let blocks = info.capacity_bytes / load.block_bytes;
        if blocks == 0 {
            return Err(MethodError::Invalid(format!(
                "--target {}: smaller than one {}-byte read",
                info.target, load.block_bytes
            )));
        }
        Ok(Offsets {
            rng: Rng::stream(load.seed, stream_of(&info.target)),
            blocks,
            block_bytes: load.block_bytes,
        })
    }

    fn next(&mut self) -> u64 {
        self.rng.below(self.blocks) * self.block_bytes
    }
}

/// A drive's stream number: FNV-1a of its target as given.
fn stream_of(target: &str) -> u64 {
    target.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

/// Opens drive `i` of the fan-out on the thread that will use it (an io_uring ring belongs to the thread that
/// made it).
pub type DriveOpener<'a> = dyn Fn(usize) -> Result<Box<dyn Device>, MethodError> + Sync + 'a;

/// Every drive reads on its own worker thread, all at once, until the runtime has passed on its clock or `stop`
/// is set; one result per drive, in order. Each worker opens its drive with `open`, then waits for every other
/// worker to have opened its own: the drives start reading together, so the first opened do not run alone while
/// the last are still opening (with many drives, opening takes long enough to matter).
pub fn run_independent(
    drives: usize,
    open: &DriveOpener,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<Vec<DriveReads>, MethodError> {
    let opened_all = &Barrier::new(drives);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..drives)
            .map(|i| {
                scope.spawn(move || {
                    // Every worker reaches the barrier, whether its drive opened, failed or panicked, so none
                    // waits forever; a panic goes on once the others are released.
                    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(i)));
                    opened_all.wait();
                    let mut device = opened.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                    read_alone(device.as_mut(), load, stop)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a fan-out worker panicked"))
            .collect()
    })
}

/// Opens the drives with these numbers as one set, on the thread that will read them.
pub type SetOpener<'a> = dyn Fn(&[usize]) -> Result<Box<dyn DriveSet>, MethodError> + Sync + 'a;

/// Every drive reads on its own, all at once, as [`run_independent`] does, from `workers` threads each keeping
/// one read in flight on every drive of its share (drive `i` is worker `i % workers`'s): many more drives than
/// CPUs are read without a thread each, which would measure the scheduler and start and stop the drives seconds
/// apart. The workers open their sets, wait for each other, then put a read on every drive of their set at once
/// and read until the runtime has passed on their clock or `stop` is set. A read waits in the ring for its
/// worker to collect it with the rest of its batch, so a worker's wait for a CPU and its batches' processing are
/// in the latencies: each drive's `host_wait` is its worker's.
pub fn run_independent_sets(
    drives: usize,
    workers: usize,
    open: &SetOpener,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<Vec<DriveReads>, MethodError> {
    let workers = workers.clamp(1, drives.max(1));
    let opened_all = &Barrier::new(workers);
    // A set that could not open fails the run: the others leave at once instead of reading for nothing.
    let open_failed = &AtomicBool::new(false);
    let shares = shares_of(drives, workers);
    let per_worker: Vec<Result<Vec<DriveReads>, MethodError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| {
                scope.spawn(move || {
                    // Every worker reaches the barrier, whether its set opened or not, so none waits forever.
                    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(share)));
                    if !matches!(opened, Ok(Ok(_))) {
                        open_failed.store(true, Ordering::SeqCst);
                    }
                    opened_all.wait();
                    let mut set = opened.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                    if open_failed.load(Ordering::SeqCst) {
                        return Ok(share.iter().map(|_| Windows::new(0).finish(0)).collect());
                    }
                    read_set(set.as_mut(), load, stop)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    by_drive(drives, &shares, per_worker)
}

/// The drives of each of `workers` shares: every `workers`-th drive, so drives of one kind listed together are
/// spread over the workers.
fn shares_of(drives: usize, workers: usize) -> Vec<Vec<usize>> {
    (0..workers)
        .map(|w| (w..drives).step_by(workers).collect())
        .collect()
}

/// The workers' reads, each in its share's order, put back in the drives' order; the first worker's error.
fn by_drive(
    drives: usize,
    shares: &[Vec<usize>],
    per_worker: Vec<Result<Vec<DriveReads>, MethodError>>,
) -> Result<Vec<DriveReads>, MethodError> {
    let mut reads: Vec<Option<DriveReads>> = vec![None; drives];
    for (share, result) in shares.iter().zip(per_worker) {
        for (&drive, r) in share.iter().zip(result?) {
            reads[drive] = Some(r);
        }
    }
    Ok(reads
        .into_iter()
        .map(|r| r.expect("every drive is in one share"))
        .collect())
}

/// Why a drive's read of `bytes` at `offset` that came back with `result` failed; None when it read them all (a
/// read cut short is a failed read, not a fast one).
fn read_failure(result: i64, bytes: u64, offset: u64) -> Option<String> {
    if result == bytes as i64 {
        return None;
    }
    Some(if result < 0 {
        format!(
            "reading {bytes} bytes at offset {offset}: {}",
            std::io::Error::from_raw_os_error((-result) as i32)
        )
    } else {
        format!("reading {bytes} bytes at offset {offset}: only {result} came back")
    })
}

/// One worker's part of [`run_independent_sets`]: a read on every drive of `set`, then one more on each drive as
/// its read comes back, until the runtime has passed or `stop` is set; a drive whose read failed reads no more.
fn read_set(
    set: &mut dyn DriveSet,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<Vec<DriveReads>, MethodError> {
    let mut offsets = set
        .infos()
        .iter()
        .map(|info| Offsets::of(info, load))
        .collect::<Result<Vec<_>, _>>()?;
    let probe = probe_on(set.infos().first().map(|i| i.clock), load);
    let waited_before = probe();
    let started = host_instant(set.infos().first().map_or(ClockKind::Virtual, |i| i.clock));
    let start = set.now_ns();
    let mut windows: Vec<Windows> = offsets.iter().map(|_| Windows::new(start)).collect();
    // Where each drive's read in flight reads, for a failure's message.
    let mut reading: Vec<u64> = offsets.iter_mut().map(Offsets::next).collect();
    for (drive, &offset) in reading.iter().enumerate() {
        set.read(drive, offset, load.block_bytes)?;
    }
    let mut done: Vec<DriveCompletion> = Vec::with_capacity(windows.len());
    while set.in_flight() > 0 {
        done.clear();
        set.wait(&mut done)?;
        let over = set.now_ns() - start >= load.runtime_ns || stop.load(Ordering::Relaxed);
        for c in &done {
            let w = &mut windows[c.drive];
            let bytes = load.block_bytes;
            if let Some(failure) = read_failure(c.result, bytes, reading[c.drive]) {
                w.failure = Some(failure);
                continue;
            }
            w.record(c.completed_ns, c.completed_ns - c.submitted_ns);
            if !over {
                reading[c.drive] = offsets[c.drive].next();
                set.read(c.drive, reading[c.drive], bytes)?;
            }
        }
    }
    let end = set.now_ns();
    Ok(set_reads(windows, end, waited(waited_before, probe()), started))
}

/// A set's drives' reads, ended at `end`, each with its worker's host wait and first-submit instant.
fn set_reads(
    windows: Vec<Windows>,
    end: u64,
    host_wait: Option<HostWait>,
    started: Option<std::time::Instant>,
) -> Vec<DriveReads> {
    windows
        .into_iter()
        .map(|w| {
            let mut reads = w.finish(end);
            reads.host_wait = host_wait;
            reads.started = started;
            reads
        })
        .collect()
}

/// The host-wait probe for drives timed on `clock` (none on a virtual clock: its times are virtual, whatever
/// the thread waited).
fn probe_on(clock: Option<ClockKind>, load: &ReadLoad) -> fn() -> Option<(u64, u64)> {
    match clock {
        Some(ClockKind::Real) => load.cpu_wait,
        _ => no_cpu_wait,
    }
}

fn read_alone(
    device: &mut dyn Device,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<DriveReads, MethodError> {
    device.prepare(1, load.block_bytes as usize)?;
    let mut offsets = Offsets::new(device, load)?;
    let probe = probe_for(device, load);
    let waited_before = probe();
    let started = host_instant(device.info().clock);
    let start = device.now_ns();
    let mut windows = Windows::new(start);
    let mut done = Vec::with_capacity(1);
    while device.now_ns() - start < load.runtime_ns && !stop.load(Ordering::Relaxed) {
        match read_once(device, &mut offsets, load, &mut done)? {
            Ok((completed_ns, latency_ns)) => windows.record(completed_ns, latency_ns),
            Err(failure) => {
                windows.failure = Some(failure);
                break;
            }
        }
    }
    let mut reads = windows.finish(device.now_ns());
    reads.host_wait = waited(waited_before, probe());
    reads.started = started;
    Ok(reads)
}

/// Now on the host's clock, for a drive timed on it.
fn host_instant(clock: ClockKind) -> Option<std::time::Instant> {
    (clock == ClockKind::Real).then(std::time::Instant::now)
}

/// How far apart the drives' first reads were submitted, in nanoseconds; None unless every drive says when.
pub fn start_spread_ns(reads: &[DriveReads]) -> Option<u64> {
    let starts: Vec<std::time::Instant> = reads.iter().map(|r| r.started).collect::<Option<_>>()?;
    let (first, last) = (starts.iter().min()?, starts.iter().max()?);
    Some(last.duration_since(*first).as_nanos() as u64)
}

/// One read, waited for: Ok((completed ns, latency ns)), or the read's failure in words. A device that does not
/// take the read or cannot be reaped is an error of the run, not of the read.
fn read_once(
    device: &mut dyn Device,
    offsets: &mut Offsets,
    load: &ReadLoad,
    done: &mut Vec<Completion>,
) -> Result<Result<(u64, u64), String>, MethodError> {
    let offset = offsets.next();
    if device.submit(&[read_io(offset, load.block_bytes)])? != 1 {
        return Err(MethodError::Invalid(format!(
            "--target {}: the device did not take a read",
            device.info().target
        )));
    }
    done.clear();
    device.reap(1, None, done)?;
    let c = done.first().ok_or_else(|| {
        MethodError::Invalid(format!(
            "--target {}: a read was submitted but never completed",
            device.info().target
        ))
    })?;
    if let Some(failure) = read_failure(c.result, load.block_bytes, offset) {
        return Ok(Err(failure));
    }
    Ok(Ok((c.completed_ns, c.completed_ns - c.submitted_ns)))
}

/// Synchronized queries on virtual drives: each query sends one read to every drive at the same instant and
/// waits for all; the query's latency is the slowest read's. Every read is timed on its own drive's clock, and
/// a drive that answered early idles until the query's end, as a real drive does while the host waits for the
/// slowest. Runs until the runtime has passed on the first drive's clock, `stop` is set or a read fails.
/// Returns each drive's reads and the queries' latencies.
pub fn run_synchronized_virtual<D: Device>(
    devices: &mut [D],
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<(Vec<DriveReads>, Histogram), MethodError> {
    assert!(
        devices.iter().all(|d| d.info().clock == ClockKind::Virtual),
        "virtual drives only: real ones are timed on their own threads"
    );
    let mut offsets = Vec::with_capacity(devices.len());
    for device in devices.iter_mut() {
        device.prepare(1, load.block_bytes as usize)?;
        offsets.push(Offsets::new(device, load)?);
    }
    let start_ns: Vec<u64> = devices.iter().map(|d| d.now_ns()).collect();
    let mut windows: Vec<Windows> = start_ns.iter().map(|&s| Windows::new(s)).collect();
    let mut queries = Histogram::new();
    let mut done = Vec::with_capacity(1);
    'queries: while devices[0].now_ns() - start_ns[0] < load.runtime_ns && !stop.load(Ordering::Relaxed) {
        let submitted: Vec<u64> = devices.iter().map(|d| d.now_ns()).collect();
        let mut query_ns = 0;
        for (i, device) in devices.iter_mut().enumerate() {
            match read_once(device, &mut offsets[i], load, &mut done)? {
                Ok((completed_ns, latency_ns)) => {
                    windows[i].record(completed_ns, latency_ns);
                    query_ns = query_ns.max(latency_ns);
                }
                Err(failure) => {
                    windows[i].failure = Some(failure);
                    break 'queries;
                }
            }
        }
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

/// Synchronized queries on real drives: one thread per drive (each opens its own), all released together for
/// every query by a barrier, each waiting for its read in the kernel so its completion is timed when it
/// happens; the first thread records the query's latency (the slowest read) and decides whether another query
/// follows (runtime on its clock, `stop`, or a failed read).
pub fn run_synchronized_real(
    drives: usize,
    open: &DriveOpener,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<(Vec<DriveReads>, Histogram), MethodError> {
    let shared = Synchronized::new(drives);
    let shared = &shared;
    let results: Vec<Result<DriveReads, MethodError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..drives)
            .map(|i| scope.spawn(move || shared.drive(i, open, load, stop)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a fan-out worker panicked"))
            .collect()
    });
    let reads = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let queries = std::mem::take(&mut *shared.queries.lock().expect("the workers are done"));
    Ok((reads, queries))
}

/// Synchronized queries over more real drives than CPUs: a worker per CPU, each with one ring over its share of
/// the drives ([`DriveSet`]), all released together for every query by a barrier of the workers; each sends one
/// read to every drive of its share at once and waits for them all, and the first worker records the query's
/// latency (the slowest read of any share) and decides whether another follows. A thread per drive would make
/// every query wait for a thousand threads to be scheduled: the query would time the scheduler, not the drives.
/// Each read's time starts when it is queued and its share goes to the kernel in one submission, so a query
/// includes the host's time to issue a share's reads (about a microsecond a read), a floor that grows with the
/// drives per CPU: 1,000 sparse-file drives on 2 CPUs measured about 0.3 ms a query.
pub fn run_synchronized_sets(
    drives: usize,
    workers: usize,
    open: &SetOpener,
    load: &ReadLoad,
    stop: &AtomicBool,
) -> Result<(Vec<DriveReads>, Histogram), MethodError> {
    let workers = workers.clamp(1, drives.max(1));
    let shares = shares_of(drives, workers);
    // The shared state's latencies are per worker here: each worker's slowest read of the query.
    let shared = &Synchronized::new(workers);
    let per_worker: Vec<Result<Vec<DriveReads>, MethodError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .enumerate()
            .map(|(w, share)| scope.spawn(move || shared.set_worker(w, share, open, load, stop)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let reads = by_drive(drives, &shares, per_worker)?;
    let queries = std::mem::take(&mut *shared.queries.lock().expect("the workers are done"));
    Ok((reads, queries))
}

/// What the threads of a synchronized run share: the barrier that releases every query, each drive's latency in
/// the current query, whether a drive could not open or a read failed, whether the run is over, and the
/// queries' latencies.
struct Synchronized {
    barrier: Barrier,
    latencies: Vec<AtomicU64>,
    open_failed: AtomicBool,
    read_failed: AtomicBool,
    finished: AtomicBool,
    queries: Mutex<Histogram>,
}

impl Synchronized {
    /// The shared state of a run over `drives` drives, before any thread starts.
    fn new(drives: usize) -> Self {
        Synchronized {
            barrier: Barrier::new(drives),
            latencies: (0..drives).map(|_| AtomicU64::new(0)).collect(),
            open_failed: AtomicBool::new(false),
            read_failed: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            queries: Mutex::new(Histogram::new()),
        }
    }

    /// Drive `i`'s thread: opens it, then makes one read per query until the first thread ends the run; its
    /// reads, or the device error that stopped it.
    fn drive(
        &self,
        i: usize,
        open: &DriveOpener,
        load: &ReadLoad,
        stop: &AtomicBool,
    ) -> Result<DriveReads, MethodError> {
        // Every thread opens first; if any cannot, all leave together instead of waiting forever.
        let opened = open_for_reads(i, open, load);
        if opened.is_err() {
            self.open_failed.store(true, Ordering::SeqCst);
        }
        self.barrier.wait();
        let (mut device, mut offsets) = opened?;
        if self.open_failed.load(Ordering::SeqCst) {
            return Ok(Windows::new(0).finish(0));
        }
        // The wait is added up around each read only: between queries the threads sleep at the barrier, and the
        // wait to get a CPU after it delays the next query, not a read's latency.
        let probe = probe_for(device.as_ref(), load);
        let mut host_wait = probe().map(|_| HostWait {
            wait_ns: 0,
            scheduled: 0,
        });
        let mut started = None;
        let start = device.now_ns();
        let mut windows = Windows::new(start);
        let mut done = Vec::with_capacity(1);
        // A device error is kept until every thread has left the loop together.
        let mut run_error = None;
        loop {
            self.barrier.wait();
            if self.finished.load(Ordering::SeqCst) {
                break;
            }
            if started.is_none() {
                started = host_instant(device.info().clock);
            }
            let before = probe();
            let read = read_once(device.as_mut(), &mut offsets, load, &mut done);
            if let (Some(total), Some(w)) = (host_wait.as_mut(), waited(before, probe())) {
                total.wait_ns += w.wait_ns;
                total.scheduled += w.scheduled;
            }
            let latency_ns = self.record_read(&read, &mut windows);
            if let Err(e) = read {
                run_error = Some(e);
            }
            self.latencies[i].store(latency_ns, Ordering::SeqCst);
            self.barrier.wait();
            if i == 0 {
                self.end_query(device.now_ns(), start, load, stop);
            }
        }
        match run_error {
            Some(e) => Err(e),
            None => {
                let mut reads = windows.finish(device.now_ns());
                reads.host_wait = host_wait;
                reads.started = started;
                Ok(reads)
            }
        }
    }

    /// Worker `w`'s part of [`run_synchronized_sets`]: opens the set of its `share`, then for every query one read
    /// on each of its drives at once, until the first worker ends the run; its drives' reads, in its share's
    /// order, or the error that stopped it (kept until every worker has left the loop together).
    fn set_worker(
        &self,
        w: usize,
        share: &[usize],
        open: &SetOpener,
        load: &ReadLoad,
        stop: &AtomicBool,
    ) -> Result<Vec<DriveReads>, MethodError> {
        // Every worker reaches the barrier, whether its set opened or not, so none waits forever; the drives'
        // offsets are made before it too (a drive smaller than one read fails there), since past it a worker that
        // left would leave the others waiting at the query barrier for good.
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let set = open(share)?;
            let offsets = set
                .infos()
                .iter()
                .map(|info| Offsets::of(info, load))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, MethodError>((set, offsets))
        }));
        if !matches!(opened, Ok(Ok(_))) {
            self.open_failed.store(true, Ordering::SeqCst);
        }
        self.barrier.wait();
        let (mut set, mut offsets) = opened.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        if self.open_failed.load(Ordering::SeqCst) {
            return Ok(share.iter().map(|_| Windows::new(0).finish(0)).collect());
        }
        let set = set.as_mut();
        let clock = set.infos().first().map_or(ClockKind::Virtual, |i| i.clock);
        let probe = probe_on(Some(clock), load);
        // As for a thread a drive, the wait is added up around the reads only.
        let mut host_wait = probe().map(|_| HostWait {
            wait_ns: 0,
            scheduled: 0,
        });
        let mut started = None;
        let start = set.now_ns();
        let mut windows: Vec<Windows> = offsets.iter().map(|_| Windows::new(start)).collect();
        let mut reading = vec![0u64; offsets.len()];
        let mut done: Vec<DriveCompletion> = Vec::with_capacity(offsets.len());
        let mut run_error = None;
        let mut panic = None;
        loop {
            self.barrier.wait();
            if self.finished.load(Ordering::SeqCst) {
                break;
            }
            if started.is_none() {
                started = host_instant(clock);
            }
            let before = probe();
            // A panic in the query (a set's assertion) ends the run like a failed read, and is raised again once
            // every worker has left the loop: raised here, it would leave the others at the barrier for good.
            let slowest = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.query_set(set, &mut offsets, &mut reading, &mut windows, &mut done, load)
            }));
            if let (Some(total), Some(wait)) = (host_wait.as_mut(), waited(before, probe())) {
                total.wait_ns += wait.wait_ns;
                total.scheduled += wait.scheduled;
            }
            match slowest {
                Ok(Ok(latency_ns)) => self.latencies[w].store(latency_ns, Ordering::SeqCst),
                Ok(Err(e)) => {
                    self.read_failed.store(true, Ordering::SeqCst);
                    run_error = Some(e);
                }
                Err(p) => {
                    self.read_failed.store(true, Ordering::SeqCst);
                    panic = Some(p);
                }
            }
            self.barrier.wait();
            if w == 0 {
                self.end_query(set.now_ns(), start, load, stop);
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        if let Some(e) = run_error {
            return Err(e);
        }
        Ok(set_reads(windows, set.now_ns(), host_wait, started))
    }

    /// One query on a worker's set: a read on every drive at once, then every completion; the slowest read's
    /// latency. A failed read is kept in its drive's windows and flagged for every worker (the run ends). A
    /// device error (the first one) is returned once the reads already queued have come back, or at once if
    /// waiting for them failed (the set waits for them when it is dropped).
    fn query_set(
        &self,
        set: &mut dyn DriveSet,
        offsets: &mut [Offsets],
        reading: &mut [u64],
        windows: &mut [Windows],
        done: &mut Vec<DriveCompletion>,
        load: &ReadLoad,
    ) -> Result<u64, MethodError> {
        let mut error = None;
        for (drive, offsets) in offsets.iter_mut().enumerate() {
            reading[drive] = offsets.next();
            if let Err(e) = set.read(drive, reading[drive], load.block_bytes) {
                error = Some(MethodError::from(e));
                break;
            }
        }
        let mut slowest = 0;
        while set.in_flight() > 0 {
            done.clear();
            if let Err(e) = set.wait(done) {
                return Err(error.unwrap_or_else(|| e.into()));
            }
            for c in done.iter() {
                if let Some(failure) = read_failure(c.result, load.block_bytes, reading[c.drive]) {
                    windows[c.drive].failure = Some(failure);
                    self.read_failed.store(true, Ordering::SeqCst);
                    continue;
                }
                let latency_ns = c.completed_ns - c.submitted_ns;
                windows[c.drive].record(c.completed_ns, latency_ns);
                slowest = slowest.max(latency_ns);
            }
        }
        error.map_or(Ok(slowest), Err)
    }

    /// Keeps one read of this drive in `windows` (a failed read as its failure, and flagged for every thread);
    /// its latency for the query, 0 when it failed.
    fn record_read(
        &self,
        read: &Result<Result<(u64, u64), String>, MethodError>,
        windows: &mut Windows,
    ) -> u64 {
        match read {
            Ok(Ok((completed_ns, latency_ns))) => {
                windows.record(*completed_ns, *latency_ns);
                *latency_ns
            }
            Ok(Err(failure)) => {
                windows.failure = Some(failure.clone());
                self.read_failed.store(true, Ordering::SeqCst);
                0
            }
            Err(_) => {
                self.read_failed.store(true, Ordering::SeqCst);
                0
            }
        }
    }

    /// The first thread's part once every read of a query is in: records the query's latency (the slowest read)
    /// unless a read failed, and ends the run on a failed read, the runtime passed on its clock (reading
    /// `now_ns`) since `start_ns`, or `stop`.
    fn end_query(&self, now_ns: u64, start_ns: u64, load: &ReadLoad, stop: &AtomicBool) {
        let failed = self.read_failed.load(Ordering::SeqCst);
        if !failed {
            let query_ns = self
                .latencies
                .iter()
                .map(|l| l.load(Ordering::SeqCst))
                .max()
                .unwrap_or(0);
            self.queries
                .lock()
                .expect("no thread panics holding it")
                .record(query_ns);
        }
        let over = now_ns - start_ns >= load.runtime_ns;
        if failed || over || stop.load(Ordering::Relaxed) {
            self.finished.store(true, Ordering::SeqCst);
        }
    }
}

/// Opens drive `i` with `open` on the calling thread and prepares it for `load`'s reads, with its offsets.
fn open_for_reads(
    i: usize,
    open: &DriveOpener,
    load: &ReadLoad,
) -> Result<(Box<dyn Device>, Offsets), MethodError> {
    open(i).and_then(|mut device| {
        device.prepare(1, load.block_bytes as usize)?;
        let offsets = Offsets::new(device.as_ref(), load)?;
        Ok((device, offsets))
    })
}
