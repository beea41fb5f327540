//! `refresh`: rewrite files in place so their data is fresh again. The flags as given ([`RefreshFlags`])
//! become a checked [`Plan`] before anything is locked or opened; the run locks the state directory, then the
//! session (`ssdlab_methods::refresh::session`: settle what an interrupted run left, walk, select, rewrite each
//! file, log) runs over the real world's adapters (`world`), and the record is written after the lock is let go.

mod printer;
mod world;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::device::TargetKind;
use ssdlab_core::schema::options::RefreshFlags as RecordedFlags;
use ssdlab_core::schema::refresh::{RefreshAnalysis, RefreshOutcome};
use ssdlab_core::schema::{Analysis, RunResult};
use ssdlab_core::units::{BinaryBytes, Rate};
use ssdlab_io::walk::RootRefusal;
use ssdlab_methods::refresh::file::escape_path;
use ssdlab_methods::refresh::session::{
    SessionEvents, SessionPlan, SessionWorld, entry as session_entry, planned_record, run_session,
};
use ssdlab_methods::refresh::{StateDir, StateError};

use self::printer::Printer;
use self::world::RealWorld;
use crate::flags::Given;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;

pub use ssdlab_targets::default_state_dir;

/// `refresh`'s flags, typed by the command line.
#[derive(Debug, Clone)]
pub struct RefreshFlags {
    pub paths: Vec<PathBuf>,
    pub forget: Vec<PathBuf>,
    pub from: Option<PathBuf>,
    pub slower_than: Option<f64>,
    /// Only files whose data is older than this many nanoseconds.
    pub older_than: Option<Given<u64>>,
    /// Bytes per second at most.
    pub rate: Option<Given<f64>>,
    /// Bytes rewritten per step.
    pub chunk: Given<u64>,
    pub dry_run: bool,
    pub state_dir: Option<PathBuf>,
    pub out: Option<crate::export::OutDir>,
}

impl Default for RefreshFlags {
    /// The command line's defaults: every file given, 4 MiB at a time, no limit.
    fn default() -> Self {
        RefreshFlags {
            paths: vec![],
            forget: vec![],
            from: None,
            slower_than: None,
            older_than: None,
            rate: None,
            chunk: Given::of("4m", 4 << 20),
            dry_run: false,
            state_dir: None,
            out: None,
        }
    }
}

/// `--rate` for refresh's value parser: bytes per second only (a rewrite is paced by what it writes).
pub fn byte_rate_arg(text: &str) -> std::result::Result<Given<f64>, String> {
    match crate::flags::rate_arg(text)? {
        Rate::BytesPerS(bytes_per_s) => Ok(Given::of(text, bytes_per_s)),
        Rate::Iops(_) => Err("refresh is limited in bytes per second, e.g. 200m".into()),
    }
}

/// Runs `refresh`: `--forget`, or the planned refresh.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let args = &plan.flags;
    if !args.forget.is_empty() {
        return forget(args, ports);
    }
    for note in &plan.notes {
        ports.console.say(note);
    }
    execute(plan, ports)
}

/// `--forget`: ends the pending entries at or beneath each path, unsettled, and says what each file's times
/// were so its owner can put them back. A path with nothing pending is an error that lists what is pending.
fn forget(args: &RefreshFlags, ports: &mut Ports) -> Result<Outcome> {
    let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    let mut state = StateDir::lock(&state_dir).map_err(|e| anyhow!("--state-dir {e}"))?;
    for path in &args.forget {
        let path = std::path::absolute(path).with_context(|| format!("--forget {}", escape_path(path)))?;
        let forgotten = state
            .journal
            .forget_beneath(&path)
            .with_context(|| format!("--forget {}", escape_path(&path)))?;
        if forgotten.is_empty() {
            let pending: Vec<String> = state
                .journal
                .unfinished()
                .iter()
                .map(|u| u.begin.path.escaped())
                .collect();
            bail!(
                "--forget {}: nothing is pending at or beneath it in {}; pending: {}",
                escape_path(&path),
                state.path().display(),
                if pending.is_empty() {
                    "nothing".to_string()
                } else {
                    pending.join(", ")
                }
            );
        }
        for begin in forgotten {
            let (s, ns) = begin.mtime;
            ports.console.say(&format!(
                "forgot    {}: not settled; its original modification time was @{s}.{ns:09} (touch -m -d @{s}.{ns:09} puts it back)",
                begin.path.escaped()
            ));
        }
    }
    Ok(Outcome::Passed)
}

