//! The refresh journal: what an interrupted run needs to put every file back as its owner had it.
//!
//! One JSON line per step, durable before the step it announces: a `begin` record with the file's identity,
//! name and original facts before its first write, a `writing` record with the chunk's offset, length and
//! checksum (and the stamp the file had before it) before each write, a `restoring` record with the exact
//! modification time the write set before the original goes back, a `done` record when the write is over (or
//! `withdrawn` when it was never made), and an `end` record when the file is finished or given up. A resume
//! therefore knows, for the one write that may have been cut off, which bytes it wrote (the checksum) and when,
//! and tells its own write from someone else's change.
//!
//! The journal never decides anything about files; [`crate::refresh::protocol`] does. It must never lose a
//! record of an unfinished file: unreadable lines are counted and skipped (a torn last line is normal after a
//! kill), and compaction keeps every unfinished entry whole.

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

use super::file::{FileId, PathBytes, Stamp, Time};

/// Where journal bytes live: a file in the state directory, or memory in the crash tests.
pub trait JournalStore {
    /// The whole journal as stored.
    fn load(&mut self) -> io::Result<Vec<u8>>;
    /// Appends one line; durable when it returns.
    fn append(&mut self, line: &[u8]) -> io::Result<()>;
    /// Appends one line that must survive a kill but not a power failure (no sync).
    fn append_unsynced(&mut self, line: &[u8]) -> io::Result<()> {
        self.append(line)
    }
    /// Replaces the whole journal atomically and durably (compaction).
    fn replace(&mut self, content: &[u8]) -> io::Result<()>;
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    // The cause is in the message, so it is not also the source (anyhow's `{:#}` would print it twice).
    #[error("cannot write the journal: {0}")]
    Io(io::Error),
}

impl From<io::Error> for JournalError {
    fn from(e: io::Error) -> Self {
        JournalError::Io(e)
    }
}

/// The first record of a file: who it is and what it was like before we touched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Begin {
    pub id: FileId,
    pub generation: u64,
    /// The path the user gave, and the file's path (beneath it).
    pub root: PathBytes,
    pub path: PathBytes,
    pub size_bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: Time,
    pub mtime: Time,
    pub stamp: Stamp,
    pub chunk_bytes: u64,
    /// The kernel's file handle in hexadecimal, to find the inode again if it was renamed after a kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle_hex: Option<String>,
}

/// Announces one write: durable before the write starts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Writing {
    pub id: FileId,
    /// Chunk number, in the order of the file's data ranges.
    pub index: u64,
    pub offset: u64,
    pub len: u64,
    /// Checksum of the bytes about to be written (the bytes just read from the same place).
    pub sum: u64,
    /// The file as it was before this write: if it still is, the write never landed.
    pub before: Stamp,
    /// Wall-clock time (ns since the epoch) when this record was made; the write follows within
    /// [`WRITE_WITHIN_NS`] or is announced again.
    pub wall_ns: i64,
}

/// How soon after its `writing` record a write must start; the protocol re-announces a write that would start
/// later (a stalled process), so a resume may take a modification time up to this long after the record as ours.
pub const WRITE_WITHIN_NS: i64 = 1_000_000_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Record {
    Begin(Begin),
    Writing(Writing),
    /// The announced write was made, judged undisturbed, and set the file's modification time to `written`;
    /// the original time is about to go back. A resume that finds exactly `written` knows the time is ours.
    Restoring {
        id: FileId,
        index: u64,
        written: Time,
    },
    /// The last announced write was not made (the lease was lost first): nothing is in flight.
    Withdrawn {
        id: FileId,
    },
    /// The write of chunk `index` is over (made, time put back): nothing is in flight.
    Done {
        id: FileId,
        index: u64,
    },
    End {
        id: FileId,
    },
}

/// Whether `line` is one of the journal's records (a record damaged by a crash still starts as one does: the
/// journal's reader skips it).
pub fn is_record_line(line: &[u8]) -> bool {
    serde_json::from_slice::<Record>(line).is_ok() || line.starts_with(b"{\"event\":\"")
}

/// A file with unfinished work: its begin record and its last announced write, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Unfinished {
    pub begin: Begin,
    pub last: Option<Writing>,
    /// The modification time the last announced write set, when it was made and its time was about to be put
    /// back (a `restoring` record after the last `writing` one).
    pub restoring: Option<Time>,
    /// Chunks known to be rewritten, in order: a resume with the same chunk size starts after them.
    pub chunks_done: u64,
}

/// The journal as replayed, plus the store it appends to.
pub struct Journal {
    store: Box<dyn JournalStore>,
    open: BTreeMap<FileId, Unfinished>,
    /// Lines that could not be read on replay (other than a torn last line).
    pub unreadable_lines: usize,
}

