//! `ssdlab health` against what needs the binary or outside tools: smartctl stand-ins whose metrics promtool
//! reads, the real smartctl refusing a loop device, Prometheus output checked by promtool and written
//! atomically, and what the flags' parsers refuse. Saved outputs (`--from`), smartctl's answers, history and the
//! virtual SSD's counters are tested in-process in `crates/ssdlab-app/tests/health_reads.rs`.

use crate::*;

pub(crate) fn health_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ssdlab-health/tests/fixtures")
        .join(name)
}

/// Writes an executable stand-in smartctl with this shell script into `dir`.
fn stand_in(dir: &Path, script: String) -> PathBuf {
    let path = dir.join("smartctl");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// The metrics of readings with an unreadable drive (beside a readable one, alone, and one `--scan` could not
/// open), as promtool reads them.
#[test]
fn unreadable_drives_metrics_pass_promtool() {
    let dir = tempdir();
    // A stand-in smartctl: --scan-open lists /dev/null, which reads as a healthy NVMe drive, and /dev/sdq, which
    // it cannot open; /dev/zero cannot be opened (exit bit 1).
    let scan = dir.path().join("scan.json");
    std::fs::write(
        &scan,
        r#"{"json_format_version":[1,0],"smartctl":{"version":[7,3],"exit_status":0},"devices":[
            {"name":"/dev/null","info_name":"/dev/null","type":"nvme","protocol":"NVMe"},
            {"name":"/dev/sdq","info_name":"/dev/sdq","type":"scsi","protocol":"SCSI","open_error":"No such device"}]}"#,
    )
    .unwrap();
    let fake = stand_in(
        dir.path(),
        format!(
            "#!/bin/sh
[ \"$1\" = --scan-open ] && {{ cat '{}'; exit 0; }}
case \"$3$5\" in
/dev/null|-d/dev/null) cat '{}'; exit 0;;
*) cat '{}'; exit 2;;
esac
",
            scan.display(),
            health_fixture("nvme-ok.json").display(),
            health_fixture("smartctl-open-failed.json").display()
        ),
    );
    let smartctl = fake.to_str().unwrap();
    for (devices, code, name) in [
        (&["/dev/null", "/dev/zero"][..], 1, "one.prom"),
        (&["/dev/zero"][..], 2, "none.prom"),
        (&["--scan"][..], 1, "scan.prom"),
    ] {
        let prom = dir.path().join(name);
        let mut args = vec!["health", "--smartctl", smartctl, "--no-history", "--prom"];
        args.push(prom.to_str().unwrap());
        args.extend_from_slice(devices);
        let out = run(&args);
        expect_code(&out, code);
        let metrics = promtool_checked(&prom);
        assert!(
            metrics.contains("ssdlab_health_read_ok{device=\"/dev/") && metrics.contains("} 0"),
            "{name}: {metrics}"
        );
    }
}

#[test]
fn the_real_smartctl_cannot_read_a_loop_device() {
    // The real smartctl cannot read a loop device: bit 1, a clear error, exit 2.
    if is_root() && Command::new("smartctl").arg("--version").output().is_ok() {
        let disk = LoopDevice::new(16 << 20);
        let out = run(&["health", &disk.path, "--no-history"]);
        expect_code(&out, 2);
        let text = stderr(&out);
        assert!(
            text.contains(&disk.path) && text.contains("smartctl could not read the device"),
            "{text}"
        );
    }
}

/// What the flags' parsers refuse, before any plan: a window that is not a duration, a DWPD rating without its
/// warranty, and no drive at all.
#[test]
fn health_refuses_what_its_flags_cannot_read() {
    let fixture = health_fixture("nvme-ok.json");
    let f = fixture.to_str().unwrap();
    expect_usage_error(
        &run(&["health", "--no-history", "--from", f, "--window", "soon"]),
        "--window",
    );
    let out = run(&["health", "--no-history", "--from", f, "--rated-dwpd", "1"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("--warranty-years"), "{}", stderr(&out));
    expect_code(&run(&["health"]), 2);
    for bad in ["0", "150", "lots"] {
        let out = run(&["health", "--no-history", "--from", f, "--wear-warn", bad]);
        expect_usage_error(&out, "--wear-warn");
        assert!(stderr(&out).contains("at most 100"), "{}", stderr(&out));
    }
}

#[test]
fn prometheus_output_passes_promtool_and_is_written_atomically() {
    let dir = tempdir();
    let prom = dir.path().join("ssdlab.prom");
    let mut args = vec!["health", "--no-history", "--prom", prom.to_str().unwrap()];
    let fixtures: Vec<String> = [
        "ata-intel-dc.json",
        "nvme-huge-counters.json",
        "nvme-cli-2.11.json",
        "ata-failing.json",
    ]
    .iter()
    .map(|f| health_fixture(f).to_str().unwrap().to_string())
    .collect();
    for f in &fixtures {
        args.extend(["--from", f.as_str()]);
    }
    args.push("sim:840evo-120g?scale=1/256&fill=50%");
    let out_dir = dir.path().join("out");
    args.extend(["--out", out_dir.to_str().unwrap()]);
    expect_code(&run(&args), 1);
    // result.json reads back, counters past 2^64 included (`ssdlab report` parses it into the typed schema).
    let page = dir.path().join("again.html");
    expect_code(
        &run(&[
            "report",
            out_dir.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ]),
        0,
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("HUGE COUNTER NVME") && html.contains("ST240FN0021"),
        "the report names every drive"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("# TYPE ssdlab_nand_written_bytes_total counter"),
        "{text}"
    );
    // A saved output is labelled by its file, not by the device path it was saved from on its own host.
    assert!(
        text.lines()
            .any(|l| l.starts_with("ssdlab_health_verdict{device=\"")
                && l.ends_with("ata-failing.json\",serial=\"ZA20TESTFAIL\",model=\"ST240FN0021\"} 2")),
        "{text}"
    );
    assert!(!text.contains("device=\"/dev/sdb\""), "{text}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|name| !name.contains("tmp")),
        "a temporary file was left: {left:?}"
    );
    promtool_checked(&prom);
}

/// The file's text, after `promtool check metrics` accepted it (Debian package prometheus; scripts/test.sh
/// installs it).
pub(crate) fn promtool_checked(path: &Path) -> String {
    let check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(path).unwrap())
        .output()
        .expect("promtool (Debian package prometheus; scripts/test.sh installs it)");
    assert!(
        check.status.success(),
        "promtool on {}: {}{}",
        path.display(),
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    std::fs::read_to_string(path).unwrap()
}
