//! Whole commands over a device that lies, in the style of TigerBeetle's simulator: each seed picks a fault
//! (silent corruption, a lost write, a misdirected write or read, an error, a torn write) and the operation it
//! hits, hands `run --verify` a real file wrapped in that fault through the target port, and checks the promise:
//! a run that passes had every block it wrote read back as written, and a run over any fault that reached its
//! data does not pass. `scan` gets the same treatment with read faults (an error, a short or refused read, a
//! stall), over a device (the region scan) and over files: a scan with a read the drive failed never passes, and
//! says what failed. A failing seed is printed, and `SSDLAB_FAULT_SEED=N` replays it alone.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use ssdlab_app::TargetPlan;
use ssdlab_app::ports::{Outcome, Ports, Targets};
use ssdlab_app::run::{Plan as RunPlan, RunFlags};
use ssdlab_app::testing::{CannedTools, FixedClock, RecordingConsole};
use ssdlab_core::device::Op;
use ssdlab_core::rng::Rng;
use ssdlab_targets::{AnyDevice, OpenError, OpenOptions, Opened};
use ssdlab_testdev::{Fault, FaultDevice, FaultLog, Rule};

/// Opens targets as the system does, then wraps each in a fault-injecting device with `rules`, keeping every
/// device's log.
struct FaultyTargets {
    seed: u64,
    rules: Vec<Rule>,
    /// With `Some(n)`, only the device of the n-th open (from 0) gets the rules.
    only_open: Option<usize>,
    /// Rules of their own for the targets named (a target may be opened more than once), besides `rules`.
    per_target: Vec<(String, Vec<Rule>)>,
    opens: std::sync::atomic::AtomicUsize,
    logs: Mutex<Vec<FaultLog>>,
}

impl FaultyTargets {
    fn new(seed: u64, rules: Vec<Rule>) -> Self {
        FaultyTargets {
            seed,
            rules,
            only_open: None,
            per_target: vec![],
            opens: std::sync::atomic::AtomicUsize::new(0),
            logs: Mutex::new(vec![]),
        }
    }

    /// Faults injected over every device opened.
    fn injected(&self) -> usize {
        self.logs.lock().unwrap().iter().map(FaultLog::len).sum()
    }
}

impl Targets for FaultyTargets {
    fn open(
        &self,
        target: &str,
        spec: &ssdlab_core::target::TargetSpec,
        options: &OpenOptions,
    ) -> Result<Opened, OpenError> {
        let opened = ssdlab_targets::open_spec(target, spec, options)?;
        let mut device = FaultDevice::new(opened.device, self.seed);
        let nth = self.opens.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.only_open.is_none_or(|n| n == nth) {
            for rule in &self.rules {
                device.add(rule.clone());
            }
        }
        for (_, rules) in self.per_target.iter().filter(|(named, _)| named == target) {
            for rule in rules {
                device.add(rule.clone());
            }
        }
        self.logs.lock().unwrap().push(device.log());
        Ok(Opened {
            device: AnyDevice::Dyn(Box::new(device)),
            undo: opened.undo,
        })
    }
}

/// The ports' other parts: no tools, the clock at a fixed time, no stop request.
fn still_world() -> (CannedTools, FixedClock, AtomicBool) {
    (
        CannedTools::default(),
        FixedClock::at(1_700_000_000.0),
        AtomicBool::new(false),
    )
}

/// 2 MiB written sequentially in 4 KiB blocks: 512 writes, then the verify pass's 512 reads.
const BLOCKS: u64 = 512;

/// The fault a seed chooses, and the operation kind it hits.
fn fault_of(rng: &mut Rng) -> (Fault, Op) {
    let byte = rng.next_u64() % 4096;
    let mask = 1u8 << (rng.next_u64() % 8);
    let by_bytes = 4096 * (1 + rng.next_u64() % (BLOCKS - 1));
    match rng.next_u64() % 7 {
        0 => (Fault::Corrupt { byte, mask }, Op::Write),
        1 => (Fault::Corrupt { byte, mask }, Op::Read),
        2 => (Fault::Lost, Op::Write),
        3 => (Fault::Misdirect { by_bytes }, Op::Write),
        4 => (Fault::Misdirect { by_bytes }, Op::Read),
        5 => (Fault::eio(), Op::Write),
        _ => (
            Fault::Torn {
                landed_bytes: 512 * (rng.next_u64() % 8),
            },
            Op::Write,
        ),
    }
}

