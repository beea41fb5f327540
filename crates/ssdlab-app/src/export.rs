//! The exporters: every file a result leaves as (result.json, the samples' and the tidy CSV, report.html, the
//! charts as SVG files, Prometheus text) and the JSON Lines record of an analysis. Each renders a typed
//! `RunResult` or analysis; the checks of `--out` and `--prom` run before anything is measured. Nothing here
//! prints: a warning is returned, or said through the reporter.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ssdlab_core::schema::{RunResult, Sample};
use ssdlab_outputs::{Kind, Output, OutputDir, Status};

use crate::reporter::Reporter;

/// `--out DIR` as the user gave it, and whether `--replace` lets it replace an earlier result there whole (the
/// files of ssdlab's that result left; a file of the user's there is never touched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutDir {
    pub path: PathBuf,
    pub replace: bool,
}

impl OutDir {
    pub fn new(path: PathBuf, replace: bool) -> Self {
        OutDir { path, replace }
    }
}

impl std::ops::Deref for OutDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// The directory holding `path` (a single output file) and the file's name in it.
fn split_file(flag: &str, path: &Path) -> Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .ok_or_else(|| anyhow::anyhow!("{flag} {}: name a file, such as ssdlab.prom", path.display()))?;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(".".as_ref());
    Ok((parent.to_path_buf(), name.to_string()))
}

/// Writes one file by the output rule (ssdlab-outputs): created new, or replacing only ssdlab's own output of
/// `kind` there, atomically and durably, never through a symbolic link. `flag` names it in errors.
pub fn write_output(flag: &str, path: &Path, kind: Kind, bytes: &[u8]) -> Result<()> {
    let (parent, name) = split_file(flag, path)?;
    let dir = OutputDir::open(&parent).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?;
    dir.write(
        &[Output {
            name: &name,
            kind,
            bytes,
        }],
        &[],
    )
    .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}

/// Whether one output file may be written where it is named: its directory exists (reached without a symlink)
/// and the name is free or holds ssdlab's own output of `kind`. Checked before anything is measured.
pub fn check_output(flag: &str, path: &Path, kind: Kind) -> Result<()> {
    if path.is_dir() {
        bail!("{flag} {}: is a directory; name a file inside it", path.display());
    }
    let (parent, name) = split_file(flag, path)?;
    if !parent.is_dir() {
        bail!(
            "{flag} {}: the directory {} does not exist",
            path.display(),
            parent.display()
        );
    }
    let dir = OutputDir::open(&parent).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?;
    dir.check(&name, kind)
        .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}

/// `--prom FILE` must be writable where it is named, and replace only ssdlab's own metrics: checked before
/// anything is measured.
pub fn check_prom_path(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!(
            "--prom {}: is a directory; name a file such as {}/ssdlab.prom",
            path.display(),
            path.display()
        );
    }
    let (parent, _) = split_file("--prom", path)?;
    if !parent.is_dir() {
        bail!(
            "--prom {}: the directory {} does not exist (node_exporter's textfile directory, e.g. \
             /var/lib/prometheus/node-exporter)",
            path.display(),
            parent.display()
        );
    }
    // Metrics an older ssdlab wrote there (a timer's file, before manifests) stay its own to replace.
    let (parent, name) = split_file("--prom", path)?;
    if let Ok(dir) = OutputDir::open(&parent) {
        let _ = dir.adopt(&name, Kind::Prometheus, older_prom);
    }
    check_output("--prom", path, Kind::Prometheus)
}

/// Writes Prometheus metrics by the output rule, atomically (node_exporter's textfile collector must never read
/// half a file; the temporary name does not end in .prom, so the collector ignores it).
pub fn write_prom(
    reporter: &mut Reporter,
    path: &Path,
    exposition: &ssdlab_core::prom::Exposition,
) -> Result<()> {
    write_output("--prom", path, Kind::Prometheus, exposition.render().as_bytes())?;
    reporter.say(&format!("metrics   {}", path.display()));
    Ok(())
}