/// The flags of one refresh, every one checked before anything is locked or opened: the paths (absolute, on a
/// disk's file system, no symlink on the way, `--out` outside them), the files `--from` found slow, and the
/// limits.
#[derive(Debug, Clone)]
pub struct Plan {
    flags: RefreshFlags,
    /// What planning found worth saying (the files `--from` named), said when the run starts.
    notes: Vec<String>,
    paths: Vec<PathBuf>,
    older_than_s: Option<f64>,
    bytes_per_s: Option<f64>,
    chunk: u64,
    /// The speeds a scan measured (`--from`), in MB/s by path.
    before_mb_s: HashMap<PathBuf, f64>,
    state_dir: PathBuf,
}

impl Plan {
    /// Checks every flag and reads `--from`'s scan before anything is locked.
    pub fn new(flags: RefreshFlags) -> Result<Plan> {
        let args = &flags;
        let mut notes = vec![];
        if !args.forget.is_empty() {
            return Ok(Plan {
                notes,
                paths: vec![],
                older_than_s: None,
                bytes_per_s: None,
                chunk: 0,
                before_mb_s: HashMap::new(),
                state_dir: args.state_dir.clone().unwrap_or_else(default_state_dir),
                flags,
            });
        }
        let older_than_s = args.older_than.as_ref().map(|o| o.value as f64 / 1e9);
        let bytes_per_s = args.rate.as_ref().map(|r| r.value);
        let chunk = args.chunk.value;
        // A chunk is written in one window under a lease: 16 MiB keeps the window well inside the kernel's
        // lease-break time even on a medium that writes 1 MB/s, and keeps other openers' waits short.
        if !(64 << 10..=16 << 20).contains(&chunk) || !chunk.is_multiple_of(64 << 10) {
            bail!(
                "--chunk {}: use a multiple of 64k between 64k and 16m",
                args.chunk.text
            );
        }
        if let Some(slower_than) = args.slower_than
            && !(slower_than > 0.0 && slower_than < 1.0)
        {
            bail!(
                "--slower-than {slower_than}: a fraction of the scan's baseline speed between 0 and 1, e.g. 0.5"
            );
        }
        let mut before_mb_s = HashMap::new();
        let mut paths = args.paths.clone();
        if let Some(dir) = &args.from {
            let slow = slow_files_from_scan(dir, args.slower_than)?;
            notes.push(match args.slower_than {
                Some(fraction) => format!(
                    "from      {}: {} files read slower than {fraction} of the baseline",
                    dir.display(),
                    slow.len(),
                ),
                None => format!(
                    "from      {}: the {} files the scan flagged (slow, and slow again when re-read; \
                     --slower-than F takes every file below F of the baseline instead)",
                    dir.display(),
                    slow.len(),
                ),
            });
            for (path, mb_s) in slow {
                before_mb_s.insert(path.clone(), mb_s);
                paths.push(path);
            }
        }
        for path in &paths {
            check_path(path)?;
        }
        // The journal records absolute paths, so a run from another directory settles what this one left.
        let paths: Vec<PathBuf> = paths
            .iter()
            .map(|p| std::path::absolute(p).with_context(|| format!("PATH {}", escape_path(p))))
            .collect::<Result<_>>()?;
        if let Some(out) = &args.out {
            refuse_out_inside(out, &paths)?;
            crate::export::check_out_dir(out)?;
        }
        let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
        let plan = Plan {
            notes,
            paths,
            older_than_s,
            bytes_per_s,
            chunk,
            before_mb_s,
            state_dir,
            flags,
        };
        assert!(
            plan.paths.iter().all(|p| p.is_absolute()),
            "the journal records absolute paths"
        );
        assert!(plan.chunk.is_multiple_of(64 << 10) && plan.chunk > 0);
        Ok(plan)
    }
}

