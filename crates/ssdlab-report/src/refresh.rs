//! The refresh section: the files rewritten and how each ended, with the read speed of the old data and of the
//! rewritten data (the proof afterwards that it helped).

use std::fmt::Write;

use ssdlab_core::schema::refresh::{RefreshAnalysis, RefreshOutcome};
use ssdlab_core::schema::{Analysis, RunResult};
use ssdlab_core::units::BinaryBytes;

use crate::svg::bars;
use crate::{escape, label, table};

pub(crate) fn refresh(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Analysis::Refresh(a) = &r.analysis else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        out.push_str(&one(a));
    }
    out
}

fn outcome_name(outcome: RefreshOutcome) -> &'static str {
    match outcome {
        RefreshOutcome::Refreshed => "refreshed",
        RefreshOutcome::Would => "would refresh",
        RefreshOutcome::Skipped => "skipped",
        RefreshOutcome::GaveWay => "gave way",
        RefreshOutcome::Failed => "FAILED",
        RefreshOutcome::Interrupted => "interrupted",
    }
}

fn one(a: &RefreshAnalysis) -> String {
    let mut out = format!(
        "<p>{} {} of {} selected in {:.1} s ({:.1} s paused while the device was busy); {} files skipped, given up, failed or pending.</p>",
        if a.dry_run { "Dry run:" } else { "Rewrote" },
        BinaryBytes(a.rewritten_bytes),
        BinaryBytes(a.selected_bytes),
        a.seconds,
        a.paused_s,
        a.problems
    );
    // Before and after, for the files that were measured both ways.
    let speeds: Vec<(String, f64)> = a
        .files
        .iter()
        .filter_map(|f| {
            let (before, after) = (f.before_bytes_per_s?, f.after_bytes_per_s?);
            Some([
                (format!("{} before", short(&f.name)), before / 1e6),
                (format!("{} after", short(&f.name)), after / 1e6),
            ])
        })
        .flatten()
        .take(40)
        .collect();
    if !speeds.is_empty() {
        let _ = write!(
            out,
            "<div class=\"charts\">{}</div>",
            bars(
                "Read speed before and after the rewrite",
                "MB/s",
                &speeds,
                |v| format!("{v:.1} MB/s")
            )
        );
    }
    let header: Vec<String> = [
        "file",
        "outcome",
        "size",
        "rewritten",
        "before MB/s",
        "after MB/s",
        "why",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mb_s = |v: Option<f64>| v.map_or("–".into(), |b| format!("{:.1}", b / 1e6));
    let rows: Vec<Vec<String>> = a
        .files
        .iter()
        .map(|f| {
            vec![
                f.name.clone(),
                outcome_name(f.outcome).into(),
                BinaryBytes(f.size_bytes).to_string(),
                BinaryBytes(f.rewritten_bytes).to_string(),
                mb_s(f.before_bytes_per_s),
                mb_s(f.after_bytes_per_s),
                f.reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(&header, &rows));
    out
}

/// The last two components of a path, for chart labels.
fn short(name: &str) -> String {
    let parts: Vec<&str> = name.rsplitn(3, '/').collect();
    match parts.as_slice() {
        [file, dir, _] => format!("{dir}/{file}"),
        _ => name.to_string(),
    }
}

/// How a refresh result is shown.
pub(crate) struct Refresh;

impl crate::views::View for Refresh {
    type Analysis = ssdlab_core::schema::refresh::RefreshAnalysis;
    const HEADING: &'static str = "Refresh: stale files rewritten in place, and what it bought";
    const STORY: &'static str = "The fix the field report used: stale files rewritten in place (written again, synced, read back), so the drive stores them anew. What the refresh bought is the flagged files' read speed before and after.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        refresh(group)
    }
}
