//! The NBD wire protocol as the server speaks it: its numbers, what an export and a negotiated connection look
//! like, request headers, and simple and structured replies. Pure encoding and decoding over byte buffers; it
//! keeps no state and never touches a socket or a device (the handshake's state machine is
//! [`crate::negotiation`]).
//!
//! Facts from the NBD protocol document (doc/proto.md of the NBD project): magic numbers, option and command
//! numbers, transmission flags and error values below.

use std::io;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;

pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = (1 << 31) + 8;

pub const INFO_EXPORT: u16 = 0;
pub const INFO_BLOCK_SIZE: u16 = 3;

pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub const TFLAG_SEND_CACHE: u16 = 1 << 10;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// The one metadata context served, and the id it gets when a client selects it.
pub const CONTEXT_BASE_ALLOCATION: &str = "base:allocation";
pub const ALLOCATION_CONTEXT_ID: u32 = 1;
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// The NBD error value for an errno from the device (the protocol has a small fixed set).
pub fn nbd_error(errno: i32) -> u32 {
    match errno as u32 {
        EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN => errno as u32,
        // EROFS, EACCES: a write the device refuses.
        30 | 13 => EPERM,
        // EOPNOTSUPP is ENOTSUP on Linux; EDQUOT and EFBIG are out-of-space errors.
        122 | 27 => ENOSPC,
        _ => EIO,
    }
}

/// The block size constraints a client that did not ask for them may rely on (the protocol's defaults): any
/// byte offset and length, and requests of up to 32 MiB.
pub const DEFAULT_MIN_BLOCK_BYTES: u32 = 1;
pub const DEFAULT_PREFERRED_BLOCK_BYTES: u32 = 4096;
pub const DEFAULT_MAX_PAYLOAD_BYTES: u32 = 32 << 20;

/// What an export looks like to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    pub name: String,
    pub size_bytes: u64,
    pub transmission_flags: u16,
    pub min_block_bytes: u32,
    pub preferred_block_bytes: u32,
    pub max_payload_bytes: u32,
}

/// What a client negotiated for its transmission phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// The client asked for (and so will honour) the export's block size constraints; one that did not is
    /// served the protocol's defaults ([`DEFAULT_MIN_BLOCK_BYTES`], [`DEFAULT_MAX_PAYLOAD_BYTES`]).
    pub block_sizes: bool,
    /// Structured replies: reads are answered in chunks, and BLOCK_STATUS is possible.
    pub structured: bool,
    /// The id of `base:allocation` if the client selected it for this export.
    pub allocation_context: Option<u32>,
}

/// Why a connection ended before or outside the protocol's rules.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the client broke the protocol: {0}")]
    Violation(String),
}

/// One request header of the transmission phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

pub const REQUEST_BYTES: usize = 28;

impl Request {
    /// Decodes a header; an error when its magic is wrong (the stream cannot be resynchronised).
    pub fn decode(b: &[u8; REQUEST_BYTES]) -> Result<Request, ProtocolError> {
        let magic = u32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError::Violation(format!("request magic {magic:#x}")));
        }
        Ok(Request {
            flags: u16::from_be_bytes(b[4..6].try_into().expect("2 bytes")),
            command: u16::from_be_bytes(b[6..8].try_into().expect("2 bytes")),
            cookie: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
            offset: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
            length: u32::from_be_bytes(b[24..28].try_into().expect("4 bytes")),
        })
    }

    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        let mut b = [0; REQUEST_BYTES];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.command.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }
}

/// Appends a simple reply header (and nothing else) to `out`.
pub fn simple_reply(out: &mut Vec<u8>, error: u32, cookie: u64) {
    out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
}

/// Appends the header of a structured reply chunk whose payload (`payload_bytes` long) the caller appends next.
pub fn structured_header(out: &mut Vec<u8>, flags: u16, kind: u16, cookie: u64, payload_bytes: u32) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&payload_bytes.to_be_bytes());
}

/// Appends a final structured error chunk with a message for a human.
pub fn structured_error(out: &mut Vec<u8>, error: u32, cookie: u64, message: &str) {
    let mut end = message.len().min(4096);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let message = &message.as_bytes()[..end];
    structured_header(
        out,
        REPLY_FLAG_DONE,
        REPLY_TYPE_ERROR,
        cookie,
        6 + message.len() as u32,
    );
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_a_bad_magic_is_refused() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 0xdead_beef,
            offset: 4096,
            length: 512,
        };
        assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        let mut bad = r.encode();
        bad[0] ^= 1;
        assert!(Request::decode(&bad).is_err());
    }

    #[test]
    fn a_long_error_message_is_cut_on_a_character_boundary() {
        let mut out = Vec::new();
        let message = "é".repeat(3000);
        structured_error(&mut out, EIO, 7, &message);
        let len = u16::from_be_bytes(out[24..26].try_into().unwrap()) as usize;
        assert!(len <= 4096 && std::str::from_utf8(&out[26..26 + len]).is_ok());
        assert_eq!(out.len(), 26 + len);
    }
}
