//! One recording skeleton for every command that leaves a result: when `--out` is created, in which order a
//! result is published (the files first, then the JSON Lines record, so a stream that fails never costs the
//! result), what is said about it, and which outcome wins when several apply.
//!
//! A plan checks `--out` and `--prom` without creating anything ([`crate::export::check_out_dir`],
//! [`crate::export::check_prom_path`]). [`Recording::begin`] creates the directory, and a command calls it only
//! once the safety gate has let it through, so a refusal leaves nothing behind, yet before anything is measured
//! or destroyed, so a directory that cannot take the result is known before the run is spent.
//! [`Recording::finish`] writes the result by the output rule (ssdlab-outputs: created new, or replacing only
//! ssdlab's own output) and decides the outcome by DESIGN's order: interrupted (130) over an error (2) over a
//! failed criterion or a finding (1) over passed (0); a reader that went away changes nothing but stops the
//! stream.
//!
//! What this module must never do: judge a measurement (the verdict comes from the command's library), or write
//! a file other than through the exporters.

use std::path::Path;

use anyhow::Result;
use ssdlab_core::DeviceInfo;
use ssdlab_core::prom::Exposition;
use ssdlab_core::schema::options::RunOptions;
use ssdlab_core::schema::{Analysis, Event, PhaseResult, RunResult, Verdict};
use ssdlab_core::units::rfc3339_utc;

use crate::export::{self, OutDir};
use crate::ports::Outcome;
use crate::reporter::Reporter;

/// A command's record from the moment the gate let it through: where it goes and when it began.
pub struct Recording<'o> {
    out: Option<&'o OutDir>,
    prom: Option<&'o Path>,
    started_at: String,
    /// The `begin` event went out when the command started (a command that streams samples says it first).
    announced: bool,
    /// `begin` made the directory itself (mkdir(2) of its last component succeeded): a command that stops before
    /// it has a result (a refusal after the gate, an error) takes it away again, if it still holds nothing.
    created: bool,
    finished: bool,
}

/// What a command measured and concluded, for [`Recording::finish`].
pub struct Finished {
    pub target: DeviceInfo,
    pub options: RunOptions,
    /// The phases with their per-second samples (none for a command whose result is an analysis alone).
    pub phases: Vec<PhaseResult>,
    pub analysis: Analysis,
    pub verdict: Verdict,
    /// The command ran to its end (not stopped by Ctrl-C or a reader that went away).
    pub complete: bool,
    /// Whether a stop request cut the command short.
    pub interrupted: Interruption,
    /// Metrics for `--prom`, when the command offers them.
    pub metrics: Option<Exposition>,
    /// What the command has already done to the world and a lost record would hide (an erase, a discard, files
    /// rewritten): said in the error when the record cannot be written.
    pub done: Option<String>,
}

/// Who knows whether a stop request cut the command short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// The console's stop request (Ctrl-C, SIGTERM) during the command: most commands.
    AsTheConsoleSays,
    /// The command knows: a fan-out reads its own stop flag, and a serve session ends on a stop request as its
    /// normal end (not an interruption).
    Known(bool),
}

impl Finished {
    /// A result that is an analysis: no phases, run to its end, its interruption as the console says, no
    /// metrics, nothing done that a lost record would hide. The methods below say otherwise.
    pub fn new(target: DeviceInfo, options: RunOptions, analysis: Analysis, verdict: Verdict) -> Self {
        Finished {
            target,
            options,
            phases: vec![],
            analysis,
            verdict,
            complete: true,
            interrupted: Interruption::AsTheConsoleSays,
            metrics: None,
            done: None,
        }
    }

    /// The phases measured, and whether the command ran to its end.
    pub fn phases(mut self, phases: Vec<PhaseResult>, complete: bool) -> Self {
        self.phases = phases;
        self.complete = complete;
        self
    }

    /// The command read its own stop flag: `interrupted` says whether a stop cut it short.
    pub fn interrupted(mut self, interrupted: bool) -> Self {
        self.interrupted = Interruption::Known(interrupted);
        self.complete = !interrupted;
        self
    }

    /// A stop request is how the command ends (serve), not an interruption of it.
    pub fn ends_on_a_stop(mut self) -> Self {
        self.interrupted = Interruption::Known(false);
        self
    }

    /// Metrics for `--prom`.
    pub fn metrics(mut self, metrics: Option<Exposition>) -> Self {
        self.metrics = metrics;
        self
    }

    /// What the command has already done that a lost record would hide.
    pub fn done(mut self, done: Option<String>) -> Self {
        self.done = done;
        self
    }
}

