//! Every channel a result leaves by: the human table and progress on stderr, JSON Lines on stdout, and the
//! result directory (result.json, samples.csv). Human text never goes to stdout, so `--json` output stays
//! machine-readable.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ssdlab_core::DeviceInfo;
use ssdlab_core::schema::{Analysis, Event, PhaseResult, RunResult, Sample};
use ssdlab_core::units::{BinaryBytes, Nanos};
use ssdlab_engine::Observer;

/// The original stderr while `--quiet` sends fd 2 to /dev/null (None when not quiet).
static ORIGINAL_STDERR: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// Keeps the original stderr for [`alarm`] and for panics, which `--quiet` must not hide.
pub fn keep_original_stderr(original: std::fs::File) {
    if ORIGINAL_STDERR.set(std::sync::Mutex::new(original)).is_ok() {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            alarm(&format!("ssdlab: {info}"));
            default(info);
        }));
    }
}

/// One line on stderr; a write error (a reader that went away) is ignored, so output never costs a result.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.write_all(b"\n"));
}

/// Prints lines on stderr (a renderer's text).
pub fn print_lines_stderr(lines: impl IntoIterator<Item = String>) {
    for line in lines {
        eprintln!("{line}");
    }
}

/// A line the user must see even with `--quiet`: an error, a failed verification, data left pending.
pub fn alarm(line: &str) {
    use std::io::Write as _;
    match ORIGINAL_STDERR.get() {
        Some(original) => {
            let mut file = original.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = writeln!(file, "{line}");
        }
        None => eprintln!("{line}"),
    }
}

/// Streams events to stdout as JSON Lines, shows progress on stderr, and relays Ctrl-C to the runner.
pub struct Reporter {
    json: bool,
    /// Set when stdout's reader went away: stop writing and stop the run (a broken pipe is not an error).
    pipe_closed: bool,
    progress: Option<ProgressBar>,
    phase: String,
    interrupted: &'static AtomicBool,
    /// Process CPU times when the current phase started issuing (after buffers were prepared) and when its
    /// measured part ended (before any verify read-back).
    cpu_at_start: ssdlab_io::sys::CpuTimes,
    cpu_at_end: Option<ssdlab_io::sys::CpuTimes>,
    /// Whether each phase's start and end get a line on stderr (a method of many phases turns them off).
    phase_lines: bool,
}

impl Reporter {
    pub fn new(json: bool) -> Self {
        Reporter {
            json,
            pipe_closed: false,
            progress: None,
            phase: String::new(),
            interrupted: ssdlab_io::sys::interrupt_flag(),
            cpu_at_start: ssdlab_io::sys::cpu_times(),
            cpu_at_end: None,
            phase_lines: true,
        }
    }

    /// CPU time used by the measured part of the current phase.
    pub fn phase_cpu(&self) -> ssdlab_io::sys::CpuTimes {
        self.cpu_at_end
            .unwrap_or_else(ssdlab_io::sys::cpu_times)
            .since(self.cpu_at_start)
    }

    /// Writes one event to stdout when `--json` is on.
    pub fn emit(&mut self, event: &Event) -> Result<()> {
        if !self.json || self.pipe_closed {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        let written = serde_json::to_writer(&mut out, event)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        match written {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.pipe_closed = true;
                Ok(())
            }
            Err(e) => Err(e).context("writing JSON to stdout"),
        }
    }

