//! `scan`: read speed by data age over real files (PATH...) or a virtual data set (`--target sim:...
//! --dataset ...`), the field report's table and which files have gone slow; or, with `--device`, MB/s across a
//! device's LBA range. The flags as given ([`ScanFlags`]) become a checked [`Plan`] before anything is read.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{FileScanFlags, RegionScanFlags, RunOptions};
use ssdlab_core::schema::{Analysis, ScanAnalysis};
use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::BinaryBytes;
use ssdlab_io::Engine;
use ssdlab_methods::refresh::file::{escape_path, path_bytes_hex};
use ssdlab_methods::scan::dataset::{DatasetScanOptions, parse_dataset, scan_dataset};
use ssdlab_methods::scan::files::{OpenedFile, ScanCandidate, ScanOpener, ScanRefusal, scan_files};
use ssdlab_methods::scan::read::{Reader, ScanReads};
use ssdlab_methods::scan::region::{RegionScanOptions, plan as plan_regions, region_scan as scan_regions};
use ssdlab_methods::scan::{analyze, verdict};
use ssdlab_report::text::RewriteHint;
use ssdlab_targets::{Access, AnyDevice, OpenOptions};

use crate::export;
use crate::flags::Given;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// Which reader `--reader` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderChoice {
    Cat,
    Chunks,
}

/// `scan`'s flags, typed by the command line (the demo builds them too).
#[derive(Debug, Clone)]
pub struct ScanFlags {
    pub paths: Vec<PathBuf>,
    /// The virtual drive a data set is laid out on.
    pub target: Option<Given<TargetSpec>>,
    /// The device (or file) a region scan reads.
    pub device: Option<Given<TargetSpec>>,
    pub regions: Option<u32>,
    /// Bytes read of each region.
    pub region_bytes: Option<Given<u64>>,
    /// The virtual data set: `field-report` or AGE:COUNTxSIZE,... (its sizes may depend on the drive's capacity).
    pub dataset: String,
    pub refresh_flagged: bool,
    /// Files smaller than this many bytes are not scanned.
    pub min_size: Given<u64>,
    pub reader: Option<ReaderChoice>,
    /// Bytes per read of the chunk reader.
    pub chunk: Option<Given<u64>>,
    pub qd: Option<u32>,
    pub random_reads: Option<u32>,
    pub slower_than: f64,
    pub out: Option<crate::export::OutDir>,
    pub prom: Option<PathBuf>,
    pub allow_atime: bool,
    pub state_dir: Option<PathBuf>,
}

/// A scan, checked: the flags, the reader and the reads per file, the smallest file scanned.
#[derive(Debug, Clone)]
pub struct Plan {
    flags: ScanFlags,
    reads: ScanReads,
    min_size_bytes: u64,
}

impl Plan {
    /// Checks every flag before anything is read, `--out` and `--prom` included.
    pub fn new(flags: ScanFlags) -> Result<Self> {
        let args = &flags;
        let min_size_bytes = args.min_size.value;
        let reader = reader_of(args)?;
        let random_reads = args.random_reads.unwrap_or(if args.target.is_some() {
            DEFAULT_VIRTUAL_RANDOM_READS
        } else {
            0
        });
        if random_reads > 100_000 {
            bail!("--random-reads {random_reads}: use 0 to 100000 per file");
        }
        if args.device.is_some() && args.random_reads.is_some() {
            bail!(
                "--random-reads: a region scan reads regions through, not files; leave it out with --device"
            );
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
        if args.device.is_none() && (args.regions.is_some() || args.region_bytes.is_some()) {
            bail!(
                "--regions and --region-bytes shape a region scan: add --device T to scan a device's LBA range, or \
                 leave them out"
            );
        }
        // Checked now, created by the recording when the scan starts.
        if let Some(dir) = &args.out {
            export::check_out_dir(dir)?;
        }
        if let Some(prom) = &args.prom {
            export::check_prom_path(prom)?;
        }
        let plan = Plan {
            reads: ScanReads { reader, random_reads },
            min_size_bytes,
            flags,
        };
        // What the readers rely on: whole 4 KiB units, a queue they can keep.
        if let Reader::Chunks {
            chunk_bytes,
            queue_depth,
        } = plan.reads.reader
        {
            assert!(chunk_bytes.is_multiple_of(4096) && (4096..=64 << 20).contains(&chunk_bytes));
            assert!((1..=256).contains(&queue_depth));
        }
        assert!(plan.flags.slower_than > 0.0 && plan.flags.slower_than < 1.0);
        Ok(plan)
    }
}

/// Opens real files read-only with O_DIRECT and O_NOATIME (unless `--allow-atime`), through the target port.
struct FileOpener<'t> {
    allow_atime: bool,
    targets: &'t dyn crate::ports::Targets,
}

