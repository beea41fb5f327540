//! Health as Prometheus metrics, one series per drive labelled by device, serial and model, named as the
//! conventions ask (`_bytes_total` for byte counters, `_seconds`, `_ratio`, `_celsius`).

use ssdlab_core::prom::{Exposition, MetricType};
use ssdlab_core::schema::health::{DriveHealth, HealthLevel};

use crate::history::DAY_S;

/// Adds every drive's metrics to `exposition`.
pub fn health_metrics(exposition: &mut Exposition, drives: &[DriveHealth]) {
    use MetricType::{Counter, Gauge};
    for d in drives {
        let s = &d.snapshot;
        let id = &s.identity;
        let labels = [
            ("device", id.source.as_str()),
            ("serial", id.serial.as_str()),
            ("model", id.model.as_str()),
        ];
        let mut put = |name: &str, kind, help: &str, value: Option<f64>| {
            if let Some(v) = value {
                exposition.sample(name, kind, help, &labels, v);
            }
        };
        put(
            "ssdlab_health_verdict",
            Gauge,
            "ssdlab's verdict on the drive: 0 OK, 1 WARN, 2 FAIL (reasons in ssdlab health's output).",
            Some(match d.verdict.level {
                HealthLevel::Ok => 0.0,
                HealthLevel::Warn => 1.0,
                HealthLevel::Fail => 2.0,
            }),
        );
        put(
            "ssdlab_health_snapshot_timestamp_seconds",
            Gauge,
            "When the drive's health data was read, Unix time.",
            Some(s.taken_at_s as f64),
        );
        put(
            "ssdlab_host_written_bytes_total",
            Counter,
            "Bytes the host wrote to the drive over its life.",
            s.host_written_bytes.map(|b| b as f64),
        );
        put(
            "ssdlab_host_read_bytes_total",
            Counter,
            "Bytes the host read from the drive over its life.",
            s.host_read_bytes.map(|b| b as f64),
        );
        put(
            "ssdlab_nand_written_bytes_total",
            Counter,
            "Bytes the drive programmed into NAND over its life (absent when the drive does not expose it).",
            s.nand_written_bytes.map(|b| b as f64),
        );
        put(
            "ssdlab_write_amplification_ratio",
            Gauge,
            "NAND bytes over host bytes written over the drive's life.",
            d.lifetime_write_amplification_ratio,
        );
        put(
            "ssdlab_window_write_amplification_ratio",
            Gauge,
            "NAND bytes over host bytes written over the history window.",
            d.rates.as_ref().and_then(|r| r.write_amplification_ratio),
        );
        put(
            "ssdlab_host_written_bytes_per_day",
            Gauge,
            "Host bytes written per day over the history window.",
            d.rates.as_ref().and_then(|r| r.host_written_bytes_per_day),
        );
        put(
            "ssdlab_power_on_seconds_total",
            Counter,
            "Time the drive has been powered on.",
            s.power_on_hours.map(|h| h as f64 * 3600.0),
        );
        put(
            "ssdlab_temperature_celsius",
            Gauge,
            "The drive's temperature.",
            s.temperature_celsius,
        );
        put(
            "ssdlab_wear_used_ratio",
            Gauge,
            "Rated endurance used (1 = all of it; may exceed 1).",
            s.wear_used_percent.map(|p| p / 100.0),
        );
        put(
            "ssdlab_available_spare_ratio",
            Gauge,
            "Spare capacity left, as the drive normalizes it (1 = all).",
            s.available_spare_percent.map(|p| p / 100.0),
        );
        put(
            "ssdlab_media_errors_total",
            Counter,
            "Uncorrectable media errors the drive reported.",
            s.media_errors.map(|v| v as f64),
        );
        put(
            "ssdlab_crc_errors_total",
            Counter,
            "Interface CRC errors (cable or backplane).",
            s.crc_errors.map(|v| v as f64),
        );
        put(
            "ssdlab_reallocated_total",
            Counter,
            "Blocks or sectors retired and replaced from spare.",
            s.reallocated.map(|v| v as f64),
        );
        let life_help = "Estimated remaining life from the wear trend (bound: estimate, low, high).";
        for (bound, days) in [
            ("estimate", d.life.remaining_days),
            ("low", d.life.remaining_days_low),
            ("high", d.life.remaining_days_high),
        ] {
            if let Some(days) = days {
                let mut with_bound = labels.to_vec();
                with_bound.push(("bound", bound));
                exposition.sample(
                    "ssdlab_remaining_life_seconds",
                    Gauge,
                    life_help,
                    &with_bound,
                    days * DAY_S,
                );
            }
        }
    }
}