impl Journal {
    /// Replays the store and compacts it to the unfinished entries.
    pub fn open(mut store: Box<dyn JournalStore>) -> Result<Self, JournalError> {
        let bytes = store.load()?;
        let mut open = BTreeMap::new();
        let mut unreadable_lines = 0;
        let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        let complete = if bytes.ends_with(b"\n") {
            lines.len() - 1
        } else {
            // The last line never got its newline: a write cut off by a kill, never acted on.
            lines.len().saturating_sub(1)
        };
        for line in &lines[..complete] {
            if line.is_empty() {
                continue;
            }
            let Ok(record) = serde_json::from_slice::<Record>(line) else {
                unreadable_lines += 1;
                continue;
            };
            match record {
                Record::Begin(begin) => {
                    open.insert(
                        begin.id,
                        Unfinished {
                            begin,
                            last: None,
                            restoring: None,
                            chunks_done: 0,
                        },
                    );
                }
                Record::Done { id, index } => {
                    if let Some(entry) = open.get_mut(&id) {
                        entry.last = None;
                        entry.restoring = None;
                        entry.chunks_done = index + 1;
                    }
                }
                Record::Writing(w) => {
                    if let Some(entry) = open.get_mut(&w.id) {
                        entry.last = Some(w);
                        entry.restoring = None;
                    }
                }
                Record::Restoring { id, index, written } => {
                    if let Some(entry) = open.get_mut(&id)
                        && entry.last.is_some_and(|w| w.index == index)
                    {
                        entry.restoring = Some(written);
                    }
                }
                Record::Withdrawn { id } => {
                    if let Some(entry) = open.get_mut(&id) {
                        entry.last = None;
                        entry.restoring = None;
                    }
                }
                Record::End { id } => {
                    open.remove(&id);
                }
            }
        }
        let mut journal = Journal {
            store,
            open,
            unreadable_lines,
        };
        journal.compact()?;
        Ok(journal)
    }

    /// Rewrites the store with only the unfinished entries, each whole (begin and last write).
    pub fn compact(&mut self) -> Result<(), JournalError> {
        let mut out = Vec::new();
        for entry in self.open.values() {
            push_line(&mut out, &Record::Begin(entry.begin.clone()));
            if entry.chunks_done > 0 {
                let index = entry.chunks_done - 1;
                push_line(
                    &mut out,
                    &Record::Done {
                        id: entry.begin.id,
                        index,
                    },
                );
            }
            if let Some(w) = entry.last {
                push_line(&mut out, &Record::Writing(w));
                if let Some(written) = entry.restoring {
                    push_line(
                        &mut out,
                        &Record::Restoring {
                            id: w.id,
                            index: w.index,
                            written,
                        },
                    );
                }
            }
        }
        self.store.replace(&out)?;
        Ok(())
    }

    fn append(&mut self, record: &Record) -> Result<(), JournalError> {
        let mut line = Vec::new();
        push_line(&mut line, record);
        self.store.append(&line)?;
        Ok(())
    }

    /// Appends a record that must survive a kill but not a power failure (no sync).
    fn append_unsynced(&mut self, record: &Record) -> Result<(), JournalError> {
        let mut line = Vec::new();
        push_line(&mut line, record);
        self.store.append_unsynced(&line)?;
        Ok(())
    }

    pub fn begin(&mut self, begin: Begin) -> Result<(), JournalError> {
        assert!(
            !self.open.contains_key(&begin.id),
            "a file is begun only after its earlier entry was settled"
        );
        self.append(&Record::Begin(begin.clone()))?;
        self.open.insert(
            begin.id,
            Unfinished {
                begin,
                last: None,
                restoring: None,
                chunks_done: 0,
            },
        );
        Ok(())
    }

    pub fn writing(&mut self, w: Writing) -> Result<(), JournalError> {
        assert!(
            self.open.contains_key(&w.id),
            "a write is announced only for a begun file"
        );
        self.append(&Record::Writing(w))?;
        if let Some(entry) = self.open.get_mut(&w.id) {
            entry.last = Some(w);
            entry.restoring = None;
        }
        Ok(())
    }

    /// Records the modification time the announced write of chunk `index` set, just before the original goes
    /// back. Not synced, as [`Journal::done`]: it must survive a kill.
    pub fn restoring(&mut self, id: FileId, index: u64, written: Time) -> Result<(), JournalError> {
        assert!(
            self.open
                .get(&id)
                .is_some_and(|e| e.last.is_some_and(|w| w.index == index)),
            "a time restore follows the announced write of the same chunk"
        );
        self.append_unsynced(&Record::Restoring { id, index, written })?;
        if let Some(entry) = self.open.get_mut(&id) {
            entry.restoring = Some(written);
        }
        Ok(())
    }

    pub fn withdraw(&mut self, id: FileId) -> Result<(), JournalError> {
        self.append(&Record::Withdrawn { id })?;
        if let Some(entry) = self.open.get_mut(&id) {
            entry.last = None;
            entry.restoring = None;
        }
        Ok(())
    }

