//! A minimal blocking NBD client: fixed newstyle, `NBD_OPT_EXPORT_NAME`, simple replies, one request at a time.
//! It exists so this crate's tests and the app's whole-command tests can talk to a server in-process without
//! the Debian clients installed; the real clients (nbdcopy, qemu-io, nbdinfo) test the server from outside.
//!
//! It owns nothing but its stream, and it must never grow into a general client: no TLS, no structured
//! replies, no block-size negotiation (so any offset and length go), no pipelining.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

use crate::protocol::{self, Request};

/// A connected client after `NBD_OPT_EXPORT_NAME` for the default export.
pub struct Client {
    stream: UnixStream,
    size_bytes: u64,
    cookie: u64,
}

/// A reply: the NBD error (0 for success) and, for a successful read, its data.
pub type Reply = (u32, Vec<u8>);

fn broken(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn be_u64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes[..8].try_into().expect("eight bytes"))
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().expect("four bytes"))
}

impl Client {
    /// Does the handshake on a connected stream and asks for the default export.
    pub fn handshake(mut stream: UnixStream) -> io::Result<Client> {
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello)?;
        if be_u64(&hello) != protocol::NBDMAGIC {
            return Err(broken("the server's greeting lacks NBDMAGIC".into()));
        }
        let flags = u32::from(protocol::FLAG_FIXED_NEWSTYLE | protocol::FLAG_NO_ZEROES);
        let mut out = flags.to_be_bytes().to_vec();
        out.extend_from_slice(&protocol::IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&protocol::OPT_EXPORT_NAME.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        stream.write_all(&out)?;
        let mut export = [0u8; 10];
        stream.read_exact(&mut export)?;
        Ok(Client {
            stream,
            size_bytes: be_u64(&export),
            cookie: 0,
        })
    }

    /// The export's size as the server announced it.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Sends one request (with its payload, for a write); returns its cookie.
    pub fn send(
        &mut self,
        command: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> io::Result<u64> {
        self.cookie += 1;
        let request = Request {
            flags,
            command,
            cookie: self.cookie,
            offset,
            length,
        };
        self.stream.write_all(&request.encode())?;
        self.stream.write_all(payload)?;
        Ok(self.cookie)
    }

    /// Reads one simple reply, which must answer `cookie`; `read_len` is the data that follows a successful read.
    pub fn reply(&mut self, cookie: u64, read_len: usize) -> io::Result<Reply> {
        let mut header = [0u8; 16];
        self.stream.read_exact(&mut header)?;
        if be_u32(&header) != protocol::SIMPLE_REPLY_MAGIC {
            return Err(broken("a reply without the simple reply's magic".into()));
        }
        let error = be_u32(&header[4..]);
        let answered = be_u64(&header[8..]);
        if answered != cookie {
            return Err(broken(format!("a reply to cookie {answered}, {cookie} expected")));
        }
        let mut data = vec![0; if error == 0 { read_len } else { 0 }];
        self.stream.read_exact(&mut data)?;
        Ok((error, data))
    }

    pub fn read(&mut self, offset: u64, len: u32) -> io::Result<Reply> {
        let cookie = self.send(protocol::CMD_READ, 0, offset, len, &[])?;
        self.reply(cookie, len as usize)
    }

    /// Writes `data` at `offset`; returns the NBD error (0: written).
    pub fn write(&mut self, offset: u64, data: &[u8], flags: u16) -> io::Result<u32> {
        let len = u32::try_from(data.len()).map_err(|_| broken("a write over 4 GiB".into()))?;
        let cookie = self.send(protocol::CMD_WRITE, flags, offset, len, data)?;
        Ok(self.reply(cookie, 0)?.0)
    }

    /// Flushes; returns the NBD error (0: what was written is durable).
    pub fn flush(&mut self) -> io::Result<u32> {
        let cookie = self.send(protocol::CMD_FLUSH, 0, 0, 0, &[])?;
        Ok(self.reply(cookie, 0)?.0)
    }

    /// Says goodbye (the server sends no reply).
    pub fn disconnect(mut self) -> io::Result<()> {
        self.send(protocol::CMD_DISC, 0, 0, 0, &[]).map(|_| ())
    }
}
