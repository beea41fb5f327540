//! `ssdlab report RESULT_DIR... [--out report.html]`: redraws results from their result.json alone.

use anyhow::{Context, Result, bail};
use ssdlab_core::schema::{RunResult, SCHEMA};

use super::Outcome;
use crate::cli::ReportArgs;
use crate::output;

pub fn run(args: &ReportArgs) -> Result<Outcome> {
    let mut results = read_results(&args.results)?;
    if !args.label.is_empty() {
        if args.label.len() != results.len() {
            bail!(
                "--label: {} names for {} results; give one --label per RESULT_DIR, in the same order",
                args.label.len(),
                results.len()
            );
        }
        for (result, name) in results.iter_mut().zip(&args.label) {
            result.label = Some(name.clone());
        }
    }
    if args.out.is_dir() {
        bail!(
            "--out {}: is a directory; name the HTML file to write, e.g. --out report.html",
            args.out.display()
        );
    }
    output::write_report(&args.out, &results)?;
    eprintln!("report    {} ({} results)", args.out.display(), results.len());
    Ok(Outcome::Passed)
}

/// Reads result directories (or result.json files), checking the schema.
pub fn read_results(paths: &[std::path::PathBuf]) -> Result<Vec<RunResult>> {
    let mut results = Vec::new();
    for path in paths {
        let file = if path.is_dir() {
            path.join("result.json")
        } else {
            path.clone()
        };
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("RESULT_DIR {}: cannot read {}", path.display(), file.display()))?;
        let result: RunResult = serde_json::from_str(&text).with_context(|| {
            format!(
                "RESULT_DIR {}: {} is not an ssdlab result",
                path.display(),
                file.display()
            )
        })?;
        if result.schema != SCHEMA {
            bail!(
                "RESULT_DIR {}: schema {} is not {SCHEMA}; this ssdlab cannot draw it",
                path.display(),
                result.schema
            );
        }
        results.push(result);
    }
    Ok(results)
}
