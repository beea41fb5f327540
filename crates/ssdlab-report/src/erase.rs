//! The erase record: which purge ran on the device, every method tried or passed over and why, and the read-back
//! check. The device's identity and capacity are in the page header.

use std::fmt::Write;

use ssdlab_core::schema::{Analysis, RunResult};

use crate::{escape, label, table_with_class};

pub(crate) fn erase(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Analysis::Erase(a) = &r.analysis else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        let outcome = match a.method {
            Some(m) => format!(
                "erased with {}: all {} sampled blocks read back erased",
                m.name(),
                a.samples
            ),
            None if !a.not_erased_offsets_bytes.is_empty() => format!(
                "NOT ERASED: {} of {} sampled blocks still hold data",
                a.not_erased_offsets_bytes.len(),
                a.samples
            ),
            None => {
                "NOT ERASED, or not verified: no method that was tried left the samples readable as erased \
                     (each step says why)"
                    .to_string()
            }
        };
        let mut rows = vec![
            vec!["outcome".to_string(), outcome],
            vec![
                "sampled blocks that held data before".into(),
                format!("{} of {}", a.held_data_before, a.samples),
            ],
            vec!["time".into(), format!("{:.1} s", a.elapsed_s)],
        ];
        if a.method.is_some() {
            rows.push(vec![
                "what it does not promise".into(),
                a.caveat().unwrap_or("nothing: a purge").to_string(),
            ]);
        }
        out.push_str(&table_with_class(
            "header",
            &["record".into(), String::new()],
            &rows,
        ));
        let steps: Vec<Vec<String>> = a
            .steps
            .iter()
            .map(|s| vec![s.method.name().to_string(), s.outcome.clone()])
            .collect();
        out.push_str(&table_with_class(
            "header",
            &["method".into(), "what happened".into()],
            &steps,
        ));
        if let Some(first) = a.not_erased_offsets_bytes.first() {
            let _ = write!(
                out,
                "<p class=\"fail\">The first block that still holds data is at byte {first}.</p>"
            );
        }
    }
    out
}

/// How a erase result is shown.
pub(crate) struct Erase;

impl crate::views::View for Erase {
    type Analysis = ssdlab_core::schema::erase::EraseAnalysis;
    const HEADING: &'static str = "Erase: the purge, and whether the device reads back erased";
    const STORY: &'static str = "A purge of the device and a read-back of sampled blocks: each method tried in order (sanitize, secure erase, secure discard, discard, zeroes), and whether the device then read back erased.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        erase(group)
    }
}
