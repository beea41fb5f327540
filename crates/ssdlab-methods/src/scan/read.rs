//! Timed reads of one file's data: every chunk timed, the slowest chunks read again to see whether their
//! slowness repeats. Reads only; it never writes and never opens anything itself.

use serde::{Deserialize, Serialize};
use ssdlab_core::device::{ClockKind, Completion, Device, DeviceError, Io, Op};
use ssdlab_core::rng::Rng;
use ssdlab_core::schema::{FileScan, RandomReadLatency};
use ssdlab_core::stats::median;

/// One file to scan: where its data is on the device, and how old it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanItem {
    /// The path, readable (bytes that are not UTF-8 as `\xNN`).
    pub name: String,
    /// The raw bytes of the path in hexadecimal, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_bytes_hex: Option<String>,
    /// Which device the file lives on (files on one device are read in turn, devices in parallel).
    pub device: String,
    pub age_s: f64,
    /// (offset, length) ranges holding data.
    pub ranges: Vec<(u64, u64)>,
}

/// How a scan reads each file's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// What `cat FILE > /dev/null` asks of a drive: sequential 128 KiB requests, one at a time (the window of
    /// kernel readahead), as seed 000 read its shards. The scan reads with O_DIRECT, so the page cache is
    /// neither used nor filled.
    Cat,
    /// Aligned chunks of `chunk_bytes`, `queue_depth` at a time: faster, and a deep queue lets a drive's dies
    /// work in parallel, which hides part of an old page's read retries.
    Chunks { chunk_bytes: u64, queue_depth: u32 },
}

/// What a scan does with each file: read it through with `reader`, then make `random_reads` random 4 KiB reads
/// at queue depth 1 inside its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanReads {
    pub reader: Reader,
    pub random_reads: u32,
}

/// The request size `cat` gets from kernel readahead.
pub const CAT_REQUEST_BYTES: u64 = 128 << 10;

/// What the host adds to each of `cat`'s requests on a virtual drive: the time between one request's completion
/// and the next one's issue (the copy to user space, the file system, the readahead that waits for the read it
/// follows). A real drive's scan pays its own host's; a virtual drive has no host, so the field report's is
/// modelled: fitted so that fresh data reads in its 1.0 h per 900 GB (524 µs a request) on the virtual 840 EVO,
/// whose own 128 KiB read at QD1 takes 337 µs (389 MB/s, as Tom's Hardware's 2013 QD1 figures place it).
pub const CAT_HOST_NS_ON_VIRTUAL_CLOCK: u64 = 187_000;

/// The size of a random read (`--random-reads`).
pub const RANDOM_READ_BYTES: u64 = 4096;

impl Reader {
    pub fn chunk_bytes(&self) -> u64 {
        match *self {
            Reader::Cat => CAT_REQUEST_BYTES,
            Reader::Chunks { chunk_bytes, .. } => chunk_bytes,
        }
    }

    pub fn queue_depth(&self) -> u32 {
        match *self {
            Reader::Cat => 1,
            Reader::Chunks { queue_depth, .. } => queue_depth,
        }
    }

    /// The reader in words, for tables and result.json.
    pub fn describe(&self) -> String {
        match *self {
            Reader::Cat => "cat: sequential 128 KiB reads, one at a time".into(),
            Reader::Chunks {
                chunk_bytes,
                queue_depth,
            } => format!(
                "chunks: {} reads, {queue_depth} at a time",
                ssdlab_core::units::BinaryBytes(chunk_bytes)
            ),
        }
    }
}