    /// Records that the write of chunk `index` is over. Not synced: it must survive a kill, and after a power
    /// failure the file's own times are not durable either.
    pub fn done(&mut self, id: FileId, index: u64) -> Result<(), JournalError> {
        self.append_unsynced(&Record::Done { id, index })?;
        if let Some(entry) = self.open.get_mut(&id) {
            entry.last = None;
            entry.restoring = None;
            entry.chunks_done = index + 1;
        }
        Ok(())
    }

    pub fn end(&mut self, id: FileId) -> Result<(), JournalError> {
        self.append(&Record::End { id })?;
        self.open.remove(&id);
        Ok(())
    }

    /// Ends, unsettled, every unfinished entry for `path` or beneath it (component by component), and returns
    /// what they were: the user's way out for entries whose file system will never come back.
    pub fn forget_beneath(&mut self, path: &std::path::Path) -> Result<Vec<Begin>, JournalError> {
        let ids: Vec<FileId> = self
            .open
            .values()
            .filter(|e| e.begin.path.0.starts_with(path))
            .map(|e| e.begin.id)
            .collect();
        let mut forgotten = Vec::new();
        for id in ids {
            forgotten.push(self.open[&id].begin.clone());
            self.end(id)?;
        }
        Ok(forgotten)
    }

    /// The unfinished entries, in identity order.
    pub fn unfinished(&self) -> Vec<Unfinished> {
        self.open.values().cloned().collect()
    }

    pub fn entry(&self, id: &FileId) -> Option<&Unfinished> {
        self.open.get(id)
    }
}

fn push_line(out: &mut Vec<u8>, record: &Record) {
    serde_json::to_writer(&mut *out, record).expect("journal records always serialize");
    out.push(b'\n');
}

#[cfg(test)]
pub(crate) mod memory {
    //! An in-memory journal store for tests.
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    pub struct MemoryStore(pub Arc<Mutex<Vec<u8>>>);

    impl JournalStore for MemoryStore {
        fn load(&mut self) -> io::Result<Vec<u8>> {
            Ok(self.0.lock().unwrap().clone())
        }
        fn append(&mut self, line: &[u8]) -> io::Result<()> {
            self.0.lock().unwrap().extend_from_slice(line);
            Ok(())
        }
        fn replace(&mut self, content: &[u8]) -> io::Result<()> {
            *self.0.lock().unwrap() = content.to_vec();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::memory::MemoryStore;
    use super::*;

    fn begin(ino: u64) -> Begin {
        Begin {
            id: FileId {
                fs: 1,
                ino,
                birth: Some((5, 0)),
            },
            generation: 0,
            root: PathBytes("/r".into()),
            path: PathBytes(format!("/r/{ino}").into()),
            size_bytes: 100,
            mode: 0o644,
            uid: 0,
            gid: 0,
            atime: (1, 0),
            mtime: (2, 0),
            stamp: Stamp {
                size_bytes: 100,
                mtime: (2, 0),
                ctime: (3, 0),
            },
            chunk_bytes: 64,
            handle_hex: None,
        }
    }

    #[test]
    fn garbage_and_torn_lines_are_skipped_and_unfinished_entries_survive() {
        let store = MemoryStore::default();
        let mut j = Journal::open(Box::new(store.clone())).unwrap();
        j.begin(begin(1)).unwrap();
        j.begin(begin(2)).unwrap();
        j.end(begin(2).id).unwrap();
        store
            .0
            .lock()
            .unwrap()
            .extend_from_slice(b"{\"event\":\"beg\xffin\"}\n");
        j.begin(begin(3)).unwrap();
        store
            .0
            .lock()
            .unwrap()
            .extend_from_slice(b"{\"event\":\"end\",\"id\"");
        let j = Journal::open(Box::new(store.clone())).unwrap();
        assert_eq!(j.unreadable_lines, 1);
        let ids: Vec<u64> = j.unfinished().iter().map(|u| u.begin.id.ino).collect();
        assert_eq!(ids, vec![1, 3]);
        // Compaction kept exactly those.
        let again = Journal::open(Box::new(store)).unwrap();
        assert_eq!(again.unfinished().len(), 2);
        assert_eq!(again.unreadable_lines, 0);
    }

    #[test]
    fn forgetting_drops_entries_beneath_a_path_by_component_only() {
        let store = MemoryStore::default();
        let mut j = Journal::open(Box::new(store.clone())).unwrap();
        for (ino, path) in [(1, "/mnt/a/x"), (2, "/mnt/ab/y"), (3, "/mnt/a")] {
            j.begin(Begin {
                path: PathBytes(path.into()),
                ..begin(ino)
            })
            .unwrap();
        }
        let gone: Vec<u64> = j
            .forget_beneath(std::path::Path::new("/mnt/a"))
            .unwrap()
            .iter()
            .map(|b| b.id.ino)
            .collect();
        assert_eq!(gone, vec![1, 3], "/mnt/ab is not beneath /mnt/a");
        let again = Journal::open(Box::new(store)).unwrap();
        let left: Vec<u64> = again.unfinished().iter().map(|u| u.begin.id.ino).collect();
        assert_eq!(left, vec![2]);
    }
}
