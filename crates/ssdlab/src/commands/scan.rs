//! `ssdlab scan PATH...` and `ssdlab scan --target sim:... --dataset ...`: read speed by data age, the field
//! report's table, and which files have gone slow.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::Verdict;
use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::{BinaryBytes, MONTH_S, parse_duration_ns};
use ssdlab_io::{Engine, OpenRequest, RealDevice, open_target};
use ssdlab_methods::scan::{FileScan, ScanAnalysis, ScanItem, analyze, scan_item};

use super::Outcome;
use crate::cli::ScanArgs;
use crate::output::{self, Reporter};
use crate::plan::{self, size_flag};

/// Paths passed over while walking, and why.
type Skipped = Vec<(PathBuf, String)>;

/// Seed 000's drive ages in months (the 0.5-month files give the fresh baseline).
const FIELD_REPORT_MONTHS: [f64; 8] = [0.5, 0.9, 2.0, 3.0, 4.0, 5.1, 6.0, 7.0];

/// Parses `--dataset`: `field-report` or `AGE:COUNTxSIZE,...`. Returns (size, age ns) per file.
fn parse_dataset(spec: &str) -> Result<Vec<(u64, u64)>> {
    let month_ns = (MONTH_S * 1e9) as u64;
    if spec == "field-report" {
        return Ok(FIELD_REPORT_MONTHS
            .iter()
            .flat_map(|&m| std::iter::repeat_n((64u64 << 20, (m * month_ns as f64) as u64), 6))
            .collect());
    }
    let mut files = Vec::new();
    for part in spec.split(',') {
        let bad = || anyhow!("--dataset {part}: write AGE:COUNTxSIZE, e.g. 7mo:8x64m, or field-report");
        let (age, rest) = part.split_once(':').ok_or_else(bad)?;
        let (count, size) = rest.split_once('x').ok_or_else(bad)?;
        let age = parse_duration_ns(age).map_err(|e| anyhow!("--dataset {part}: the age {e}"))?;
        let count: usize = count.parse().map_err(|_| bad())?;
        let size = parse_size_flag(size, part)?;
        files.extend(std::iter::repeat_n((size, age), count));
    }
    if files.is_empty() {
        bail!("--dataset {spec}: no files");
    }
    Ok(files)
}

fn parse_size_flag(value: &str, part: &str) -> Result<u64> {
    let size =
        ssdlab_core::units::parse_size(value).map_err(|e| anyhow!("--dataset {part}: the size {e}"))?;
    if size == 0 {
        bail!("--dataset {part}: files must have a size");
    }
    Ok(size)
}

/// Opens a real file as a read-only O_DIRECT device and scans its data ranges.
fn scan_real_file(
    path: &std::path::Path,
    age_s: f64,
    device_name: &str,
    chunk: u64,
    qd: u32,
    allow_atime: bool,
) -> Result<FileScan> {
    let target = format!("file:{}", path.display());
    let spec = TargetSpec::File {
        path: path.to_path_buf(),
        size: None,
    };
    let request = OpenRequest {
        write: false,
        engine: Engine::Auto,
        exclusive: false,
        no_atime: true,
        allow_atime,
    };
    let mut device: Box<dyn Device> = match open_target(&target, &spec, request)? {
        RealDevice::Uring(d) => Box::new(d),
        RealDevice::Psync(d) => Box::new(d),
        RealDevice::Null(d) => Box::new(d),
    };
    let ranges = ssdlab_io::files::data_ranges_of(path, allow_atime)?;
    let item = ScanItem {
        name: ssdlab_methods::refresh::file::escape_path(path),
        name_bytes_hex: ssdlab_methods::refresh::file::path_bytes_hex(path),
        device: device_name.to_string(),
        age_s,
        ranges,
    };
    Ok(scan_item(device.as_mut(), &item, chunk, qd)?)
}

