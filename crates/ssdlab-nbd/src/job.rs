//! One request's work at the device: the device operations an NBD request becomes, issued one at a time on
//! the request's slot, and what their results mean for the reply.
//!
//! It owns the splitting of a request into operations the device can take: a request longer than a slot's
//! buffer goes in chunks, and a request that is not aligned to the device's block (from a client that did not
//! negotiate block sizes and so may use any byte offset and length) becomes aligned reads, and for a write a
//! read of each partial block at its edges before the write that carries it (read-modify-write). A FUA write
//! ends with a device flush. It never touches a socket and never decides whether a request is valid: the
//! server checks that first, and keeps two writes whose edges are read and written back from overlapping.

use ssdlab_core::device::Op;

/// A device operation a job wants next, on its own slot (a read lands at the start of the slot's buffer, a
/// write takes its data from there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOp {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
}

/// What a job does after its last operation completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Device(DeviceOp),
    /// Every operation succeeded: the request can be answered.
    Done,
}

/// Where a write's bytes come from.
#[derive(Debug)]
pub enum Payload {
    /// Already in the slot's buffer, at its start, exactly where the single aligned write takes them.
    InSlot,
    /// Held here (the request needs several operations, or its edges are read first).
    Bytes(Vec<u8>),
    /// WRITE_ZEROES.
    Zeroes,
}

/// A byte range of the export and the device blocks it touches.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// The request: [start, end).
    start: u64,
    end: u64,
    /// Its blocks: [first, last), multiples of `block`.
    first: u64,
    last: u64,
    block: u64,
    /// The largest operation: a multiple of `block`.
    chunk: u64,
}

impl Span {
    fn new(start: u64, len: u64, block: u64, chunk: u64) -> Span {
        assert!(
            block > 0 && chunk >= block && chunk.is_multiple_of(block),
            "chunk {chunk} and block {block}"
        );
        let end = start + len;
        Span {
            start,
            end,
            first: start / block * block,
            last: end.div_ceil(block) * block,
            block,
            chunk,
        }
    }

    fn aligned(&self) -> bool {
        self.start == self.first && self.end == self.last
    }

    /// The chunk starting at `at`.
    fn chunk_at(&self, at: u64) -> (u64, u64) {
        (at, (at + self.chunk).min(self.last))
    }
}

#[derive(Debug)]
enum Work {
    Read {
        span: Span,
        /// The reply's bytes, for a request that takes several operations or is not aligned; None when the
        /// one read leaves them at the start of the slot's buffer.
        data: Option<Vec<u8>>,
    },
    Write {
        span: Span,
        payload: Payload,
        /// The first block's bytes as the device held them, when the request starts inside it.
        head: Option<Vec<u8>>,
        /// The last block's, when the request ends inside it.
        tail: Option<Vec<u8>>,
    },
    Trim {
        /// The whole blocks inside the request (a partial block is not discarded: TRIM is a hint).
        range: Option<(u64, u64)>,
    },
    Flush,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtDevice {
    Nothing,
    Chunk(u64, u64),
    Head,
    Tail,
    Trim,
    Flush,
}

/// One request's device work.
#[derive(Debug)]
pub struct Job {
    work: Work,
    /// The next chunk of the span to do.
    next: u64,
    fua: bool,
    flushed: bool,
    at_device: AtDevice,
}

impl Job {
    /// A read of `len` bytes at `offset`. `block` is the device's block, `chunk` the largest operation.
    pub fn read(offset: u64, len: u64, block: u64, chunk: u64) -> Job {
        let span = Span::new(offset, len, block, chunk);
        let single = span.aligned() && len <= chunk;
        Job::new(
            Work::Read {
                span,
                data: (!single).then(|| vec![0; len as usize]),
            },
            span.first,
            false,
        )
    }

    /// A write (or WRITE_ZEROES) of `len` bytes at `offset`; `Payload::InSlot` only for an aligned request of
    /// at most `chunk` bytes (see [`Job::write_fits_slot`]).
    pub fn write(offset: u64, len: u64, block: u64, chunk: u64, payload: Payload, fua: bool) -> Job {
        let span = Span::new(offset, len, block, chunk);
        if matches!(payload, Payload::InSlot) {
            assert!(
                span.aligned() && len <= chunk,
                "only a single aligned write can use the slot's buffer as it is"
            );
        }
        Job::new(
            Work::Write {
                span,
                payload,
                head: None,
                tail: None,
            },
            span.first,
            fua,
        )
    }

