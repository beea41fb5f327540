//! Where `health` gets its data, and where it keeps history: running smartctl on a device (through the tools
//! port), reading saved JSON or an ssdlab result, opening a `sim:` target for its counters, and the per-drive
//! history files. All parsing and arithmetic is ssdlab-health's; this module only does the I/O around it.

use ssdlab_core::target::TargetSpec;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::health::{HealthSnapshot, Protocol};
use ssdlab_core::schema::{DeviceCounters, RunResult};
use ssdlab_health::drivedb::{AttributeNames, DriveDb};
use ssdlab_health::nvme_nand::{self, NandWrites as NvmeNand};
use ssdlab_health::virtual_drive::{self, VirtualDrive};
use ssdlab_health::{history, smartctl};
use ssdlab_io::Engine;
use ssdlab_targets::{Access, OpenOptions};

use crate::ports::{Clock, Tools};

/// A snapshot and, for a virtual drive, its NAND's rated P/E cycles.
pub struct Reading {
    pub snapshot: HealthSnapshot,
    pub profile_pe: Option<u32>,
    /// A virtual drive lives for one command: it keeps no history.
    pub is_virtual: bool,
    /// A saved NVMe NAND log was given to it (`--from`): one per drive.
    pub has_nand_log: bool,
}

/// Why a DEVICE gave no reading.
pub enum DeviceFailure {
    /// Bad input (not a device node, a `sim:` target that does not open, no smartctl): exit 2 whatever else was
    /// read.
    Input(anyhow::Error),
    /// The drive could not be read this time (it vanished, or smartctl could not read it): reported beside the
    /// drives that were read.
    Unreadable(anyhow::Error),
}

/// Reads a positional DEVICE: a `sim:` target or a device node through smartctl.
pub fn read_device(
    device: &str,
    smartctl_path: &Path,
    tools: &dyn Tools,
    clock: &dyn Clock,
    targets: &dyn crate::ports::Targets,
) -> Result<Reading, DeviceFailure> {
    use DeviceFailure::{Input, Unreadable};
    if let Ok(spec @ TargetSpec::Sim { .. }) = TargetSpec::parse(device) {
        return read_sim(device, &spec, clock, targets).map_err(Input);
    }
    let (device, device_type) = split_type(device);
    let path = Path::new(device);
    let meta = std::fs::metadata(path).map_err(|e| {
        Unreadable(anyhow!(
            "DEVICE {device}: {e}; give a block device such as /dev/sda or /dev/nvme0, or a sim: target"
        ))
    })?;
    let kind = meta.file_type();
    if !(kind.is_block_device() || kind.is_char_device()) {
        return Err(Input(anyhow!(
            "DEVICE {device}: not a device node; saved smartctl or nvme-cli JSON goes with --from {device}"
        )));
    }
    let mut snapshot = run_smartctl(device, device_type, smartctl_path, tools, clock)?;
    if snapshot.identity.protocol == Protocol::Nvme && snapshot.nand_written_bytes.is_none() {
        match read_nvme_nand(device, tools) {
            Ok(nand) => {
                snapshot.nand_written_bytes = Some(nand.bytes);
                snapshot.nand_written_source = nand.source;
                // The new figure is checked against host writes like any other.
                ssdlab_health::plausible::check(&mut snapshot);
            }
            Err(why) => {
                snapshot.nand_written_source =
                    format!("not in the NVMe SMART log, and neither log that carries it was read: {why}")
            }
        }
    }
    Ok(Reading {
        snapshot,
        profile_pe: None,
        is_virtual: false,
        has_nand_log: false,
    })
}

