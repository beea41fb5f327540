//! What an NBD session did, as `serve` says it on stderr when it stops: the requests served and, over a cache,
//! how the cache ended. It prints nothing itself.

use ssdlab_core::schema::CacheStats;
use ssdlab_core::schema::serve::ServeStats;

/// The session's counts, and the cache's when there is one.
pub fn served_lines(stats: &ServeStats, cache: Option<&CacheStats>) -> Vec<String> {
    let mut lines = vec![format!(
        "served    {} connections ({} refused, {} failed handshakes): {} reads ({} bytes), {} writes ({} bytes, {} FUA), {} flushes, {} trims, {} write-zeroes, {} block-status queries; {} errors{}, {} protocol violations",
        stats.connections,
        stats.connections_refused,
        stats.handshakes_failed,
        stats.reads,
        stats.bytes_read,
        stats.writes,
        stats.bytes_written,
        stats.fua_writes,
        stats.flushes,
        stats.trims,
        stats.write_zeroes,
        stats.block_status,
        stats.errors,
        by_the_device(stats),
        stats.protocol_violations
    )];
    if let Some(n) = stats.reads_cut_short.filter(|&n| n > 0) {
        let said = stats
            .first_cut_short_error
            .as_deref()
            .map_or(String::new(), |e| format!(" (the first: {e})"));
        lines.push(format!(
            "cut short {n} reads lost their connection after the reply's header: the exported file could not give their bytes{said}"
        ));
    }
    if let Some(cache) = cache {
        lines.push(format!(
            "cache     read hits {} of {}, destaged {} bytes in {} writes, dirty now {} bytes",
            cache.read_hits,
            cache.read_hits + cache.read_misses,
            cache.destaged_bytes,
            cache.destage_writes,
            cache.dirty_bytes
        ));
    }
    lines
}

/// How many of the errors the device made, when the record says.
pub(crate) fn by_the_device(stats: &ServeStats) -> String {
    match stats.device_errors {
        Some(n) if stats.errors > 0 => format!(" ({n} by the device)"),
        _ => String::new(),
    }
}
