//! Flag values turned into typed values, each error naming the flag and the way to write it: sizes, durations,
//! spans. Plans are built from these before anything runs.

use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::{Rate, parse_duration_ns, parse_rate, parse_size};
/// What `--rw` names, as the command line parses it.
pub use ssdlab_engine::workload::RwMode;
use ssdlab_engine::workload::Span;

/// A duration for a flag's value parser (`60s`, `500ms`, `40m`): the error says how to write one, and what fio's
/// bare number meant. The command line's parser names the flag around it.
pub fn duration_arg(text: &str) -> Result<u64, String> {
    parse_duration_ns(text).map_err(|e| match text.trim().parse::<f64>() {
        Ok(n) => format!("a duration needs its unit; fio's bare {n} means {n}s"),
        Err(_) => e.to_string(),
    })
}

/// A size for a flag's value parser (`4k`, `1g`, `512`).
pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// `--rw` for its value parser: fio's names, with fio's sequential mix (which ssdlab does not run) answered with
/// what it does instead.
pub fn rw_arg(text: &str) -> Result<RwMode, String> {
    RwMode::parse(text).ok_or_else(|| match text {
        "rw" | "readwrite" => {
            "fio's sequential mix of reads and writes; ssdlab mixes at random offsets (--rw randrw \
                               --mix 70), or runs --rw read and --rw write apart"
                .to_string()
        }
        _ => format!("use {}", RwMode::NAMES),
    })
}

/// `--rate` for its value parser: bytes per second (`200m`) or operations per second (`50kiops`).
pub fn rate_arg(text: &str) -> Result<Rate, String> {
    parse_rate(text).map_err(|e| e.to_string())
}

/// A flag's value parsed at the command line, with the words it was given in: messages and result.json quote the
/// user's own text (`--runtime 60s`, not 60000000000 ns), while everything that computes uses `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Given<T> {
    pub text: String,
    pub value: T,
}

impl<T> Given<T> {
    /// A value the program chose itself (the demo's plans), written as the user would write it.
    pub fn of(text: &str, value: T) -> Self {
        Given {
            text: text.to_string(),
            value,
        }
    }
}

/// A duration for a flag's value parser, kept with its text (see [`duration_arg`]).
pub fn given_duration(text: &str) -> Result<Given<u64>, String> {
    duration_arg(text).map(|ns| Given::of(text, ns))
}

/// An age of data for a flag's value parser (`90d`, `3mo`, `6w`), kept with its text. A bare number is refused
/// without fio's reading: 90 means days to one user and seconds to another.
pub fn given_age(text: &str) -> Result<Given<u64>, String> {
    parse_duration_ns(text)
        .map(|ns| Given::of(text, ns))
        .map_err(|e| match text.trim().parse::<f64>() {
            Ok(n) => format!("an age needs its unit, e.g. {n}d, {n}w or {n}mo"),
            Err(_) => e.to_string(),
        })
}

/// A size for a flag's value parser, kept with its text.
pub fn given_size(text: &str) -> Result<Given<u64>, String> {
    size_arg(text).map(|bytes| Given::of(text, bytes))
}

/// A target for a flag's value parser, kept as written (results and messages name it so).
pub fn given_target(text: &str) -> Result<Given<TargetSpec>, String> {
    TargetSpec::parse(text)
        .map(|spec| Given::of(text, spec))
        .map_err(|e| e.to_string())
}

/// A percentile written `p95`, `95` or `99.9`, for a flag's value parser (from p50 to below p100), kept with its
/// text.
pub fn given_percentile(text: &str) -> Result<Given<f64>, String> {
    percentile_arg(text).map(|value| Given::of(text, value))
}

/// A percentile written `p95`, `95` or `99.9`: from p50 to below p100.
fn percentile_arg(text: &str) -> Result<f64, String> {
    let value = percent(text.trim_start_matches(['p', 'P']))
        .map_err(|_| "write a percentile, e.g. p95".to_string())?;
    if !(50.0..100.0).contains(&value) {
        return Err("use a percentile from p50 to below p100, e.g. p95".into());
    }
    Ok(value)
}

