//! A scan's findings as Prometheus metrics, for a weekly scan that node_exporter's textfile collector picks up:
//! read speed per device and per data-age bucket (the field report's columns), files flagged, and the hours a
//! bulk read of the data would take.

use ssdlab_core::prom::{Exposition, MetricType};
use ssdlab_core::schema::{PercentileColumns, RegionScanAnalysis, ScanAnalysis};

fn columns(
    e: &mut Exposition,
    name: &str,
    help: &str,
    labels: &[(&str, &str)],
    speed_bytes_per_s: &PercentileColumns,
) {
    for (statistic, value) in [
        ("p25", speed_bytes_per_s.p25),
        ("p50", speed_bytes_per_s.p50),
        ("p75", speed_bytes_per_s.p75),
        ("p95", speed_bytes_per_s.p95),
        ("mean", speed_bytes_per_s.mean),
    ] {
        let mut with = labels.to_vec();
        with.push(("statistic", statistic));
        e.sample(name, MetricType::Gauge, help, &with, value);
    }
}

/// Adds a file scan's metrics; `finished_at_s` is when the scan ended (Unix seconds).
pub fn scan_metrics(e: &mut Exposition, a: &ScanAnalysis, finished_at_s: u64) {
    use MetricType::Gauge;
    e.sample(
        "ssdlab_scan_timestamp_seconds",
        Gauge,
        "When the last stale-data scan finished, Unix time.",
        &[],
        finished_at_s as f64,
    );
    e.sample(
        "ssdlab_scan_baseline_read_bytes_per_second",
        Gauge,
        "Read speed of recently written files, the baseline slowdowns are measured against.",
        &[],
        a.baseline_bytes_per_s,
    );
    e.sample(
        "ssdlab_scan_bulk_read_seconds",
        Gauge,
        "Projected time to read every scanned file once at the measured speeds.",
        &[],
        a.total_bulk_read_hours * 3600.0,
    );
    for d in &a.devices {
        let labels = [("device", d.device.as_str())];
        e.sample(
            "ssdlab_scan_files",
            Gauge,
            "Files scanned on the device.",
            &labels,
            f64::from(d.files),
        );
        e.sample(
            "ssdlab_scan_bytes",
            Gauge,
            "Bytes scanned on the device.",
            &labels,
            d.bytes as f64,
        );
        e.sample(
            "ssdlab_scan_flagged_files",
            Gauge,
            "Files read slower than the threshold against the baseline.",
            &labels,
            f64::from(d.flagged),
        );
        e.sample(
            "ssdlab_scan_bulk_read_900gb_seconds",
            Gauge,
            "Projected time to bulk-read 900 GB at the device's measured speeds (the field report's figure).",
            &labels,
            d.hours_per_900gb * 3600.0,
        );
        columns(
            e,
            "ssdlab_scan_read_bytes_per_second",
            "File read speed on the device (statistic: p25, p50, p75, p95, mean over files).",
            &labels,
            &d.speed_bytes_per_s,
        );
    }
    for b in &a.buckets {
        let from = format!("{}", b.months_from);
        let to = b.months_to.map_or("+Inf".to_string(), |t| format!("{t}"));
        let labels = [("age_months_from", from.as_str()), ("age_months_to", to.as_str())];
        e.sample(
            "ssdlab_scan_age_files",
            Gauge,
            "Files scanned whose data is of this age.",
            &labels,
            f64::from(b.files),
        );
        columns(
            e,
            "ssdlab_scan_age_read_bytes_per_second",
            "File read speed by data age (statistic: p25, p50, p75, p95, mean over files).",
            &labels,
            &b.speed_bytes_per_s,
        );
    }
}

/// Adds a region scan's metrics.
pub fn region_scan_metrics(e: &mut Exposition, device: &str, a: &RegionScanAnalysis, finished_at_s: u64) {
    use MetricType::Gauge;
    let labels = [("device", device)];
    e.sample(
        "ssdlab_region_scan_timestamp_seconds",
        Gauge,
        "When the last region scan of the device finished, Unix time.",
        &labels,
        finished_at_s as f64,
    );
    for (statistic, bytes_per_s) in [
        ("min", a.min_bytes_per_s),
        ("median", a.median_bytes_per_s),
        ("max", a.max_bytes_per_s),
    ] {
        e.sample(
            "ssdlab_region_scan_read_bytes_per_second",
            Gauge,
            "Read speed across the device's regions (statistic: min, median, max).",
            &[("device", device), ("statistic", statistic)],
            bytes_per_s,
        );
    }
    e.sample(
        "ssdlab_region_scan_slow_regions",
        Gauge,
        "Regions read slower than the threshold against the median.",
        &labels,
        a.slow_region_offsets.len() as f64,
    );
    e.sample(
        "ssdlab_region_scan_unreadable_regions",
        Gauge,
        "Regions whose read failed (the speeds are of the others).",
        &labels,
        a.unreadable_region_offsets.len() as f64,
    );
}
