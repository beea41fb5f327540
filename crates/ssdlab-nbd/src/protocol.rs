//! The NBD wire protocol as the server speaks it: the fixed newstyle handshake and option haggling, request
//! headers, and simple replies. Pure encoding and decoding over `Read`/`Write`; it keeps no state between
//! calls and never touches a device.
//!
//! Facts from the NBD protocol document (doc/proto.md of the NBD project): magic numbers, option and command
//! numbers, transmission flags and error values below.

use std::io::{self, Read, Write};

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
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

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

/// How the handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The client entered transmission.
    Transmission(Negotiated),
    /// The client ended the negotiation (NBD_OPT_ABORT, or a refused export it gave up on).
    Aborted,
}

/// What a client negotiated for its transmission phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// The client asked for (and so will honour) the block size constraints.
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

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn option_reply(w: &mut impl Write, option: u32, reply: u32, data: &[u8]) -> io::Result<()> {
    let mut m = Vec::with_capacity(20 + data.len());
    m.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&reply.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    w.write_all(&m)
}

fn error_reply(w: &mut impl Write, option: u32, reply: u32, message: &str) -> io::Result<()> {
    option_reply(w, option, reply, message.as_bytes())
}

/// The most option data a client may send: names and info requests are short.
const MAX_OPTION_BYTES: u32 = 64 << 10;

/// The most options one client may send before it must choose an export.
const MAX_OPTIONS: u32 = 64;

