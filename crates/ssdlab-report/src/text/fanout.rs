//! The fan-out query's tables as stderr shows them: the drives, the query over all of them, the what-ifs and the
//! stragglers. It prints nothing itself.

use ssdlab_core::schema::LatencyNs;
use ssdlab_core::schema::fanout::{FanoutAnalysis, PercentileNeed, QueryCase};

/// Milliseconds, for the tables.
fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
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
    format!(
        "{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}",
        ms(l.p25),
        ms(l.p50),
        ms(l.p75),
        ms(l.p95),
        format!("{:.2}", l.mean / 1e6),
        mark(99.0, l.p99),
        mark(99.9, l.p999)
    )
}

fn case_line(label: &str, case: &QueryCase) -> String {
    format!(
        "{label:<34}{}{:>9}",
        latency_cells(&case.latency_ns, &case.unsupported),
        if case.extra_load_ratio > 0.0 {
            format!("+{:.0}%", 100.0 * case.extra_load_ratio)
        } else {
            String::new()
        }
    )
}

pub fn fanout_lines(a: &FanoutAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    let header = format!(
        "{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}",
        "25%", "median", "75%", "95%", "mean", "99%", "99.9%"
    );
    say!(
        out,
        "{:<20}{:>8}{:>9}{header}{:>10}",
        "drive",
        "age (mo)",
        "reads",
        "p99 share"
    );
    for d in &a.drives {
        let share = a
            .stragglers
            .iter()
            .find(|s| s.name == d.name)
            .map_or(0.0, |s| s.share_of_p99_ratio);
        say!(
            out,
            "{:<20}{:>8}{:>9}{}{:>9.0}%",
            d.name,
            d.data_age_months.map_or("".into(), |m| format!("{m:.1}")),
            d.reads,
            latency_cells(&d.latency_ns, &[]),
            100.0 * share
        );
    }
    say!(out, "{:<34}{header}{:>9}", "query (latencies in ms)", "load");
    out.push(case_line(&format!("all {} drives", a.query.shards), &a.query));
    if let Some(m) = &a.measured {
        say!(
            out,
            "{:<34}{}   ({} synchronized queries)",
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
    for note in &a.notes {
        say!(out, "note      {note}");
    }
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
    for case in a.what_if.iter().filter(|c| c.case.starts_with("hedged")) {
        say!(out, "what-if   {}", case.case);
    }
    if let Some(fixed) = &a.fixed {
        say!(out, "what-if   stragglers fixed: {}", fixed.case);
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
    say!(out, "tail      {}", top.join("; "));
    out
}