/// `--span` as given: a share of the capacity or a byte range. Which bytes it means is known once the device is
/// open ([`SpanFlag::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpanFlag {
    /// Above 0 and at most 100 percent of the capacity, from its start.
    Percent(f64),
    Range {
        offset_bytes: u64,
        len_bytes: u64,
    },
    /// `OFFSET:`: from an offset to the end (fio's `--offset`).
    From {
        offset_bytes: u64,
    },
}

impl std::str::FromStr for SpanFlag {
    type Err = String;

    /// `N%`, `OFFSET:LEN` or `OFFSET:` (to the end); the error says how to write one (the caller names the flag
    /// and the value).
    fn from_str(value: &str) -> Result<Self, String> {
        if let Some(percent) = value.strip_suffix('%') {
            let percent: f64 = percent.trim().parse().map_err(|_| {
                "write a percentage such as 100% or 25%, or OFFSET:LEN such as 1g:8g".to_string()
            })?;
            if !(percent > 0.0 && percent <= 100.0) {
                return Err("the percentage must be above 0 and at most 100".into());
            }
            return Ok(SpanFlag::Percent(percent));
        }
        let (offset, len) = value
            .split_once(':')
            .ok_or("write a percentage such as 100%, or OFFSET:LEN such as 1g:8g")?;
        let offset = parse_size(offset).map_err(|e| format!("the offset {e}"))?;
        if len.is_empty() {
            return Ok(SpanFlag::From { offset_bytes: offset });
        }
        let len = parse_size(len).map_err(|e| format!("the length {e}"))?;
        if len == 0 {
            return Err("the length must be above zero".into());
        }
        Ok(SpanFlag::Range {
            offset_bytes: offset,
            len_bytes: len,
        })
    }
}

impl SpanFlag {
    /// The bytes on a device of `capacity` bytes (a percentage rounded down to the logical block); the workload
    /// checks that they fit.
    pub fn resolve(self, capacity: u64, logical: u32) -> Span {
        match self {
            SpanFlag::Percent(percent) => Span {
                offset_bytes: 0,
                len_bytes: (capacity as f64 * percent / 100.0) as u64 / logical as u64 * logical as u64,
            },
            SpanFlag::Range {
                offset_bytes,
                len_bytes,
            } => Span {
                offset_bytes,
                len_bytes,
            },
            // From the offset to the end, whole logical blocks; an offset past the end leaves an empty span,
            // which the workload's check refuses naming --span.
            SpanFlag::From { offset_bytes } => Span {
                offset_bytes,
                len_bytes: capacity.saturating_sub(offset_bytes) / logical as u64 * logical as u64,
            },
        }
    }
}

/// A percentage written `25` or `25%`.
pub fn percent(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("write a percentage, e.g. 25 or 25%, not '{text}'"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("'{text}' is not a percentage"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_span(text: &str, capacity: u64, logical: u32) -> Result<Span, String> {
        text.parse::<SpanFlag>().map(|s| s.resolve(capacity, logical))
    }

    #[test]
    fn spans() {
        assert_eq!(
            parse_span("100%", 1 << 30, 512).unwrap(),
            Span {
                offset_bytes: 0,
                len_bytes: 1 << 30
            }
        );
        assert_eq!(parse_span("25%", 1000 * 512, 512).unwrap().len_bytes, 250 * 512);
        assert_eq!(
            parse_span("1g:2g", 0, 512).unwrap(),
            Span {
                offset_bytes: 1 << 30,
                len_bytes: 2 << 30
            }
        );
        for bad in ["0%", "101%", "half", "1g", "1g:0", "x:1g"] {
            let e = parse_span(bad, 1 << 30, 512).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