/// Runs `smartctl --json=c -x` on the device and reads its output; a smartctl older than 7.0 knows no `--json`
/// and prints its usage instead, so then it runs `smartctl -x` and reads the text.
fn run_smartctl(
    device: &str,
    device_type: Option<&str>,
    smartctl_path: &Path,
    tools: &dyn Tools,
    clock: &dyn Clock,
) -> Result<HealthSnapshot, DeviceFailure> {
    use DeviceFailure::{Input, Unreadable};
    let run = |json: bool| {
        let mut argv: Vec<String> = vec![smartctl_path.display().to_string()];
        if json {
            argv.push("--json=c".into());
        }
        argv.push("-x".into());
        if let Some(kind) = device_type {
            argv.extend(["-d".into(), kind.to_string()]);
        }
        argv.push(device.to_string());
        tools.run(&argv).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Input(anyhow!(
                    "DEVICE {device}: {} not found: install smartmontools (apt-get install smartmontools), \
                     or name it with --smartctl PATH",
                    smartctl_path.display()
                ))
            } else {
                Unreadable(anyhow!(
                    "DEVICE {device}: cannot run {}: {e}",
                    smartctl_path.display()
                ))
            }
        })
    };
    let unreadable = |e: ssdlab_health::ParseError, stderr: &str| {
        let stderr = stderr.trim();
        Unreadable(if stderr.is_empty() {
            anyhow!("DEVICE {e}")
        } else {
            anyhow!("DEVICE {e} (stderr: {stderr})")
        })
    };
    let now_s = clock.unix_now_s() as u64;
    let output = run(true)?;
    let (output, mut snapshot) = if output.stdout.trim_start().starts_with('{') {
        let snapshot = smartctl::parse_named(device, &output.stdout, now_s, attribute_names())
            .map_err(|e| unreadable(e, &output.stderr))?;
        (output, snapshot)
    } else {
        let text_output = run(false)?;
        if let Some(status) = text_output
            .exit_code
            .filter(|s| s & i32::from(smartctl::FATAL_BITS) != 0)
        {
            return Err(Unreadable(anyhow!(
                "DEVICE {device}: smartctl could not read the device (exit status {status}: {}): {}",
                smartctl::exit_meaning(status.clamp(0, 255) as u8, smartctl::FATAL_BITS),
                text_output
                    .stdout
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
            )));
        }
        let mut snapshot =
            ssdlab_health::parse_any_named(device, &text_output.stdout, now_s, attribute_names())
                .map_err(|e| unreadable(e, &text_output.stderr))?;
        snapshot.notes.push(
            "this smartctl printed no JSON (it is older than 7.0, which added --json): its -x text was read"
                .into(),
        );
        (text_output, snapshot)
    };
    // The process's exit status is the bit mask; the JSON repeats it, but text and an older smartctl do not.
    if snapshot.smartctl_exit_status.is_none() {
        snapshot.smartctl_exit_status = output.exit_code.map(|s| s.clamp(0, 255) as u8);
    }
    Ok(snapshot)
}

/// An NVMe drive's NAND writes from nvme-cli: the OCP Datacenter SMART log (C0h) where the drive keeps one, else
/// the Endurance Group log (09h) of group 1; or why neither was read.
fn read_nvme_nand(device: &str, tools: &dyn Tools) -> Result<NvmeNand, String> {
    let run = |args: &[&str]| -> Result<String, String> {
        let argv: Vec<String> = std::iter::once("nvme")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        match tools.run(&argv) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err("nvme-cli is not installed (apt-get install nvme-cli)".into())
            }
            Err(e) => Err(format!("cannot run nvme: {e}")),
            Ok(out) if out.exit_code != Some(0) => Err(format!(
                "`{}` failed ({})",
                argv.join(" "),
                out.stderr.lines().next().unwrap_or("no message").trim()
            )),
            Ok(out) => Ok(out.stdout),
        }
    };
    let ocp = run(&["ocp", "smart-add-log", device, "-o", "json"])
        .and_then(|text| nvme_nand::parse_ocp_smart_log(&text));
    let ocp_failure = match ocp {
        Ok(nand) => return Ok(nand),
        Err(why) => why,
    };
    run(&["endurance-log", device, "--group-id=1", "-o", "json"])
        .and_then(|text| nvme_nand::parse_endurance_log(&text, 1))
        .map_err(|why| format!("OCP log C0h: {ocp_failure}; Endurance Group log 09h: {why}"))
}

/// DEVICE:TYPE as (path, smartctl's -d TYPE). A path that exists as written is taken whole (by-path names hold
/// colons); otherwise the part after the last colon is the type when it holds no '/'.
pub fn split_type(device: &str) -> (&str, Option<&str>) {
    if Path::new(device).exists() {
        return (device, None);
    }
    match device.rsplit_once(':') {
        Some((path, kind)) if !kind.is_empty() && !kind.contains('/') => (path, Some(kind)),
        _ => (device, None),
    }
}

/// Every drive `smartctl --scan-open` finds, as DEVICE:TYPE, with why it could not be opened where it could not.
pub fn scan_drives(smartctl_path: &Path, tools: &dyn Tools) -> Result<Vec<(String, Option<String>)>> {
    let argv = [
        smartctl_path.display().to_string(),
        "--scan-open".into(),
        "--json=c".into(),
    ];
    let output = tools.run(&argv).map_err(|e| {
        anyhow!(
            "--scan: cannot run {}: {e}; install smartmontools (apt-get install smartmontools)",
            smartctl_path.display()
        )
    })?;
    let drives = smartctl::parse_scan(&output.stdout).map_err(|e| anyhow!("--scan: {e}"))?;
    Ok(drives
        .into_iter()
        .map(|d| (format!("{}:{}", d.name, d.device_type), d.open_error))
        .collect())
}

