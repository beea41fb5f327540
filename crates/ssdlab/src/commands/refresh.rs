//! `ssdlab refresh PATH...`: chooses files, states the wear cost, and rewrites them in place through the
//! journalled, verified protocol of `ssdlab_methods::refresh`.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::units::{BinaryBytes, Rate, parse_duration_ns, parse_rate};
use ssdlab_io::files::RefreshHandle;
use ssdlab_methods::refresh::{ChunkFile, FileOutcome, Journal, Stamp, refresh_file};

use super::Outcome;
use crate::cli::RefreshArgs;
use crate::plan::size_flag;

/// The io layer's handle seen through the method's trait.
struct Handle {
    inner: RefreshHandle,
    /// Offsets written back and not yet re-read: the next read of one is the verification read.
    pending_verify: std::collections::HashSet<u64>,
    /// Time and bytes of first reads (the data as it was) and verification reads (the data rewritten): the
    /// before/after speeds, measured by the refresh's own reads from the medium, with no extra pass.
    before: (Duration, u64),
    after: (Duration, u64),
}

impl Handle {
    fn new(inner: RefreshHandle) -> Self {
        Handle {
            inner,
            pending_verify: Default::default(),
            before: Default::default(),
            after: Default::default(),
        }
    }

    fn mb_s((time, bytes): (Duration, u64)) -> Option<f64> {
        (bytes > 0 && !time.is_zero()).then(|| bytes as f64 / time.as_secs_f64() / 1e6)
    }
}

impl ChunkFile for Handle {
    fn identity(&self) -> (u64, u64) {
        self.inner.identity()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.len()
    }
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        self.inner.data_ranges()
    }
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let started = Instant::now();
        let n = self.inner.read_from_media(offset, buf)?;
        let which = if self.pending_verify.remove(&offset) {
            &mut self.after
        } else {
            &mut self.before
        };
        which.0 += started.elapsed();
        which.1 += n as u64;
        Ok(n)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.pending_verify.insert(offset);
        self.inner.write_at(offset, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn changed_by_others(&mut self) -> io::Result<bool> {
        self.inner.changed_by_others()
    }
    fn unchanged_since_our_last_write(&mut self) -> io::Result<bool> {
        self.inner.unchanged_since_our_last_write()
    }
    fn times(&self) -> ((i64, i64), (i64, i64)) {
        self.inner.times()
    }
    fn stamp(&self) -> io::Result<Stamp> {
        self.inner.stamp()
    }
    fn restore_times(&mut self, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
        self.inner.restore_times(atime, mtime)
    }
}

/// A file chosen for refreshing.
struct Candidate {
    path: PathBuf,
    /// The path the user named that led here (files are opened beneath it).
    root: PathBuf,
    root_dev: u64,
    bytes: u64,
}

/// Files found under the paths, and what was skipped while walking and why.
struct Selection {
    files: Vec<Candidate>,
    skipped: Vec<(PathBuf, String)>,
}

