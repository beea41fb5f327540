//! The protocol's chunk buffers: growable byte buffers whose slices begin on a page boundary.
//!
//! A page-aligned slice of a whole number of blocks can go to an O_DIRECT read or write as it is, so the system
//! layer need not copy each chunk through a staging buffer of its own (two copies of every chunk saved, which on a
//! fast medium are a fifth of refresh's time). This module only hands out memory; it never does I/O.

/// The alignment every slice starts at: a page, which is at least any block device's logical block.
pub const ALIGN_BYTES: usize = 4096;

/// A byte buffer handing out page-aligned slices (plain safe code: a vector with a page of slack).
#[derive(Debug, Default)]
pub struct Scratch {
    bytes: Vec<u8>,
}

impl Scratch {
    pub fn new() -> Self {
        Self::default()
    }

    /// `len` bytes starting on a page boundary. Their content is whatever the last use left (or zeros).
    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        if self.bytes.len() < len + ALIGN_BYTES {
            self.bytes.resize(len + ALIGN_BYTES, 0);
        }
        let start = self.bytes.as_ptr().align_offset(ALIGN_BYTES);
        &mut self.bytes[start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_start_on_a_page_and_keep_their_bytes_while_they_fit() {
        let mut scratch = Scratch::new();
        for len in [1, 4096, 5000, 1 << 20, 4096] {
            let slice = scratch.slice_mut(len);
            assert_eq!(slice.len(), len);
            assert_eq!(slice.as_ptr() as usize % ALIGN_BYTES, 0, "{len}");
        }
        scratch.slice_mut(8)[..3].copy_from_slice(b"abc");
        assert_eq!(&scratch.slice_mut(3)[..], b"abc");
    }
}
