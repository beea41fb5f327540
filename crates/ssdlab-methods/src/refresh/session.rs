//! One refresh run, from the settled journal to the record: every unfinished entry settled first (whatever this
//! run selects), the files walked and selected by data age, each refreshed in turn (resuming where a settled run
//! left off with the same chunk size), every outcome recorded as it happens and logged as young again when it
//! was rewritten whole.
//!
//! The ordering of these steps is the safety of the whole run, so it lives here, over ports ([`SessionWorld`],
//! [`SessionEvents`]) that the crash tests drive with in-memory files that crash at every durable step, and the
//! binary with the real file system. It never opens, walks or prints anything itself, and never takes the state
//! directory's lock: the caller holds it for as long as the journal it passes is in use.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use ssdlab_core::schema::refresh::{RefreshAnalysis, RefreshOutcome, RefreshedFile};

use super::file::{FileId, Opener, PathBytes, RefreshTarget, escape_path};
use super::journal::Journal;
use super::protocol::{
    ChunkBuffers, FileOutcome, RefreshEnv, RefreshError, SettleOutcome, refresh_file, settle_all,
};
use super::select::{Found, Selection};

/// A file opened for its refresh that also says how fast its own reads went: the first reads of each chunk are
/// the data as it was, the verification re-reads the data rewritten (before/after speeds with no extra pass).
pub trait MeasuredTarget: RefreshTarget {
    /// Bytes per second of the first reads and of the verification reads, where there were any.
    fn speeds_bytes_per_s(&self) -> (Option<f64>, Option<f64>);
}

/// What a run needs of the world beyond the journal.
pub trait SessionWorld {
    /// The run's clocks, pacing and stop flag.
    fn env(&mut self) -> &mut dyn RefreshEnv;
    /// The environment and the opener that finds journalled files again, at once: settling needs both.
    fn settling(&mut self) -> (&mut dyn RefreshEnv, &mut dyn Opener);
    /// The files under the paths given, found after settling (so a settled file is seen with its times put
    /// back), with what the walk could not take and why. Never follows a symlink, never leaves a file system.
    fn walk(&mut self) -> io::Result<Walked>;
    /// Chooses among the walked files (by data age: the caller's log and clock).
    fn select(&mut self, found: Vec<Found>) -> Selection;
    /// Opens a selected file for its refresh, probed for a lease window, or the reason it is refused.
    fn open(&mut self, file: &Found) -> Result<Box<dyn MeasuredTarget>, String>;
    /// Records that `file` was rewritten whole now (it is young again to scan and refresh).
    fn record_refreshed(&mut self, id: FileId, path: &Path) -> io::Result<()>;
    /// The run's three chunk buffers, for chunks of at most `chunk_bytes` (the run's chunk size, or less when
    /// every file selected is smaller): ordinary memory unless the world has better (memory that is cheaper to
    /// pin for direct I/O). A buffer grows if a chunk needs more.
    fn chunk_buffers(&mut self, chunk_bytes: u64) -> ChunkBuffers {
        let _ = chunk_bytes;
        ChunkBuffers::default()
    }
}

/// What the walk found.
#[derive(Debug, Default)]
pub struct Walked {
    pub found: Vec<Found>,
    /// Paths the walk did not take (a symlink, another file system, unreadable), with the reason.
    pub skipped: Vec<(PathBuf, String)>,
}

/// What a run reports as it goes, for the caller to show (the record is returned at the end).
pub trait SessionEvents {
    /// An unfinished entry of an earlier run was settled (or could not be).
    fn settled(&mut self, outcome: &Result<SettleOutcome, (PathBytes, RefreshError)>);
    /// The selection is known: the files about to be rewritten and how many were younger.
    fn selected(&mut self, selection: &Selection, walked_skipped: &[(PathBuf, String)]);
    /// One file is done with (refreshed, skipped, given up, failed or stopped): its record entry, and the
    /// protocol's outcome when it ran.
    fn file(&mut self, file: &Found, record: &RefreshedFile, outcome: Option<&FileOutcome>);
}

/// How the run is asked for.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    pub chunk_bytes: u64,
    /// Speeds a scan measured (`refresh --from`), in bytes per second by path: the record's "before".
    pub before_bytes_per_s: HashMap<PathBuf, f64>,
}

/// What the run did.
#[derive(Debug)]
pub struct SessionReport {
    pub analysis: RefreshAnalysis,
    /// Files skipped, given up, failed or left pending (the exit status: any is a failure).
    pub problems: usize,
    /// Stopped by the user before every selected file was done.
    pub interrupted: bool,
}