impl<'o> Recording<'o> {
    /// Creates `--out` (checked when the plan was made) and writes its manifest, so a directory that refuses
    /// files is known now. Call it after the safety gate and before the first measurement or destructive step.
    pub fn begin(out: Option<&'o OutDir>, prom: Option<&'o Path>, started_unix_s: u64) -> Result<Self> {
        let created = match out {
            Some(dir) => export::prepare_out_dir(dir)?,
            None => false,
        };
        Ok(Recording {
            out,
            prom,
            started_at: rfc3339_utc(started_unix_s),
            announced: false,
            created,
            finished: false,
        })
    }

    /// Sends the `begin` event now, for a command that streams phases and samples after it.
    pub fn announce(
        &mut self,
        reporter: &mut Reporter,
        kind: &str,
        target: &DeviceInfo,
        options: &RunOptions,
    ) -> Result<()> {
        self.announced = true;
        reporter.emit(&Event::Begin {
            schema: ssdlab_core::schema::SCHEMA.into(),
            kind: kind.into(),
            target: target.clone(),
            options: options.clone(),
            started_at: self.started_at.clone(),
        })
    }

    /// Publishes the result (metrics, the result directory, then the JSON Lines record) and returns how the
    /// command ended. A result that cannot be written is an error (exit 2) unless the command was interrupted,
    /// which ranks above it (the error is then said as an alarm).
    pub fn finish(mut self, reporter: &mut Reporter, finished: Finished) -> Result<Outcome> {
        self.finished = true;
        // The result as this version records it: the schema, the version and the host around what was measured.
        let result = RunResult {
            schema: ssdlab_core::schema::SCHEMA.into(),
            ssdlab_version: env!("CARGO_PKG_VERSION").into(),
            started_at: std::mem::take(&mut self.started_at),
            host: ssdlab_io::sys::host_info(),
            target: finished.target,
            options: finished.options,
            phases: finished.phases,
            analysis: finished.analysis,
            verdict: finished.verdict,
            complete: finished.complete,
            label: None,
        };
        let (interrupted, metrics, done) = (finished.interrupted, finished.metrics, finished.done);
        let mut errors: Vec<anyhow::Error> = Vec::new();
        if let (Some(path), Some(metrics)) = (self.prom, &metrics)
            && let Err(e) = export::write_prom(reporter, path, metrics)
        {
            errors.push(e);
        }
        if let Some(dir) = self.out {
            match export::write_result_dir(dir, &result) {
                Ok(written) => {
                    for warning in &written.warnings {
                        reporter.alarm(warning);
                    }
                    reporter.say(&format!("results   {} ({})", dir.display(), written.summary()));
                }
                Err(e) => errors.push(e),
            }
        }
        if let Err(e) = publish_events(reporter, &result, self.announced) {
            errors.push(e);
        }
        let outcome = Outcome::decide(
            match interrupted {
                Interruption::AsTheConsoleSays => reporter.interrupted(),
                Interruption::Known(interrupted) => interrupted,
            },
            reporter.pipe_closed(),
            &result.verdict,
            result.complete,
        );
        let Some(first) = errors.into_iter().next() else {
            return Ok(outcome);
        };
        let error = match done {
            Some(done) => first.context(format!("{done}, but its record could not be written")),
            None => first,
        };
        if outcome == Outcome::Interrupted {
            reporter.alarm(&format!("ssdlab: error: {error:#}"));
            return Ok(outcome);
        }
        Err(error)
    }
}

impl Drop for Recording<'_> {
    /// A command that ends without a result (an error, a refusal after the gate) leaves no directory of its own
    /// making behind.
    fn drop(&mut self) {
        if let (false, true, Some(dir)) = (self.finished, self.created, self.out)
            && let Ok(outputs) = ssdlab_outputs::OutputDir::open(&dir.path)
        {
            let _ = outputs.remove_if_empty();
        }
    }
}

/// The JSON Lines record of a result: `begin` (unless it went out at the start), `analysis` (a plain run has
/// none of its own: its summary went out with its phase) and `verdict`.
fn publish_events(reporter: &mut Reporter, result: &RunResult, announced: bool) -> Result<()> {
    if !announced {
        reporter.emit(&Event::Begin {
            schema: result.schema.clone(),
            kind: result.kind().into(),
            target: result.target.clone(),
            options: result.options.clone(),
            started_at: result.started_at.clone(),
        })?;
    }
    if !matches!(result.analysis, Analysis::Run) {
        reporter.emit(&Event::Analysis(result.analysis.clone()))?;
    }
    reporter.emit(&Event::Verdict(result.verdict.clone()))
}