/// A dry run takes no lock and settles nothing: it walks, selects and says what it would do, and records that.
fn dry_run(
    world: &mut RealWorld<'_>,
    console: &mut dyn crate::ports::Console,
    bytes_per_s: Option<f64>,
    before_mb_s: &HashMap<PathBuf, f64>,
) -> Result<RefreshAnalysis> {
    let walked = world.walk().context("PATH: cannot walk")?;
    let selection = world.select(walked.found);
    Printer::new(&mut *console, bytes_per_s, before_mb_s).selected(&selection, &walked.skipped);
    let mut analysis = planned_record(&selection, &walked.skipped, true);
    for c in &selection.files {
        console.say(&format!(
            "would     {} ({})",
            escape_path(&c.path),
            BinaryBytes(c.size_bytes)
        ));
        let mut e = session_entry(&c.path, RefreshOutcome::Would, c.size_bytes, None);
        e.before_bytes_per_s = before_mb_s.get(&c.path).map(|mb_s| mb_s * 1e6);
        analysis.files.push(e);
    }
    Ok(analysis)
}

/// Runs a planned refresh: the lock, the session (or a dry run's listing), the record.
fn execute(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let Plan {
        flags: args,
        paths,
        older_than_s,
        bytes_per_s,
        chunk,
        before_mb_s,
        state_dir,
        ..
    } = plan;
    let (older_than_s, bytes_per_s, chunk) = (*older_than_s, *bytes_per_s, *chunk);
    // The lock comes first: a second run says who holds it before doing anything.
    let state = if args.dry_run {
        None
    } else {
        Some(StateDir::lock(state_dir).map_err(|e| match e {
            StateError::Locked { .. } => anyhow!("--state-dir {e}"),
            other => anyhow!("--state-dir {other}"),
        })?)
    };
    // Prepared after the lock, so a run that cannot start leaves no directory behind.
    let recording = Recording::begin(args.out.as_ref(), None, ports.started_unix_s)?;
    let mut world = RealWorld::new(
        paths,
        state_dir,
        older_than_s,
        bytes_per_s,
        ports.clock,
        ports.stop.flag(),
    );
    let started = world.env.started;
    let Some(mut state) = state else {
        let analysis = dry_run(&mut world, &mut *ports.console, bytes_per_s, before_mb_s)?;
        return publish(args, recording, ports, analysis, 0, false);
    };
    if state.journal.unreadable_lines > 0 {
        ports.console.say(&format!(
            "journal   {} unreadable lines in {} were skipped",
            state.journal.unreadable_lines,
            state.path().display()
        ));
    }
    let session = SessionPlan {
        chunk_bytes: chunk,
        before_bytes_per_s: before_mb_s
            .iter()
            .map(|(p, mb_s)| (p.clone(), mb_s * 1e6))
            .collect(),
    };
    let mut printer = Printer::new(&mut *ports.console, bytes_per_s, before_mb_s);
    let report = run_session(&session, &mut state.journal, &mut world, &mut printer)
        .with_context(|| format!("--state-dir {}", state_dir.display()))?;
    let measured = std::mem::take(&mut printer.measured);
    drop(printer);
    ports.say_lines(measured);
    let mut analysis = report.analysis;
    ports.console.say(&format!(
        "refresh   {} rewritten and verified in {:.1} s ({:.1} s paused while the device was busy); {} files skipped, given up or pending",
        BinaryBytes(analysis.rewritten_bytes),
        started.elapsed().as_secs_f64(),
        world.env.paused.as_secs_f64(),
        report.problems
    ));
    analysis.seconds = started.elapsed().as_secs_f64();
    analysis.paused_s = world.env.paused.as_secs_f64();
    // The next run may start as soon as this one is done rewriting: the lock is not held while the result is
    // written (a --json reader that stops reading must not keep it).
    drop(state);
    publish(
        args,
        recording,
        ports,
        analysis,
        report.problems,
        report.interrupted,
    )
}

/// A PATH refresh may write beneath: it exists, no component is a symlink, and it is on a disk's file system.
fn check_path(path: &Path) -> Result<()> {
    let shown = escape_path(path);
    match ssdlab_io::walk::check_write_root(path) {
        Ok(()) => Ok(()),
        Err(RootRefusal::Missing) => bail!("PATH {shown}: does not exist"),
        Err(RootRefusal::ThroughSymlink { real }) => bail!(
            "PATH {shown}: a component of it is a symbolic link; refresh never follows a link into a write: give \
             the real path ({})",
            real.map(|p| escape_path(&p))
                .unwrap_or_else(|| "unresolved".into())
        ),
        Err(RootRefusal::PseudoFileSystem(kind)) => bail!(
            "PATH {shown}: it is on {kind}, a pseudo file system of the kernel; its files are not data on a drive, \
             so refresh never reads or rewrites them: give a path on a disk's file system"
        ),
        Err(RootRefusal::FileSystemUnknown(e)) => {
            Err(anyhow::Error::new(e).context(format!("PATH {shown}: cannot tell its file system")))
        }
    }
}

