//! The purges a drive's firmware does (NVMe sanitize and format with secure erase through nvme-cli, ATA sanitize
//! and SECURITY ERASE UNIT through hdparm), behind ssdlab-methods' `Purger` for those two methods. What the
//! drive offers and the command lines are `ssdlab_health::purge`'s; this runs the tools.
//!
//! It refuses, before running anything that writes, a partition (a firmware purge erases the whole drive), a
//! device with no drive firmware (loop, device-mapper) or behind a SCSI/USB bridge, and an NVMe purge that would
//! reach namespaces the safety gate did not check.

use std::path::{Path, PathBuf};
use std::process::Command;

use ssdlab_health::purge::{
    FirmwareMethod, PurgePlan, ToolRun, ata_sanitize_plan, ata_security_erase_plan, nvme_format_plan,
    nvme_sanitize_plan, parse_hdparm_identify, parse_nvme_id_ctrl, run_plan,
};
use ssdlab_io::layout::DriveKind;
use ssdlab_methods::erase::{EraseMethod, PurgeFailure};

/// How often a background sanitize's progress is read, and for how long at most (a block erase of a large
/// drive can take hours; after this the drive goes on by itself and the command says how to check).
const POLL_INTERVAL_S: u64 = 5;
const MAX_POLL_S: u64 = 24 * 3600;

pub struct FirmwarePurger {
    path: PathBuf,
    /// The device number the safety gate checked: every destructive step re-checks that the path still names it.
    gated_rdev: u64,
    kind: Result<DriveKind, String>,
    partition: bool,
    nvme: String,
    hdparm: String,
}

impl FirmwarePurger {
    pub fn new(path: &Path, gated_rdev: u64) -> Self {
        FirmwarePurger {
            path: path.to_path_buf(),
            gated_rdev,
            kind: ssdlab_io::layout::drive_kind(path).map_err(|e| e.to_string()),
            partition: ssdlab_io::layout::is_partition(path).unwrap_or(true),
            nvme: "nvme".into(),
            hdparm: "hdparm".into(),
        }
    }

    /// The plan for `method` on this drive, or why it is not offered.
    fn plan(&self, method: EraseMethod) -> Result<PurgePlan, String> {
        let device = self.path.display().to_string();
        let name = device.rsplit('/').next().unwrap_or(&device).to_string();
        if self.partition {
            return Err(format!(
                "{name} is a partition: a firmware erase would erase the whole drive, so it is never offered for a \
                 partition"
            ));
        }
        let kind = self
            .kind
            .clone()
            .map_err(|e| format!("cannot tell what drive {name} is: {e}"))?;
        match kind {
            DriveKind::Virtual => Err(format!(
                "{name} has no drive firmware to ask (a virtual or stacked block device)"
            )),
            DriveKind::OtherScsi { vendor } => Err(format!(
                "{name} is a SCSI disk or sits behind a bridge (vendor \"{vendor}\", not on a libata port): ssdlab \
                 sends no ATA or NVMe command through a bridge; sg_sanitize (sg3-utils) sanitizes a SCSI drive"
            )),
            DriveKind::Nvme {
                nsid,
                controllers,
                other_namespaces,
                ..
            } => {
                let [controller] = controllers.as_slice() else {
                    return Err(format!(
                        "{name} is reached through {} controllers (multipath or a dual-port drive): a firmware \
                         purge would reach what other paths or hosts use",
                        controllers.len()
                    ));
                };
                if controller.transport != "pcie" {
                    return Err(format!(
                        "{name} is reached over {} (not a local PCIe drive): its subsystem may be shared with other \
                         hosts",
                        if controller.transport.is_empty() {
                            "an unknown transport"
                        } else {
                            &controller.transport
                        }
                    ));
                }
                let Some(nsid) = nsid else {
                    return Err(format!("sysfs gives no namespace id for {name}"));
                };
                let ctrl = controller.device.display().to_string();
                let caps = parse_nvme_id_ctrl(&self.tool(&[&self.nvme, "id-ctrl", &ctrl, "-o", "json"])?)
                    .map_err(|e| e.to_string())?;
                if caps.shared_subsystem {
                    return Err(format!(
                        "{ctrl} says its subsystem has more than one port or controller (CMIC): a firmware purge \
                         would reach what other paths or hosts use"
                    ));
                }
                let reaches_all = method == EraseMethod::Sanitize || caps.format_reaches_all_namespaces();
                if reaches_all && (caps.max_namespaces > 1 || !other_namespaces.is_empty()) {
                    return Err(format!(
                        "it would erase every namespace of the controller (it supports {}{}), and the safety gate \
                         checked only {name}",
                        caps.max_namespaces,
                        if other_namespaces.is_empty() {
                            String::new()
                        } else {
                            format!("; {} exist beside it", other_namespaces.join(", "))
                        }
                    ));
                }
                match method {
                    EraseMethod::Sanitize => nvme_sanitize_plan(&caps, &self.nvme, &ctrl),
                    _ => nvme_format_plan(&caps, &self.nvme, &ctrl, nsid),
                }
            }
            DriveKind::Ata => {
                let caps = parse_hdparm_identify(&self.tool(&[&self.hdparm, "-I", &device])?)
                    .map_err(|e| e.to_string())?;
                match method {
                    EraseMethod::Sanitize => ata_sanitize_plan(&caps, &self.hdparm, &device),
                    _ => ata_security_erase_plan(&caps, &self.hdparm, &device),
                }
            }
        }
    }

