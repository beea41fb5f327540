//! `ssdlab report --baseline DIR`: every result set against one baseline of its kind, each headline figure with
//! its change in percent, marked better or worse. The figures are each kind's own headline numbers, taken from
//! the typed analysis; a kind without comparable figures gets no table.

use ssdlab_core::schema::options::SweepAxis;
use ssdlab_core::schema::pts::PtsMetric;
use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::Nanos;

use crate::{escape, label};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// One headline figure of a result.
struct Figure {
    name: &'static str,
    value: f64,
    better: Better,
    format: fn(f64) -> String,
}

fn mb(v: f64) -> String {
    format!("{:.1} MB/s", v / 1e6)
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}

fn ns(v: f64) -> String {
    Nanos(v).to_string()
}

fn percent(v: f64) -> String {
    format!("{:.0}%", 100.0 * v)
}

fn figure(name: &'static str, value: f64, better: Better, format: fn(f64) -> String) -> Figure {
    Figure {
        name,
        value,
        better,
        format,
    }
}

/// The headline figures of `r`, by kind.
fn figures(r: &RunResult) -> Vec<Figure> {
    use Better::{Higher, Lower};
    match &r.analysis {
        Analysis::Run => r
            .phases
            .first()
            .map(|p| {
                let s = &p.summary;
                vec![
                    figure("IOPS", s.iops, Higher, count),
                    figure("throughput", s.bytes_per_s, Higher, mb),
                    figure("mean latency", s.latency_ns.mean, Lower, ns),
                    figure("p99 latency", s.latency_ns.p99 as f64, Lower, ns),
                ]
            })
            .unwrap_or_default(),
        Analysis::Consistency(MethodAnalysis {
            measured: Some(a), ..
        }) => vec![
            figure("plateau IOPS", a.plateau_iops, Higher, count),
            figure("steady IOPS", a.steady_iops_mean, Higher, count),
            figure("steady std dev", a.steady_iops_std_dev, Lower, count),
        ],
        Analysis::Trim(MethodAnalysis {
            measured: Some(a), ..
        }) => vec![
            figure("clean", a.clean_bytes_per_s, Higher, mb),
            figure("dirty", a.dirty_bytes_per_s, Higher, mb),
            figure("after TRIM", a.after_trim_bytes_per_s, Higher, mb),
            figure("restored", a.restored_fraction, Higher, percent),
        ],
        Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) => {
            // Each axis has its own figures, so sweeps of different axes are never set against each other.
            let max = |f: fn(&ssdlab_core::schema::SweepRow) -> f64| a.rows.iter().map(f).fold(0.0, f64::max);
            let at_mix = |p: u32| {
                a.rows
                    .iter()
                    .find(|r| r.read_percent == Some(p))
                    .map_or(f64::NAN, |r| r.read_iops + r.write_iops)
            };
            match a.axis {
                SweepAxis::Size => vec![
                    figure("best sequential write", max(|r| r.write_bytes_per_s), Higher, mb),
                    figure("best sequential read", max(|r| r.read_bytes_per_s), Higher, mb),
                ],
                SweepAxis::Qd => vec![
                    figure("best random write IOPS", max(|r| r.write_iops), Higher, count),
                    figure("best random read IOPS", max(|r| r.read_iops), Higher, count),
                ],
                SweepAxis::Mix => vec![
                    figure("IOPS, 0% reads", at_mix(0), Higher, count),
                    figure("IOPS, 50% reads", at_mix(50), Higher, count),
                    figure("IOPS, 100% reads", at_mix(100), Higher, count),
                ],
            }
        }
        Analysis::Latency(MethodAnalysis {
            measured: Some(a), ..
        }) => vec![
            figure("IOPS", a.iops, Higher, count),
            figure("mean latency", a.latency_ns_mean, Lower, ns),
            figure("p99 latency", a.latency_ns_p99 as f64, Lower, ns),
            figure("maximum latency", a.latency_ns_max as f64, Lower, ns),
        ],
        Analysis::Pts(MethodAnalysis {
            measured: Some(a), ..
        }) => {
            // Named by what is tracked, so PTS tests of different kinds are never set against each other.
            let (name, better, format): (&'static str, Better, fn(f64) -> String) = match a.tracking_metric {
                PtsMetric::Iops => ("steady-state IOPS (tracking)", Higher, count),
                PtsMetric::BytesPerS => ("steady-state bandwidth (tracking)", Higher, mb),
                PtsMetric::LatencyNsMean => ("steady-state mean response (tracking)", Lower, ns),
            };
            a.steady_state
                .window_mean
                .map(|m| vec![figure(name, m, better, format)])
                .unwrap_or_default()
        }
        Analysis::Replay(MethodAnalysis {
            measured: Some(a), ..
        }) => vec![
            figure("average data rate", a.average_data_rate_bytes_per_s, Higher, mb),
            figure("average service time", a.average_service_time_ns, Lower, ns),
            figure("p99 latency", a.latency_ns.p99 as f64, Lower, ns),
        ],
        Analysis::Fanout(a) => vec![
            figure("query median", a.query.latency_ns.p50 as f64, Lower, ns),
            figure("query p95", a.query.latency_ns.p95 as f64, Lower, ns),
            figure("query p99", a.query.latency_ns.p99 as f64, Lower, ns),
        ],
        Analysis::Scan(a) => vec![
            figure("bulk-read hours", a.total_bulk_read_hours, Lower, |v| {
                format!("{v:.2} h")
            }),
            figure("flagged files", a.flagged.len() as f64, Lower, count),
        ],
        _ => Vec::new(),
    }
}

/// The table of `group`'s results against `baseline` (one of them), or nothing when the kind has no figures.
pub(crate) fn against(group: &[&RunResult], baseline: &RunResult) -> String {
    let base = figures(baseline);
    if base.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "<h3>Against the baseline, {}</h3><table class=\"baseline\"><tr><th></th>",
        escape(&label(baseline))
    );
    for f in &base {
        t.push_str(&format!("<th>{}</th>", escape(f.name)));
    }
    t.push_str("</tr>");
    for r in group {
        let is_base = std::ptr::eq(*r, baseline);
        t.push_str(&format!(
            "<tr><td>{}{}</td>",
            escape(&label(r)),
            if is_base { " (baseline)" } else { "" }
        ));
        let mine = figures(r);
        for b in &base {
            let Some(m) = mine.iter().find(|m| m.name == b.name) else {
                t.push_str("<td>–</td>");
                continue;
            };
            if is_base || !m.value.is_finite() || !b.value.is_finite() {
                t.push_str(&format!("<td>{}</td>", escape(&(m.format)(m.value))));
                continue;
            }
            if b.value == 0.0 {
                // No percentage from zero; still better or worse.
                let class = match (m.value == 0.0, m.better, m.value > 0.0) {
                    (true, _, _) => "",
                    (false, Better::Higher, true) | (false, Better::Lower, false) => " class=\"better\"",
                    _ => " class=\"worse\"",
                };
                let note = if m.value == 0.0 { "" } else { " (from 0)" };
                t.push_str(&format!("<td{class}>{}{note}</td>", escape(&(m.format)(m.value))));
                continue;
            }
            let change = m.value / b.value - 1.0;
            let improved = match m.better {
                Better::Higher => change > 0.0,
                Better::Lower => change < 0.0,
            };
            let class = if change.abs() < 0.005 {
                ""
            } else if improved {
                " class=\"better\""
            } else {
                " class=\"worse\""
            };
            t.push_str(&format!(
                "<td{class}>{} ({:+.1}%)</td>",
                escape(&(m.format)(m.value)),
                100.0 * change
            ));
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t
}