/// Runs one seed, verifying or not; returns what failed, if anything.
fn one_seed(seed: u64, verify: bool) -> Result<String, String> {
    let mut rng = Rng::new(seed);
    let (fault, op) = fault_of(&mut rng);
    // Sometimes past the last operation of its kind: then nothing is injected, and the run must pass.
    let after = rng.next_u64() % (BLOCKS + BLOCKS / 4);
    let targets = FaultyTargets::new(seed, vec![Rule::new(fault.clone()).on(&[op]).after(after).once()]);
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    let target = format!("file:{}:2m", image.display());
    let plan = RunPlan::new(
        TargetPlan::plain(&target).unwrap(),
        RunFlags {
            rw: ssdlab_app::flags::rw_arg("write").unwrap(),
            mix: 0,
            block_bytes: 4096,
            qd: 1 + (seed % 8) as u32,
            span: "100%".parse().unwrap(),
            runtime_ns: None,
            bytes: Some(2 << 20),
            passes: None,
            rate: None,
            seed,
            norandommap: false,
            verify,
            ramp_ns: 0,
            jobs: 1,
        },
        None,
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    let (tools, clock, stop) = still_world();
    let mut ports = Ports::new(&mut console, &tools, &clock, &stop).with_targets(&targets);
    let outcome = ssdlab_app::run::run(&plan, &mut ports);
    let injected = targets.injected();
    let text = console.text();
    let what = format!(
        "seed {seed}: {fault:?} on the {op:?} after {after}: injected {injected}, outcome {outcome:?}"
    );
    match (injected, &outcome) {
        (0, Ok(Outcome::Passed)) => Ok(what),
        (0, _) => Err(format!(
            "{what}: nothing was injected, yet it did not pass\n{text}"
        )),
        (_, Ok(Outcome::Passed)) => Err(format!(
            "{what}: PASSED over a fault that reached its data\n{text}"
        )),
        (_, Ok(Outcome::Failed)) => {
            let named = text.contains("failed verification") || text.contains("I/O failed");
            if named {
                Ok(what)
            } else {
                Err(format!(
                    "{what}: failed without naming the verification or the I/O\n{text}"
                ))
            }
        }
        (_, other) => Err(format!("{what}: ended {other:?}\n{text}")),
    }
}

/// The seeds a test runs: `SSDLAB_FAULT_SEED=N` replays one, else 1 to `count`.
fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("SSDLAB_FAULT_SEED") {
        Ok(seed) => vec![seed.parse().expect("SSDLAB_FAULT_SEED is a number")],
        Err(_) => (1..=count).collect(),
    }
}

