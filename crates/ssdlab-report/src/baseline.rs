//! `ssdlab report --baseline DIR`: every result set against one baseline of its kind, each headline figure
//! (`figures.rs`) with its change in percent, marked better or worse; a kind without comparable figures gets no
//! table.

use ssdlab_core::schema::RunResult;

use crate::figures::{Better, figures};
use crate::{escape, label};

/// The table of `group`'s results against `baseline` (one of them), or nothing when the kind has no figures.
pub(crate) fn against(group: &[&RunResult], baseline: &RunResult) -> String {
    let base = figures(baseline);
    if base.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "<h3>Against the baseline, {}</h3><table class=\"baseline\"><tr><th></th>",
        escape(&label(baseline))
    );
    for f in &base {
        t.push_str(&format!("<th>{}</th>", escape(f.name)));
    }
    t.push_str("</tr>");
    for r in group {
        let is_base = std::ptr::eq(*r, baseline);
        t.push_str(&format!(
            "<tr><td>{}{}</td>",
            escape(&label(r)),
            if is_base { " (baseline)" } else { "" }
        ));
        let mine = figures(r);
        for b in &base {
            let Some(m) = mine.iter().find(|m| m.name == b.name) else {
                t.push_str("<td>–</td>");
                continue;
            };
            if is_base || !m.value.is_finite() || !b.value.is_finite() {
                t.push_str(&format!("<td>{}</td>", escape(&(m.format)(m.value))));
                continue;
            }
            if b.value == 0.0 {
                // No percentage from zero; still better or worse.
                let class = match (m.value == 0.0, m.better, m.value > 0.0) {
                    (true, _, _) => "",
                    (false, Better::Higher, true) | (false, Better::Lower, false) => " class=\"better\"",
                    _ => " class=\"worse\"",
                };
                let note = if m.value == 0.0 { "" } else { " (from 0)" };
                t.push_str(&format!("<td{class}>{}{note}</td>", escape(&(m.format)(m.value))));
                continue;
            }
            let change = m.value / b.value - 1.0;
            let improved = match m.better {
                Better::Higher => change > 0.0,
                Better::Lower => change < 0.0,
            };
            let class = if change.abs() < 0.005 {
                ""
            } else if improved {
                " class=\"better\""
            } else {
                " class=\"worse\""
            };
            t.push_str(&format!(
                "<td{class}>{} ({:+.1}%)</td>",
                escape(&(m.format)(m.value)),
                100.0 * change
            ));
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t
}
