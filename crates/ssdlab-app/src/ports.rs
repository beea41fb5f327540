//! What a command reaches the world through: the console (human text, alarms, JSON Lines, progress), the opener
//! of its targets (through the safety gate), the process runner (smartctl, nvme-cli, hdparm), the wall clock and
//! the moment the command began. The binary passes the terminal and the system; tests pass a recording console,
//! canned tools, a fixed clock and targets wrapped in faults, and drive whole commands without root.
//!
//! This module owns the port traits and the system implementations of the tools and clock; it never decides what
//! a command does, and it never writes to a terminal itself (that is the binary's console).

use std::io;
use std::sync::atomic::AtomicBool;

/// Where a command's words go. The command decides what to say; the console decides how it is shown.
pub trait Console {
    /// One line of human text (the CLI: stderr, hidden by `--quiet`).
    fn say(&mut self, line: &str);
    /// A line the user must see even when quiet: an error, a failed verification, data left pending.
    fn alarm(&mut self, line: &str);
    /// Whether the user asked for JSON Lines (`--json`).
    fn json_wanted(&self) -> bool;
    /// Writes one JSON Lines record. A `BrokenPipe` error means the reader went away: the command stops writing
    /// and stops measuring, and that is not a failure.
    fn json_line(&mut self, line: &[u8]) -> io::Result<()>;
    /// A command's own output (a table, a profile list, a completion script): the CLI's stdout. `BrokenPipe` as
    /// for [`Console::json_line`].
    fn print(&mut self, line: &str) -> io::Result<()>;
    /// Whether the user asked the command to stop (Ctrl-C, SIGTERM).
    fn interrupted(&self) -> bool;
    /// Starts showing a phase's progress. Returns whether a live indicator is shown (then no "phase started" line
    /// is needed).
    fn progress_start(&mut self, name: &str) -> bool;
    /// The phase's fraction done (0 to 1) and a short line of its latest figures, each when it changed.
    fn progress_set(&mut self, fraction: Option<f64>, message: Option<&str>);
    /// Stops showing the phase's progress.
    fn progress_finish(&mut self);
}

/// What running an external tool produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The exit code, or None when a signal ended it.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Runs external tools: one command line in, its output back, or the error that kept it from starting
/// (`NotFound` when the tool is not installed).
pub trait Tools: Sync {
    fn run(&self, argv: &[String]) -> io::Result<ToolOutput>;
}

/// The system's tools, run with `std::process::Command`.
pub struct SystemTools;