impl ScanOpener for FileOpener<'_> {
    fn open(&self, path: &Path) -> Result<OpenedFile, ScanRefusal> {
        let refusal = |e: &dyn std::fmt::Display| {
            let text = e.to_string();
            if text.contains("Operation not permitted") {
                ScanRefusal::NotOurs
            } else {
                ScanRefusal::Failed(text)
            }
        };
        let spec = TargetSpec::File {
            path: path.to_path_buf(),
            size: None,
            cache: ssdlab_core::target::FileCache::Bypass,
        };
        // Opened with the psync engine, which sets nothing up, then read on this worker's one io_uring, kept
        // from file to file (`on_this_threads_ring`): a ring per file cost more than the file's read.
        let options = OpenOptions {
            access: Access::ReadOnly,
            engine: Engine::Psync,
            allow_atime: self.allow_atime,
            lay_out_files: false,
            flag: "PATH",
            force_scope: ssdlab_targets::ForceScope::Signatures,
        };
        let opened = self
            .targets
            .open(&escape_path(path), &spec, &options)
            .map_err(|e| refusal(&e))?;
        let device: Box<dyn Device> = ssdlab_targets::on_this_threads_ring(opened.device);
        let data_ranges =
            ssdlab_io::files::data_ranges_of(path, self.allow_atime).map_err(|e| refusal(&e))?;
        Ok(OpenedFile { device, data_ranges })
    }
}

/// Writes the scan's record (--json, --out with files.csv, --prom) and turns its verdict into the exit.
fn publish(
    args: &ScanFlags,
    recording: Recording,
    ports: &mut Ports,
    analysis: ScanAnalysis,
    subject: &str,
    reads: ScanReads,
) -> Result<Outcome> {
    let ScanReads { reader, random_reads } = reads;
    let verdict = verdict(&analysis, args.slower_than);
    let now_s = ports.unix_now_s();
    let mut reporter = Reporter::new(&mut *ports.console);
    let virtual_set = args.target.is_some();
    let info = ssdlab_core::DeviceInfo {
        max_transfer_bytes: u64::MAX,
        direct_io: true,
        ..ssdlab_core::DeviceInfo::subject(
            subject.to_string(),
            if virtual_set {
                ssdlab_core::device::TargetKind::Sim
            } else {
                ssdlab_core::device::TargetKind::File
            },
            if virtual_set {
                format!("virtual data set {} on {subject}", args.dataset)
            } else {
                "files".into()
            },
            analysis.total_bytes,
            "timed chunk reads through the engine's devices".into(),
        )
    };
    let options = RunOptions::FileScan(FileScanFlags {
        paths: args.paths.clone(),
        target: args.target.as_ref().map(|t| t.text.clone()),
        dataset: args.dataset.clone(),
        min_size_bytes: args.min_size.value,
        reader: reader_name(reader).into(),
        chunk_bytes: chunk_bytes(args, reader),
        qd: reader.queue_depth(),
        random_reads,
        slower_than: args.slower_than,
    });
    let metrics = args.prom.as_ref().map(|_| {
        let mut exposition = ssdlab_core::prom::Exposition::new();
        ssdlab_methods::scan::prom::scan_metrics(&mut exposition, &analysis, now_s);
        exposition
    });
    reporter.say_lines(ssdlab_report::text::verdict_lines(&verdict));
    recording.finish(
        &mut reporter,
        Finished::new(info, options, Analysis::Scan(analysis), verdict).metrics(metrics),
    )
}

