//! `ssdlab refresh PATH...`: parses flags, locks the state directory, settles what an interrupted run left,
//! chooses files, states the wear cost, and runs `ssdlab_methods::refresh` on each through the adapters below
//! (the io layer's pinned file seen as a `RefreshTarget`, the real clock and signals as a `RefreshEnv`).

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::device::TargetKind;
use ssdlab_core::schema::options::RefreshFlags;
use ssdlab_core::schema::refresh::{RefreshAnalysis, RefreshOutcome, RefreshedFile};
use ssdlab_core::schema::{Analysis, RunResult};
use ssdlab_core::units::{BinaryBytes, Rate, parse_duration_ns, parse_rate};
use ssdlab_io::pinned::{FileFacts, Identity, PinnedFile, reopen_pinned};
use ssdlab_io::walk::RootRefusal;
use ssdlab_methods::refresh::file::{PathChanges, escape_path};
use ssdlab_methods::refresh::pace::{BusyProbe, TokenBucket, pause_while_busy};
use ssdlab_methods::refresh::select::{Found, Selection, select};
use ssdlab_methods::refresh::session::{
    MeasuredTarget, SessionEvents, SessionPlan, SessionWorld, Walked, entry as session_entry, planned_record,
    run_session,
};
use ssdlab_methods::refresh::state::record_refreshed;
use ssdlab_methods::refresh::{
    Facts, FileId, FileOutcome, Opener, PathBytes, RefreshEnv, RefreshError, RefreshLog, RefreshTarget,
    SettleOutcome, StateDir, StateError, Window,
};

use super::Outcome;
use crate::cli::RefreshArgs;
use crate::plan::size_flag;

fn file_id(identity: Identity) -> FileId {
    FileId {
        fs: identity.fs,
        ino: identity.ino,
        birth: identity.birth,
    }
}

fn facts(f: FileFacts) -> Facts {
    Facts {
        size_bytes: f.size_bytes,
        mode: f.mode,
        uid: f.uid,
        gid: f.gid,
        nlink: f.nlink,
        atime: f.atime,
        mtime: f.mtime,
        ctime: f.ctime,
        privileged: f.privileged,
        named: f.named,
    }
}

/// The io layer's pinned file seen through the protocol's trait, timing first reads (the data as it was) and
/// verification re-reads (the data rewritten): before/after speeds from refresh's own reads, no extra pass.
struct Target {
    inner: PinnedFile,
    pending_verify: std::collections::HashSet<u64>,
    before: (Duration, u64),
    after: (Duration, u64),
}

impl Target {
    fn new(inner: PinnedFile) -> Self {
        Target {
            inner,
            pending_verify: Default::default(),
            before: Default::default(),
            after: Default::default(),
        }
    }

    fn mb_s((time, bytes): (Duration, u64)) -> Option<f64> {
        (bytes > 0 && !time.is_zero()).then(|| bytes as f64 / time.as_secs_f64() / 1e6)
    }
}

impl RefreshTarget for Target {
    fn id(&self) -> FileId {
        file_id(self.inner.identity())
    }
    fn generation(&self) -> u64 {
        self.inner.generation()
    }
    fn handle(&self) -> Option<Vec<u8>> {
        self.inner.handle()
    }
    fn facts(&mut self) -> io::Result<Facts> {
        self.inner.facts().map(facts)
    }
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        self.inner.data_ranges()
    }
    fn shares_extents(&mut self) -> io::Result<bool> {
        self.inner.shares_extents()
    }
    fn copy_on_write(&self) -> bool {
        self.inner.copy_on_write()
    }
    fn free_bytes(&mut self) -> io::Result<u64> {
        self.inner.free_bytes()
    }
    fn open_window(&mut self) -> io::Result<Window> {
        Ok(if self.inner.open_window()? {
            Window::Open
        } else {
            Window::Busy
        })
    }
    fn close_window(&mut self) {
        self.inner.close_window()
    }
    fn lease_held(&mut self) -> io::Result<bool> {
        Ok(self.inner.lease_held())
    }
    fn path_changes(&mut self) -> io::Result<PathChanges> {
        let changes = self.inner.path_changes()?;
        Ok(PathChanges {
            attributes: changes.attributes,
            modified: changes.modified,
        })
    }
    fn writer_waiting(&mut self) -> io::Result<bool> {
        Ok(self.inner.writer_waiting())
    }
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let started = Instant::now();
        let n = self.inner.read_from_media(offset, buf)?;
        let which = if self.pending_verify.remove(&offset) {
            &mut self.after
        } else {
            &mut self.before
        };
        which.0 += started.elapsed();
        which.1 += n as u64;
        Ok(n)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.pending_verify.insert(offset);
        self.inner.write_at(offset, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn set_mtime(&mut self, mtime: (i64, i64)) -> io::Result<()> {
        self.inner.set_mtime(mtime)
    }
}

