//! The purges a drive's firmware does (NVMe sanitize and format with secure erase through nvme-cli, ATA sanitize
//! and SECURITY ERASE UNIT through hdparm), behind ssdlab-methods' `Purger` for those two methods. What the
//! drive offers and the command lines are `ssdlab_health::purge`'s; this runs the tools.
//!
//! It refuses, before running anything that writes, a partition (a firmware purge erases the whole drive), a
//! device with no drive firmware (loop, device-mapper) or behind a SCSI/USB bridge, and an NVMe purge that would
//! reach namespaces the safety gate did not check.

use std::path::{Path, PathBuf};

use ssdlab_health::purge::{
    FirmwareMethod, PurgePlan, ToolRun, ata_sanitize_plan, ata_security_erase_plan, nvme_format_plan,
    nvme_sanitize_plan, parse_hdparm_identify, parse_nvme_id_ctrl, run_plan,
};
use ssdlab_io::layout::DriveKind;
use ssdlab_methods::erase::{EraseMethod, PurgeFailure};

use crate::ports::{Clock, Console, Tools};

/// How often a background sanitize's progress is read, and for how long at most (a block erase of a large
/// drive can take hours; after this the drive goes on by itself and the command says how to check).
const POLL_INTERVAL_S: u64 = 5;
const MAX_POLL_S: u64 = 24 * 3600;

pub struct FirmwarePurger<'p> {
    /// Runs nvme-cli and hdparm.
    tools: &'p dyn Tools,
    /// Waits between a background sanitize's polls.
    clock: &'p dyn Clock,
    /// Says a drive's notice and estimate before a purge that may take hours; None when the caller says them
    /// itself from [`FirmwarePurger::notices`] (a PTS, whose console is its run's while it runs).
    console: Option<&'p mut dyn Console>,
    path: PathBuf,
    /// The device number the safety gate checked: every destructive step re-checks that the path still names it.
    gated_rdev: u64,
    kind: Result<DriveKind, String>,
    partition: bool,
    nvme: String,
    hdparm: String,
}