/// Walks the paths and scans every file of at least `min_size` bytes.
fn scan_paths(args: &ScanFlags, ports: &Ports, reads: ScanReads, min_size: u64) -> Result<ScanAnalysis> {
    let clock = ports.clock;
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(ssdlab_targets::default_state_dir);
    let exclude: Vec<(u64, u64)> = std::fs::metadata(&state_dir)
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    // Absolute paths in the result, so `refresh --from` finds the files from any directory.
    let roots: Vec<PathBuf> = args
        .paths
        .iter()
        .map(|p| std::path::absolute(p).with_context(|| format!("PATH {}", escape_path(p))))
        .collect::<Result<_>>()?;
    // Files below --min-size are passed over as the walk meets them: a tree of a million small files is never
    // held as a list.
    let walked =
        ssdlab_io::walk::walk_keeping(&roots, &exclude, args.allow_atime, |f| f.size_bytes >= min_size)
            .map_err(|e| anyhow!("PATH {e}"))?;
    let now_unix_s = clock.unix_now_s();
    // The one notion of data age: a file ssdlab refreshed counts as written when it was refreshed.
    let log = ssdlab_methods::refresh::RefreshLog::load(&state_dir);
    let candidates: Vec<ScanCandidate> = walked
        .files
        .into_iter()
        .map(|file| {
            let id = ssdlab_methods::refresh::FileId {
                fs: file.identity.fs,
                ino: file.identity.ino,
                birth: file.identity.birth,
            };
            ScanCandidate {
                name: escape_path(&file.path),
                name_bytes_hex: path_bytes_hex(&file.path),
                device_id: file.dev,
                device_name: ssdlab_io::sys::device_name(file.dev),
                age_s: log.data_age_s(&id, file.mtime, id.birth, now_unix_s),
                path: file.path,
            }
        })
        .collect();
    let opener = FileOpener {
        allow_atime: args.allow_atime,
        targets: ports.targets,
    };
    let (scans, mut skipped) = scan_files(candidates, &opener, reads);
    skipped.splice(
        0..0,
        walked
            .skipped
            .into_iter()
            .map(|(path, reason)| ssdlab_core::schema::SkippedFile {
                name: escape_path(&path),
                name_bytes_hex: path_bytes_hex(&path),
                reason,
                io_failed: false,
            }),
    );
    let mut analysis = analyze(scans, args.slower_than, &reads.reader.describe());
    analysis.skipped = skipped;
    Ok(analysis)
}

/// Lays the virtual data set out on the simulator and scans it (and, with `--refresh-flagged`, rewrites the
/// flagged files there and scans them again).
fn scan_sim(
    targets: &dyn crate::ports::Targets,
    args: &ScanFlags,
    given: &Given<TargetSpec>,
    reads: ScanReads,
) -> Result<ScanAnalysis> {
    let target = given.text.as_str();
    // The virtual data set is written into the virtual drive's past: only a virtual drive has one.
    let AnyDevice::Sim(mut device) = TargetPlan::read_only(given).open(targets, Use::Reads)?.device else {
        bail!("--target {target}: scan takes a sim: target; for real files give PATHs");
    };
    let files = parse_dataset(&args.dataset, device.info().capacity_bytes).map_err(|e| anyhow!(e))?;
    let layout: Vec<(u64, u64)> = files.iter().map(|f| (f.size_bytes, f.age_ns)).collect();
    let ranges = device
        .lay_out_dataset(&layout)
        .map_err(|e| anyhow!("--dataset {}: {e}", args.dataset))?;
    let options = DatasetScanOptions {
        reads,
        slower_than: args.slower_than,
        refresh_flagged: args.refresh_flagged,
    };
    Ok(scan_dataset(&mut device, target, &files, &ranges, &options)?)
}

