//! A live fan-out over more drives than CPUs reads them from a worker per CPU, each keeping one read in flight on
//! every drive of its share ([`run_independent_sets`]). Checked against a model drive set in virtual time: every
//! drive reads for the runtime at its own latency, a failed read ends its drive alone (with where it read), the
//! results come back in the drives' order, and the drives start together though one worker's set opens late.
//! Synchronized queries over sets ([`run_synchronized_sets`]) read every drive once a query, the query taking
//! its slowest read, and a failed read ends the run for every worker.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ssdlab_core::device::{Device, DeviceInfo, DeviceResult, DriveCompletion, DriveSet};
use ssdlab_methods::MethodError;
use ssdlab_methods::fanout::measure::{ReadLoad, no_cpu_wait, run_independent_sets, run_synchronized_sets};
use ssdlab_testdev::MemDevice;

/// Drives of a set in virtual time: drive `i` answers every read after `latency_ns[i]`; drive `fails` fails its
/// fifth read.
struct ModelSet {
    infos: Vec<DeviceInfo>,
    numbers: Vec<usize>,
    latency_ns: Vec<u64>,
    fails: Option<usize>,
    now_ns: u64,
    /// (drive, submitted, due), in flight.
    pending: Vec<(usize, u64, u64)>,
    reads: Vec<u32>,
    first_submit: Arc<Mutex<Vec<Option<Instant>>>>,
}

impl DriveSet for ModelSet {
    fn infos(&self) -> &[DeviceInfo] {
        &self.infos
    }
    fn read(&mut self, drive: usize, offset: u64, len: u64) -> DeviceResult<()> {
        assert!(
            self.pending.iter().all(|p| p.0 != drive),
            "two reads in flight on drive {drive}"
        );
        assert!(offset + len <= self.infos[drive].capacity_bytes && offset.is_multiple_of(len));
        self.first_submit.lock().unwrap()[self.numbers[drive]].get_or_insert_with(Instant::now);
        self.pending
            .push((drive, self.now_ns, self.now_ns + self.latency_ns[drive]));
        Ok(())
    }
    fn wait(&mut self, out: &mut Vec<DriveCompletion>) -> DeviceResult<()> {
        let Some(due) = self.pending.iter().map(|p| p.2).min() else {
            return Ok(());
        };
        self.now_ns = due;
        let (done, left): (Vec<_>, Vec<_>) = self.pending.iter().partition(|p| p.2 <= due);
        self.pending = left;
        for (drive, submitted, _) in done {
            self.reads[drive] += 1;
            let failed = self.fails == Some(self.numbers[drive]) && self.reads[drive] == 5;
            out.push(DriveCompletion {
                drive,
                result: if failed { -5 } else { 4096 },
                submitted_ns: submitted,
                completed_ns: due,
            });
        }
        Ok(())
    }
    fn in_flight(&self) -> usize {
        self.pending.len()
    }
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
}

/// A model set of the drives in `share`, drive `i` answering after `latency(i)`, drive `fails` failing its fifth
/// read, each noting in `first_submit` when its first read was queued.
fn model_set(
    share: &[usize],
    latency: impl Fn(usize) -> u64,
    fails: Option<usize>,
    first_submit: &Arc<Mutex<Vec<Option<Instant>>>>,
) -> Box<dyn DriveSet> {
    Box::new(model(share, latency, fails, first_submit))
}

/// [`model_set`], unboxed.
fn model(
    share: &[usize],
    latency: impl Fn(usize) -> u64,
    fails: Option<usize>,
    first_submit: &Arc<Mutex<Vec<Option<Instant>>>>,
) -> ModelSet {
    ModelSet {
        infos: share
            .iter()
            .map(|&i| {
                let mut info = MemDevice::new(64 << 20, 1).info().clone();
                info.target = format!("drive-{i}");
                info
            })
            .collect(),
        numbers: share.to_vec(),
        latency_ns: share.iter().map(|&i| latency(i)).collect(),
        fails,
        now_ns: 0,
        pending: Vec::new(),
        reads: vec![0; share.len()],
        first_submit: Arc::clone(first_submit),
    }
}

