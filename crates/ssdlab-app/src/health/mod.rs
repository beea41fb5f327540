//! `health`: read each drive (in parallel: smartctl takes a second or more per SATA drive), put it next to its
//! history, and say, stream, save and export what ssdlab-health concludes.

mod sources;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::DeviceInfo;
use ssdlab_core::device::TargetKind;
use ssdlab_core::prom::Exposition;
use ssdlab_core::schema::health::{HealthAnalysis, HealthLevel, Protocol, UnreadableDrive};
use ssdlab_core::schema::options::{HealthFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::units::parse_duration_ns;
use ssdlab_health::rating::{RatingFlags, rating};

use std::path::PathBuf;

use self::sources::{
    DeviceFailure, HistoryDir, Reading, Saved, attach_nand_log, read_device, read_file, scan_drives,
    split_type,
};
use crate::export;
use crate::flags::Given;
use crate::ports::{Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;

/// A health reading, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Device nodes (DEVICE or DEVICE:TYPE) and `sim:` targets.
    pub devices: Vec<String>,
    /// Also every drive `smartctl --scan-open` finds.
    pub scan: bool,
    /// Saved smartctl or nvme-cli JSON, or ssdlab results.
    pub from: Vec<PathBuf>,
    /// Where each drive's history is kept, or None for none.
    pub history: Option<PathBuf>,
    /// `--window` in seconds (None: the whole history).
    pub window: Given<Option<u64>>,
    pub rating: RatingFlags,
    pub prom: Option<PathBuf>,
    pub out: Option<crate::export::OutDir>,
    pub smartctl: PathBuf,
    /// `--wear-warn`: rated wear, in percent, from which a drive warns.
    pub wear_warn_percent: f64,
}

impl Plan {
    /// Checks the flags: a window of at least a second, ratings above zero, a `--prom` file and an `--out`
    /// directory that can be written (created when the run starts).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        devices: Vec<String>,
        scan: bool,
        from: Vec<PathBuf>,
        history: Option<PathBuf>,
        window: Given<Option<u64>>,
        rating: RatingFlags,
        prom: Option<PathBuf>,
        out: Option<crate::export::OutDir>,
        smartctl: PathBuf,
        wear_warn_percent: f64,
    ) -> Result<Self> {
        check_rating(&rating)?;
        if let Some(prom) = &prom {
            export::check_prom_path(prom)?;
        }
        if let Some(out) = &out {
            export::check_out_dir(out)?;
        }
        Ok(Plan {
            devices,
            scan,
            from,
            history,
            window,
            rating,
            prom,
            out,
            smartctl,
            wear_warn_percent,
        })
    }
}

/// The history directory when none is named: under the state directory.
pub fn default_history_dir() -> PathBuf {
    ssdlab_targets::default_state_dir().join("health")
}

/// Reads, assesses, says and records every drive.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let history = plan.history.clone().map(|dir| HistoryDir { dir });
    // Before the drives are read (a directory that cannot take the result is known first). The metrics of a
    // run that read nothing are written below without it.
    let recording = Recording::begin(plan.out.as_ref(), plan.prom.as_deref(), ports.started_unix_s)?;
    let Readings {
        readings,
        unreadable,
        read_ok,
        first_error,
    } = read_all(plan, ports)?;
    if let (true, Some(error)) = (readings.is_empty(), first_error) {
        // Nothing was read: an error, but the metrics still say so, or a fleet alert would never fire on a host
        // whose only drive has stopped answering.
        let mut reporter = Reporter::new(&mut *ports.console);
        if let Some(prom) = &plan.prom {
            let mut exposition = Exposition::new();
            ssdlab_health::prom::health_metrics(&mut exposition, &[], &read_ok, plan.wear_warn_percent);
            export::write_prom(&mut reporter, prom, &exposition)?;
        }
        for u in &unreadable[1..] {
            reporter.say(&format!("UNREADABLE {}: {}", u.device, u.reason));
        }
        return Err(error);
    }
    let drives = assess_all(readings, history.as_ref(), plan)?;
    let mut reporter = Reporter::new(&mut *ports.console);
    for d in &drives {
        reporter.say_lines(ssdlab_report::text::drive_lines(d, plan.wear_warn_percent));
    }
    let metrics = plan.prom.as_ref().map(|_| {
        let mut exposition = Exposition::new();
        ssdlab_health::prom::health_metrics(&mut exposition, &drives, &read_ok, plan.wear_warn_percent);
        exposition
    });
    for u in &unreadable {
        reporter.say(&format!("UNREADABLE {}: {}", u.device, u.reason));
    }
    let verdict = fleet_verdict(&drives, &unreadable);
    let options = recorded(plan, history.as_ref());
    let analysis = HealthAnalysis {
        history_dir: history.as_ref().map(|h| h.dir.display().to_string()),
        wear_warn_percent: Some(plan.wear_warn_percent),
        drives,
        unreadable,
    };
    let target = subject(&analysis);
    recording.finish(
        &mut reporter,
        Finished::new(target, options, Analysis::Health(analysis), verdict).metrics(metrics),
    )
}

