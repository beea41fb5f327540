//! What the app-level test files share: a command run in-process through its ports (a recording console taking
//! JSON Lines, no tools, a fixed clock, a stop flag never set), its JSON Lines as values, result directories read
//! back, and each command's flags at the defaults the binary gives them.

// Each test file uses some of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde_json::Value;
use ssdlab_app::export::OutDir;
use ssdlab_app::methodology::options::{
    ConsistencyFlags, LatencyFlags, PtsFlags, QuickFlags, ReplayFlags, SweepFlags, TrimFlags, TrimMeasure,
};
use ssdlab_app::methodology::{self, MethodPlan};
use ssdlab_app::ports::{Outcome, Ports};
use ssdlab_app::run::RunFlags;
use ssdlab_app::testing::{CannedTools, FixedClock, RecordingConsole};
use ssdlab_app::{TargetPlan, flags};

/// 2023-11-14 22:13:20 UTC, when every command of these tests begins.
pub const NOW_S: f64 = 1_700_000_000.0;

/// How a command run in-process ended, with everything it said, streamed and printed.
pub struct Ran {
    pub outcome: Outcome,
    pub console: RecordingConsole,
}

impl Ran {
    /// The JSON Lines records, parsed (each line is one JSON value, or this panics).
    pub fn events(&self) -> Vec<Value> {
        self.console
            .json
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
            .collect()
    }

    /// Everything said and alarmed (the binary's stderr), one line each.
    pub fn text(&self) -> String {
        self.console.text()
    }

    /// The command's own output lines (the binary's stdout besides JSON Lines), each parsed as JSON.
    pub fn printed_json(&self) -> Vec<Value> {
        self.console
            .printed
            .iter()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
            .collect()
    }
}

/// Runs a command through test ports with a console that takes JSON Lines; panics with the error if it fails to
/// run at all.
pub fn ran(command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>) -> Ran {
    ran_at(NOW_S, command)
}

/// The wall clock now, in Unix seconds: for commands over real files, whose times are the host's.
pub fn wall_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// [`ran`] with the clock standing at `unix_s` (say, [`wall_now_s`] for real files written just now).
pub fn ran_at(unix_s: f64, command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>) -> Ran {
    ran_with(&CannedTools::default(), unix_s, command)
}

/// [`ran_at`] with `tools` answering for smartctl and nvme-cli.
pub fn ran_with(
    tools: &CannedTools,
    unix_s: f64,
    command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>,
) -> Ran {
    let mut console = RecordingConsole::with_json();
    let result = with_ports(&mut console, tools, unix_s, command);
    match result {
        Ok(outcome) => Ran { outcome, console },
        Err(e) => panic!("the command failed to run: {e:#}\n{}", console.text()),
    }
}

/// Runs a command that must be refused; returns what the binary's stderr would hold: every line said before the
/// refusal, then the refusal as `ssdlab: error: ` prints it.
pub fn refusal(command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>) -> String {
    refusal_at(NOW_S, command)
}

/// [`refusal`] with the clock standing at `unix_s`.
pub fn refusal_at(unix_s: f64, command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>) -> String {
    refusal_with(&CannedTools::default(), unix_s, command)
}

/// [`refusal_at`] with `tools` answering for smartctl and nvme-cli.
pub fn refusal_with(
    tools: &CannedTools,
    unix_s: f64,
    command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>,
) -> String {
    let mut console = RecordingConsole::with_json();
    match with_ports(&mut console, tools, unix_s, command) {
        Ok(outcome) => panic!("not refused: {outcome:?}\n{}", console.text()),
        Err(e) => {
            let mut said = console.text();
            if !said.is_empty() {
                said.push('\n');
            }
            said + &format!("{e:#}")
        }
    }
}

fn with_ports(
    console: &mut RecordingConsole,
    tools: &CannedTools,
    unix_s: f64,
    command: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    let (clock, stop) = (FixedClock::at(unix_s), AtomicBool::new(false));
    command(&mut Ports::new(console, tools, &clock, &stop))
}

/// Asserts a refusal as the binary's usage errors are checked: it says `says` (the flag at fault, say), and it is
/// the one line the command said.
pub fn assert_one_line_naming(refusal: &str, says: &str) {
    assert!(refusal.contains(says), "the refusal should say {says}: {refusal}");
    assert_eq!(refusal.trim().lines().count(), 1, "one line: {refusal}");
}

/// The last event of `kind`.
pub fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))
}

/// The last phase summary streamed.
pub fn summary(events: &[Value]) -> &Value {
    &event(events, "summary")["data"]["summary"]
}

/// Operations counted by the streamed per-second samples.
pub fn sampled_ios(events: &[Value]) -> u64 {
    events
        .iter()
        .filter(|e| e["type"] == "sample")
        .map(|e| e["data"]["sample"]["ios"].as_u64().unwrap())
        .sum()
}

pub fn read_result(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("result.json")).unwrap()).unwrap()
}

pub fn phase<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

/// The phases' names, in order.
pub fn phase_names(result: &Value) -> Vec<&str> {
    result["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ssdlab-test-")
        .tempdir()
        .expect("temp dir")
}