#[test]
fn every_drive_of_every_share_reads_for_the_runtime_and_a_failure_ends_its_drive_alone() {
    let drives = 7;
    let first_submit = Arc::new(Mutex::new(vec![None; drives]));
    let latency = |i: usize| 100_000 * (i as u64 + 1);
    let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
        if share.contains(&0) {
            // One worker's set opens late (a slow device among its drives): the others wait for it.
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(model_set(share, latency, Some(3), &first_submit))
    };
    let load = ReadLoad {
        block_bytes: 4096,
        runtime_ns: 1_000_000_000,
        seed: 7,
        cpu_wait: no_cpu_wait,
    };
    let reads = run_independent_sets(drives, 3, &open, &load, &AtomicBool::new(false)).unwrap();
    assert_eq!(reads.len(), drives);
    for (i, r) in reads.iter().enumerate() {
        if i == 3 {
            // Four reads, then the fifth failed: recorded with where it read, and the drive read no more.
            assert_eq!(r.histogram.count(), 4);
            let failure = r.failure.as_deref().unwrap();
            assert!(
                failure.contains("reading 4096 bytes at offset ") && failure.contains("os error 5"),
                "{failure}"
            );
            continue;
        }
        // Every other drive read for the whole second at its own latency, the last read ending past it.
        let expected = 1_000_000_000 / latency(i);
        let count = r.histogram.count();
        assert!(
            (expected..=expected + 1).contains(&count),
            "drive {i}: {count} reads, {expected} expected"
        );
        assert_eq!(
            r.histogram.percentile(50.0),
            r.histogram.max(),
            "drive {i} reads at one latency"
        );
        assert!(r.failure.is_none());
    }
    let starts: Vec<Instant> = first_submit
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.expect("every drive read"))
        .collect();
    let spread = starts
        .iter()
        .max()
        .unwrap()
        .duration_since(*starts.iter().min().unwrap());
    assert!(
        spread < Duration::from_millis(100),
        "the drives started {spread:?} apart"
    );
}

/// A set that cannot open fails the run, and the other workers read nothing: they leave once every set has tried.
#[test]
fn a_set_that_cannot_open_fails_the_run_and_the_others_read_nothing() {
    let first_submit = Arc::new(Mutex::new(vec![None; 6]));
    let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
        if share.contains(&1) {
            return Err(MethodError::Invalid("drive 1 is gone".into()));
        }
        Ok(model_set(share, |_| 100_000, None, &first_submit))
    };
    let load = ReadLoad {
        block_bytes: 4096,
        runtime_ns: 1_000_000_000,
        seed: 7,
        cpu_wait: no_cpu_wait,
    };
    let err = run_independent_sets(6, 2, &open, &load, &AtomicBool::new(false)).unwrap_err();
    assert!(err.to_string().contains("drive 1 is gone"), "{err}");
    assert!(
        first_submit.lock().unwrap().iter().all(Option::is_none),
        "a worker read though another's set failed to open"
    );
}

/// Synchronized queries over two workers' sets: every query reads every drive once, the query's latency is the
/// slowest drive's (in the other worker's share as much as in the first's), the run lasts the runtime on the first
/// worker's clock, and a failed read ends it for all with the reads made before it.
#[test]
fn synchronized_queries_over_sets_read_every_drive_once_a_query_and_a_failure_ends_them_all() {
    let drives = 6;
    let first_submit = Arc::new(Mutex::new(vec![None; drives]));
    // Drive 0 is the first worker's slowest (its set's clock, which ends the run, moves 300 us a query) and
    // drive 5, the second worker's, the slowest of all: every query takes its 500 us.
    let latency = |i: usize| match i {
        0 => 300_000,
        5 => 500_000,
        _ => 100_000,
    };
    let load = ReadLoad {
        block_bytes: 4096,
        runtime_ns: 30_000_000,
        seed: 7,
        cpu_wait: no_cpu_wait,
    };
    let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
        Ok(model_set(share, latency, None, &first_submit))
    };
    let (reads, queries) = run_synchronized_sets(drives, 2, &open, &load, &AtomicBool::new(false)).unwrap();
    // 30 ms on the first worker's clock at 300 us a query, the last one ending at the runtime.
    assert_eq!(queries.count(), 100);
    assert_eq!((queries.min(), queries.max()), (500_000, 500_000));
    for (i, r) in reads.iter().enumerate() {
        assert_eq!(r.histogram.count(), 100, "drive {i}");
        assert_eq!(r.histogram.max(), latency(i), "drive {i}");
        assert!(r.failure.is_none());
    }

    // Drive 3 (the second worker's) fails its fifth read: four queries are recorded, and no drive reads a sixth.
    let first_submit = Arc::new(Mutex::new(vec![None; drives]));
    let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
        Ok(model_set(share, latency, Some(3), &first_submit))
    };
    let (reads, queries) = run_synchronized_sets(drives, 2, &open, &load, &AtomicBool::new(false)).unwrap();
    assert_eq!(queries.count(), 4);
    let failure = reads[3].failure.as_deref().unwrap();
    assert!(failure.contains("os error 5"), "{failure}");
    for (i, r) in reads.iter().enumerate() {
        let expected = if i == 3 { 4 } else { 5 };
        assert_eq!(r.histogram.count(), expected, "drive {i}");
    }
}