/// Reads one file's ranges as the reader does, timing every request, then re-reads the slowest requests (up to
/// 8) to see whether their slowness repeats; then makes the random 4 KiB reads at queue depth 1 inside the
/// file's data (offsets drawn from a generator seeded by the file's name).
pub fn scan_item(
    device: &mut dyn Device,
    item: &ScanItem,
    reads: &ScanReads,
) -> Result<FileScan, DeviceError> {
    let (chunk_bytes, qd) = (reads.reader.chunk_bytes(), reads.reader.queue_depth());
    let align = device.info().logical_block_bytes.max(512) as u64;
    let mut chunks: Vec<Chunk> = Vec::new();
    for &(start, len) in &item.ranges {
        let mut offset = start / align * align;
        let end = start + len;
        while offset < end {
            let want = chunk_bytes.min(end - offset).next_multiple_of(align);
            // The last chunk of a file may be cut at its end (a file's size need not be a whole block).
            chunks.push(Chunk {
                offset,
                len: want,
                needed: want.min(end - offset),
            });
            offset += want;
        }
    }
    let host_gap_ns = match reads.reader {
        Reader::Cat if device.info().clock == ClockKind::Virtual => CAT_HOST_NS_ON_VIRTUAL_CLOCK,
        _ => 0,
    };
    let times = read_chunks(device, &chunks, chunk_bytes, qd, host_gap_ns)?;
    let bytes: u64 = item.ranges.iter().map(|r| r.1).sum();
    let first_submit = times.iter().map(|t| t.3).min().unwrap_or(0);
    let last_complete = times.iter().map(|t| t.2).max().unwrap_or(0);
    let wall_s = (last_complete.saturating_sub(first_submit) as f64 / 1e9).max(1e-9);
    // Slow chunks: more than twice the median chunk time; re-read the worst to see if it repeats.
    let durations: Vec<f64> = times.iter().map(|t| t.1 as f64).collect();
    let typical = median(&durations);
    let mut slow: Vec<(u64, u64)> = times
        .iter()
        .filter(|t| t.1 as f64 > 2.0 * typical && typical > 0.0)
        .map(|t| (t.0, t.1))
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.1));
    slow.truncate(8);
    let mut slow_chunks = Vec::new();
    for (offset, first_ns) in slow {
        let chunk = *chunks
            .iter()
            .find(|c| c.offset == offset)
            .expect("a slow chunk is one of the chunks");
        let again = read_chunks(device, &[chunk], chunk_bytes, 1, 0)?;
        slow_chunks.push((offset, first_ns, again.first().map_or(0, |t| t.1)));
    }
    let random_read_ns = random_read_latencies(device, item, reads.random_reads)?;
    Ok(FileScan {
        name: item.name.clone(),
        name_bytes_hex: item.name_bytes_hex.clone(),
        device: item.device.clone(),
        age_s: item.age_s,
        bytes,
        seconds: wall_s,
        bytes_per_s: bytes as f64 / wall_s,
        slow_chunks,
        slowdown_ratio: 0.0,
        flagged: false,
        confirmed: false,
        random_reads: RandomReadLatency::of_ns(&random_read_ns),
        random_read_ns,
    })
}

/// `count` random 4 KiB reads at queue depth 1 at 4 KiB-aligned places inside the item's data ranges; their
/// latencies in nanoseconds. A file with no whole 4 KiB block of data gets none.
fn random_read_latencies(
    device: &mut dyn Device,
    item: &ScanItem,
    count: u32,
) -> Result<Vec<u64>, DeviceError> {
    // Whole, aligned 4 KiB blocks of each range: (first block's offset, blocks).
    let blocks: Vec<(u64, u64)> = item
        .ranges
        .iter()
        .map(|&(start, len)| {
            let first = start.next_multiple_of(RANDOM_READ_BYTES);
            let end = (start + len) / RANDOM_READ_BYTES * RANDOM_READ_BYTES;
            (first, end.saturating_sub(first) / RANDOM_READ_BYTES)
        })
        .filter(|&(_, n)| n > 0)
        .collect();
    let total: u64 = blocks.iter().map(|b| b.1).sum();
    if count == 0 || total == 0 {
        return Ok(Vec::new());
    }
    let mut rng = Rng::new(name_seed(&item.name));
    let reads: Vec<Chunk> = (0..count)
        .map(|_| {
            let mut k = rng.below(total);
            let &(first, _) = blocks
                .iter()
                .find(|&&(_, n)| {
                    let here = k < n;
                    if !here {
                        k -= n;
                    }
                    here
                })
                .expect("k is below the total block count");
            Chunk {
                offset: first + k * RANDOM_READ_BYTES,
                len: RANDOM_READ_BYTES,
                needed: RANDOM_READ_BYTES,
            }
        })
        .collect();
    // One at a time, each timed on its own: queue depth 1, as a search's dependent lookups are.
    let timed = read_chunks(device, &reads, RANDOM_READ_BYTES, 1, 0)?;
    Ok(timed.iter().map(|t| t.1).collect())
}