/// Runs `one` on each seed, asserts that none failed (every failure printed with its seed), and returns what
/// each seed said and how many injected their fault.
fn every_seed(
    what: &str,
    seeds: &[u64],
    one: impl Fn(u64) -> Result<String, String>,
) -> (Vec<String>, usize) {
    let (said, failures): (Vec<_>, Vec<_>) = seeds.iter().map(|&seed| one(seed)).partition(Result::is_ok);
    let failures: Vec<String> = failures.into_iter().filter_map(Result::err).collect();
    assert!(
        failures.is_empty(),
        "{} of {} {what} seeds failed (replay one with SSDLAB_FAULT_SEED=N):\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
    let said: Vec<String> = said.into_iter().filter_map(Result::ok).collect();
    let injected = said.iter().filter(|w| !w.contains("injected 0")).count();
    if seeds.len() > 1 {
        assert!(
            injected * 2 > seeds.len(),
            "most {what} seeds inject their fault ({injected} of {})",
            seeds.len()
        );
    }
    (said, injected)
}

#[test]
fn run_verify_never_passes_over_a_fault_that_reached_its_data() {
    let seeds = seeds(60);
    let (said, injected) = every_seed("run --verify", &seeds, |seed| one_seed(seed, true));
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    // Only a seed whose fault was injected counts for its kind, read and write apart.
    for what in said.iter().filter(|w| !w.contains("injected 0")) {
        let fault = what.split_once(": ").map_or("", |(_, rest)| rest);
        let kind = fault.split([' ', '{', '(']).next().unwrap_or("");
        let op = fault
            .split(" on the ")
            .nth(1)
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap_or("");
        *kinds.entry(format!("{kind} {op}")).or_default() += 1;
    }
    eprintln!(
        "{} seeds, {injected} injected a fault, every one caught; by kind: {kinds:?}",
        seeds.len()
    );
    if seeds.len() > 1 {
        // Every kind of fault reached a run.
        for kind in [
            "Corrupt Write",
            "Corrupt Read",
            "Lost Write",
            "Misdirect Write",
            "Misdirect Read",
            "Error Write",
            "Torn Write",
        ] {
            assert!(kinds.contains_key(kind), "no seed injected {kind}: {kinds:?}");
        }
    }
}

/// The oracle catches a known-bad peer: the same runs without `--verify` (a run that trusts every completion)
/// pass over silent faults, and the check above calls that out.
#[test]
fn the_check_catches_a_run_that_trusts_its_completions() {
    let caught = (1..=60)
        .filter_map(|seed| one_seed(seed, false).err())
        .filter(|e| e.contains("PASSED over a fault"))
        .count();
    eprintln!("without --verify, {caught} of 60 runs passed over a silent fault");
    assert!(
        caught >= 5,
        "only {caught} silent faults were passed over without --verify"
    );
}

/// A console whose JSON Lines cannot be written (stdout on a full disk): the command fails as it starts.
struct FullStdout(RecordingConsole);

impl ssdlab_app::Console for FullStdout {
    fn say(&mut self, line: &str) {
        self.0.say(line);
    }
    fn alarm(&mut self, line: &str) {
        self.0.alarm(line);
    }
    fn json_wanted(&self) -> bool {
        true
    }
    fn json_line(&mut self, _line: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other("no space left on device"))
    }
    fn print(&mut self, line: &str) -> std::io::Result<()> {
        self.0.print(line)
    }
    fn interrupted(&self) -> bool {
        false
    }
    fn progress_start(&mut self, name: &str) -> bool {
        self.0.progress_start(name)
    }
    fn progress_set(&mut self, fraction: Option<f64>, message: Option<&str>) {
        self.0.progress_set(fraction, message);
    }
    fn progress_finish(&mut self) {
        self.0.progress_finish();
    }
}

/// A command that ends without a result after the safety gate (here its JSON Lines cannot be written) takes away
/// the `--out` directory it made for it, and never one that was there: not the user's own, and not one reached
/// through a new directory and `..`.
#[test]
fn a_directory_made_for_a_result_that_never_came_is_taken_away_and_none_that_was_there() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    let target = format!("file:{}:1m", image.display());
    let users = dir.path().join("users");
    std::fs::create_dir(&users).unwrap();
    for (out, kept) in [
        (dir.path().join("made-for-it"), false),
        (users.clone(), true),
        (dir.path().join("new/../users"), true),
    ] {
        let plan = RunPlan::new(
            TargetPlan::plain(&target).unwrap(),
            RunFlags {
                rw: ssdlab_app::flags::rw_arg("write").unwrap(),
                mix: 0,
                block_bytes: 4096,
                qd: 1,
                span: "100%".parse().unwrap(),
                runtime_ns: None,
                bytes: Some(1 << 20),
                passes: None,
                rate: None,
                seed: 1,
                norandommap: false,
                verify: false,
                ramp_ns: 0,
                jobs: 1,
            },
            Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
        )
        .unwrap();
        let mut console = FullStdout(RecordingConsole::default());
        let (tools, clock, stop) = still_world();
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop);
        let outcome = ssdlab_app::run::run(&plan, &mut ports);
        assert!(
            outcome
                .as_ref()
                .is_err_and(|e| format!("{e:#}").contains("no space left")),
            "{}: {outcome:?}",
            out.display()
        );
        assert_eq!(out.is_dir(), kept, "{}", out.display());
    }
    assert!(users.is_dir());
}

