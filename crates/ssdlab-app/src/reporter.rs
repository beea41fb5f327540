//! The live stream of a run: JSON Lines events (phase, sample, summary, begin, analysis, verdict), progress, the
//! phase lines, CPU time per phase, and the stop request (Ctrl-C, or a reader that went away). It turns the
//! engine's and the methods' observer calls into console calls; it never writes a file and never prints by itself.

use std::io;

use anyhow::{Context, Result};
use ssdlab_core::schema::{Event, PhaseResult, Sample};
use ssdlab_core::units::{DecimalBytes, Nanos};
use ssdlab_engine::Observer;
use ssdlab_io::sys::{CpuTimes, cpu_times};

use crate::ports::Console;

pub struct Reporter<'c> {
    console: &'c mut dyn Console,
    /// Set when the JSON reader went away: stop writing and stop the run (a broken pipe is not an error).
    pipe_closed: bool,
    /// A live progress indicator is shown for the current phase.
    progress_shown: bool,
    phase: String,
    /// Process CPU times when the current phase started issuing (after buffers were prepared) and when its
    /// measured part ended (before any verify read-back).
    cpu_at_start: CpuTimes,
    cpu_at_end: Option<CpuTimes>,
    /// Whether each phase's start and end get a line (a method of many phases turns them off).
    phase_lines: bool,
    /// Whether any phase began issuing I/O: after that, what opening the target laid out holds the run's data, and
    /// a failing run must not take it back as a refusal would.
    issued: bool,
}

impl<'c> Reporter<'c> {
    pub fn new(console: &'c mut dyn Console) -> Self {
        Reporter {
            console,
            pipe_closed: false,
            progress_shown: false,
            phase: String::new(),
            cpu_at_start: cpu_times(),
            cpu_at_end: None,
            phase_lines: true,
            issued: false,
        }
    }

    /// One line of human text.
    pub fn say(&mut self, line: &str) {
        self.console.say(line);
    }

    /// Several lines of human text (a renderer's).
    pub fn say_lines(&mut self, lines: impl IntoIterator<Item = String>) {
        for line in lines {
            self.console.say(&line);
        }
    }

    /// A line shown even when quiet.
    pub fn alarm(&mut self, line: &str) {
        self.console.alarm(line);
    }

    /// CPU time used by the measured part of the current phase.
    pub fn phase_cpu(&self) -> CpuTimes {
        self.cpu_at_end.unwrap_or_else(cpu_times).since(self.cpu_at_start)
    }

    /// Writes one event as a JSON line when the user asked for them.
    pub fn emit(&mut self, event: &Event) -> Result<()> {
        if !self.console.json_wanted() || self.pipe_closed {
            return Ok(());
        }
        let line = serde_json::to_vec(event).context("serializing an event")?;
        match self.console.json_line(&line) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.pipe_closed = true;
                Ok(())
            }
            Err(e) => Err(e).context("writing JSON to stdout"),
        }
    }

    /// Whether the user asked for JSON Lines.
    pub fn json_wanted(&self) -> bool {
        self.console.json_wanted()
    }

    pub fn pipe_closed(&self) -> bool {
        self.pipe_closed
    }

    pub fn interrupted(&self) -> bool {
        self.console.interrupted()
    }

    /// Starts a phase: its event, and progress with its name.
    /// Whether any phase began issuing I/O through this reporter.
    pub fn issued_io(&self) -> bool {
        self.issued
    }

    pub fn start_phase(&mut self, name: &str) -> Result<()> {
        self.phase = name.to_string();
        self.progress_shown = self.console.progress_start(name);
        self.emit(&Event::Phase {
            name: name.to_string(),
        })
    }

    pub fn finish_phase(&mut self) {
        if std::mem::take(&mut self.progress_shown) {
            self.console.progress_finish();
        }
    }
}

impl Observer for Reporter<'_> {
    fn started(&mut self) {
        self.issued = true;
        self.cpu_at_start = cpu_times();
        self.cpu_at_end = None;
    }

    fn measured(&mut self) {
        self.cpu_at_end = Some(cpu_times());
    }

    fn sample(&mut self, sample: &Sample) {
        if self.progress_shown {
            let message = format!(
                "{} IOPS  {}  p99 {}",
                ssdlab_core::units::Count(sample.iops),
                ssdlab_core::units::DecimalRate(sample.bytes_per_s),
                Nanos(sample.latency_ns_p99 as f64)
            );
            self.console.progress_set(None, Some(&message));
        }
        let event = Event::Sample {
            phase: self.phase.clone(),
            sample: sample.clone(),
        };
        // A failed write other than a closed pipe cannot be reported from here; the final summary write reports
        // it.
        let _ = self.emit(&event);
    }

    fn live(&mut self, sample: &Sample) {
        // Jobs' seconds added up, shown as they run; the worst job's p99 is an upper bound of the phase's, so it is
        // said as one.
        if self.progress_shown {
            let message = format!(
                "{} IOPS  {}  p99 <= {}",
                ssdlab_core::units::Count(sample.iops),
                ssdlab_core::units::DecimalRate(sample.bytes_per_s),
                Nanos(sample.latency_ns_p99 as f64)
            );
            self.console.progress_set(None, Some(&message));
        }
    }

    fn progress(&mut self, fraction: f64) {
        if self.progress_shown {
            self.console.progress_set(Some(fraction), None);
        }
    }

    fn stop_requested(&self) -> bool {
        self.pipe_closed || self.console.interrupted()
    }
}

impl ssdlab_methods::MethodObserver for Reporter<'_> {
    fn alarm(&mut self, line: &str) {
        self.console.alarm(line);
    }

    fn say(&mut self, line: &str) {
        self.console.say(line);
    }

    fn begin_phase(&mut self, name: &str) {
        // A stdout failure other than a closed pipe surfaces at the final events.
        let _ = self.start_phase(name);
        if self.phase_lines && !self.progress_shown {
            self.console.say(&format!("phase     {name} started"));
        }
    }

    fn end_phase(&mut self, phase: &PhaseResult) {
        self.finish_phase();
        let s = &phase.summary;
        if self.phase_lines {
            self.console.say(&format!(
                "phase     {:<13}{:>6} IOPS{:>10}{:>11} in {}, p99 {}{}",
                phase.name,
                ssdlab_core::units::Count(s.iops).to_string(),
                ssdlab_core::units::DecimalRate(s.bytes_per_s).to_string(),
                // As a string: the units' Display ignores widths, which glued the figures together.
                DecimalBytes(s.bytes as f64).to_string(),
                // A phase of a millisecond reads "675 µs", not "0.0 s".
                Nanos(s.seconds * 1e9),
                Nanos(s.latency_ns.p99 as f64),
                if phase.complete { "" } else { "  (interrupted)" }
            ));
            // Over a cached target: what the cache did in the phase, write-arounds with their reasons.
            if let Some(cache) = &s.cache {
                for line in ssdlab_report::text::cache_lines(cache) {
                    self.console.say(&line);
                }
            }
        }
        let _ = self.emit(&Event::Summary {
            phase: phase.name.clone(),
            summary: s.clone(),
            complete: phase.complete,
        });
    }

    fn phase_cpu(&self) -> (f64, f64) {
        let cpu = Reporter::phase_cpu(self);
        (cpu.user_s, cpu.sys_s)
    }

    fn show_phase_lines(&mut self, show: bool) {
        self.phase_lines = show;
    }
}
