//! A connection's output: the bytes and the page-cache ranges owed to the client, in the order they go.
//!
//! It owns that order and the sending. Replies are written as bytes at the end (`bytes`); a read from an
//! export whose reads are its file's page cache ([`ssdlab_core::Device::page_cache`]) puts its data in as a
//! range of that file instead (`file_range`), which goes to the socket with sendfile: the kernel hands the
//! socket the page-cache pages, so the server copies none of the data (through a slot's buffer and the
//! output, a 256 KiB read cost two copies on the server's one thread: 0.24-0.52x nbdkit's nbdcopy speed).
//!
//! It must never send anything out of order, and never leave a reply short: a range whose header promised
//! its bytes either goes whole or the send fails ([`SendError::Source`]) and the connection is ended, so the
//! client sees a broken connection rather than a reply with the wrong bytes. It never judges what is sent.
//!
//! Whether a range is in the page cache is judged when its read is answered, not again when it is sent: a page
//! evicted between the two (memory pressure while a slow client keeps its reply waiting) is read from the
//! medium inside sendfile, which then holds up the event loop for that read. sendfile on a socket whose peer
//! is gone raises SIGPIPE, which Rust's runtime ignores in every binary: the error comes back as EPIPE.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Write};
use std::os::fd::BorrowedFd;

use crate::conn::Stream;

/// The tail's buffer is given back once empty if it grew past this (a large reply has passed).
const SHRINK_ABOVE_BYTES: usize = 1 << 20;
/// The most one sendfile call is asked for (the kernel's own limit is just under 2 GiB).
const SENDFILE_MAX_BYTES: u64 = 1 << 30;

/// What goes ahead of the bytes being written.
enum Segment {
    /// Bytes, sent from `at` on.
    Bytes { buf: Vec<u8>, at: usize },
    /// A range of the page-cache file, sent from `offset` on; `reply_bytes` is its whole length.
    File { offset: u64, len: u64, reply_bytes: u64 },
}

/// Why sending stopped short.
#[derive(Debug)]
pub enum SendError {
    /// The socket failed: the client can no longer receive (its complete requests are still carried out).
    Gone,
    /// The file could not give a range's bytes (an I/O error, or it ended before the range did): a reply is
    /// now short and the connection cannot go on.
    Source(io::Error),
}

/// The output, in order: `ahead`, then `tail[tail_at..]`.
pub struct Output {
    ahead: VecDeque<Segment>,
    /// Bytes of `ahead` not yet sent.
    ahead_bytes: usize,
    /// Where replies are written; sent after everything in `ahead`.
    tail: Vec<u8>,
    tail_at: usize,
}

impl Output {
    /// An output that starts with `bytes` (a greeting).
    pub fn new(bytes: Vec<u8>) -> Output {
        Output {
            ahead: VecDeque::new(),
            ahead_bytes: 0,
            tail: bytes,
            tail_at: 0,
        }
    }

    /// Where the next reply's bytes are appended.
    pub fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.tail
    }

    /// Appends `len` bytes of the page-cache file from `offset`, after everything written so far.
    pub fn file_range(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        if self.tail_at < self.tail.len() {
            let buf = std::mem::take(&mut self.tail);
            self.ahead_bytes += buf.len() - self.tail_at;
            self.ahead.push_back(Segment::Bytes {
                buf,
                at: std::mem::take(&mut self.tail_at),
            });
        } else {
            self.tail.clear();
            self.tail_at = 0;
        }
        self.ahead_bytes += usize::try_from(len).expect("a reply's length fits in memory's addresses");
        self.ahead.push_back(Segment::File {
            offset,
            len,
            reply_bytes: len,
        });
    }

    /// Bytes not yet sent.
    pub fn pending(&self) -> usize {
        self.ahead_bytes + self.tail.len() - self.tail_at
    }

    /// The file ranges not yet sent whole: how many, and their whole lengths (the replies they end).
    pub fn file_ranges(&self) -> (u64, u64) {
        self.ahead.iter().fold((0, 0), |(n, bytes), s| match s {
            Segment::File { reply_bytes, .. } => (n + 1, bytes + reply_bytes),
            Segment::Bytes { .. } => (n, bytes),
        })
    }

    /// Drops everything not yet sent.
    pub fn clear(&mut self) {
        self.ahead = VecDeque::new();
        self.ahead_bytes = 0;
        self.tail = Vec::new();
        self.tail_at = 0;
    }

    /// Sends what the socket takes now, in order; `source` is the page-cache file (there whenever a range was
    /// appended). Ok once everything is sent or the socket is full.
    pub fn send(&mut self, socket: &mut Stream, source: Option<BorrowedFd<'_>>) -> Result<(), SendError> {
        while let Some(segment) = self.ahead.front_mut() {
            let (sent, done) = match segment {
                Segment::Bytes { buf, at } => match write(socket, &buf[*at..])? {
                    None => return Ok(()),
                    Some(n) => {
                        *at += n;
                        (n, *at == buf.len())
                    }
                },
                Segment::File { offset, len, .. } => {
                    let source =
                        source.expect("a page-cache range is queued only where the export has its file");
                    let want = (*len).min(SENDFILE_MAX_BYTES) as usize;
                    match rustix::fs::sendfile(socket.fd(), source, Some(offset), want) {
                        // The file ended before the range: the reply's header promised bytes it does not have.
                        Ok(0) => {
                            return Err(SendError::Source(io::Error::new(
                                ErrorKind::UnexpectedEof,
                                "the exported file ended inside a range being read (was it truncated?)",
                            )));
                        }
                        Ok(n) => {
                            *len -= n as u64;
                            (n, *len == 0)
                        }
                        Err(rustix::io::Errno::AGAIN) => return Ok(()),
                        Err(rustix::io::Errno::INTR) => continue,
                        Err(e) if socket_side(e, matches!(socket, Stream::Tcp(_))) => {
                            return Err(SendError::Gone);
                        }
                        // Everything else is the file's (an I/O error, a file system or FUSE daemon that
                        // failed): the reply cannot be finished, and the connection must end rather than
                        // leave the client waiting for it.
                        Err(e) => return Err(SendError::Source(e.into())),
                    }
                }
            };
            self.ahead_bytes -= sent;
            if done {
                self.ahead.pop_front();
            }
        }
        while self.tail_at < self.tail.len() {
            match write(socket, &self.tail[self.tail_at..])? {
                None => break,
                Some(n) => self.tail_at += n,
            }
        }
        if self.tail_at == self.tail.len() {
            self.tail.clear();
            self.tail_at = 0;
            if self.tail.capacity() > SHRINK_ABOVE_BYTES {
                self.tail = Vec::new();
            }
        } else if self.tail_at > SHRINK_ABOVE_BYTES && self.tail_at * 2 > self.tail.len() {
            self.tail.drain(..self.tail_at);
            self.tail_at = 0;
        }
        Ok(())
    }
}

