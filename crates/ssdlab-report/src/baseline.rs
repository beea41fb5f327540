//! `ssdlab report --baseline DIR`: every result set against one baseline of its kind, each headline figure
//! (`figures.rs`) with its change in percent, marked better or worse; a kind without comparable figures gets no
//! table.

use ssdlab_core::schema::RunResult;

use crate::figures::Better;
use crate::views::figures;
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
            let noise = noise(b.spread, m.spread);
            let (class, verdict) = if change.abs() < noise {
                ("", format!(", within noise (±{:.1}%)", 100.0 * noise))
            } else if improved {
                (" class=\"better\"", String::new())
            } else {
                (" class=\"worse\"", String::new())
            };
            t.push_str(&format!(
                "<td{class}>{} ({:+.1}%{verdict})</td>",
                escape(&(m.format)(m.value)),
                100.0 * change
            ));
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t.push_str(&format!(
        "<p class=\"meta\">A change is called better or worse only beyond twice the two figures' combined \
         standard error (of the mean of their per-second samples or repeats), or {:.0}% where neither has \
         one.</p>",
        100.0 * UNMEASURED_NOISE
    ));
    t
}

/// Where neither figure carries its spread, a change smaller than this is not called better or worse: run-to-run
/// variation of a storage measurement is rarely below it.
const UNMEASURED_NOISE: f64 = 0.02;

/// The change below which two figures are not told apart: twice their combined relative standard error.
fn noise(base: Option<f64>, mine: Option<f64>) -> f64 {
    match (base, mine) {
        (None, None) => UNMEASURED_NOISE,
        (b, m) => {
            let (b, m) = (b.unwrap_or(0.0), m.unwrap_or(0.0));
            (2.0 * (b * b + m * m).sqrt()).max(0.005)
        }
    }
}
