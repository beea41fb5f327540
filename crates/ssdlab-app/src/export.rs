//! The exporters: every file a result leaves as (result.json, the samples' and the tidy CSV, report.html, the
//! charts as SVG files, Prometheus text) and the JSON Lines record of an analysis. Each renders a typed
//! `RunResult` or analysis; the checks of `--out` and `--prom` run before anything is measured. Nothing here
//! prints: a warning is returned, or said through the reporter.

use std::path::Path;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result, bail};
use ssdlab_core::DeviceInfo;
use ssdlab_core::schema::{Analysis, Event, RunResult, Sample};

use crate::reporter::Reporter;

/// Writes a file atomically and durably (ssdlab-io's one atomic writer): a reader never sees a half-written file
/// and an interrupted write loses nothing that was there.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    ssdlab_io::files::write_atomically(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// A name beside `path` that this process has not used and no one else can have planted on purpose for it:
/// `.NAME.PID.N.SUFFIX` (files are then created with `create_new`, so a planted one is refused, not followed).
fn fresh_sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map_or("ssdlab".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.{n}.{suffix}", std::process::id()))
}

/// `--prom FILE` must be writable where it is named: checked before anything is measured.
pub fn check_prom_path(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!(
            "--prom {}: is a directory; name a file such as {}/ssdlab.prom",
            path.display(),
            path.display()
        );
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(".".as_ref());
    if !parent.is_dir() {
        bail!(
            "--prom {}: the directory {} does not exist (node_exporter's textfile directory, e.g. \
             /var/lib/prometheus/node-exporter)",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}

/// Writes Prometheus metrics atomically (node_exporter's textfile collector must never read half a file; its
/// temporary name does not end in .prom, so the collector ignores it).
pub fn write_prom(
    reporter: &mut Reporter,
    path: &Path,
    exposition: &ssdlab_core::prom::Exposition,
) -> Result<()> {
    write_atomically(path, exposition.render().as_bytes())
        .map_err(|e| anyhow::anyhow!("--prom {}: {e:#}", path.display()))?;
    reporter.say(&format!("metrics   {}", path.display()));
    Ok(())
}

/// For commands whose result is an analysis (no phases): with `out`, writes result.json and report.html there,
/// then emits `begin`, `analysis` and `verdict` as JSON Lines (the record first: a stream that fails must not
/// lose it). `started_at` is the command's start ([`crate::ports::Ports::started_unix_s`]).
#[allow(clippy::too_many_arguments)]
pub fn publish_analysis(
    started_unix_s: u64,
    reporter: &mut Reporter,
    out: Option<&Path>,
    target: DeviceInfo,
    options: ssdlab_core::schema::options::RunOptions,
    analysis: Analysis,
    verdict: &ssdlab_core::schema::Verdict,
    complete: bool,
) -> Result<()> {
    let started_at = ssdlab_core::units::rfc3339_utc(started_unix_s);
    let result = record(
        started_at,
        target,
        options,
        vec![],
        analysis,
        verdict.clone(),
        complete,
    );
    if let Some(dir) = out {
        save(reporter, dir, &result)?;
    }
    reporter.emit(&Event::Begin {
        kind: result.kind().into(),
        target: result.target,
        options: result.options,
        started_at: result.started_at,
    })?;
    reporter.emit(&Event::Analysis(result.analysis))?;
    reporter.emit(&Event::Verdict(result.verdict))?;
    Ok(())
}

/// A result as this version records it: the schema, the version and the host around what the command measured.
pub fn record(
    started_at: String,
    target: DeviceInfo,
    options: ssdlab_core::schema::options::RunOptions,
    phases: Vec<ssdlab_core::schema::PhaseResult>,
    analysis: Analysis,
    verdict: ssdlab_core::schema::Verdict,
    complete: bool,
) -> RunResult {
    RunResult {
        schema: ssdlab_core::schema::SCHEMA.into(),
        ssdlab_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        host: ssdlab_io::sys::host_info(),
        target,
        options,
        phases,
        analysis,
        verdict,
        complete,
        label: None,
    }
}

/// Writes the result directory and says what could not be written beside it (the charts) as alarms.
pub fn save(reporter: &mut Reporter, dir: &Path, result: &RunResult) -> Result<()> {
    for warning in write_result_dir(dir, result)? {
        reporter.alarm(&warning);
    }
    Ok(())
}

/// Renders results into a report page and writes it atomically.
pub fn write_report(path: &Path, results: &[RunResult]) -> Result<()> {
    write_atomically(path, ssdlab_report::render(results).as_bytes())
}

/// Refuses an `--out` that names something other than a directory, without creating anything: the first check of
/// commands that create the directory only once their safety gate has let them through.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--out {}: exists and is not a directory; name a directory",
            dir.display()
        );
    }
    // ssdlab replaces only its own files: a directory holding someone else's result.json, report.html or CSV
    // files is refused before anything runs.
    if dir.is_dir() {
        let ours = dir.join("result.json");
        let has_result = ours.exists();
        if has_result && !is_ssdlab_result(&ours) {
            bail!(
                "--out {}: its result.json is not one ssdlab wrote, and ssdlab never replaces a file that is not \
                 its own: name another directory",
                dir.display()
            );
        }
        let page = dir.join("report.html");
        if page.exists() && !has_result && !is_ssdlab_page(&page) {
            bail!(
                "--out {}: its report.html is not one ssdlab wrote, and ssdlab never replaces a file that is not \
                 its own: name another directory",
                dir.display()
            );
        }
        let csv = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".csv"));
        if csv && !has_result {
            bail!(
                "--out {}: it holds CSV files no ssdlab result.json accounts for, and ssdlab never replaces a file \
                 that is not its own: name another directory",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The first bytes of a file that exists, if it is a regular file (never a FIFO's wait, never a symlink's target).
fn head_of(path: &Path, len: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(ssdlab_io::sys::O_NOFOLLOW | ssdlab_io::sys::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut head = Vec::new();
    file.take(len as u64).read_to_end(&mut head).ok()?;
    Some(head)
}

/// Whether `path` is a result.json ssdlab wrote (its schema field names ssdlab, near the start, as ssdlab writes
/// it).
fn is_ssdlab_result(path: &Path) -> bool {
    head_of(path, 4096).is_some_and(|head| {
        let text = String::from_utf8_lossy(&head);
        text.trim_start().starts_with('{') && text.contains("\"schema\": \"ssdlab/")
    })
}

/// Whether `path` is a report page ssdlab wrote (its generator meta tag).
fn is_ssdlab_page(path: &Path) -> bool {
    head_of(path, 1024).is_some_and(|head| ssdlab_report::is_report_page(&head))
}

/// `--out FILE` of `report`: refused when it names a file that is not a report ssdlab wrote.
pub fn check_out_page(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() && !is_ssdlab_page(path) {
        bail!(
            "--out {}: exists and is not a report ssdlab wrote; ssdlab never replaces a file that is not its own: \
             name another file",
            path.display()
        );
    }
    Ok(())
}

/// Makes sure `--out DIR` can take the results before anything is measured: it is created if missing, must be
/// a directory, and must accept a file (a run that fails only when it saves its results has wasted the run).
pub fn prepare_out_dir(dir: &Path) -> Result<()> {
    check_out_dir(dir)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out {}: cannot create the directory", dir.display()))?;
    let probe = fresh_sibling(&dir.join("ssdlab-write-probe"), "probe");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .with_context(|| format!("--out {}: cannot write into the directory", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `result.json`, one `PHASE.csv` of per-second samples per phase (`samples.csv` for a lone phase), the
/// test's tidy CSV, `report.html`, and every chart as an SVG file in `charts/`. Returns the warnings to show: the
/// charts are extras, and a directory that cannot take them is said while the result stands.
pub fn write_result_dir(dir: &Path, result: &RunResult) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out {}: cannot create the directory", dir.display()))?;
    let json = serde_json::to_vec_pretty(result).context("serializing result.json")?;
    write_atomically(&dir.join("result.json"), &json)?;
    // A PTS run has up to 1400 cells: its rounds are pts.csv, not a file per phase.
    let per_phase = !matches!(result.analysis, ssdlab_core::schema::Analysis::Pts(_));
    for phase in result.phases.iter().filter(|_| per_phase) {
        let name = if result.phases.len() == 1 {
            "samples".to_string()
        } else {
            phase.name.clone()
        };
        write_atomically(
            &dir.join(format!("{name}.csv")),
            samples_csv(&phase.samples).as_bytes(),
        )?;
    }
    if let Some((name, csv)) = ssdlab_report::tidy::tidy_csv(result) {
        write_atomically(&dir.join(name), csv.as_bytes())?;
    }
    // The page is rendered once, for report.html and for the chart files taken from it. The charts are extras:
    // a directory that cannot take them is said, and the result stands.
    let page = ssdlab_report::render(std::slice::from_ref(result));
    write_atomically(&dir.join("report.html"), page.as_bytes())?;
    Ok(match write_chart_files(&dir.join("charts"), &page) {
        Ok(()) => vec![],
        Err(e) => vec![format!("warning   --out {}: {e:#}", dir.display())],
    })
}

/// Whether the file at `path` (named `name`) is a chart an earlier run wrote: the report crate judges its name and
/// first bytes.
fn is_chart_file(path: &Path, name: &str) -> bool {
    use std::io::Read;
    let mut head = [0u8; ssdlab_report::CHART_FILE_HEAD_BYTES];
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let n = file.read(&mut head).unwrap_or(0);
    ssdlab_report::is_chart_file(name, &head[..n])
}

/// Writes each chart of the rendered `page` as a standalone SVG into `charts` (`01-iops-over-the-whole-run.svg`,
/// ...), first removing the charts an earlier run wrote there, so the directory holds this result's charts only.
/// Only files that carry ssdlab's chart marker are removed, and a `charts` that is a symlink is left alone, so
/// nothing of anyone else's is touched.
fn write_chart_files(charts: &Path, page: &str) -> Result<()> {
    let files = ssdlab_report::chart_files_of_page(page);
    match std::fs::symlink_metadata(charts) {
        Ok(m) if !m.is_dir() => bail!(
            "{} is not a directory ssdlab made (a file or a symlink); the charts were not written",
            charts.display()
        ),
        Ok(_) => {
            for entry in std::fs::read_dir(charts)?.flatten() {
                let is_file = entry.file_type().is_ok_and(|t| t.is_file());
                let name = entry.file_name();
                if is_file && is_chart_file(&entry.path(), &name.to_string_lossy()) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Err(_) => {}
    }
    if files.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(charts).with_context(|| format!("cannot create {}", charts.display()))?;
    for file in files {
        write_atomically(&charts.join(&file.name), file.svg.as_bytes())?;
    }
    Ok(())
}

/// Per-second samples as CSV, one row per second, columns named like the JSON fields.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut csv = String::from(
        "t_s,seconds,ios,bytes,iops,bytes_per_s,read_ios,write_ios,latency_ns_mean,latency_ns_p50,\
         latency_ns_p99,latency_ns_max,qd_mean\n",
    );
    for s in samples {
        csv.push_str(&format!(
            "{:.3},{:.3},{},{},{:.1},{:.1},{},{},{:.1},{},{},{},{:.2}\n",
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
    }
    csv
}