/// Whether sendfile's error is the socket's: the client is gone, as a failed write says. A Unix socket fails
/// only with these three; a TCP socket also with the network's errors. Anything else came from reading the file
/// (which may be any errno: a FUSE daemon that died gives ENOTCONN, an NFS soft mount ETIMEDOUT on a Unix
/// socket's export).
fn socket_side(e: rustix::io::Errno, tcp: bool) -> bool {
    use rustix::io::Errno;
    matches!(e, Errno::PIPE | Errno::CONNRESET | Errno::SHUTDOWN)
        || tcp
            && matches!(
                e,
                Errno::TIMEDOUT
                    | Errno::CONNABORTED
                    | Errno::HOSTUNREACH
                    | Errno::NETUNREACH
                    | Errno::NETDOWN
                    | Errno::NOTCONN
            )
}

/// One write: Some(bytes taken), None when the socket is full.
fn write(socket: &mut Stream, bytes: &[u8]) -> Result<Option<usize>, SendError> {
    loop {
        return match socket.write(bytes) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => Err(SendError::Gone),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    fn pair() -> (Stream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (Stream::Unix(a), b)
    }

    fn file_of(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn bytes_and_file_ranges_go_out_in_the_order_they_were_appended() {
        let file = file_of(b"0123456789abcdef");
        let (mut socket, mut peer) = pair();
        let mut out = Output::new(b"hello ".to_vec());
        out.file_range(10, 6);
        out.bytes().extend_from_slice(b" | ");
        out.file_range(0, 4);
        out.file_range(4, 2);
        out.bytes().extend_from_slice(b"!");
        assert_eq!(out.pending(), 6 + 6 + 3 + 4 + 2 + 1);
        out.send(&mut socket, Some(file.as_fd())).unwrap();
        assert_eq!(out.pending(), 0);
        drop(socket);
        let mut got = String::new();
        peer.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello abcdef | 012345!");
    }

    #[test]
    fn a_full_socket_keeps_the_rest_in_order_for_the_next_send() {
        let data: Vec<u8> = (0..4 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
        let file = file_of(&data);
        let (mut socket, mut peer) = pair();
        let mut out = Output::new(b"head".to_vec());
        out.file_range(0, data.len() as u64);
        out.bytes().extend_from_slice(b"tail");
        let mut got = Vec::new();
        let mut chunk = vec![0; 64 << 10];
        let mut rounds = 0;
        while out.pending() > 0 {
            out.send(&mut socket, Some(file.as_fd())).unwrap();
            let n = peer.read(&mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
            rounds += 1;
        }
        drop(socket);
        peer.read_to_end(&mut got).unwrap();
        assert!(rounds > 1, "4 MiB should not fit one socket buffer");
        assert_eq!(&got[..4], b"head");
        assert!(
            got[4..4 + data.len()] == data[..],
            "the range's bytes arrived changed"
        );
        assert_eq!(&got[4 + data.len()..], b"tail");
    }

    #[test]
    fn a_range_past_the_end_of_the_file_fails_the_send_instead_of_leaving_the_reply_short() {
        let file = file_of(b"short");
        let (mut socket, _peer) = pair();
        let mut out = Output::new(Vec::new());
        out.file_range(2, 10);
        match out.send(&mut socket, Some(file.as_fd())) {
            Err(SendError::Source(e)) => assert_eq!(e.kind(), ErrorKind::UnexpectedEof),
            other => panic!("expected the file's end to fail the send, got {other:?}"),
        }
    }

    #[test]
    fn only_the_sockets_own_errors_say_the_client_is_gone() {
        use rustix::io::Errno;
        for (e, tcp, gone) in [
            (Errno::PIPE, false, true),
            (Errno::CONNRESET, true, true),
            // A dead FUSE daemon or a soft NFS mount under a Unix socket's export: the file's errors.
            (Errno::NOTCONN, false, false),
            (Errno::TIMEDOUT, false, false),
            (Errno::TIMEDOUT, true, true),
            (Errno::IO, true, false),
        ] {
            assert_eq!(
                socket_side(e, tcp),
                gone,
                "{e:?} on a {} socket",
                if tcp { "TCP" } else { "Unix" }
            );
        }
    }

    #[test]
    fn a_peer_that_hung_up_is_gone() {
        let file = file_of(b"data");
        let (mut socket, peer) = pair();
        drop(peer);
        let mut out = Output::new(Vec::new());
        out.file_range(0, 4);
        assert!(matches!(
            out.send(&mut socket, Some(file.as_fd())),
            Err(SendError::Gone)
        ));
    }
}
