//! The server: one thread, one event loop over the listener, every client connection and the device.
//!
//! It owns the transmission phase of every connection (reading requests, validating them, turning them into
//! device operations, writing replies in whatever order the device completes them) and the device's slots.
//! It must never reply to a FLUSH before the device's flush completes, never reply to a FUA write before a
//! flush issued after the write completes, never let a malformed request touch the device, and never crash
//! on what a client sends: a request it cannot serve gets an NBD error; one it cannot even parse ends that
//! client's connection.
//!
//! One thread keeps the protocol state simple and needs no locks: sockets are non-blocking, `poll` waits for
//! them while the device is idle, and while operations are in flight the loop alternates a zero-timeout poll
//! with a short reap. The handshake of a new client is done blocking, with a deadline (a slow client delays
//! the others by at most that long).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use ssdlab_core::device::{Completion, Device, Io, Op};

use crate::protocol::{self, ExportInfo, Handshake, Negotiated, ProtocolError, REQUEST_BYTES, Request};

/// The largest payload a client may send or ask for in one request (advertised in NBD_INFO_BLOCK_SIZE).
pub const MAX_PAYLOAD_BYTES: u32 = 4 << 20;
/// A write longer than this is not even read: the connection is closed.
const HARD_PAYLOAD_LIMIT: u32 = 64 << 20;
/// Each read or write of the handshake, and the whole handshake, must finish within these: one thread serves
/// everyone, so a client that negotiates slowly holds the others up by at most the total.
const HANDSHAKE_STEP_TIMEOUT: Duration = Duration::from_secs(2);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_CHUNK: usize = 256 << 10;
/// The most descriptors one block-status reply carries (the protocol asks servers to stay under 2^20).
const MAX_STATUS_DESCRIPTORS: usize = 1 << 16;

