//! One fast 64-bit checksum, shared by everything that proves bytes unchanged: refresh's journal (each chunk
//! read is checked again before and after it is written back) and the output manifest (a file is ssdlab's own
//! only while its bytes still sum to what was written). Its values are recorded on disk, so it never changes.

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

#[cfg(test)]
mod tests {
    use super::checksum;

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
}
