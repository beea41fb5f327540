//! What a memory device holds: the contents reads see and, with a volatile write cache, the contents that
//! survive a crash and the completed writes between the two. It knows nothing of time or slots: the device
//! tells it when a write completes and which completed writes a FLUSH covers.

use std::collections::VecDeque;

/// A completed write or discard not yet made durable.
#[derive(Debug)]
enum Change {
    Data(Vec<u8>),
    Zeroes(u64),
}

#[derive(Debug)]
pub(crate) struct Store {
    /// What reads see; empty when nothing is kept.
    visible: Vec<u8>,
    /// With a volatile cache: what survives a crash.
    durable: Option<Vec<u8>>,
    /// With a volatile cache: (completion number, offset, change) of each completed write or discard not yet
    /// flushed, in completion order.
    unflushed: VecDeque<(u64, u64, Change)>,
    /// Writes and discards completed so far: a FLUSH covers those completed before it was submitted.
    completed: u64,
    keep: bool,
}

impl Store {
    pub(crate) fn new(capacity: u64, keep: bool, volatile: bool) -> Self {
        let size = if keep {
            usize::try_from(capacity).expect("a memory device that keeps its data fits in memory")
        } else {
            0
        };
        Store {
            // Zeroed allocations are mapped lazily: a large device costs only the pages written.
            visible: vec![0; size],
            durable: (keep && volatile).then(|| vec![0; size]),
            unflushed: VecDeque::new(),
            completed: 0,
            keep,
        }
    }

    /// Copies the contents at `offset` into `buf` (zeroes when nothing is kept).
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) {
        buf.fill(0);
        if self.keep {
            // A last block past the capacity reads zeroes beyond it, as on every device.
            let at = (offset as usize).min(self.visible.len());
            let n = buf.len().min(self.visible.len() - at);
            buf[..n].copy_from_slice(&self.visible[at..at + n]);
        }
    }

    /// A write of `data` at `offset` completed.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
        self.completed += 1;
        if !self.keep {
            return;
        }
        // Bytes past the capacity (the rest of a partial last block) are dropped, as on every device.
        let data = &data[..self.within(offset, data.len() as u64) as usize];
        let at = offset as usize;
        self.visible[at..at + data.len()].copy_from_slice(data);
        if self.durable.is_some() {
            self.unflushed
                .push_back((self.completed, offset, Change::Data(data.to_vec())));
        }
    }

    /// A discard of `len` bytes at `offset` completed: they read as zeroes from now on.
    pub(crate) fn discard(&mut self, offset: u64, len: u64) {
        self.completed += 1;
        if !self.keep {
            return;
        }
        let len = self.within(offset, len);
        let at = offset as usize;
        self.visible[at..at + len as usize].fill(0);
        if self.durable.is_some() {
            self.unflushed
                .push_back((self.completed, offset, Change::Zeroes(len)));
        }
    }

    /// How many of `len` bytes at `offset` lie within the capacity.
    fn within(&self, offset: u64, len: u64) -> u64 {
        (self.visible.len() as u64).saturating_sub(offset).min(len)
    }

    /// What a FLUSH submitted now covers: every write completed so far.
    pub(crate) fn flush_mark(&self) -> u64 {
        self.completed
    }

    /// A FLUSH submitted at `mark` completed: every write completed before it is durable.
    pub(crate) fn flush(&mut self, mark: u64) {
        let Some(durable) = self.durable.as_mut() else {
            return;
        };
        while let Some((n, offset, _)) = self.unflushed.front()
            && *n <= mark
        {
            let at = *offset as usize;
            match self.unflushed.pop_front().expect("just looked").2 {
                Change::Data(data) => durable[at..at + data.len()].copy_from_slice(&data),
                Change::Zeroes(len) => durable[at..at + len as usize].fill(0),
            }
        }
    }

    /// Power is lost: what was not flushed is gone.
    pub(crate) fn crash(&mut self) {
        if let Some(durable) = &self.durable {
            self.visible.copy_from_slice(durable);
        }
        self.unflushed.clear();
    }

    pub(crate) fn visible(&self) -> &[u8] {
        assert!(self.keep, "this memory device keeps no data");
        &self.visible
    }

    pub(crate) fn visible_mut(&mut self) -> &mut [u8] {
        assert!(self.keep, "this memory device keeps no data");
        assert!(
            self.durable.is_none(),
            "contents are set directly only without a volatile cache (they would be visible but not durable)"
        );
        &mut self.visible
    }

    pub(crate) fn durable(&self) -> &[u8] {
        assert!(self.keep, "this memory device keeps no data");
        self.durable.as_deref().unwrap_or(&self.visible)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_makes_durable_only_what_completed_before_it_was_submitted() {
        let mut store = Store::new(4096, true, true);
        store.write(0, &[1; 512]);
        let mark = store.flush_mark();
        store.write(512, &[2; 512]);
        store.discard(0, 512);
        store.flush(mark);
        let mut buf = [9u8; 512];
        store.read(0, &mut buf);
        assert_eq!(buf, [0; 512], "reads see the discard");
        assert_eq!(
            &store.durable()[..512],
            &[1; 512],
            "the discard completed after the mark"
        );
        assert_eq!(&store.durable()[512..1024], &[0; 512], "so did the second write");
        store.crash();
        store.read(0, &mut buf);
        assert_eq!(buf, [1; 512], "a crash leaves what was durable");
        store.read(512, &mut buf);
        assert_eq!(buf, [0; 512]);
    }

    #[test]
    fn a_store_that_keeps_nothing_reads_zeroes() {
        let mut store = Store::new(1 << 40, false, true);
        store.write(1 << 39, &[7; 4096]);
        let mut buf = [9u8; 64];
        store.read(1 << 39, &mut buf);
        assert_eq!(buf, [0; 64]);
    }
}