/// Runs one refresh over `journal` (its state directory locked by the caller).
pub fn run_session(
    plan: &SessionPlan,
    journal: &mut Journal,
    world: &mut dyn SessionWorld,
    events: &mut dyn SessionEvents,
) -> Result<SessionReport, RefreshError> {
    assert!(plan.chunk_bytes > 0, "a chunk holds bytes");
    let (resume, mut problems) = settle_first(journal, world, events);
    let walked = world.walk()?;
    let selection = world.select(walked.found);
    events.selected(&selection, &walked.skipped);
    let mut record = planned_record(&selection, &walked.skipped, false);
    // Buffers for the largest chunk this run can meet: a run over small files asks for small ones.
    let largest_bytes = selection.files.iter().map(|f| f.size_bytes).max().unwrap_or(0);
    let chunk_bytes = plan
        .chunk_bytes
        .min(largest_bytes.next_multiple_of(ssdlab_core::scratch::ALIGN_BYTES as u64));
    let mut buffers = world.chunk_buffers(chunk_bytes);
    let mut interrupted = false;
    for (index, file) in selection.files.iter().enumerate() {
        if world.env().interrupted() {
            interrupted = true;
            not_reached(&selection.files[index..], events, &mut record);
            break;
        }
        let mut run = Refreshing {
            plan,
            journal,
            world,
            resume: &resume,
            buffers: &mut buffers,
        };
        let done = run.refresh(file)?;
        problems += usize::from(done.problem);
        interrupted = done.interrupted;
        events.file(file, &done.entry, done.outcome.as_ref());
        record.files.push(done.entry);
        if interrupted {
            not_reached(&selection.files[index + 1..], events, &mut record);
            break;
        }
    }
    // Chunks rewritten and verified count, whether the file was finished or not.
    record.rewritten_bytes = record.files.iter().map(|f| f.rewritten_bytes).sum();
    record.problems = problems as u32;
    Ok(SessionReport {
        analysis: record,
        problems,
        interrupted,
    })
}

/// Settles every unfinished entry first, whatever this run selects: a killed run's times go back before anything
/// else happens, and a file whose entry stays pending is not touched again. Returns where each restored file may
/// resume (its chunk size and first chunk, by file) and how many entries could not be settled.
fn settle_first(
    journal: &mut Journal,
    world: &mut dyn SessionWorld,
    events: &mut dyn SessionEvents,
) -> (HashMap<FileId, (u64, u64)>, usize) {
    let mut problems = 0usize;
    let mut resume: HashMap<FileId, (u64, u64)> = HashMap::new();
    let outcomes = {
        let (env, opener) = world.settling();
        settle_all(journal, opener, env)
    };
    for outcome in &outcomes {
        events.settled(outcome);
        match outcome {
            Ok(SettleOutcome::Restored {
                id,
                chunk_bytes,
                resume_from,
                ..
            }) => {
                resume.insert(*id, (*chunk_bytes, *resume_from));
            }
            Ok(SettleOutcome::Busy { .. }) | Err(_) => problems += 1,
            Ok(_) => {}
        }
    }
    (resume, problems)
}

/// What one selected file came to: its record entry, the protocol's outcome when it ran, whether it counts as a
/// problem (skipped, given up, failed), and whether the user stopped the run during it.
struct FileDone {
    entry: RefreshedFile,
    outcome: Option<FileOutcome>,
    problem: bool,
    interrupted: bool,
}

impl FileDone {
    /// A file that did not run or failed with an error: a problem, with no outcome of the protocol.
    fn problem(entry: RefreshedFile) -> Self {
        FileDone {
            entry,
            outcome: None,
            problem: true,
            interrupted: false,
        }
    }
}

/// What refreshing one selected file needs: the plan, the journal, the world, where settled files resume, and
/// the chunk buffers kept across files.
struct Refreshing<'a, 'w> {
    plan: &'a SessionPlan,
    journal: &'a mut Journal,
    world: &'a mut (dyn SessionWorld + 'w),
    resume: &'a HashMap<FileId, (u64, u64)>,
    buffers: &'a mut ChunkBuffers,
}

impl Refreshing<'_, '_> {
    /// Refreshes `file` unless an entry of it is still pending or it cannot be opened; what it came to.
    fn refresh(&mut self, file: &Found) -> Result<FileDone, RefreshError> {
        let refused =
            |reason: String| entry(&file.path, RefreshOutcome::Skipped, file.size_bytes, Some(reason));
        if self.journal.entry(&file.id).is_some() {
            return Ok(FileDone::problem(refused(
                "an interrupted refresh of it is still pending (open elsewhere)".into(),
            )));
        }
        let mut target = match self.world.open(file) {
            Ok(target) => target,
            Err(reason) => return Ok(FileDone::problem(refused(reason))),
        };
        let resume_from = self
            .resume
            .get(&file.id)
            .filter(|(bytes, _)| *bytes == self.plan.chunk_bytes)
            .map_or(0, |&(_, index)| index);
        let result = refresh_file(
            target.as_mut(),
            &file.root,
            &file.path,
            self.journal,
            self.plan.chunk_bytes,
            resume_from,
            self.world.env(),
            self.buffers,
        );
        let (before, after) = target.speeds_bytes_per_s();
        // The file (and any window on it) is let go before anything is said about it.
        drop(target);
        let before = self.plan.before_bytes_per_s.get(&file.path).copied().or(before);
        match result {
            Ok(outcome) => self.judged(file, outcome, (before, after)),
            Err(e) => {
                // An I/O error on one file (EIO, a read that fails) does not stop the others; its journal entry
                // stays for the next run to settle.
                Ok(FileDone::problem(entry(
                    &file.path,
                    RefreshOutcome::Failed,
                    file.size_bytes,
                    Some(format!(
                        "{e}; if a write was under way the file is marked modified now, and the next run settles \
                         its journal entry"
                    )),
                )))
            }
        }
    }