impl MeasuredTarget for Target {
    fn speeds_bytes_per_s(&self) -> (Option<f64>, Option<f64>) {
        (
            Target::mb_s(self.before).map(|mb| mb * 1e6),
            Target::mb_s(self.after).map(|mb| mb * 1e6),
        )
    }
}

/// Finds journalled files again by name, checking they are still the same inode.
struct PathOpener {
    chunk_bytes: usize,
}

impl Opener for PathOpener {
    fn reopen(
        &mut self,
        root: &Path,
        path: &Path,
        id: &FileId,
        generation: u64,
        handle: Option<&[u8]>,
    ) -> io::Result<Option<Box<dyn RefreshTarget>>> {
        let identity = Identity::journalled(id.fs, id.ino, id.birth);
        Ok(reopen_pinned(root, path, identity, handle, self.chunk_bytes)?
            .filter(|p| p.generation() == generation)
            .map(|p| Box::new(Target::new(p)) as Box<dyn RefreshTarget>))
    }
}

struct DeviceBusy(u64);

impl BusyProbe for DeviceBusy {
    fn in_flight(&mut self) -> Option<u64> {
        ssdlab_io::sys::block_in_flight(self.0)
    }
}

/// The real world: wall clock, SIGINT/SIGTERM, the rate limit and the busy-device pause.
struct Env {
    started: Instant,
    bucket: TokenBucket,
    st_dev: u64,
    paused: Duration,
    lease_break: Duration,
}

impl RefreshEnv for Env {
    fn wall_ns(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }
    fn monotonic_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
    fn interrupted(&self) -> bool {
        ssdlab_io::sys::interrupt_flag().load(Ordering::Relaxed)
    }
    fn pace(&mut self, bytes: u64) {
        std::thread::sleep(self.bucket.take(bytes, self.started.elapsed()));
        self.paused += pause_while_busy(&mut DeviceBusy(self.st_dev), &mut std::thread::sleep);
    }
    fn wait_ms(&mut self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    fn lease_break_ns(&self) -> u64 {
        self.lease_break.as_nanos() as u64
    }
}

pub use ssdlab_targets::default_state_dir;

fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `--forget`: ends the pending entries at or beneath each path, unsettled, and says what each file's times
/// were so its owner can put them back. A path with nothing pending is an error that lists what is pending.
fn forget(args: &RefreshArgs) -> Result<Outcome> {
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
            eprintln!(
                "forgot    {}: not settled; its original modification time was @{s}.{ns:09} (touch -m -d @{s}.{ns:09} puts it back)",
                begin.path.escaped()
            );
        }
    }
    Ok(Outcome::Passed)
}

pub fn run(args: &RefreshArgs) -> Result<Outcome> {
    crate::output::mark_command_start();
    if !args.forget.is_empty() {
        return forget(args);
    }
    let plan = RefreshPlan::from_args(args)?;
    execute(args, plan)
}

/// The flags of one refresh, every one checked before anything is locked or opened: the paths (absolute, on a
/// disk's file system, no symlink on the way, `--out` outside them), the files `--from` found slow, and the
/// limits.
struct RefreshPlan {
    paths: Vec<PathBuf>,
    older_than_s: Option<f64>,
    bytes_per_s: Option<f64>,
    chunk: u64,
    /// The speeds a scan measured (`--from`), in MB/s by path.
    before_mb_s: HashMap<PathBuf, f64>,
    state_dir: PathBuf,
}

