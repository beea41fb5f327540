//! The NBD session record: the export, how long it was served, what the clients asked for, and how the cache
//! (a `cached:` target) ended: hit ratio, absorbed writes, destaged bytes, dirty bytes left (zero after a clean
//! stop).

use std::fmt::Write;

use ssdlab_core::schema::serve::ServeAnalysis;
use ssdlab_core::schema::{Analysis, CacheStats, RunResult};
use ssdlab_core::units::{BinaryBytes, DecimalBytes};

use crate::{escape, label, table_with_class};

/// The NBD session section: a table per result of the export, the requests served and how the cache ended.
pub(crate) fn serve(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Analysis::Serve(a) = &r.analysis else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        let mut rows = session_rows(a);
        if let Some(c) = &a.cache {
            rows.extend(cache_rows(c));
        }
        out.push_str(&table_with_class(
            "header",
            &["session".into(), String::new()],
            &rows,
        ));
    }
    out
}

/// The session's rows: the export, how long it was served, the connections and what the clients asked for.
fn session_rows(a: &ServeAnalysis) -> Vec<Vec<String>> {
    let s = &a.stats;
    let per_s = |bytes: u64| {
        if a.duration_s > 0.0 {
            format!(
                ", {}/s over the session",
                DecimalBytes(bytes as f64 / a.duration_s)
            )
        } else {
            String::new()
        }
    };
    vec![
        vec![
            "export".to_string(),
            format!(
                "'{}', {} ({}), {} on {}",
                a.export_name,
                BinaryBytes(a.export_size_bytes),
                a.export_size_bytes,
                if a.read_only { "read-only" } else { "read-write" },
                a.listen
            ),
        ],
        vec!["served for".into(), format!("{:.1} s", a.duration_s)],
        vec![
            "connections".into(),
            format!("{} ({} failed handshakes)", s.connections, s.handshakes_failed),
        ],
        vec![
            "reads".into(),
            format!(
                "{} ({}{})",
                s.reads,
                DecimalBytes(s.bytes_read as f64),
                per_s(s.bytes_read)
            ),
        ],
        vec![
            "writes".into(),
            format!(
                "{} ({}{}), {} with FUA",
                s.writes,
                DecimalBytes(s.bytes_written as f64),
                per_s(s.bytes_written),
                s.fua_writes
            ),
        ],
        vec![
            "flushes, trims, write-zeroes, block status".into(),
            format!(
                "{}, {}, {}, {}",
                s.flushes, s.trims, s.write_zeroes, s.block_status
            ),
        ],
        vec![
            "errors, protocol violations".into(),
            format!(
                "{}{}, {}",
                s.errors,
                crate::text::serve::by_the_device(s),
                s.protocol_violations
            ),
        ],
    ]
}

/// The cache's rows (a `cached:` target): its read hit ratio, and the writes it absorbed, sent around and
/// destaged, with the dirty bytes left.
fn cache_rows(c: &CacheStats) -> Vec<Vec<String>> {
    let lookups = c.read_hits + c.read_misses;
    vec![
        vec![
            "cache reads".into(),
            if lookups > 0 {
                format!(
                    "{} hits of {lookups} ({:.1}%)",
                    c.read_hits,
                    100.0 * c.read_hits as f64 / lookups as f64
                )
            } else {
                "none".into()
            },
        ],
        vec![
            "cache writes".into(),
            format!(
                "{} absorbed, {} sent around; {} destaged in {} writes; {} dirty at the end",
                c.writes_absorbed,
                c.writes_around,
                DecimalBytes(c.destaged_bytes as f64),
                c.destage_writes,
                c.dirty_bytes
            ),
        ],
    ]
}

/// How a nbd export result is shown.
pub(crate) struct Serve;

impl crate::views::View for Serve {
    type Analysis = ssdlab_core::schema::serve::ServeAnalysis;
    const HEADING: &'static str = "NBD export: what the clients asked for, and how the cache ended";
    const STORY: &'static str = "The device served over NBD: what the clients asked for and how the DRAM cache in front of the device ended (a clean stop destages everything).";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        serve(group)
    }
}
