//! Units and their parsing: byte sizes, durations and rates as a storage engineer types them.
//!
//! Sizes use binary multiples, as fio does by default: `4k` = `4KiB` = 4096 bytes, `1g` = 2^30 bytes. Plain
//! numbers are bytes. Durations take `ns`, `us`, `ms`, `s`, `m`, `h`, `d`, `w`, `mo` (30.44 days) and `y`
//! (365.25 days); a plain number is seconds. Every parser returns a [`ParseError`] whose text says what was
//! expected, so the binary can name the flag and the fix.

use std::fmt;

/// Why a size, duration or rate could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is not {expected}")]
pub struct ParseError {
    pub input: String,
    pub expected: &'static str,
}

fn err(input: &str, expected: &'static str) -> ParseError {
    ParseError {
        input: input.to_string(),
        expected,
    }
}

const SIZE_EXPECTED: &str =
    "a size such as 4k, 128KiB, 64m, 2g or 1t (binary multiples; plain numbers are bytes)";

/// Splits "12.5kib" into (12.5, "kib").
fn split_number(s: &str) -> Option<(f64, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let number: f64 = s[..end].parse().ok()?;
    Some((number, s[end..].trim()))
}

fn size_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    let unit = lower.trim_end_matches('b').trim_end_matches('i');
    Some(match (unit, lower.as_str()) {
        (_, "") | (_, "b") => 1,
        ("k", _) => 1 << 10,
        ("m", _) => 1 << 20,
        ("g", _) => 1 << 30,
        ("t", _) => 1 << 40,
        ("p", _) => 1 << 50,
        _ => return None,
    })
}

/// Parses a byte size: `512`, `4k`, `4KiB`, `1.5g`. Fractions are allowed when the result is a whole number of
/// bytes.
pub fn parse_size(input: &str) -> Result<u64, ParseError> {
    let s = input.trim();
    let (number, suffix) = split_number(s).ok_or_else(|| err(input, SIZE_EXPECTED))?;
    let multiplier = size_multiplier(suffix).ok_or_else(|| err(input, SIZE_EXPECTED))?;
    // Whole numbers are computed exactly (floating point would round above 2^53).
    let digits = &s[..s.len() - suffix.len()].trim();
    if let Ok(whole) = digits.parse::<u64>() {
        return whole
            .checked_mul(multiplier)
            .ok_or_else(|| err(input, SIZE_EXPECTED));
    }
    let bytes = number * multiplier as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err(input, SIZE_EXPECTED));
    }
    Ok(bytes as u64)
}

const DURATION_EXPECTED: &str = "a duration with its unit, such as 500ms, 10s, 5m, 1m30s, 2h, 90d, 7mo or 1y";

/// Parses a duration into nanoseconds: `10s`, `500ms`, `1m30s`, `90d`, `7mo`; a bare number is refused.
pub fn parse_duration_ns(input: &str) -> Result<u64, ParseError> {
    let s = input.trim();
    // A duration may be written in parts, as `1m30s` or `2h 15m`: each part has its own unit.
    let mut total_ns = 0.0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let unit_end = rest[number_end..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |i| number_end + i);
        let part = &rest[..unit_end];
        let (number, suffix) = split_number(part).ok_or_else(|| err(input, DURATION_EXPECTED))?;
        total_ns += number * duration_unit_ns(suffix).ok_or_else(|| err(input, DURATION_EXPECTED))?;
        rest = rest[unit_end..].trim_start();
    }
    if s.is_empty() || !total_ns.is_finite() || total_ns > u64::MAX as f64 {
        return Err(err(input, DURATION_EXPECTED));
    }
    Ok(total_ns.round() as u64)
}

/// Nanoseconds in one `suffix` of a duration; None for an unknown unit or none at all (a plain number is
/// refused: `--older-than 90` meant 90 days to one user and 90 seconds to ssdlab).
fn duration_unit_ns(suffix: &str) -> Option<f64> {
    const S: f64 = 1e9;
    Some(match suffix.to_ascii_lowercase().as_str() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" | "secs" => S,
        "m" | "min" | "mins" => 60.0 * S,
        "h" | "hr" | "hours" => 3600.0 * S,
        "d" | "day" | "days" => 86_400.0 * S,
        "w" | "week" | "weeks" => 7.0 * 86_400.0 * S,
        "mo" | "month" | "months" => MONTH_S * S,
        "y" | "year" | "years" => 365.25 * 86_400.0 * S,
        _ => return None,
    })
}