/// Runs the server side of the fixed newstyle handshake for one export, until the client enters
/// transmission or gives up, within `deadline` (checked between options; `stream` should be blocking with a
/// timeout per step).
pub fn handshake(
    stream: &mut (impl Read + Write),
    export: &ExportInfo,
    deadline: std::time::Instant,
) -> Result<Handshake, ProtocolError> {
    let mut greeting = Vec::with_capacity(18);
    greeting.extend_from_slice(&NBDMAGIC.to_be_bytes());
    greeting.extend_from_slice(&IHAVEOPT.to_be_bytes());
    greeting.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    stream.write_all(&greeting)?;
    let client_flags = read_u32(stream)?;
    if client_flags & u32::from(FLAG_FIXED_NEWSTYLE) == 0 {
        return Err(ProtocolError::Violation(
            "the client does not speak fixed newstyle negotiation".into(),
        ));
    }
    let no_zeroes = client_flags & u32::from(FLAG_NO_ZEROES) != 0;
    let mut structured = false;
    // The export a SET_META_CONTEXT selected `base:allocation` for (None: nothing selected).
    let mut allocation_for: Option<String> = None;
    let entered = |structured: bool, allocation_for: &Option<String>, name: &str, block_sizes: bool| {
        let allocation_context = allocation_for
            .as_deref()
            .is_some_and(|selected| same_export(selected, name, &export.name))
            .then_some(ALLOCATION_CONTEXT_ID);
        Negotiated {
            block_sizes,
            structured,
            allocation_context,
        }
    };
    for _ in 0..MAX_OPTIONS {
        if std::time::Instant::now() > deadline {
            return Err(ProtocolError::Violation("the handshake took too long".into()));
        }
        if read_u64(stream)? != IHAVEOPT {
            return Err(ProtocolError::Violation("an option without IHAVEOPT".into()));
        }
        let option = read_u32(stream)?;
        let len = read_u32(stream)?;
        if len > MAX_OPTION_BYTES {
            return Err(ProtocolError::Violation(format!("option data of {len} bytes")));
        }
        let mut data = vec![0; len as usize];
        stream.read_exact(&mut data)?;
        match option {
            OPT_EXPORT_NAME => {
                if String::from_utf8_lossy(&data) != export.name && !data.is_empty() {
                    // This option has no error reply: the only refusal is to hang up.
                    return Ok(Handshake::Aborted);
                }
                let mut m = Vec::with_capacity(10 + 124);
                m.extend_from_slice(&export.size_bytes.to_be_bytes());
                m.extend_from_slice(&export.transmission_flags.to_be_bytes());
                if !no_zeroes {
                    m.extend_from_slice(&[0; 124]);
                }
                stream.write_all(&m)?;
                let name = String::from_utf8_lossy(&data);
                return Ok(Handshake::Transmission(entered(
                    structured,
                    &allocation_for,
                    &name,
                    false,
                )));
            }
            OPT_ABORT => {
                // The reply is optional; a client that already hung up is fine too.
                let _ = option_reply(stream, option, REP_ACK, &[]);
                return Ok(Handshake::Aborted);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    error_reply(stream, option, REP_ERR_INVALID, "NBD_OPT_LIST takes no data")?;
                    continue;
                }
                let mut entry = (export.name.len() as u32).to_be_bytes().to_vec();
                entry.extend_from_slice(export.name.as_bytes());
                option_reply(stream, option, REP_SERVER, &entry)?;
                option_reply(stream, option, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => {
                let Some((name, requests)) = parse_info_request(&data) else {
                    error_reply(stream, option, REP_ERR_INVALID, "malformed NBD_OPT_INFO/GO data")?;
                    continue;
                };
                if !name.is_empty() && name != export.name {
                    let message = format!("no export named '{name}'; this server exports '{}'", export.name);
                    error_reply(stream, option, REP_ERR_UNKNOWN, &message)?;
                    continue;
                }
                let mut info = INFO_EXPORT.to_be_bytes().to_vec();
                info.extend_from_slice(&export.size_bytes.to_be_bytes());
                info.extend_from_slice(&export.transmission_flags.to_be_bytes());
                option_reply(stream, option, REP_INFO, &info)?;
                // Block sizes are always sent, asked for or not, so a client can learn why it is refused.
                let mut sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                sizes.extend_from_slice(&export.min_block_bytes.to_be_bytes());
                sizes.extend_from_slice(&export.preferred_block_bytes.to_be_bytes());
                sizes.extend_from_slice(&export.max_payload_bytes.to_be_bytes());
                option_reply(stream, option, REP_INFO, &sizes)?;
                let block_sizes = requests.contains(&INFO_BLOCK_SIZE);
                if !block_sizes && export.min_block_bytes > 1 {
                    let message = format!(
                        "this export needs {}-byte aligned requests: ask for NBD_INFO_BLOCK_SIZE",
                        export.min_block_bytes
                    );
                    error_reply(stream, option, REP_ERR_BLOCK_SIZE_REQD, &message)?;
                    continue;
                }
                option_reply(stream, option, REP_ACK, &[])?;
                if option == OPT_GO {
                    return Ok(Handshake::Transmission(entered(
                        structured,
                        &allocation_for,
                        &name,
                        block_sizes,
                    )));
                }
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    error_reply(
                        stream,
                        option,
                        REP_ERR_INVALID,
                        "NBD_OPT_STRUCTURED_REPLY takes no data",
                    )?;
                    continue;
                }
                structured = true;
                option_reply(stream, option, REP_ACK, &[])?;
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                if !structured {
                    let message =
                        "metadata contexts need structured replies: send NBD_OPT_STRUCTURED_REPLY first";
                    error_reply(stream, option, REP_ERR_INVALID, message)?;
                    continue;
                }
                let Some((name, queries)) = parse_meta_context_request(&data) else {
                    error_reply(
                        stream,
                        option,
                        REP_ERR_INVALID,
                        "malformed metadata context request",
                    )?;
                    continue;
                };
                let listing = option == OPT_LIST_META_CONTEXT;
                if !same_export(&name, &export.name, &export.name) {
                    if !listing {
                        // A refused selection replaces the earlier one with nothing.
                        allocation_for = None;
                    }
                    let message = format!("no export named '{name}'; this server exports '{}'", export.name);
                    error_reply(stream, option, REP_ERR_UNKNOWN, &message)?;
                    continue;
                }
                // `base:` is a wildcard when listing and selects nothing when setting; unknown names are
                // ignored, as the protocol requires.
                let matches = queries.is_empty() && listing
                    || queries
                        .iter()
                        .any(|q| q == CONTEXT_BASE_ALLOCATION || (listing && q == "base:"));
                if !listing {
                    allocation_for = matches.then(|| name.clone());
                }
                if matches {
                    let id = if listing { 0 } else { ALLOCATION_CONTEXT_ID };
                    let mut reply = id.to_be_bytes().to_vec();
                    reply.extend_from_slice(CONTEXT_BASE_ALLOCATION.as_bytes());
                    option_reply(stream, option, REP_META_CONTEXT, &reply)?;
                }
                option_reply(stream, option, REP_ACK, &[])?;
            }
            _ => {
                // STARTTLS and extended headers: not offered.
                let reply = if option == 5 {
                    REP_ERR_POLICY
                } else {
                    REP_ERR_UNSUP
                };
                error_reply(stream, option, reply, "not supported by ssdlab serve")?;
            }
        }
    }
    Err(ProtocolError::Violation(format!(
        "more than {MAX_OPTIONS} options"
    )))
}

