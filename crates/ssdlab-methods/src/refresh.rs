//! Refreshing a file in place without risking a byte.
//!
//! Each data chunk is read from the medium, checksummed, written back unchanged to the same offset, made
//! durable, evicted from the cache, read back from the medium and compared. Because the bytes written are the
//! bytes read, a write torn by a crash leaves the same content; the only danger is another writer changing the
//! chunk between our read and our write, which the file layer excludes (a write lease) or detects (size, mtime
//! and ctime compared with what our own writes left), abandoning the file from then on.
//!
//! Progress is journalled per chunk, durably, so a killed run resumes where it stopped, and the file's original
//! access and modification times are journalled before its first write so they are restored even after a kill.
//! This module owns that protocol; the system calls are behind [`ChunkFile`], implemented by `ssdlab-io`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A file opened for refreshing.
pub trait ChunkFile {
    /// Device and inode: the file's identity.
    fn identity(&self) -> (u64, u64);
    fn size_bytes(&self) -> u64;
    /// Ranges that hold data (holes are skipped), as (offset, length).
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>>;
    /// Reads from the medium (not the page cache) into `buf`; returns the bytes read.
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes `buf` at `offset` (durable only after [`ChunkFile::sync`]).
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Whether anyone else opened or changed the file since the last call (lease broken, or size, mtime or
    /// ctime differ from what our own writes left).
    fn changed_by_others(&mut self) -> io::Result<bool>;
    /// Whether size, mtime and ctime are still what our own last write (or the open) left: no one else wrote.
    fn unchanged_since_our_last_write(&mut self) -> io::Result<bool>;
    /// The file's (atime, mtime) as (seconds, nanoseconds) pairs.
    fn times(&self) -> ((i64, i64), (i64, i64));
    /// The file's current (mtime, ctime), to recognise later whether anyone else changed it.
    fn stamp(&self) -> io::Result<Stamp>;
    fn restore_times(&mut self, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()>;
}

/// How much is rewritten between syncs and journal records.
pub const BATCH_BYTES: u64 = 64 << 20;

/// (mtime, ctime) as (seconds, nanoseconds) pairs.
pub type Stamp = ((i64, i64), (i64, i64));

/// A fast 64-bit checksum of a buffer: four independent multiply-mix lanes over 32-byte blocks (so the CPU can
/// run them in parallel), folded together with the length. Collisions are what matters here, not
/// cryptographic strength.
pub fn checksum(data: &[u8]) -> u64 {
    const K: [u64; 4] = [
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
        0x9E37_79B9_7F4A_7C15,
        0xD6E8_FEB8_6659_FD93,
    ];
    let mut lanes = [K[2], K[3], K[0], K[1]];
    let mut blocks = data.chunks_exact(32);
    for block in &mut blocks {
        for (lane, (word, k)) in lanes.iter_mut().zip(block.chunks_exact(8).zip(K)) {
            let v = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ v).wrapping_mul(k).rotate_left(29);
        }
    }
    let mut h = data.len() as u64;
    for (lane, k) in lanes.iter().zip(K) {
        h = (h ^ lane).wrapping_mul(k).rotate_left(31);
    }
    for &b in blocks.remainder() {
        h = (h ^ b as u64).wrapping_mul(K[1]);
    }
    h ^ (h >> 29)
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum FileOutcome {
    Refreshed {
        bytes: u64,
        chunks: u64,
        resumed_from_chunk: u64,
    },
    /// Another process changed or opened the file; chunks done before that are kept, nothing after.
    Abandoned { reason: String, chunks_done: u64 },
    /// A chunk read back differently after rewriting (a failing medium).
    VerifyFailed { offset: u64 },
}

/// The durable journal: one line per event, fsynced after each append.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// (dev, ino) -> state of files with unfinished work.
    open: BTreeMap<(u64, u64), Entry>,
}

/// Journal state of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
    pub chunk_bytes: u64,
    /// Chunks completed, in order: work resumes after the last.
    pub chunks_done: u64,
    /// The file's (mtime, ctime) after our last journalled write: if it differs on resume, someone else
    /// changed the file in between.
    pub stamp: Option<Stamp>,
    /// A write was started and not journalled as done (a kill in between): the stamp may be ours.
    #[serde(default)]
    pub writing: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Record {
    Begin(Entry),
    Writing {
        dev: u64,
        ino: u64,
        index: u64,
    },
    Chunk {
        dev: u64,
        ino: u64,
        index: u64,
        stamp: Stamp,
    },
    End {
        dev: u64,
        ino: u64,
    },
}

impl Journal {
    /// Opens (or creates) the journal in `state_dir` and replays it.
    pub fn open(state_dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(state_dir)?;
        let path = state_dir.join("refresh-journal.jsonl");
        let mut open = BTreeMap::new();
        if let Ok(existing) = File::open(&path) {
            for line in BufReader::new(existing).lines() {
                let line = line?;
                // A kill can leave a torn last line: it never completed, so it is ignored.
                let Ok(record) = serde_json::from_str::<Record>(&line) else {
                    continue;
                };
                match record {
                    Record::Begin(entry) => {
                        open.insert((entry.dev, entry.ino), entry);
                    }
                    Record::Writing { dev, ino, .. } => {
                        if let Some(e) = open.get_mut(&(dev, ino)) {
                            e.writing = true;
                        }
                    }
                    Record::Chunk {
                        dev,
                        ino,
                        index,
                        stamp,
                    } => {
                        if let Some(e) = open.get_mut(&(dev, ino)) {
                            e.chunks_done = e.chunks_done.max(index + 1);
                            e.stamp = Some(stamp);
                            e.writing = false;
                        }
                    }
                    Record::End { dev, ino } => {
                        open.remove(&(dev, ino));
                    }
                }
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let mut journal = Journal { path, file, open };
        journal.compact()?;
        Ok(journal)
    }

    /// Rewrites the journal with only unfinished entries (atomically: temp file, fsync, rename, fsync dir).
    fn compact(&mut self) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        {
            let mut out = File::create(&tmp)?;
            // Each entry is written whole (progress, stamp and pending-write flag included).
            for entry in self.open.values() {
                writeln!(out, "{}", serde_json::to_string(&Record::Begin(entry.clone()))?)?;
            }
            out.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        Ok(())
    }

    fn append(&mut self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_string(record)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }

    /// Unfinished work for a file, if any.
    pub fn entry(&self, identity: (u64, u64)) -> Option<&Entry> {
        self.open.get(&identity)
    }

    /// Files with unfinished work.
    pub fn unfinished(&self) -> usize {
        self.open.len()
    }
}

/// Refreshes one file in chunks of at most `chunk_bytes` (a multiple of the direct-I/O alignment) that never
/// leave the file's data ranges (holes stay holes), resuming from the journal. `pace` is called before each
/// chunk is read (rate limiting, pausing while the device is busy).
pub fn refresh_file(
    file: &mut dyn ChunkFile,
    journal: &mut Journal,
    chunk_bytes: u64,
    buf: &mut Vec<u8>,
    check: &mut Vec<u8>,
    pace: &mut dyn FnMut(u64),
) -> io::Result<FileOutcome> {
    let (dev, ino) = file.identity();
    let size = file.size_bytes();
    // Resume only if the file is as our last journalled step left it: same size and chunking, and the same
    // (mtime, ctime) as then, unless a write of ours was cut off before it was journalled.
    let current = file.stamp()?;
    let resumed = journal.entry((dev, ino)).cloned().filter(|e| {
        e.size == size && e.chunk_bytes == chunk_bytes && (e.writing || e.stamp == Some(current))
    });
    let entry = match resumed {
        Some(entry) => entry,
        None => {
            // First visit, or the file changed since an interrupted run: its current times are the ones to keep.
            let (atime, mtime) = file.times();
            let entry = Entry {
                dev,
                ino,
                size,
                atime,
                mtime,
                chunk_bytes,
                chunks_done: 0,
                stamp: Some(current),
                writing: false,
            };
            journal.append(&Record::Begin(entry.clone()))?;
            journal.open.insert((dev, ino), entry.clone());
            entry
        }
    };
    // Chunks within the data ranges: a pure function of the ranges, so a resumed run walks the same list (a
    // change to the ranges changes the file's stamp, and the run starts over).
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for (start, len) in file.data_ranges()? {
        let end = (start + len).min(size);
        let mut offset = start;
        while offset < end {
            let piece = chunk_bytes.min(end - offset);
            chunks.push((offset, piece));
            offset += piece;
        }
    }
    // Ends the journal entry; with `restore`, puts the original times back first. Called while our lease is
    // still held, so no one else can have written since our last write.
    let finish = |file: &mut dyn ChunkFile, journal: &mut Journal, restore: bool| -> io::Result<()> {
        if restore {
            file.restore_times(entry.atime, entry.mtime)?;
        }
        journal.append(&Record::End { dev, ino })?;
        journal.open.remove(&(dev, ino));
        Ok(())
    };
    // Someone opened the file (our lease is being broken) or changed it: stop, and leave it as its owner had it.
    let abandon =
        |file: &mut dyn ChunkFile, journal: &mut Journal, chunks_done: usize| -> io::Result<FileOutcome> {
            // If the stamp is still ours, only an opener interrupted us: restore the times before letting it in.
            let ours = file.unchanged_since_our_last_write()?;
            finish(file, journal, ours)?;
            Ok(FileOutcome::Abandoned {
                reason: "another process opened or changed the file".into(),
                chunks_done: chunks_done as u64,
            })
        };

    // Chunks go in batches: each chunk is read and written back at once, then one sync makes the batch durable,
    // every chunk of it is re-read from the medium and compared, and one journal record covers it.
    let batch_chunks = (BATCH_BYTES / chunk_bytes).max(1) as usize;
    let todo: Vec<(usize, (u64, u64))> = chunks
        .iter()
        .copied()
        .enumerate()
        .skip(entry.chunks_done as usize)
        .collect();
    let mut refreshed_bytes = 0;
    for batch in todo.chunks(batch_chunks) {
        let first_index = batch[0].0;
        buf.resize(batch.len() * chunk_bytes as usize, 0);
        let mut written: Vec<(u64, usize, u64)> = Vec::with_capacity(batch.len());
        for (k, &(_, (offset, len))) in batch.iter().enumerate() {
            let want = len as usize;
            pace(len);
            if file.changed_by_others()? {
                return abandon(file, journal, first_index);
            }
            let slice = &mut buf[k * chunk_bytes as usize..][..want];
            if file.read_from_media(offset, slice)? != want {
                return abandon(file, journal, first_index);
            }
            let sum = checksum(slice);
            // Checked again right before writing: nothing else may have written since our read.
            if file.changed_by_others()? {
                return abandon(file, journal, first_index);
            }
            if written.is_empty() {
                journal.append(&Record::Writing {
                    dev,
                    ino,
                    index: first_index as u64,
                })?;
                if let Some(e) = journal.open.get_mut(&(dev, ino)) {
                    e.writing = true;
                }
            }
            file.write_at(offset, slice)?;
            written.push((offset, want, sum));
        }
        file.sync()?;
        for (k, &(offset, want, sum)) in written.iter().enumerate() {
            check.resize(want, 0);
            let reread = file.read_from_media(offset, &mut check[..want])?;
            if reread != want || checksum(&check[..want]) != sum {
                // Put the original bytes back once more, but only while no one else can have written.
                if !file.changed_by_others()? {
                    file.write_at(offset, &buf[k * chunk_bytes as usize..][..want])?;
                    file.sync()?;
                    finish(file, journal, true)?;
                }
                return Ok(FileOutcome::VerifyFailed { offset });
            }
            refreshed_bytes += want as u64;
        }
        let last_index = batch[batch.len() - 1].0 as u64;
        let stamp = file.stamp()?;
        journal.append(&Record::Chunk {
            dev,
            ino,
            index: last_index,
            stamp,
        })?;
        if let Some(e) = journal.open.get_mut(&(dev, ino)) {
            e.chunks_done = last_index + 1;
            e.stamp = Some(stamp);
            e.writing = false;
        }
    }
    finish(file, journal, true)?;
    Ok(FileOutcome::Refreshed {
        bytes: refreshed_bytes,
        chunks: chunks.len() as u64,
        resumed_from_chunk: entry.chunks_done,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_sees_every_byte() {
        let mut data = vec![7u8; 4099];
        let base = checksum(&data);
        for i in [0, 8, 4095, 4098] {
            data[i] ^= 1;
            assert_ne!(checksum(&data), base, "byte {i}");
            data[i] ^= 1;
        }
        assert_ne!(checksum(&data[..4098]), base);
    }
}