/// The length of the average month in seconds (365.25 / 12 days), used for data ages.
pub const MONTH_S: f64 = 365.25 / 12.0 * 86_400.0;

/// An open-loop rate limit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// Operations per second.
    Iops(f64),
    /// Bytes per second.
    BytesPerS(f64),
}

/// A rate as fio prints one: bytes per second in the binary unit it was given in, with the decimal figure beside
/// it (`200 MiB/s (210 MB/s)`), or operations per second (`50.0K IOPS`).
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::BytesPerS(v) => write!(f, "{}/s ({})", BinaryBytes(v as u64), DecimalRate(v)),
            Rate::Iops(v) => write!(f, "{} IOPS", Count(v)),
        }
    }
}

const RATE_EXPECTED: &str = "a rate: bytes per second such as 200m or 1g (like fio's rate=), or operations per second such as 50kiops";

/// Parses a rate: a value ending in `iops` is operations per second (`50kiops`, `2000iops`, with decimal
/// `k`/`m` multiples); anything else is a byte size per second (`200m` = 200 MiB/s, optionally written `200m/s`).
pub fn parse_rate(input: &str) -> Result<Rate, ParseError> {
    let s = input.trim();
    let lower = s.to_ascii_lowercase();
    let rate = if let Some(count) = lower.strip_suffix("iops") {
        let (number, suffix) = split_number(count.trim()).ok_or_else(|| err(input, RATE_EXPECTED))?;
        let multiplier = match suffix {
            "" => 1.0,
            "k" => 1e3,
            "m" => 1e6,
            _ => return Err(err(input, RATE_EXPECTED)),
        };
        Rate::Iops(number * multiplier)
    } else {
        let bytes =
            parse_size(lower.strip_suffix("/s").unwrap_or(&lower)).map_err(|_| err(input, RATE_EXPECTED))?;
        Rate::BytesPerS(bytes as f64)
    };
    match rate {
        Rate::Iops(v) | Rate::BytesPerS(v) if v > 0.0 && v.is_finite() => Ok(rate),
        _ => Err(err(input, "a rate above zero")),
    }
}

/// Formats bytes with binary multiples: `4 KiB`, `1.50 GiB`.
pub struct BinaryBytes(pub u64);

impl fmt::Display for BinaryBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit < UNITS.len() - 1 {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 || value.fract() == 0.0 {
            write!(f, "{} {}", value as u64, UNITS[unit])
        } else {
            write!(f, "{value:.2} {}", UNITS[unit])
        }
    }
}

/// Formats a throughput as fio does: decimal MB/s with binary MiB/s beside it, `21.0 MB/s (20.0 MiB/s)`, so a
/// `--rate 20m` (20 MiB/s) reads back as what it is.
pub struct Throughput(pub f64);

impl fmt::Display for Throughput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1} MB/s ({:.1} MiB/s)",
            self.0 / 1e6,
            self.0 / (1u64 << 20) as f64
        )
    }
}

/// Formats bytes with decimal multiples, as drive vendors rate writes: `512 B`, `3.91 GB`, `2.10 PB`.
pub struct DecimalBytes(pub f64);

impl fmt::Display for DecimalBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
        let mut value = self.0;
        let mut unit = 0;
        while value.abs() >= 1000.0 && unit < UNITS.len() - 1 {
            value /= 1000.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{value:.0} B")
        } else {
            write!(f, "{value:.2} {}", UNITS[unit])
        }
    }
}

/// Three significant digits, to the left of a unit: `999`, `1.00`, `10.0`, `100`.
fn three_digits(value: f64) -> String {
    let a = value.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{value:.0}")
    } else if a >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A count as a person reads it, three significant digits and a decimal suffix: `812`, `14.2K`, `38.1M`, `1.20G`.