/// The read fault a scan seed chooses: an error, a short read, a refused submission, or a stall long enough to
/// make its region slow.
fn read_fault_of(rng: &mut Rng) -> Fault {
    match rng.next_u64() % 4 {
        0 => Fault::eio(),
        1 => Fault::Short {
            keep_bytes: 4096 * (rng.next_u64() % 4),
        },
        2 => Fault::Refuse("the device went away".into()),
        _ => Fault::Stall { ns: 2_000_000_000 },
    }
}

/// A scan plan over `file` as a device (the region scan) or `dir`'s files, read in 64 KiB chunks at QD4.
fn scan_plan(region: bool, file: &std::path::Path, dir: &std::path::Path) -> ssdlab_app::scan::Plan {
    use ssdlab_app::flags::{Given, given_size, given_target};
    let device = region.then(|| given_target(&format!("file:{}", file.display())).unwrap());
    ssdlab_app::scan::Plan::new(ssdlab_app::scan::ScanFlags {
        paths: if region { vec![] } else { vec![dir.to_path_buf()] },
        target: None,
        device,
        regions: region.then_some(16),
        region_bytes: None,
        dataset: "field-report".into(),
        refresh_flagged: false,
        min_size: Given::of("64k", 64 << 10),
        reader: Some(ssdlab_app::scan::ReaderChoice::Chunks),
        chunk: Some(given_size("64k").unwrap()),
        qd: Some(4),
        random_reads: None,
        slower_than: 0.5,
        out: None,
        prom: None,
        allow_atime: false,
        state_dir: None,
    })
    .unwrap()
}