/// The command's verdict over every drive: failed when a drive fails or could not be read; else unknown when a
/// drive's output held no health data; a drive that only warns is named in the reasons, since "passed" alone
/// above a warning reads as all clear.
fn fleet_verdict(
    drives: &[ssdlab_core::schema::health::DriveHealth],
    unreadable: &[ssdlab_core::schema::health::UnreadableDrive],
) -> Verdict {
    let failed: Vec<String> = drives
        .iter()
        .filter(|d| d.verdict.level == HealthLevel::Fail)
        .map(|d| format!("{}: {}", d.snapshot.identity.source, d.verdict.reasons[0]))
        .chain(
            unreadable
                .iter()
                .map(|u| format!("{}: could not be read: {}", u.device, u.reason)),
        )
        .collect();
    // A drive that warns does not fail the command, but the verdict names it: "passed" alone above a warning
    // reads as all clear.
    let warned: Vec<String> = drives
        .iter()
        .filter(|d| d.verdict.level == HealthLevel::Warn)
        .map(|d| format!("WARN {}: {}", d.snapshot.identity.source, d.verdict.reasons[0]))
        .collect();
    // A drive with no health data read is never counted as passing: with nothing failed, the verdict is unknown.
    let unknown: Vec<String> = drives
        .iter()
        .filter(|d| d.verdict.level == HealthLevel::Unknown)
        .map(|d| format!("UNKNOWN {}: {}", d.snapshot.identity.source, d.verdict.reasons[0]))
        .collect();
    if !failed.is_empty() {
        return Verdict {
            finding: false,
            passed: false,
            reasons: failed,
            unknown: false,
        };
    }
    let summary = format!(
        "{} drive(s), none failing{}{}",
        drives.len(),
        match warned.len() {
            0 => String::new(),
            n => format!(", {n} with warnings"),
        },
        match unknown.len() {
            0 => String::new(),
            n => format!(", {n} with no health data read"),
        }
    );
    Verdict {
        finding: false,
        passed: unknown.is_empty(),
        unknown: !unknown.is_empty(),
        reasons: std::iter::once(summary).chain(unknown).chain(warned).collect(),
    }
}

/// The flags as result.json records them.
fn recorded(plan: &Plan, history: Option<&HistoryDir>) -> RunOptions {
    RunOptions::Health(HealthFlags {
        devices: plan.devices.clone(),
        scan: plan.scan,
        from: plan.from.clone(),
        history_dir: history.map(|h| h.dir.clone()),
        window_ns: plan.window.value,
        rated_tbw: plan.rating.tbw_tb,
        rated_dwpd: plan.rating.dwpd,
        rated_pe: plan.rating.pe_cycles,
        warranty_years: plan.rating.warranty_years,
        wear_warn_percent: Some(plan.wear_warn_percent),
    })
}