    pub fn pipe_closed(&self) -> bool {
        self.pipe_closed
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Starts a phase: a progress bar with the phase name and ETA when stderr is a terminal.
    pub fn start_phase(&mut self, name: &str) -> Result<()> {
        self.phase = name.to_string();
        self.emit(&Event::Phase {
            name: name.to_string(),
        })?;
        if io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{prefix:>12} [{bar:30}] {percent:>3}% ETA {eta:>4} {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar.set_prefix(name.to_string());
            self.progress = Some(bar);
        }
        Ok(())
    }

    pub fn finish_phase(&mut self) {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Reporter {
    fn started(&mut self) {
        self.cpu_at_start = ssdlab_io::sys::cpu_times();
        self.cpu_at_end = None;
    }

    fn measured(&mut self) {
        self.cpu_at_end = Some(ssdlab_io::sys::cpu_times());
    }

    fn sample(&mut self, sample: &Sample) {
        if let Some(bar) = &self.progress {
            bar.set_message(format!(
                "{:.0} IOPS  {:.1} MB/s  p99 {}",
                sample.iops,
                sample.bytes_per_s / 1e6,
                Nanos(sample.latency_ns_p99 as f64)
            ));
        }
        let event = Event::Sample {
            phase: self.phase.clone(),
            sample: sample.clone(),
        };
        // A failed stdout write other than a closed pipe cannot be reported from here; the final summary write
        // reports it.
        let _ = self.emit(&event);
    }

    fn progress(&mut self, fraction: f64) {
        if let Some(bar) = &self.progress {
            bar.set_position((fraction * 1000.0) as u64);
        }
    }

    fn stop_requested(&self) -> bool {
        self.pipe_closed || self.interrupted.load(Ordering::Relaxed)
    }
}

impl ssdlab_methods::MethodObserver for Reporter {
    fn begin_phase(&mut self, name: &str) {
        if self.phase_lines && self.progress.is_none() && !io::stderr().is_terminal() {
            eprintln!("phase     {name} started");
        }
        // A stdout failure other than a closed pipe surfaces at the final events.
        let _ = self.start_phase(name);
    }

    fn end_phase(&mut self, phase: &PhaseResult) {
        self.finish_phase();
        let s = &phase.summary;
        if self.phase_lines {
            eprintln!(
                "phase     {:<16} {:>10.0} IOPS {:>26}  {} in {:.1} s  p99 {}{}",
                phase.name,
                s.iops,
                ssdlab_core::units::Throughput(s.bytes_per_s).to_string(),
                BinaryBytes(s.bytes),
                s.seconds,
                Nanos(s.latency_ns.p99 as f64),
                if phase.complete { "" } else { "  (interrupted)" }
            );
        }
        let _ = self.emit(&Event::Summary {
            phase: phase.name.clone(),
            summary: s.clone(),
            complete: phase.complete,
        });
    }

    fn phase_cpu(&self) -> (f64, f64) {
        let cpu = Reporter::phase_cpu(self);
        (cpu.user_s, cpu.sys_s)
    }

    fn show_phase_lines(&mut self, show: bool) {
        self.phase_lines = show;
    }
}

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

/// The wall clock in whole seconds since the Unix epoch (0 if the clock is before it), for time stamps.
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
pub fn write_prom(path: &Path, exposition: &ssdlab_core::prom::Exposition) -> Result<()> {
    write_atomically(path, exposition.render().as_bytes())
        .map_err(|e| anyhow::anyhow!("--prom {}: {e:#}", path.display()))?;
    eprintln!("metrics   {}", path.display());
    Ok(())
}

/// When the command now running began (Unix seconds), or 0 before [`mark_command_start`].
static COMMAND_STARTED_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Notes that a command whose result is an analysis begins now, so its `started_at` is when it began, not when
/// it published (a purge, a fan-out run or an NBD session can take hours). The demo runs several in turn.
pub fn mark_command_start() {
    COMMAND_STARTED_S.store(unix_now_s(), std::sync::atomic::Ordering::Relaxed);
}

/// For commands whose result is an analysis (no phases): with `out`, writes result.json and report.html there,
/// then emits `begin`, `analysis` and `verdict` as JSON Lines (the record first: a stream that fails must not
/// lose it). `started_at` is the command's start ([`mark_command_start`]).
pub fn publish_analysis(
    reporter: &mut Reporter,
    out: Option<&Path>,
    target: DeviceInfo,
    options: ssdlab_core::schema::options::RunOptions,
    analysis: Analysis,
    verdict: &ssdlab_core::schema::Verdict,
    complete: bool,
) -> Result<()> {
    let unix_s = match COMMAND_STARTED_S.load(std::sync::atomic::Ordering::Relaxed) {
        0 => unix_now_s(),
        started => started,
    };
    let started_at = ssdlab_core::units::rfc3339_utc(unix_s);
    let result = RunResult {
        schema: ssdlab_core::schema::SCHEMA.into(),
        ssdlab_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        host: ssdlab_io::sys::host_info(),
        target,
        options,
        phases: vec![],
        analysis,
        verdict: verdict.clone(),
        complete,
        label: None,
    };
    if let Some(dir) = out {
        write_result_dir(dir, &result)?;
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

/// Writes a command's own output (a table, JSON Lines) to stdout, line by line: a reader that goes away (`| head`)
/// ends it quietly with [`Outcome::PipeClosed`], as Unix tools do, instead of a panic.
pub fn print_lines(lines: impl IntoIterator<Item = String>) -> Result<crate::commands::Outcome> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(crate::commands::Outcome::PipeClosed);
            }
            return Err(e).context("writing to stdout");
        }
    }
    Ok(crate::commands::Outcome::Passed)
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
/// test's tidy CSV, `report.html`, and every chart as an SVG file in `charts/`.
pub fn write_result_dir(dir: &Path, result: &RunResult) -> Result<()> {
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
    if let Err(e) = write_chart_files(&dir.join("charts"), &page) {
        alarm(&format!("warning   --out {}: {e:#}", dir.display()));
    }
    Ok(())
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