/// Renders results into a report page and writes it by the output rule (`flag` names it in errors).
pub fn write_report(flag: &str, path: &Path, results: &[RunResult]) -> Result<()> {
    write_output(
        flag,
        path,
        Kind::Report,
        ssdlab_report::render(results).as_bytes(),
    )
}

/// The names a result is written to whatever it measured, and their kinds: a file of the user's under one of
/// them is refused before anything is measured. The other CSVs (named after phases) and the charts are judged
/// when they are written, after result.json is saved: a name taken there costs that file, never the result.
fn result_dir_kind(name: &str) -> Option<Kind> {
    match name {
        "result.json" => Some(Kind::Result),
        "report.html" => Some(Kind::Report),
        "samples.csv" => Some(Kind::Csv),
        _ => None,
    }
}

/// Takes on, for `--replace`, a result an older ssdlab left in `outputs` before it kept a manifest, by its
/// formats: a result.json of ssdlab's schema, and beside it its report page (its generator tag), its CSVs (a
/// header of snake_case fields) and its charts (their old marker comment). Nothing else is taken on.
fn adopt_older_result(outputs: &OutputDir) {
    fn result(b: &[u8]) -> bool {
        let text = String::from_utf8_lossy(&b[..b.len().min(4096)]);
        text.trim_start().starts_with('{') && text.contains("\"schema\": \"ssdlab/")
    }
    fn page(b: &[u8]) -> bool {
        String::from_utf8_lossy(&b[..b.len().min(1024)]).contains(ssdlab_report::GENERATOR_META)
    }
    fn csv(b: &[u8]) -> bool {
        let header = b.split(|&c| c == b'\n').next().unwrap_or_default();
        !header.is_empty()
            && header.contains(&b',')
            && header
                .iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_,".contains(c))
    }
    fn chart(b: &[u8]) -> bool {
        String::from_utf8_lossy(&b[..b.len().min(160)]).contains("<!-- ssdlab chart:")
    }
    if outputs.adopt("result.json", Kind::Result, result).is_err()
        || outputs.status("result.json").ok() != Some(Status::Ours(Kind::Result))
    {
        return;
    }
    let _ = outputs.adopt("report.html", Kind::Report, page);
    let path = outputs.path().to_path_buf();
    for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".csv") {
            let _ = outputs.adopt(&name, Kind::Csv, csv);
        }
    }
    for entry in std::fs::read_dir(path.join("charts"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = format!("charts/{}", entry.file_name().to_string_lossy());
        if name.ends_with(".svg") {
            let _ = outputs.adopt(&name, Kind::Chart, chart);
        }
    }
}

/// Prometheus text an older ssdlab wrote before it kept a manifest: only comments and ssdlab's own families.
fn older_prom(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let mut families = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    text.contains("ssdlab_") && families.all(|l| l.starts_with("ssdlab_"))
}

/// Refuses an `--out` that cannot take a result, without creating anything: the first check of every command
/// that writes one, made before anything is measured.
///
/// A directory that already holds a result is refused (a result is not replaced by accident), unless `--replace`
/// asks to replace it whole, and then its result.json must be ssdlab's own. Any file there under a name a result
/// is written to (result.json, report.html, a CSV) must be ssdlab's own too: the user's files are never
/// replaced, with or without `--replace`.
pub fn check_out_dir(out: &OutDir) -> Result<()> {
    let dir = &out.path;
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--out {}: exists and is not a directory; name a directory",
            dir.display()
        );
    }
    if !dir.is_dir() {
        return Ok(());
    }
    let outputs = OutputDir::open(dir).map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let holds_result = std::fs::symlink_metadata(dir.join("result.json")).is_ok();
    if holds_result && out.replace {
        adopt_older_result(&outputs);
    }
    if holds_result && !out.replace {
        bail!(
            "--out {}: it already holds a result (result.json), which this run would replace; name a new directory, \
             or add --replace to replace that result whole (files of yours there are kept)",
            dir.display()
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let Some(kind) = result_dir_kind(&name) else {
            continue;
        };
        match outputs
            .status(&name)
            .map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?
        {
            Status::Absent => {}
            Status::Ours(k) if k == kind => {}
            Status::Ours(k) => bail!(
                "--out {}: {name} is ssdlab's {k}, where this run writes a {kind}; name another directory",
                dir.display()
            ),
            Status::Theirs(why) => bail!(
                "--out {}: {name} is not ssdlab's own ({why}), and ssdlab never replaces a file that is not its \
                 own: move it away or name another directory",
                dir.display()
            ),
        }
    }
    Ok(())
}

