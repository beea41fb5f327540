//! One client connection: its socket, what it has sent that is not yet used, what it is owed and has not yet
//! taken, and where it is in the protocol.
//!
//! It owns the connection's buffers and the rules that keep them bounded: input is read only while the
//! connection may take its next request (back-pressure reaches the client through its socket), output it does
//! not read stops the connection's new requests, and its buffers shrink once a large request has passed. It
//! never touches the device: the server decides what a request becomes.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::negotiation::Negotiation;
use crate::output::{Output, SendError};
use crate::protocol::{Negotiated, REQUEST_BYTES, Request};

/// A connection stops taking requests while this many bytes are owed to it (replies not yet sent, read data
/// still at the device, write data held): a client that does not read its replies holds this much and one
/// request more, and is no longer read.
pub const BACKLOG_LIMIT_BYTES: usize = 8 << 20;
/// Buffers larger than this are given back once empty (a large request has passed).
const SHRINK_ABOVE_BYTES: usize = 1 << 20;

pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(true),
            Stream::Tcp(s) => s.set_nonblocking(true),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
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

/// Where a connection is in the protocol.
pub enum Phase {
    /// Option haggling (which the server ends at its deadline).
    Negotiating(Box<Negotiation>),
    Transmission(Negotiated),
}

pub struct Conn {
    pub stream: Stream,
    pub phase: Phase,
    /// Bytes received and not yet used.
    pub inbuf: Vec<u8>,
    /// What is owed to the client and not yet sent, in order.
    pub out: Output,
    /// Why the page-cache file could not give a reply's bytes, which ended the connection, and the read replies
    /// that ended with it (how many, their bytes): the server counts them when it closes the connection.
    pub cut_short: Option<(io::Error, u64, u64)>,
    /// Requests of this connection the server holds (at the device, or waiting for it).
    pub in_flight: usize,
    /// Bytes the requests in flight will add to the output (reads) or hold meanwhile (write data).
    pub owed: usize,
    /// Bytes of a refused write's payload still to be read and thrown away.
    pub skip: u64,
    /// The client hung up its side, sent NBD_CMD_DISC, or ended the negotiation: nothing more is read.
    pub read_closed: bool,
    /// The socket failed or the client broke the protocol: nothing more is read, used or sent.
    pub dead: bool,
    /// The client can no longer receive (it hung up both ways, or a send failed): replies are dropped, but
    /// complete requests it sent before are still carried out (a write it did not wait for may still land).
    pub gone: bool,
    /// Its first complete request is waiting for a device slot or for the backlog to shrink: read no more.
    pub stalled: bool,
    /// The readiness the event loop watches for: (readable, writable); None once the socket is no longer
    /// watched at all (a socket whose peer is gone would be reported on every turn).
    pub watching: Option<(bool, bool)>,
    /// Listed for a look at the end of the event loop's turn.
    pub touched: bool,
    /// In the server's queue for a device slot.
    pub waiting_for_slot: bool,
}

impl Conn {
    pub fn new(stream: Stream, phase: Phase, outbuf: Vec<u8>) -> Conn {
        Conn {
            stream,
            phase,
            inbuf: Vec::new(),
            out: Output::new(outbuf),
            cut_short: None,
            in_flight: 0,
            owed: 0,
            skip: 0,
            read_closed: false,
            dead: false,
            gone: false,
            stalled: false,
            watching: Some((true, true)),
            touched: false,
            waiting_for_slot: false,
        }
    }

    pub fn negotiated(&self) -> Option<&Negotiated> {
        match &self.phase {
            Phase::Transmission(n) => Some(n),
            Phase::Negotiating(..) => None,
        }
    }

    pub fn pending_output(&self) -> usize {
        self.out.pending()
    }

    /// What the connection is owed or holds: replies not sent, and what its requests in flight will add.
    pub fn backlog(&self) -> usize {
        self.pending_output() + self.owed
    }

    /// Whether a request that adds `bytes` to the backlog may be taken now: always when nothing is owed (so
    /// one request of any allowed size goes through), otherwise while the backlog stays under the limit.
    pub fn may_take(&self, bytes: usize) -> bool {
        let backlog = self.backlog();
        backlog == 0 || backlog + bytes <= BACKLOG_LIMIT_BYTES
    }

    /// The most input worth holding: a request header and the largest payload, plus one socket read.
    fn input_limit(max_request_bytes: usize, read_chunk: usize) -> usize {
        REQUEST_BYTES + max_request_bytes + read_chunk
    }