fn age_s(meta: &std::fs::Metadata, now: SystemTime) -> f64 {
    let mtime = meta.modified().ok();
    let birth = meta.created().ok();
    let oldest = match (mtime, birth) {
        (Some(m), Some(b)) => m.min(b),
        (Some(t), None) | (None, Some(t)) => t,
        (None, None) => now,
    };
    now.duration_since(oldest).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn select(paths: &[PathBuf], older_than_s: Option<f64>) -> Result<Selection> {
    let now = SystemTime::now();
    let mut selection = Selection {
        files: Vec::new(),
        skipped: Vec::new(),
    };
    let mut seen = HashSet::new();
    for root in paths {
        let meta = std::fs::symlink_metadata(root)
            .with_context(|| format!("PATH {}: cannot stat", root.display()))?;
        if meta.file_type().is_symlink() {
            selection
                .skipped
                .push((root.clone(), "a symbolic link (never followed)".into()));
            continue;
        }
        let root_dev = meta.dev();
        let mut stack = vec![root.clone()];
        while let Some(path) = stack.pop() {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) => {
                    selection.skipped.push((path, format!("cannot stat: {e}")));
                    continue;
                }
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                selection
                    .skipped
                    .push((path, "a symbolic link (never followed)".into()));
            } else if meta.dev() != root_dev {
                selection.skipped.push((path, "on another file system".into()));
            } else if kind.is_dir() {
                let mut entries: Vec<PathBuf> = match std::fs::read_dir(&path) {
                    Ok(dir) => dir.filter_map(|e| e.ok().map(|e| e.path())).collect(),
                    Err(e) => {
                        selection.skipped.push((path, format!("cannot list: {e}")));
                        continue;
                    }
                };
                entries.sort();
                stack.extend(entries.into_iter().rev());
            } else if !kind.is_file() {
                selection.skipped.push((path, "not a regular file".into()));
            } else if !seen.insert((meta.dev(), meta.ino())) {
                // Another name of a file already chosen: its data is refreshed once.
            } else if older_than_s.is_some_and(|limit| age_s(&meta, now) < limit) {
                // Younger than --older-than: not stale by the user's definition; not worth a line.
            } else if meta.len() > 0 {
                selection.files.push(Candidate {
                    path,
                    root: root.clone(),
                    root_dev,
                    bytes: meta.len(),
                });
            }
        }
    }
    Ok(selection)
}

pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SSDLAB_STATE_DIR") {
        return dir.into();
    }
    let root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    if root {
        return "/var/lib/ssdlab".into();
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    home.join(".local/state/ssdlab")
}