/// `--out FILE` of `report`: refused when it names a file that is not a report ssdlab wrote.
pub fn check_out_page(path: &Path) -> Result<()> {
    check_output("--out", path, Kind::Report)
}

/// Makes sure `--out DIR` can take the results before anything is measured: checked, created if missing (never
/// through a symlink), and its manifest written (so a directory that refuses files is known now: a run that
/// fails only when it saves its results has wasted the run). Returns whether this call made the directory; one it
/// made and could not write into is taken away again.
pub fn prepare_out_dir(out: &OutDir) -> Result<bool> {
    check_out_dir(out)?;
    let (dir, made) = OutputDir::create_reporting(&out.path)
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", out.path.display()))?;
    if let Err(e) = dir.write(&[], &[]) {
        if made {
            let _ = dir.remove_if_empty();
        }
        bail!(
            "--out {}: cannot write into the directory: {e}",
            out.path.display()
        );
    }
    Ok(made)
}

/// What [`write_result_dir`] wrote, and what it could not write beside the result.
#[derive(Debug, Default)]
pub struct Written {
    /// result.json, then the CSVs and report.html when they were written.
    pub files: Vec<String>,
    pub charts: usize,
    /// What could not be written beside the result, to be said as alarms.
    pub warnings: Vec<String>,
}

impl Written {
    /// The files written, as the results line says them: `result.json, samples.csv, report.html, 3 charts`.
    pub fn summary(&self) -> String {
        let mut parts = self.files.clone();
        match self.charts {
            0 => {}
            1 => parts.push("1 chart in charts/".into()),
            n => parts.push(format!("{n} charts in charts/")),
        }
        parts.join(", ")
    }
}