pub struct Count(pub f64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if !v.is_finite() {
            return write!(f, "{v}");
        }
        let mut scaled = v;
        let mut suffix = 0;
        const SUFFIXES: [&str; 5] = ["", "K", "M", "G", "T"];
        // Rounded to three digits first, so 999,950 reads 1.00M rather than 1000K.
        while suffix < SUFFIXES.len() - 1
            && three_digits(scaled).parse::<f64>().unwrap_or(scaled).abs() >= 1000.0
        {
            scaled /= 1000.0;
            suffix += 1;
        }
        if suffix == 0 {
            write!(f, "{:.0}", v)
        } else {
            write!(f, "{}{}", three_digits(scaled), SUFFIXES[suffix])
        }
    }
}

/// A data rate in decimal units with three significant digits, as drive makers and the disk-mark tools print it:
/// `812 kB/s`, `58.2 MB/s`, `3.51 GB/s`.
pub struct DecimalRate(pub f64);

impl fmt::Display for DecimalRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
        let mut value = self.0;
        let mut unit = 0;
        while unit < UNITS.len() - 1 && three_digits(value).parse::<f64>().unwrap_or(value).abs() >= 1000.0 {
            value /= 1000.0;
            unit += 1;
        }
        write!(f, "{} {}", three_digits(value), UNITS[unit])
    }
}

/// A rate in MB/s (10^6 bytes a second) whatever its size, for a column whose rows must read alike, as
/// CrystalDiskMark shows every case: `3512 MB/s`, `58.2 MB/s`, `1.23 MB/s`.
pub struct MegabytesPerSecond(pub f64);

impl fmt::Display for MegabytesPerSecond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} MB/s", three_digits(self.0 / 1e6))
    }
}

