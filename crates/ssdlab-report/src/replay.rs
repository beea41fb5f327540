//! The trace-replay section: the storage bench's table (average data rate, average service time) with the
//! latency columns and the replay's fidelity, RAPID's comparison (a `cached:` result against its plain target on
//! the same trace) as percentages, and the per-second data rate and latency.

use ssdlab_core::schema::replay::ReplayAnalysis;
use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::Nanos;

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use std::fmt::Write as _;

use crate::{charts, escape, label, mb_s, series_of_phase, table};

fn measured(r: &RunResult) -> Option<&ReplayAnalysis> {
    match &r.analysis {
        Analysis::Replay(MethodAnalysis {
            measured: Some(a), ..
        }) => Some(a),
        _ => None,
    }
}

/// The trace a result replayed, as its options name it.
fn trace_of(r: &RunResult) -> String {
    match &r.options {
        ssdlab_core::schema::options::RunOptions::Test(t) => match &t.method {
            ssdlab_core::schema::options::MethodOptions::Replay(o) => o.trace.clone(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// Rate lines that differ by at most this share in every second are drawn as one.
const SAME_LINE: f64 = 0.05;

/// The trace-replay section: the storage bench's table (with each cached result against its plain drive on the
/// same trace), what its figures mean, and the data rate and latency per second.
pub(crate) fn replay(group: &[&RunResult]) -> String {
    let header: Vec<String> = [
        "",
        "trace",
        "operations",
        "avg data rate (MB/s)",
        "avg service time",
        "avg device time",
        "median",
        "99%",
        "maximum",
        "busy (s)",
        "issued >1 ms late",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = group.iter().map(|r| replay_row(r)).collect();
    let mut out = table(&header, &rows);
    out.push_str(&cached_changes(group));
    out.push_str(
        "<p>Average data rate is the bytes read and written over the time at least one operation was in flight; \
         average service time is the mean time from each operation's time in the trace (or its issue, replayed \
         as fast as possible) to its completion, as the trace-based storage benches report them; device time is \
         from each operation's submission, without the wait when the replay fell behind the trace.</p>",
    );
    out.push_str(&replay_charts(group));
    out
}

/// A result's row of the bench table: its trace, operations, the bench's figures, latency, busy time and
/// fidelity; or "not measured".
fn replay_row(r: &RunResult) -> Vec<String> {
    let ns = |v: u64| Nanos(v as f64).to_string();
    match measured(r) {
        Some(a) => vec![
            label(r),
            format!(
                "{} ({})",
                crate::labels::file_name_of(&trace_of(r)),
                a.format.name()
            ),
            a.replayed_ops.to_string(),
            mb_s(a.average_data_rate_bytes_per_s),
            Nanos(a.average_service_time_ns).to_string(),
            a.average_device_time_ns
                .map_or("–".into(), |t| Nanos(t).to_string()),
            ns(a.latency_ns.p50),
            ns(a.latency_ns.p99),
            ns(a.latency_ns.max),
            format!("{:.2}", a.busy_s),
            a.fidelity.map_or("as fast as possible".into(), |f| {
                format!("{:.2}%", 100.0 * f.late_over_1ms_ratio)
            }),
        ],
        None => vec![label(r), trace_of(r), "not measured".into()],
    }
}

/// RAPID's table: each cached drive against the same drive without the cache, on the same trace, as changes in
/// percent, each coloured by whether it is better (a higher data rate, a shorter time) or worse. Empty when no
/// result has its plain twin.
fn cached_changes(group: &[&RunResult]) -> String {
    let mut rows = vec![];
    for cached in group {
        let Some(plain_target) = crate::uncached_target(&cached.target.target) else {
            continue;
        };
        let Some(plain) = group
            .iter()
            .find(|r| r.target.target == plain_target && trace_of(r) == trace_of(cached))
        else {
            continue;
        };
        if let (Some(c), Some(p)) = (measured(cached), measured(plain)) {
            rows.push(change_row(cached, plain, c, p));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "<p>The cache's effect: each cached replay against the same drive without the cache, on the same trace \
         (green is better: a higher data rate, a shorter time).</p><div class=\"scroll\"><table><tr>",
    );
    for h in [
        "replays",
        "avg data rate",
        "avg service time",
        "avg device time",
        "median",
        "99%",
        "maximum",
    ] {
        let _ = write!(t, "<th>{h}</th>");
    }
    t.push_str("</tr>");
    for (name, changes) in rows {
        let _ = write!(t, "<tr><td>{}</td>", escape(&name));
        for change in changes {
            match change {
                Some((text, better)) => {
                    let class = if better { "better" } else { "worse" };
                    let _ = write!(t, "<td class=\"{class}\">{text}</td>");
                }
                None => t.push_str("<td>–</td>"),
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    t
}

/// The changes of a cached result `c` against its plain drive `p`, in percent, each with whether it is better:
/// the data rate first (higher is better), then the times (lower is better). None where a figure is missing.
type Change = Option<(String, bool)>;

fn change_row(
    cached: &RunResult,
    plain: &RunResult,
    c: &ReplayAnalysis,
    p: &ReplayAnalysis,
) -> (String, Vec<Change>) {
    let change = |a: f64, b: f64, higher_is_better: bool| -> Change {
        (b > 0.0 && a.is_finite()).then(|| {
            let percent = 100.0 * (a / b - 1.0);
            (
                format!("{percent:+.1}%"),
                (percent > 0.0) == higher_is_better || percent == 0.0,
            )
        })
    };
    (
        format!("{} vs {}", label(cached), label(plain)),
        vec![
            change(
                c.average_data_rate_bytes_per_s,
                p.average_data_rate_bytes_per_s,
                true,
            ),
            change(c.average_service_time_ns, p.average_service_time_ns, false),
            change(
                c.average_device_time_ns.unwrap_or(f64::NAN),
                p.average_device_time_ns.unwrap_or(f64::NAN),
                false,
            ),
            change(c.latency_ns.p50 as f64, p.latency_ns.p50 as f64, false),
            change(c.latency_ns.p99 as f64, p.latency_ns.p99 as f64, false),
            change(c.latency_ns.max as f64, p.latency_ns.max as f64, false),
        ],
    )
}

/// The data moved per second and the mean latency per second, one line per result.
fn replay_charts(group: &[&RunResult]) -> String {
    let mut rate = series_of_phase(
        group,
        |r| r.phases.iter().find(|p| p.name == "replay"),
        |p| p.samples.iter().map(|s| (s.t_s, s.bytes_per_s / 1e6)).collect(),
        Mark::Line,
    );
    merge_same_lines(&mut rate);
    let latency = series_of_phase(
        group,
        |r| r.phases.iter().find(|p| p.name == "replay"),
        |p| {
            p.samples
                .iter()
                .filter(|s| s.ios > 0)
                .map(|s| (s.t_s, s.latency_ns_mean / 1e3))
                .collect()
        },
        Mark::Line,
    );
    charts(&[
        Chart {
            title: "Data moved per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("MB/s", Scale::Linear).range(Some(0.0), None),
            series: rate,
        },
        Chart {
            title: "Mean latency per second".into(),
            x: Axis::new("time (s)", Scale::Linear),
            y: Axis::new("latency", Scale::Log10).format(crate::svg::micros),
            series: latency,
        },
    ])
}

/// Replays at the trace's own times move the data the trace moves, second by second: their lines lie on top of
/// each other and the chart would show one colour. When every line is within [`SAME_LINE`] of the first in each
/// second, they become one line that says so and how far apart they are.
fn merge_same_lines(rate: &mut Vec<Series>) {
    let differ = |a: &[(f64, f64)], b: &[(f64, f64)]| -> Option<f64> {
        (a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p.0 - q.0).abs() < 0.05)).then(|| {
            a.iter()
                .zip(b)
                .map(|(p, q)| (p.1 - q.1).abs() / p.1.abs().max(q.1.abs()).max(1e-9))
                .fold(0.0, f64::max)
        })
    };
    let spread: Option<f64> = rate
        .iter()
        .skip(1)
        .map(|s| differ(&s.points, &rate[0].points))
        .try_fold(0.0f64, |worst, d| d.map(|d| worst.max(d)));
    if rate.len() > 1
        && let Some(spread) = spread.filter(|&d| d <= SAME_LINE)
    {
        let n = rate.len();
        rate.truncate(1);
        rate[0].name = format!(
            "all {n} replays (the trace sets the pace; they differ by at most {:.1}% in any second)",
            100.0 * spread
        );
        rate[0].style = None;
    }
}

/// How a trace replay result is shown.
pub(crate) struct Replay;

impl crate::views::View for Replay {
    type Analysis = ssdlab_core::schema::replay::ReplayAnalysis;
    const HEADING: &'static str = "Trace replay: the storage bench's average data rate and service time";
    const STORY: &'static str = "A recorded workload replayed against the drive, as the trace-based storage benches (AnandTech's Storage Bench) run them: the average data rate and the average service time are the bench's figures. A cached result is set against the same drive without its cache on the same trace, as RAPID was judged.";
    const MEASURED_PHASES: &'static [&'static str] = &["replay"];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        replay(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::replay_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::replay(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::replay(analysis)
    }
}
