//! An erase as stderr shows it: each method tried and what it did, then how it ended (the method that
//! verified, its NIST SP 800-88 caveat, or that nothing was erased). It prints nothing itself.

use ssdlab_core::schema::erase::EraseAnalysis;

/// The steps, then the ending.
pub fn erase_lines(report: &EraseAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    for step in &report.steps {
        say!(out, "  {:<13} {}", step.method.name(), step.outcome);
    }
    match report.method {
        Some(method) => {
            say!(
                out,
                "erased    with {}; {} sampled blocks read back erased",
                method.name(),
                report.samples
            );
            if let Some(caveat) = method.caveat() {
                say!(out, "note      {caveat}");
            }
            if report.held_data_before == 0 {
                say!(
                    out,
                    "note      none of the sampled blocks held data before the erase (all zeroes or ones), so \
                     reading them back shows little"
                );
            }
        }
        None => say!(
            out,
            "NOT ERASED: no method that was tried left the sampled blocks readable as erased{}",
            if report.not_erased_offsets_bytes.is_empty() {
                String::new()
            } else {
                format!(" ({} still hold data)", report.not_erased_offsets_bytes.len())
            }
        ),
    }
    out
}
