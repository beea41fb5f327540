//! The device lab: the paths no loop device can reach, run against real kernel drivers in a virtual machine.
//! QEMU emulates an NVMe controller, an AHCI SATA disk and virtio disks; Debian's kernel drives them (nvme, ahci,
//! md, device-mapper, LVM, dm-crypt, swap, ext4, the NBD client); the real tools (smartctl, nvme-cli, hdparm,
//! mdadm, lvm, cryptsetup, sfdisk, nbd-client) run beside the ssdlab binary under test. One boot serves every
//! test: `scripts/vm-lab/guest.sh` runs the scenarios' commands inside and keeps their outputs, and each test here
//! asserts one scenario from them.
//!
//! QEMU runs in software emulation (TCG): on this kind of machine KVM is present but fails or hangs (nested), and
//! the lab takes about 70 s on 2 cores either way (71 s measured with `cargo test -p ssdlab --test vm`). Without
//! qemu-system-x86_64 the tests say SKIPPED and why, unless `SSDLAB_VM_LAB=require` (the test command's
//! setting), when they fail.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the guest may take before the lab is called hung (it takes about 35 s under TCG on 2 cores; every
/// step inside has its own timeout too).
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// The outbox of one boot: every command's output, exit code and the files the guest kept.
struct Lab {
    out: PathBuf,
    serial: String,
}

impl Lab {
    fn rc(&self, step: &str) -> i32 {
        let text = self.file(&format!("{step}.rc"));
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{step}: no exit code ({text:?}); serial:\n{}", self.serial))
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}; serial:\n{}", self.serial))
    }

    fn stderr(&self, step: &str) -> String {
        self.file(&format!("{step}.err"))
    }

    /// Asserts a step exited with `rc`, showing its stderr otherwise.
    fn expect(&self, step: &str, rc: i32) {
        assert_eq!(self.rc(step), rc, "{step}: stderr:\n{}", self.stderr(step));
    }

    /// The `analysis` event of a command's `--json` stream.
    fn analysis(&self, step: &str) -> Value {
        self.file(&format!("{step}.out"))
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("JSON lines"))
            .find(|event| event["type"] == "analysis")
            .unwrap_or_else(|| panic!("{step}: no analysis event; stderr:\n{}", self.stderr(step)))["data"]
            .clone()
    }

    fn record(&self, dir: &str) -> Value {
        serde_json::from_str(&self.file(&format!("{dir}/result.json"))).expect("result.json")
    }
}

