//! The state directory: the one owner of everything refresh keeps between runs.
//!
//! - an exclusive lock (`lock`; its holder is named from /proc/locks), so two refreshes never interleave
//!   journal records or compact under each other; a second run is told who holds it;
//! - the journal (`refresh-journal.jsonl`, see [`super::journal`]);
//! - the refresh log (`refreshed.jsonl`): when each file was last rewritten, and [`RefreshLog::data_age_s`],
//!   the one notion of a file's data age that `scan` and `refresh --older-than` share.
//!
//! Reading the refresh log needs no lock and creates nothing (scan is read-only); everything that writes goes
//! through a locked [`StateDir`], and every file it writes follows ssdlab's output rule (ssdlab-outputs): created
//! new, or written only while the directory's manifest proves it ssdlab's own; a file of someone else's under one
//! of these names is never truncated, appended to or replaced. Files an older ssdlab left before it kept a
//! manifest are taken on by their format alone (a lock holding a process id, journal lines of JSON).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use ssdlab_outputs::{Appender, Kind, Output, OutputDir, OutputError, Status};

use super::file::{FileId, PathBytes, Time, time_ns};
use super::journal::{Journal, JournalError, JournalStore};

pub const JOURNAL_FILE: &str = "refresh-journal.jsonl";
pub const REFRESH_LOG_FILE: &str = "refreshed.jsonl";

/// Opens a file of the state directory: never through a symlink (a link planted there must not make refresh
/// truncate, overwrite or append to another file), never blocking on a FIFO, and only a regular file.
fn open_state_file(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a symbolic link, which ssdlab never wrote: remove it",
                        path.display()
                    ),
                )
            } else {
                e
            }
        })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file, which ssdlab never wrote: remove it",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Reads a file of the state directory ([`open_state_file`]'s rules); empty when there is none.
fn read_state_file(path: &Path) -> io::Result<Vec<u8>> {
    match open_state_file(path, OpenOptions::new().read(true)) {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(bytes)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
pub const LOCK_FILE: &str = "lock";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    // Causes are printed in the messages, so they are not sources (anyhow's `{:#}` would print them twice).
    #[error("{dir}: cannot use the state directory: {cause}")]
    Io { dir: PathBuf, cause: io::Error },
    #[error(
        "{dir}: another ssdlab refresh (process {holder}) is using this state directory; wait for it to finish or stop it"
    )]
    Locked { dir: PathBuf, holder: String },
    #[error("{dir}: {cause}")]
    Journal { dir: PathBuf, cause: JournalError },
}

/// A locked state directory. The lock is released when this is dropped (or the process dies).
pub struct StateDir {
    dir: PathBuf,
    _lock: File,
    pub journal: Journal,
}

/// What the lock file holds: it marks the file as refresh's lock; who holds the lock, /proc/locks says.
const LOCK_MARKER: &[u8] = b"ssdlab refresh lock\n";

/// An older ssdlab's lock: its holder's process id (or nothing, if it died before writing one).
fn legacy_lock(bytes: &[u8]) -> bool {
    bytes.len() <= 24
        && bytes
            .iter()
            .all(|c| c.is_ascii_digit() || c.is_ascii_whitespace())
}

/// An older ssdlab's journal: its records, one a line.
fn legacy_journal(bytes: &[u8]) -> bool {
    ssdlab_outputs::older_lines(bytes, super::journal::is_record_line, b"{\"event\":")
}

/// An older ssdlab's refresh log: its lines, one a rewritten file (also the shape of versions before files were
/// known by a lasting identity, `{"dev":..,"ino":..,"unix_s":..}`, which the log's reader skips).
fn legacy_log(bytes: &[u8]) -> bool {
    let line = |l: &[u8]| {
        serde_json::from_slice::<LogLine>(l).is_ok()
            || serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(l)
                .is_ok_and(|m| m.contains_key("unix_s") && (m.contains_key("ino") || m.contains_key("id")))
    };
    ssdlab_outputs::older_lines(bytes, line, b"{\"")
}

fn outputs_error(dir: &Path) -> impl FnOnce(OutputError) -> StateError + '_ {
    move |e| StateError::Io {
        dir: dir.to_path_buf(),
        cause: io::Error::new(io::ErrorKind::InvalidInput, e.to_string()),
    }
}

impl StateDir {
    /// Creates the directory if needed, takes its lock (or says who holds it) and replays the journal.
    pub fn lock(dir: &Path) -> Result<Self, StateError> {
        let outputs = OutputDir::create(dir).map_err(outputs_error(dir))?;
        let lock = outputs
            .open_lock(LOCK_FILE, LOCK_MARKER, legacy_lock)
            .map_err(outputs_error(dir))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                    holder: ssdlab_outputs::lock_holder(&lock)
                        .map_or_else(|| "unknown".into(), |pid| pid.to_string()),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StateError::Io {
                    dir: dir.to_path_buf(),
                    cause: e,
                });
            }
        }
        let appender = outputs
            .appender(JOURNAL_FILE, Kind::Journal, legacy_journal)
            .map_err(outputs_error(dir))?;
        let store = FileStore {
            path: dir.join(JOURNAL_FILE),
            outputs,
            appender,
        };
        let journal = Journal::open(Box::new(store)).map_err(|source| StateError::Journal {
            dir: dir.to_path_buf(),
            cause: source,
        })?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
            _lock: lock,
            journal,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// Appends to the refresh log of a state directory that a file was rewritten whole, keeping the log open between