/// `--out` must lie outside every PATH: a later run would otherwise rewrite its own results, and preparing the
/// directory would touch the tree being refreshed.
fn refuse_out_inside(out: &Path, paths: &[PathBuf]) -> Result<()> {
    let resolve = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let out_resolved = resolve(out);
    for path in paths {
        if out_resolved.starts_with(resolve(path)) {
            bail!(
                "--out {}: inside PATH {}, which is being refreshed; write the results outside it",
                out.display(),
                escape_path(path)
            );
        }
    }
    Ok(())
}

/// Streams and writes the run's record (with --json, --out) and turns it into the exit status: interrupted,
/// passed when nothing was skipped, given up or failed, else failed.
fn publish(
    args: &RefreshFlags,
    recording: Recording,
    ports: &mut Ports,
    mut analysis: RefreshAnalysis,
    problems: usize,
    interrupted: bool,
) -> Result<Outcome> {
    analysis.problems = problems as u32;
    let mut reasons = Vec::new();
    if problems > 0 {
        reasons.push(format!(
            "{problems} files skipped, given up, failed or left pending"
        ));
    }
    if interrupted {
        reasons.push("interrupted before every file was refreshed".to_string());
    }
    let verdict = ssdlab_core::schema::Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    let info = ssdlab_core::DeviceInfo {
        max_transfer_bytes: u64::MAX,
        direct_io: true,
        ..ssdlab_core::DeviceInfo::subject(
            args.paths
                .iter()
                .map(|p| escape_path(p))
                .chain(args.from.iter().map(|d| format!("--from {}", d.display())))
                .collect::<Vec<_>>()
                .join(" "),
            TargetKind::File,
            "files rewritten in place".into(),
            analysis.selected_bytes,
            "read, write, sync and verify per chunk under a write lease".into(),
        )
    };
    let options = ssdlab_core::schema::options::RunOptions::Refresh(RecordedFlags {
        paths: args.paths.iter().map(|p| escape_path(p)).collect(),
        from: args.from.as_deref().map(escape_path),
        slower_than: args.slower_than,
        older_than_ns: args.older_than.as_ref().map(|o| o.value),
        rate_bytes_per_s: args.rate.as_ref().map(|r| r.value),
        chunk_bytes: args.chunk.value,
        dry_run: args.dry_run,
    });
    let rewritten = analysis
        .files
        .iter()
        .filter(|f| f.outcome == RefreshOutcome::Refreshed)
        .count();
    let done = (rewritten > 0).then(|| format!("the refresh rewrote {rewritten} files"));
    recording.finish(
        &mut Reporter::new(&mut *ports.console),
        Finished::new(info, options, Analysis::Refresh(analysis), verdict)
            .interrupted(interrupted)
            .done(done),
    )
}

/// Paths a scan found slower than `fraction` of its baseline, with their measured speed.
fn slow_files_from_scan(dir: &Path, fraction: Option<f64>) -> Result<Vec<(PathBuf, f64)>> {
    let file = if dir.is_dir() {
        dir.join("result.json")
    } else {
        dir.to_path_buf()
    };
    let text = crate::inputs::read_text(
        &format!("--from {} ({})", dir.display(), file.display()),
        &file,
        crate::inputs::MAX_RESULT_BYTES,
        "",
    )?;
    let result = RunResult::from_json(&text).map_err(|e| {
        anyhow!(
            "--from {}: not an ssdlab result this version reads: {e}",
            dir.display()
        )
    })?;
    let Analysis::Scan(scan) = &result.analysis else {
        bail!(
            "--from {}: a {} result, not a scan; give a directory written by ssdlab scan --out",
            dir.display(),
            result.kind()
        );
    };
    if result.target.kind == TargetKind::Sim {
        bail!(
            "--from {}: a scan of a virtual data set; rewrite those with ssdlab scan --refresh-flagged",
            dir.display()
        );
    }
    Ok(ssdlab_methods::refresh::select::slow_in_scan(scan, fraction))
}