impl RefreshPlan {
    fn from_args(args: &RefreshArgs) -> Result<RefreshPlan> {
        let older_than_s = args
            .older_than
            .as_deref()
            .map(|v| {
                parse_duration_ns(v)
                    .map(|ns| ns as f64 / 1e9)
                    .map_err(|e| anyhow!("--older-than {e}"))
            })
            .transpose()?;
        let rate = args
            .rate
            .as_deref()
            .map(|v| parse_rate(v).map_err(|e| anyhow!("--rate {e}")))
            .transpose()?;
        let bytes_per_s = match rate {
            None => None,
            Some(Rate::BytesPerS(b)) => Some(b),
            Some(Rate::Iops(_)) => bail!("--rate: refresh is limited in bytes per second, e.g. --rate 200m"),
        };
        let chunk = size_flag("chunk", &args.chunk)?;
        // A chunk is written in one window under a lease: 16 MiB keeps the window well inside the kernel's
        // lease-break time even on a medium that writes 1 MB/s, and keeps other openers' waits short.
        if !(64 << 10..=16 << 20).contains(&chunk) || !chunk.is_multiple_of(64 << 10) {
            bail!(
                "--chunk {}: use a multiple of 64k between 64k and 16m",
                args.chunk
            );
        }
        let slower_than = args.slower_than.unwrap_or(0.5);
        if !(slower_than > 0.0 && slower_than < 1.0) {
            bail!(
                "--slower-than {slower_than}: a fraction of the scan's baseline speed between 0 and 1, e.g. 0.5"
            );
        }
        let mut before_mb_s = HashMap::new();
        let mut paths = args.paths.clone();
        if let Some(dir) = &args.from {
            let slow = slow_files_from_scan(dir, slower_than)?;
            eprintln!(
                "from      {}: {} files read slower than {} of the baseline",
                dir.display(),
                slow.len(),
                slower_than
            );
            for (path, mb_s) in slow {
                before_mb_s.insert(path.clone(), mb_s);
                paths.push(path);
            }
        }
        for path in &paths {
            let shown = escape_path(path);
            match ssdlab_io::walk::check_write_root(path) {
                Ok(()) => {}
                Err(RootRefusal::Missing) => bail!("PATH {shown}: does not exist"),
                Err(RootRefusal::ThroughSymlink { real }) => bail!(
                    "PATH {shown}: a component of it is a symbolic link; refresh never follows a link into a write: \
                     give the real path ({})",
                    real.map(|p| escape_path(&p))
                        .unwrap_or_else(|| "unresolved".into())
                ),
                Err(RootRefusal::PseudoFileSystem(kind)) => bail!(
                    "PATH {shown}: it is on {kind}, a pseudo file system of the kernel; its files are not data on a \
                     drive, so refresh never reads or rewrites them: give a path on a disk's file system"
                ),
                Err(RootRefusal::FileSystemUnknown(e)) => {
                    return Err(
                        anyhow::Error::new(e).context(format!("PATH {shown}: cannot tell its file system"))
                    );
                }
            }
        }
        // The journal records absolute paths, so a run from another directory settles what this one left.
        let paths: Vec<PathBuf> = paths
            .iter()
            .map(|p| std::path::absolute(p).with_context(|| format!("PATH {}", escape_path(p))))
            .collect::<Result<_>>()?;
        if let Some(out) = &args.out {
            refuse_out_inside(out, &paths)?;
        }
        let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
        let plan = RefreshPlan {
            paths,
            older_than_s,
            bytes_per_s,
            chunk,
            before_mb_s,
            state_dir,
        };
        assert!(
            plan.paths.iter().all(|p| p.is_absolute()),
            "the journal records absolute paths"
        );
        assert!(plan.chunk.is_multiple_of(64 << 10) && plan.chunk > 0);
        Ok(plan)
    }
}