/// Scans real files: one thread per underlying device, files on a device in turn. A file that vanishes,
/// shrinks or fails to read is reported among the skipped and the scan goes on.
fn scan_paths(args: &ScanArgs, chunk: u64, min_size: u64) -> Result<(Vec<FileScan>, Skipped)> {
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(super::refresh::default_state_dir);
    let exclude: Vec<(u64, u64)> = std::fs::metadata(&state_dir)
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    let walked =
        ssdlab_io::walk::walk(&args.paths, &exclude, args.allow_atime).map_err(|e| anyhow!("PATH {e}"))?;
    let mut skipped = walked.skipped;
    let now_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    // The one notion of data age: a file ssdlab refreshed counts as written when it was refreshed.
    let log = ssdlab_methods::refresh::RefreshLog::load(&state_dir);
    let mut by_device: BTreeMap<u64, Vec<(PathBuf, f64)>> = BTreeMap::new();
    for file in walked.files.into_iter().filter(|f| f.size_bytes >= min_size) {
        let id = ssdlab_methods::refresh::FileId {
            fs: file.identity.fs,
            ino: file.identity.ino,
            birth: file.identity.birth,
        };
        let age = log.data_age_s(&id, file.mtime, id.birth, now_unix_s);
        by_device.entry(file.dev).or_default().push((file.path, age));
    }
    let results = std::thread::scope(|scope| {
        let workers: Vec<_> = by_device
            .into_iter()
            .map(|(dev, files)| {
                scope.spawn(move || {
                    let device_name = ssdlab_io::sys::device_name(dev);
                    let mut scans = Vec::new();
                    let mut failed = Vec::new();
                    for (path, age) in files {
                        match scan_real_file(&path, age, &device_name, chunk, args.qd, args.allow_atime) {
                            Ok(scan) => scans.push(scan),
                            Err(e) => {
                                let why = if e.to_string().contains("Operation not permitted") {
                                    "not ours: reading it would move its access time (--allow-atime permits that)".to_string()
                                } else {
                                    format!("vanished or failed mid-scan: {e:#}")
                                };
                                failed.push((path, why));
                            }
                        }
                    }
                    (scans, failed)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("scan worker panicked"))
            .collect::<Vec<_>>()
    });
    let mut scans = Vec::new();
    for (ok, failed) in results {
        scans.extend(ok.into_iter().filter(|f| f.bytes > 0));
        skipped.extend(failed);
    }
    Ok((scans, skipped))
}

/// Scans a virtual data set laid out on the simulator; with `--refresh-flagged`, rewrites the flagged files
/// there and scans again.
fn scan_sim(args: &ScanArgs, target: &str, chunk: u64) -> Result<(Vec<FileScan>, Option<Vec<FileScan>>)> {
    let spec = target
        .strip_prefix("sim:")
        .ok_or_else(|| anyhow!("--target {target}: scan takes a sim: target; for real files give PATHs"))?;
    let mut device = plan::open_sim(target, spec)?;
    let files = parse_dataset(&args.dataset)?;
    let ranges = device
        .lay_out_dataset(&files)
        .map_err(|e| anyhow!("--dataset {}: {e}", args.dataset))?;
    let items: Vec<ScanItem> = files
        .iter()
        .zip(&ranges)
        .enumerate()
        .map(|(i, (&(_, age_ns), &range))| ScanItem {
            name: format!("virtual/{:.1}mo/file-{i}", age_ns as f64 / 1e9 / MONTH_S),
            name_bytes_hex: None,
            device: target.to_string(),
            age_s: age_ns as f64 / 1e9,
            ranges: vec![range],
        })
        .collect();
    let scan_all =
        |device: &mut ssdlab_sim::device::SimDevice, items: &[ScanItem]| -> Result<Vec<FileScan>> {
            items
                .iter()
                .map(|item| Ok(scan_item(device, item, chunk, args.qd)?))
                .collect()
        };
    let before = scan_all(&mut device, &items)?;
    if !args.refresh_flagged {
        return Ok((before, None));
    }
    let flagged = analyze(before.clone(), 1.0 / args.slower_than);
    let mut refreshed = Vec::new();
    for item in &items {
        if !flagged.flagged.contains(&item.name) {
            continue;
        }
        // Rewrite in place: on the virtual drive the data is new from now on.
        let (offset, len) = item.ranges[0];
        let workload = ssdlab_engine::Workload {
            rw: ssdlab_engine::RwMode::Write,
            mix_read_percent: 0,
            pattern: ssdlab_engine::Pattern::Sequential,
            block_bytes: 1 << 20,
            queue_depth: 8,
            span: ssdlab_engine::Span {
                offset_bytes: offset,
                len_bytes: len
                    .next_multiple_of(1 << 20)
                    .min(device.info().capacity_bytes - offset),
            },
            stop: ssdlab_engine::StopAt {
                passes: Some(1),
                ..Default::default()
            },
            rate: None,
            seed: 1,
            verify: false,
        };
        ssdlab_engine::run_phase(&mut device, &workload, &mut ssdlab_engine::runner::Quiet)?;
        refreshed.push(ScanItem {
            age_s: 2.0 * 86_400.0,
            ..item.clone()
        });
    }
    // Let the rewritten data settle (out of the SLC cache) for two days, then measure again.
    let until = device.now_ns() + 2 * 86_400 * 1_000_000_000;
    device.wait_until(until);
    let after = scan_all(&mut device, &refreshed)?;
    Ok((before, Some(after)))
}

fn print_table(analysis: &ScanAnalysis) {
    eprintln!(
        "baseline  {:.1} MB/s ({})",
        analysis.baseline_mb_s, analysis.baseline_source
    );
    eprintln!(
        "{:>12}{:>7}{:>11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>14}",
        "age (months)", "files", "data", "25%", "median", "75%", "95%", "mean", "h per 900 GB"
    );
    for b in &analysis.buckets {
        let to = if b.months_to.is_finite() {
            format!("{:.0}", b.months_to)
        } else {
            "+".into()
        };
        let c = &b.speed_mb_s;
        eprintln!(
            "{:>12}{:>7}{:>11}{:>9.1}{:>9.1}{:>9.1}{:>9.1}{:>9.1}{:>14.2}",
            format!("{:.0}-{to}", b.months_from),
            b.files,
            BinaryBytes(b.bytes).to_string(),
            c.p25,
            c.p50,
            c.p75,
            c.p95,
            c.mean,
            b.hours_per_900gb
        );
    }
    eprintln!(
        "total     {} read in {:.2} h of device time ({} files); speeds in MB/s",
        BinaryBytes(analysis.total_bytes),
        analysis.total_bulk_read_hours,
        analysis.files.len()
    );
    if analysis.devices.len() > 1 {
        eprintln!(
            "{:>20}{:>7}{:>11}{:>9}{:>9}{:>9}{:>14}",
            "device", "files", "data", "median", "95%", "flagged", "h per 900 GB"
        );
        for d in &analysis.devices {
            eprintln!(
                "{:>20}{:>7}{:>11}{:>9.1}{:>9.1}{:>9}{:>14.2}",
                d.device,
                d.files,
                BinaryBytes(d.bytes).to_string(),
                d.speed_mb_s.p50,
                d.speed_mb_s.p95,
                d.flagged,
                d.hours_per_900gb
            );
        }
    }
    for name in &analysis.flagged {
        let f = analysis
            .files
            .iter()
            .find(|f| &f.name == name)
            .expect("flagged files are scanned files");
        eprintln!(
            "FLAGGED   {name}: {:.1} MB/s, {:.1}x slower than fresh data, {:.1} months old; the slow chunks were slow again",
            f.bytes_per_s / 1e6,
            f.slowdown,
            f.age_s / MONTH_S
        );
    }
}

/// The region scan: MB/s across the LBA range of one device, read-only.
fn region_scan(args: &ScanArgs, target: &str, chunk: u64) -> Result<Outcome> {
    if !(2..=100_000).contains(&args.regions) {
        bail!("--regions {}: use 2 to 100000", args.regions);
    }
    let target_args = crate::cli::TargetArgs {
        target: target.to_string(),
        allow_destroy: false,
        force: false,
        engine: crate::cli::EngineArg::Auto,
    };
    // A region scan is read-only: it never creates or extends the file it is given.
    if let Ok(TargetSpec::File { path, size }) = TargetSpec::parse(target) {
        let existing = std::fs::symlink_metadata(&path).ok().map(|m| m.len());
        match (existing, size) {
            (None, _) => bail!(
                "--device {target}: {} does not exist; a scan reads only existing files",
                path.display()
            ),
            (Some(len), Some(size)) if size > len => bail!(
                "--device {target}: {} holds {len} bytes; a scan never extends a file, so give no size",
                path.display()
            ),
            _ => {}
        }
    }
    let (mut device, _) = plan::open_any(&target_args, false)?;
    let info = device.info().clone();
    let align = (info.logical_block_bytes.max(512) as u64).max(4096);
    let region = info.capacity_bytes / args.regions as u64 / align * align;
    if region == 0 {
        bail!(
            "--regions {}: the device is too small for that many regions",
            args.regions
        );
    }
    let limit = args
        .region_bytes
        .as_deref()
        .map(|v| size_flag("region-bytes", v))
        .transpose()?;
    let read = limit.map_or(region, |l| l.min(region).next_multiple_of(align).min(region));
    eprintln!(
        "scan      {target}: {} regions of {}, reading {} of each",
        args.regions,
        BinaryBytes(region),
        BinaryBytes(read)
    );
    output::print_target(&info);
    let mut rows = Vec::new();
    for i in 0..args.regions as u64 {
        let item = ScanItem {
            name: format!("region {i}"),
            name_bytes_hex: None,
            device: target.to_string(),
            age_s: 0.0,
            ranges: vec![(i * region, read)],
        };
        let scan = scan_item(device.as_mut(), &item, chunk, args.qd)?;
        rows.push(serde_json::json!({ "offset_bytes": i * region, "bytes": scan.bytes, "bytes_per_s": scan.bytes_per_s }));
    }
    let speeds: Vec<f64> = rows
        .iter()
        .map(|r| r["bytes_per_s"].as_f64().unwrap_or(0.0) / 1e6)
        .collect();
    let median_mb_s = ssdlab_methods::analysis::median(&speeds);
    // A slow region counts only if it is slow again when re-read: contention passes, a media slowdown repeats.
    let mut slow = Vec::new();
    for (i, mb_s) in speeds.iter().enumerate() {
        if *mb_s >= args.slower_than * median_mb_s {
            continue;
        }
        let offset = i as u64 * region;
        let item = ScanItem {
            name: format!("region {i}"),
            name_bytes_hex: None,
            device: target.to_string(),
            age_s: 0.0,
            ranges: vec![(offset, read)],
        };
        let again = scan_item(device.as_mut(), &item, chunk, args.qd)?.bytes_per_s / 1e6;
        rows[i]["reread_bytes_per_s"] = serde_json::json!(again * 1e6);
        if again < args.slower_than * median_mb_s {
            slow.push(offset);
        }
    }
    let min = speeds.iter().copied().fold(f64::INFINITY, f64::min);
    let max = speeds.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "regions   MB/s min {min:.1}, median {median_mb_s:.1}, max {max:.1}; {} regions below {} of the median",
        slow.len(),
        args.slower_than
    );
    let analysis = serde_json::json!({ "regions": rows, "region_bytes": region, "median_mb_s": median_mb_s, "min_mb_s": min, "max_mb_s": max, "slow_region_offsets": slow });
    let verdict = if slow.is_empty() {
        Verdict {
            passed: true,
            reasons: vec![],
        }
    } else {
        Verdict {
            passed: false,
            reasons: vec![format!(
                "{} regions read at less than {} of the median speed",
                slow.len(),
                args.slower_than
            )],
        }
    };
    let mut reporter = Reporter::new(args.json);
    let options = serde_json::json!({ "device": target, "regions": args.regions, "region_bytes": args.region_bytes, "chunk": args.chunk, "qd": args.qd, "slower_than": args.slower_than });
    output::publish_analysis(
        &mut reporter,
        args.out.as_deref(),
        "region-scan",
        info,
        options,
        analysis,
        &verdict,
    )?;
    if let Some(dir) = &args.out {
        eprintln!("results   {} (report.html, result.json)", dir.display());
    }
    Ok(if verdict.passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}

pub fn run(args: &ScanArgs) -> Result<Outcome> {
    let min_size = size_flag("min-size", &args.min_size)?;
    let chunk = size_flag("chunk", &args.chunk)?;
    if !(4096..=64 << 20).contains(&chunk) || !chunk.is_multiple_of(4096) {
        bail!("--chunk {}: use a multiple of 4k from 4k to 64m", args.chunk);
    }
    if !(1..=256).contains(&args.qd) {
        bail!("--qd {}: use 1 to 256", args.qd);
    }
    if !(args.slower_than > 0.0 && args.slower_than < 1.0) {
        bail!(
            "--slower-than {}: a fraction of the baseline speed between 0 and 1, e.g. 0.5",
            args.slower_than
        );
    }
    for path in &args.paths {
        if std::fs::symlink_metadata(path).is_err() {
            bail!("PATH {}: does not exist", path.display());
        }
    }
    if let Some(device) = &args.device {
        return region_scan(args, device, chunk);
    }
    let threshold = 1.0 / args.slower_than;
    let (files, after, skipped, subject) = match &args.target {
        Some(target) => {
            let (before, after) = scan_sim(args, target, chunk)?;
            (before, after, Vec::new(), target.clone())
        }
        None => {
            let (files, skipped) = scan_paths(args, chunk, min_size)?;
            let subject = args
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ");
            (files, None, skipped, subject)
        }
    };
    for (path, reason) in &skipped {
        eprintln!("skip      {}: {reason}", path.display());
    }
    if files.is_empty() {
        bail!(
            "PATH {subject}: no files of at least --min-size {} to scan",
            args.min_size
        );
    }
    eprintln!("scan      {subject}: {} files", files.len());
    let analysis = analyze(files, threshold);
    print_table(&analysis);
    let mut value = serde_json::to_value(&analysis)?;
    if let Some(after) = after {
        let refreshed = analyze(after, threshold);
        let before_mb_s: Vec<f64> = analysis
            .files
            .iter()
            .filter(|f| f.flagged)
            .map(|f| f.bytes_per_s / 1e6)
            .collect();
        let after_mb_s: Vec<f64> = refreshed.files.iter().map(|f| f.bytes_per_s / 1e6).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        eprintln!(
            "refresh   {} flagged files rewritten on the virtual drive: {:.1} MB/s before, {:.1} MB/s after",
            after_mb_s.len(),
            mean(&before_mb_s),
            mean(&after_mb_s)
        );
        value["after_refresh"] = serde_json::json!({
            "files": refreshed.files,
            "mean_mb_s_before": mean(&before_mb_s),
            "mean_mb_s_after": mean(&after_mb_s),
        });
    }
    value["skipped"] = serde_json::json!(
        skipped
            .iter()
            .map(|(p, r)| format!("{}: {r}", p.display()))
            .collect::<Vec<_>>()
    );
    let verdict = if analysis.flagged.is_empty() {
        Verdict {
            passed: true,
            reasons: vec![],
        }
    } else {
        Verdict {
            passed: false,
            reasons: vec![format!(
                "{} files read at less than {} of fresh speed, confirmed by re-reading",
                analysis.flagged.len(),
                args.slower_than
            )],
        }
    };
    let mut reporter = Reporter::new(args.json);
    let info = ssdlab_core::DeviceInfo {
        target: subject.clone(),
        kind: if args.target.is_some() {
            ssdlab_core::device::TargetKind::Sim
        } else {
            ssdlab_core::device::TargetKind::File
        },
        model: if args.target.is_some() {
            format!("virtual data set {} on {subject}", args.dataset)
        } else {
            "files".into()
        },
        capacity_bytes: analysis.total_bytes,
        logical_block_bytes: 512,
        physical_block_bytes: 4096,
        memory_align_bytes: 4096,
        max_transfer_bytes: u64::MAX,
        discard_supported: false,
        discard_max_bytes: 0,
        rotational: false,
        clock: if args.target.is_some() {
            ssdlab_core::device::ClockKind::Virtual
        } else {
            ssdlab_core::device::ClockKind::Real
        },
        backend: "timed chunk reads through the engine's devices".into(),
        direct_io: true,
        notes: vec![],
    };
    let options = serde_json::json!({ "paths": args.paths, "target": args.target, "dataset": args.dataset, "min_size": args.min_size, "chunk": args.chunk, "qd": args.qd, "slower_than": args.slower_than });
    output::publish_analysis(
        &mut reporter,
        args.out.as_deref(),
        "scan",
        info,
        options,
        value,
        &verdict,
    )?;
    if let Some(dir) = &args.out {
        let mut csv = String::from("name,device,age_s,bytes,seconds,bytes_per_s,slowdown,flagged\n");
        for f in &analysis.files {
            csv.push_str(&format!(
                "\"{}\",{},{:.0},{},{:.6},{:.1},{:.3},{}\n",
                f.name.replace('"', "\"\""),
                f.device,
                f.age_s,
                f.bytes,
                f.seconds,
                f.bytes_per_s,
                f.slowdown,
                f.flagged
            ));
        }
        std::fs::write(dir.join("files.csv"), csv)
            .with_context(|| format!("--out {}: cannot write files.csv", dir.display()))?;
        eprintln!(
            "results   {} (report.html, result.json, files.csv)",
            dir.display()
        );
    }
    Ok(if reporter.pipe_closed() {
        Outcome::PipeClosed
    } else if verdict.passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}
