//! A drive's health as stderr shows it: identity, host and NAND writes, write amplification, wear, remaining
//! life and the verdict's reasons. It prints nothing itself.

use ssdlab_core::units::DecimalBytes;

use ssdlab_core::schema::health::DriveHealth;

fn bytes(b: Option<u128>) -> String {
    b.map_or("–".into(), |b| DecimalBytes(b as f64).to_string())
}

/// The drive's lines; `wear_warn_percent` is the threshold the verdict warned from, said beside the rated life.
pub fn drive_lines(d: &DriveHealth, wear_warn_percent: f64) -> Vec<String> {
    let mut out = Vec::new();
    let s = &d.snapshot;
    out.push(drive_line(d));
    say!(
        out,
        "verdict   {}: {}",
        d.verdict.level.name(),
        d.verdict.reasons.join("; ")
    );
    say!(
        out,
        "powered   {}   temperature {}",
        s.power_on_hours.map_or("–".into(), |h| format!("{h} h")),
        s.temperature_celsius.map_or("–".into(), |t| format!("{t:.0} °C"))
    );
    say!(
        out,
        "written   host {}   read {}   NAND {}",
        bytes(s.host_written_bytes),
        bytes(s.host_read_bytes),
        if s.nand_written_bytes.is_some() {
            bytes(s.nand_written_bytes)
        } else {
            "not exposed".into()
        }
    );
    say!(out, "NAND      {}", s.nand_written_source);
    if let Some(waf) = d.lifetime_write_amplification_ratio {
        say!(
            out,
            "WAF       {waf:.2} over the drive's life (NAND / host bytes)"
        );
    }
    out.push(window_line(d));
    say!(
        out,
        "wear      {}{}",
        s.wear_used_percent.map_or("not reported".into(), |w| format!(
            "{w:.1}% used ({})",
            s.wear_source
        )),
        s.erase_count_mean
            .map_or(String::new(), |e| format!("; mean erase count {e:.1}"))
    );
    if let Some(life) = &d.rated_life {
        say!(
            out,
            "rated     {:.1}% of rated life remains ({:.1}% used: {}); warns from {wear_warn_percent:.0}% (--wear-warn)",
            life.remaining_percent,
            life.used_percent,
            life.basis
        );
    }
    if let Some(r) = &d.rating {
        out.push(rating_line(r));
    }
    say!(out, "life      {}", crate::health::life_text(d));
    say!(out, "          from {}", d.life.basis);
    if let Some(needs) = &d.life.needs {
        say!(out, "          needs {needs}");
    }
    let count = |v: Option<u64>| v.map_or("–".into(), |n| n.to_string());
    say!(
        out,
        "errors    media {}, CRC {}, reallocated {}, pending {}, unsafe shutdowns {}",
        count(s.media_errors),
        count(s.crc_errors),
        count(s.reallocated),
        count(s.pending_sectors),
        count(s.unsafe_shutdowns)
    );
    out.extend(attribute_lines(s));
    for note in &s.notes {
        say!(out, "note      {note}");
    }
    out
}

/// The drive's identity: model, serial, firmware, capacity, protocol and where it was read from.
fn drive_line(d: &DriveHealth) -> String {
    let s = &d.snapshot;
    let id = &s.identity;
    format!(
        "\ndrive     {} {}{}{}  {}  ({})",
        if id.model.is_empty() {
            "(model not reported)"
        } else {
            &id.model
        },
        if id.serial.is_empty() || id.serial == id.source {
            ""
        } else {
            &id.serial
        },
        id.firmware
            .as_ref()
            .map_or(String::new(), |f| format!("  fw {f}")),
        id.capacity_bytes
            .map_or(String::new(), |c| format!("  {:.1} GB", c as f64 / 1e9)),
        id.protocol.name(),
        id.source
    )
}

/// The rates over the history window, or why there are none yet.
fn window_line(d: &DriveHealth) -> String {
    match &d.rates {
        Some(r) => format!(
            "window    {:.1} days, {} snapshots: host {} a day, NAND {} a day, WAF {}",
            (r.to_s - r.from_s) as f64 / 86_400.0,
            r.snapshots,
            r.host_written_bytes_per_day
                .map_or("–".into(), |b| DecimalBytes(b).to_string()),
            r.nand_written_bytes_per_day
                .map_or("–".into(), |b| DecimalBytes(b).to_string()),
            r.write_amplification_ratio
                .map_or("–".into(), |w| format!("{w:.2}"))
        ),
        None => "window    one snapshot: rates and windowed WAF need a second, a day or more later".into(),
    }
}

/// The endurance rating the life figures rest on, and where it came from.
fn rating_line(r: &ssdlab_core::schema::health::EnduranceRating) -> String {
    let mut parts = vec![];
    if let Some(t) = r.tbw_bytes {
        parts.push(format!("{:.0} TBW", t as f64 / 1e12));
    }
    if let Some(dwpd) = r.dwpd {
        parts.push(format!("{dwpd:.2} DWPD"));
    }
    if let Some(pe) = r.pe_cycles {
        parts.push(format!("{pe} P/E cycles"));
    }
    format!("rating    {} ({})", parts.join(", "), r.source)
}

/// Every SMART attribute the drive reported.
fn attribute_lines(s: &ssdlab_core::schema::health::HealthSnapshot) -> Vec<String> {
    let mut out = Vec::new();
    if !s.attributes.is_empty() {
        say!(
            out,
            "attributes ({}, every one the drive reported)",
            s.attributes.len()
        );
        for a in &s.attributes {
            say!(
                out,
                "  {:>3} {:<28} {:>3} {:>3} {:>3} {:<4} {}",
                a.id,
                a.name,
                a.value,
                a.worst,
                a.thresh,
                a.when_failed,
                a.raw_string
            );
        }
    }
    out
}