/// Random reads per virtual file unless `--random-reads` says otherwise: 6 files of an age give 1536 samples.
const DEFAULT_VIRTUAL_RANDOM_READS: u32 = 256;

/// The chunk reader's read size unless `--chunk` says otherwise (written `1m` in records).
const DEFAULT_CHUNK_BYTES: u64 = 1 << 20;

/// The reader `--reader`, `--chunk` and `--qd` ask for. Without `--reader`, a virtual data set is read as the
/// field report read (cat) unless a chunk or depth is given, and files and devices in chunks.
fn reader_of(args: &ScanFlags) -> Result<Reader> {
    let chunks_given = args.chunk.is_some() || args.qd.is_some();
    let default = if args.target.is_some() && !chunks_given {
        ReaderChoice::Cat
    } else {
        ReaderChoice::Chunks
    };
    match args.reader.unwrap_or(default) {
        ReaderChoice::Cat => {
            if chunks_given {
                bail!(
                    "--chunk and --qd shape --reader chunks; --reader cat reads 128 KiB at a time, one at a time, as cat does: leave them out or say --reader chunks"
                );
            }
            Ok(Reader::Cat)
        }
        ReaderChoice::Chunks => {
            let chunk_bytes = args.chunk.as_ref().map_or(DEFAULT_CHUNK_BYTES, |c| c.value);
            if !(4096..=64 << 20).contains(&chunk_bytes) || !chunk_bytes.is_multiple_of(4096) {
                let text = args.chunk.as_ref().map_or("1m", |c| c.text.as_str());
                bail!("--chunk {text}: use a multiple of 4k from 4k to 64m");
            }
            let queue_depth = args.qd.unwrap_or(4);
            if !(1..=256).contains(&queue_depth) {
                bail!("--qd {queue_depth}: use 1 to 256");
            }
            Ok(Reader::Chunks {
                chunk_bytes,
                queue_depth,
            })
        }
    }
}

/// `--chunk` as the user wrote it (or its default), or the cat reader's fixed 128k.
fn chunk_bytes(args: &ScanFlags, reader: Reader) -> u64 {
    match reader {
        Reader::Cat => 128 << 10,
        Reader::Chunks { .. } => args.chunk.as_ref().map_or(1 << 20, |c| c.value),
    }
}

fn reader_name(reader: Reader) -> &'static str {
    match reader {
        Reader::Cat => "cat",
        Reader::Chunks { .. } => "chunks",
    }
}

/// Regions of a region scan unless `--regions` says otherwise.
const DEFAULT_REGIONS: u32 = 128;