impl Tools for SystemTools {
    fn run(&self, argv: &[String]) -> io::Result<ToolOutput> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty command line"))?;
        // "Text file busy": something still holds the executable open for writing (a package upgrade replacing
        // it, or a process forked while it was being written): it passes, so try again for a moment.
        let mut attempt = 0;
        let output = loop {
            let run = std::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .and_then(|child| {
                    // A tool ssdlab runs is not "another program" using a device it then writes (the gate's
                    // survey skips it), until it is reaped.
                    let pid = child.id();
                    ssdlab_io::guard::spawned(pid);
                    let output = child.wait_with_output();
                    ssdlab_io::guard::reaped(pid);
                    output
                });
            match run {
                Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempt < 20 => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        Ok(ToolOutput {
            exit_code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// ETXTBSY, the same number on every Linux architecture.
const ETXTBSY: i32 = 26;

/// Opens the targets a command names: `target` as given (for messages), `spec` what it was parsed into. The
/// system's goes through ssdlab-targets (the one opener, with the safety gate); a test's may wrap what that opens
/// in a fault-injecting device ([`ssdlab_targets::AnyDevice::Dyn`]).
pub trait Targets: Sync {
    fn open(
        &self,
        target: &str,
        spec: &ssdlab_core::target::TargetSpec,
        options: &ssdlab_targets::OpenOptions,
    ) -> Result<ssdlab_targets::Opened, ssdlab_targets::OpenError>;
}

/// The system's targets: ssdlab-targets' opener as it is.
pub struct SystemTargets;

impl Targets for SystemTargets {
    fn open(
        &self,
        target: &str,
        spec: &ssdlab_core::target::TargetSpec,
        options: &ssdlab_targets::OpenOptions,
    ) -> Result<ssdlab_targets::Opened, ssdlab_targets::OpenError> {
        ssdlab_targets::open_spec(target, spec, options)
    }
}

/// The wall clock, in seconds since the Unix epoch: time stamps, data ages, history. (Measurements use the
/// device's own clock, never this one.)
pub trait Clock: Sync {
    fn unix_now_s(&self) -> f64;
    /// Waits `seconds` (a firmware purge's polls).
    fn sleep_s(&self, seconds: u64);
}

/// The system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn unix_now_s(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }

    fn sleep_s(&self, seconds: u64) {
        std::thread::sleep(std::time::Duration::from_secs(seconds));
    }
}

/// Everything a command's run reaches besides its target.
pub struct Ports<'a> {
    pub console: &'a mut dyn Console,
    pub targets: &'a dyn Targets,
    pub tools: &'a dyn Tools,
    pub clock: &'a dyn Clock,
    /// When the command began (Unix seconds): a result's `started_at`, however long the command then took.
    pub started_unix_s: u64,
    /// The stop request (Ctrl-C, SIGTERM) as worker threads read it.
    pub stop: Stop<'a>,
}

/// Where a command's stop request comes from.
#[derive(Clone, Copy)]
pub enum Stop<'a> {
    /// SIGINT and SIGTERM. Their handler is installed the first time a command asks for the flag, so a command
    /// that never watches for a stop (a scan, `sim wa`) is still ended by Ctrl-C at once, as before.
    Signals,
    /// A flag the caller sets (tests).
    Flag(&'a AtomicBool),
}

impl<'a> Stop<'a> {
    /// The flag, installing the signal handler first for [`Stop::Signals`]: ask for it before anything that a
    /// signal must not interrupt uncleanly (serve asks before it binds its socket).
    pub fn flag(self) -> &'a AtomicBool {
        match self {
            Stop::Signals => ssdlab_io::sys::interrupt_flag(),
            Stop::Flag(flag) => flag,
        }
    }
}

impl<'a> Ports<'a> {
    /// The system's tools and clock, with `console`; the command begins now.
    pub fn system(console: &'a mut dyn Console) -> Self {
        let clock = &SystemClock;
        Ports {
            console,
            targets: &SystemTargets,
            tools: &SystemTools,
            started_unix_s: clock.unix_now_s() as u64,
            clock,
            stop: Stop::Signals,
        }
    }

    /// Ports made of the given parts (tests: a recording console, canned tools, a fixed clock).
    pub fn new(
        console: &'a mut dyn Console,
        tools: &'a dyn Tools,
        clock: &'a dyn Clock,
        stop: &'a AtomicBool,
    ) -> Self {
        Ports {
            console,
            targets: &SystemTargets,
            tools,
            started_unix_s: clock.unix_now_s() as u64,
            clock,
            stop: Stop::Flag(stop),
        }
    }

    /// The same ports opening targets through `targets` (a test's faults).
    pub fn with_targets(mut self, targets: &'a dyn Targets) -> Self {
        self.targets = targets;
        self
    }

    /// Notes that a (next) command begins now: the demo runs several in turn.
    pub fn mark_start(&mut self) {
        self.started_unix_s = self.clock.unix_now_s() as u64;
    }

    /// The wall clock in whole seconds.
    pub fn unix_now_s(&self) -> u64 {
        self.clock.unix_now_s() as u64
    }

    /// Says several lines (a renderer's text).
    pub fn say_lines(&mut self, lines: impl IntoIterator<Item = String>) {
        for line in lines {
            self.console.say(&line);
        }
    }

    /// Prints a command's own output line by line; a reader that went away ends it quietly with
    /// [`Outcome::PipeClosed`], as Unix tools do.
    pub fn print_lines(&mut self, lines: impl IntoIterator<Item = String>) -> anyhow::Result<Outcome> {
        for line in lines {
            if let Err(e) = self.console.print(&line) {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    return Ok(Outcome::PipeClosed);
                }
                return Err(anyhow::Error::new(e).context("writing to stdout"));
            }
        }
        Ok(Outcome::Passed)
    }
}

/// How a command that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ran, and every criterion passed: exit 0.
    Passed,
    /// Ran, and a criterion failed (I/O error, verify mismatch, ...): exit 1.
    Failed,
    /// Ran, read nothing to judge (a drive's output without health data) and failed nothing: exit 3.
    Unknown,
    /// Stopped by Ctrl-C or SIGTERM after writing what was measured: exit 130.
    Interrupted,
    /// The output's reader went away (e.g. `| head`): exit 0, as a broken pipe is not an error.
    PipeClosed,
}

