//! `ssdlab health [DEVICE...] [--from FILE...]`: read each drive (in parallel: smartctl takes a second or more
//! per SATA drive), put it next to its history, and print, stream, save and export what ssdlab-health concludes.

use anyhow::{Result, anyhow, bail};
use ssdlab_core::DeviceInfo;
use ssdlab_core::device::TargetKind;
use ssdlab_core::prom::Exposition;
use ssdlab_core::schema::health::{HealthAnalysis, HealthLevel, Protocol, UnreadableDrive};
use ssdlab_core::schema::options::{HealthFlags, RunOptions};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_core::units::parse_duration_ns;
use ssdlab_health::rating::{RatingFlags, rating};

use super::Outcome;
use crate::cli::HealthArgs;
use crate::health_sources::{
    DeviceFailure, HistoryDir, Reading, read_device, read_file, scan_drives, split_type,
};
use crate::output::{self, Reporter};

pub fn run(args: &HealthArgs) -> Result<Outcome> {
    crate::output::mark_command_start();
    let window_s = window(&args.window)?;
    let flags = rating_flags(args)?;
    if let Some(prom) = &args.prom {
        output::check_prom_path(prom)?;
    }
    if let Some(out) = &args.out {
        output::prepare_out_dir(out)?;
    }
    let history = (!args.no_history).then(|| HistoryDir {
        dir: args
            .history
            .clone()
            .unwrap_or_else(|| ssdlab_targets::default_state_dir().join("health")),
    });

    let Readings {
        readings,
        unreadable,
        read_ok,
        first_error,
    } = read_all(args)?;
    if let (true, Some(error)) = (readings.is_empty(), first_error) {
        // Nothing was read: an error, but the metrics still say so, or a fleet alert would never fire on a host
        // whose only drive has stopped answering.
        if let Some(prom) = &args.prom {
            let mut exposition = Exposition::new();
            ssdlab_health::prom::health_metrics(&mut exposition, &[], &read_ok);
            output::write_prom(prom, &exposition)?;
        }
        for u in &unreadable[1..] {
            eprintln!("UNREADABLE {}: {}", u.device, u.reason);
        }
        return Err(error);
    }
    let drives = assess_all(readings, history.as_ref(), &flags, window_s)?;

    for d in &drives {
        output::print_lines_stderr(ssdlab_report::text::drive_lines(d));
    }
    if let Some(prom) = &args.prom {
        let mut exposition = Exposition::new();
        ssdlab_health::prom::health_metrics(&mut exposition, &drives, &read_ok);
        output::write_prom(prom, &exposition)?;
    }
    for u in &unreadable {
        eprintln!("UNREADABLE {}: {}", u.device, u.reason);
    }
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
    let verdict = Verdict {
        passed: failed.is_empty(),
        reasons: if failed.is_empty() {
            vec![format!("{} drive(s), none failing", drives.len())]
        } else {
            failed
        },
    };
    let mut reporter = Reporter::new(args.json);
    let options = RunOptions::Health(HealthFlags {
        devices: args.devices.clone(),
        scan: args.scan,
        from: args.from.clone(),
        history_dir: history.as_ref().map(|h| h.dir.clone()),
        window: (args.window != "all").then(|| args.window.clone()),
        rated_tbw: args.rated_tbw,
        rated_dwpd: args.rated_dwpd,
        rated_pe: args.rated_pe,
        warranty_years: args.warranty_years,
    });
    let analysis = HealthAnalysis {
        history_dir: history.as_ref().map(|h| h.dir.display().to_string()),
        drives,
        unreadable,
    };
    output::publish_analysis(
        &mut reporter,
        args.out.as_deref(),
        subject(&analysis),
        options,
        Analysis::Health(analysis),
        &verdict,
        true,
    )?;
    if let Some(dir) = &args.out {
        eprintln!("results   {} (report.html, result.json)", dir.display());
    }
    Ok(Outcome::of_verdict(reporter.pipe_closed(), verdict.passed))
}

/// Each drive read, with its history (loaded, and this snapshot appended) for a real drive, assessed.
fn assess_all(
    readings: Vec<Reading>,
    history: Option<&HistoryDir>,
    flags: &RatingFlags,
    window_s: Option<u64>,
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
        let rating = rating(&snapshot.identity, flags, reading.profile_pe);
        drives.push(ssdlab_health::assess(&snapshot, earlier, window_s, rating));
    }
    Ok(drives)
}

fn window(value: &str) -> Result<Option<u64>> {
    if value == "all" {
        return Ok(None);
    }
    let ns = parse_duration_ns(value)
        .map_err(|e| anyhow!("--window {e}; or write 'all' for the whole history"))?;
    if ns < 1_000_000_000 {
        bail!("--window {value}: give at least a second, e.g. 30d");
    }
    Ok(Some(ns / 1_000_000_000))
}

fn rating_flags(args: &HealthArgs) -> Result<RatingFlags> {
    let positive = |flag: &str, v: Option<f64>| -> Result<Option<f64>> {
        match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                bail!("--{flag} {x}: give a number above zero")
            }
            other => Ok(other),
        }
    };
    if args.rated_pe == Some(0) {
        bail!("--rated-pe 0: give the NAND's rated program/erase cycles, e.g. 3000");
    }
    Ok(RatingFlags {
        tbw_tb: positive("rated-tbw", args.rated_tbw)?,
        dwpd: positive("rated-dwpd", args.rated_dwpd)?,
        warranty_years: positive("warranty-years", args.warranty_years)?,
        pe_cycles: args.rated_pe,
    })
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
fn read_all(args: &HealthArgs) -> Result<Readings> {
    // Each DEVICE, and why it cannot be read before trying (smartctl's scan could not open it).
    let mut asked: Vec<(String, Option<String>)> = args.devices.iter().map(|d| (d.clone(), None)).collect();
    if args.scan {
        let found = scan_drives(&args.smartctl)?;
        if found.is_empty() && args.devices.is_empty() && args.from.is_empty() {
            bail!("--scan: smartctl --scan-open found no drive (is this run as root?)");
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
                    None => read_device(d, &args.smartctl),
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
    for path in &args.from {
        all.readings.push(read_file(path)?);
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