/// The region scan: MB/s across the LBA range of one device, read-only.
fn region_scan(
    args: &ScanFlags,
    ports: &mut Ports,
    given: &Given<TargetSpec>,
    reader: Reader,
) -> Result<Outcome> {
    let target = given.text.as_str();
    let options = RegionScanOptions {
        regions: args.regions.unwrap_or(DEFAULT_REGIONS),
        read_bytes: args.region_bytes.as_ref().map(|r| r.value),
        reader,
        slower_than: args.slower_than,
    };
    // A region scan is read-only: the opener never creates or extends the file it is given.
    let mut device = TargetPlan::read_only(given)
        .open_as(ports.targets, Use::Reads, "--device")?
        .device;
    let info = device.info().clone();
    let recording = Recording::begin(args.out.as_ref(), args.prom.as_deref(), ports.started_unix_s)?;
    let layout = plan_regions(&info, &options)?;
    let now_s = ports.unix_now_s();
    let mut reporter = Reporter::new(&mut *ports.console);
    reporter.say(&format!(
        "scan      {target}: {} regions of {}, reading {} of each",
        options.regions,
        BinaryBytes(layout.region_bytes),
        BinaryBytes(layout.read_bytes)
    ));
    reporter.say_lines(ssdlab_report::text::target_lines(&info));
    let (analysis, verdict) = scan_regions(&mut device, &options)?;
    reporter.say(&format!(
        "regions   MB/s min {:.1}, median {:.1}, max {:.1}; {} regions below {} of the median, twice",
        analysis.min_bytes_per_s / 1e6,
        analysis.median_bytes_per_s / 1e6,
        analysis.max_bytes_per_s / 1e6,
        analysis.slow_region_offsets.len(),
        args.slower_than
    ));
    for row in analysis.regions.iter().filter(|r| r.error.is_some()) {
        reporter.alarm(&format!(
            "unread    {}",
            row.error.as_deref().unwrap_or("the read failed")
        ));
    }
    let metrics = args.prom.as_ref().map(|_| {
        let mut exposition = ssdlab_core::prom::Exposition::new();
        ssdlab_methods::scan::prom::region_scan_metrics(&mut exposition, target, &analysis, now_s);
        exposition
    });
    let options = RunOptions::RegionScan(RegionScanFlags {
        device: target.to_string(),
        regions: options.regions,
        region_bytes: args.region_bytes.as_ref().map(|r| r.value),
        reader: reader_name(reader).into(),
        chunk_bytes: chunk_bytes(args, reader),
        qd: reader.queue_depth(),
        slower_than: args.slower_than,
    });
    reporter.say_lines(ssdlab_report::text::verdict_lines(&verdict));
    recording.finish(
        &mut reporter,
        Finished::new(info, options, Analysis::RegionScan(analysis), verdict).metrics(metrics),
    )
}

/// Runs the scan and records it.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let (args, reads) = (&plan.flags, plan.reads);
    if let Some(device) = &args.device {
        return region_scan(args, ports, device, reads.reader);
    }
    // Before the files are read: a directory that cannot take the result is known before the scan is spent.
    let recording = Recording::begin(args.out.as_ref(), args.prom.as_deref(), ports.started_unix_s)?;
    let (analysis, subject) = match &args.target {
        Some(target) => (scan_sim(ports.targets, args, target, reads)?, target.text.clone()),
        None => {
            let subject = args
                .paths
                .iter()
                .map(|p| escape_path(p))
                .collect::<Vec<_>>()
                .join(" ");
            (scan_paths(args, ports, reads, plan.min_size_bytes)?, subject)
        }
    };
    for skipped in &analysis.skipped {
        ports
            .console
            .say(&format!("skip      {}: {}", skipped.name, skipped.reason));
    }
    if analysis.files.is_empty() {
        bail!(
            "PATH {subject}: no files of at least --min-size {} to scan",
            args.min_size.text
        );
    }
    ports
        .console
        .say(&format!("scan      {subject}: {} files", analysis.files.len()));
    let hint = match (args.target.is_some(), analysis.after_refresh.is_some()) {
        (_, true) => RewriteHint::Done,
        (true, false) => RewriteHint::RefreshFlagged,
        (false, false) => RewriteHint::RefreshFrom,
    };
    ports.say_lines(ssdlab_report::text::scan_lines(&analysis, hint));
    if let Some(after) = &analysis.after_refresh {
        let hours = |h: Option<f64>| h.map_or("-".into(), |h| format!("{h:.2}"));
        ports.console.say(&format!(
            "refresh   {} flagged files rewritten on the virtual drive: {:.1} MB/s before, {:.1} MB/s after ({} h per 900 GB before, {} after; the field report: 10.49 before on its oldest drive, {:.2} after)",
            after.files.len(),
            after.mean_bytes_per_s_before / 1e6,
            after.mean_bytes_per_s_after / 1e6,
            hours(after.hours_per_900gb_before),
            hours(after.hours_per_900gb_after),
            ssdlab_methods::scan::dataset::FIELD_REPORT_REFRESHED_HOURS
        ));
    }
    publish(args, recording, ports, analysis, &subject, reads)
}
