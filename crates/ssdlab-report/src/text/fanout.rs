//! The fan-out query's tables as stderr shows them: the drives, the query over all of them, the what-ifs and the
//! stragglers. It prints nothing itself.

use ssdlab_core::schema::LatencyNs;
use ssdlab_core::schema::fanout::{FanoutAnalysis, PercentileNeed, QueryCase};

/// A latency with the unit that keeps three significant digits ("83.1 us", "1.20 ms"): a fast drive's figures
/// read as themselves, not as 0.00 ms.
fn ms(ns: u64) -> String {
    ssdlab_core::units::Nanos(ns as f64).to_string()
}

/// The drive name column's width: the tables fit 80 columns.
const NAME_WIDTH: usize = 14;
/// The query rows' label width.
const LABEL_WIDTH: usize = 27;

/// A name cut in the middle to `width` characters, so both its start and its end (a device's number) show.
fn fit(name: &str, width: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= width {
        return name.to_string();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// A row's cells; the percentiles in `unsupported` (their reads cannot support them) are marked '*', and the
/// footnote says how many more reads they need.
fn latency_cells(l: &LatencyNs, unsupported: &[PercentileNeed]) -> String {
    let mark = |percentile: f64, ns: u64| {
        if unsupported.iter().any(|u| u.percentile == percentile) {
            format!("{}*", ms(ns))
        } else {
            ms(ns)
        }
    };
    // The quartiles are in drives.csv and result.json; the terminal keeps what fits 80 columns.
    format!(
        "{:>9}{:>9}{:>9}{:>9}{:>9}",
        ms(l.p50),
        ms(l.p95),
        ssdlab_core::units::Nanos(l.mean).to_string(),
        mark(99.0, l.p99),
        mark(99.9, l.p999)
    )
}

fn case_line(label: &str, case: &QueryCase) -> String {
    let line = format!(
        "{:<LABEL_WIDTH$}{}{:>8}",
        fit(label, LABEL_WIDTH),
        latency_cells(&case.latency_ns, &case.unsupported),
        if case.extra_load_ratio > 0.0 {
            format!("+{:.0}%", 100.0 * case.extra_load_ratio)
        } else {
            String::new()
        }
    );
    line.trim_end().to_string()
}

/// The latency columns' header, shared by the drive table and the query table.
fn latency_header() -> String {
    format!(
        "{:>9}{:>9}{:>9}{:>9}{:>9}",
        "median", "95%", "mean", "99%", "99.9%"
    )
}

/// The fan-out query on stderr: the drives, the query over all of them with its what-ifs, the notes, the reads
/// the rarer percentiles still need, and the stragglers.
pub fn fanout_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = drive_lines(a);
    if let Some(spread) = a.start_spread_ns {
        say!(
            out,
            "start     every drive's first read was submitted within {} of the others'",
            ssdlab_core::units::Nanos(spread as f64)
        );
    }
    out.extend(query_lines(a));
    for note in &a.notes {
        say!(out, "note      {note}");
    }
    out.extend(needs_lines(a));
    out.extend(what_if_lines(a));
    out
}

/// The drives' table: each drive's data age, reads, latency and share of the query's p99 tail.
fn drive_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "{:<NAME_WIDTH$}{:>5}{:>7}{}{:>9}",
        "drive",
        "mo",
        "reads",
        latency_header(),
        "p99 tail"
    );
    for d in &a.drives {
        let share = a
            .stragglers
            .iter()
            .find(|s| s.name == d.name)
            .map_or(0.0, |s| s.share_of_p99_ratio);
        say!(
            out,
            "{:<NAME_WIDTH$}{:>5}{:>7}{}{:>8.0}%",
            fit(&d.name, NAME_WIDTH),
            d.data_age_months.map_or("".into(), |m| format!("{m:.1}")),
            ssdlab_core::units::Count(d.reads as f64).to_string(),
            latency_cells(&d.latency_ns, &[]),
            100.0 * share
        );
    }
    out
}

/// The query's table: over all the drives, as measured, each what-if, and with the stragglers fixed.
fn query_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    say!(out, "{:<LABEL_WIDTH$}{}{:>8}", "query", latency_header(), "load");
    out.push(case_line(&format!("all {} drives", a.query.shards), &a.query));
    if let Some(m) = &a.measured {
        say!(
            out,
            "{:<LABEL_WIDTH$}{}  ({} queries)",
            "  measured",
            latency_cells(&m.latency_ns, &[]),
            m.queries
        );
    }
    for case in &a.what_if {
        let label = if case.case.starts_with("hedged") {
            "hedged".to_string()
        } else if case.case.starts_with("two replicas") {
            "two replicas, first answer".to_string()
        } else {
            format!("{} shards like these", case.shards)
        };
        out.push(case_line(&label, case));
    }
    if let Some(fixed) = &a.fixed {
        out.push(case_line("stragglers fixed", fixed));
    }
    if let Some(fixed) = &a.cohort_fixed {
        out.push(case_line("old data rewritten", fixed));
    }
    out
}

/// The footnotes of the percentiles marked '*': how many more reads each needs, once per number of shards.
fn needs_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    let mut said: Vec<(u32, u64)> = vec![];
    for case in std::iter::once(&a.query).chain(&a.what_if) {
        for need in &case.unsupported {
            // Cases over the same shards (hedged, replicated) need the same reads: one line for them.
            let key = (case.shards, (need.percentile * 10.0) as u64);
            if said.contains(&key) {
                continue;
            }
            said.push(key);
            say!(
                out,
                "* needs  {} more reads for the p{} of {} shards (ten expected beyond it; now it is the largest \
                 reads seen)",
                need.more_reads,
                need.percentile,
                case.shards
            );
        }
    }
    out
}

/// What the hedged and fixed what-ifs assumed, then the drives with the largest share of the tail.
fn what_if_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    for case in a.what_if.iter().filter(|c| c.case.starts_with("hedged")) {
        say!(out, "what-if   {}", case.case);
    }
    if let Some(fixed) = &a.fixed {
        say!(out, "what-if   stragglers fixed: {}", fixed.case);
    }
    if let Some(fixed) = &a.cohort_fixed {
        say!(out, "what-if   old data rewritten: {}", fixed.case);
    }
    let top: Vec<String> = a
        .stragglers
        .iter()
        .take(5)
        .map(|s| {
            format!(
                "{} {:.0}% of the p99 tail ({:.0}% of the p95)",
                s.name,
                100.0 * s.share_of_p99_ratio,
                100.0 * s.share_of_p95_ratio
            )
        })
        .collect();
    // One drive a line: five on one line ran to 240 columns.
    for line in top {
        say!(out, "tail      {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_in_the_middle_and_fast_drives_read_in_microseconds() {
        assert_eq!(fit("drive-01", NAME_WIDTH), "drive-01");
        let cut = fit(
            "/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_250GB_S4EUNX0N123456",
            NAME_WIDTH,
        );
        assert_eq!(cut.chars().count(), NAME_WIDTH);
        assert!(
            cut.starts_with("/dev/d") && cut.ends_with("123456") && cut.contains('…'),
            "{cut}"
        );
        // 83 us was 0.08 in a column of milliseconds.
        assert_eq!(ms(83_100), "83.1 µs");
        assert_eq!(ms(1_204_000), "1.20 ms");
    }
}