/// A seed from a file's name (FNV-1a), so a file's random offsets are the same scan after scan.
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One read of a scan: `len` bytes at `offset`, of which the first `needed` are the file's data (a read may
/// stop at the end of a file, never before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    offset: u64,
    len: u64,
    needed: u64,
}

/// Reads chunks at a queue depth, the host taking `host_gap_ns` after each completion before it issues more (on
/// a virtual clock; 0 on a real one, whose host takes its own); returns (offset, latency ns, completed ns,
/// submitted ns) per chunk. A read
/// that fails, is refused or stops before its data ends fails the whole call, named by its offset, once the
/// reads still in flight have completed: the device is left with nothing in flight, so it can read the next
/// file.
fn read_chunks(
    device: &mut dyn Device,
    chunks: &[Chunk],
    buffer_bytes: u64,
    qd: u32,
    host_gap_ns: u64,
) -> Result<Vec<(u64, u64, u64, u64)>, DeviceError> {
    let qd = qd.max(1).min(chunks.len().max(1) as u32);
    let align = device.info().logical_block_bytes.max(512) as u64;
    device.prepare(qd, buffer_bytes.next_multiple_of(align) as usize)?;
    let mut free: Vec<u32> = (0..qd).rev().collect();
    let mut next = 0usize;
    let mut out = Vec::with_capacity(chunks.len());
    let mut done: Vec<Completion> = Vec::new();
    let mut carrying = vec![0usize; qd as usize];
    let mut failure: Option<DeviceError> = None;
    loop {
        let mut batch = Vec::new();
        while failure.is_none()
            && next < chunks.len()
            && let Some(slot) = free.pop()
        {
            let chunk = chunks[next];
            carrying[slot as usize] = next;
            batch.push(Io {
                op: Op::Read,
                offset: chunk.offset,
                len: chunk.len,
                slot,
                tag: next as u64,
            });
            next += 1;
        }
        if !batch.is_empty()
            && let Err(e) = device.submit(&batch)
        {
            // What the device took of the batch is drained below; nothing more is issued.
            failure = Some(e);
        }
        if device.in_flight() == 0 {
            break;
        }
        done.clear();
        device.reap(1, None, &mut done)?;
        for c in &done {
            free.push(c.slot);
            let chunk = chunks[carrying[c.slot as usize]];
            if let Some(e) = failed(&chunk, c.result) {
                failure.get_or_insert(e);
                continue;
            }
            out.push((
                chunk.offset,
                c.completed_ns - c.submitted_ns,
                c.completed_ns,
                c.submitted_ns,
            ));
        }
        if host_gap_ns > 0 {
            let next_issue = device.now_ns() + host_gap_ns;
            device.wait_until(next_issue);
        }
    }
    match failure {
        Some(e) => Err(e),
        None => {
            assert_eq!(out.len(), chunks.len(), "every chunk was read");
            Ok(out)
        }
    }
}

/// Why a read of `chunk` that returned `result` failed, if it did.
fn failed(chunk: &Chunk, result: i64) -> Option<DeviceError> {
    let what = format!("reading {} bytes at offset {}", chunk.len, chunk.offset);
    if result < 0 {
        return Some(DeviceError::os(
            what,
            std::io::Error::from_raw_os_error((-result) as i32),
        ));
    }
    (result < chunk.needed as i64).then(|| {
        DeviceError::os(
            what,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "only {result} of {} bytes came back: the file shrank, or the device cut the read short",
                    chunk.len
                ),
            ),
        )
    })
}