pub fn run(args: &RefreshArgs) -> Result<Outcome> {
    let older_than_s = args
        .older_than
        .as_deref()
        .map(|v| {
            parse_duration_ns(v)
                .map(|ns| ns as f64 / 1e9)
                .map_err(|e| anyhow!("--older-than {e}"))
        })
        .transpose()?;
    let rate = args
        .rate
        .as_deref()
        .map(|v| parse_rate(v).map_err(|e| anyhow!("--rate {e}")))
        .transpose()?;
    let bytes_per_s = match rate {
        None => None,
        Some(Rate::BytesPerS(b)) => Some(b),
        Some(Rate::Iops(_)) => bail!("--rate: refresh is limited in bytes per second, e.g. --rate 200m"),
    };
    let chunk = size_flag("chunk", &args.chunk)?;
    if !(64 << 10..=256 << 20).contains(&chunk) || !chunk.is_multiple_of(64 << 10) {
        bail!(
            "--chunk {}: use a multiple of 64k between 64k and 256m",
            args.chunk
        );
    }
    if let Some(f) = args.slower_than
        && !(f > 0.0 && f < 1.0)
    {
        bail!("--slower-than {f}: a fraction of the scan's baseline speed between 0 and 1, e.g. 0.5");
    }
    let mut before_mb_s = std::collections::HashMap::new();
    let mut paths = args.paths.clone();
    if let Some(dir) = &args.from {
        let slow = slow_files_from_scan(dir, args.slower_than.unwrap_or(0.5))?;
        eprintln!(
            "from      {}: {} files read slower than {} of the baseline",
            dir.display(),
            slow.len(),
            args.slower_than.unwrap_or(0.5)
        );
        for (path, mb_s) in slow {
            before_mb_s.insert(path.clone(), mb_s);
            paths.push(path);
        }
    }
    for path in &paths {
        if std::fs::symlink_metadata(path).is_err() {
            bail!("PATH {}: does not exist", path.display());
        }
    }
    let selection = select(&paths, older_than_s)?;
    let total: u64 = selection.files.iter().map(|c| c.bytes).sum();
    eprintln!(
        "refresh   {} files, {} to rewrite: the wear cost is {} of host writes (times the drive's write amplification)",
        selection.files.len(),
        BinaryBytes(total),
        BinaryBytes(total)
    );
    // Each byte is read, written and read again: three passes at the drive's speed, or the --rate cap.
    match bytes_per_s {
        Some(rate) => eprintln!(
            "estimate  {:.0} s at the --rate of {}/s",
            total as f64 / rate,
            BinaryBytes(rate as u64)
        ),
        None if !before_mb_s.is_empty() => {
            let seconds: f64 = selection
                .files
                .iter()
                .filter_map(|c| {
                    before_mb_s
                        .get(&c.path)
                        .map(|mb_s| 3.0 * c.bytes as f64 / (mb_s * 1e6).max(1.0))
                })
                .sum();
            eprintln!("estimate  {seconds:.0} s: three passes at the speeds the scan measured");
        }
        None => eprintln!(
            "estimate  {:.0} s if the drive moves 500 MB/s (three passes: read, write, verify); --rate caps it",
            3.0 * total as f64 / 500e6
        ),
    }
    for (path, reason) in &selection.skipped {
        eprintln!("skip      {}: {reason}", path.display());
    }
    if args.dry_run {
        for c in &selection.files {
            eprintln!("would     {} ({})", c.path.display(), BinaryBytes(c.bytes));
        }
        return Ok(Outcome::Passed);
    }
    let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    let mut journal = Journal::open(&state_dir).with_context(|| {
        format!(
            "--state-dir {}: cannot open the refresh journal",
            state_dir.display()
        )
    })?;
    let interrupted = ssdlab_io::sys::interrupt_flag();
    let started = Instant::now();
    let mut budget = TokenBucket::new(bytes_per_s);
    let (mut buf, mut check) = (Vec::new(), Vec::new());
    let (mut refreshed, mut problems) = (0u64, selection.skipped.len());
    let mut measured: Vec<String> = Vec::new();
    let mut paused = Duration::ZERO;
    for candidate in &selection.files {
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("stopped   interrupted; the journal lets the next run resume");
            return Ok(Outcome::Interrupted);
        }
        let handle = match RefreshHandle::open(
            &candidate.root,
            &candidate.path,
            candidate.root_dev,
            chunk as usize,
        ) {
            Ok(h) => h,
            Err(refusal) => {
                eprintln!("skip      {}: {refusal}", candidate.path.display());
                problems += 1;
                continue;
            }
        };
        let protection = handle.protection;
        let mut file = Handle::new(handle);
        let st_dev = std::fs::metadata(&candidate.path).map(|m| m.dev()).unwrap_or(0);
        let mut pace = |n: u64| {
            budget.take(n);
            paused += pause_while_busy(st_dev);
        };
        let outcome = match refresh_file(&mut file, &mut journal, chunk, &mut buf, &mut check, &mut pace) {
            Ok(outcome) => outcome,
            Err(e) => {
                // An I/O error on one file (ENOSPC on a copy-on-write file system, EIO) does not stop the others;
                // its journal entry stays, so the next run resumes it and restores its times.
                eprintln!(
                    "FAILED    {}: {e}; left for the next run to resume",
                    candidate.path.display()
                );
                problems += 1;
                continue;
            }
        };
        match outcome {
            FileOutcome::Refreshed {
                bytes,
                resumed_from_chunk,
                ..
            } => {
                refreshed += bytes;
                record_refreshed(&state_dir, file.identity(), &candidate.path).with_context(|| {
                    format!("--state-dir {}: cannot record the refresh", state_dir.display())
                })?;
                let before = before_mb_s
                    .get(&candidate.path)
                    .copied()
                    .or(Handle::mb_s(file.before))
                    .map_or("not measured".to_string(), |mb| format!("{mb:.1} MB/s"));
                let after =
                    Handle::mb_s(file.after).map_or("not measured".to_string(), |mb| format!("{mb:.1} MB/s"));
                measured.push(format!(
                    "measured  {}: before {before}, after {after}",
                    candidate.path.display()
                ));
                let resumed = if resumed_from_chunk > 0 {
                    format!(", resumed at chunk {resumed_from_chunk}")
                } else {
                    String::new()
                };
                eprintln!(
                    "done      {} ({}, {protection}{resumed})",
                    candidate.path.display(),
                    BinaryBytes(bytes)
                );
            }
            FileOutcome::Abandoned { reason, chunks_done } => {
                problems += 1;
                eprintln!(
                    "abandoned {}: {reason}; left alone after {chunks_done} chunks",
                    candidate.path.display()
                );
            }
            FileOutcome::VerifyFailed { offset } => {
                problems += 1;
                eprintln!(
                    "FAILED    {}: the chunk at byte {offset} read back differently after rewriting (the original bytes were written again); check the drive",
                    candidate.path.display()
                );
            }
        }
    }
    // Before: the first reads of each chunk (or the scan it came from); after: the verification re-reads.
    for line in &measured {
        eprintln!("{line}");
    }
    eprintln!(
        "refresh   {} rewritten and verified in {:.1} s ({:.1} s paused while the device was busy); {} files skipped or abandoned",
        BinaryBytes(refreshed),
        started.elapsed().as_secs_f64(),
        paused.as_secs_f64(),
        problems
    );
    if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(Outcome::Interrupted);
    }
    Ok(if problems == 0 {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}

/// Where refresh records when it last rewrote each file: one JSON line per file refreshed.
pub const REFRESHED_LOG: &str = "refreshed.jsonl";

/// When ssdlab last refreshed each (dev, ino), in seconds since the Unix epoch.
pub fn refreshed_at(state_dir: &std::path::Path) -> std::collections::HashMap<(u64, u64), f64> {
    std::fs::read_to_string(state_dir.join(REFRESHED_LOG))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| Some(((v["dev"].as_u64()?, v["ino"].as_u64()?), v["unix_s"].as_f64()?)))
        .collect()
}

