//! A fan-out's findings for other tools: Prometheus metrics (node_exporter's textfile collector) and a CSV with
//! one row per drive. Pure formatting of the analysis.

use ssdlab_core::histogram::bucket_range;
use ssdlab_core::prom::{Exposition, MetricType};
use ssdlab_core::schema::LatencyNs;
use ssdlab_core::schema::fanout::FanoutAnalysis;
use ssdlab_core::schema::fanout::HistogramBuckets;

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

/// The classic-histogram edges the drives' latencies are exported at: four an octave (1, 1.25, 1.5 and 1.75
/// times a power of two nanoseconds) from about 1 us to about 34 s. Each is an edge of the log-linear
/// histogram's own buckets (128 an octave), so every count below an edge is exact; PromQL's
/// `histogram_quantile` then interpolates within a quarter octave (up to 25% between edges).
pub fn histogram_edges_ns() -> impl Iterator<Item = u64> {
    (10..35).flat_map(|octave| (4..8u64).map(move |quarter| (quarter << octave) / 4))
}

/// (`le` in seconds, reads at or below it) for each of [`histogram_edges_ns`], from the drive's exact buckets.
/// Latencies are whole nanoseconds, so the reads below an edge are those at or below one nanosecond less: that
/// is the `le` exported, and Prometheus's "less or equal" holds exactly.
fn cumulative(h: &HistogramBuckets) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut buckets = h.buckets.iter().peekable();
    let mut below = 0;
    for edge in histogram_edges_ns() {
        while let Some(&&(index, n)) = buckets.peek() {
            let (lo, width) = bucket_range(index as usize);
            if lo + width > edge {
                // Edges fall on bucket boundaries: a bucket is wholly below an edge or wholly at or above it.
                assert!(lo >= edge, "edge {edge} ns splits bucket [{lo}, {})", lo + width);
                break;
            }
            below += n;
            buckets.next();
        }
        out.push(((edge - 1) as f64 / 1e9, below));
    }
    out
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
    // The same reads as classic histograms, so PromQL can rank drives across hosts (histogram_quantile); the
    // query over several hosts' drives needs their histograms multiplied, which is `fanout --from`'s job.
    for d in &a.drives {
        let labels = [("drive", d.name.as_str()), ("target", d.target.as_str())];
        e.histogram(
            "ssdlab_fanout_read_duration_seconds",
            "Read latency of the drive under the fan-out's load, in buckets.",
            &labels,
            &cumulative(&d.histogram),
            d.histogram.count,
            d.histogram.mean_ns * d.histogram.count as f64 / 1e9,
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
        "Drives named as making the query slow: at some percentile, at least twice their fair share of its tail beyond chance, with a fix that moves it beyond noise.",
        &[],
        a.dominant.len() as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::histogram::Histogram;

    /// Every exported bucket counts exactly the reads below its edge: the edges are edges of the log-linear
    /// histogram's own buckets.
    #[test]
    fn exported_buckets_count_exactly_the_reads_below_each_edge() {
        let values = [
            1000,
            1023,
            1024,
            1500,
            2047,
            2048,
            2559,
            2560,
            5000,
            77_777,
            1_000_000_000,
            u64::MAX / 4,
        ];
        let mut h = Histogram::new();
        for v in values {
            h.record(v);
        }
        let buckets = HistogramBuckets::of(&h.to_sparse());
        let exported = cumulative(&buckets);
        assert_eq!(exported.len(), 100);
        for ((le_s, below), edge_ns) in exported.iter().zip(histogram_edges_ns()) {
            assert_eq!(*le_s, (edge_ns - 1) as f64 / 1e9);
            let exact = values.iter().filter(|&&v| v as f64 / 1e9 <= *le_s).count() as u64;
            assert_eq!(*below, exact, "below {edge_ns} ns");
        }
        // The edges ascend: 1024, 1280, 1536, 1792, 2048, ...
        let first: Vec<u64> = histogram_edges_ns().take(5).collect();
        assert_eq!(first, [1024, 1280, 1536, 1792, 2048]);
    }
}
