//! The answer to NBD_CMD_BLOCK_STATUS for `base:allocation`: a device's extents, aligned to the export's block
//! size and encoded as descriptors.
//!
//! It owns the rule that makes an answer safe: where a block mixes states, it is reported with the weaker claim
//! (allocated if any part is, zero only if every part is), so data is never called a hole or zeroes. It never
//! asks the device anything itself.

use ssdlab_core::device::Extent;

use crate::protocol::{STATE_HOLE, STATE_ZERO};

/// Rewrites `extents` (which start at the block-aligned `start`) so every boundary falls on a multiple of
/// `block`. A block whose parts differ takes the weaker claim; a final part block the device did not describe
/// to its end is reported as allocated data of unknown contents.
pub fn align(extents: &[Extent], start: u64, block: u64) -> Vec<Extent> {
    assert!(
        block > 0 && start.is_multiple_of(block),
        "the query starts on a block boundary"
    );
    let weaker = |a: Extent, b: Extent| Extent {
        len_bytes: block,
        allocated: a.allocated || b.allocated,
        reads_zero: a.reads_zero && b.reads_zero,
    };
    let mut out = Vec::new();
    // The state of the block being assembled from parts, and where that block ends.
    let mut partial: Option<(Extent, u64)> = None;
    let mut at = start;
    for e in extents {
        let end = at + e.len_bytes;
        while at < end {
            if let Some((state, block_end)) = partial {
                let upto = end.min(block_end);
                let state = weaker(state, *e);
                at = upto;
                if upto == block_end {
                    Extent::push_merged(&mut out, state);
                    partial = None;
                } else {
                    partial = Some((state, block_end));
                }
            } else if end - at >= block {
                let whole = (end - at) / block * block;
                Extent::push_merged(
                    &mut out,
                    Extent {
                        len_bytes: whole,
                        ..*e
                    },
                );
                at += whole;
            } else {
                partial = Some((
                    Extent {
                        len_bytes: block,
                        ..*e
                    },
                    at + block,
                ));
                at = end;
            }
        }
    }
    if let Some((state, _)) = partial {
        // The rest of the block is unknown: only "allocated, contents unknown" is sure to be true.
        Extent::push_merged(&mut out, weaker(state, Extent::data(block)));
    }
    out
}

/// Drops the first `bytes` of `extents` (a query that starts inside a block is answered for that block, then
/// cut to start where the query does).
pub fn skip(extents: &[Extent], bytes: u64) -> Vec<Extent> {
    let mut left = bytes;
    let mut out = Vec::with_capacity(extents.len());
    for e in extents {
        if left >= e.len_bytes {
            left -= e.len_bytes;
            continue;
        }
        out.push(Extent {
            len_bytes: e.len_bytes - left,
            ..*e
        });
        left = 0;
    }
    out
}

/// Encodes at most `max` descriptors covering no more than `limit` bytes (the request's length): each is a
/// length and the `base:allocation` flags.
pub fn descriptors(extents: &[Extent], limit: u64, max: usize) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut left = limit;
    for e in extents.iter().take(max) {
        if left == 0 {
            break;
        }
        let len = e.len_bytes.min(left);
        left -= len;
        let mut flags = 0;
        if !e.allocated {
            flags |= STATE_HOLE;
        }
        if e.reads_zero {
            flags |= STATE_ZERO;
        }
        // `limit` is a request length, so every piece fits in 32 bits.
        out.push((
            u32::try_from(len).expect("bounded by a 32-bit request length"),
            flags,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(len_bytes: u64) -> Extent {
        Extent::hole(len_bytes)
    }

    #[test]
    fn a_block_that_mixes_data_and_a_hole_is_reported_as_data() {
        // 4096-byte blocks: a hole to 5000, data to 6000, a hole to 12288.
        let extents = [hole(5000), Extent::data(1000), hole(6288)];
        assert_eq!(
            align(&extents, 0, 4096),
            vec![hole(4096), Extent::data(4096), hole(4096)]
        );
    }

    #[test]
    fn aligned_extents_pass_through_and_a_short_tail_becomes_unknown_data() {
        let extents = [hole(8192), Extent::data(4096)];
        assert_eq!(align(&extents, 4096, 4096), extents.to_vec());
        let zero_data = Extent {
            len_bytes: 4096,
            allocated: true,
            reads_zero: true,
        };
        assert_eq!(
            align(&[zero_data, hole(100)], 0, 4096),
            vec![zero_data, Extent::data(4096)]
        );
    }

    #[test]
    fn skipping_cuts_the_first_extents_to_where_an_unaligned_query_starts() {
        let extents = [hole(4096), Extent::data(4096)];
        assert_eq!(skip(&extents, 100), vec![hole(3996), Extent::data(4096)]);
        assert_eq!(skip(&extents, 4096), vec![Extent::data(4096)]);
        assert_eq!(skip(&extents, 5000), vec![Extent::data(3192)]);
    }

    #[test]
    fn descriptors_stop_at_the_request_length_and_count() {
        let extents = [hole(8192), Extent::data(8192)];
        assert_eq!(
            descriptors(&extents, 12288, 16),
            vec![(8192, STATE_HOLE | STATE_ZERO), (4096, 0)]
        );
        assert_eq!(
            descriptors(&extents, 12288, 1),
            vec![(8192, STATE_HOLE | STATE_ZERO)]
        );
    }
}