    /// Whether the event loop should wait for this socket to be readable.
    pub fn wants_input(&self, max_request_bytes: usize, read_chunk: usize) -> bool {
        !self.read_closed
            && !self.dead
            && !self.stalled
            && self.inbuf.len() < Self::input_limit(max_request_bytes, read_chunk)
    }

    /// Reads what the socket has (up to a few chunks, so one busy client does not hold the loop), into
    /// `inbuf`, dropping the bytes of a refused payload. End of input closes reading; an error kills the
    /// connection.
    pub fn read_in(&mut self, chunk: &mut [u8], max_request_bytes: usize) {
        for _ in 0..4 {
            if !self.wants_input(max_request_bytes, chunk.len()) {
                return;
            }
            match self.stream.read(chunk) {
                Ok(0) => {
                    self.read_closed = true;
                    return;
                }
                Ok(n) => {
                    let skipped = (self.skip.min(n as u64)) as usize;
                    self.skip -= skipped as u64;
                    self.inbuf.extend_from_slice(&chunk[skipped..n]);
                    if n < chunk.len() {
                        // A short read emptied the socket for now: asking again would only hear EAGAIN (one
                        // system call a request at QD1). The loop's level-triggered wait says when more comes.
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.kill();
                    return;
                }
            }
        }
    }

    /// Reads everything the client sent before it hung up (the socket holds at most its buffer's worth), so
    /// its complete requests can still be carried out; a client that sent more than `limit` is cut off.
    pub fn read_rest(&mut self, chunk: &mut [u8], limit: usize) {
        while !self.read_closed {
            match self.stream.read(chunk) {
                Ok(0) => self.read_closed = true,
                Ok(n) => {
                    let skipped = (self.skip.min(n as u64)) as usize;
                    self.skip -= skipped as u64;
                    self.inbuf.extend_from_slice(&chunk[skipped..n]);
                    if self.inbuf.len() > limit {
                        self.kill();
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Nothing more (or the socket failed): what was read is all there is.
                Err(_) => self.read_closed = true,
            }
        }
    }

    /// Sends what the socket takes now; `page_cache` is the export's page-cache file, if its reads are that.
    pub fn write_out(&mut self, page_cache: Option<&OwnedFd>) {
        if self.dead || self.gone {
            return;
        }
        match self.out.send(&mut self.stream, page_cache.map(AsFd::as_fd)) {
            Ok(()) => {}
            Err(SendError::Gone) => self.hang_up(),
            Err(SendError::Source(e)) => {
                let (replies, bytes) = self.out.file_ranges();
                self.cut_short = Some((e, replies, bytes));
                self.kill();
            }
        }
    }

    /// Whether replies can still reach the client.
    pub fn can_send(&self) -> bool {
        !self.dead && !self.gone
    }

    /// The client can no longer receive: what is owed to it is dropped.
    pub fn hang_up(&mut self) {
        self.gone = true;
        self.out.clear();
    }

    /// Uses the first `n` bytes of input; gives a large buffer back once it is empty.
    pub fn consume(&mut self, n: usize) {
        self.inbuf.drain(..n);
        if self.inbuf.is_empty() && self.inbuf.capacity() > SHRINK_ABOVE_BYTES {
            self.inbuf = Vec::new();
        }
    }

    /// The socket failed or the client broke the protocol: nothing more is read or sent.
    pub fn kill(&mut self) {
        self.dead = true;
        self.read_closed = true;
        self.inbuf = Vec::new();
        self.out.clear();
        self.skip = 0;
    }

    /// Whether nothing more will happen on this connection: no more input will be used (the client hung up,
    /// and what is left is at most an incomplete request), nothing is in flight, and every reply is sent (or
    /// cannot be).
    pub fn finished(&self, complete_request_waiting: bool) -> bool {
        self.read_closed
            && self.in_flight == 0
            && (self.dead || ((self.gone || self.pending_output() == 0) && !complete_request_waiting))
    }
}

/// Whether `inbuf` starts with a whole request (its payload too, for a write the server will read; a write it
/// refuses is skipped, not buffered, so its header alone is whole).
pub fn complete_request(inbuf: &[u8], payload_of: impl Fn(&Request) -> usize) -> bool {
    let Some(header) = inbuf.get(..REQUEST_BYTES) else {
        return false;
    };
    let header: &[u8; REQUEST_BYTES] = header.try_into().expect("28 bytes");
    match Request::decode(header) {
        // A broken header is complete in its way: it ends the connection.
        Err(_) => true,
        Ok(r) => inbuf.len() >= REQUEST_BYTES + payload_of(&r),
    }
}