/// One scan seed: a region scan or a scan of files, one read of it faulted; what broke the promise, if anything.
fn one_scan_seed(seed: u64) -> Result<String, String> {
    let mut rng = Rng::new(seed);
    let region = rng.next_u64().is_multiple_of(2);
    let fault = read_fault_of(&mut rng);
    // 4 MiB in 64 KiB chunks is 64 reads (the region scan reads part of each region; a file scan 32 a file); some
    // seeds fault past the last read, and then the scan must pass.
    let after = rng.next_u64() % 80;
    let targets = FaultyTargets {
        // In a file scan, one of the two files is faulted.
        only_open: (!region).then_some((seed % 2) as usize),
        ..FaultyTargets::new(
            seed,
            vec![Rule::new(fault.clone()).on(&[Op::Read]).after(after).once()],
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // The region scan reads one 4 MiB file as a device; the file scan reads two 2 MiB files, so that a fault in
    // one leaves the other scanned (and the scan must still not pass).
    let file = data.join("first");
    let mut bytes = vec![0u8; 4 << 20];
    Rng::new(seed).fill(&mut bytes);
    if region {
        std::fs::write(&file, &bytes).unwrap();
    } else {
        std::fs::write(&file, &bytes[..2 << 20]).unwrap();
        std::fs::write(data.join("second"), &bytes[2 << 20..]).unwrap();
    }
    let plan = scan_plan(region, &file, &data);
    let mut console = RecordingConsole::default();
    let (tools, clock, stop) = still_world();
    let mut ports = Ports::new(&mut console, &tools, &clock, &stop).with_targets(&targets);
    let outcome = ssdlab_app::scan::run(&plan, &mut ports);
    let injected = targets.injected();
    let text = console.text();
    let what = format!(
        "seed {seed}: {} scan, {fault:?} on the read after {after}: injected {injected}, outcome {outcome:?}",
        if region { "region" } else { "file" }
    );
    let stall = matches!(fault, Fault::Stall { .. });
    match (injected, &outcome) {
        (0, Ok(Outcome::Passed)) => Ok(what),
        (0, _) => Err(format!(
            "{what}: nothing was injected, yet it did not pass\n{text}"
        )),
        // A stall is a slow read, not a failed one: the scan measures it (a region or file flagged slow, or a
        // spread it absorbs), and whatever it says, it says it measured.
        (_, Ok(_)) if stall => Ok(what),
        (_, Ok(Outcome::Passed)) => Err(format!("{what}: PASSED over a read that failed\n{text}")),
        (_, Ok(Outcome::Failed)) | (_, Err(_)) => {
            let said = format!(
                "{text}\n{}",
                outcome
                    .as_ref()
                    .err()
                    .map(|e| format!("{e:#}"))
                    .unwrap_or_default()
            );
            if said.contains("failed") || said.contains("short") || said.contains("went away") {
                Ok(what)
            } else {
                Err(format!("{what}: did not say which read failed\n{said}"))
            }
        }
        (_, other) => Err(format!("{what}: ended {other:?}\n{text}")),
    }
}

/// `scan` over a device (region scan) or files whose reads fail never passes, and says what failed.
#[test]
fn scan_never_passes_over_a_read_that_failed() {
    let seeds = seeds(24);
    let (_, injected) = every_seed("scan", &seeds, one_scan_seed);
    eprintln!(
        "{} scan seeds, {injected} injected a read fault, none passed over a failed read",
        seeds.len()
    );
}

/// Blocks a serve client writes, flushing after every eighth, then reads back.
const SERVED_BLOCKS: u64 = 64;

/// The fault a serve seed chooses, the operation it hits and after how many of those.
fn serve_fault_of(rng: &mut Rng) -> (Fault, Op, u64) {
    let byte = rng.next_u64() % 4096;
    let mask = 1u8 << (rng.next_u64() % 8);
    let by_bytes = 4096 * (1 + rng.next_u64() % (SERVED_BLOCKS - 1));
    let (fault, op) = match rng.next_u64() % 8 {
        0 => (Fault::eio(), Op::Write),
        1 => (Fault::eio(), Op::Read),
        2 => (Fault::eio(), Op::Flush),
        3 => (Fault::Refuse("the device is busy sanitizing".into()), Op::Write),
        4 => (
            Fault::Torn {
                landed_bytes: 512 * (rng.next_u64() % 8),
            },
            Op::Write,
        ),
        5 => (Fault::Corrupt { byte, mask }, Op::Write),
        6 => (Fault::Lost, Op::Write),
        _ => (Fault::Misdirect { by_bytes }, Op::Write),
    };
    // Sometimes past the last operation of its kind: then nothing is injected. The client flushes 8 times and the
    // server once more as it stops.
    let of_kind = if op == Op::Flush { 9 } else { SERVED_BLOCKS };
    (fault, op, rng.next_u64() % (of_kind + of_kind / 4))
}

fn served_block(seed: u64, i: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ (i << 32));
    (0..4096).map(|_| rng.next_u64() as u8).collect()
}

/// What the client saw: the NBD error of each write, flush and read, and the data each read returned.
#[derive(Default, Debug)]
struct ClientSaw {
    write_errors: Vec<u32>,
    flush_errors: Vec<u32>,
    reads: Vec<(u32, Vec<u8>)>,
}

impl ClientSaw {
    fn errors(&self) -> usize {
        let reads = self.reads.iter().filter(|(e, _)| *e != 0).count();
        let others = self
            .write_errors
            .iter()
            .chain(&self.flush_errors)
            .filter(|&&e| e != 0);
        reads + others.count()
    }
}

fn serve_client(socket: &std::path::Path, seed: u64) -> ClientSaw {
    use ssdlab_nbd::client::Client;
    // The socket is bound before the target opens; the greeting comes once the server serves.
    let stream = (0..500)
        .find_map(|_| {
            std::os::unix::net::UnixStream::connect(socket)
                .inspect_err(|_| std::thread::sleep(std::time::Duration::from_millis(10)))
                .ok()
        })
        .expect("serve bound its socket");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut client = Client::handshake(stream).expect("the handshake");
    let mut saw = ClientSaw::default();
    for i in 0..SERVED_BLOCKS {
        saw.write_errors
            .push(client.write(i * 4096, &served_block(seed, i), 0).unwrap());
        if i % 8 == 7 {
            saw.flush_errors.push(client.flush().unwrap());
        }
    }
    for i in 0..SERVED_BLOCKS {
        saw.reads.push(client.read(i * 4096, 4096).unwrap());
    }
    client.disconnect().unwrap();
    saw
}

/// Sets the stop flag when dropped, so a client that panics still lets the server return.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Serves a file through the fault of one seed to a client that writes, flushes and reads back; returns what
/// failed, if anything.
fn one_serve_seed(seed: u64) -> Result<String, String> {
    let mut rng = Rng::new(seed);
    let (fault, op, after) = serve_fault_of(&mut rng);
    let silent = fault.is_silent();
    let targets = FaultyTargets::new(seed, vec![Rule::new(fault.clone()).on(&[op]).after(after).once()]);
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    let socket = dir.path().join("nbd.sock");
    let plan = ssdlab_app::serve::Plan::new(ssdlab_app::serve::ServeFlags {
        target: TargetPlan::plain(&format!("file:{}:1m", image.display())).unwrap(),
        socket: Some(socket.clone()),
        listen: None,
        allow_remote: false,
        read_only: false,
        name: String::new(),
        qd: 4,
        max_connections: 4,
        poll_us: 0,
        out: None,
    })
    .unwrap();
    let mut console = RecordingConsole::default();
    let (tools, clock, stop) = still_world();
    let (outcome, saw) = std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            let _stop = StopOnDrop(&stop);
            serve_client(&socket, seed)
        });
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop).with_targets(&targets);
        let outcome = ssdlab_app::serve::run(&plan, &mut ports);
        let saw = client
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (outcome, saw)
    });
    let injected = targets.injected();
    let text = console.text();
    let what = format!(
        "seed {seed}: {fault:?} on the {op:?} after {after}: injected {injected}, client errors {}, outcome {outcome:?}",
        saw.errors()
    );
    let on_disk = std::fs::read(&image).map_err(|e| format!("{what}: the image: {e}"))?;
    // What each read returned is what the device held (a read fault aside): the server neither hides a lie of the
    // device's nor adds one of its own.
    for (i, (error, data)) in saw.reads.iter().enumerate() {
        let at = i * 4096;
        if *error == 0 && data[..] != on_disk[at..at + 4096] {
            return Err(format!(
                "{what}: block {i} was served unlike the device holds it\n{text}"
            ));
        }
    }
    let wrote_ok = |i: u64| saw.write_errors[i as usize] == 0;
    let mismatched = (0..SERVED_BLOCKS)
        .filter(|&i| {
            wrote_ok(i) && saw.reads[i as usize].0 == 0 && saw.reads[i as usize].1 != served_block(seed, i)
        })
        .count();
    match (injected, silent) {
        (0, _) => match outcome {
            Ok(Outcome::Passed) if saw.errors() == 0 && mismatched == 0 => Ok(what),
            _ => Err(format!(
                "{what}: nothing injected, yet not a clean session ({mismatched} blocks differ)\n{text}"
            )),
        },
        // The device lied and said nothing: only the client's own check of its data can see it, and it must.
        (_, true) => match outcome {
            Ok(Outcome::Passed) if mismatched > 0 && saw.errors() == 0 => Ok(what),
            _ => Err(format!(
                "{what}: a silent fault not seen by the client's read-back ({mismatched} blocks differ)\n{text}"
            )),
        },
        // The server's last flush, as it stops, failed: the session is an error, not a record of success.
        (_, false) if saw.errors() == 0 => match outcome {
            Err(e) if format!("{e:#}").contains("flush") => Ok(what),
            _ => Err(format!(
                "{what}: a fault no client heard of, yet the session did not fail\n{text}"
            )),
        },
        (_, false) => {
            let named = format!("the device failed {} of the", saw.errors());
            match outcome {
                Ok(Outcome::Failed) if text.contains(&named) && mismatched == 0 => Ok(what),
                _ => Err(format!(
                    "{what}: a device error a client was told of, but the session did not say '{named}' (or a block written without error reads back wrong: {mismatched})\n{text}"
                )),
            }
        }
    }
}