/// Formats a latency given in nanoseconds with a unit that keeps three significant digits: `812 ns`,
/// `43.5 µs`, `1.20 ms`, `2.31 s` (µs, the symbol, everywhere: tables, lines and charts alike).
pub struct Nanos(pub f64);

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        let (value, unit) = if ns < 1e3 {
            (ns, "ns")
        } else if ns < 1e6 {
            (ns / 1e3, "µs")
        } else if ns < 1e9 {
            (ns / 1e6, "ms")
        } else {
            (ns / 1e9, "s")
        };
        if value >= 100.0 || unit == "ns" {
            write!(f, "{value:.0} {unit}")
        } else if value >= 10.0 {
            write!(f, "{value:.1} {unit}")
        } else {
            write!(f, "{value:.2} {unit}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_rates_keep_three_significant_digits() {
        let count = |v: f64| Count(v).to_string();
        assert_eq!(count(38_096_318.0), "38.1M");
        assert_eq!(count(320_000.0), "320K");
        assert_eq!(count(14_234.0), "14.2K");
        assert_eq!(count(812.0), "812");
        assert_eq!(count(999_950.0), "1.00M");
        assert_eq!(count(1_200_000_000.0), "1.20G");
        let rate = |v: f64| DecimalRate(v).to_string();
        assert_eq!(rate(3_512_000_000.0), "3.51 GB/s");
        assert_eq!(rate(58_230_000.0), "58.2 MB/s");
        assert_eq!(rate(812_000.0), "812 kB/s");
        assert_eq!(rate(999_999.0), "1.00 MB/s");
        assert_eq!(rate(0.0), "0 B/s");
        let column = |v: f64| MegabytesPerSecond(v).to_string();
        assert_eq!(column(3_512_450_000.0), "3512 MB/s");
        assert_eq!(column(58_230_000.0), "58.2 MB/s");
        assert_eq!(column(1_234_000.0), "1.23 MB/s");
    }

    #[test]
    fn sizes_use_binary_multiples() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert!(parse_size("").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("-4k").is_err());
        assert!(parse_size("0.3").is_err());
        assert_eq!(
            parse_size("9007199254740993").unwrap(),
            9_007_199_254_740_993,
            "exact above 2^53"
        );
        assert!(parse_size("16777216t").is_err(), "2^64 bytes overflows");
    }

    #[test]
    fn durations_cover_seconds_to_years() {
        assert_eq!(parse_duration_ns("10s").unwrap(), 10_000_000_000);
        assert!(
            parse_duration_ns("2000").is_err(),
            "every duration needs its unit"
        );
        assert_eq!(parse_duration_ns("2000s").unwrap(), 2_000_000_000_000);
        assert_eq!(parse_duration_ns("500ms").unwrap(), 500_000_000);
        assert_eq!(parse_duration_ns("5m").unwrap(), 300_000_000_000);
        assert_eq!(parse_duration_ns("90d").unwrap(), 90 * 86_400 * 1_000_000_000);
        assert!(parse_duration_ns("7mo").unwrap() > 7 * 30 * 86_400 * 1_000_000_000);
        assert!(parse_duration_ns("3 fortnights").is_err());
        // In parts, each with its unit, as people write them (issue 49).
        assert_eq!(parse_duration_ns("1m30s").unwrap(), 90_000_000_000);
        assert_eq!(parse_duration_ns("2h 15m").unwrap(), 8_100_000_000_000);
        assert!(parse_duration_ns("1m30").is_err(), "the last part has no unit");
        assert!(parse_duration_ns("").is_err() && parse_duration_ns("-5s").is_err());
    }

    #[test]
    fn rates_are_bytes_unless_iops() {
        assert_eq!(
            parse_rate("200m").unwrap(),
            Rate::BytesPerS((200u64 << 20) as f64)
        );
        assert_eq!(
            parse_rate("200m/s").unwrap(),
            Rate::BytesPerS((200u64 << 20) as f64)
        );
        assert_eq!(parse_rate("50kiops").unwrap(), Rate::Iops(50_000.0));
        assert_eq!(parse_rate("1500IOPS").unwrap(), Rate::Iops(1500.0));
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("0iops").is_err());
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn formatting_is_readable() {
        assert_eq!(BinaryBytes(4096).to_string(), "4 KiB");
        assert_eq!(BinaryBytes(3 << 29).to_string(), "1.50 GiB");
        assert_eq!(DecimalBytes(512.0).to_string(), "512 B");
        assert_eq!(DecimalBytes(3_906_252_800.0).to_string(), "3.91 GB");
        assert_eq!(DecimalBytes(4.654_73e15).to_string(), "4.65 PB");
        assert_eq!(Nanos(812.0).to_string(), "812 ns");
        assert_eq!(Nanos(43_500.0).to_string(), "43.5 µs");
        // fio's habit: --rate 200MB is binary, and both are printed.
        assert_eq!(parse_rate("200MB").unwrap().to_string(), "200 MiB/s (210 MB/s)");
        assert_eq!(parse_rate("50kiops").unwrap().to_string(), "50.0K IOPS");
        assert_eq!(Nanos(1_204_000.0).to_string(), "1.20 ms");
    }
}

/// Reads back what [`rfc3339_utc`] writes (`YYYY-MM-DDTHH:MM:SSZ`), as seconds since the Unix epoch.
pub fn parse_rfc3339_utc(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // Days since 1970-01-01 from the civil date (Hinnant's algorithm, the inverse of the one below).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC, e.g. `2026-11-21T20:42:00Z`.
pub fn rfc3339_utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let rem = unix_s % 86_400;
    // Civil date from days since 1970-01-01 (Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod time_tests {
    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(super::rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339_utc(1_795_293_720), "2026-11-21T20:42:00Z");
        for t in [0, 951_782_400, 1_795_293_720, 4_107_542_399] {
            assert_eq!(super::parse_rfc3339_utc(&super::rfc3339_utc(t)), Some(t));
        }
        assert_eq!(super::parse_rfc3339_utc("2026-13-01T00:00:00Z"), None);
        assert_eq!(super::parse_rfc3339_utc("yesterday"), None);
    }
}

#[cfg(test)]
mod throughput_tests {
    #[test]
    fn throughput_shows_both_conventions() {
        assert_eq!(
            super::Throughput(20.0 * 1048576.0).to_string(),
            "21.0 MB/s (20.0 MiB/s)"
        );
        assert_eq!(super::Throughput(550e6).to_string(), "550.0 MB/s (524.5 MiB/s)");
    }
}