/// The lab, booted once for every test of this binary; None when QEMU is not installed, unless
/// `SSDLAB_VM_LAB=require` (the test command sets it: there a missing QEMU is a failure, not a skip).
fn lab() -> Option<&'static Lab> {
    static LAB: OnceLock<Option<Lab>> = OnceLock::new();
    LAB.get_or_init(|| {
        if Command::new("qemu-system-x86_64")
            .arg("--version")
            .output()
            .is_err()
        {
            assert_ne!(
                std::env::var("SSDLAB_VM_LAB").as_deref(),
                Ok("require"),
                "SSDLAB_VM_LAB=require, and qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
            );
            eprintln!("SKIPPED: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)");
            return None;
        }
        Some(boot())
    })
    .as_ref()
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the kernel and initramfs, boots the guest with its disks, waits for it to power off and unpacks the
/// outbox.
fn boot() -> Lab {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-lab");
    std::fs::create_dir_all(&dir).unwrap();
    let build = Command::new(repository().join("scripts/vm-lab/build.sh"))
        .arg(&dir)
        .arg(env!("CARGO_BIN_EXE_ssdlab"))
        .arg(repository().join("scripts/vm-lab/guest.sh"))
        .status()
        .expect("scripts/vm-lab/build.sh runs");
    assert!(build.success(), "scripts/vm-lab/build.sh failed");
    // Fresh disks every boot: sparse files, so they cost nothing until written.
    for (name, size) in [
        ("nvme.img", 1u64 << 30),
        ("sata.img", 1 << 30),
        ("vda.img", 1 << 30),
        ("outbox.img", 256 << 20),
        ("vdc.img", 1 << 30),
    ] {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    }
    let disk = |name: &str| {
        format!(
            "file={},if=none,format=raw,id={name}",
            dir.join(format!("{name}.img")).display()
        )
    };
    let started = Instant::now();
    let mut qemu = Command::new("qemu-system-x86_64")
        .args([
            "-machine",
            "q35",
            "-accel",
            "tcg",
            "-m",
            "1536",
            "-smp",
            "2",
            "-nographic",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(dir.join("vmlinuz"))
        .arg("-initrd")
        .arg(dir.join("initramfs.cpio"))
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .args([
            "-drive",
            &disk("nvme"),
            "-device",
            "nvme,serial=ssdlab0001,drive=nvme",
        ])
        .args([
            "-device",
            "ich9-ahci,id=ahci",
            "-drive",
            &disk("sata"),
            "-device",
            "ide-hd,drive=sata,bus=ahci.0",
        ])
        .args(["-drive", &disk("vda"), "-device", "virtio-blk-pci,drive=vda"])
        .args([
            "-drive",
            &disk("outbox"),
            "-device",
            "virtio-blk-pci,drive=outbox",
        ])
        .args(["-drive", &disk("vdc"), "-device", "virtio-blk-pci,drive=vdc"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("serial.log")).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("qemu starts");
    let status = loop {
        if let Some(status) = qemu.try_wait().unwrap() {
            break status;
        }
        // `timeout` stops QEMU first; this only guards against `timeout` itself hanging.
        if started.elapsed() > BOOT_TIMEOUT + Duration::from_secs(30) {
            let _ = qemu.kill();
            let _ = qemu.wait();
            panic!(
                "the lab did not power off within {BOOT_TIMEOUT:?}; serial:\n{}",
                std::fs::read_to_string(dir.join("serial.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let serial = std::fs::read_to_string(dir.join("serial.log")).unwrap_or_default();
    assert!(status.success(), "qemu exited with {status}; serial:\n{serial}");
    assert!(
        serial.contains("LAB done"),
        "the guest did not finish; serial:\n{serial}"
    );
    eprintln!(
        "vm-lab: the guest ran in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let untar = Command::new("tar")
        .arg("xf")
        .arg(dir.join("outbox.img"))
        .arg("-C")
        .arg(&out)
        .status()
        .unwrap();
    assert!(untar.success(), "the outbox holds a tar");
    for disk in ["nvme.img", "sata.img", "vda.img", "outbox.img", "vdc.img"] {
        let _ = std::fs::remove_file(dir.join(disk));
    }
    Lab { out, serial }
}

/// `promtool check metrics` on a file of the outbox, when promtool is installed.
fn promtool_accepts(lab: &Lab, name: &str) {
    let text = lab.file(name);
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool is not installed: {name} not checked");
        return;
    };
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool rejects {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn health_reads_qemus_nvme_live_and_counts_a_known_write_in_data_units() {
    let Some(lab) = lab() else { return };
    lab.expect("health-nvme-before", 0);
    lab.expect("run-nvme", 0);
    lab.expect("health-nvme-after", 0);
    let drive = |step: &str| lab.analysis(step)["drives"][0]["snapshot"].clone();
    let (before, after) = (drive("health-nvme-before"), drive("health-nvme-after"));
    assert_eq!(after["identity"]["model"], "QEMU NVMe Ctrl");
    // 256 MiB written; NVMe counts units of 1000 sectors of 512 bytes, rounded up.
    let written =
        after["host_written_bytes"].as_u64().unwrap() - before["host_written_bytes"].as_u64().unwrap();
    let known = 256u64 << 20;
    assert!(
        (known..known + 2 * 512_000).contains(&written),
        "the drive counted {written} bytes for a write of {known}"
    );
    assert_eq!(written % 512_000, 0, "whole data units");
    // nvme-cli reads the same log: its data units are ssdlab's host bytes.
    let log: Value = serde_json::from_str(&lab.file("health-nvme-nvmecli.out")).unwrap();
    let units: u64 = log["data_units_written"].as_str().unwrap().parse().unwrap();
    assert_eq!(units * 512_000, after["host_written_bytes"].as_u64().unwrap());
    // QEMU 7.2 keeps neither log that carries NAND writes: nvme-cli's own answers for both are in the source.
    let nand = after["nand_written_source"].as_str().unwrap();
    assert!(
        after["nand_written_bytes"].is_null()
            && nand.contains("OCP log C0h: `nvme ocp smart-add-log /dev/nvme0 -o json` failed")
            && nand.contains("Endurance Group log 09h: `nvme endurance-log /dev/nvme0 --group-id=1 -o json`"),
        "{nand}"
    );
    // QEMU reports 323 K (50 °C), no wear and no spare.
    assert_eq!(after["temperature_celsius"].as_f64(), Some(50.0));
    assert_eq!(after["wear_used_percent"].as_f64(), Some(0.0));
    assert_eq!(
        lab.analysis("health-nvme-after")["drives"][0]["verdict"]["level"],
        "ok"
    );
    // The history grew by this snapshot.
    let history = lab.file("history/QEMU_NVMe_Ctrl_ssdlab0001.jsonl");
    assert_eq!(history.lines().count(), 2, "{history}");
    promtool_accepts(lab, "health-before.prom");
    promtool_accepts(lab, "health-after.prom");
}

#[test]
fn health_reads_qemus_sata_disk_through_libata() {
    let Some(lab) = lab() else { return };
    let analysis = lab.analysis("health-sata");
    let drive = &analysis["drives"][0];
    assert_eq!(drive["snapshot"]["identity"]["model"], "QEMU HARDDISK");
    assert_eq!(drive["snapshot"]["identity"]["protocol"], "ata");
    // QEMU's disk fails one of smartctl's SMART commands (exit status bit 2): a warning, said as smartctl's bit.
    assert_eq!(drive["snapshot"]["smartctl_exit_status"], 4);
    assert_eq!(drive["verdict"]["level"], "warn");
    promtool_accepts(lab, "health-sata.prom");
}

/// Issue 48: the real smartctl's text (`smartctl -x`, the form people paste) and its JSON, of QEMU's SATA disk and
/// NVMe controller read through the kernel's drivers, each saved and read back by `ssdlab health --from`: the
/// same drive gives the same figures either way.
#[test]
fn health_reads_smartctls_text_and_json_of_the_same_drive_to_the_same_figures() {
    let Some(lab) = lab() else { return };
    for dev in ["sda", "nvme0"] {
        let text = lab.file(&format!("smart-{dev}-text.out"));
        assert!(
            text.contains("=== START OF"),
            "{dev}: smartctl -x printed:\n{text}"
        );
        let snapshot = |form: &str| {
            let step = format!("health-{dev}-from-{form}");
            lab.analysis(&step)["drives"][0]["snapshot"].clone()
        };
        let (json, text) = (snapshot("json"), snapshot("text"));
        for field in [
            "power_on_hours",
            "temperature_celsius",
            "host_written_bytes",
            "host_read_bytes",
            "wear_used_percent",
            "available_spare_percent",
            "available_spare_threshold_percent",
            "media_errors",
            "reallocated",
            "pending_sectors",
            "unsafe_shutdowns",
            "smart_passed",
            "critical_warning",
        ] {
            assert_eq!(
                json[field], text[field],
                "{dev}: {field}: JSON {} text {}",
                json[field], text[field]
            );
        }
        for field in ["model", "serial", "firmware", "capacity_bytes", "protocol"] {
            assert_eq!(json["identity"][field], text["identity"][field], "{dev}: {field}");
        }
        let ids = |s: &Value| -> Vec<(u64, String)> {
            s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| (a["id"].as_u64().unwrap(), a["name"].as_str().unwrap().to_string()))
                .collect()
        };
        assert_eq!(ids(&json), ids(&text), "{dev}: the attribute table");
    }
    // Enough was read to judge: QEMU's disk has an attribute table, its NVMe controller a health log.
    let sata = lab.analysis("health-sda-from-text");
    assert_eq!(
        sata["drives"][0]["snapshot"]["identity"]["model"],
        "QEMU HARDDISK"
    );
    assert!(
        !sata["drives"][0]["snapshot"]["attributes"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let nvme = lab.analysis("health-nvme0-from-text");
    assert_eq!(nvme["drives"][0]["snapshot"]["identity"]["protocol"], "nvme");
    assert_eq!(nvme["drives"][0]["snapshot"]["critical_warning"], 0);
    // The 256 MiB run-nvme wrote before, read from the text as from the JSON.
    assert!(
        nvme["drives"][0]["snapshot"]["host_written_bytes"]
            .as_u64()
            .unwrap()
            >= 256 << 20
    );
}

#[test]
fn erase_refuses_a_sanitize_that_reaches_other_namespaces_and_falls_back_to_a_secure_format() {
    let Some(lab) = lab() else { return };
    lab.expect("erase-nvme-sanitize", 2);
    let refusal = lab.stderr("erase-nvme-sanitize");
    assert!(
        refusal.contains("--method sanitize: not offered")
            && refusal.contains("every namespace")
            && refusal.contains("nothing was erased"),
        "{refusal}"
    );
    lab.expect("erase-nvme-auto", 0);
    let record = lab.record("erase-nvme");
    let analysis = &record["analysis"];
    assert_eq!(analysis["method"], "secure-erase", "{analysis:#}");
    let steps = analysis["steps"].as_array().unwrap();
    assert_eq!(steps[0]["method"], "sanitize");
    assert!(steps[0]["outcome"].as_str().unwrap().starts_with("not offered"));
    let format = steps[1]["outcome"].as_str().unwrap();
    assert!(
        format.contains("nvme format /dev/nvme0 --namespace-id=1 --ses=1"),
        "{format}"
    );
}

#[test]
fn pts_purges_qemus_nvme_by_its_own_secure_format_and_reports_the_drive() {
    let Some(lab) = lab() else { return };
    let record = lab.record("pts-nvme");
    // Whether QEMU's emulated drive settles in 25 rounds of 0.1 s cells depends on how busy the host is (under
    // TCG its latency swings with the host's load): settling passes, not settling is a finding, never a failure.
    match lab.rc("pts-nvme") {
        0 => assert_eq!(record["verdict"]["passed"], true),
        1 => {
            assert_eq!(record["verdict"]["finding"], true, "{:#}", record["verdict"]);
            assert!(
                record["verdict"]["reasons"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("steady state not achieved")
            );
        }
        rc => panic!("pts-nvme exited {rc}: {}", lab.stderr("pts-nvme")),
    }
    let analysis = &record["analysis"];
    let purge = analysis["purge"].as_str().unwrap();
    // QEMU has no sanitize; its Format NVM with secure erase settings is the drive's purge, read back erased.
    assert!(
        purge.starts_with("the drive's secure-erase")
            && purge.contains("nvme format /dev/nvme0 --namespace-id=1 --ses=1")
            && purge.contains("read back erased"),
        "{purge}"
    );
    assert_eq!(analysis["purged"], true);
    // Twice the 1 GiB namespace preconditioned; nine latency cells with their 99.999th percentiles.
    assert_eq!(analysis["preconditioning_bytes"], 2u64 << 30);
    let matrix = analysis["matrix"].as_array().unwrap();
    assert_eq!(matrix.len(), 9);
    assert!(
        matrix
            .iter()
            .all(|c| c["latency_ns_p99_999"].as_u64().unwrap() > 0)
    );
    // The kernel's facts about the drive: QEMU's serial as given on its command line, its firmware revision,
    // and the volatile write cache it reports.
    let drive = &record["target"]["drive"];
    assert_eq!(drive["serial"], "ssdlab0001", "{drive:#}");
    assert!(
        drive["firmware"].as_str().is_some_and(|f| !f.is_empty()),
        "{drive:#}"
    );
    assert_eq!(drive["write_cache"], "write back", "{drive:#}");
    // A 0.1 s cell is named as a departure from the specification.
    let departures = analysis["departures"].to_string();
    assert!(departures.contains("cells of 0.1 s"), "{departures}");
}

#[test]
fn erase_on_qemus_sata_disk_refuses_secure_erase_and_falls_back_to_discard() {
    let Some(lab) = lab() else { return };
    lab.expect("erase-sata-secure", 2);
    assert!(
        lab.stderr("erase-sata-secure")
            .contains("ATA Security feature set")
    );
    lab.expect("erase-sata-auto", 0);
    let record = lab.record("erase-sata");
    // The ATA disk's firmware revision whole, from libata's VPD page 0x89 (its `rev` file holds only four
    // characters); the serial from VPD page 0x80.
    let drive = &record["target"]["drive"];
    eprintln!("the AHCI disk as the kernel reports it: {drive}");
    assert!(
        drive["serial"].as_str().is_some_and(|s| s.starts_with("QM")),
        "{drive:#}"
    );
    assert_eq!(drive["firmware"], "2.5+", "{drive:#}");
    assert_eq!(
        record["analysis"]["method"], "discard",
        "{:#}",
        record["analysis"]
    );
}

#[test]
fn op_discards_the_tail_and_a_gpt_at_the_usable_size_fits_the_kernels_scan() {
    let Some(lab) = lab() else { return };
    lab.expect("op-nvme", 0);
    let record = lab.record("op-nvme");
    let planned = &record["analysis"]["planned"];
    let applied = &record["analysis"]["applied"];
    let usable = planned["usable_bytes"].as_u64().unwrap();
    assert_eq!(usable, 768 << 20, "75% of 1 GiB");
    assert_eq!(applied["offset_bytes"].as_u64(), Some(usable));
    assert_eq!(applied["tail_reads_zero"], true);
    lab.expect("op-sfdisk", 0);
    lab.expect("op-rescan", 0);
    let start: u64 = lab.file("op-partition-start.out").trim().parse().unwrap();
    let sectors: u64 = lab.file("op-partition-sectors.out").trim().parse().unwrap();
    assert_eq!(
        (start + sectors) * 512,
        usable,
        "the partition ends where the usable space ends"
    );
}

/// #45 defects 11-13 on real md, dm, LVM (a thin pool included), dm-crypt and bcache stacks: each top is written
/// while nothing uses it (its members, which the stack itself holds, do not make it "in use"), refused (even with
/// --force) once a file system on it is mounted, and written again once unmounted; the members and the DOS
/// extended partition holding the logical ones are refused while the stacks are in use; an alias mapping the
/// same bytes as a mounted volume is refused; `devices` shows partitions as rows with their own state.
#[test]
fn stacks_are_refused_while_in_use_and_writable_once_free() {
    let Some(lab) = lab() else { return };
    for setup in [
        "stack-partition",
        "stack-md1",
        "stack-md2",
        "stack-thin-pv",
        "stack-thin-vg",
        "stack-thin-pool",
        "stack-thin-lv",
        "stack-plain-pv",
        "stack-plain-vg",
        "stack-plain-lva",
        "stack-plain-lvb",
        "stack-luks",
        "stack-luks-open",
        "stack-plain-crypt",
        "stack-bcache",
        "stack-bcache-register",
        "stack-mkfs-lvb",
        "stack-alias",
    ] {
        lab.expect(setup, 0);
    }
    // The kernel shows the extended partition as its first 1 KiB.
    assert_eq!(lab.file("stack-extended-size.out").trim(), "2");
    for top in ["md1", "md2", "thin1", "lva", "luks", "plaincrypt", "bcache"] {
        let free = format!("stack-free-{top}");
        // A thin volume shares its pool's data with the pool's own device: a sign --force overrides.
        if top == "thin1" {
            let said = lab.stderr(&free);
            assert!(
                lab.rc(&free) == 0 || (lab.rc(&free) == 2 && said.contains("maps the same bytes")),
                "{free}: {said}"
            );
        } else {
            lab.expect(&free, 0);
            assert!(!lab.stderr(&free).contains("open exclusively"), "{free}");
        }
        lab.expect(&format!("stack-mkfs-{top}"), 0);
        let used = format!("stack-used-{top}");
        lab.expect(&used, 2);
        assert!(
            lab.stderr(&used)
                .contains(&format!("is mounted at /mnt/stack-{top}")),
            "{used}: {}",
            lab.stderr(&used)
        );
        lab.expect(&format!("stack-freed-{top}"), 0);
    }
    for (member, why) in [
        ("vdc1", "md1"),
        ("vdc5", "md2"),
        ("vdc7", "thinvg"),
        ("vdc8", "plainvg"),
        ("vdc9", "stackluks"),
        ("vdc10", "stackplain"),
        ("vdc11", "bcache0"),
        // The extended partition: its logical partitions are held and mounted.
        ("vdc3", "vdc5"),
    ] {
        let step = format!("stack-member-{member}");
        lab.expect(&step, 2);
        let refusal = lab.stderr(&step);
        assert!(
            refusal.contains(why) && refusal.contains("does not override a device in use"),
            "{member}: {refusal}"
        );
    }
    lab.expect("stack-used-alias", 2);
    assert!(
        lab.stderr("stack-used-alias")
            .contains("is mounted at /mnt/stack-lvb"),
        "{}",
        lab.stderr("stack-used-alias")
    );
    assert_eq!(
        lab.file("stack-data-after-refusals.out")
            .matches("in use")
            .count(),
        8,
        "every mounted file system kept its file"
    );
    // `devices`: partitions are rows; the extended one is named a container; free tops carry no false reason.
    lab.expect("stack-devices-free", 0);
    let free = lab.file("stack-devices-free.out");
    let row = |text: &str, dev: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{dev} ")))
            .unwrap_or_else(|| panic!("{dev} listed:\n{text}"))
            .to_string()
    };
    assert!(
        row(&free, "/dev/vdc3").contains("extended partition of vdc"),
        "{free}"
    );
    assert!(row(&free, "/dev/vdc1").contains("partition of vdc"), "{free}");
    for dev in ["/dev/md1", "/dev/md2", "/dev/bcache0"] {
        let line = row(&free, dev);
        assert!(
            !line.contains("IN USE") && !line.contains("open exclusively"),
            "{line}"
        );
    }
    lab.expect("stack-devices-used", 0);
    let used = lab.file("stack-devices-used.out");
    assert!(row(&used, "/dev/md1").contains("IN USE"), "{used}");
    assert!(row(&used, "/dev/vdc3").contains("IN USE"), "{used}");
    lab.expect("stack-freed-extended", 0);
}

#[test]
fn the_gate_refuses_every_real_holder_even_with_force() {
    let Some(lab) = lab() else { return };
    for setup in [
        "gate-partition",
        "gate-md",
        "gate-dm",
        "gate-mkswap",
        "gate-swapon",
        "gate-pv",
        "gate-vg",
        "gate-lv",
        "gate-mkfs",
        "gate-mount",
        "gate-luks",
        "gate-luks-open",
    ] {
        lab.expect(setup, 0);
    }
    for (victim, holder) in [
        ("vda1", "an md RAID device (raid1)"),
        ("vda3", "(lab-linear), is active over it"),
        ("vda4", "in use as swap"),
        ("vda5", "(labvg-lv), is active over it"),
        ("vda6", "mounted at /mnt/vda6"),
        ("vda7", "(labcrypt), is active over it"),
    ] {
        let step = format!("gate-write-{victim}");
        lab.expect(&step, 2);
        let refusal = lab.stderr(&step);
        assert!(
            refusal.contains(holder) && refusal.contains("--force does not override a device in use"),
            "{victim}: {refusal}"
        );
    }
    // The whole disk is refused for every holder on it.
    lab.expect("gate-write-vda", 2);
    let whole = lab.stderr("gate-write-vda");
    for holder in ["md0", "lab-linear", "labvg-lv", "labcrypt", "swap", "mounted"] {
        assert!(
            whole.contains(holder),
            "the disk's refusal names {holder}: {whole}"
        );
    }
    // `devices` shows the disk in use with each holder.
    lab.expect("gate-devices", 0);
    let devices = lab.file("gate-devices.out");
    let vda = devices
        .lines()
        .find(|l| l.starts_with("/dev/vda "))
        .expect("vda listed");
    assert!(vda.contains("IN USE"), "{vda}");
    for holder in ["md0", "lab-linear", "labvg-lv", "labcrypt", "swap", "mounted"] {
        assert!(vda.contains(holder), "devices names {holder}: {vda}");
    }
    // A file system that is only a signature: refused, then written with --force.
    lab.expect("gate-sata-mkfs", 0);
    lab.expect("gate-sata-unforced", 2);
    assert!(lab.stderr("gate-sata-unforced").contains("ext4"));
    lab.expect("gate-sata-forced", 0);
}

#[test]
fn serve_under_the_kernels_nbd_client_keeps_every_fsynced_file_across_a_sigkill_mid_write() {
    let Some(lab) = lab() else { return };
    for kind in ["file", "cached"] {
        for step in [
            "connect",
            "mkfs",
            "mount",
            "reconnect",
            "remount",
            "check",
            "umount",
            "fsck",
            "disconnect",
        ] {
            lab.expect(&format!("nbd-{kind}-{step}"), 0);
        }
        let synced = lab.file(&format!("nbd-{kind}-synced.out"));
        let killed = lab.file(&format!("nbd-{kind}-killed-after.out"));
        // Killed mid-write: some files were fsync'ed, and the writer had not finished all 400.
        let files = synced.lines().count();
        assert!(
            (1..400).contains(&files),
            "{kind}: {files} files fsync'ed before the kill ({killed})"
        );
        // `md5sum -c` of every logged file on the remounted file system.
        let check = lab.file(&format!("nbd-{kind}-check.out"));
        assert_eq!(
            check.lines().filter(|l| l.ends_with(": OK")).count(),
            files,
            "{kind}: {check}"
        );
        assert!(
            lab.file(&format!("nbd-{kind}-serve-first.err"))
                .contains("serving")
        );
    }
    // The same oracle catches a server that acknowledges flushes it never made durable (nbdkit's cache filter
    // with cache=unsafe): after its SIGKILL the file system does not come back whole. Its first steps must have
    // worked, so it fails for the right reason.
    for step in ["connect", "mkfs", "mount", "reconnect"] {
        lab.expect(&format!("nbd-nbdkit-unsafe-{step}"), 0);
    }
    let synced = lab.file("nbd-nbdkit-unsafe-synced.out");
    let files = synced.lines().count();
    assert!(files > 0, "the writer fsync'ed files before the kill");
    let intact = lab
        .file("nbd-nbdkit-unsafe-check.out")
        .lines()
        .filter(|l| l.ends_with(": OK"))
        .count();
    let whole =
        lab.rc("nbd-nbdkit-unsafe-remount") == 0 && intact == files && lab.rc("nbd-nbdkit-unsafe-fsck") == 0;
    assert!(
        !whole,
        "the negative control came back whole: the oracle cannot tell a lost flush ({files} files)"
    );
}

#[test]
fn scan_and_a_killed_refresh_on_ext4_over_the_nvme_namespace_keep_bytes_and_times() {
    let Some(lab) = lab() else { return };
    for step in [
        "fs-mkfs",
        "fs-mount",
        "fs-write",
        "fs-scan",
        "fs-refresh",
        "fs-umount",
        "fs-fsck",
    ] {
        lab.expect(step, 0);
    }
    let scan = lab.record("scan-nvme");
    assert_eq!(scan["analysis"]["files"].as_array().map(Vec::len), Some(3));
    // The first run was killed mid-file: its journal held an entry, and the next run settled it.
    let journal: usize = lab.file("fs-journal-after-kill.out").trim().parse().unwrap();
    assert!(journal > 0, "the killed refresh had begun a file");
    let before = lab.file("fs-sums-before.out");
    assert_eq!(
        lab.file("fs-sums-after.out"),
        before,
        "the same bytes and the old times"
    );
    let refresh = lab.record("refresh-nvme");
    assert_eq!(refresh["verdict"]["passed"], true, "{:#}", refresh["analysis"]);
}