/// Runs a planned refresh: the lock, the session (or a dry run's listing), the record.
fn execute(args: &RefreshArgs, plan: RefreshPlan) -> Result<Outcome> {
    let RefreshPlan {
        paths,
        older_than_s,
        bytes_per_s,
        chunk,
        before_mb_s,
        state_dir,
    } = plan;
    // The lock comes first: a second run says who holds it before doing anything.
    let state = if args.dry_run {
        None
    } else {
        Some(StateDir::lock(&state_dir).map_err(|e| match e {
            StateError::Locked { .. } => anyhow!("--state-dir {e}"),
            other => anyhow!("--state-dir {other}"),
        })?)
    };
    // Prepared after the lock, so a run that cannot start leaves no directory behind.
    if let Some(dir) = &args.out {
        crate::output::prepare_out_dir(dir)?;
    }
    let exclude: Vec<(u64, u64)> = std::fs::metadata(&state_dir)
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    let started = Instant::now();
    let mut world = RealWorld {
        paths: &paths,
        exclude,
        log: RefreshLog::load(&state_dir),
        state_dir: state_dir.clone(),
        older_than_s,
        chunk_bytes: chunk as usize,
        devices: HashMap::new(),
        env: Env {
            started,
            bucket: TokenBucket::new(bytes_per_s),
            st_dev: 0,
            paused: Duration::ZERO,
            lease_break: ssdlab_io::sys::lease_break_time(),
        },
        opener: PathOpener {
            chunk_bytes: chunk as usize,
        },
    };
    let Some(mut state) = state else {
        // A dry run takes no lock and settles nothing: it walks, selects and says what it would do.
        let walked = world.walk().context("PATH: cannot walk")?;
        let selection = world.select(walked.found);
        let mut printer = Printer::new(bytes_per_s, &before_mb_s);
        printer.selected(&selection, &walked.skipped);
        let mut analysis = planned_record(&selection, &walked.skipped, true);
        for c in &selection.files {
            eprintln!(
                "would     {} ({})",
                escape_path(&c.path),
                BinaryBytes(c.size_bytes)
            );
            let mut e = session_entry(&c.path, RefreshOutcome::Would, c.size_bytes, None);
            e.before_bytes_per_s = before_mb_s.get(&c.path).map(|mb_s| mb_s * 1e6);
            analysis.files.push(e);
        }
        return publish(args, analysis, 0, false);
    };
    if state.journal.unreadable_lines > 0 {
        eprintln!(
            "journal   {} unreadable lines in {} were skipped",
            state.journal.unreadable_lines,
            state.path().display()
        );
    }
    let plan = SessionPlan {
        chunk_bytes: chunk,
        before_bytes_per_s: before_mb_s
            .iter()
            .map(|(p, mb_s)| (p.clone(), mb_s * 1e6))
            .collect(),
    };
    let mut printer = Printer::new(bytes_per_s, &before_mb_s);
    let report = run_session(&plan, &mut state.journal, &mut world, &mut printer)
        .with_context(|| format!("--state-dir {}", state_dir.display()))?;
    for line in &printer.measured {
        eprintln!("{line}");
    }
    let mut analysis = report.analysis;
    eprintln!(
        "refresh   {} rewritten and verified in {:.1} s ({:.1} s paused while the device was busy); {} files skipped, given up or pending",
        BinaryBytes(analysis.rewritten_bytes),
        started.elapsed().as_secs_f64(),
        world.env.paused.as_secs_f64(),
        report.problems
    );
    analysis.seconds = started.elapsed().as_secs_f64();
    analysis.paused_s = world.env.paused.as_secs_f64();
    // The next run may start as soon as this one is done rewriting: the lock is not held while the result is
    // written (a --json reader that stops reading must not keep it).
    drop(state);
    publish(args, analysis, report.problems, report.interrupted)
}

/// The real file system and clock as the session's world: the walk beneath the paths given, selection by the
/// refresh log's data age, pinned files under leases, and the log of what was rewritten.
struct RealWorld<'a> {
    paths: &'a [PathBuf],
    /// The state directory itself is never refreshed (its journal is being written).
    exclude: Vec<(u64, u64)>,
    log: RefreshLog,
    state_dir: PathBuf,
    older_than_s: Option<f64>,
    chunk_bytes: usize,
    /// Each walked file's device, for the busy-device pause.
    devices: HashMap<FileId, u64>,
    env: Env,
    opener: PathOpener,
}