/// Each drive read, with its history (loaded, and this snapshot appended) for a real drive, assessed.
fn assess_all(
    readings: Vec<Reading>,
    history: Option<&HistoryDir>,
    plan: &Plan,
) -> Result<Vec<ssdlab_core::schema::health::DriveHealth>> {
    let mut drives = Vec::with_capacity(readings.len());
    for reading in readings {
        let mut snapshot = reading.snapshot;
        let mut earlier = vec![];
        match (history, reading.is_virtual) {
            (Some(h), false) => {
                let loaded = h.load(&snapshot)?;
                if loaded.skipped_lines > 0 {
                    snapshot.notes.push(format!(
                        "{} torn line(s) in the history file were skipped",
                        loaded.skipped_lines
                    ));
                }
                if h.append(&snapshot, &loaded.snapshots)? {
                    snapshot.notes.push(format!("recorded in {}", h.dir.display()));
                }
                earlier = loaded.snapshots;
            }
            (Some(_), true) => snapshot
                .notes
                .push("a virtual drive lives for one command: no history is kept".into()),
            (None, _) => {}
        }
        let rating = rating(&snapshot.identity, &plan.rating, reading.profile_pe);
        drives.push(ssdlab_health::assess_warned(
            &snapshot,
            earlier,
            plan.window.value,
            rating,
            plan.wear_warn_percent,
        ));
    }
    Ok(drives)
}

/// `--window` for its value parser: a duration of at least a second (in whole seconds), or `all` (None) for the
/// whole history.
pub fn window_arg(text: &str) -> std::result::Result<Given<Option<u64>>, String> {
    if text == "all" {
        return Ok(Given::of(text, None));
    }
    let ns = parse_duration_ns(text).map_err(|e| format!("{e}; or write 'all' for the whole history"))?;
    if ns < 1_000_000_000 {
        return Err("give at least a second, e.g. 30d".into());
    }
    Ok(Given::of(text, Some(ns / 1_000_000_000)))
}

/// `--wear-warn` for its value parser: a percentage of rated wear above 0 and at most 100 ("70" or "70%").
pub fn wear_warn_arg(text: &str) -> std::result::Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(
            "give the percentage of rated wear from which a drive warns, above 0 and at most 100 (e.g. 70)"
                .into(),
        ),
    }
}

/// The ratings given by hand: each above zero.
fn check_rating(rating: &RatingFlags) -> Result<()> {
    let positive = |flag: &str, v: Option<f64>| -> Result<()> {
        match v {
            Some(x) if !(x.is_finite() && x > 0.0) => bail!("--{flag} {x}: give a number above zero"),
            _ => Ok(()),
        }
    };
    if rating.pe_cycles == Some(0) {
        bail!("--rated-pe 0: give the NAND's rated program/erase cycles, e.g. 3000");
    }
    positive("rated-tbw", rating.tbw_tb)?;
    positive("rated-dwpd", rating.dwpd)?;
    positive("warranty-years", rating.warranty_years)
}

/// What reading the drives gave.
struct Readings {
    readings: Vec<Reading>,
    unreadable: Vec<UnreadableDrive>,
    /// Each DEVICE as given, and whether it was read (for `ssdlab_health_read_ok`).
    read_ok: Vec<(String, bool)>,
    /// Why the first unreadable DEVICE could not be read: the error when nothing at all was read.
    first_error: Option<anyhow::Error>,
}

