//! The transmission phase: a connection's requests checked, turned into device work on free slots, and
//! answered in whatever order the device completes them (a large read the export's page cache holds whole is
//! answered at once, from the cache, without the device).
//!
//! It owns what the protocol asks of each request: the checks (unknown commands and flags, ranges, alignment
//! and lengths for what the client negotiated), the replies (simple or structured, errors included), block
//! status, and the order of writes that share a partially written block. It must never reply to a FLUSH
//! before the device's flush completes, never reply to a FUA write before a flush issued after the write
//! completes, never let a malformed request touch the device, and never take a request from a connection
//! that owes more than its backlog allows (a client that does not read its replies stops being read).

use ssdlab_core::device::{Completion, Device, Io, Op};

use crate::conn::{Conn, complete_request};
use crate::job::{Job, Next, Payload};
use crate::output::Output;
use crate::protocol::{self, Negotiated, REQUEST_BYTES, Request};
use crate::server::{HARD_PAYLOAD_LIMIT, Pending, ServeStats, Server};

/// The smallest read whose reply is sent straight from an export's page cache (sendfile) rather than copied.
/// A small read's copy is cheap, and sending it from the cache costs the reply a system call of its own (plus
/// three to ask the cache first) where a turn's copied replies share one: 4 KiB reads at queue depth 32 would
/// lose the rate they have over nbdkit's.
const SEND_FROM_PAGE_CACHE_BYTES: u32 = 64 << 10;
/// The most descriptors one block-status reply carries (the protocol asks servers to stay under 2^20).
const MAX_STATUS_DESCRIPTORS: usize = 1 << 16;