impl SessionWorld for RealWorld<'_> {
    fn env(&mut self) -> &mut dyn RefreshEnv {
        &mut self.env
    }
    fn settling(&mut self) -> (&mut dyn RefreshEnv, &mut dyn Opener) {
        (&mut self.env, &mut self.opener)
    }
    fn walk(&mut self) -> io::Result<Walked> {
        let walked = ssdlab_io::walk::walk(self.paths, &self.exclude, true)?;
        self.devices = walked
            .files
            .iter()
            .map(|w| (file_id(w.identity), w.dev))
            .collect();
        Ok(Walked {
            found: walked
                .files
                .iter()
                .map(|w| Found {
                    root: w.root.clone(),
                    path: w.path.clone(),
                    id: file_id(w.identity),
                    size_bytes: w.size_bytes,
                    mtime: w.mtime,
                })
                .collect(),
            skipped: walked
                .skipped
                .into_iter()
                .map(|(path, reason)| (path, reason.to_string()))
                .collect(),
        })
    }
    fn select(&mut self, found: Vec<Found>) -> Selection {
        select(found, self.older_than_s, &self.log, now_unix_s())
    }
    fn open(&mut self, file: &Found) -> Result<Box<dyn MeasuredTarget>, String> {
        let pinned = PinnedFile::open(&file.root, &file.path, self.chunk_bytes)
            .and_then(|mut p| p.probe_window().map(|()| p))
            .map_err(|refusal| refusal.to_string())?;
        self.env.st_dev = self.devices.get(&file.id).copied().unwrap_or(0);
        Ok(Box::new(Target::new(pinned)))
    }
    fn record_refreshed(&mut self, id: FileId, path: &Path) -> io::Result<()> {
        record_refreshed(&self.state_dir, id, path, now_unix_s())
    }
}

/// The run's lines on stderr as it goes: what was settled, the wear cost and estimate, and each file.
struct Printer<'a> {
    bytes_per_s: Option<f64>,
    before_mb_s: &'a HashMap<PathBuf, f64>,
    /// Before/after speeds of the files rewritten, said after the run.
    measured: Vec<String>,
}

impl<'a> Printer<'a> {
    fn new(bytes_per_s: Option<f64>, before_mb_s: &'a HashMap<PathBuf, f64>) -> Self {
        Printer {
            bytes_per_s,
            before_mb_s,
            measured: Vec::new(),
        }
    }
}

