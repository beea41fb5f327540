//! One fast 64-bit checksum, shared by everything that proves bytes unchanged: refresh's journal (each chunk
//! read is checked again before and after it is written back) and the output manifest (a file is ssdlab's own
//! only while its bytes still sum to what was written). Its values are recorded on disk, so it never changes.

const K: [u64; 4] = [
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x9E37_79B9_7F4A_7C15,
    0xD6E8_FEB8_6659_FD93,
];

/// A fast 64-bit checksum of a buffer: four independent multiply-mix lanes over 32-byte blocks (so the CPU can
/// run them in parallel), folded together with the length. Collisions are what matters here, not
/// cryptographic strength.
pub fn checksum(data: &[u8]) -> u64 {
    let mut sum = Checksum::new();
    sum.update(data);
    sum.finish()
}

/// [`checksum`] taken piece by piece, as the pieces arrive (a chunk read in parts, each summed while the next is
/// read): any split of the same bytes gives the same value as [`checksum`] of them whole.
#[derive(Debug, Clone)]
pub struct Checksum {
    lanes: [u64; 4],
    len: u64,
    /// Bytes of a block not yet whole, waiting for the next piece.
    tail: [u8; 32],
    tail_len: usize,
}

#[inline(always)]
fn mix(lanes: &mut [u64; 4], block: &[u8]) {
    for (lane, (word, k)) in lanes.iter_mut().zip(block.chunks_exact(8).zip(K)) {
        let v = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        *lane = (*lane ^ v).wrapping_mul(k).rotate_left(29);
    }
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    pub fn new() -> Self {
        Checksum {
            lanes: [K[2], K[3], K[0], K[1]],
            len: 0,
            tail: [0; 32],
            tail_len: 0,
        }
    }

    /// Adds the next bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if self.tail_len > 0 {
            let take = (32 - self.tail_len).min(data.len());
            self.tail[self.tail_len..self.tail_len + take].copy_from_slice(&data[..take]);
            self.tail_len += take;
            data = &data[take..];
            if self.tail_len < 32 {
                return;
            }
            let block = self.tail;
            mix(&mut self.lanes, &block);
            self.tail_len = 0;
        }
        // The lanes stay in registers across the blocks.
        let mut lanes = self.lanes;
        let mut blocks = data.chunks_exact(32);
        for block in &mut blocks {
            mix(&mut lanes, block);
        }
        self.lanes = lanes;
        let rest = blocks.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
    }

    /// The checksum of every byte added.
    pub fn finish(&self) -> u64 {
        let mut h = self.len;
        for (lane, k) in self.lanes.iter().zip(K) {
            h = (h ^ lane).wrapping_mul(k).rotate_left(31);
        }
        for &b in &self.tail[..self.tail_len] {
            h = (h ^ b as u64).wrapping_mul(K[1]);
        }
        h ^ (h >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::{Checksum, checksum};

    /// The values are on disk (journals, manifests): they must never change.
    #[test]
    fn known_values_hold() {
        assert_eq!(checksum(b""), 0xd62d_bb28_e2ac_0a5e);
        assert_eq!(
            checksum(b"ssdlab keeps its own outputs, 32+ bytes long"),
            0x42cf_d3c9_ccf0_12c7
        );
        assert_ne!(checksum(b"a"), checksum(b"b"));
        assert_ne!(checksum(&[0u8; 32]), checksum(&[0u8; 33]));
    }

    #[test]
    fn any_split_of_the_bytes_sums_as_the_whole() {
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let whole = checksum(&data);
        for cuts in [
            vec![],
            vec![1],
            vec![31, 32, 33],
            vec![7, 100, 4096],
            vec![32, 64, 4999],
            vec![5000],
        ] {
            let mut sum = Checksum::new();
            let mut at = 0;
            for cut in cuts {
                sum.update(&data[at..cut]);
                at = cut;
            }
            sum.update(&data[at..]);
            assert_eq!(sum.finish(), whole);
        }
    }
}