/// The rated P/E cycles of a `sim:` target's profile.
fn profile_pe(target: &str) -> Option<u32> {
    let Ok(TargetSpec::Sim { spec }) = TargetSpec::parse(target) else {
        return None;
    };
    ssdlab_sim::spec::SimSpec::parse(&spec)
        .ok()
        .map(|s| s.profile.rated_pe_cycles)
}

/// A virtual drive's counters, read as smartctl would read a drive's: opened read-only through the target port.
fn read_sim(
    target: &str,
    spec: &TargetSpec,
    clock: &dyn Clock,
    targets: &dyn crate::ports::Targets,
) -> Result<Reading> {
    let options = OpenOptions {
        access: Access::ReadOnly,
        engine: Engine::Auto,
        allow_atime: true,
        lay_out_files: false,
        flag: "DEVICE",
        force_scope: ssdlab_targets::ForceScope::Signatures,
    };
    let opened = targets.open(target, spec, &options)?;
    let device = opened.device;
    let info = device.info().clone();
    let counters = device
        .counters()
        .ok_or_else(|| anyhow!("DEVICE {target}: this target keeps no drive counters"))?;
    let drive = VirtualDrive {
        target: target.into(),
        model: info.model.clone(),
        capacity_bytes: info.capacity_bytes,
        counters,
        host_read_bytes: None,
        rated_pe_cycles: profile_pe(target).unwrap_or(0),
        powered_s: device.now_ns() as f64 / 1e9,
        origin: None,
    };
    Ok(Reading {
        snapshot: virtual_drive::snapshot(&drive, clock.unix_now_s() as u64),
        profile_pe: Some(drive.rated_pe_cycles),
        is_virtual: true,
        has_nand_log: false,
    })
}

/// What a `--from` file holds: a drive's health, or the NAND writes of the NVMe drive given before it.
pub enum Saved {
    Drive(Box<Reading>),
    NandLog { file: String, nand: NvmeNand },
}

/// Reads a `--from` file: smartctl's JSON or text, nvme-cli's smart-log JSON, a saved `nvme ocp smart-add-log`
/// or `nvme endurance-log` JSON (NAND writes, for the NVMe drive given before it), or an ssdlab result (a directory
/// or its result.json).
pub fn read_file(path: &Path, clock: &dyn Clock) -> Result<Saved> {
    let file = if path.is_dir() {
        path.join("result.json")
    } else {
        path.to_path_buf()
    };
    // Bytes, not UTF-8 text: a saved output may be UTF-16 (PowerShell) or Latin-1 (a Windows code page).
    let bytes = ssdlab_io::files::read_input(&file, crate::inputs::MAX_RESULT_BYTES).map_err(|e| {
        anyhow!(
            "--from {}: cannot read it: {e}; give smartctl's output (--json -x, or the text of -x or -a), an nvme \
             smart-log -o json file, or an ssdlab result directory",
            file.display()
        )
    })?;
    let name = file.display().to_string();
    // An ssdlab result reads as one or fails as one (a newer schema, say), never as smartctl output.
    let is_result = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("schema")?.as_str().map(|s| s.starts_with("ssdlab/")))
        .unwrap_or(false);
    if is_result {
        let text = String::from_utf8_lossy(&bytes);
        let result = RunResult::from_json(&text).map_err(|e| anyhow::anyhow!("--from {name}: {e}"))?;
        return from_result(&name, &result, clock).map(|r| Saved::Drive(Box::new(r)));
    }
    let decoded = ssdlab_health::decode::decode(&bytes);
    if let Some(nand) = nvme_nand::parse_saved(&decoded.text) {
        let nand = nand.map_err(|why| anyhow!("--from {name}: {why}"))?;
        return Ok(Saved::NandLog { file: name, nand });
    }
    // A saved file without smartctl's time stamp was taken no later than it was last written.
    let modified_s = std::fs::metadata(&file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(|| clock.unix_now_s() as u64, |d| d.as_secs());
    let mut snapshot = ssdlab_health::parse_saved(&name, &bytes, modified_s, attribute_names())
        .map_err(|e| anyhow!("--from {e}"))?;
    // A saved output names the device it was read from on its own host (often /dev/nvme0 for every drive): here
    // the drive is the file, and the device path is only a note.
    if snapshot.identity.source != name {
        snapshot
            .notes
            .push(format!("saved from {}", snapshot.identity.source));
        snapshot.identity.source = name.clone();
    }
    Ok(Saved::Drive(Box::new(Reading {
        snapshot,
        profile_pe: None,
        is_virtual: false,
        has_nand_log: false,
    })))
}