impl SessionEvents for Printer<'_> {
    fn settled(&mut self, outcome: &Result<SettleOutcome, (PathBytes, RefreshError)>) {
        match outcome {
            Ok(SettleOutcome::Restored { path, .. }) => eprintln!(
                "settled   {}: an interrupted refresh's times put back",
                path.escaped()
            ),
            Ok(SettleOutcome::ChangedByOthers { path }) => eprintln!(
                "settled   {}: changed by someone else since the interrupted refresh; its times are left as they are",
                path.escaped()
            ),
            Ok(SettleOutcome::Gone { path }) => eprintln!(
                "settled   {}: gone or replaced since the interrupted refresh; nothing to put back",
                path.escaped()
            ),
            Ok(SettleOutcome::LeftAsWritten { path }) => eprintln!(
                "settled   {}: the interrupted write's time cannot be told from another write in the same second (the file system keeps whole seconds); it is left, so the file looks modified",
                path.escaped()
            ),
            Ok(SettleOutcome::Busy { path }) => crate::output::alarm(&format!(
                "pending   {}: open in another process; the next run puts its times back",
                path.escaped()
            )),
            Err((path, e)) => crate::output::alarm(&format!(
                "pending   {}: cannot settle the interrupted refresh ({e}); the next run tries again (--forget drops it)",
                path.escaped()
            )),
        }
    }

    fn selected(&mut self, selection: &Selection, skipped: &[(PathBuf, String)]) {
        let total: u64 = selection.files.iter().map(|c| c.size_bytes).sum();
        eprintln!(
            "refresh   {} files, {} to rewrite: the wear cost is {} of host writes (times the drive's write amplification)",
            selection.files.len(),
            BinaryBytes(total),
            BinaryBytes(total)
        );
        if selection.younger > 0 {
            eprintln!(
                "younger   {} files written or refreshed more recently than --older-than",
                selection.younger
            );
        }
        print_estimate(&selection.files, self.bytes_per_s, self.before_mb_s, total);
        for (path, reason) in skipped {
            eprintln!("skip      {}: {reason}", escape_path(path));
        }
    }

    fn file(&mut self, file: &Found, record: &RefreshedFile, outcome: Option<&FileOutcome>) {
        let shown = escape_path(&file.path);
        let reason = record.reason.as_deref().unwrap_or("");
        match (record.outcome, outcome) {
            (
                RefreshOutcome::Refreshed,
                Some(FileOutcome::Refreshed {
                    bytes,
                    resumed_from_chunk,
                    ..
                }),
            ) => {
                let speed =
                    |b: Option<f64>| b.map_or("not measured".to_string(), |b| format!("{:.1} MB/s", b / 1e6));
                self.measured.push(format!(
                    "measured  {shown}: before {}, after {}",
                    speed(record.before_bytes_per_s),
                    speed(record.after_bytes_per_s)
                ));
                let resumed = if *resumed_from_chunk > 0 {
                    format!(", resumed at chunk {resumed_from_chunk}")
                } else {
                    String::new()
                };
                eprintln!(
                    "done      {shown} ({}, write lease{resumed})",
                    BinaryBytes(*bytes)
                );
            }
            (RefreshOutcome::GaveWay, _) => eprintln!("gave way  {shown}: {reason}"),
            (RefreshOutcome::Failed, _) => crate::output::alarm(&format!("FAILED    {shown}: {reason}")),
            (RefreshOutcome::Interrupted, Some(_)) => eprintln!("stopped   {shown}: {reason}"),
            (RefreshOutcome::Interrupted, None) => {}
            _ => eprintln!("skip      {shown}: {reason}"),
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
    args: &RefreshArgs,
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
        passed: reasons.is_empty(),
        reasons,
    };
    let mut reporter = crate::output::Reporter::new(args.json);
    if args.json || args.out.is_some() {
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
        let options = ssdlab_core::schema::options::RunOptions::Refresh(RefreshFlags {
            paths: args.paths.iter().map(|p| escape_path(p)).collect(),
            from: args.from.as_deref().map(escape_path),
            slower_than: args.slower_than,
            older_than: args.older_than.clone(),
            rate: args.rate.clone(),
            chunk: args.chunk.clone(),
            dry_run: args.dry_run,
        });
        // The files are rewritten by now: a result that cannot be written is reported, and the run's own outcome
        // stands.
        match crate::output::publish_analysis(
            &mut reporter,
            args.out.as_deref(),
            info,
            options,
            Analysis::Refresh(analysis),
            &verdict,
            !interrupted,
        ) {
            Ok(()) => {
                if let Some(dir) = &args.out {
                    eprintln!("results   {} (report.html, result.json)", dir.display());
                }
            }
            Err(e) => crate::output::alarm(&format!(
                "ssdlab: error: the refresh ran, but its result was not written: {e:#}"
            )),
        }
    }
    Ok(if interrupted {
        Outcome::Interrupted
    } else if reporter.pipe_closed() {
        Outcome::PipeClosed
    } else if verdict.passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}

/// Each byte is read, written and read again: three passes at the drive's speed, or the --rate cap.
fn print_estimate(
    files: &[Found],
    bytes_per_s: Option<f64>,
    before_mb_s: &HashMap<PathBuf, f64>,
    total: u64,
) {
    match bytes_per_s {
        Some(rate) => eprintln!(
            "estimate  {:.0} s at the --rate of {}",
            total as f64 / rate,
            ssdlab_core::units::Throughput(rate)
        ),
        None if !before_mb_s.is_empty() => {
            let seconds: f64 = files
                .iter()
                .filter_map(|c| {
                    before_mb_s
                        .get(&c.path)
                        .map(|mb_s| 3.0 * c.size_bytes as f64 / (mb_s * 1e6).max(1.0))
                })
                .sum();
            eprintln!("estimate  {seconds:.0} s: three passes at the speeds the scan measured");
        }
        None => eprintln!(
            "estimate  {:.0} s if the drive moves 500 MB/s (three passes: read, write, verify); --rate caps it",
            3.0 * total as f64 / 500e6
        ),
    }
}

/// Paths a scan found slower than `fraction` of its baseline, with their measured speed.
fn slow_files_from_scan(dir: &Path, fraction: f64) -> Result<Vec<(PathBuf, f64)>> {
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