    /// Whether a write of `len` bytes at `offset` is one aligned device operation, so its payload can go
    /// straight into the slot's buffer.
    pub fn write_fits_slot(offset: u64, len: u64, block: u64, chunk: u64) -> bool {
        Span::new(offset, len, block, chunk).aligned() && len <= chunk
    }

    pub fn trim(offset: u64, len: u64, block: u64, fua: bool) -> Job {
        let first = offset.div_ceil(block) * block;
        let last = (offset + len) / block * block;
        Job::new(
            Work::Trim {
                range: (first < last).then_some((first, last)),
            },
            0,
            fua,
        )
    }

    pub fn flush() -> Job {
        Job::new(Work::Flush, 0, false)
    }

    fn new(work: Work, next: u64, fua: bool) -> Job {
        Job {
            work,
            next,
            fua,
            flushed: false,
            at_device: AtDevice::Nothing,
        }
    }

    /// The device blocks a write covers, and whether it reads and writes back the edges of a partial block
    /// (two such writes, or one and another write, must not overlap in time).
    pub fn write_blocks(&self) -> Option<(u64, u64, bool)> {
        match &self.work {
            Work::Write { span, .. } => Some((span.first, span.last, !span.aligned())),
            _ => None,
        }
    }

    /// The bytes a finished read answers with: its own buffer, or the start of the slot's.
    pub fn read_data<'a>(&'a self, slot_buffer: &'a [u8]) -> &'a [u8] {
        match &self.work {
            Work::Read { data: Some(data), .. } => data,
            Work::Read { span, data: None } => &slot_buffer[..(span.end - span.start) as usize],
            _ => panic!("read_data of a job that is not a read"),
        }
    }

    /// Takes in the result of the operation that just succeeded (the slot's buffer holds what a read
    /// brought) and says what comes next; for a write chunk it lays the data out in the buffer first.
    pub fn advance(&mut self, buf: &mut [u8]) -> Next {
        let done = std::mem::replace(&mut self.at_device, AtDevice::Nothing);
        self.absorb(done, buf);
        let next = self.choose(buf);
        if let Next::Device(op) = next {
            self.at_device = match op.op {
                Op::Flush => AtDevice::Flush,
                Op::Discard => AtDevice::Trim,
                _ => self.at_device,
            };
        }
        next
    }

    fn absorb(&mut self, done: AtDevice, buf: &[u8]) {
        match (&mut self.work, done) {
            (_, AtDevice::Nothing) => {}
            (_, AtDevice::Flush) => self.flushed = true,
            (Work::Trim { range }, AtDevice::Trim) => *range = None,
            (Work::Read { span, data }, AtDevice::Chunk(c0, c1)) => {
                if let Some(data) = data {
                    let from = span.start.max(c0);
                    let to = span.end.min(c1);
                    data[(from - span.start) as usize..(to - span.start) as usize]
                        .copy_from_slice(&buf[(from - c0) as usize..(to - c0) as usize]);
                }
                self.next = c1;
            }
            (Work::Write { span, head, .. }, AtDevice::Head) => {
                *head = Some(buf[..span.block as usize].to_vec());
            }
            (Work::Write { span, tail, .. }, AtDevice::Tail) => {
                *tail = Some(buf[..span.block as usize].to_vec());
            }
            (Work::Write { .. }, AtDevice::Chunk(_, c1)) => self.next = c1,
            (work, done) => unreachable!("{done:?} completed for {work:?}"),
        }
    }

