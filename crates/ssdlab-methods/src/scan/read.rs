//! Timed reads of one file's data: every chunk timed, the slowest chunks read again to see whether their
//! slowness repeats. Reads only; it never writes and never opens anything itself.

use serde::{Deserialize, Serialize};
use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_core::schema::FileScan;
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

/// Reads one file's ranges in `chunk_bytes` pieces at queue depth `qd`, timing every chunk, then re-reads the
/// slowest chunks (up to 8) to see whether their slowness repeats.
pub fn scan_item(
    device: &mut dyn Device,
    item: &ScanItem,
    chunk_bytes: u64,
    qd: u32,
) -> Result<FileScan, DeviceError> {
    let align = device.info().logical_block_bytes.max(512) as u64;
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for &(start, len) in &item.ranges {
        let mut offset = start / align * align;
        let end = start + len;
        while offset < end {
            let want = chunk_bytes.min(end - offset).next_multiple_of(align);
            chunks.push((offset, want));
            offset += want;
        }
    }
    let times = read_chunks(device, &chunks, chunk_bytes, qd)?;
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
        let len = chunks.iter().find(|c| c.0 == offset).map_or(chunk_bytes, |c| c.1);
        let again = read_chunks(device, &[(offset, len)], chunk_bytes, 1)?;
        slow_chunks.push((offset, first_ns, again.first().map_or(0, |t| t.1)));
    }
    Ok(FileScan {
        name: item.name.clone(),
        name_bytes_hex: item.name_bytes_hex.clone(),
        device: item.device.clone(),
        age_s: item.age_s,
        bytes,
        seconds: wall_s,
        bytes_per_s: bytes as f64 / wall_s,
        slow_chunks,
        slowdown: 0.0,
        flagged: false,
        confirmed: false,
    })
}

/// Reads chunks at a queue depth; returns (offset, latency ns, completed ns, submitted ns) per chunk.
fn read_chunks(
    device: &mut dyn Device,
    chunks: &[(u64, u64)],
    buffer_bytes: u64,
    qd: u32,
) -> Result<Vec<(u64, u64, u64, u64)>, DeviceError> {
    let qd = qd.max(1).min(chunks.len().max(1) as u32);
    let align = device.info().logical_block_bytes.max(512) as u64;
    device.prepare(qd, buffer_bytes.next_multiple_of(align) as usize)?;
    let mut free: Vec<u32> = (0..qd).rev().collect();
    let mut next = 0usize;
    let mut out = Vec::with_capacity(chunks.len());
    let mut done: Vec<Completion> = Vec::new();
    let mut offsets = vec![0u64; qd as usize];
    while out.len() < chunks.len() {
        let mut batch = Vec::new();
        while let Some(&slot) = free.last() {
            if next == chunks.len() {
                break;
            }
            free.pop();
            let (offset, len) = chunks[next];
            offsets[slot as usize] = offset;
            batch.push(Io {
                op: Op::Read,
                offset,
                len,
                slot,
                tag: next as u64,
            });
            next += 1;
        }
        if !batch.is_empty() {
            device.submit(&batch)?;
        }
        done.clear();
        device.reap(1, None, &mut done)?;
        for c in &done {
            free.push(c.slot);
            if c.result < 0 {
                return Err(DeviceError::os(
                    format!("reading {} at offset {}", c.tag, offsets[c.slot as usize]),
                    std::io::Error::from_raw_os_error((-c.result) as i32),
                ));
            }
            out.push((
                offsets[c.slot as usize],
                c.completed_ns - c.submitted_ns,
                c.completed_ns,
                c.submitted_ns,
            ));
        }
    }
    Ok(out)
}
