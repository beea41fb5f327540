//! Health as Prometheus metrics, one series per drive labelled by device, serial and model, named as the
//! conventions ask (`_bytes_total` for byte counters, `_seconds`, `_ratio`, `_celsius`).

use ssdlab_core::prom::MetricType::{Counter, Gauge};
use ssdlab_core::prom::{Exposition, MetricType};
use ssdlab_core::schema::health::{DriveHealth, HealthLevel, HealthSnapshot};

use crate::history::DAY_S;

/// Adds every drive's metrics to `exposition`, and whether each DEVICE (`read_ok`: as given, read or not) was read.
/// `wear_warn_percent` is the threshold the verdicts warned from, exported beside each drive's wear so an alert
/// can compare them.
pub fn health_metrics(
    exposition: &mut Exposition,
    drives: &[DriveHealth],
    read_ok: &[(String, bool)],
    wear_warn_percent: f64,
) {
    read_ok_metrics(exposition, read_ok);
    for d in newest_per_drive(drives) {
        let id = &d.snapshot.identity;
        let mut series = DriveSeries {
            exposition: &mut *exposition,
            labels: [
                ("device", id.source.as_str()),
                ("serial", id.serial.as_str()),
                ("model", id.model.as_str()),
            ],
        };
        series.verdict_and_writes(d);
        series.condition(&d.snapshot);
        series.rated_life(d, wear_warn_percent);
        series.remaining_life(d);
    }
}

/// Whether each drive asked about (a DEVICE, labelled as given) could be read, once per device: a fleet alert on
/// 0 catches a drive that vanished or whose smartctl fails, which would otherwise only show as stale series.
/// Saved files are not live reads and get none.
fn read_ok_metrics(exposition: &mut Exposition, read_ok: &[(String, bool)]) {
    let read_ok_help =
        "1 if ssdlab could read the drive's health this time, 0 if not (the reason is in its output).";
    let mut seen: Vec<&str> = vec![];
    for (device, ok) in read_ok {
        if !seen.contains(&device.as_str()) {
            seen.push(device);
            let value = if *ok { 1.0 } else { 0.0 };
            exposition.sample(
                "ssdlab_health_read_ok",
                Gauge,
                read_ok_help,
                &[("device", device)],
                value,
            );
        }
    }
}

/// One entry per drive (by device, serial and model), in the order first given: the same drive given twice (a
/// device and a saved file of it) keeps its newest snapshot, as duplicate series are invalid.
fn newest_per_drive(drives: &[DriveHealth]) -> Vec<&DriveHealth> {
    let key = |d: &DriveHealth| {
        let id = &d.snapshot.identity;
        (id.source.clone(), id.serial.clone(), id.model.clone())
    };
    let mut newest: Vec<&DriveHealth> = vec![];
    for d in drives {
        match newest.iter().position(|k| key(k) == key(d)) {
            Some(i) if d.snapshot.taken_at_s >= newest[i].snapshot.taken_at_s => newest[i] = d,
            Some(_) => {}
            None => newest.push(d),
        }
    }
    newest
}

/// One drive's series: the exposition they go into, and the labels (device, serial, model) each carries.
struct DriveSeries<'e, 'd> {
    exposition: &'e mut Exposition,
    labels: [(&'static str, &'d str); 3],
}

impl DriveSeries<'_, '_> {
    /// Adds the sample `name` when there is a `value`.
    fn put(&mut self, name: &str, kind: MetricType, help: &str, value: Option<f64>) {
        if let Some(v) = value {
            self.exposition.sample(name, kind, help, &self.labels, v);
        }
    }

    /// The verdict, when the snapshot was taken, and the writes: host and NAND bytes over the drive's life, write
    /// amplification over its life and over the window, and the window's write rates.
    fn verdict_and_writes(&mut self, d: &DriveHealth) {
        let s = &d.snapshot;
        self.put(
            "ssdlab_health_verdict",
            Gauge,
            "ssdlab's verdict on the drive: 0 OK, 1 WARN, 2 FAIL; absent when no health data was read (reasons in \
             ssdlab health's output).",
            match d.verdict.level {
                HealthLevel::Ok => Some(0.0),
                HealthLevel::Warn => Some(1.0),
                HealthLevel::Fail => Some(2.0),
                HealthLevel::Unknown => None,
            },
        );
        self.put(
            "ssdlab_health_snapshot_timestamp_seconds",
            Gauge,
            "When the drive's health data was read, Unix time.",
            Some(s.taken_at_s as f64),
        );
        self.put(
            "ssdlab_host_written_bytes_total",
            Counter,
            "Bytes the host wrote to the drive over its life.",
            s.host_written_bytes.map(|b| b as f64),
        );
        self.put(
            "ssdlab_host_read_bytes_total",
            Counter,
            "Bytes the host read from the drive over its life.",
            s.host_read_bytes.map(|b| b as f64),
        );
        self.put(
            "ssdlab_nand_written_bytes_total",
            Counter,
            "Bytes the drive programmed into NAND over its life (absent when the drive does not expose it).",
            s.nand_written_bytes.map(|b| b as f64),
        );
        self.put(
            "ssdlab_write_amplification_ratio",
            Gauge,
            "NAND bytes over host bytes written over the drive's life.",
            d.lifetime_write_amplification_ratio,
        );
        self.window_rates(d);
    }