/// Gives a saved NVMe NAND-write log to the drive read from the `--from` file just before it (save them together:
/// `smartctl --json -x /dev/nvme0 > a.json; nvme ocp smart-add-log /dev/nvme0 -o json > a-nand.json`); the figure
/// is checked against host writes like any other.
pub fn attach_nand_log(previous: Option<&mut Reading>, file: &str, nand: NvmeNand) -> Result<()> {
    let fix = "give the drive's own output (smartctl --json -x, or nvme smart-log -o json) with --from just \
               before it";
    let Some(reading) = previous else {
        bail!(
            "--from {file}: an NVMe NAND-write log belongs to the drive given before it, and none was; {fix}"
        );
    };
    if reading.has_nand_log {
        bail!(
            "--from {file}: the drive given before it ({}) has a NAND log already; give one NAND log per drive",
            reading.snapshot.identity.source
        );
    }
    let snapshot = &mut reading.snapshot;
    if snapshot.identity.protocol != Protocol::Nvme {
        bail!(
            "--from {file}: an NVMe NAND-write log, but the drive given before it ({}) is {}, not NVMe; {fix}",
            snapshot.identity.source,
            snapshot.identity.protocol.name()
        );
    }
    if snapshot.nand_written_bytes.is_some() {
        bail!(
            "--from {file}: the drive given before it ({}) already has NAND writes ({}); give one NAND log per drive",
            snapshot.identity.source,
            snapshot.nand_written_source
        );
    }
    snapshot.nand_written_bytes = Some(nand.bytes);
    snapshot.nand_written_source = format!("{} ({file})", nand.source);
    ssdlab_health::plausible::check(snapshot);
    reading.has_nand_log = true;
    Ok(())
}

/// A virtual drive's counters at the end of an ssdlab run: bytes summed over the phases, erase counts as of
/// the last phase that had them.
fn from_result(name: &str, result: &RunResult, clock: &dyn Clock) -> Result<Reading> {
    let phases: Vec<&DeviceCounters> = result
        .phases
        .iter()
        .filter_map(|p| p.summary.device.as_ref())
        .collect();
    let Some(last) = phases.last() else {
        bail!(
            "--from {name}: an ssdlab result of {} without drive counters (only runs on sim: targets have \
             them; a real drive's health comes from smartctl)",
            result.target.target
        );
    };
    let host: u64 = phases.iter().map(|c| c.host_bytes_written).sum();
    let nand: u64 = phases.iter().map(|c| c.nand_bytes_written).sum();
    let counters = DeviceCounters {
        host_bytes_written: host,
        nand_bytes_written: nand,
        write_amplification: if host == 0 { 0.0 } else { nand as f64 / host as f64 },
        slc_hit_bytes: phases.iter().map(|c| c.slc_hit_bytes).sum(),
        gc_relocated_bytes: phases.iter().map(|c| c.gc_relocated_bytes).sum(),
        refreshed_bytes: phases.iter().map(|c| c.refreshed_bytes).sum(),
        ..**last
    };
    let powered_s: f64 = result.phases.iter().map(|p| p.summary.seconds).sum();
    let pe = profile_pe(&result.target.target);
    // Two results of one virtual drive (the demo's two consistency runs) are two drives to tell apart: each is
    // named by its target and the result it came from.
    let result_dir = Path::new(name)
        .parent()
        .and_then(|d| d.file_name())
        .map_or_else(|| name.to_string(), |d| d.to_string_lossy().into_owned());
    let drive = VirtualDrive {
        target: format!("{} ({result_dir})", result.target.target),
        model: result.target.model.clone(),
        capacity_bytes: result.target.capacity_bytes,
        counters,
        host_read_bytes: Some(
            result
                .phases
                .iter()
                .filter_map(|p| p.summary.read.as_ref().map(|r| r.bytes))
                .sum(),
        ),
        rated_pe_cycles: pe.unwrap_or(0),
        powered_s,
        origin: Some(format!("{name} ({} run of {})", result.kind(), result.started_at)),
    };
    let taken_at_s = ssdlab_core::units::parse_rfc3339_utc(&result.started_at)
        .unwrap_or_else(|| clock.unix_now_s() as u64);
    Ok(Reading {
        snapshot: virtual_drive::snapshot(&drive, taken_at_s),
        profile_pe: pe,
        is_virtual: true,
        has_nand_log: false,
    })
}

