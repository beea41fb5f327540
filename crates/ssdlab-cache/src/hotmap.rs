//! The persistent hot map: which blocks the cache held, most recently used first, so a restarted cache can be
//! warmed with them. It records block numbers only, never data, so a stale or foreign map can cost some reads
//! but can never return wrong data.
//!
//! This module owns the file format (encoding, decoding and its checks). It never touches a file or a device:
//! the opener reads and writes the bytes, the cache reads the blocks.
//!
//! Format, little-endian: the magic `SSDLAB-HOTMAP\0\0\x01` (16 bytes), the capacity in bytes (u64), the length of
//! the identity (u32) and the identity (UTF-8: what the device was, so a map is only used for the device that
//! wrote it), the block count (u64), the blocks (u64 each), and an FNV-1a 64 checksum of everything before it.

const MAGIC: &[u8; 16] = b"SSDLAB-HOTMAP\0\0\x01";

/// A hot map: the device it describes and its blocks, most recently used first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotMap {
    /// What the device was when the map was written (for files: device and inode; for block devices: the device
    /// number and model).
    pub identity: String,
    pub capacity_bytes: u64,
    pub blocks: Vec<u64>,
}

/// Why saved bytes are not a usable hot map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HotMapError {
    #[error("not an ssdlab hot map (or a version this build does not read)")]
    NotAHotMap,
    #[error("the hot map is truncated or damaged (its checksum does not match)")]
    Damaged,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl HotMap {
    /// A file name for the hot map of the device with `identity` (stable across builds and machines).
    pub fn file_name(identity: &str) -> String {
        format!("hotmap-{:016x}.map", fnv1a(identity.as_bytes()))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.identity.len() + 8 * self.blocks.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.capacity_bytes.to_le_bytes());
        out.extend_from_slice(&(self.identity.len() as u32).to_le_bytes());
        out.extend_from_slice(self.identity.as_bytes());
        out.extend_from_slice(&(self.blocks.len() as u64).to_le_bytes());
        for b in &self.blocks {
            out.extend_from_slice(&b.to_le_bytes());
        }
        let sum = fnv1a(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<HotMap, HotMapError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(HotMapError::NotAHotMap);
        }
        let (body, sum) = bytes
            .split_at_checked(bytes.len().saturating_sub(8))
            .ok_or(HotMapError::Damaged)?;
        if sum.len() != 8 || fnv1a(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
            return Err(HotMapError::Damaged);
        }
        let mut at = MAGIC.len();
        let mut take = |n: usize| -> Result<&[u8], HotMapError> {
            let piece = body.get(at..at + n).ok_or(HotMapError::Damaged)?;
            at += n;
            Ok(piece)
        };
        let capacity_bytes = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let identity_len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
        let identity = std::str::from_utf8(take(identity_len)?)
            .map_err(|_| HotMapError::Damaged)?
            .to_string();
        let count = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let count = usize::try_from(count).map_err(|_| HotMapError::Damaged)?;
        let raw = take(count.checked_mul(8).ok_or(HotMapError::Damaged)?)?;
        let blocks = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if at != body.len() {
            return Err(HotMapError::Damaged);
        }
        Ok(HotMap {
            identity,
            capacity_bytes,
            blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_round_trips_and_any_damage_is_caught() {
        let map = HotMap {
            identity: "file dev=8:1 ino=12".into(),
            capacity_bytes: 1 << 30,
            blocks: vec![7, 3, 1 << 40],
        };
        let bytes = map.encode();
        assert_eq!(HotMap::decode(&bytes), Ok(map));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(
                HotMap::decode(&bad).is_err(),
                "a flipped bit at byte {i} went unnoticed"
            );
        }
        for len in 0..bytes.len() {
            assert!(
                HotMap::decode(&bytes[..len]).is_err(),
                "a map cut at {len} bytes was accepted"
            );
        }
        assert_eq!(
            HotMap::decode(b"something else entirely"),
            Err(HotMapError::NotAHotMap)
        );
    }
}
