//! The virtual drive's data, when it keeps any: a sparse store of 4 KiB units keyed by their number, so a real
//! client (an NBD export, ext4 on top) can write and read back what it wrote. Units never written, or trimmed,
//! read as zeroes and take no memory; a unit written all zero is dropped too.
//!
//! It owns bytes only; timing and wear stay the FTL's. It never touches the wall clock or a file.

use std::collections::HashMap;

use crate::profile::UNIT_BYTES;

const UNIT: usize = UNIT_BYTES as usize;

#[derive(Debug, Default)]
pub struct DataStore {
    units: HashMap<u64, Box<[u8; UNIT]>>,
}

impl DataStore {
    /// Stores `data` at byte `offset` (any 512-byte-aligned range: a partial unit merges with what is there).
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut at = 0usize;
        while at < data.len() {
            let byte = offset + at as u64;
            let unit = byte / UNIT_BYTES;
            let inside = (byte % UNIT_BYTES) as usize;
            let n = (UNIT - inside).min(data.len() - at);
            let piece = &data[at..at + n];
            let whole = n == UNIT;
            if piece.iter().all(|&b| b == 0) && (whole || !self.units.contains_key(&unit)) {
                // Zeroes where nothing is stored, or a whole unit of zeroes: nothing to keep.
                if whole {
                    self.units.remove(&unit);
                }
            } else {
                let stored = self.units.entry(unit).or_insert_with(|| Box::new([0u8; UNIT]));
                stored[inside..inside + n].copy_from_slice(piece);
            }
            at += n;
        }
    }

    /// Fills `buf` with the bytes at `offset` (zeroes where nothing is stored).
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut at = 0usize;
        while at < buf.len() {
            let byte = offset + at as u64;
            let unit = byte / UNIT_BYTES;
            let inside = (byte % UNIT_BYTES) as usize;
            let n = (UNIT - inside).min(buf.len() - at);
            match self.units.get(&unit) {
                Some(stored) => buf[at..at + n].copy_from_slice(&stored[inside..inside + n]),
                None => buf[at..at + n].fill(0),
            }
            at += n;
        }
    }

    /// Forgets `len` bytes at `offset` (a TRIM: they read as zeroes). Whole units are dropped; the partial units
    /// at the edges are zeroed in place. Its cost follows what is stored, not the range: a whole-device TRIM
    /// (mkfs, fstrim) of a large virtual drive walks the stored units once.
    pub fn discard(&mut self, offset: u64, len: u64) {
        let end = offset.saturating_add(len);
        let first_whole = offset.div_ceil(UNIT_BYTES);
        let end_whole = (end / UNIT_BYTES).max(first_whole);
        let head_end = (first_whole * UNIT_BYTES).min(end);
        if offset < head_end {
            self.write(offset, &[0u8; UNIT][..(head_end - offset) as usize]);
        }
        if end_whole - first_whole > self.units.len() as u64 {
            self.units
                .retain(|unit, _| !(first_whole..end_whole).contains(unit));
        } else {
            for unit in first_whole..end_whole {
                self.units.remove(&unit);
            }
        }
        let tail_start = (end_whole * UNIT_BYTES).max(head_end);
        if tail_start < end {
            self.write(tail_start, &[0u8; UNIT][..(end - tail_start) as usize]);
        }
    }

    /// Whether any byte of the unit `unit` is stored (not known to be zero).
    pub fn holds(&self, unit: u64) -> bool {
        self.units.contains_key(&unit)
    }

    /// The memory the data takes, in bytes.
    pub fn bytes(&self) -> u64 {
        self.units.len() as u64 * UNIT_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_partial_units_merge_and_trims_read_zero() {
        let mut s = DataStore::default();
        s.write(512, &[7u8; 1024]);
        s.write(8192 - 512, &[9u8; 1024]);
        let mut buf = vec![1u8; 12288];
        s.read(0, &mut buf);
        assert!(buf[..512].iter().all(|&b| b == 0));
        assert!(buf[512..1536].iter().all(|&b| b == 7));
        assert!(buf[1536..7680].iter().all(|&b| b == 0));
        assert!(buf[7680..8704].iter().all(|&b| b == 9));
        assert!(buf[8704..].iter().all(|&b| b == 0));
        assert_eq!(s.bytes(), 3 * 4096);
        s.discard(0, 8192);
        assert!(!s.holds(0) && !s.holds(1) && s.holds(2));
        s.write(8192, &[0u8; 4096]);
        assert_eq!(s.bytes(), 0, "a whole unit of zeroes is not kept");
        // A discard with partial edges zeroes them in place and drops the whole units between; one wider than
        // what is stored finds the stored units all the same.
        s.write(0, &[5u8; 5 * 4096]);
        s.discard(1024, 3 * 4096);
        let mut buf = vec![1u8; 5 * 4096];
        s.read(0, &mut buf);
        assert!(buf[..1024].iter().all(|&b| b == 5));
        assert!(buf[1024..1024 + 3 * 4096].iter().all(|&b| b == 0));
        assert!(buf[1024 + 3 * 4096..].iter().all(|&b| b == 5));
        assert!(s.holds(0) && !s.holds(1) && !s.holds(2) && s.holds(3) && s.holds(4));
        s.discard(512, 512);
        s.read(0, &mut buf[..4096]);
        assert!(buf[..512].iter().all(|&b| b == 5) && buf[512..1024].iter().all(|&b| b == 0));
        s.discard(0, u64::MAX / 2);
        assert_eq!(s.bytes(), 0, "a whole-device discard drops everything");
    }
}
