//! A fan-out's findings for other tools: Prometheus metrics (node_exporter's textfile collector) and a CSV with
//! one row per drive. Pure formatting of the analysis.

use std::fmt::Write;

use ssdlab_core::prom::{Exposition, MetricType};
use ssdlab_core::schema::LatencyNs;
use ssdlab_core::schema::fanout::FanoutAnalysis;

fn quantiles(e: &mut Exposition, name: &str, help: &str, labels: &[(&str, &str)], l: &LatencyNs) {
    // A gauge per percentile, labelled as the scan's are: promtool keeps "quantile" for summaries.
    for (statistic, ns) in [
        ("p50", l.p50 as f64),
        ("p95", l.p95 as f64),
        ("p99", l.p99 as f64),
        ("p999", l.p999 as f64),
        ("mean", l.mean),
    ] {
        let mut with = labels.to_vec();
        with.push(("statistic", statistic));
        e.sample(name, MetricType::Gauge, help, &with, ns / 1e9);
    }
}

/// Adds the fan-out's metrics; `finished_at_s` is when it finished (Unix seconds).
pub fn fanout_metrics(e: &mut Exposition, a: &FanoutAnalysis, finished_at_s: u64) {
    use MetricType::Gauge;
    e.sample(
        "ssdlab_fanout_timestamp_seconds",
        Gauge,
        "When the last fan-out measurement finished, Unix time.",
        &[],
        finished_at_s as f64,
    );
    for d in &a.drives {
        let labels = [("drive", d.name.as_str()), ("target", d.target.as_str())];
        quantiles(
            e,
            "ssdlab_fanout_read_latency_seconds",
            "Read latency of the drive under the fan-out's load.",
            &labels,
            &d.latency_ns,
        );
    }
    for s in &a.stragglers {
        e.sample(
            "ssdlab_fanout_tail_share_ratio",
            Gauge,
            "The probability that this drive is the slowest of a query at or beyond the query's p99.",
            &[("drive", s.name.as_str())],
            s.share_of_p99_ratio,
        );
    }
    quantiles(
        e,
        "ssdlab_fanout_query_latency_seconds",
        "Latency of a query that waits for every drive, computed from the drives' latencies.",
        &[],
        &a.query.latency_ns,
    );
    e.sample(
        "ssdlab_fanout_stragglers",
        Gauge,
        "Drives that take at least twice their fair share of the query's p99 tail.",
        &[],
        a.dominant.len() as f64,
    );
}

/// One row per drive: its latency columns (microseconds) and its shares of the query's tail.
pub fn drives_csv(a: &FanoutAnalysis) -> String {
    let mut out = String::from(
        "drive,target,data_age_months,reads,p25_us,p50_us,p75_us,p95_us,p99_us,p999_us,mean_us,max_us,share_of_p95_ratio,share_of_p99_ratio\n",
    );
    for d in &a.drives {
        let share = a.stragglers.iter().find(|s| s.name == d.name);
        let l = &d.latency_ns;
        let us = |ns: u64| ns as f64 / 1e3;
        let _ = writeln!(
            out,
            "{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.4},{:.4}",
            csv_field(&d.name),
            csv_field(&d.target),
            d.data_age_months.map_or(String::new(), |m| format!("{m:.2}")),
            d.reads,
            us(l.p25),
            us(l.p50),
            us(l.p75),
            us(l.p95),
            us(l.p99),
            us(l.p999),
            l.mean / 1e3,
            us(l.max),
            share.map_or(0.0, |s| s.share_of_p95_ratio),
            share.map_or(0.0, |s| s.share_of_p99_ratio),
        );
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}
