//! `ssdlab serve`'s session record: what was exported where, how long, what the clients asked for and how the
//! cache (for a `cached:` target) ended. Written to `result.json` when the server stops, so a RAPID-style cache
//! run over NBD leaves its figures beside the tests'. It only describes; serving is `ssdlab_nbd`'s.

use serde::{Deserialize, Serialize};

use crate::schema::CacheStats;

/// What the server did, counted over every connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeStats {
    pub connections: u64,
    /// Handshakes that broke the protocol, ran past their deadline or were cut off by the client.
    pub handshakes_failed: u64,
    /// Connections past the server's limit: told why in reply to their options (or closed at once when even
    /// the refusals were too many).
    #[serde(default)]
    pub connections_refused: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    pub block_status: u64,
    pub fua_writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests answered with an NBD error: the client's invalid requests and the device's failures alike.
    pub errors: u64,
    /// Of those, the requests the device failed (a read, write, flush, trim or block-status query that reached
    /// it and came back with an error). Absent in records written before it was counted, which cannot say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_errors: Option<u64>,
    /// Reads answered from the export's page cache (`file:IMG?cache=page`, 64 KiB and more) whose bytes the file
    /// could not give after the reply's header had gone (it was cut short or failed meanwhile): the connection
    /// was closed, so the client saw a broken connection, never other bytes. The read replies queued behind it
    /// on that connection are lost with it and counted too. Not in `bytes_read`. Absent in records written
    /// before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads_cut_short: Option<u64>,
    /// What the exported file said for one of those reads (its error, or that it ended inside the range), so a
    /// truncated image is told from a failing disk or a dead FUSE daemon: the first connection to close with
    /// one. Absent when no read was cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_cut_short_error: Option<String>,
    /// Connections closed because the client broke the protocol.
    pub protocol_violations: u64,
}

/// One NBD session, from listening to the stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeAnalysis {
    pub export_name: String,
    pub export_size_bytes: u64,
    /// Where it listened: `unix:PATH` or `nbd://HOST:PORT`.
    pub listen: String,
    pub read_only: bool,
    /// From the command's start (listening, opening the target) to the end of the final destage and flush.
    pub duration_s: f64,
    pub stats: ServeStats,
    /// The cache's counters at the end (a `cached:` target only).
    pub cache: Option<CacheStats>,
}
