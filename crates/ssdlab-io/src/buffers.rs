//! Aligned I/O buffers, one per slot, in a single allocation the kernel may read and write asynchronously.
//!
//! The pool hands out a slice per slot and never a slice of the whole allocation, so a slot being filled by the
//! program never aliases a slot the kernel is transferring into. Whether a slot is in flight is the owning
//! device's bookkeeping; the pool itself only guarantees layout and lifetime.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// `slots` buffers of `len` bytes, each aligned to `align` bytes.
pub struct BufferPool {
    base: NonNull<u8>,
    layout: Layout,
    stride: usize,
    len: usize,
    slots: u32,
}

// SAFETY: the pool exclusively owns its allocation; moving it between threads moves that ownership.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates zeroed buffers (the pages are only touched when first used).
    pub fn new(slots: u32, len: usize, align: usize) -> Self {
        // Page alignment at least: a buffer straddling pages costs the kernel an extra segment per transfer.
        let align = align.max(4096).next_power_of_two();
        let stride = len.max(1).next_multiple_of(align);
        let total = stride
            .checked_mul(slots.max(1) as usize)
            .expect("buffer pool size overflows usize");
        let layout = Layout::from_size_align(total, align).expect("buffer pool layout");
        // SAFETY: the layout has a non-zero size (stride >= align >= 64, slots >= 1).
        let ptr = unsafe { alloc_zeroed(layout) };
        let base = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        BufferPool {
            base,
            layout,
            stride,
            len,
            slots,
        }
    }

    pub fn buffer_len(&self) -> usize {
        self.len
    }

    /// The start of a slot's buffer, for handing to the kernel.
    pub fn ptr(&self, slot: u32) -> *mut u8 {
        assert!(
            slot < self.slots,
            "slot {slot} out of range ({} slots)",
            self.slots
        );
        // SAFETY: slot < slots, so the offset stays inside the allocation.
        unsafe { self.base.as_ptr().add(slot as usize * self.stride) }
    }

    /// A slot's buffer.
    ///
    /// # Safety
    /// No transfer the kernel may still be performing (an io_uring operation submitted and not yet reaped)
    /// may target this slot's buffer while the returned slice lives: the kernel could write into it under a
    /// shared borrow.
    pub unsafe fn slot(&self, slot: u32) -> &[u8] {
        // SAFETY: the range lies inside the allocation and within one slot; only this slot's bytes are borrowed,
        // and the caller promises the kernel is not transferring into them.
        unsafe { std::slice::from_raw_parts(self.ptr(slot), self.len) }
    }

    /// A slot's buffer, mutably.
    ///
    /// # Safety
    /// As for [`BufferPool::slot`]: the slot must not be in flight while the returned slice lives.
    pub unsafe fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        // SAFETY: as for `slot`; `&mut self` makes this the only borrow the program holds into the pool.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(slot), self.len) }
    }

    /// One iovec per slot, for io_uring buffer registration.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.slots)
            .map(|s| libc::iovec {
                iov_base: self.ptr(s).cast(),
                iov_len: self.len,
            })
            .collect()
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout. Devices drain in-flight I/O before dropping.
        unsafe { dealloc(self.base.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_and_disjoint() {
        let mut pool = BufferPool::new(4, 4096 + 512, 4096);
        for s in 0..4 {
            assert_eq!(pool.ptr(s) as usize % 4096, 0);
            // SAFETY: nothing is ever submitted from this pool.
            unsafe { pool.slot_mut(s) }.fill(s as u8 + 1);
        }
        for s in 0..4 {
            // SAFETY: nothing is ever submitted from this pool.
            assert!(unsafe { pool.slot(s) }.iter().all(|&b| b == s as u8 + 1));
        }
        assert_eq!(pool.iovecs().len(), 4);
    }
}