/// files (see [`Appender`]). Only the holder of the directory's lock writes with it.
pub struct RefreshLogWriter {
    dir: PathBuf,
    appender: Option<Appender>,
}

impl RefreshLogWriter {
    /// A writer of `dir`'s log; nothing is opened until the first record.
    pub fn new(dir: &Path) -> Self {
        RefreshLogWriter {
            dir: dir.to_path_buf(),
            appender: None,
        }
    }

    /// Records that `path` (`id`) was rewritten whole at `unix_s`, durably.
    pub fn record(&mut self, id: FileId, path: &Path, unix_s: f64) -> io::Result<()> {
        let line = LogLine {
            id,
            path: PathBytes(path.to_path_buf()),
            unix_s,
        };
        let mut text = serde_json::to_vec(&line).map_err(io::Error::other)?;
        text.push(b'\n');
        let as_io = |e: OutputError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
        if self.appender.is_none() {
            let outputs = OutputDir::open(&self.dir).map_err(as_io)?;
            self.appender = Some(
                outputs
                    .appender(REFRESH_LOG_FILE, Kind::Log, legacy_log)
                    .map_err(as_io)?,
            );
        }
        let appender = self.appender.as_mut().expect("made above");
        appender.append(&text, true).map_err(as_io)
    }
}

#[derive(Serialize, Deserialize)]
struct LogLine {
    id: FileId,
    path: PathBytes,
    unix_s: f64,
}

/// When ssdlab last rewrote each file, read without a lock and without creating anything.
#[derive(Debug, Default, Clone)]
pub struct RefreshLog {
    refreshed_unix_s: HashMap<FileId, f64>,
}

impl RefreshLog {
    /// The log in `dir`; empty when there is none (or it cannot be read: scan must still run).
    pub fn load(dir: &Path) -> Self {
        let text = read_state_file(&dir.join(REFRESH_LOG_FILE)).unwrap_or_default();
        let mut refreshed_unix_s = HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            // Lines from older versions (keyed by device number) and torn lines are ignored.
            if let Ok(entry) = serde_json::from_slice::<LogLine>(line) {
                let at = refreshed_unix_s.entry(entry.id).or_insert(entry.unix_s);
                *at = f64::max(*at, entry.unix_s);
            }
        }
        RefreshLog { refreshed_unix_s }
    }

    pub fn refreshed_at(&self, id: &FileId) -> Option<f64> {
        self.refreshed_unix_s.get(id).copied()
    }

    /// How old a file's data is, in seconds: since the earlier of its modification and birth times, or since
    /// ssdlab last rewrote it, whichever is more recent. Never negative.
    pub fn data_age_s(&self, id: &FileId, mtime: Time, birth: Option<Time>, now_unix_s: f64) -> f64 {
        let written_ns = birth.map_or(time_ns(mtime), |b| time_ns(b).min(time_ns(mtime)));
        let mut written_s = written_ns as f64 / 1e9;
        if let Some(at) = self.refreshed_at(id) {
            written_s = written_s.max(at);
        }
        (now_unix_s - written_s).max(0.0)
    }
}

/// The journal as a file in the state directory, written by the output rule. Only a holder of the directory's
/// lock uses it.
struct FileStore {
    path: PathBuf,
    outputs: OutputDir,
    /// The journal kept open between records (a refresh appends three records a chunk).
    appender: Appender,
}