/// A drive smaller than one read, in one worker's share: the run fails with why, and the other worker, which had
/// opened its set, does not wait for it forever (a worker that left after the opening barrier hung the run).
#[test]
fn a_drive_smaller_than_a_read_fails_synchronized_queries_instead_of_hanging_them() {
    let (said, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let first_submit = Arc::new(Mutex::new(vec![None; 4]));
        let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
            let mut set = model(share, |_| 100_000, None, &first_submit);
            if share.contains(&1) {
                set.infos[0].capacity_bytes = 2048;
            }
            Ok(Box::new(set))
        };
        let load = ReadLoad {
            block_bytes: 4096,
            runtime_ns: 10_000_000,
            seed: 7,
            cpu_wait: no_cpu_wait,
        };
        let result = run_synchronized_sets(4, 2, &open, &load, &AtomicBool::new(false)).map(|_| ());
        let _ = said.send(result.map_err(|e| e.to_string()));
    });
    let result = heard
        .recv_timeout(Duration::from_secs(30))
        .expect("the run hung: a worker waits at a barrier for one that left");
    let err = result.expect_err("a drive smaller than one read cannot be read");
    assert!(err.contains("drive-1: smaller than one 4096-byte read"), "{err}");
}

/// A set that panics on its third wait, for the hang check below.
struct PanicsOnThirdWait(ModelSet, u32);

impl DriveSet for PanicsOnThirdWait {
    fn infos(&self) -> &[DeviceInfo] {
        self.0.infos()
    }
    fn read(&mut self, drive: usize, offset: u64, len: u64) -> DeviceResult<()> {
        self.0.read(drive, offset, len)
    }
    fn wait(&mut self, out: &mut Vec<DriveCompletion>) -> DeviceResult<()> {
        self.1 += 1;
        assert!(self.1 < 3, "a set's own assertion fails");
        self.0.wait(out)
    }
    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

/// A panic in one worker's query ends the run with that panic: the other worker is not left at the barrier.
#[test]
fn a_panic_in_one_workers_query_ends_synchronized_queries_instead_of_hanging_them() {
    let (said, heard) = std::sync::mpsc::channel::<()>();
    let runner = std::thread::spawn(move || {
        let _said = said;
        let first_submit = Arc::new(Mutex::new(vec![None; 4]));
        let open = |share: &[usize]| -> Result<Box<dyn DriveSet>, MethodError> {
            let set = model(share, |_| 100_000, None, &first_submit);
            Ok(if share.contains(&1) {
                Box::new(PanicsOnThirdWait(set, 0))
            } else {
                Box::new(set)
            })
        };
        let load = ReadLoad {
            block_bytes: 4096,
            runtime_ns: 10_000_000,
            seed: 7,
            cpu_wait: no_cpu_wait,
        };
        let _ = run_synchronized_sets(4, 2, &open, &load, &AtomicBool::new(false));
    });
    // The runner's end (its panic drops the sender) comes quickly; a hang is a timeout.
    match heard.recv_timeout(Duration::from_secs(30)) {
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {}
        other => panic!("the run hung or returned: {other:?}"),
    }
    let panic = runner.join().expect_err("the worker's panic reaches the caller");
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(message.contains("a set's own assertion fails"), "{message}");
}