    fn choose(&mut self, buf: &mut [u8]) -> Next {
        let fua_flush = self.fua && !self.flushed;
        match &mut self.work {
            Work::Flush if !self.flushed => Next::Device(DeviceOp {
                op: Op::Flush,
                offset: 0,
                len: 0,
            }),
            Work::Flush => Next::Done,
            Work::Trim {
                range: Some((first, last)),
            } => Next::Device(DeviceOp {
                op: Op::Discard,
                offset: *first,
                len: *last - *first,
            }),
            Work::Read { span, .. } => {
                if self.next >= span.last {
                    return Next::Done;
                }
                let (c0, c1) = span.chunk_at(self.next);
                self.at_device = AtDevice::Chunk(c0, c1);
                Next::Device(DeviceOp {
                    op: Op::Read,
                    offset: c0,
                    len: c1 - c0,
                })
            }
            Work::Write {
                span,
                payload,
                head,
                tail,
            } if self.next < span.last => {
                let edges = Edges { head, tail };
                let (at_device, op) = next_write(span, payload, &edges, self.next, buf);
                self.at_device = at_device;
                Next::Device(op)
            }
            Work::Write { .. } | Work::Trim { range: None } if fua_flush => Next::Device(DeviceOp {
                op: Op::Flush,
                offset: 0,
                len: 0,
            }),
            Work::Write { .. } | Work::Trim { range: None } => Next::Done,
        }
    }
}

/// The edge blocks of an unaligned write, once read: what the write's first and last blocks keep of the device.
struct Edges<'a> {
    head: &'a Option<Vec<u8>>,
    tail: &'a Option<Vec<u8>>,
}