fn not_ours(e: OutputError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

impl JournalStore for FileStore {
    fn load(&mut self) -> io::Result<Vec<u8>> {
        // A file of someone else's under the journal's name is not read as refresh's journal (its "entries" would
        // be settled): only ssdlab's own, or an older ssdlab's by its format.
        match self.outputs.status(JOURNAL_FILE).map_err(not_ours)? {
            Status::Absent | Status::Ours(Kind::Journal) => read_state_file(&self.path),
            _ => {
                let bytes = read_state_file(&self.path)?;
                if !legacy_journal(&bytes) {
                    return Err(not_ours(OutputError::NotOurs {
                        path: self.path.clone(),
                        kind: Kind::Journal,
                        why: "it does not hold a journal's lines".into(),
                    }));
                }
                Ok(bytes)
            }
        }
    }

    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        self.appender.append(line, true).map_err(not_ours)
    }

    fn append_unsynced(&mut self, line: &[u8]) -> io::Result<()> {
        self.appender.append(line, false).map_err(not_ours)
    }

    fn replace(&mut self, content: &[u8]) -> io::Result<()> {
        // Compaction: an older ssdlab's journal is taken on first (appending nothing), then replaced by the rule.
        // The kept journal is let go first: the name is about to lead to another file.
        self.appender.release();
        if self.outputs.status(JOURNAL_FILE).map_err(not_ours)? != Status::Absent {
            self.outputs
                .append(JOURNAL_FILE, Kind::Journal, b"", false, legacy_journal)
                .map_err(not_ours)?;
        }
        self.outputs
            .write(
                &[Output {
                    name: JOURNAL_FILE,
                    kind: Kind::Journal,
                    bytes: content,
                }],
                &[],
            )
            .map_err(not_ours)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ssdlab-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn symlinks_planted_in_the_state_directory_are_never_followed() {
        for name in [
            LOCK_FILE,
            "refresh-journal.jsonl",
            "refresh-journal.tmp",
            REFRESH_LOG_FILE,
        ] {
            let dir = tempdir(&format!("planted-{name}"));
            std::fs::create_dir_all(&dir).unwrap();
            let victim = dir.with_extension("victim");
            std::fs::write(&victim, b"someone's data").unwrap();
            std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
            // Taking the lock, replaying and compacting the journal, and logging a refresh all refuse or skip the
            // link; none of them writes through it.
            if let Ok(mut state) = StateDir::lock(&dir) {
                let _ = state.journal.compact();
                let id = FileId {
                    fs: 1,
                    ino: 2,
                    birth: None,
                };
                let _ = RefreshLogWriter::new(state.path()).record(id, Path::new("/x"), 1.0);
            }
            assert_eq!(std::fs::read(&victim).unwrap(), b"someone's data", "{name}");
            assert!(
                std::fs::symlink_metadata(dir.join(name))
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(&victim);
        }
    }

    /// #45 defect 6: a user's file named `lock` (or named like the journal or the log) in the state directory is
    /// never truncated, written or appended to: refresh refuses the directory and says which file is in the way.
    /// An older ssdlab's lock (a process id) and journal lines are taken on.
    #[test]
    fn a_users_files_in_the_state_directory_are_never_truncated_or_appended_to() {
        for (name, content) in [
            (LOCK_FILE, &b"my shopping list: eggs, milk"[..]),
            (JOURNAL_FILE, b"not a journal\n"),
        ] {
            let dir = tempdir(&format!("theirs-{name}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), content).unwrap();
            let refused = StateDir::lock(&dir).err().expect("refused");
            assert!(refused.to_string().contains("not ssdlab's own"), "{refused}");
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), content, "{name}");
            let _ = std::fs::remove_dir_all(&dir);
        }
        let dir = tempdir("theirs-log");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(REFRESH_LOG_FILE), b"my notes\n").unwrap();
        let state = StateDir::lock(&dir).unwrap();
        let id = FileId {
            fs: 1,
            ino: 2,
            birth: None,
        };
        assert!(
            RefreshLogWriter::new(state.path())
                .record(id, Path::new("/x"), 1.0)
                .is_err()
        );
        assert_eq!(std::fs::read(dir.join(REFRESH_LOG_FILE)).unwrap(), b"my notes\n");
        drop(state);
        let _ = std::fs::remove_dir_all(&dir);

        let old = tempdir("older");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join(LOCK_FILE), b"4242\n").unwrap();
        std::fs::write(old.join(JOURNAL_FILE), b"").unwrap();
        let mut state = StateDir::lock(&old).expect("an older ssdlab's state is taken on");
        state.journal.compact().unwrap();
        drop(state);
        let _ = std::fs::remove_dir_all(&old);
    }

    #[test]
    fn a_second_holder_is_told_who_has_the_lock() {
        let dir = tempdir("lock");
        let first = StateDir::lock(&dir).unwrap();
        match StateDir::lock(&dir) {
            Err(StateError::Locked { holder, .. }) => assert_eq!(holder, std::process::id().to_string()),
            other => panic!("expected a lock refusal, got {:?}", other.err()),
        }
        drop(first);
        assert!(StateDir::lock(&dir).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_age_counts_from_the_latest_rewrite() {
        let dir = tempdir("age");
        let id = FileId {
            fs: 7,
            ino: 9,
            birth: Some((1000, 0)),
        };
        let now = 100_000.0;
        assert_eq!(
            RefreshLog::load(&dir).data_age_s(&id, (2000, 0), Some((1000, 0)), now),
            99_000.0
        );
        let state = StateDir::lock(&dir).unwrap();
        RefreshLogWriter::new(state.path())
            .record(id, Path::new("/x"), 90_000.0)
            .unwrap();
        let log = RefreshLog::load(&dir);
        assert_eq!(log.data_age_s(&id, (2000, 0), Some((1000, 0)), now), 10_000.0);
        // Another inode with the same number (reused) is not the refreshed file.
        let reused = FileId {
            birth: Some((1001, 0)),
            ..id
        };
        assert_eq!(log.data_age_s(&reused, (2000, 0), Some((1001, 0)), now), 98_999.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
