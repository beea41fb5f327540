//! A run's text: the target line and the phase summary table (IOPS, MB/s, latency percentiles, CPU, queue
//! depth, the NAND and cache counters where there are any). It prints nothing itself.

use ssdlab_core::units::{BinaryBytes, DecimalBytes, Nanos};

use ssdlab_core::device::DeviceInfo;
use ssdlab_core::schema::{DirectionSummary, LatencyNs, Summary};

/// One line describing the target, and its notes.
pub fn target_lines(info: &DeviceInfo) -> Vec<String> {
    let mut out = Vec::new();
    let direct = if info.direct_io { "O_DIRECT" } else { "buffered" };
    say!(
        out,
        "target    {}: {}, {} ({} bytes), logical block {} B, {}, {}",
        info.target,
        info.model,
        BinaryBytes(info.capacity_bytes),
        info.capacity_bytes,
        info.logical_block_bytes,
        info.backend,
        direct
    );
    if let Some(line) = drive_facts_line(&info.drive) {
        say!(out, "drive     {line}");
    }
    for note in &info.notes {
        say!(out, "note      {note}");
    }
    out
}

/// The verdict on stderr: each reason under its kind ("finding: 12 files read at less than 0.5 of fresh speed",
/// "failed: interrupted"), or "passed".
pub fn verdict_lines(verdict: &ssdlab_core::schema::Verdict) -> Vec<String> {
    let mut out = Vec::new();
    for reason in &verdict.reasons {
        match verdict.passed {
            true => say!(out, "verdict   {reason}"),
            false => say!(out, "verdict   {}: {reason}", verdict.kind()),
        }
    }
    if verdict.passed {
        say!(out, "verdict   passed");
    }
    out
}