/// Writes `result.json`, one `PHASE.csv` of per-second samples per phase (`samples.csv` for a lone phase), the
/// test's tidy CSV, `report.html`, and every chart as an SVG file in `charts/`, by the output rule; what an
/// earlier result of ssdlab's left there (a CSV or chart this one does not write) goes. Fails only when
/// result.json cannot be written; what could not be written beside it is in the returned warnings (the charts
/// and the page are extras: a directory that cannot take them is said while the result stands).
pub fn write_result_dir(dir: &Path, result: &RunResult) -> Result<Written> {
    let outputs = OutputDir::create(dir).map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let json = serde_json::to_vec_pretty(result).context("serializing result.json")?;
    let mut files: Vec<(String, Kind, Vec<u8>)> = vec![("result.json".into(), Kind::Result, json)];
    // A PTS run has up to 1400 cells: its rounds are pts.csv, not a file per phase.
    let per_phase = !matches!(result.analysis, ssdlab_core::schema::Analysis::Pts(_));
    for phase in result.phases.iter().filter(|_| per_phase) {
        let name = if result.phases.len() == 1 {
            "samples".to_string()
        } else {
            phase.name.clone()
        };
        // Two phases of one name (a test's two purges) have one file, the later phase's, as before.
        let name = format!("{name}.csv");
        files.retain(|(n, _, _)| *n != name);
        files.push((name, Kind::Csv, samples_csv(&phase.samples).into_bytes()));
    }
    if let Some((name, csv)) = ssdlab_report::tidy::tidy_csv(result) {
        files.push((name.to_string(), Kind::Csv, csv.into_bytes()));
    }
    // The page is rendered once, for report.html and for the chart files taken from it.
    let page = ssdlab_report::render(std::slice::from_ref(result));
    files.push(("report.html".into(), Kind::Report, page.clone().into_bytes()));
    // result.json first, alone: once it is saved, the measured result stands whatever happens to the rest.
    let (first, rest) = files.split_at(1);
    fn as_outputs(files: &[(String, Kind, Vec<u8>)]) -> Vec<Output<'_>> {
        files
            .iter()
            .map(|(name, kind, bytes)| Output {
                name,
                kind: *kind,
                bytes,
            })
            .collect()
    }
    outputs
        .write(&as_outputs(first), &[])
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let mut written = Written {
        files: vec!["result.json".into()],
        ..Written::default()
    };
    // The CSVs and the page, then the charts: a directory that cannot take them is said, and the result stands.
    // Only CSVs and charts of ssdlab's an earlier result left go (a page `report --out` wrote there stays).
    match outputs.write(&as_outputs(rest), &[Kind::Csv]) {
        Ok(()) => written.files.extend(rest.iter().map(|(name, _, _)| name.clone())),
        Err(e) => written.warnings.push(format!(
            "warning   --out {}: the CSVs and report.html were not written: {e}",
            dir.display()
        )),
    }
    // The charts are extras: a directory that cannot take them is said, and the result stands.
    let charts = ssdlab_report::chart_files_of_page(&page);
    let names: Vec<String> = charts.iter().map(|c| format!("charts/{}", c.name)).collect();
    let batch: Vec<Output<'_>> = charts
        .iter()
        .zip(&names)
        .map(|(chart, name)| Output {
            name,
            kind: Kind::Chart,
            bytes: chart.svg.as_bytes(),
        })
        .collect();
    match outputs.write(&batch, &[Kind::Chart]) {
        Ok(()) => written.charts = batch.len(),
        Err(e) => written.warnings.push(format!(
            "warning   --out {}: the charts were not written: {e}",
            dir.display()
        )),
    }
    Ok(written)
}

/// Per-second samples as CSV, one row per second, columns named like the JSON fields. A phase that both read and
/// wrote also has each direction's rate and latency per second (fio's per-direction logs, as fio-plot reads
/// them). In a phase of one direction those cells are empty; a direction that completed nothing in a second has
/// a rate of 0 (measured) and empty latency cells (no latency was measured, which is not a latency of zero).
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut csv = String::from(
        "t_s,seconds,ios,bytes,iops,bytes_per_s,read_ios,write_ios,latency_ns_mean,latency_ns_p50,\
         latency_ns_p99,latency_ns_max,qd_mean",
    );
    for direction in ["read", "write"] {
        for column in [
            "iops",
            "bytes_per_s",
            "latency_ns_mean",
            "latency_ns_p50",
            "latency_ns_p99",
            "latency_ns_max",
        ] {
            csv.push_str(&format!(",{direction}_{column}"));
        }
    }
    csv.push('\n');
    for s in samples {
        csv.push_str(&format!(
            "{:.3},{:.3},{},{},{:.1},{:.1},{},{},{:.1},{},{},{},{:.2}",
            s.t_s,
            s.seconds,
            s.ios,
            s.bytes,
            s.iops,
            s.bytes_per_s,
            s.read_ios,
            s.write_ios,
            s.latency_ns_mean,
            s.latency_ns_p50,
            s.latency_ns_p99,
            s.latency_ns_max,
            s.qd_mean
        ));
        for direction in [&s.read, &s.write] {
            match direction {
                Some(d) => {
                    csv.push_str(&format!(",{:.1},{:.1}", d.iops, d.bytes_per_s));
                    match d.latency_ns {
                        Some(l) => csv.push_str(&format!(",{:.1},{},{},{}", l.mean, l.p50, l.p99, l.max)),
                        None => csv.push_str(",,,,"),
                    }
                }
                None => csv.push_str(",,,,,,"),
            }
        }
        csv.push('\n');
    }
    csv
}
