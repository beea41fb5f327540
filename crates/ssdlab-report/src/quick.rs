//! The quick section: CrystalDiskMark's eight figures per result (MB/s, IOPS for the random cases, each with
//! the spread of its repeats and the worst p99), and a bar chart of them per result, read and write side by side.

use ssdlab_core::schema::quick::{QuickAnalysis, QuickCase};
use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::{Count, MegabytesPerSecond, Nanos};

use crate::{escape, label, svg, table};

fn measured(r: &RunResult) -> Option<&QuickAnalysis> {
    match &r.analysis {
        Analysis::Quick(MethodAnalysis {
            measured: Some(a), ..
        }) => Some(a),
        _ => None,
    }
}

fn cell(case: Option<&QuickCase>) -> String {
    let Some(c) = case else {
        return "–".into();
    };
    let iops = if c.sequential {
        String::new()
    } else {
        format!(", {} IOPS", Count(c.mean_iops()))
    };
    format!(
        "{}{iops} ±{:.1}% (p99 {})",
        MegabytesPerSecond(c.mean_bytes_per_s()),
        100.0 * c.relative_spread(),
        Nanos(c.latency_ns_p99 as f64)
    )
}

pub(crate) fn quick(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Some(a) = measured(r) else {
            continue;
        };
        if group.len() > 1 {
            out.push_str(&format!("<h3>{}</h3>", escape(&label(r))));
        }
        let spread = if a.repeats == 1 {
            "One repeat, so no spread is shown".to_string()
        } else {
            format!(
                "{} repeats; each figure is the repeats' mean ± their sample standard deviation",
                a.repeats
            )
        };
        out.push_str(&format!(
            "<p>{spread}, each of {} s over {} MiB{}.</p>",
            a.runtime_s,
            a.span_bytes >> 20,
            if a.prepared {
                ", written once before the reads"
            } else {
                ""
            }
        ));
        let mut names: Vec<&str> = a.cases.iter().map(|c| c.name.as_str()).collect();
        names.dedup();
        let header: Vec<String> = ["case", "read", "write"].iter().map(|s| s.to_string()).collect();
        let find = |name: &str, read: bool| a.cases.iter().find(|c| c.name == name && c.read == read);
        let rows: Vec<Vec<String>> = names
            .iter()
            .map(|&n| vec![n.to_string(), cell(find(n, true)), cell(find(n, false))])
            .collect();
        out.push_str(&table(&header, &rows));
        let bars: Vec<(String, f64)> = a
            .cases
            .iter()
            .map(|c| {
                (
                    format!("{} {}", c.name, if c.read { "read" } else { "write" }),
                    c.mean_bytes_per_s() / 1e6,
                )
            })
            .collect();
        out.push_str("<div class=\"charts\">");
        out.push_str(&svg::bars(
            "The set, MB/s (higher is better)",
            "MB/s",
            &bars,
            |v| format!("{v:.1}"),
        ));
        out.push_str("</div>");
    }
    out
}

/// How a quick result is shown.
pub(crate) struct Quick;

impl crate::views::View for Quick {
    type Analysis = ssdlab_core::schema::quick::QuickAnalysis;
    const HEADING: &'static str = "Quick: CrystalDiskMark's set (default: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1; NVMe: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1), repeated";
    const STORY: &'static str = "CrystalDiskMark's four cases, read and written, each repeated: large sequential transfers at a deep and a shallow queue (the NVMe set: 128 KiB at QD32), and 4 KiB random operations at QD32 (the NVMe set: 16 jobs of QD32) and QD1. The QD1 random figures are the ones a desktop feels; the spread says whether a difference between two drives is larger than the noise.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        quick(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::quick_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::quick(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::quick(analysis)
    }
}