fn record_refreshed(
    state_dir: &std::path::Path,
    identity: (u64, u64),
    path: &std::path::Path,
) -> io::Result<()> {
    use std::io::Write;
    let unix_s = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let line = serde_json::json!({ "dev": identity.0, "ino": identity.1, "path": path, "unix_s": unix_s });
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state_dir.join(REFRESHED_LOG))?;
    writeln!(log, "{line}")
}

/// Paths a scan found slower than `fraction` of its baseline, with their measured speed.
fn slow_files_from_scan(dir: &std::path::Path, fraction: f64) -> Result<Vec<(PathBuf, f64)>> {
    let file = if dir.is_dir() {
        dir.join("result.json")
    } else {
        dir.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("--from {}: cannot read {}", dir.display(), file.display()))?;
    let result: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--from {}: not an ssdlab result", dir.display()))?;
    if result["kind"] != "scan" {
        bail!(
            "--from {}: a {} result, not a scan; give a directory written by ssdlab scan --out",
            dir.display(),
            result["kind"]
        );
    }
    if result["target"]["kind"] == "sim" {
        bail!(
            "--from {}: a scan of a virtual data set; rewrite those with ssdlab scan --refresh-flagged",
            dir.display()
        );
    }
    let baseline = result["analysis"]["baseline_mb_s"].as_f64().unwrap_or(0.0);
    Ok(result["analysis"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            Some((
                PathBuf::from(f["name"].as_str()?),
                f["bytes_per_s"].as_f64()? / 1e6,
            ))
        })
        .filter(|(_, mb_s)| *mb_s < fraction * baseline)
        .collect())
}

/// Waits while other I/O is in flight on the device holding the file (ours is synchronous, so whatever the
/// block layer reports is someone else's), at most five seconds per chunk so a busy system still progresses.
fn pause_while_busy(st_dev: u64) -> Duration {
    let started = Instant::now();
    while ssdlab_io::sys::block_in_flight(st_dev).is_some_and(|n| n > 0)
        && started.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

/// A token bucket of bytes: `take` waits until the bytes fit the rate.
struct TokenBucket {
    rate: Option<f64>,
    started: Instant,
    spent: f64,
}

impl TokenBucket {
    fn new(rate: Option<f64>) -> Self {
        TokenBucket {
            rate,
            started: Instant::now(),
            spent: 0.0,
        }
    }

    fn take(&mut self, bytes: u64) {
        let Some(rate) = self.rate else { return };
        self.spent += bytes as f64;
        let due = Duration::from_secs_f64(self.spent / rate);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
