//! The Prometheus text exposition format (version 0.0.4), for node_exporter's textfile collector: one
//! `# HELP` and one `# TYPE` line per metric family, then its samples. Names are snake_case with the unit as a
//! suffix and `_total` for counters; label values are escaped. Building the text is pure; writing it
//! atomically (a temporary file renamed into place) is the binary's job.

use std::fmt::Write;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    /// Cumulative buckets (`_bucket` with `le`), `_sum` and `_count`: added with [`Exposition::histogram`].
    Histogram,
}

struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<Sample>,
}

/// (name suffix, labels, value): the suffix is empty but for a histogram's `_bucket`, `_sum` and `_count`.
type Sample = (&'static str, Vec<(String, String)>, f64);

/// Metric families in the order they were first named.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub fn new() -> Self {
        Exposition::default()
    }

    /// Adds a sample to the family `name`, creating it with `help` and `kind` on first use. A value that is not
    /// finite is left out (the format allows NaN, but a missing reading is better absent than NaN).
    pub fn sample(&mut self, name: &str, kind: MetricType, help: &str, labels: &[(&str, &str)], value: f64) {
        if kind == MetricType::Counter {
            assert!(name.ends_with("_total"), "counter {name} must end in _total");
        }
        assert!(
            kind != MetricType::Histogram,
            "{name}: a histogram is added with histogram()"
        );
        self.push(name, kind, help, "", labels, value);
    }

    /// Adds a classic histogram series to the family `name`: `cumulative` holds (upper edge, observations at
    /// or below it) in ascending order, and the `+Inf` bucket is `count`.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        cumulative: &[(f64, u64)],
        count: u64,
        sum: f64,
    ) {
        assert!(
            cumulative.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
                && cumulative.last().is_none_or(|l| l.1 <= count),
            "{name}: buckets must ascend and be cumulative"
        );
        for &(le, n) in cumulative {
            let edge = format_value(le);
            let mut with = labels.to_vec();
            with.push(("le", &edge));
            self.push(name, MetricType::Histogram, help, "_bucket", &with, n as f64);
        }
        let mut with = labels.to_vec();
        with.push(("le", "+Inf"));
        self.push(name, MetricType::Histogram, help, "_bucket", &with, count as f64);
        self.push(name, MetricType::Histogram, help, "_sum", labels, sum);
        self.push(name, MetricType::Histogram, help, "_count", labels, count as f64);
    }

    fn push(
        &mut self,
        name: &str,
        kind: MetricType,
        help: &str,
        suffix: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        assert!(
            valid_name(name),
            "metric name {name:?} is not [a-zA-Z_:][a-zA-Z0-9_:]*"
        );
        if !value.is_finite() {
            return;
        }
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.into(),
                    help: help.into(),
                    kind,
                    samples: vec![],
                });
                self.families.len() - 1
            }
        };
        let labels = labels
            .iter()
            .map(|(k, v)| {
                assert!(valid_name(k) && !k.contains(':'), "label name {k:?}");
                (k.to_string(), v.to_string())
            })
            .collect();
        assert_eq!(self.families[index].kind, kind, "{name}: one type per family");
        self.families[index].samples.push((suffix, labels, value));
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let kind = match f.kind {
                MetricType::Counter => "counter",
                MetricType::Gauge => "gauge",
                MetricType::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            for (suffix, labels, value) in &f.samples {
                out.push_str(&f.name);
                out.push_str(suffix);
                if !labels.is_empty() {
                    let inner: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                        .collect();
                    let _ = write!(out, "{{{}}}", inner.join(","));
                }
                let _ = writeln!(out, " {}", format_value(*value));
            }
        }
        out
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Whole numbers without an exponent up to 2^53 (where a double is still exact); other values in the shortest
/// form that reads back exactly, with an exponent only when very large or very small.
fn format_value(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        format!("{}", value as i64)
    } else if value.abs() >= 1e15 || value.abs() < 1e-4 {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_grouped_and_labels_escaped() {
        let mut e = Exposition::new();
        let help = "Bytes the host wrote.";
        e.sample(
            "ssdlab_host_written_bytes_total",
            MetricType::Counter,
            help,
            &[("serial", "A\"1")],
            1e3,
        );
        e.sample(
            "ssdlab_temperature_celsius",
            MetricType::Gauge,
            "Temperature.",
            &[],
            36.5,
        );
        e.sample(
            "ssdlab_host_written_bytes_total",
            MetricType::Counter,
            help,
            &[("serial", "B\\2")],
            2.0,
        );
        e.sample(
            "ssdlab_temperature_celsius",
            MetricType::Gauge,
            "Temperature.",
            &[],
            f64::NAN,
        );
        assert_eq!(
            e.render(),
            "# HELP ssdlab_host_written_bytes_total Bytes the host wrote.\n\
             # TYPE ssdlab_host_written_bytes_total counter\n\
             ssdlab_host_written_bytes_total{serial=\"A\\\"1\"} 1000\n\
             ssdlab_host_written_bytes_total{serial=\"B\\\\2\"} 2\n\
             # HELP ssdlab_temperature_celsius Temperature.\n\
             # TYPE ssdlab_temperature_celsius gauge\n\
             ssdlab_temperature_celsius 36.5\n"
        );
    }

    #[test]
    #[should_panic(expected = "must end in _total")]
    fn a_counter_without_total_is_a_bug() {
        Exposition::new().sample("ssdlab_bytes", MetricType::Counter, "x", &[], 1.0);
    }

    #[test]
    fn huge_values_use_an_exponent() {
        assert_eq!(format_value(1e21), "1e21");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(2e-7), "2e-7");
    }
}
