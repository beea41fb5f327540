//! The health section: one row per drive (host and NAND writes, write amplification over its life and over the
//! window, wear, remaining life with its band, the verdict), host vs NAND writes and wear over time for drives
//! with history, and every attribute a drive reported.

use std::fmt::Write;

use ssdlab_core::schema::health::{DriveHealth, HealthLevel};
use ssdlab_core::schema::{Analysis, RunResult};

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, escape, table};

const DAY_S: f64 = 86_400.0;

fn tb(bytes: Option<u128>) -> String {
    bytes.map_or("–".into(), |b| format!("{:.2}", b as f64 / 1e12))
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}"))
}

fn drive_name(d: &DriveHealth) -> String {
    let id = &d.snapshot.identity;
    match (id.model.is_empty(), id.serial.is_empty()) {
        (false, false) if id.serial != id.source => format!("{} {} ({})", id.model, id.serial, id.source),
        (false, _) => format!("{} ({})", id.model, id.source),
        _ => id.source.clone(),
    }
}

/// Remaining life as "estimate (low–high)" in years, or what is needed.
pub fn life_text(d: &DriveHealth) -> String {
    let years = |days: f64| format!("{:.1}", days / 365.25);
    match d.life.remaining_days {
        Some(days) => {
            let low = d.life.remaining_days_low.map(years);
            let high = d.life.remaining_days_high.map_or("unbounded".to_string(), years);
            match low {
                Some(low) => format!("{} years ({low}–{high})", years(days)),
                None => format!("{} years (no band yet)", years(days)),
            }
        }
        None => "not yet estimable".into(),
    }
}

/// GB written per day between snapshots at least an hour apart, placed at each span's end: (days, GB/day).
fn per_day_rates(points: impl Iterator<Item = (u64, u128)>, days: &dyn Fn(u64) -> f64) -> Vec<(f64, f64)> {
    const MIN_SPAN_S: u64 = 3600;
    let mut out = Vec::new();
    let mut from: Option<(u64, u128)> = None;
    for (t, bytes) in points {
        match from {
            None => from = Some((t, bytes)),
            Some((t0, b0)) if t >= t0 + MIN_SPAN_S => {
                let per_day = bytes.saturating_sub(b0) as f64 / ((t - t0) as f64 / DAY_S);
                out.push((days(t), per_day / 1e9));
                from = Some((t, bytes));
            }
            Some(_) => {}
        }
    }
    out
}

pub(crate) fn health(group: &[&RunResult]) -> String {
    let drives: Vec<&DriveHealth> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::Health(h) => Some(h.drives.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    let header: Vec<String> = [
        "drive",
        "verdict",
        "power-on h",
        "host written TB",
        "NAND written TB",
        "WAF (life)",
        "WAF (window)",
        "host GB/day",
        "wear used %",
        "rated life left",
        "remaining life",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = drives
        .iter()
        .map(|d| {
            let s = &d.snapshot;
            vec![
                drive_name(d),
                d.verdict.level.name().into(),
                s.power_on_hours.map_or("–".into(), |h| h.to_string()),
                tb(s.host_written_bytes),
                if s.nand_written_bytes.is_some() {
                    tb(s.nand_written_bytes)
                } else {
                    "not exposed".into()
                },
                ratio(d.lifetime_write_amplification_ratio),
                ratio(d.rates.as_ref().and_then(|r| r.write_amplification_ratio)),
                d.rates
                    .as_ref()
                    .and_then(|r| r.host_written_bytes_per_day)
                    .map_or("–".into(), |b| format!("{:.1}", b / 1e9)),
                s.wear_used_percent.map_or("–".into(), |w| format!("{w:.1}")),
                d.rated_life.as_ref().map_or("–".into(), |l| {
                    format!("{:.1}% ({})", l.remaining_percent, l.basis)
                }),
                life_text(d),
            ]
        })
        .collect();
    let mut out = table(&header, &rows);
    let unreadable: Vec<Vec<String>> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::Health(h) => Some(h.unreadable.iter()),
            _ => None,
        })
        .flatten()
        .map(|u| vec![u.device.clone(), u.reason.clone()])
        .collect();
    if !unreadable.is_empty() {
        out.push_str("<p>Drives that could not be read this time:</p>");
        out.push_str(&table(&["drive".into(), "why".into()], &unreadable));
    }

    out.push_str(&history_charts(&drives));
    for d in &drives {
        out.push_str(&drive_details(d));
    }
    out
}