/// The write chunk at `next`, or first the read of an edge block it needs and lacks. A write chunk is made in
/// `buf`: the edges' kept bytes, then the request's own over them.
fn next_write(
    span: &Span,
    payload: &Payload,
    edges: &Edges<'_>,
    next: u64,
    buf: &mut [u8],
) -> (AtDevice, DeviceOp) {
    let (c0, c1) = span.chunk_at(next);
    let bs = span.block;
    let needs_head = c0 == span.first && span.start > span.first;
    // A one-block chunk with both edges partial is one block: its head read serves for both.
    let needs_tail = c1 == span.last && span.end < span.last && !(needs_head && c1 - c0 == bs);
    if needs_head && edges.head.is_none() {
        let read = DeviceOp {
            op: Op::Read,
            offset: c0,
            len: bs,
        };
        return (AtDevice::Head, read);
    }
    if needs_tail && edges.tail.is_none() {
        let read = DeviceOp {
            op: Op::Read,
            offset: c1 - bs,
            len: bs,
        };
        return (AtDevice::Tail, read);
    }
    let n = (c1 - c0) as usize;
    if !matches!(payload, Payload::InSlot) {
        if let Some(h) = edges.head.as_ref().filter(|_| needs_head) {
            buf[..bs as usize].copy_from_slice(h);
        }
        if let Some(t) = edges.tail.as_ref().filter(|_| needs_tail) {
            buf[n - bs as usize..n].copy_from_slice(t);
        }
        let from = span.start.max(c0);
        let to = span.end.min(c1);
        let dst = &mut buf[(from - c0) as usize..(to - c0) as usize];
        match payload {
            Payload::Bytes(bytes) => {
                dst.copy_from_slice(&bytes[(from - span.start) as usize..(to - span.start) as usize]);
            }
            Payload::Zeroes => dst.fill(0),
            Payload::InSlot => unreachable!("checked above"),
        }
    }
    let write = DeviceOp {
        op: Op::Write,
        offset: c0,
        len: c1 - c0,
    };
    (AtDevice::Chunk(c0, c1), write)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a job against a memory disk through a slot buffer of `chunk` bytes; returns the operations it
    /// issued and, for a read, what it answers with.
    fn run(job: &mut Job, disk: &mut [u8], chunk: usize) -> (Vec<DeviceOp>, Vec<u8>) {
        let mut buf = vec![0xEE; chunk];
        let mut ops = Vec::new();
        while let Next::Device(op) = job.advance(&mut buf) {
            ops.push(op);
            let r = op.offset as usize..(op.offset + op.len) as usize;
            match op.op {
                Op::Read => buf[..r.len()].copy_from_slice(&disk[r]),
                Op::Write => disk[r.clone()].copy_from_slice(&buf[..r.len()]),
                Op::Discard => disk[r].fill(0),
                Op::Flush => {}
            }
        }
        let data = match job.work {
            Work::Read { .. } => job.read_data(&buf).to_vec(),
            _ => Vec::new(),
        };
        (ops, data)
    }

    fn disk() -> Vec<u8> {
        (0..64 * 512).map(|i| (i / 512) as u8).collect()
    }

    #[test]
    fn an_unaligned_write_reads_only_its_partial_edge_blocks_and_keeps_their_other_bytes() {
        let mut d = disk();
        let before = d.clone();
        // 1000 bytes from byte 700: partial blocks 1 (700..1024) and 3 (1536..1700), whole block 2.
        let payload: Vec<u8> = (0..1000).map(|i| 200 + (i % 50) as u8).collect();
        let mut job = Job::write(700, 1000, 512, 4096, Payload::Bytes(payload.clone()), true);
        assert_eq!(job.write_blocks(), Some((512, 2048, true)));
        let (ops, _) = run(&mut job, &mut d, 4096);
        let kinds: Vec<(Op, u64, u64)> = ops.iter().map(|o| (o.op, o.offset, o.len)).collect();
        assert_eq!(
            kinds,
            vec![
                (Op::Read, 512, 512),
                (Op::Read, 1536, 512),
                (Op::Write, 512, 1536),
                (Op::Flush, 0, 0)
            ]
        );
        let mut want = before;
        want[700..1700].copy_from_slice(&payload);
        assert!(d == want, "the bytes around the write are as they were");
    }

    #[test]
    fn a_write_inside_one_block_reads_it_once_and_a_long_write_goes_in_chunks() {
        let mut d = disk();
        let mut job = Job::write(1030, 10, 512, 4096, Payload::Zeroes, false);
        let (ops, _) = run(&mut job, &mut d, 4096);
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert!(d[1030..1040].iter().all(|&b| b == 0) && d[1029] == 2 && d[1040] == 2);
        // 10 KiB from byte 100 through a 4 KiB slot: the head block read, three chunks, the tail read.
        let mut d = disk();
        let before = d.clone();
        let payload = vec![0xAB; 10 << 10];
        let mut job = Job::write(100, 10 << 10, 512, 4096, Payload::Bytes(payload), false);
        let (ops, _) = run(&mut job, &mut d, 4096);
        let writes: Vec<(u64, u64)> = ops
            .iter()
            .filter(|o| o.op == Op::Write)
            .map(|o| (o.offset, o.len))
            .collect();
        assert_eq!(writes, vec![(0, 4096), (4096, 4096), (8192, 2560)]);
        assert!(d[100..100 + (10 << 10)].iter().all(|&b| b == 0xAB));
        assert!(d[..100] == before[..100] && d[100 + (10 << 10)..] == before[100 + (10 << 10)..]);
    }

    #[test]
    fn reads_of_any_alignment_and_length_return_exactly_their_bytes() {
        let d = disk();
        for (offset, len) in [
            (0u64, 512u64),
            (700, 1000),
            (1, 1),
            (100, 20_000),
            (0, 4096),
            (0, 8192),
        ] {
            let mut disk = d.clone();
            let mut job = Job::read(offset, len, 512, 4096);
            let (ops, data) = run(&mut job, &mut disk, 4096);
            assert!(
                ops.iter()
                    .all(|o| o.op == Op::Read && o.len <= 4096 && o.offset % 512 == 0)
            );
            assert_eq!(
                data,
                d[offset as usize..(offset + len) as usize].to_vec(),
                "{offset}+{len}"
            );
        }
    }

    #[test]
    fn a_trim_discards_only_whole_blocks_and_fua_flushes_after() {
        let mut d = disk();
        let (ops, _) = run(&mut Job::trim(100, 2000, 512, true), &mut d, 4096);
        assert_eq!(
            ops.iter().map(|o| (o.op, o.offset, o.len)).collect::<Vec<_>>(),
            vec![(Op::Discard, 512, 1536), (Op::Flush, 0, 0)]
        );
        let (ops, _) = run(&mut Job::trim(100, 200, 512, false), &mut d, 4096);
        assert!(ops.is_empty(), "nothing whole to discard");
        let (ops, _) = run(&mut Job::flush(), &mut d, 4096);
        assert_eq!(ops.len(), 1);
    }
}
