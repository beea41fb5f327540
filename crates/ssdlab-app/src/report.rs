//! `report`: redraws results from their result.json alone into one HTML page, side by side, optionally against
//! a baseline.

use anyhow::{Result, bail};
use ssdlab_core::schema::RunResult;

use crate::export;
use crate::ports::{Outcome, Ports};

/// A report: the result directories (or result.json files), their labels, a baseline, and the page to write.
#[derive(Debug, Clone)]
pub struct Plan {
    pub results: Vec<std::path::PathBuf>,
    pub out: std::path::PathBuf,
    pub label: Vec<String>,
    pub baseline: Option<std::path::PathBuf>,
}

/// Reads the results and writes the page.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let (paths, skipped) = expand_result_dirs(&plan.results)?;
    // A label names a result directory given: one that stood for several (a demo's output) has no one result to
    // name, so labels are refused for it rather than counted against what it expanded to.
    if !plan.label.is_empty() && paths.len() != plan.results.len() {
        bail!(
            "--label: {} names for {} arguments that hold {} results; label results by naming each result \
             directory, not a directory of them",
            plan.label.len(),
            plan.results.len(),
            paths.len()
        );
    }
    for note in &skipped {
        ports.console.say(&format!("note      {note}"));
    }
    let expanded = Plan {
        results: paths,
        ..plan.clone()
    };
    let args = &expanded;
    let mut results = read_results(&args.results)?;
    let baseline = match &args.baseline {
        Some(dir) => Some(place_baseline(&mut results, &args.results, dir, ports)?),
        None => None,
    };
    if !args.label.is_empty() {
        if args.label.len() != args.results.len() {
            bail!(
                "--label: {} names for {} results; give one --label per RESULT_DIR, in the same order",
                args.label.len(),
                args.results.len()
            );
        }
        let given = results.len() - args.results.len();
        for (result, name) in results.iter_mut().skip(given).zip(&args.label) {
            result.label = Some(name.clone());
        }
    }
    if args.out.is_dir() {
        bail!(
            "--out {}: is a directory; name the HTML file to write, e.g. --out report.html",
            args.out.display()
        );
    }
    export::check_out_page(&args.out)?;
    export::write_output(
        "--out",
        &args.out,
        ssdlab_outputs::Kind::Report,
        ssdlab_report::render_against(&results, baseline).as_bytes(),
    )?;
    let count = match results.len() {
        1 => "1 result".to_string(),
        n => format!("{n} results"),
    };
    ports
        .console
        .say(&format!("report    {} ({count})", args.out.display()));
    Ok(Outcome::Passed)
}

/// Whether two arguments name the same result, by its directory or by its result.json.
fn same_result(a: &std::path::Path, b: &std::path::Path) -> bool {
    let file_of = |p: &std::path::Path| {
        if p.is_dir() {
            p.join("result.json")
        } else {
            p.to_path_buf()
        }
    };
    let (a, b) = (file_of(a), file_of(b));
    a == b
        || std::fs::canonicalize(&a)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(&b).ok() == Some(a))
}

/// The baseline's index among `results`: one of them, or read from its own directory and put first. A baseline
/// is compared only with results of its kind: refused where it meets none, said where it meets only some.
fn place_baseline(
    results: &mut Vec<RunResult>,
    given: &[std::path::PathBuf],
    dir: &std::path::Path,
    ports: &mut Ports,
) -> Result<usize> {
    let b = match given.iter().position(|r| same_result(r, dir)) {
        Some(i) => i,
        None => {
            let base = read_results(&[dir.to_path_buf()])
                .map_err(|e| anyhow::anyhow!("--baseline {}: {e:#}", dir.display()))?;
            results.insert(0, base.into_iter().next().expect("one result read"));
            0
        }
    };
    let kind = results[b].kind();
    let others: Vec<&str> = results
        .iter()
        .enumerate()
        .filter(|&(i, r)| i != b && r.kind() != kind)
        .map(|(_, r)| r.kind())
        .collect();
    let same = results
        .iter()
        .enumerate()
        .filter(|&(i, r)| i != b && r.kind() == kind)
        .count();
    if same == 0 && results.len() > 1 {
        bail!(
            "--baseline {}: a {kind} result, and no result given is one (they are {}); give a baseline of the \
             same kind as the results it is set against",
            dir.display(),
            others.join(", ")
        );
    }
    if !others.is_empty() {
        ports.console.say(&format!(
            "note      --baseline is a {kind} result: the {} result(s) of other kinds ({}) are drawn without it",
            others.len(),
            others.join(", ")
        ));
    }
    Ok(b)
}

/// The results the arguments name: a result directory or result.json stands for itself; a directory without a
/// result.json (a demo's output) stands for the result directories directly inside it, in name order, and what
/// else it holds is skipped with a note; an argument that is neither (a demo's `traces/` caught by a shell glob)
/// is skipped with a note, as long as some argument names a result.
pub fn expand_result_dirs(paths: &[std::path::PathBuf]) -> Result<(Vec<std::path::PathBuf>, Vec<String>)> {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        if !path.is_dir() || path.join("result.json").exists() {
            found.push(path.clone());
            continue;
        }
        let mut inside: Vec<std::path::PathBuf> = std::fs::read_dir(path)
            .map_err(|e| anyhow::anyhow!("RESULT_DIR {}: cannot list it: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        inside.sort();
        let (results, others): (Vec<_>, Vec<_>) =
            inside.into_iter().partition(|p| p.join("result.json").is_file());
        if results.is_empty() {
            skipped.push(format!(
                "skipped {}: not a result (no result.json in it or in any directory directly inside it)",
                path.display()
            ));
            continue;
        }
        for other in others {
            skipped.push(format!(
                "skipped {}: not a result (no result.json)",
                other.display()
            ));
        }
        found.extend(results);
    }
    if found.is_empty() {
        bail!(
            "RESULT_DIR {}: no result found; give directories ssdlab wrote with --out (each holds a result.json), \
             or a directory of them such as the demo's --out",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    Ok((found, skipped))
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
        let text = crate::inputs::read_text(
            &format!("RESULT_DIR {} ({})", path.display(), file.display()),
            &file,
            crate::inputs::MAX_RESULT_BYTES,
            "",
        )?;
        // Any readable schema, in this version's names and units.
        let result = RunResult::from_json(&text).map_err(|e| {
            anyhow::anyhow!(
                "RESULT_DIR {}: {} is not an ssdlab result this version can draw: {e}",
                path.display(),
                file.display()
            )
        })?;
        results.push(result);
    }
    Ok(results)
}