impl Outcome {
    /// How a command that published a verdict ended, by DESIGN's order: a stop request (Ctrl-C, SIGTERM) first
    /// (exit 130; an error, ranked next, is the caller's `Err`), then a failed criterion or a finding (1), then
    /// unknown (3: nothing was read to judge), then passed (0). A reader that went away (`| head`) adds nothing of its own: a verdict reached on a run that
    /// ran to its end stands; a run the closed pipe cut short ends quietly, as Unix tools do, whatever its
    /// verdict said of the part it measured.
    pub fn decide(
        interrupted: bool,
        pipe_closed: bool,
        verdict: &ssdlab_core::schema::Verdict,
        complete: bool,
    ) -> Self {
        if interrupted {
            Outcome::Interrupted
        } else if pipe_closed && !complete {
            Outcome::PipeClosed
        } else if verdict.passed {
            Outcome::Passed
        } else if verdict.unknown && !verdict.finding {
            Outcome::Unknown
        } else {
            Outcome::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;
    use ssdlab_core::schema::Verdict;

    fn verdict(passed: bool, finding: bool) -> Verdict {
        Verdict {
            finding,
            passed,
            reasons: if passed { vec![] } else { vec!["a reason".into()] },
            unknown: false,
        }
    }

    /// DESIGN's order: interrupted (130) over failed or finding (1) over unknown (3) over passed (0); a closed pipe changes
    /// nothing but ends a run it cut short quietly. (An error, 2, is the caller's `Err`, decided before this.)
    #[test]
    fn the_outcome_follows_designs_order_and_a_closed_pipe_adds_nothing_of_its_own() {
        let (passed, failed, finding) = (verdict(true, false), verdict(false, false), verdict(false, true));
        // Interrupted wins over everything, a closed pipe included.
        for v in [&passed, &failed, &finding] {
            for pipe in [false, true] {
                for complete in [false, true] {
                    assert_eq!(Outcome::decide(true, pipe, v, complete), Outcome::Interrupted);
                }
            }
        }
        assert_eq!(Outcome::decide(false, false, &passed, true), Outcome::Passed);
        assert_eq!(Outcome::decide(false, false, &failed, true), Outcome::Failed);
        assert_eq!(Outcome::decide(false, false, &finding, true), Outcome::Failed);
        // A reader that left after the run ended: the verdict stands, failed or passed.
        assert_eq!(Outcome::decide(false, true, &failed, true), Outcome::Failed);
        assert_eq!(Outcome::decide(false, true, &passed, true), Outcome::Passed);
        // A reader that left and so stopped the run: it ends quietly, as `| head` expects.
        assert_eq!(Outcome::decide(false, true, &failed, false), Outcome::PipeClosed);
        // Nothing read to judge: unknown (3), under an interrupt, never passing.
        let unknown = Verdict {
            unknown: true,
            ..failed.clone()
        };
        assert_eq!(unknown.kind(), "unknown");
        assert_eq!(Outcome::decide(false, false, &unknown, true), Outcome::Unknown);
        assert_eq!(Outcome::decide(true, false, &unknown, true), Outcome::Interrupted);
    }
}