    /// Runs a read-only query tool and returns its standard output.
    fn tool(&self, argv: &[&str]) -> Result<String, String> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let run = run_tool(&argv)?;
        if !run.success {
            return Err(format!("`{}` failed: {}", argv.join(" "), run.stderr.trim()));
        }
        Ok(run.stdout)
    }

    pub fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
        self.plan(method).map(|_| ())
    }

    pub fn purge(&mut self, method: EraseMethod) -> Result<String, PurgeFailure> {
        let plan = self.plan(method)?;
        assert_eq!(
            plan.method == FirmwareMethod::Sanitize,
            method == EraseMethod::Sanitize,
            "the plan is for the method asked"
        );
        let rdev = std::fs::metadata(&self.path).map(|m| std::os::unix::fs::MetadataExt::rdev(&m));
        if rdev.ok() != Some(self.gated_rdev) {
            return Err(format!(
                "{} no longer names the device the safety gate checked; nothing was erased",
                self.path.display()
            )
            .into());
        }
        if let Some(notice) = &plan.notice {
            eprintln!("  {:<13} {notice}", method.name());
        }
        if let Some(minutes) = plan.estimate_minutes {
            eprintln!("  {:<13} the drive estimates {minutes} min", method.name());
        }
        let log = run_plan(
            &plan,
            &mut |argv| run_tool(argv),
            &mut |s| std::thread::sleep(std::time::Duration::from_secs(s)),
            POLL_INTERVAL_S,
            (MAX_POLL_S / POLL_INTERVAL_S) as u32,
        )
        .map_err(|f| PurgeFailure {
            reason: f.reason,
            started: f.started,
        })?;
        Ok(format!("{}: {}", plan.label, log.join("; ")))
    }
}

/// Runs one command line, or says why it could not start (a missing tool names its Debian package).
fn run_tool(argv: &[String]) -> Result<ToolRun, String> {
    let out = Command::new(&argv[0]).args(&argv[1..]).output().map_err(|e| {
        let package = if argv[0].ends_with("nvme") {
            "nvme-cli"
        } else {
            "hdparm"
        };
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("{} is not installed (apt-get install {package})", argv[0])
        } else {
            format!("{}: {e}", argv[0])
        }
    })?;
    Ok(ToolRun {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
