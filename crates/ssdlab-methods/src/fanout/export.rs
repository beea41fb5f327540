//! A fan-out's findings for other tools: Prometheus metrics (node_exporter's textfile collector) and a CSV with
//! one row per drive. Pure formatting of the analysis.

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
