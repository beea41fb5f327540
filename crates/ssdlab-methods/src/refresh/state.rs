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

impl StateDir {
    /// Creates the directory if needed, takes its lock (or says who holds it) and replays the journal.
    pub fn lock(dir: &Path) -> Result<Self, StateError> {
        let io_err = |source| StateError::Io {
            dir: dir.to_path_buf(),
            cause: source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut lock = open_state_file(
            &dir.join(LOCK_FILE),
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
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
        record_refreshed(&self.dir, id, path, unix_s)
    }
}

/// Appends to the refresh log of the state directory `dir` that `path` (`id`) was rewritten whole at `unix_s`.
/// Only the holder of the directory's lock calls it.
pub fn record_refreshed(dir: &Path, id: FileId, path: &Path, unix_s: f64) -> io::Result<()> {
    let line = LogLine {
        id,
        path: PathBytes(path.to_path_buf()),
        unix_s,
    };
    let mut log = open_state_file(
        &dir.join(REFRESH_LOG_FILE),
        OpenOptions::new().create(true).append(true),
    )?;
    let mut text = serde_json::to_vec(&line).map_err(io::Error::other)?;
    text.push(b'\n');
    log.write_all(&text)?;
    log.sync_data()
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

/// The journal as a file in the state directory. Only a holder of the directory's lock uses it.
struct FileStore {
    path: PathBuf,
}

impl JournalStore for FileStore {
    fn load(&mut self) -> io::Result<Vec<u8>> {
        read_state_file(&self.path)
    }

    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let mut file = open_state_file(&self.path, OpenOptions::new().create(true).append(true))?;
        file.write_all(line)?;
        file.sync_data()
    }

    fn append_unsynced(&mut self, line: &[u8]) -> io::Result<()> {
        open_state_file(&self.path, OpenOptions::new().create(true).append(true))?.write_all(line)
    }

    fn replace(&mut self, content: &[u8]) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        // A temporary file left by a crash is ours (only the lock's holder writes here): it goes, but only if it
        // is a regular file; then the new one is created O_EXCL.
        match std::fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_file() => std::fs::remove_file(&tmp)?,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a file ssdlab wrote: remove it", tmp.display()),
                ));
            }
            Err(_) => {}
        }
        {
            let mut out = open_state_file(&tmp, OpenOptions::new().write(true).create_new(true))?;
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
                let _ = state.record_refreshed(id, Path::new("/x"), 1.0);
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