    /// The history window's write amplification and write rates (per second: Prometheus wants base units, the
    /// JSON keeps per day, as people read it).
    fn window_rates(&mut self, d: &DriveHealth) {
        self.put(
            "ssdlab_window_write_amplification_ratio",
            Gauge,
            "NAND bytes over host bytes written over the history window.",
            d.rates.as_ref().and_then(|r| r.write_amplification_ratio),
        );
        self.put(
            "ssdlab_host_written_bytes_per_second",
            Gauge,
            "Host bytes written per second, averaged over the history window.",
            d.rates
                .as_ref()
                .and_then(|r| r.host_written_bytes_per_day)
                .map(|per_day| per_day / 86_400.0),
        );
        self.put(
            "ssdlab_nand_written_bytes_per_second",
            Gauge,
            "NAND bytes written per second, averaged over the history window.",
            d.rates
                .as_ref()
                .and_then(|r| r.nand_written_bytes_per_day)
                .map(|per_day| per_day / 86_400.0),
        );
    }

    /// The drive's condition: power-on time, temperature, wear, spare, and the errors and retired blocks it
    /// counted.
    fn condition(&mut self, s: &HealthSnapshot) {
        self.put(
            "ssdlab_power_on_seconds_total",
            Counter,
            "Time the drive has been powered on.",
            s.power_on_hours.map(|h| h as f64 * 3600.0),
        );
        self.put(
            "ssdlab_temperature_celsius",
            Gauge,
            "The drive's temperature.",
            s.temperature_celsius,
        );
        self.put(
            "ssdlab_wear_used_ratio",
            Gauge,
            "Rated endurance used (1 = all of it; may exceed 1).",
            s.wear_used_percent.map(|p| p / 100.0),
        );
        self.put(
            "ssdlab_available_spare_ratio",
            Gauge,
            "Spare capacity left, as the drive normalizes it (1 = all).",
            s.available_spare_percent.map(|p| p / 100.0),
        );
        self.put(
            "ssdlab_media_errors_total",
            Counter,
            "Uncorrectable media errors the drive reported.",
            s.media_errors.map(|v| v as f64),
        );
        self.put(
            "ssdlab_crc_errors_total",
            Counter,
            "Interface CRC errors (cable or backplane).",
            s.crc_errors.map(|v| v as f64),
        );
        self.put(
            "ssdlab_reallocated_total",
            Counter,
            "Blocks or sectors retired and replaced from spare.",
            s.reallocated.map(|v| v as f64),
        );
    }

    /// The rated life left (by the figure showing the most used) and the wear threshold the verdict warns from.
    fn rated_life(&mut self, d: &DriveHealth, wear_warn_percent: f64) {
        self.put(
            "ssdlab_rated_life_remaining_ratio",
            Gauge,
            "Rated endurance left (1 = all), by whichever of wear indicator, TBW or P/E cycles shows the most used.",
            d.rated_life.as_ref().map(|l| l.remaining_percent / 100.0),
        );
        self.put(
            "ssdlab_wear_warn_threshold_ratio",
            Gauge,
            "Rated endurance used from which ssdlab's verdict warns (ssdlab health --wear-warn).",
            Some(wear_warn_percent / 100.0),
        );
    }

    /// The remaining life the wear trend gives, one series per bound (estimate, low, high) it has.
    fn remaining_life(&mut self, d: &DriveHealth) {
        let life_help = "Estimated remaining life from the wear trend (bound: estimate, low, high).";
        for (bound, days) in [
            ("estimate", d.life.remaining_days),
            ("low", d.life.remaining_days_low),
            ("high", d.life.remaining_days_high),
        ] {
            if let Some(days) = days {
                let mut with_bound = self.labels.to_vec();
                with_bound.push(("bound", bound));
                self.exposition.sample(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtual_drive::{VirtualDrive, snapshot};
    use ssdlab_core::schema::DeviceCounters;

    #[test]
    fn the_same_drive_twice_is_one_series_with_its_newest_snapshot() {
        let drive = |host: u64, t: u64| {
            let v = VirtualDrive {
                target: "sim:x".into(),
                model: "m".into(),
                capacity_bytes: 1 << 30,
                counters: DeviceCounters {
                    host_bytes_written: host,
                    ..DeviceCounters::default()
                },
                host_read_bytes: None,
                rated_pe_cycles: 1000,
                powered_s: 0.0,
                origin: None,
            };
            crate::assess(&snapshot(&v, t), vec![], None, None)
        };
        let mut e = Exposition::new();
        health_metrics(&mut e, &[drive(2000, 20), drive(1000, 10)], &[], 80.0);
        let text = e.render();
        let written: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ssdlab_host_written_bytes_total{"))
            .collect();
        assert_eq!(written.len(), 1, "{text}");
        assert!(written[0].ends_with(" 2000"), "{text}");
    }
}