fn parse_info_request(data: &[u8]) -> Option<(String, Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let name = std::str::from_utf8(data.get(4..4 + name_len)?).ok()?.to_string();
    let rest = data.get(4 + name_len..)?;
    let count = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let list = rest.get(2..2 + 2 * count)?;
    if rest.len() != 2 + 2 * count {
        return None;
    }
    Some((
        name,
        list.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect(),
    ))
}

/// Whether an export name a client sent names this server's export (the empty name means the default).
fn same_export(a: &str, b: &str, export: &str) -> bool {
    let canonical = |n: &str| {
        if n.is_empty() {
            export.to_string()
        } else {
            n.to_string()
        }
    };
    canonical(a) == canonical(b)
}

/// Parses the data of NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: the export name and the queries.
fn parse_meta_context_request(data: &[u8]) -> Option<(String, Vec<String>)> {
    fn string(data: &[u8], at: &mut usize) -> Option<String> {
        let len = u32::from_be_bytes(data.get(*at..*at + 4)?.try_into().ok()?) as usize;
        let s = std::str::from_utf8(data.get(*at + 4..*at + 4 + len)?)
            .ok()?
            .to_string();
        *at += 4 + len;
        Some(s)
    }
    let mut at = 0;
    let name = string(data, &mut at)?;
    let count = u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?);
    at += 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        queries.push(string(data, &mut at)?);
    }
    (at == data.len()).then_some((name, queries))
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

    /// A client's bytes in, the server's bytes out.
    struct Duplex {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn option(out: &mut Vec<u8>, option: u32, data: &[u8]) {
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&option.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
    }

    fn meta_query(name: &str, queries: &[&str]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for q in queries {
            d.extend_from_slice(&(q.len() as u32).to_be_bytes());
            d.extend_from_slice(q.as_bytes());
        }
        d
    }

    /// The option replies in the server's output after the 18-byte greeting: (option, reply type, data).
    fn replies(output: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut at = 18;
        let mut out = Vec::new();
        while at + 20 <= output.len() {
            let option = u32::from_be_bytes(output[at + 8..at + 12].try_into().unwrap());
            let kind = u32::from_be_bytes(output[at + 12..at + 16].try_into().unwrap());
            let len = u32::from_be_bytes(output[at + 16..at + 20].try_into().unwrap()) as usize;
            out.push((option, kind, output[at + 20..at + 20 + len].to_vec()));
            at += 20 + len;
        }
        out
    }

    #[test]
    fn block_status_is_negotiated_only_after_structured_replies_and_only_for_this_export() {
        let export = ExportInfo {
            name: "disk".into(),
            size_bytes: 1 << 20,
            transmission_flags: TFLAG_HAS_FLAGS,
            min_block_bytes: 512,
            preferred_block_bytes: 4096,
            max_payload_bytes: 1 << 20,
        };
        let mut client = 3u32.to_be_bytes().to_vec();
        option(
            &mut client,
            OPT_SET_META_CONTEXT,
            &meta_query("disk", &[CONTEXT_BASE_ALLOCATION]),
        );
        option(&mut client, OPT_STRUCTURED_REPLY, &[]);
        option(&mut client, OPT_LIST_META_CONTEXT, &meta_query("", &["base:"]));
        option(
            &mut client,
            OPT_SET_META_CONTEXT,
            &meta_query("other", &[CONTEXT_BASE_ALLOCATION]),
        );
        option(
            &mut client,
            OPT_SET_META_CONTEXT,
            &meta_query("", &["base:", "x-unknown:thing", CONTEXT_BASE_ALLOCATION]),
        );
        let mut go = 4u32.to_be_bytes().to_vec();
        go.extend_from_slice(b"disk");
        go.extend_from_slice(&1u16.to_be_bytes());
        go.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        option(&mut client, OPT_GO, &go);
        let mut stream = Duplex {
            input: std::io::Cursor::new(client),
            output: Vec::new(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let outcome = handshake(&mut stream, &export, deadline).unwrap();
        assert_eq!(
            outcome,
            Handshake::Transmission(Negotiated {
                block_sizes: true,
                structured: true,
                allocation_context: Some(ALLOCATION_CONTEXT_ID),
            })
        );
        let r = replies(&stream.output);
        let context = |id: u32| {
            let mut d = id.to_be_bytes().to_vec();
            d.extend_from_slice(CONTEXT_BASE_ALLOCATION.as_bytes());
            d
        };
        // Before structured replies: refused.
        assert_eq!((r[0].0, r[0].1), (OPT_SET_META_CONTEXT, REP_ERR_INVALID));
        assert_eq!((r[1].0, r[1].1), (OPT_STRUCTURED_REPLY, REP_ACK));
        // Listing with the wildcard names the context (id 0 when listing).
        assert_eq!(r[2], (OPT_LIST_META_CONTEXT, REP_META_CONTEXT, context(0)));
        assert_eq!((r[3].0, r[3].1), (OPT_LIST_META_CONTEXT, REP_ACK));
        // Another export's name: unknown.
        assert_eq!((r[4].0, r[4].1), (OPT_SET_META_CONTEXT, REP_ERR_UNKNOWN));
        // The wildcard and unknown names select nothing; base:allocation is selected once.
        assert_eq!(
            r[5],
            (
                OPT_SET_META_CONTEXT,
                REP_META_CONTEXT,
                context(ALLOCATION_CONTEXT_ID)
            )
        );
        assert_eq!((r[6].0, r[6].1), (OPT_SET_META_CONTEXT, REP_ACK));
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

    #[test]
    fn meta_context_requests_parse_and_trailing_bytes_do_not() {
        let mut data = 0u32.to_be_bytes().to_vec();
        data.extend_from_slice(&2u32.to_be_bytes());
        for q in ["base:allocation", "qemu:dirty-bitmap:x"] {
            data.extend_from_slice(&(q.len() as u32).to_be_bytes());
            data.extend_from_slice(q.as_bytes());
        }
        assert_eq!(
            parse_meta_context_request(&data),
            Some((
                String::new(),
                vec!["base:allocation".into(), "qemu:dirty-bitmap:x".into()]
            ))
        );
        let mut longer = data.clone();
        longer.push(0);
        assert_eq!(parse_meta_context_request(&longer), None);
        assert_eq!(parse_meta_context_request(&data[..data.len() - 1]), None);
        assert!(same_export("", "disk", "disk") && !same_export("other", "disk", "disk"));
    }

    #[test]
    fn info_requests_parse_and_truncated_ones_do_not() {
        let mut data = 3u32.to_be_bytes().to_vec();
        data.extend_from_slice(b"abc");
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(
            parse_info_request(&data),
            Some(("abc".into(), vec![INFO_BLOCK_SIZE]))
        );
        assert_eq!(parse_info_request(&data[..data.len() - 1]), None);
        assert_eq!(parse_info_request(&[0, 0, 0, 9, b'x']), None);
    }
}