/// A serve session over a device that fails or lies: every failure reaches its client as an error and the
/// session's verdict names how many (never a quiet pass); a silent fault is passed through as the device holds
/// it, so the client's own read-back sees it; and with nothing injected everything round-trips.
#[test]
fn serve_tells_its_clients_and_its_record_of_every_device_failure() {
    let seeds = seeds(32);
    let (_, injected) = every_seed("serve", &seeds, one_serve_seed);
    eprintln!("{} serve seeds, {injected} injected a fault", seeds.len());
}

/// The outside review's fan-out, on real files through the target port: ten file drives, nine stalling 20 ms on
/// 0.2% of reads and one on 5%. The query's p99 sits in the stalls whatever that drive does (the nine others'
/// hiccups hold it), so the analysis that judged the p99 alone passed the fleet; it must name the drive at the
/// p95, with what reading it like the others buys there.
#[test]
fn fanout_names_the_drive_that_makes_the_query_slow_at_the_p95() {
    let dir = tempfile::tempdir().unwrap();
    let mut targets = Vec::new();
    let mut per_target = Vec::new();
    for i in 0..10 {
        let path = dir.path().join(format!("drive{i}"));
        std::fs::write(&path, vec![i as u8 + 1; 4 << 20]).unwrap();
        let text = format!("file:{}", path.display());
        targets.push(ssdlab_app::flags::given_target(&text).unwrap());
        let text = format!("file:{}", path.display());
        let chance = if i == 6 { 0.05 } else { 0.002 };
        per_target.push((
            text,
            vec![
                Rule::new(Fault::Stall { ns: 20_000_000 })
                    .on(&[Op::Read])
                    .chance(chance),
            ],
        ));
    }
    let faulty = FaultyTargets {
        per_target,
        ..FaultyTargets::new(7, vec![])
    };
    let plan = ssdlab_app::fanout::Plan::new(ssdlab_app::fanout::FanoutFlags {
        targets,
        fleet: None,
        age_by: None,
        refresh_all: false,
        shards: vec![],
        hedge: ssdlab_app::flags::Given::of("p95", 95.0),
        mode: ssdlab_app::fanout::Mode::Computed,
        runtime: ssdlab_app::flags::Given::of("3s", 3_000_000_000),
        bs: ssdlab_app::flags::Given::of("4k", 4096),
        seed: 1,
        out: None,
        prom: None,
        engine: ssdlab_io::Engine::Psync,
        from: vec![],
    })
    .unwrap();
    let mut console = RecordingConsole::default();
    let (tools, clock, stop) = still_world();
    let mut ports = Ports::new(&mut console, &tools, &clock, &stop).with_targets(&faulty);
    let outcome = ssdlab_app::fanout::run(&plan, &mut ports).unwrap();
    let text = console.text();
    assert!(
        faulty.injected() > 100,
        "{} stalls injected\n{text}",
        faulty.injected()
    );
    assert_eq!(outcome, Outcome::Failed, "{text}");
    let named = text
        .lines()
        .find(|l| l.starts_with("verdict   finding: "))
        .unwrap_or_else(|| panic!("no finding\n{text}"));
    assert!(
        named.contains("drive6 makes queries slow at ") && named.contains("p95 "),
        "{named}\n{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("verdict   finding: "))
            .count(),
        1,
        "only that drive is named\n{text}"
    );
}