/// Reads every DEVICE (in parallel) and every --from file, in the order given. A DEVICE that cannot be read
/// this time is set aside with its reason while the others are read (one failing drive must not silence a
/// fleet's metrics); bad input (a DEVICE that is no device node, a --from file that does not parse) is an error.
fn read_all(plan: &Plan, ports: &Ports) -> Result<Readings> {
    let (tools, clock, targets) = (ports.tools, ports.clock, ports.targets);
    // Each DEVICE, and why it cannot be read before trying (smartctl's scan could not open it).
    let mut asked: Vec<(String, Option<String>)> = plan.devices.iter().map(|d| (d.clone(), None)).collect();
    if plan.scan {
        let found = scan_drives(&plan.smartctl, tools)?;
        if found.is_empty() && plan.devices.is_empty() && plan.from.is_empty() {
            // Without root smartctl cannot open a drive to list it; as root, none it knows is attached (a VM's
            // virtio disks, for one, have no SMART to read).
            let why = if ssdlab_io::sys::running_as_root() {
                "no drive it can read is attached (virtio and other virtual disks have no SMART); give a saved \
                 output with --from"
            } else {
                "it needs root to open a drive: run as root, or give a saved output with --from"
            };
            bail!("--scan: smartctl --scan-open found no drive: {why}");
        }
        asked.extend(found);
    }
    let devices: Vec<Result<Reading, DeviceFailure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = asked
            .iter()
            .map(|(d, open_error)| {
                scope.spawn(move || match open_error {
                    Some(e) => Err(DeviceFailure::Unreadable(anyhow!(
                        "DEVICE {d}: smartctl --scan-open could not open it: {e}"
                    ))),
                    None => read_device(d, &plan.smartctl, tools, clock, targets),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(DeviceFailure::Unreadable(anyhow!("reading a drive panicked"))))
            })
            .collect()
    });
    let mut all = Readings {
        readings: vec![],
        unreadable: vec![],
        read_ok: vec![],
        first_error: None,
    };
    let names: Vec<String> = asked.iter().map(|(d, _)| d.clone()).collect();
    for (device, reading) in names.iter().zip(devices) {
        let ok = match reading {
            Ok(reading) => {
                all.readings.push(reading);
                true
            }
            Err(DeviceFailure::Input(e)) => return Err(e),
            Err(DeviceFailure::Unreadable(e)) => {
                all.unreadable.push(UnreadableDrive {
                    device: device.clone(),
                    reason: format!("{e:#}"),
                });
                all.first_error.get_or_insert(e);
                false
            }
        };
        all.read_ok.push((read_ok_label(device, &names), ok));
    }
    let from_files_start = all.readings.len();
    for path in &plan.from {
        match read_file(path, clock)? {
            Saved::Drive(reading) => all.readings.push(*reading),
            Saved::NandLog { file, nand } => {
                // Only a drive read from a --from file can be the one the log was saved with.
                let previous = all.readings[from_files_start..].last_mut();
                attach_nand_log(previous, &file, nand)?;
            }
        }
    }
    Ok(all)
}

/// The `device` label of a DEVICE's read_ok series: its path, as the drive's other series carry it, or the
/// whole DEVICE:TYPE where one path is read as several drives (a RAID controller's megaraid,N).
fn read_ok_label(device: &str, asked: &[String]) -> String {
    let path = |d: &str| -> String {
        if matches!(
            ssdlab_core::target::TargetSpec::parse(d),
            Ok(ssdlab_core::target::TargetSpec::Sim { .. })
        ) {
            d.to_string()
        } else {
            split_type(d).0.to_string()
        }
    };
    let mine = path(device);
    if asked.iter().filter(|d| path(d) == mine).count() > 1 {
        device.to_string()
    } else {
        mine
    }
}

/// What the result is about: one drive, or a fleet.
fn subject(analysis: &HealthAnalysis) -> DeviceInfo {
    let (target, model, capacity) = match analysis.drives.as_slice() {
        [one] => (
            one.snapshot.identity.source.clone(),
            one.snapshot.identity.model.clone(),
            one.snapshot.identity.capacity_bytes.unwrap_or(0),
        ),
        many => (
            format!("{} drives", many.len()),
            "health of several drives".into(),
            many.iter()
                .filter_map(|d| d.snapshot.identity.capacity_bytes)
                .sum(),
        ),
    };
    let virtual_only = analysis
        .drives
        .iter()
        .all(|d| d.snapshot.identity.protocol == Protocol::Virtual);
    DeviceInfo::subject(
        target,
        if virtual_only {
            TargetKind::Sim
        } else {
            TargetKind::BlockDevice
        },
        model,
        capacity,
        "SMART / NVMe health data (smartctl, nvme-cli) or the simulator's counters".into(),
    )
}