/// "serial S3Z1NB0K, firmware RVT02B6Q, write cache write back": what the kernel reports, or None when nothing.
pub fn drive_facts_line(drive: &ssdlab_core::DriveFacts) -> Option<String> {
    let parts: Vec<String> = [
        drive.serial.as_ref().map(|s| format!("serial {s}")),
        drive.firmware.as_ref().map(|f| format!("firmware {f}")),
        drive.write_cache.as_ref().map(|w| format!("write cache {w}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The latency columns that fit an 80-column terminal; the JSON and CSVs keep every percentile.
fn latency_cells(l: &LatencyNs) -> String {
    [
        l.mean,
        l.p50 as f64,
        l.p95 as f64,
        l.p99 as f64,
        l.p999 as f64,
        l.max as f64,
    ]
    .iter()
    .map(|&ns| format!("{:>8}", Nanos(ns).to_string()))
    .collect::<Vec<_>>()
    .join("")
}

fn direction_row(name: &str, d: &DirectionSummary) -> String {
    format!(
        "{name:<8}{:>7}{:>7}{:>10}{}",
        ssdlab_core::units::Count(d.ios as f64).to_string(),
        ssdlab_core::units::Count(d.iops).to_string(),
        ssdlab_core::units::DecimalRate(d.bytes_per_s).to_string(),
        latency_cells(&d.latency_ns)
    )
}

/// Why writes went around a write-back cache, where the record says and any did for a reason it counts.
fn why_around(c: &ssdlab_core::schema::CacheStats) -> String {
    let (Some(partial), Some(large)) = (c.writes_around_partial, c.writes_around_large) else {
        return String::new();
    };
    let mut why = Vec::new();
    if partial > 0 {
        why.push(format!(
            "{partial} covering part of a block the cache could not merge"
        ));
    }
    if large > 0 {
        why.push(format!("{large} too large for the dirty allowance"));
    }
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    }
}

/// The cache's line under a summary: what it served, what it wrote back, and what it cost the host.
pub fn cache_lines(c: &ssdlab_core::schema::CacheStats) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "cache     {} {}: read hits {} of {} ({:.1}%), admitted {}, evicted {}; writes absorbed {}, around {}{}; \
         destaged {} in {} writes ({} each), dirty now {} (peak {}); flushes {}; waited on the dirty limit {}",
        c.mode.name(),
        BinaryBytes(c.cache_bytes),
        c.read_hits,
        c.read_hits + c.read_misses,
        100.0 * c.read_hit_ratio(),
        c.admissions,
        c.evictions,
        c.writes_absorbed,
        c.writes_around,
        why_around(c),
        // An amount moved, decimal as the rates and the replay's byte counts beside it; sizes stay binary.
        DecimalBytes(c.destaged_bytes as f64),
        c.destage_writes,
        BinaryBytes(c.destage_write_bytes_mean() as u64),
        BinaryBytes(c.dirty_bytes),
        BinaryBytes(c.dirty_bytes_peak),
        c.flushes,
        Nanos(c.dirty_limit_wait_ns as f64),
    );
    if c.pass_through_episodes > 0 || c.pass_through_ns > 0 {
        say!(
            out,
            "cache     host CPU busy: passed {} reads and writes through in {} episodes, {} in all",
            c.pass_through_ops,
            c.pass_through_episodes,
            Nanos(c.pass_through_ns as f64)
        );
    }
    if c.warmed_bytes > 0 {
        say!(
            out,
            "cache     warm start: {} read in from the hot map",
            BinaryBytes(c.warmed_bytes)
        );
    }
    out
}

/// The human summary table: IOPS, MB/s (decimal), latency percentiles, CPU and achieved queue depth.
pub fn summary_lines(summary: &Summary, queue_depth: u32) -> Vec<String> {
    let mut out = direction_table_lines(summary);
    let seconds = summary.seconds.max(1e-9);
    say!(
        out,
        "{} in {:.2} s  CPU user {:.1}% sys {:.1}% of a core  QD achieved {:.1} of {}",
        DecimalBytes(summary.bytes as f64),
        summary.seconds,
        100.0 * summary.cpu_user_s / seconds,
        100.0 * summary.cpu_sys_s / seconds,
        summary.qd_mean,
        queue_depth
    );
    if let Some(d) = &summary.device {
        say!(
            out,
            "NAND      host writes {}, NAND writes {}, write amplification {}, SLC hits {}, GC copied {}, \
             erase count min/mean/max {}/{:.1}/{}",
            DecimalBytes(d.host_bytes_written as f64),
            DecimalBytes(d.nand_bytes_written as f64),
            // No host writes: no ratio was measured, which is not a ratio of zero.
            if d.host_bytes_written == 0 {
                "–".to_string()
            } else {
                format!("{:.2}", d.write_amplification)
            },
            DecimalBytes(d.slc_hit_bytes as f64),
            DecimalBytes(d.gc_relocated_bytes as f64),
            d.erase_count_min,
            d.erase_count_mean,
            d.erase_count_max
        );
    }
    if let Some(c) = &summary.cache {
        out.extend(cache_lines(c));
    }
    if summary.io_errors > 0 {
        say!(out, "I/O errors: {}", summary.io_errors);
    }
    if summary.verify_errors > 0 {
        say!(
            out,
            "verify errors: {} blocks did not hold the expected pattern",
            summary.verify_errors
        );
    }
    out
}

/// The summary's table: a row per direction that has operations, a total unless there is only one, and the
/// device's own latency under a rate limit.
fn direction_table_lines(summary: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "{:<8}{:>7}{:>7}{:>10}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}",
        "",
        "ios",
        "IOPS",
        "bandwidth",
        "mean",
        "p50",
        "p95",
        "p99",
        "p99.9",
        "max"
    );
    let directions = [
        ("read", &summary.read),
        ("write", &summary.write),
        ("discard", &summary.discard),
    ];
    let present: Vec<_> = directions
        .iter()
        .filter_map(|(n, d)| d.as_ref().map(|d| (*n, d)))
        .collect();
    for (name, d) in &present {
        say!(out, "{}", direction_row(name, d));
    }
    if present.len() != 1 {
        say!(out, "{}", direction_row("total", &summary.total()));
    }
    // Under a rate limit the rows above run from each operation's due time: the device's own part is apart,
    // so a host that fell behind its schedule is not read as a slow device.
    if let Some(device) = &summary.device_latency_ns {
        say!(out, "{:<8}{:>24}{}", "device", "", latency_cells(device));
        say!(
            out,
            "rate      rows above: from each operation's due time; device: from its submission"
        );
    }
    out
}
