//! The fixed newstyle handshake as a state machine without I/O: the server's event loop hands it whatever bytes
//! a client has sent so far and sends whatever it appends to the output, so a client that negotiates slowly,
//! or not at all, holds up nobody but itself.
//!
//! It owns option haggling for one connection (OPT_GO/INFO with export and block-size info, LIST, ABORT,
//! STRUCTURED_REPLY, LIST/SET_META_CONTEXT for `base:allocation`; others ERR_UNSUP) and the refusal of a
//! connection the server has no room for. It never reads a clock or a socket: the hard deadline on the whole
//! handshake is the event loop's.

use crate::protocol::*;

/// The most option data a client may send: names and info requests are short.
pub const MAX_OPTION_BYTES: u32 = 64 << 10;
/// The most options one client may send before it must choose an export.
const MAX_OPTIONS: u32 = 64;
/// The client flags the server knows: anything else ends the connection, as the protocol requires.
const KNOWN_CLIENT_FLAGS: u32 = (FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES) as u32;

/// Where a negotiation stands after the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It needs more bytes from the client.
    Pending,
    /// The client entered transmission with these terms.
    Transmission(Negotiated),
    /// The negotiation is over without an export (the client aborted, or asked for an export by a name that
    /// has no error reply): close once the output is sent.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    ClientFlags,
    Options,
    Done,
}

/// One connection's handshake.
#[derive(Debug)]
pub struct Negotiation {
    state: State,
    no_zeroes: bool,
    structured: bool,
    /// The export a SET_META_CONTEXT selected `base:allocation` for (None: nothing selected).
    allocation_for: Option<String>,
    options: u32,
    /// For a connection over the server's limit: every option is refused with this message.
    refusal: Option<String>,
}

impl Negotiation {
    /// Starts a handshake: appends the server's greeting to `out`. With `refusal`, every option the client
    /// sends is answered with that message as an NBD_REP_ERR_POLICY, so the client can say why it failed.
    pub fn start(out: &mut Vec<u8>, refusal: Option<String>) -> Self {
        out.extend_from_slice(&NBDMAGIC.to_be_bytes());
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
        Negotiation {
            state: State::ClientFlags,
            no_zeroes: false,
            structured: false,
            allocation_for: None,
            options: 0,
            refusal,
        }
    }

