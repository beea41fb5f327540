//! The state directory: the one owner of everything refresh keeps between runs.
//!
//! - an exclusive lock (`lock`, holding the owner's process id), so two refreshes never interleave journal
//!   records or compact under each other; a second run is told who holds it;
//! - the journal (`refresh-journal.jsonl`, see [`super::journal`]);
//! - the refresh log (`refreshed.jsonl`): when each file was last rewritten, and [`RefreshLog::data_age_s`],
//!   the one notion of a file's data age that `scan` and `refresh --older-than` share.
//!
//! Reading the refresh log needs no lock and creates nothing (scan is read-only); everything that writes goes
//! through a locked [`StateDir`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::file::{FileId, PathBytes, Time, time_ns};
use super::journal::{Journal, JournalError, JournalStore};

pub const JOURNAL_FILE: &str = "refresh-journal.jsonl";
pub const REFRESH_LOG_FILE: &str = "refreshed.jsonl";
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

impl StateDir {
    /// Creates the directory if needed, takes its lock (or says who holds it) and replays the journal.
    pub fn lock(dir: &Path) -> Result<Self, StateError> {
        let io_err = |source| StateError::Io {
            dir: dir.to_path_buf(),
            cause: source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
            .map_err(io_err)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = lock.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                    holder: if holder.is_empty() {
                        "unknown".into()
                    } else {
                        holder.to_string()
                    },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(e)),
        }
        lock.set_len(0).map_err(io_err)?;
        lock.rewind().map_err(io_err)?;
        writeln!(lock, "{}", std::process::id()).map_err(io_err)?;
        let store = FileStore {
            path: dir.join(JOURNAL_FILE),
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

    /// Records that `id` was rewritten at `unix_s`.
    pub fn record_refreshed(&mut self, id: FileId, path: &Path, unix_s: f64) -> io::Result<()> {
        let line = LogLine {
            id,
            path: PathBytes(path.to_path_buf()),
            unix_s,
        };
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(REFRESH_LOG_FILE))?;
        let mut text = serde_json::to_vec(&line).map_err(io::Error::other)?;
        text.push(b'\n');
        log.write_all(&text)?;
        log.sync_data()
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
        let text = std::fs::read(dir.join(REFRESH_LOG_FILE)).unwrap_or_default();
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

/// The journal as a file in the state directory. Only a holder of the directory's lock uses it.
struct FileStore {
    path: PathBuf,
}

impl JournalStore for FileStore {
    fn load(&mut self) -> io::Result<Vec<u8>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let mut file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(line)?;
        file.sync_data()
    }

    fn append_unsynced(&mut self, line: &[u8]) -> io::Result<()> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?
            .write_all(line)
    }

    fn replace(&mut self, content: &[u8]) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        {
            let mut out = File::create(&tmp)?;
            out.write_all(content)?;
            out.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
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
        let mut state = StateDir::lock(&dir).unwrap();
        state.record_refreshed(id, Path::new("/x"), 90_000.0).unwrap();
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