/// The charts of the drives with at least two snapshots in their history: writes per day and wear over time.
fn history_charts(drives: &[&DriveHealth]) -> String {
    let with_history: Vec<&&DriveHealth> = drives.iter().filter(|d| d.history.len() >= 2).collect();
    if with_history.is_empty() {
        return String::new();
    }
    let mut writes = vec![];
    let mut wear = vec![];
    for d in &with_history {
        let t0 = d.history[0].t_s as f64;
        let days = |t: u64| (t as f64 - t0) / DAY_S;
        let name = drive_name(d);
        // Lifetime totals rise so little over 90 days that a plot of them looks flat: the chart shows the
        // rate between snapshots instead, each span at least an hour so seconds-apart snapshots make no
        // absurd rates.
        let rate = |field: fn(&ssdlab_core::schema::health::HistoryPoint) -> Option<u128>| {
            per_day_rates(
                d.history.iter().filter_map(|p| field(p).map(|b| (p.t_s, b))),
                &days,
            )
        };
        let host = rate(|p| p.host_written_bytes);
        let nand = rate(|p| p.nand_written_bytes);
        if !host.is_empty() {
            writes.push(Series {
                name: format!("{name} host"),
                points: host,
                mark: Mark::LineWithDots,
                style: None,
            });
        }
        if !nand.is_empty() {
            writes.push(Series {
                name: format!("{name} NAND"),
                points: nand,
                mark: Mark::LineWithDots,
                style: None,
            });
        }
        wear.push(Series {
            name,
            points: d
                .history
                .iter()
                .filter_map(|p| p.wear_used_percent.map(|w| (days(p.t_s), w)))
                .collect(),
            mark: Mark::LineWithDots,
            style: None,
        });
    }
    let mut drawn = Vec::new();
    // Snapshots all within an hour of each other make no rate: the chart is left out rather than empty.
    if !writes.is_empty() {
        drawn.push(Chart {
            title: "Host and NAND writes per day, between snapshots".into(),
            x: Axis::new("days since the first snapshot", Scale::Linear),
            y: Axis::new("GB written per day", Scale::Linear).range(Some(0.0), None),
            series: writes,
        });
    }
    drawn.push(Chart {
        title: "Wear used over time".into(),
        x: Axis::new("days since the first snapshot", Scale::Linear),
        y: Axis::new("% of rated endurance", Scale::Linear).range(Some(0.0), None),
        series: wear,
    });
    charts(&drawn)
}

/// One drive's verdict with its reasons, where its figures come from, and every field read.
fn drive_details(d: &DriveHealth) -> String {
    let mut out = String::new();
    let class = match d.verdict.level {
        HealthLevel::Ok => "pass",
        HealthLevel::Warn => "warn",
        HealthLevel::Fail => "fail",
        HealthLevel::Unknown => "unknown",
    };
    let _ = write!(
        out,
        "<h3>{}: <span class=\"{class}\">{}</span></h3><ul>",
        escape(&drive_name(d)),
        d.verdict.level.name()
    );
    for reason in &d.verdict.reasons {
        let _ = write!(out, "<li>{}</li>", escape(reason));
    }
    let s = &d.snapshot;
    let _ = write!(out, "<li>NAND writes: {}</li>", escape(&s.nand_written_source));
    if let Some(r) = &d.rating {
        let _ = write!(out, "<li>rating: {}</li>", escape(&r.source));
    }
    let _ = write!(out, "<li>life: {}", escape(&d.life.basis));
    if let Some(needs) = &d.life.needs {
        let _ = write!(out, "; needs {}", escape(needs));
    }
    out.push_str("</li></ul>");
    if !s.attributes.is_empty() {
        let header: Vec<String> = ["id", "name", "value", "worst", "thresh", "failed", "raw"]
            .iter()
            .map(|h| h.to_string())
            .collect();
        let rows: Vec<Vec<String>> = s
            .attributes
            .iter()
            .map(|a| {
                vec![
                    a.id.to_string(),
                    a.name.clone(),
                    a.value.to_string(),
                    a.worst.to_string(),
                    a.thresh.to_string(),
                    a.when_failed.clone(),
                    a.raw_string.clone(),
                ]
            })
            .collect();
        let _ = write!(
            out,
            "<details><summary>All {} SMART attributes</summary>{}</details>",
            s.attributes.len(),
            table(&header, &rows)
        );
    }
    if !s.other_fields.is_empty() {
        let header = vec!["field".to_string(), "value".to_string()];
        let rows: Vec<Vec<String>> = s
            .other_fields
            .iter()
            .map(|f| readable_field(&f.name, &f.value))
            .collect();
        let _ = write!(
            out,
            "<details><summary>Other reported fields</summary>{}</details>",
            table(&header, &rows)
        );
    }
    out
}

/// A reported field as a reader takes it: a byte count that ssdlab's own virtual drive names with its unit
/// (`gc_relocated_bytes`) in decimal bytes under its plain name; a drive's own fields exactly as it reported them.
fn readable_field(name: &str, value: &str) -> Vec<String> {
    let ours = name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    match (name.strip_suffix("_bytes"), value.parse::<u64>()) {
        (Some(base), Ok(bytes)) if ours => vec![
            base.replace('_', " "),
            format!(
                "{} ({bytes} bytes)",
                ssdlab_core::units::DecimalBytes(bytes as f64)
            ),
        ],
        _ => vec![name.to_string(), value.to_string()],
    }
}

/// How a drive health result is shown.
pub(crate) struct Health;

impl crate::views::View for Health {
    type Analysis = ssdlab_core::schema::health::HealthAnalysis;
    const HEADING: &'static str = "Drive health: host and NAND writes, write amplification, wear";
    const STORY: &'static str = "What each drive says of itself (SMART and NVMe logs): host writes, NAND writes where the drive counts them, and wear against its rated endurance. A drive whose output holds no figure to judge is unknown, never healthy.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        health(group)
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn rates_span_at_least_an_hour_and_never_go_below_zero() {
        let days = |t: u64| t as f64 / DAY_S;
        // 100 GB a day for two days, a snapshot seconds after one (folded into the next span), and a counter that
        // went back (a replaced drive's new counter): no negative rate.
        let points = vec![
            (0, 0u128),
            (10, 1_000_000),
            (86_400, 100_000_000_000),
            (172_800, 200_000_000_000),
            (259_200, 150_000_000_000),
        ];
        let r = per_day_rates(points.into_iter(), &days);
        assert_eq!(r.len(), 3);
        assert!(
            (r[0].1 - 100.0).abs() < 1e-6 && (r[1].1 - 100.0).abs() < 1e-6,
            "{r:?}"
        );
        assert_eq!(r[2].1, 0.0);
    }
}