    /// Takes what it can of `input` (the client's bytes not yet used), appends its replies to `out`, and
    /// returns how many bytes it used and where the negotiation stands. Bytes after the option that entered
    /// transmission are left unused: they are the client's first requests.
    pub fn advance(
        &mut self,
        export: &ExportInfo,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Outcome), ProtocolError> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.state {
                State::Done => return Ok((used, Outcome::Close)),
                State::ClientFlags => {
                    let Some(flags) = be_u32(rest, 0) else {
                        return Ok((used, Outcome::Pending));
                    };
                    used += 4;
                    if flags & !KNOWN_CLIENT_FLAGS != 0 {
                        return Err(ProtocolError::Violation(format!(
                            "unknown client flags {flags:#x}"
                        )));
                    }
                    if flags & u32::from(FLAG_FIXED_NEWSTYLE) == 0 {
                        return Err(ProtocolError::Violation(
                            "the client does not speak fixed newstyle negotiation".into(),
                        ));
                    }
                    self.no_zeroes = flags & u32::from(FLAG_NO_ZEROES) != 0;
                    self.state = State::Options;
                }
                State::Options => {
                    if rest.len() < 16 {
                        return Ok((used, Outcome::Pending));
                    }
                    let magic = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
                    if magic != IHAVEOPT {
                        return Err(ProtocolError::Violation("an option without IHAVEOPT".into()));
                    }
                    let option = be_u32(rest, 8).expect("16 bytes");
                    let len = be_u32(rest, 12).expect("16 bytes");
                    if len > MAX_OPTION_BYTES {
                        return Err(ProtocolError::Violation(format!("option data of {len} bytes")));
                    }
                    let Some(data) = rest.get(16..16 + len as usize) else {
                        return Ok((used, Outcome::Pending));
                    };
                    used += 16 + len as usize;
                    self.options += 1;
                    if self.options > MAX_OPTIONS {
                        return Err(ProtocolError::Violation(format!(
                            "more than {MAX_OPTIONS} options"
                        )));
                    }
                    let outcome = self.option(export, option, data, out);
                    if outcome != Outcome::Pending {
                        self.state = State::Done;
                        return Ok((used, outcome));
                    }
                }
            }
        }
    }

    /// Answers one option.
    fn option(&mut self, export: &ExportInfo, option: u32, data: &[u8], out: &mut Vec<u8>) -> Outcome {
        if let Some(message) = &self.refusal {
            return match option {
                // This option has no error reply: the only refusal is to hang up.
                OPT_EXPORT_NAME => Outcome::Close,
                OPT_ABORT => {
                    option_reply(out, option, REP_ACK, &[]);
                    Outcome::Close
                }
                _ => {
                    option_reply(out, option, REP_ERR_POLICY, message.as_bytes());
                    Outcome::Pending
                }
            };
        }
        match option {
            OPT_EXPORT_NAME => {
                if !data.is_empty() && String::from_utf8_lossy(data) != export.name {
                    return Outcome::Close;
                }
                out.extend_from_slice(&export.size_bytes.to_be_bytes());
                out.extend_from_slice(&export.transmission_flags.to_be_bytes());
                if !self.no_zeroes {
                    out.extend_from_slice(&[0; 124]);
                }
                let name = String::from_utf8_lossy(data).into_owned();
                Outcome::Transmission(self.entered(export, &name, false))
            }
            OPT_ABORT => {
                option_reply(out, option, REP_ACK, &[]);
                Outcome::Close
            }
            OPT_LIST => {
                if !data.is_empty() {
                    option_reply(out, option, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data");
                    return Outcome::Pending;
                }
                let mut entry = (export.name.len() as u32).to_be_bytes().to_vec();
                entry.extend_from_slice(export.name.as_bytes());
                option_reply(out, option, REP_SERVER, &entry);
                option_reply(out, option, REP_ACK, &[]);
                Outcome::Pending
            }
            OPT_INFO | OPT_GO => self.info_or_go(export, option, data, out),
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    let message = b"NBD_OPT_STRUCTURED_REPLY takes no data";
                    option_reply(out, option, REP_ERR_INVALID, message);
                    return Outcome::Pending;
                }
                self.structured = true;
                option_reply(out, option, REP_ACK, &[]);
                Outcome::Pending
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                self.meta_context(export, option, data, out);
                Outcome::Pending
            }
            _ => {
                // STARTTLS and extended headers: not offered.
                let reply = if option == 5 {
                    REP_ERR_POLICY
                } else {
                    REP_ERR_UNSUP
                };
                option_reply(out, option, reply, b"not supported by ssdlab serve");
                Outcome::Pending
            }
        }
    }

    fn entered(&self, export: &ExportInfo, name: &str, block_sizes: bool) -> Negotiated {
        let allocation_context = self
            .allocation_for
            .as_deref()
            .is_some_and(|selected| same_export(selected, name, &export.name))
            .then_some(ALLOCATION_CONTEXT_ID);
        Negotiated {
            block_sizes,
            structured: self.structured,
            allocation_context,
        }
    }

    fn info_or_go(&mut self, export: &ExportInfo, option: u32, data: &[u8], out: &mut Vec<u8>) -> Outcome {
        let Some((name, requests)) = parse_info_request(data) else {
            option_reply(out, option, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO data");
            return Outcome::Pending;
        };
        if !name.is_empty() && name != export.name {
            let message = format!("no export named '{name}'; this server exports '{}'", export.name);
            option_reply(out, option, REP_ERR_UNKNOWN, message.as_bytes());
            return Outcome::Pending;
        }
        let mut info = INFO_EXPORT.to_be_bytes().to_vec();
        info.extend_from_slice(&export.size_bytes.to_be_bytes());
        info.extend_from_slice(&export.transmission_flags.to_be_bytes());
        option_reply(out, option, REP_INFO, &info);
        // A client that asks for block sizes is held to the export's; one that does not is served the
        // protocol's defaults (any alignment, up to 32 MiB), and is told those, so what it hears is what holds.
        let block_sizes = requests.contains(&INFO_BLOCK_SIZE);
        let (min, preferred, max) = if block_sizes {
            (
                export.min_block_bytes,
                export.preferred_block_bytes,
                export.max_payload_bytes,
            )
        } else {
            (
                DEFAULT_MIN_BLOCK_BYTES,
                DEFAULT_PREFERRED_BLOCK_BYTES,
                DEFAULT_MAX_PAYLOAD_BYTES,
            )
        };
        let mut sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        sizes.extend_from_slice(&min.to_be_bytes());
        sizes.extend_from_slice(&preferred.to_be_bytes());
        sizes.extend_from_slice(&max.to_be_bytes());
        option_reply(out, option, REP_INFO, &sizes);
        option_reply(out, option, REP_ACK, &[]);
        if option == OPT_GO {
            Outcome::Transmission(self.entered(export, &name, block_sizes))
        } else {
            Outcome::Pending
        }
    }

    fn meta_context(&mut self, export: &ExportInfo, option: u32, data: &[u8], out: &mut Vec<u8>) {
        if !self.structured {
            let message = b"metadata contexts need structured replies: send NBD_OPT_STRUCTURED_REPLY first";
            option_reply(out, option, REP_ERR_INVALID, message);
            return;
        }
        let Some((name, queries)) = parse_meta_context_request(data) else {
            option_reply(
                out,
                option,
                REP_ERR_INVALID,
                b"malformed metadata context request",
            );
            return;
        };
        let listing = option == OPT_LIST_META_CONTEXT;
        if !same_export(&name, &export.name, &export.name) {
            if !listing {
                // A refused selection replaces the earlier one with nothing.
                self.allocation_for = None;
            }
            let message = format!("no export named '{name}'; this server exports '{}'", export.name);
            option_reply(out, option, REP_ERR_UNKNOWN, message.as_bytes());
            return;
        }
        // `base:` is a wildcard when listing and selects nothing when setting; unknown names are ignored, as
        // the protocol requires.
        let matches = queries.is_empty() && listing
            || queries
                .iter()
                .any(|q| q == CONTEXT_BASE_ALLOCATION || (listing && q == "base:"));
        if !listing {
            self.allocation_for = matches.then(|| name.clone());
        }
        if matches {
            let id = if listing { 0 } else { ALLOCATION_CONTEXT_ID };
            let mut reply = id.to_be_bytes().to_vec();
            reply.extend_from_slice(CONTEXT_BASE_ALLOCATION.as_bytes());
            option_reply(out, option, REP_META_CONTEXT, &reply);
        }
        option_reply(out, option, REP_ACK, &[]);
    }
}

fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn option_reply(out: &mut Vec<u8>, option: u32, reply: u32, data: &[u8]) {
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

fn parse_info_request(data: &[u8]) -> Option<(String, Vec<u16>)> {
    let name_len = be_u32(data, 0)? as usize;
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
        let len = be_u32(data, *at)? as usize;
        let s = std::str::from_utf8(data.get(*at + 4..*at + 4 + len)?)
            .ok()?
            .to_string();
        *at += 4 + len;
        Some(s)
    }
    let mut at = 0;
    let name = string(data, &mut at)?;
    let count = be_u32(data, at)?;
    at += 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        queries.push(string(data, &mut at)?);
    }
    (at == data.len()).then_some((name, queries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> ExportInfo {
        ExportInfo {
            name: "disk".into(),
            size_bytes: 1 << 20,
            transmission_flags: TFLAG_HAS_FLAGS,
            min_block_bytes: 512,
            preferred_block_bytes: 4096,
            max_payload_bytes: 1 << 20,
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

    fn go(name: &str, requests: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
        for r in requests {
            d.extend_from_slice(&r.to_be_bytes());
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

    /// Feeds `client` one byte at a time (the slowest a client can be) and returns the outcome, the bytes left
    /// unused and the server's output.
    fn negotiate_bytewise(
        client: &[u8],
        refusal: Option<String>,
    ) -> (Result<Outcome, String>, usize, Vec<u8>) {
        let mut out = Vec::new();
        let mut n = Negotiation::start(&mut out, refusal);
        let mut buffered = Vec::new();
        for &b in client {
            buffered.push(b);
            match n.advance(&export(), &buffered, &mut out) {
                Err(e) => return (Err(e.to_string()), 0, out),
                Ok((used, outcome)) => {
                    buffered.drain(..used);
                    if outcome != Outcome::Pending {
                        return (Ok(outcome), buffered.len(), out);
                    }
                }
            }
        }
        (Ok(Outcome::Pending), buffered.len(), out)
    }

    #[test]
    fn block_status_is_negotiated_only_after_structured_replies_and_only_for_this_export() {
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
        option(&mut client, OPT_GO, &go("disk", &[INFO_BLOCK_SIZE]));
        let (outcome, left, output) = negotiate_bytewise(&client, None);
        assert_eq!(left, 0);
        assert_eq!(
            outcome,
            Ok(Outcome::Transmission(Negotiated {
                block_sizes: true,
                structured: true,
                allocation_context: Some(ALLOCATION_CONTEXT_ID),
            }))
        );
        let r = replies(&output);
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
        // GO: the export, then the block sizes asked for, then the ACK.
        assert_eq!((r[7].0, r[7].1), (OPT_GO, REP_INFO));
        assert_eq!(&r[8].2[2..6], &512u32.to_be_bytes());
        assert_eq!((r[9].0, r[9].1), (OPT_GO, REP_ACK));
    }

    #[test]
    fn a_client_that_does_not_ask_for_block_sizes_is_served_and_told_the_protocols_defaults() {
        let mut client = 3u32.to_be_bytes().to_vec();
        option(&mut client, OPT_GO, &go("", &[]));
        let (outcome, _, output) = negotiate_bytewise(&client, None);
        assert_eq!(
            outcome,
            Ok(Outcome::Transmission(Negotiated {
                block_sizes: false,
                structured: false,
                allocation_context: None,
            }))
        );
        let r = replies(&output);
        let mut sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        for v in [1u32, 4096, 32 << 20] {
            sizes.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(r[1], (OPT_GO, REP_INFO, sizes));
        assert_eq!((r[2].0, r[2].1), (OPT_GO, REP_ACK));
        // NBD_OPT_EXPORT_NAME: no info at all, the defaults hold too (and without NO_ZEROES, the 124 zeroes).
        let mut client = 1u32.to_be_bytes().to_vec();
        option(&mut client, OPT_EXPORT_NAME, b"disk");
        client.extend_from_slice(b"first request");
        let mut out = Vec::new();
        let mut n = Negotiation::start(&mut out, None);
        let (used, outcome) = n.advance(&export(), &client, &mut out).unwrap();
        assert!(matches!(
            outcome,
            Outcome::Transmission(Negotiated {
                block_sizes: false,
                ..
            })
        ));
        assert_eq!(
            &client[used..],
            b"first request",
            "what follows is left for transmission"
        );
        assert_eq!(out.len(), 18 + 8 + 2 + 124, "size, flags and the zeroes");
    }

    #[test]
    fn unknown_client_flags_oversized_options_and_endless_options_end_the_connection() {
        for flags in [1u32 << 2, 1 << 31, 0] {
            let (outcome, _, _) = negotiate_bytewise(&flags.to_be_bytes(), None);
            assert!(outcome.is_err(), "client flags {flags:#x}: {outcome:?}");
        }
        let mut client = 1u32.to_be_bytes().to_vec();
        client.extend_from_slice(&IHAVEOPT.to_be_bytes());
        client.extend_from_slice(&OPT_LIST.to_be_bytes());
        client.extend_from_slice(&(MAX_OPTION_BYTES + 1).to_be_bytes());
        let (outcome, _, _) = negotiate_bytewise(&client, None);
        assert!(outcome.is_err(), "{outcome:?}");
        let mut client = 1u32.to_be_bytes().to_vec();
        for _ in 0..=MAX_OPTIONS {
            option(&mut client, OPT_LIST, &[]);
        }
        let (outcome, _, _) = negotiate_bytewise(&client, None);
        assert!(outcome.is_err(), "{outcome:?}");
    }

    #[test]
    fn a_refused_connection_hears_why_for_every_option_and_aborts_cleanly() {
        let mut client = 1u32.to_be_bytes().to_vec();
        option(&mut client, OPT_STRUCTURED_REPLY, &[]);
        option(&mut client, OPT_GO, &go("", &[INFO_BLOCK_SIZE]));
        option(&mut client, OPT_ABORT, &[]);
        let (outcome, _, output) = negotiate_bytewise(&client, Some("too many connections".into()));
        assert_eq!(outcome, Ok(Outcome::Close));
        let r = replies(&output);
        assert_eq!(
            r[0],
            (
                OPT_STRUCTURED_REPLY,
                REP_ERR_POLICY,
                b"too many connections".to_vec()
            )
        );
        assert_eq!((r[1].0, r[1].1), (OPT_GO, REP_ERR_POLICY));
        assert_eq!((r[2].0, r[2].1), (OPT_ABORT, REP_ACK));
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
        let data = go("abc", &[INFO_BLOCK_SIZE]);
        assert_eq!(
            parse_info_request(&data),
            Some(("abc".into(), vec![INFO_BLOCK_SIZE]))
        );
        assert_eq!(parse_info_request(&data[..data.len() - 1]), None);
        assert_eq!(parse_info_request(&[0, 0, 0, 9, b'x']), None);
    }
}