/// An older ssdlab's history of a drive: its snapshots, one a line.
fn older_history(bytes: &[u8]) -> bool {
    ssdlab_outputs::older_lines(
        bytes,
        |l| history::parse(&String::from_utf8_lossy(l)).skipped_lines == 0,
        b"{",
    )
}

/// The per-drive history files in one directory.
pub struct HistoryDir {
    pub dir: PathBuf,
}

impl HistoryDir {
    fn path(&self, snapshot: &HealthSnapshot) -> Option<PathBuf> {
        history::file_name(&snapshot.identity).map(|name| self.dir.join(name))
    }

    /// The drive's earlier snapshots, and how many torn lines were skipped.
    pub fn load(&self, snapshot: &HealthSnapshot) -> Result<history::Loaded> {
        let Some(path) = self.path(snapshot) else {
            return Ok(history::Loaded::default());
        };
        // Bytes, not a string: a line cut inside a character by a crash is skipped, not an error.
        match ssdlab_io::files::read_input(&path, crate::inputs::MAX_RESULT_BYTES) {
            Ok(bytes) => Ok(history::parse(&String::from_utf8_lossy(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(history::Loaded::default()),
            Err(e) => Err(anyhow!("--history: cannot read {}: {e}", path.display())),
        }
    }

    /// Appends the snapshot as one line (one write, then fsync), unless a snapshot of that time is there.
    /// Returns whether it was recorded.
    pub fn append(&self, snapshot: &HealthSnapshot, earlier: &[HealthSnapshot]) -> Result<bool> {
        let Some(path) = self.path(snapshot) else {
            return Ok(false);
        };
        if history::contains(earlier, snapshot) {
            return Ok(false);
        }
        let outputs = ssdlab_outputs::OutputDir::create(&self.dir)
            .map_err(|e| anyhow!("--history {}: {e}", self.dir.display()))?;
        // A crash can leave a last line without its newline: start a new line, so this one stays whole.
        let torn = ssdlab_io::files::read_input(&path, crate::inputs::MAX_RESULT_BYTES)
            .is_ok_and(|bytes| bytes.last().is_some_and(|&b| b != b'\n'));
        let mut line = if torn { "\n".to_string() } else { String::new() };
        line.push_str(&history::to_line(snapshot));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // By the output rule: appended to only while it is ssdlab's own history (or an older ssdlab's, by its
        // lines of JSON), never a file of someone else's that has the drive's name.
        outputs
            .append(
                name,
                ssdlab_outputs::Kind::Log,
                line.as_bytes(),
                true,
                older_history,
            )
            .map_err(|e| anyhow!("--history: {e}"))?;
        Ok(true)
    }
}

/// Where smartmontools keeps its drive database: the copy `update-smart-drivedb` refreshes, then the packaged one.
const DRIVEDB_PATHS: [&str; 2] = [
    "/var/lib/smartmontools/drivedb/drivedb.h",
    "/usr/share/smartmontools/drivedb.h",
];

/// The attribute names of this machine's drive database (read once), then ssdlab's fallback table. A machine
/// without smartmontools gets the fallback alone.
fn attribute_names() -> &'static AttributeNames {
    static NAMES: std::sync::OnceLock<AttributeNames> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let installed = DRIVEDB_PATHS.iter().find_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            Some(DriveDb::parse(&text, path))
        });
        AttributeNames::new(installed)
    })
}

#[cfg(test)]
mod tests {
    use super::split_type;

    #[test]
    fn device_types_split_off_only_where_the_path_does_not_exist() {
        assert_eq!(split_type("/dev/sdz9:sat"), ("/dev/sdz9", Some("sat")));
        assert_eq!(
            split_type("/dev/sdz9:megaraid,0"),
            ("/dev/sdz9", Some("megaraid,0"))
        );
        assert_eq!(split_type("/dev/sdz9"), ("/dev/sdz9", None));
        let dir = tempfile::tempdir().unwrap();
        let by_path = dir.path().join("pci-0000:00:17.0-ata-1");
        std::fs::write(&by_path, "").unwrap();
        let by_path = by_path.to_str().unwrap();
        assert_eq!(split_type(by_path), (by_path, None));
        let typed = format!("{by_path}:sat");
        assert_eq!(split_type(&typed), (by_path, Some("sat")));
    }
}