impl<D: Device> Server<'_, D> {
    /// The alignment and the largest READ/WRITE a connection may use: the export's, if it asked for block
    /// sizes, else the protocol's defaults.
    pub(crate) fn limits(&self, n: &Negotiated) -> (u64, u32) {
        if n.block_sizes {
            (
                u64::from(self.export.min_block_bytes),
                self.export.max_payload_bytes,
            )
        } else {
            (
                u64::from(protocol::DEFAULT_MIN_BLOCK_BYTES),
                protocol::DEFAULT_MAX_PAYLOAD_BYTES,
            )
        }
    }

    /// Checks a request against the protocol and what the connection negotiated: 0, or the NBD error.
    fn check(&self, n: &Negotiated, r: &Request) -> u32 {
        use protocol::*;
        let (min, max) = self.limits(n);
        // The flags each command may carry. DF and FAST_ZERO are not advertised; FUA means nothing to a
        // FLUSH or a CACHE.
        let allowed = match r.command {
            CMD_READ => CMD_FLAG_FUA,
            CMD_WRITE | CMD_TRIM => CMD_FLAG_FUA,
            CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
            CMD_BLOCK_STATUS => CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
            CMD_FLUSH | CMD_CACHE => 0,
            _ => return EINVAL,
        };
        if r.flags & !allowed != 0 {
            return EINVAL;
        }
        let modifies = matches!(r.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
        if modifies && self.read_only {
            return EPERM;
        }
        if r.command == CMD_TRIM && self.export.transmission_flags & TFLAG_SEND_TRIM == 0 {
            return ENOTSUP;
        }
        if r.command == CMD_FLUSH {
            return 0;
        }
        let in_range = r
            .offset
            .checked_add(u64::from(r.length))
            .is_some_and(|end| end <= self.export.size_bytes);
        if !in_range {
            // Writing past the end is running out of space; anything else past it is a bad argument.
            return if modifies { ENOSPC } else { EINVAL };
        }
        if matches!(r.command, CMD_READ | CMD_WRITE) && r.length > max {
            return EINVAL;
        }
        if !(r.offset.is_multiple_of(min) && u64::from(r.length).is_multiple_of(min)) {
            return EINVAL;
        }
        if r.command == CMD_BLOCK_STATUS && (r.length == 0 || n.allocation_context.is_none()) {
            return EINVAL;
        }
        0
    }

    /// How many payload bytes follow a request header in the stream, and whether the server reads them (a
    /// refused write's payload is skipped as it arrives, never buffered).
    fn payload(&self, n: &Negotiated, r: &Request) -> (usize, bool) {
        if r.command != protocol::CMD_WRITE {
            return (0, false);
        }
        (r.length as usize, self.check(n, r) == 0)
    }

    /// Whether the connection's input starts with a request it could take now, were there room (for the
    /// close check: such a request is still to be answered). Never while stopping: no request is taken then.
    pub(crate) fn complete_request_waiting(&self, i: usize) -> bool {
        let Some(conn) = self.conns[i].as_ref() else {
            return false;
        };
        let Some(n) = conn.negotiated() else {
            return false;
        };
        !self.stopping
            && !conn.dead
            && conn.skip == 0
            && complete_request(&conn.inbuf, |r| match self.payload(n, r) {
                (len, true) => len,
                _ => 0,
            })
    }

    /// Takes complete requests off a connection's input while it may take them and device slots are free.
    pub(crate) fn parse(&mut self, i: usize) {
        loop {
            let Some(conn) = self.conns[i].as_mut() else {
                return;
            };
            conn.stalled = false;
            let Some(&n) = conn.negotiated() else {
                return;
            };
            if self.stopping || conn.dead || conn.skip > 0 || conn.inbuf.len() < REQUEST_BYTES {
                return;
            }
            let header: [u8; REQUEST_BYTES] = conn.inbuf[..REQUEST_BYTES].try_into().expect("28 bytes");
            let Ok(r) = Request::decode(&header) else {
                self.violation(i);
                return;
            };
            if r.command == protocol::CMD_DISC {
                // Nothing may follow it; what is in flight is still answered.
                let conn = self.conns[i].as_mut().expect("checked");
                conn.read_closed = true;
                conn.inbuf = Vec::new();
                return;
            }
            if !conn.can_send()
                && matches!(
                    r.command,
                    protocol::CMD_READ | protocol::CMD_BLOCK_STATUS | protocol::CMD_CACHE
                )
            {
                // Nobody will read the answer, and the request changes nothing: it is dropped.
                conn.consume(REQUEST_BYTES);
                continue;
            }
            let error = self.check(&n, &r);
            if r.command == protocol::CMD_WRITE && error != 0 && r.length > HARD_PAYLOAD_LIMIT {
                self.violation(i);
                return;
            }
            let (payload, read) = self.payload(&n, &r);
            // What taking it adds to the connection's backlog: read data, write data held outside the slot,
            // or a reply header.
            let cost = match r.command {
                protocol::CMD_READ if error == 0 => r.length as usize,
                protocol::CMD_WRITE if read && !self.fits_slot(&r) => payload,
                _ => 64,
            };
            let needs_slot = error == 0 && self.needs_device(&r);
            let conn = self.conns[i].as_mut().expect("checked");
            if read && conn.inbuf.len() < REQUEST_BYTES + payload {
                // The rest of the payload is still to come.
                return;
            }
            if !conn.may_take(cost) {
                conn.stalled = true;
                return;
            }
            if needs_slot && self.free_slots.is_empty() {
                let conn = self.conns[i].as_mut().expect("checked");
                conn.stalled = true;
                if !conn.waiting_for_slot {
                    conn.waiting_for_slot = true;
                    self.waiting_for_slot.push_back((i, self.generations[i]));
                }
                return;
            }
            let conn = self.conns[i].as_mut().expect("checked");
            if r.command == protocol::CMD_WRITE && !read {
                // A refused write: its payload is thrown away as it arrives.
                let here = conn.inbuf.len().min(REQUEST_BYTES + payload);
                conn.skip = (REQUEST_BYTES + payload - here) as u64;
                conn.consume(here);
            } else if !needs_slot || error != 0 {
                conn.consume(REQUEST_BYTES);
            }
            if error != 0 {
                self.error_reply(i, error, &r);
                continue;
            }
            if !needs_slot {
                self.answer_at_once(i, &r);
                continue;
            }
            self.dispatch(i, r, payload);
        }
    }

    /// Whether a valid request needs the device (CACHE, zero-length requests and block status do not, nor a
    /// read the export's page cache holds whole: see [`Server::answered_from_page_cache`]).
    fn needs_device(&self, r: &Request) -> bool {
        match r.command {
            protocol::CMD_FLUSH => true,
            protocol::CMD_CACHE | protocol::CMD_BLOCK_STATUS => false,
            protocol::CMD_READ => r.length > 0 && !self.answered_from_page_cache(r),
            _ => r.length > 0,
        }
    }

    /// Whether a read is answered straight from the export's page cache, without the device: its file is
    /// what the device reads ([`Device::page_cache`]) and the cache holds the whole range now, so sending it
    /// cannot wait for the medium and hold up the loop (a range the cache lacks goes through the device,
    /// whose read waits off the loop and leaves it cached; its reply is then sent from the cache too). A
    /// write already answered is in the cache, so the read sees it, as it would through the device; one
    /// still at the device is concurrent with the read, which the protocol leaves unordered. The bytes are
    /// taken when they are sent, so a write answered while the reply is still going out may show in it: that
    /// write overlapped a read not yet answered, which the protocol leaves unordered too. Residency is judged
    /// here, not again at the send (see `output`).
    fn answered_from_page_cache(&self, r: &Request) -> bool {
        self.sends_from_page_cache(r) && self.device.page_cache_holds(r.offset, u64::from(r.length))
    }

    /// Whether a read's reply sends its bytes from the export's page cache rather than copying them: only
    /// reads of at least [`SEND_FROM_PAGE_CACHE_BYTES`], where the copy costs more than the calls saved.
    fn sends_from_page_cache(&self, r: &Request) -> bool {
        self.page_cache.is_some() && r.length >= SEND_FROM_PAGE_CACHE_BYTES
    }

    /// Whether a valid write is one aligned device operation, so its payload goes straight into the slot.
    fn fits_slot(&self, r: &Request) -> bool {
        Job::write_fits_slot(r.offset, u64::from(r.length), self.device_block, self.chunk)
    }

    fn violation(&mut self, i: usize) {
        self.stats.protocol_violations += 1;
        if let Some(conn) = self.conns[i].as_mut() {
            conn.kill();
        }
    }

    fn answer_at_once(&mut self, i: usize, r: &Request) {
        if r.command == protocol::CMD_BLOCK_STATUS {
            self.block_status(i, r);
            return;
        }
        let data = if r.command == protocol::CMD_READ && r.length > 0 {
            // `needs_device` found it whole in the page cache.
            self.stats.reads += 1;
            self.stats.bytes_read += u64::from(r.length);
            ReadData::PageCache
        } else {
            ReadData::Bytes(&[])
        };
        if let Some(conn) = self.conns[i].as_mut() {
            reply(conn, 0, r, Some(data));
            // Sent now: an unsent reply counts against the backlog the next request of this parse is judged by.
            conn.write_out(self.page_cache.as_ref());
        }
    }

    /// Takes a slot for a valid request and starts its device work.
    fn dispatch(&mut self, i: usize, r: Request, payload_len: usize) {
        use protocol::*;
        let slot = self.free_slots.pop().expect("parse checked a free slot");
        let (block, chunk) = (self.device_block, self.chunk);
        let fua = r.flags & CMD_FLAG_FUA != 0;
        let (offset, len) = (r.offset, u64::from(r.length));
        let fits = self.fits_slot(&r);
        let conn = self.conns[i].as_mut().expect("parse checked the connection");
        let (job, owed) = match r.command {
            CMD_READ => {
                self.stats.reads += 1;
                (Job::read(offset, len, block, chunk), r.length as usize)
            }
            CMD_WRITE => {
                self.stats.writes += 1;
                let body = &conn.inbuf[REQUEST_BYTES..REQUEST_BYTES + payload_len];
                let (payload, held) = if fits {
                    self.device.buffer_mut(slot)[..payload_len].copy_from_slice(body);
                    (Payload::InSlot, 0)
                } else {
                    (Payload::Bytes(body.to_vec()), payload_len)
                };
                conn.consume(REQUEST_BYTES + payload_len);
                (Job::write(offset, len, block, chunk, payload, fua), held)
            }
            CMD_FLUSH => {
                self.stats.flushes += 1;
                (Job::flush(), 0)
            }
            CMD_TRIM => {
                self.stats.trims += 1;
                (Job::trim(offset, len, block, fua), 0)
            }
            CMD_WRITE_ZEROES => {
                self.stats.write_zeroes += 1;
                (Job::write(offset, len, block, chunk, Payload::Zeroes, fua), 0)
            }
            _ => unreachable!("check admits only these commands to the device"),
        };
        if r.command != CMD_WRITE {
            conn.consume(REQUEST_BYTES);
        }
        if fua && matches!(r.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES) {
            self.stats.fua_writes += 1;
        }
        conn.in_flight += 1;
        conn.owed += owed;
        self.jobs[slot as usize] = Some(Pending {
            conn: i,
            generation: self.generations[i],
            request: r,
            job,
            owed,
            deferred: false,
            op_len: 0,
        });
        let partial = self.jobs[slot as usize]
            .as_ref()
            .and_then(|p| p.job.write_blocks())
            .is_some_and(|(_, _, partial)| partial);
        self.partial_writes += usize::from(partial);
        // Only a write whose edges are read and written back orders writes: without one, none is looked for.
        if self.partial_writes > 0 && self.overlaps_partial_write(slot) {
            // Its first operation waits for the overlapping write to finish.
            self.jobs[slot as usize].as_mut().expect("just set").deferred = true;
            self.deferred.push_back(slot);
            return;
        }
        self.step(slot);
    }

    /// Whether the write on `slot` overlaps a write started before it where either reads and writes back the
    /// edges of a partial block: the second could read the block before the first wrote it, and write the old
    /// bytes back over it.
    fn overlaps_partial_write(&self, slot: u32) -> bool {
        let Some((first, last, partial)) = self.jobs[slot as usize]
            .as_ref()
            .and_then(|p| p.job.write_blocks())
        else {
            return false;
        };
        self.jobs.iter().enumerate().any(|(k, p)| {
            k != slot as usize
                && p.as_ref().is_some_and(|p| {
                    p.job.write_blocks().is_some_and(|(f, l, other_partial)| {
                        (partial || other_partial)
                            && f < last
                            && first < l
                            && (!p.deferred || self.deferred_before(k, slot))
                    })
                })
        })
    }

    /// Whether the deferred job on slot `a` was queued before the one on `b`.
    fn deferred_before(&self, a: usize, b: u32) -> bool {
        let pos = |s: u32| self.deferred.iter().position(|&d| d == s);
        match (pos(a as u32), pos(b)) {
            (Some(pa), Some(pb)) => pa < pb,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Starts deferred writes whose overlapping writes have finished, in the order they came.
    fn start_deferred(&mut self) {
        let mut k = 0;
        while k < self.deferred.len() {
            let slot = self.deferred[k];
            if self.overlaps_partial_write(slot) {
                k += 1;
                continue;
            }
            self.deferred.remove(k);
            if let Some(p) = self.jobs[slot as usize].as_mut() {
                p.deferred = false;
            }
            self.step(slot);
        }
    }

    /// Gives a job its next device operation, or answers its request.
    fn step(&mut self, slot: u32) {
        let pending = self.jobs[slot as usize].as_mut().expect("a job on this slot");
        match pending.job.advance(self.device.buffer_mut(slot)) {
            Next::Device(op) => {
                pending.op_len = op.len;
                let io = Io {
                    op: op.op,
                    offset: op.offset,
                    len: op.len,
                    slot,
                    tag: 0,
                };
                match self.device.submit(&[io]) {
                    Ok(1) => {}
                    // The device refused it outright: the client hears EIO, the server goes on.
                    Ok(_) | Err(_) => self.finish(slot, protocol::EIO),
                }
            }
            Next::Done => self.finish(slot, 0),
        }
    }

    pub(crate) fn completed(&mut self, c: Completion) {
        let Some(p) = self.jobs[c.slot as usize].as_ref() else {
            panic!("a completion for slot {} with no request", c.slot);
        };
        assert!(!p.deferred, "a deferred job has nothing at the device");
        let short = matches!(c.op, Op::Read | Op::Write) && c.result != p.op_len as i64;
        let failed = c.result < 0 || short;
        if failed {
            let errno = if c.result < 0 { (-c.result) as i32 } else { 5 };
            self.finish(c.slot, protocol::nbd_error(errno));
            return;
        }
        self.step(c.slot);
    }

    /// Answers a job's request, frees its slot and lets what waited on it go.
    fn finish(&mut self, slot: u32, error: u32) {
        let p = self.jobs[slot as usize]
            .take()
            .expect("a finished request was pending");
        if error == 0 {
            match p.request.command {
                protocol::CMD_READ => self.stats.bytes_read += u64::from(p.request.length),
                protocol::CMD_WRITE => self.stats.bytes_written += u64::from(p.request.length),
                _ => {}
            }
        } else {
            // A job is a request the device ran: its error is the device's.
            count_device_error(&mut self.stats);
        }
        let from_page_cache = self.sends_from_page_cache(&p.request);
        if self.generations[p.conn] == p.generation
            && let Some(conn) = self.conns[p.conn].as_mut()
        {
            // Counted when the request was taken: an imbalance is a server bug, caught in release builds too.
            conn.in_flight = conn
                .in_flight
                .checked_sub(1)
                .expect("a connection's requests in flight are counted");
            conn.owed = conn
                .owed
                .checked_sub(p.owed)
                .expect("a connection's backlog counts what its requests hold");
            if p.request.command == protocol::CMD_READ && error == 0 {
                let data = if from_page_cache {
                    // The device's read left the bytes in the page cache too: they go from there, uncopied. A
                    // write completed since is in them, as it would be in a read that came after it.
                    ReadData::PageCache
                } else {
                    ReadData::Bytes(p.job.read_data(self.device.buffer(slot)))
                };
                reply(conn, 0, &p.request, Some(data));
            } else {
                reply(conn, error, &p.request, None);
            }
            self.touch(p.conn);
        }
        self.free_slots.push(slot);
        if p.job.write_blocks().is_some_and(|(_, _, partial)| partial) {
            self.partial_writes = self
                .partial_writes
                .checked_sub(1)
                .expect("partial writes are counted when taken");
        }
        if p.job.write_blocks().is_some() && !self.deferred.is_empty() {
            self.start_deferred();
        }
    }

    fn error_reply(&mut self, i: usize, error: u32, r: &Request) {
        self.stats.errors += 1;
        let Some(conn) = self.conns[i].as_mut().filter(|c| c.can_send()) else {
            return;
        };
        if r.command == protocol::CMD_BLOCK_STATUS && conn.negotiated().is_some_and(|n| n.structured) {
            // A block-status reply must be structured, errors included.
            protocol::structured_error(conn.out.bytes(), error, r.cookie, "invalid block-status request");
            conn.write_out(self.page_cache.as_ref());
            return;
        }
        reply(conn, error, r, None);
        // Sent now, as in `answer_at_once`.
        conn.write_out(self.page_cache.as_ref());
    }

    /// Answers NBD_CMD_BLOCK_STATUS at once (the device answers from its tables, without I/O). A query that is
    /// not aligned to the device's block (from a client that did not negotiate block sizes) is answered for
    /// the blocks around it, cut to its bytes.
    fn block_status(&mut self, i: usize, r: &Request) {
        let block = self.device_block;
        let start = r.offset / block * block;
        let end = (r.offset + u64::from(r.length)).div_ceil(block) * block;
        let mut extents = Vec::new();
        let answer = self.device.extents(start, end - start, &mut extents);
        let Some(conn) = self.conns[i].as_mut().filter(|c| c.can_send()) else {
            return;
        };
        let context = conn
            .negotiated()
            .and_then(|n| n.allocation_context)
            .expect("check made sure a context was selected");
        if let Err(e) = answer {
            count_device_error(&mut self.stats);
            protocol::structured_error(conn.out.bytes(), protocol::EIO, r.cookie, &e.to_string());
            conn.write_out(self.page_cache.as_ref());
            return;
        }
        let aligned = crate::status::align(&extents, start, block);
        let cut = crate::status::skip(&aligned, r.offset - start);
        let max = if r.flags & protocol::CMD_FLAG_REQ_ONE != 0 {
            1
        } else {
            MAX_STATUS_DESCRIPTORS
        };
        let descriptors = crate::status::descriptors(&cut, u64::from(r.length), max);
        if descriptors.is_empty() {
            // A device that described nothing: the client hears an error, never an empty answer.
            count_device_error(&mut self.stats);
            protocol::structured_error(
                conn.out.bytes(),
                protocol::EIO,
                r.cookie,
                "the device described nothing",
            );
            conn.write_out(self.page_cache.as_ref());
            return;
        }
        protocol::structured_header(
            conn.out.bytes(),
            protocol::REPLY_FLAG_DONE,
            protocol::REPLY_TYPE_BLOCK_STATUS,
            r.cookie,
            4 + 8 * descriptors.len() as u32,
        );
        let out = conn.out.bytes();
        out.extend_from_slice(&context.to_be_bytes());
        for (len, flags) in descriptors {
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
        }
        self.stats.block_status += 1;
        conn.write_out(self.page_cache.as_ref());
    }
}

/// Where a successful read's bytes are.
#[derive(Clone, Copy)]
enum ReadData<'a> {
    Bytes(&'a [u8]),
    /// The request's range of the export's page-cache file (`Server::page_cache`), sent from there.
    PageCache,
}

/// Answers request `r` on `conn`: with `data` for a successful read. Reads on a connection that negotiated
/// structured replies are answered in one final chunk; everything else with a simple reply, which the protocol
/// allows for replies without data. Nothing is sent on a dead connection. The reply waits in the connection's
/// output: a completion's until the server settles the connection (the caller touches it), so a turn's replies
/// leave together; one answered while requests are parsed is sent by its caller at once, since unsent it would
/// count against the backlog that the next request is judged by.
fn reply(conn: &mut Conn, error: u32, r: &Request, data: Option<ReadData<'_>>) {
    if !conn.can_send() {
        return;
    }
    let structured = conn.negotiated().is_some_and(|n| n.structured);
    let data_len = match data {
        Some(ReadData::Bytes(bytes)) => bytes.len(),
        Some(ReadData::PageCache) => r.length as usize,
        None => 0,
    };
    let out = &mut conn.out;
    match (structured && r.command == protocol::CMD_READ, data) {
        (true, _) if error != 0 => {
            let message = match error {
                protocol::EINVAL => {
                    "the read is outside the export, not aligned to its block size, too long or has unknown flags"
                }
                _ => "the device failed the read",
            };
            protocol::structured_error(out.bytes(), error, r.cookie, message);
        }
        (true, Some(data)) if data_len > 0 => {
            protocol::structured_header(
                out.bytes(),
                protocol::REPLY_FLAG_DONE,
                protocol::REPLY_TYPE_OFFSET_DATA,
                r.cookie,
                8 + data_len as u32,
            );
            out.bytes().extend_from_slice(&r.offset.to_be_bytes());
            put_data(out, r, data);
        }
        (true, _) => {
            // A zero-length read: nothing to send but the end of the reply.
            protocol::structured_header(
                out.bytes(),
                protocol::REPLY_FLAG_DONE,
                protocol::REPLY_TYPE_NONE,
                r.cookie,
                0,
            );
        }
        (false, data) => {
            protocol::simple_reply(out.bytes(), error, r.cookie);
            if let Some(data) = data.filter(|_| r.command == protocol::CMD_READ && error == 0) {
                put_data(out, r, data);
            }
        }
    }
}

/// Puts a read's bytes after its reply's header.
fn put_data(out: &mut Output, r: &Request, data: ReadData<'_>) {
    match data {
        ReadData::Bytes(bytes) => out.bytes().extend_from_slice(bytes),
        ReadData::PageCache => out.file_range(r.offset, u64::from(r.length)),
    }
}

/// A request the device failed: an error answered, and the device's.
fn count_device_error(stats: &mut ServeStats) {
    stats.errors += 1;
    *stats.device_errors.get_or_insert(0) += 1;
}
