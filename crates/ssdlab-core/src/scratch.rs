//! Chunk buffers for direct I/O: growable byte buffers whose slices begin on an aligned boundary, and the form
//! in which one comes back from a read on another thread.
//!
//! An aligned slice of a whole number of blocks can go to an O_DIRECT read or write as it is, so the system layer
//! need not copy each chunk through a staging buffer of its own. The refresh protocol owns its buffers and lends
//! one to the system layer's read-ahead, which hands it back filled ([`FilledScratch`]): the chunk is never
//! copied between the medium and the write. This module only hands out memory; it never does I/O.

/// The alignment every slice starts at: 64 KiB, the granularity chunks come in, which covers any page size and
/// any logical block a device reports (both can exceed 4 KiB), at the cost of 64 KiB of slack per buffer.
pub const ALIGN_BYTES: usize = 64 << 10;

/// A byte buffer handing out aligned slices (plain safe code: a vector with [`ALIGN_BYTES`] of slack, or more
/// for memory given with a coarser alignment).
#[derive(Debug, Default)]
pub struct Scratch {
    bytes: Vec<u8>,
    /// Where slices start: a multiple of [`ALIGN_BYTES`]; 0 means [`ALIGN_BYTES`].
    align: usize,
}

impl Scratch {
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer over `bytes`, memory the caller chose, whose slices start on a multiple of `align` (a multiple of
    /// [`ALIGN_BYTES`]): huge pages, say, with slices starting where a huge page does. Its slices come from
    /// `bytes`, never a reallocation, as long as `len` plus `align` of slack fits in their length.
    pub fn from_bytes(bytes: Vec<u8>, align: usize) -> Self {
        assert!(
            align > 0 && align.is_multiple_of(ALIGN_BYTES),
            "a scratch alignment is a multiple of {ALIGN_BYTES}"
        );
        Scratch { bytes, align }
    }

    /// `len` bytes starting on an aligned boundary ([`ALIGN_BYTES`], or the one given to
    /// [`Scratch::from_bytes`]). Their content is whatever the last use left (or zeros).
    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        let align = self.align.max(ALIGN_BYTES);
        if self.bytes.len() < len + align {
            self.bytes.resize(len + align, 0);
        }
        let address = self.bytes.as_ptr() as usize;
        let start = address.next_multiple_of(align) - address;
        &mut self.bytes[start..start + len]
    }
}

/// What a read from the medium brought: how many bytes, and their checksum ([`crate::checksum::checksum`]),
/// taken as the pieces arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaRead {
    pub len_bytes: usize,
    pub sum: u64,
}

/// A buffer that a read on another thread filled, handed back with what the read did.
#[derive(Debug)]
pub struct FilledScratch {
    pub buf: Scratch,
    /// The bytes read into the start of `buf.slice_mut(len)` (fewer at the end of the file), or why the read
    /// failed.
    pub read: std::io::Result<usize>,
    /// The digest of the bytes read, taken on the reading thread; `None` after a failed read.
    pub digest: Option<u64>,
    /// How long the medium took for the read.
    pub elapsed: std::time::Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_start_aligned_and_keep_their_bytes_while_they_fit() {
        let mut scratch = Scratch::new();
        for len in [1, 4096, 5000, 1 << 20, 4096] {
            let slice = scratch.slice_mut(len);
            assert_eq!(slice.len(), len);
            assert_eq!(slice.as_ptr() as usize % ALIGN_BYTES, 0, "{len}");
        }
        scratch.slice_mut(8)[..3].copy_from_slice(b"abc");
        assert_eq!(&scratch.slice_mut(3)[..], b"abc");
    }

    #[test]
    fn slices_of_given_bytes_stay_in_them_while_they_fit() {
        let align = 4 * ALIGN_BYTES;
        let bytes = vec![0u8; (1 << 20) + align];
        let range = bytes.as_ptr_range();
        let mut scratch = Scratch::from_bytes(bytes, align);
        for len in [1, 4096, 1 << 20] {
            let slice = scratch.slice_mut(len);
            assert!(
                range.contains(&slice.as_ptr()) && slice.as_ptr_range().end <= range.end,
                "{len}"
            );
            assert_eq!(slice.as_ptr() as usize % align, 0, "{len}");
        }
    }
}
