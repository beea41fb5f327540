//! The data the engine writes, and verification of what it reads.
//!
//! Ordinary writes carry incompressible random bytes (each slot buffer is filled once from the seeded generator)
//! made unique per write by stamping a fresh random word into every 512-byte sector, so neither compression nor
//! deduplication can flatter a drive. Verify mode instead writes a pattern that depends only on the seed and the
//! sector's byte offset, so any later read with the same seed can be checked without remembering what was
//! written.

use ssdlab_core::rng::{Rng, splitmix64};

/// The unit the stamps and the verify pattern are laid out in.
pub const SECTOR_BYTES: usize = 512;

/// Makes a buffer's content unique: one random word per sector. Cheap enough for every write.
#[inline]
pub fn stamp(buf: &mut [u8], rng: &mut Rng) {
    for sector in buf.chunks_exact_mut(SECTOR_BYTES) {
        sector[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    }
}

fn sector_key(seed: u64, offset: u64) -> u64 {
    splitmix64(seed ^ splitmix64(offset))
}

/// Fills `buf`, which will be written at byte `offset`, with the verify pattern of `seed`.
pub fn write_pattern(buf: &mut [u8], offset: u64, seed: u64) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        let sector_offset = offset + (i * SECTOR_BYTES) as u64;
        fill_sector(sector, sector_offset, seed);
    }
}

fn fill_sector(sector: &mut [u8], sector_offset: u64, seed: u64) {
    sector[..8].copy_from_slice(&sector_offset.to_le_bytes());
    sector[8..16].copy_from_slice(&seed.to_le_bytes());
    let mut state = sector_key(seed, sector_offset);
    for word in sector[16..].chunks_exact_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        word.copy_from_slice(&splitmix64(state).to_le_bytes());
    }
}

/// What a bad sector held instead of its pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// All zeroes: never written with this pattern, or discarded.
    Zeroes,
    /// A pattern sector of this seed that belongs at another offset (a misdirected write or read).
    Misplaced { from_offset: u64 },
    /// Anything else: corrupted data, or data from another seed or program.
    Foreign,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Zeroes => write!(
                f,
                "it reads as zeroes (never written with this seed, or discarded)"
            ),
            Found::Misplaced { from_offset } => write!(f, "it holds the data written for byte {from_offset}"),
            Found::Foreign => write!(f, "it holds corrupted data or data from another seed"),
        }
    }
}

/// A sector whose content is not the pattern expected at its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Byte offset of the first bad sector.
    pub offset: u64,
    /// What the first bad sector held.
    pub found: Found,
    /// Bad sectors in the buffer.
    pub bad_sectors: u32,
}

fn classify(sector: &[u8], seed: u64) -> Found {
    if sector.iter().all(|&b| b == 0) {
        return Found::Zeroes;
    }
    let from_offset = u64::from_le_bytes(sector[..8].try_into().expect("8 bytes"));
    let mut expected = [0u8; SECTOR_BYTES];
    fill_sector(&mut expected, from_offset, seed);
    if sector == expected {
        Found::Misplaced { from_offset }
    } else {
        Found::Foreign
    }
}

/// Checks a buffer read from byte `offset` against the pattern of `seed`.
pub fn check_pattern(buf: &[u8], offset: u64, seed: u64) -> Result<(), Mismatch> {
    let mut expected = [0u8; SECTOR_BYTES];
    let mut first: Option<Mismatch> = None;
    for (i, sector) in buf.chunks_exact(SECTOR_BYTES).enumerate() {
        let sector_offset = offset + (i * SECTOR_BYTES) as u64;
        fill_sector(&mut expected, sector_offset, seed);
        if sector != expected {
            let m = first.get_or_insert_with(|| Mismatch {
                offset: sector_offset,
                found: classify(sector, seed),
                bad_sectors: 0,
            });
            m.bad_sectors += 1;
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_round_trips_and_catches_corruption() {
        let mut buf = vec![0u8; 8192];
        write_pattern(&mut buf, 1 << 20, 42);
        assert_eq!(check_pattern(&buf, 1 << 20, 42), Ok(()));
        assert!(
            check_pattern(&buf, 1 << 20, 43).is_err(),
            "another seed must not verify"
        );
        let moved = check_pattern(&buf, 0, 42).unwrap_err();
        assert_eq!(
            (moved.offset, moved.found),
            (0, Found::Misplaced { from_offset: 1 << 20 })
        );
        buf[5000] ^= 1;
        let e = check_pattern(&buf, 1 << 20, 42).unwrap_err();
        assert_eq!(
            (e.offset, e.found, e.bad_sectors),
            ((1 << 20) + 4608, Found::Foreign, 1)
        );
        let zeroes = check_pattern(&[0u8; 1024], 0, 42).unwrap_err();
        assert_eq!((zeroes.found, zeroes.bad_sectors), (Found::Zeroes, 2));
    }

    #[test]
    fn stamps_make_writes_unique() {
        let mut rng = Rng::new(1);
        let mut a = vec![7u8; 4096];
        let mut b = a.clone();
        stamp(&mut a, &mut rng);
        stamp(&mut b, &mut rng);
        assert_ne!(a, b);
        assert!(a.chunks(512).all(|s| s[8..] == [7u8; 504][..]));
    }
}