    /// The record entry of a file the protocol ran on, from its `outcome` and its read speeds (before, after) in
    /// bytes per second; a file rewritten whole is logged as young again first.
    fn judged(
        &mut self,
        file: &Found,
        outcome: FileOutcome,
        (before, after): (Option<f64>, Option<f64>),
    ) -> Result<FileDone, RefreshError> {
        let mut e = entry(&file.path, RefreshOutcome::Refreshed, file.size_bytes, None);
        match &outcome {
            FileOutcome::Refreshed { bytes, .. } => {
                self.world.record_refreshed(file.id, &file.path)?;
                e.rewritten_bytes = *bytes;
                e.before_bytes_per_s = before;
                e.after_bytes_per_s = after;
            }
            unfinished => (e.outcome, e.reason, e.rewritten_bytes) = how_it_ended(unfinished),
        }
        Ok(FileDone {
            entry: e,
            problem: !matches!(
                outcome,
                FileOutcome::Refreshed { .. } | FileOutcome::Interrupted { .. }
            ),
            interrupted: matches!(outcome, FileOutcome::Interrupted { .. }),
            outcome: Some(outcome),
        })
    }
}

/// How a file's refresh ended, for its record entry: the outcome, why in words (none for a file refreshed whole),
/// and the bytes rewritten and verified.
fn how_it_ended(outcome: &FileOutcome) -> (RefreshOutcome, Option<String>, u64) {
    match outcome {
        FileOutcome::Refreshed { bytes, .. } => (RefreshOutcome::Refreshed, None, *bytes),
        FileOutcome::Refused { reason } => (RefreshOutcome::Skipped, Some(reason.clone()), 0),
        FileOutcome::GaveWay {
            reason,
            chunks_done,
            rewritten_bytes,
            times_restored,
        } => {
            let times = if *times_restored {
                "times put back"
            } else {
                "its data changed, so its times are left as they are"
            };
            let reason = format!("{reason}; left alone after {chunks_done} chunks, {times}");
            (RefreshOutcome::GaveWay, Some(reason), *rewritten_bytes)
        }
        FileOutcome::VerifyFailed { offset, .. } => {
            let reason = format!(
                "the chunk at byte {offset} read back differently after rewriting (the original bytes were \
                 written again); check the drive"
            );
            (RefreshOutcome::Failed, Some(reason), 0)
        }
        FileOutcome::WriteFailed {
            offset,
            error,
            rewritten_bytes,
            times_restored,
        } => {
            let times = if *times_restored {
                "its times are as they were"
            } else {
                "its times are left as they are (another process acted meanwhile)"
            };
            let reason = format!(
                "writing the chunk at byte {offset}: {error}; the chunk reads back unchanged and {times}"
            );
            (RefreshOutcome::Failed, Some(reason), *rewritten_bytes)
        }
        FileOutcome::Interrupted {
            chunks_done,
            rewritten_bytes,
            ..
        } => {
            let reason = format!("interrupted after {chunks_done} chunks; times put back");
            (RefreshOutcome::Interrupted, Some(reason), *rewritten_bytes)
        }
    }
}

/// The record of a run about to rewrite `selection` (or, `dry_run`, one that only lists it): what was chosen, and
/// the paths the walk did not take. The caller's clock measures the run; the session counts no time of its own.
pub fn planned_record(
    selection: &Selection,
    walked_skipped: &[(PathBuf, String)],
    dry_run: bool,
) -> RefreshAnalysis {
    RefreshAnalysis {
        dry_run,
        selected_bytes: selection.files.iter().map(|c| c.size_bytes).sum(),
        younger_files: selection.younger as u32,
        files: walked_skipped
            .iter()
            .map(|(path, reason)| entry(path, RefreshOutcome::Skipped, 0, Some(reason.clone())))
            .collect(),
        rewritten_bytes: 0,
        seconds: 0.0,
        paused_s: 0.0,
        problems: 0,
    }
}

/// Records the files a stopped run never reached.
fn not_reached(files: &[Found], events: &mut dyn SessionEvents, record: &mut RefreshAnalysis) {
    for c in files {
        let e = entry(
            &c.path,
            RefreshOutcome::Interrupted,
            c.size_bytes,
            Some("not reached before the stop".into()),
        );
        events.file(c, &e, None);
        record.files.push(e);
    }
}

/// One file's record entry, before its outcome fills it in.
pub fn entry(path: &Path, outcome: RefreshOutcome, size_bytes: u64, reason: Option<String>) -> RefreshedFile {
    RefreshedFile {
        name: escape_path(path),
        outcome,
        size_bytes,
        rewritten_bytes: 0,
        reason,
        before_bytes_per_s: None,
        after_bytes_per_s: None,
    }
}