/// `--out DIR`, without `--replace`.
pub fn out(dir: &Path) -> Option<OutDir> {
    Some(OutDir::new(dir.to_path_buf(), false))
}

/// `file:PATH[:SIZE]`.
pub fn file_target(path: &Path, size: Option<&str>) -> String {
    match size {
        Some(size) => format!("file:{}:{size}", path.display()),
        None => format!("file:{}", path.display()),
    }
}

/// `ssdlab run`'s flags as the binary defaults them (randread, 4 KiB, QD32, the whole target, 10 s, seed 1).
pub fn run_defaults() -> RunFlags {
    RunFlags {
        rw: flags::rw_arg("randread").unwrap(),
        mix: 70,
        block_bytes: 4096,
        qd: 32,
        span: "100%".parse().unwrap(),
        runtime_ns: None,
        bytes: None,
        passes: None,
        rate: None,
        seed: 1,
        norandommap: false,
        verify: false,
        ramp_ns: 0,
        jobs: 1,
    }
}

/// A duration as the binary's value parser reads it (`2s`, `500ms`).
pub fn ns(text: &str) -> u64 {
    flags::duration_arg(text).unwrap()
}

/// A size as the binary's value parser reads it (`4k`, `1g`).
pub fn bytes(text: &str) -> u64 {
    flags::size_arg(text).unwrap()
}

/// `ssdlab run` in-process: `--target TARGET`, the flags, `--out`.
pub fn run_command(target: &str, flags: RunFlags, out_dir: Option<&Path>) -> Ran {
    let plan =
        ssdlab_app::run::Plan::new(TargetPlan::plain(target).unwrap(), flags, out_dir.and_then(out)).unwrap();
    ran(|ports| ssdlab_app::run::run(&plan, ports))
}

/// `ssdlab test ...` (or `quick`) in-process on `target` with seed 1.
pub fn test_command(target: &str, method: MethodPlan, out_dir: Option<&Path>) -> Ran {
    let plan = methodology::Plan::new(
        TargetPlan::plain(target).unwrap(),
        1,
        out_dir.and_then(out),
        method,
    )
    .unwrap();
    ran(|ports| methodology::run(plan, ports))
}

/// `test consistency`'s flags as the binary defaults them (2000 s, no extra OP, one fill).
pub fn consistency_defaults() -> ConsistencyFlags {
    ConsistencyFlags {
        runtime_ns: ns("2000s"),
        op: 0,
        fill_passes: 1,
    }
}

/// `test trim`'s flags as the binary defaults them (40 minutes of torture, 60 s per state, no idle time).
pub fn trim_defaults() -> TrimFlags {
    TrimFlags {
        torture_ns: ns("40m"),
        measure: TrimMeasure::For(ns("60s")),
        idle_ns: None,
    }
}

/// `test sweep`'s flags as the binary defaults them (2 GiB at QD4, 512 B to 64 MiB, 10 s a size, by size).
pub fn sweep_defaults() -> SweepFlags {
    SweepFlags {
        test_bytes: bytes("2g"),
        qd: 4,
        from_bytes: 512,
        to_bytes: bytes("64m"),
        size_runtime_ns: ns("10s"),
        axis: ssdlab_methods::sweep::SweepAxis::Size,
        block_bytes: None,
        max_qd: None,
        jobs: 1,
    }
}

/// `test latency`'s flags as the binary defaults them (random writes over 8 GiB for 60 s).
pub fn latency_defaults() -> LatencyFlags {
    LatencyFlags {
        rw: ssdlab_methods::latency::LatencyRw::RandWrite,
        span_bytes: bytes("8g"),
        runtime_ns: ns("60s"),
    }
}

/// `test pts`'s flags as the binary defaults them (the IOPS test, 60 s cells, the whole drive, 25 rounds,
/// enterprise).
pub fn pts_defaults() -> PtsFlags {
    PtsFlags {
        test: ssdlab_methods::pts::PtsTest::Iops,
        round_ns: ns("60s"),
        span: 100.0,
        qd: None,
        max_rounds: 25,
        flavour: ssdlab_methods::pts::PtsFlavour::Enterprise,
    }
}

/// `quick`'s flags as the binary defaults them (5 repeats of 5 s over 1 GiB).
pub fn quick_defaults() -> QuickFlags {
    QuickFlags {
        repeats: 5,
        runtime_ns: ns("5s"),
        span_bytes: bytes("1g"),
        keep: false,
        profile: ssdlab_methods::quick::QuickProfile::Default,
    }
}

/// `test replay --trace TRACE`'s flags as the binary defaults them (the format detected, at the trace's own
/// times, QD32, offsets folded onto the device, every disk).
pub fn replay_defaults(trace: &Path) -> ReplayFlags<'_> {
    ReplayFlags::at_trace_times(trace)
}

/// Writes `len` bytes of a seeded xorshift stream to `path`, modified a minute ago (refresh leaves files modified
/// in the last moments alone).
pub fn write_random(path: &Path, len: usize, seed: u64) {
    let mut x = seed | 1;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, data).unwrap();
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(minute_ago)
        .unwrap();
}

/// Sets a file's access and modification times, as `touch -d` does.
pub fn set_times(path: &Path, at: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_accessed(at).set_modified(at))
        .unwrap();
}