/// Where to listen.
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                // Replies are small and latency matters: no Nagle.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Unix(l) => l.as_fd(),
            Listener::Tcp(l) => l.as_fd(),
        }
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn set_blocking_with_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => {
                s.set_nonblocking(timeout.is_none())?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
            Stream::Tcp(s) => {
                s.set_nonblocking(timeout.is_none())?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub export_name: String,
    pub read_only: bool,
    /// Operations the device may have in flight at once (across all clients).
    pub slots: u32,
}

/// What the server did, for the closing summary (the type is the result schema's).
pub use ssdlab_core::schema::serve::ServeStats;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{what}: {cause}")]
    Io { what: &'static str, cause: io::Error },
    #[error("the device failed: {0}")]
    Device(#[from] ssdlab_core::device::DeviceError),
}

fn io_error(what: &'static str) -> impl FnOnce(io::Error) -> ServeError {
    move |cause| ServeError::Io { what, cause }
}

struct Conn {
    stream: Stream,
    negotiated: Negotiated,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// Requests of this connection at the device.
    in_flight: usize,
    /// NBD_CMD_DISC received, or the client hung up: read nothing more, close once replies are out.
    closing: bool,
    /// The socket failed: replies are dropped.
    dead: bool,
}

#[derive(Debug, Clone, Copy)]
enum Stage {
    Main,
    /// The write (or trim) is done; the flush that makes it durable (FUA) is at the device.
    FuaFlush,
    /// Zeroes written up to `next` of `end`.
    Zeroing {
        next: u64,
        end: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    conn: usize,
    request: Request,
    stage: Stage,
    /// The length of the operation at the device now (a chunk of a WRITE_ZEROES, 0 for a flush).
    op_len: u64,
}

struct Server<'a, D: Device> {
    device: &'a mut D,
    export: ExportInfo,
    read_only: bool,
    conns: Vec<Option<Conn>>,
    pending: Vec<Option<Pending>>,
    free: Vec<u32>,
    stats: ServeStats,
    completions: Vec<Completion>,
    /// Shutting down: no new request is taken.
    stopping: bool,
    /// Reused for every socket read (allocating and zeroing it per request cost more than the request).
    read_chunk: Vec<u8>,
    /// The last poll's answer per connection slot (readable, writable), and which slots it polled.
    ready: Vec<(bool, bool)>,
    polled: Vec<usize>,
}

/// Serves `device` on `listener` until `stop` is set, then finishes what is in flight, flushes the device
/// and returns. `on_ready` is called once the server is accepting.
pub fn serve<D: Device>(
    device: &mut D,
    listener: Listener,
    options: &ServeOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(&ExportInfo),
) -> Result<ServeStats, ServeError> {
    if options.slots == 0 {
        return Err(ServeError::Io {
            what: "serving",
            cause: io::Error::new(ErrorKind::InvalidInput, "the device needs at least one slot"),
        });
    }
    let info = device.info().clone();
    let max_payload = MAX_PAYLOAD_BYTES.min(u32::try_from(info.max_transfer_bytes).unwrap_or(u32::MAX));
    device.prepare(options.slots, max_payload as usize)?;
    // One device behind every connection: a FLUSH on any of them covers the writes completed on all of them,
    // which is what CAN_MULTI_CONN promises.
    let mut flags = protocol::TFLAG_HAS_FLAGS
        | protocol::TFLAG_SEND_FLUSH
        | protocol::TFLAG_SEND_FUA
        | protocol::TFLAG_SEND_CACHE
        | protocol::TFLAG_CAN_MULTI_CONN;
    if options.read_only {
        flags |= protocol::TFLAG_READ_ONLY;
    } else {
        flags |= protocol::TFLAG_SEND_WRITE_ZEROES;
        if info.discard_supported {
            flags |= protocol::TFLAG_SEND_TRIM;
        }
    }
    if info.rotational {
        flags |= protocol::TFLAG_ROTATIONAL;
    }
    let export = ExportInfo {
        name: options.export_name.clone(),
        size_bytes: info.capacity_bytes,
        transmission_flags: flags,
        min_block_bytes: info.logical_block_bytes,
        preferred_block_bytes: info.physical_block_bytes.max(4096),
        max_payload_bytes: max_payload,
    };
    listener.set_nonblocking().map_err(io_error("listening"))?;
    let mut server = Server {
        device,
        export,
        read_only: options.read_only,
        conns: Vec::new(),
        pending: vec![None; options.slots as usize],
        free: (0..options.slots).rev().collect(),
        stats: ServeStats::default(),
        completions: Vec::new(),
        stopping: false,
        read_chunk: vec![0; READ_CHUNK],
        ready: Vec::new(),
        polled: Vec::new(),
    };
    on_ready(&server.export);
    server.run(&listener, stop)?;
    server.shut_down()?;
    Ok(server.stats)
}

impl<D: Device> Server<'_, D> {
    fn run(&mut self, listener: &Listener, stop: &AtomicBool) -> Result<(), ServeError> {
        while !stop.load(Ordering::Relaxed) {
            let busy = self.device.in_flight() > 0;
            let listener_ready = self.poll(Some(listener), if busy { 0 } else { 100 })?;
            if listener_ready {
                self.accept(listener);
            }
            self.service_sockets();
            if busy {
                self.reap(200_000)?;
                // Completions freed slots: requests already buffered can go now, without waiting for the
                // client (which is waiting for us).
                for i in 0..self.conns.len() {
                    self.parse(i);
                }
            } else if !listener_ready && self.ready.iter().all(|r| !r.0 && !r.1) {
                // Nothing to do: a chance for the device's background work (a cache destages).
                self.device.idle();
            }
            self.drop_finished();
        }
        Ok(())
    }

    /// Polls the listener and every connection; returns whether the listener is ready, and leaves in
    /// `self.ready`, per connection slot, (readable, writable). The vectors are reused: this runs once per
    /// request.
    fn poll(&mut self, listener: Option<&Listener>, timeout_ms: i32) -> Result<bool, ServeError> {
        let reading = !self.free.is_empty();
        let mut fds = Vec::with_capacity(self.conns.len() + 1);
        self.polled.clear();
        if let Some(l) = listener {
            fds.push(PollFd::from_borrowed_fd(l.fd(), PollFlags::IN));
        }
        for (i, conn) in self.conns.iter().enumerate() {
            let Some(conn) = conn else { continue };
            let mut flags = PollFlags::empty();
            if reading && !conn.closing && !conn.dead && conn.outbuf.len() < 16 << 20 {
                flags |= PollFlags::IN;
            }
            if !conn.outbuf.is_empty() && !conn.dead {
                flags |= PollFlags::OUT;
            }
            if flags.is_empty() {
                continue;
            }
            fds.push(PollFd::from_borrowed_fd(conn.stream.fd(), flags));
            self.polled.push(i);
        }
        let timeout = rustix::event::Timespec {
            tv_sec: (timeout_ms / 1000) as i64,
            tv_nsec: ((timeout_ms % 1000) as i64) * 1_000_000,
        };
        self.ready.clear();
        self.ready.resize(self.conns.len(), (false, false));
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(false),
            Err(e) => {
                return Err(ServeError::Io {
                    what: "poll",
                    cause: e.into(),
                });
            }
        }
        let offset = usize::from(listener.is_some());
        let listener_ready = listener.is_some() && !fds[0].revents().is_empty();
        for (k, &i) in self.polled.iter().enumerate() {
            let revents = fds[k + offset].revents();
            let hangup = revents.intersects(PollFlags::HUP | PollFlags::ERR);
            self.ready[i] = (
                revents.contains(PollFlags::IN) || hangup,
                revents.contains(PollFlags::OUT) || hangup,
            );
        }
        Ok(listener_ready)
    }

    fn accept(&mut self, listener: &Listener) {
        loop {
            let mut stream = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    // Out of descriptors or similar: the listener stays readable, so do not spin on it.
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            };
            self.stats.connections += 1;
            let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
            let negotiated = stream
                .set_blocking_with_timeout(Some(HANDSHAKE_STEP_TIMEOUT))
                .map_err(ProtocolError::from)
                .and_then(|()| protocol::handshake(&mut stream, &self.export, deadline));
            match negotiated {
                Ok(Handshake::Transmission(negotiated)) if stream.set_blocking_with_timeout(None).is_ok() => {
                    let conn = Conn {
                        stream,
                        negotiated,
                        inbuf: Vec::new(),
                        outbuf: Vec::new(),
                        in_flight: 0,
                        closing: false,
                        dead: false,
                    };
                    match self.conns.iter().position(Option::is_none) {
                        Some(i) => self.conns[i] = Some(conn),
                        None => self.conns.push(Some(conn)),
                    }
                }
                Ok(_) => {}
                Err(_) => self.stats.handshakes_failed += 1,
            }
        }
    }

    fn service_sockets(&mut self) {
        for i in 0..self.ready.len() {
            let (readable, writable) = self.ready[i];
            if writable {
                self.write_out(i);
            }
            if readable {
                self.read_in(i);
            }
            self.parse(i);
        }
    }

    fn read_in(&mut self, i: usize) {
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        let chunk = &mut self.read_chunk;
        loop {
            match conn.stream.read(chunk) {
                Ok(0) => {
                    conn.closing = true;
                    return;
                }
                Ok(n) => {
                    conn.inbuf.extend_from_slice(&chunk[..n]);
                    if conn.inbuf.len() > 2 * (MAX_PAYLOAD_BYTES as usize + REQUEST_BYTES) {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    conn.dead = true;
                    conn.closing = true;
                    return;
                }
            }
        }
    }

    fn write_out(&mut self, i: usize) {
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        while !conn.outbuf.is_empty() && !conn.dead {
            match conn.stream.write(&conn.outbuf) {
                Ok(n) => {
                    conn.outbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    conn.dead = true;
                    conn.closing = true;
                    conn.outbuf.clear();
                }
            }
        }
    }

    /// Answers request `r` on connection `i`: with `data` (a range of the slot's buffer) for a read. Reads on a
    /// connection that negotiated structured replies are answered in one final chunk; everything else with a
    /// simple reply, which the protocol allows for replies without data.
    fn reply(&mut self, i: usize, error: u32, r: &Request, data: Option<std::ops::Range<usize>>, slot: u32) {
        if error != 0 {
            self.stats.errors += 1;
        }
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        if conn.dead {
            return;
        }
        let structured_read = conn.negotiated.structured && r.command == protocol::CMD_READ;
        match (structured_read, data) {
            (true, _) if error != 0 => {
                let message = match error {
                    protocol::EINVAL => "the read is outside the export or not aligned to its block size",
                    protocol::EOVERFLOW => "the read is longer than the export's maximum payload",
                    _ => "the device failed the read",
                };
                protocol::structured_error(&mut conn.outbuf, error, r.cookie, message);
            }
            (true, Some(range)) if !range.is_empty() => {
                protocol::structured_header(
                    &mut conn.outbuf,
                    protocol::REPLY_FLAG_DONE,
                    protocol::REPLY_TYPE_OFFSET_DATA,
                    r.cookie,
                    8 + range.len() as u32,
                );
                conn.outbuf.extend_from_slice(&r.offset.to_be_bytes());
                conn.outbuf.extend_from_slice(&self.device.buffer(slot)[range]);
            }
            (true, _) => {
                // A zero-length read: nothing to send but the end of the reply.
                protocol::structured_header(
                    &mut conn.outbuf,
                    protocol::REPLY_FLAG_DONE,
                    protocol::REPLY_TYPE_NONE,
                    r.cookie,
                    0,
                );
            }
            (false, data) => {
                protocol::simple_reply(&mut conn.outbuf, error, r.cookie);
                if let Some(range) = data {
                    conn.outbuf.extend_from_slice(&self.device.buffer(slot)[range]);
                }
            }
        }
        self.write_out(i);
    }

    /// Answers NBD_CMD_BLOCK_STATUS at once (the device answers from its tables, without I/O).
    fn block_status(&mut self, i: usize, r: &Request) {
        let mut extents = Vec::new();
        let block = u64::from(self.export.min_block_bytes);
        let answer = self.device.extents(r.offset, u64::from(r.length), &mut extents);
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        if conn.dead {
            return;
        }
        let context = conn
            .negotiated
            .allocation_context
            .expect("dispatch checked that a context was selected");
        if let Err(e) = answer {
            self.stats.errors += 1;
            protocol::structured_error(&mut conn.outbuf, protocol::EIO, r.cookie, &e.to_string());
            self.write_out(i);
            return;
        }
        let aligned = crate::status::align(&extents, r.offset, block);
        let max = if r.flags & protocol::CMD_FLAG_REQ_ONE != 0 {
            1
        } else {
            MAX_STATUS_DESCRIPTORS
        };
        let descriptors = crate::status::descriptors(&aligned, u64::from(r.length), max);
        if descriptors.is_empty() {
            // A device that described nothing: the client hears an error, never an empty answer.
            self.stats.errors += 1;
            protocol::structured_error(
                &mut conn.outbuf,
                protocol::EIO,
                r.cookie,
                "the device described nothing",
            );
            self.write_out(i);
            return;
        }
        protocol::structured_header(
            &mut conn.outbuf,
            protocol::REPLY_FLAG_DONE,
            protocol::REPLY_TYPE_BLOCK_STATUS,
            r.cookie,
            4 + 8 * descriptors.len() as u32,
        );
        conn.outbuf.extend_from_slice(&context.to_be_bytes());
        for (len, flags) in descriptors {
            conn.outbuf.extend_from_slice(&len.to_be_bytes());
            conn.outbuf.extend_from_slice(&flags.to_be_bytes());
        }
        self.stats.block_status += 1;
        self.write_out(i);
    }

    /// Takes complete requests off a connection's input while device slots are free.
    fn parse(&mut self, i: usize) {
        loop {
            let Some(conn) = self.conns[i].as_mut() else {
                return;
            };
            if self.stopping || conn.dead || conn.inbuf.len() < REQUEST_BYTES || self.free.is_empty() {
                return;
            }
            let header: [u8; REQUEST_BYTES] = conn.inbuf[..REQUEST_BYTES].try_into().expect("28 bytes");
            let request = match Request::decode(&header) {
                Ok(r) => r,
                Err(_) => {
                    self.violation(i);
                    return;
                }
            };
            let payload = if request.command == protocol::CMD_WRITE {
                if request.length > HARD_PAYLOAD_LIMIT {
                    self.violation(i);
                    return;
                }
                request.length as usize
            } else {
                0
            };
            if conn.inbuf.len() < REQUEST_BYTES + payload {
                return;
            }
            // The payload goes from the input buffer straight to the device's slot buffer.
            let mut inbuf = std::mem::take(&mut conn.inbuf);
            self.dispatch(i, request, &inbuf[REQUEST_BYTES..REQUEST_BYTES + payload]);
            inbuf.drain(..REQUEST_BYTES + payload);
            if let Some(conn) = self.conns[i].as_mut() {
                conn.inbuf = inbuf;
            }
        }
    }

    fn structured(&self, i: usize) -> bool {
        self.conns[i].as_ref().is_some_and(|c| c.negotiated.structured)
    }

    fn allocation_selected(&self, i: usize) -> bool {
        self.conns[i]
            .as_ref()
            .is_some_and(|c| c.negotiated.allocation_context.is_some())
    }

    fn violation(&mut self, i: usize) {
        self.stats.protocol_violations += 1;
        if let Some(conn) = self.conns[i].as_mut() {
            conn.dead = true;
            conn.closing = true;
            conn.inbuf.clear();
        }
    }

    /// Checks a request and hands it to the device, or answers it at once.
    fn dispatch(&mut self, i: usize, r: Request, payload: &[u8]) {
        use protocol::*;
        let modifies = matches!(r.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
        let in_range = r
            .offset
            .checked_add(u64::from(r.length))
            .is_some_and(|end| end <= self.export.size_bytes);
        let min = u64::from(self.export.min_block_bytes);
        let aligned = r.offset.is_multiple_of(min) && u64::from(r.length).is_multiple_of(min);
        let error = match r.command {
            CMD_DISC => {
                if let Some(conn) = self.conns[i].as_mut() {
                    conn.closing = true;
                }
                return;
            }
            CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_CACHE | CMD_BLOCK_STATUS
                if !in_range =>
            {
                EINVAL
            }
            CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_BLOCK_STATUS if !aligned => EINVAL,
            CMD_READ | CMD_WRITE if r.length > self.export.max_payload_bytes => EOVERFLOW,
            CMD_BLOCK_STATUS if r.length == 0 || !self.allocation_selected(i) => EINVAL,
            _ if modifies && self.read_only => EPERM,
            CMD_TRIM if self.export.transmission_flags & TFLAG_SEND_TRIM == 0 => ENOTSUP,
            CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_WRITE_ZEROES | CMD_CACHE | CMD_BLOCK_STATUS => {
                0
            }
            _ => EINVAL,
        };
        if error != 0 {
            if r.command == CMD_BLOCK_STATUS && self.structured(i) {
                // A block-status reply must be structured, errors included.
                self.stats.errors += 1;
                if let Some(conn) = self.conns[i].as_mut() {
                    protocol::structured_error(
                        &mut conn.outbuf,
                        error,
                        r.cookie,
                        "invalid block-status request",
                    );
                }
                self.write_out(i);
            } else {
                self.reply(i, error, &r, None, 0);
            }
            return;
        }
        if r.command == CMD_BLOCK_STATUS {
            self.block_status(i, &r);
            return;
        }
        if r.command == CMD_CACHE || (r.length == 0 && r.command != CMD_FLUSH) {
            self.reply(i, 0, &r, None, 0);
            return;
        }
        let slot = self.free.pop().expect("parse checked a free slot");
        let (op, offset, len, stage) = match r.command {
            CMD_READ => {
                self.stats.reads += 1;
                (Op::Read, r.offset, u64::from(r.length), Stage::Main)
            }
            CMD_WRITE => {
                self.stats.writes += 1;
                self.device.buffer_mut(slot)[..payload.len()].copy_from_slice(payload);
                (Op::Write, r.offset, u64::from(r.length), Stage::Main)
            }
            CMD_FLUSH => {
                self.stats.flushes += 1;
                (Op::Flush, 0, 0, Stage::Main)
            }
            CMD_TRIM => {
                self.stats.trims += 1;
                (Op::Discard, r.offset, u64::from(r.length), Stage::Main)
            }
            _ => {
                self.stats.write_zeroes += 1;
                let end = r.offset + u64::from(r.length);
                let len = (end - r.offset).min(u64::from(self.export.max_payload_bytes));
                let buf = self.device.buffer_mut(slot);
                buf[..len as usize].fill(0);
                (
                    Op::Write,
                    r.offset,
                    len,
                    Stage::Zeroing {
                        next: r.offset + len,
                        end,
                    },
                )
            }
        };
        if r.flags & CMD_FLAG_FUA != 0 && modifies {
            self.stats.fua_writes += 1;
        }
        self.pending[slot as usize] = Some(Pending {
            conn: i,
            request: r,
            stage,
            op_len: len,
        });
        if let Some(conn) = self.conns[i].as_mut() {
            conn.in_flight += 1;
        }
        self.submit(slot, op, offset, len);
    }

    fn submit(&mut self, slot: u32, op: Op, offset: u64, len: u64) {
        if let Some(p) = self.pending[slot as usize].as_mut() {
            p.op_len = len;
        }
        let io = Io {
            op,
            offset,
            len,
            slot,
            tag: 0,
        };
        match self.device.submit(&[io]) {
            Ok(1) => {}
            // The device refused it outright: the client hears EIO, the server goes on.
            Ok(_) | Err(_) => self.finish(slot, protocol::EIO, None),
        }
    }

    fn reap(&mut self, wait_ns: u64) -> Result<(), ServeError> {
        let deadline = self.device.now_ns() + wait_ns;
        let mut out = std::mem::take(&mut self.completions);
        out.clear();
        self.device.reap(1, Some(deadline), &mut out)?;
        for c in out.drain(..) {
            self.completed(c);
        }
        self.completions = out;
        Ok(())
    }

    fn completed(&mut self, c: Completion) {
        let Some(p) = self.pending[c.slot as usize] else {
            panic!("a completion for slot {} with no request", c.slot);
        };
        let failed = c.result < 0 || (c.op != Op::Flush && c.result != p.op_len as i64);
        if failed {
            let errno = if c.result < 0 { (-c.result) as i32 } else { 5 };
            self.finish(c.slot, protocol::nbd_error(errno), None);
            return;
        }
        let fua = p.request.flags & protocol::CMD_FLAG_FUA != 0;
        match p.stage {
            Stage::Zeroing { next, end } if next < end => {
                let len = (end - next).min(u64::from(self.export.max_payload_bytes));
                self.pending[c.slot as usize] = Some(Pending {
                    stage: Stage::Zeroing {
                        next: next + len,
                        end,
                    },
                    ..p
                });
                self.submit(c.slot, Op::Write, next, len);
            }
            Stage::Main | Stage::Zeroing { .. } if fua && c.op != Op::Flush => {
                self.pending[c.slot as usize] = Some(Pending {
                    stage: Stage::FuaFlush,
                    ..p
                });
                self.submit(c.slot, Op::Flush, 0, 0);
            }
            _ => {
                let data = (p.request.command == protocol::CMD_READ).then_some(0..p.request.length as usize);
                if let Some(range) = &data {
                    self.stats.bytes_read += range.len() as u64;
                }
                if p.request.command == protocol::CMD_WRITE {
                    self.stats.bytes_written += u64::from(p.request.length);
                }
                self.finish(c.slot, 0, data);
            }
        }
    }

    fn finish(&mut self, slot: u32, error: u32, data: Option<std::ops::Range<usize>>) {
        let p = self.pending[slot as usize]
            .take()
            .expect("a finished request was pending");
        if let Some(conn) = self.conns[p.conn].as_mut() {
            conn.in_flight -= 1;
        }
        self.reply(p.conn, error, &p.request, data, slot);
        self.free.push(slot);
    }

    /// Closes connections that are done: closing, nothing in flight, replies written (or undeliverable).
    fn drop_finished(&mut self) {
        for conn in &mut self.conns {
            if conn.as_ref().is_some_and(|c| {
                let unparsed = !c.dead && !self.stopping && c.inbuf.len() >= REQUEST_BYTES;
                c.closing && c.in_flight == 0 && !unparsed && (c.outbuf.is_empty() || c.dead)
            }) {
                *conn = None;
            }
        }
    }

    /// Stops taking requests, finishes those in flight and delivers their replies, then flushes the device
    /// (a cache destages everything first).
    fn shut_down(&mut self) -> Result<(), ServeError> {
        self.stopping = true;
        for conn in self.conns.iter_mut().flatten() {
            conn.closing = true;
        }
        let until = Instant::now() + Duration::from_secs(30);
        while self.device.in_flight() > 0 {
            self.reap(1_000_000)?;
        }
        while self
            .conns
            .iter()
            .flatten()
            .any(|c| !c.outbuf.is_empty() && !c.dead)
            && Instant::now() < until
        {
            self.poll(None, 100)?;
            self.service_sockets();
        }
        self.conns.clear();
        let slot = self
            .free
            .pop()
            .expect("every slot is free when nothing is in flight");
        self.device.submit(&[Io {
            op: Op::Flush,
            offset: 0,
            len: 0,
            slot,
            tag: 0,
        }])?;
        let mut out = Vec::new();
        while self.device.in_flight() > 0 {
            self.device.reap(1, None, &mut out)?;
        }
        self.free.push(slot);
        match out.iter().find(|c| c.slot == slot) {
            Some(c) if c.result < 0 => Err(ServeError::Io {
                what: "the final flush",
                cause: io::Error::from_raw_os_error((-c.result) as i32),
            }),
            Some(_) => Ok(()),
            None => unreachable!("the final flush completed"),
        }
    }
}