impl<'p> FirmwarePurger<'p> {
    pub fn new(
        path: &Path,
        gated_rdev: u64,
        tools: &'p dyn Tools,
        clock: &'p dyn Clock,
        console: Option<&'p mut dyn Console>,
    ) -> Self {
        FirmwarePurger {
            tools,
            clock,
            console,
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
            } => self.nvme_plan(method, &name, nsid, &controllers, &other_namespaces),
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

    /// The plan for `method` on an NVMe namespace, offered only for a local PCIe drive with one controller whose
    /// erase reaches nothing the safety gate did not check.
    fn nvme_plan(
        &self,
        method: EraseMethod,
        name: &str,
        nsid: Option<u32>,
        controllers: &[ssdlab_io::layout::NvmeController],
        other_namespaces: &[String],
    ) -> Result<PurgePlan, String> {
        let controller = match controllers {
            [one] => one,
            [] => return Err(format!("sysfs names no controller for {name}")),
            many => {
                return Err(format!(
                    "{name} is reached through {} controllers (multipath or a dual-port drive): a firmware \
                     purge would reach what other paths or hosts use",
                    many.len()
                ));
            }
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

    /// Runs a read-only query tool and returns its standard output.
    fn tool(&self, argv: &[&str]) -> Result<String, String> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let run = run_tool(self.tools, &argv)?;
        if !run.success {
            return Err(format!("`{}` failed: {}", argv.join(" "), run.stderr.trim()));
        }
        Ok(run.stdout)
    }

    pub fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
        self.plan(method).map(|_| ())
    }

    /// The lines `purge` says before it runs `method` (nothing for a method not offered).
    pub fn notices(&self, method: EraseMethod) -> Vec<String> {
        self.plan(method)
            .map(|plan| notice_lines(&plan, method))
            .unwrap_or_default()
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
        // A notice may be the only way back into a drive whose purge is cut off: --quiet never hides it.
        if let Some(console) = self.console.as_deref_mut() {
            for line in notice_lines(&plan, method) {
                console.alarm(&line);
            }
        }
        let (tools, clock) = (self.tools, self.clock);
        let log = run_plan(
            &plan,
            &mut |argv| run_tool(tools, argv),
            &mut |s| clock.sleep_s(s),
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

/// A plan's notice and the drive's estimate, as the lines said before it runs.
fn notice_lines(plan: &PurgePlan, method: EraseMethod) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(notice) = &plan.notice {
        lines.push(format!("  {:<13} {notice}", method.name()));
    }
    if let Some(minutes) = plan.estimate_minutes {
        lines.push(format!(
            "  {:<13} the drive estimates {minutes} min",
            method.name()
        ));
    }
    lines
}

/// Runs one command line, or says why it could not start (a missing tool names its Debian package).
fn run_tool(tools: &dyn Tools, argv: &[String]) -> Result<ToolRun, String> {
    let out = tools.run(argv).map_err(|e| {
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
        success: out.success(),
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use ssdlab_io::layout::NvmeController;

    use super::*;
    use crate::ports::ToolOutput;

    /// Stand-in tools through the tools port: each program prints its output whatever it is asked; any other
    /// program is not installed.
    struct StandIns;

    fn stand_ins() -> &'static Mutex<HashMap<String, String>> {
        static PROGRAMS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
        PROGRAMS.get_or_init(Default::default)
    }

    impl Tools for StandIns {
        fn run(&self, argv: &[String]) -> std::io::Result<ToolOutput> {
            let programs = stand_ins().lock().unwrap();
            let stdout = programs.get(&argv[0]).ok_or(std::io::ErrorKind::NotFound)?;
            Ok(ToolOutput {
                exit_code: Some(0),
                stdout: stdout.clone(),
                stderr: String::new(),
            })
        }
    }

    /// A stand-in program named `name` that prints `output`.
    fn tool(name: &str, output: &str) -> String {
        stand_ins().lock().unwrap().insert(name.into(), output.into());
        name.into()
    }

    fn id_ctrl(fna: u32, nn: u32, cmic: u32) -> String {
        format!(r#"{{"oacs":23,"fna":{fna},"sanicap":3,"nn":{nn},"cmic":{cmic}}}"#)
    }

    fn nvme(controllers: &[&str], nsid: Option<u32>, others: &[&str]) -> DriveKind {
        DriveKind::Nvme {
            namespace: "/dev/nvme0n1".into(),
            nsid,
            controllers: controllers
                .iter()
                .enumerate()
                .map(|(i, transport)| NvmeController {
                    device: format!("/dev/nvme{i}").into(),
                    transport: transport.to_string(),
                })
                .collect(),
            other_namespaces: others.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn purger(kind: DriveKind, nvme: &str, hdparm: &str) -> FirmwarePurger<'static> {
        FirmwarePurger {
            tools: &StandIns,
            clock: &crate::ports::SystemClock,
            console: Some(Box::leak(Box::new(crate::testing::RecordingConsole::default()))),
            path: "/dev/nvme0n1".into(),
            gated_rdev: 0,
            kind: Ok(kind),
            partition: false,
            nvme: nvme.into(),
            hdparm: hdparm.into(),
        }
    }

    #[test]
    fn nvme_purges_reach_only_what_the_gate_checked() {
        let one = tool("nvme-one", &id_ctrl(4, 1, 0));
        let offered =
            |kind: DriveKind, nvme: &str, method: EraseMethod| purger(kind, nvme, "hdparm").offers(method);
        assert_eq!(
            offered(nvme(&["pcie"], Some(1), &[]), &one, EraseMethod::Sanitize),
            Ok(())
        );
        assert_eq!(
            offered(nvme(&["pcie"], Some(1), &[]), &one, EraseMethod::SecureErase),
            Ok(())
        );
        let plan = purger(nvme(&["pcie"], Some(1), &[]), &one, "hdparm")
            .plan(EraseMethod::SecureErase)
            .unwrap();
        assert_eq!(&plan.steps[0][1..4], ["format", "/dev/nvme0", "--namespace-id=1"]);

        let refused = |kind: DriveKind, nvme: &str, method: EraseMethod, why: &str| {
            let e = offered(kind, nvme, method).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        refused(
            nvme(&["pcie", "pcie"], Some(1), &[]),
            &one,
            EraseMethod::Sanitize,
            "through 2 controllers",
        );
        refused(
            nvme(&[], Some(1), &[]),
            &one,
            EraseMethod::Sanitize,
            "names no controller",
        );
        refused(
            nvme(&["tcp"], Some(1), &[]),
            &one,
            EraseMethod::SecureErase,
            "over tcp",
        );
        refused(
            nvme(&["pcie"], None, &[]),
            &one,
            EraseMethod::SecureErase,
            "no namespace id",
        );
        let shared = tool("nvme-shared", &id_ctrl(4, 1, 2));
        refused(
            nvme(&["pcie"], Some(1), &[]),
            &shared,
            EraseMethod::SecureErase,
            "CMIC",
        );
        // A sanitize always reaches every namespace; a format only where FNA says so.
        let many = tool("nvme-many", &id_ctrl(4, 32, 0));
        refused(
            nvme(&["pcie"], Some(1), &[]),
            &many,
            EraseMethod::Sanitize,
            "supports 32",
        );
        assert_eq!(
            offered(
                nvme(&["pcie"], Some(1), &["nvme0n2"]),
                &many,
                EraseMethod::SecureErase
            ),
            Ok(())
        );
        let all = tool("nvme-all", &id_ctrl(1, 32, 0));
        refused(
            nvme(&["pcie"], Some(1), &["nvme0n2"]),
            &all,
            EraseMethod::SecureErase,
            "nvme0n2 exist",
        );
        let missing = "no-such-nvme".to_string();
        refused(
            nvme(&["pcie"], Some(1), &[]),
            &missing,
            EraseMethod::Sanitize,
            "apt-get install nvme-cli",
        );
    }

    #[test]
    fn ata_refusals_come_from_the_drive() {
        let frozen = tool(
            "hdparm",
            "Commands/features:\n\t   *\tSecurity Mode feature set\nSecurity: \n\t\tsupported\n\tnot\tenabled\n\t\
             not\tlocked\n\t\tfrozen\n\tnot\texpired: security count\n",
        );
        let mut p = purger(DriveKind::Ata, "nvme", &frozen);
        assert!(p.offers(EraseMethod::SecureErase).unwrap_err().contains("frozen"));
        assert!(p.offers(EraseMethod::Sanitize).unwrap_err().contains("SANITIZE"));
        p.partition = true;
        assert!(
            p.offers(EraseMethod::Sanitize)
                .unwrap_err()
                .contains("is a partition")
        );
        let mut bridged = purger(DriveKind::OtherScsi { vendor: "ATA".into() }, "nvme", &frozen);
        assert!(
            bridged
                .offers(EraseMethod::SecureErase)
                .unwrap_err()
                .contains("bridge")
        );
    }
}
