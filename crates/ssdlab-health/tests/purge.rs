//! Firmware purges without a drive: what each saved tool output offers, the exact command lines planned from it,
//! and the sequence (start, poll, undo) run against scripted tool outputs. The fixtures are described in
//! tests/fixtures/purge/README.md. No real NVMe or ATA drive is on a CI machine, so this is as far as a test
//! reaches; the binary's glue only runs these command lines.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::collections::VecDeque;

use ssdlab_health::purge::{
    AtaCaps, FirmwareMethod, NvmeCaps, RunFailure, SanitizeState, ToolRun, ata_sanitize_plan,
    ata_security_erase_plan, nvme_format_plan, nvme_sanitize_plan, parse_hdparm_identify,
    parse_hdparm_sanitize_status, parse_nvme_id_ctrl, parse_nvme_sanitize_log, run_plan,
};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/purge/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn line(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

#[test]
fn nvme_capabilities_and_command_lines() {
    let caps = parse_nvme_id_ctrl(&fixture("nvme-id-ctrl-sanitize.json")).unwrap();
    // oacs 23 = 0b10111 (format), fna 5 = 0b101 (format reaches all namespaces, crypto format; secure erase not
    // all), sanicap 3 (crypto, block), nn 1, cmic 0.
    assert_eq!(
        caps,
        NvmeCaps {
            format: true,
            format_all_namespaces: true,
            secure_erase_all_namespaces: false,
            crypto_format: true,
            sanitize_crypto: true,
            sanitize_block: true,
            sanitize_overwrite: false,
            max_namespaces: 1,
            shared_subsystem: false,
        }
    );
    assert!(caps.format_reaches_all_namespaces(), "FNA bit 0");
    let sanitize = nvme_sanitize_plan(&caps, "nvme", "/dev/nvme0").unwrap();
    assert_eq!(sanitize.method, FirmwareMethod::Sanitize);
    assert_eq!(sanitize.label, "NVMe sanitize, crypto erase");
    assert_eq!(
        sanitize.steps,
        vec![line(&["nvme", "sanitize", "/dev/nvme0", "--sanact=4"])]
    );
    assert_eq!(
        sanitize.status.as_ref().unwrap().0,
        line(&["nvme", "sanitize-log", "/dev/nvme0", "-o", "json"])
    );
    let format = nvme_format_plan(&caps, "nvme", "/dev/nvme0", 1).unwrap();
    assert_eq!(format.label, "NVMe format, cryptographic erase");
    assert_eq!(
        format.steps,
        vec![line(&[
            "nvme",
            "format",
            "/dev/nvme0",
            "--namespace-id=1",
            "--ses=2",
            "--timeout=14400000",
            "--force"
        ])]
    );

    let old = parse_nvme_id_ctrl(&fixture("nvme-id-ctrl-format-only.json")).unwrap();
    assert!(old.format && !old.crypto_format);
    assert!(
        nvme_sanitize_plan(&old, "nvme", "/dev/nvme0")
            .unwrap_err()
            .contains("SANICAP is 0")
    );
    assert_eq!(
        nvme_format_plan(&old, "nvme", "/dev/nvme0", 1).unwrap().steps[0],
        line(&[
            "nvme",
            "format",
            "/dev/nvme0",
            "--namespace-id=1",
            "--ses=1",
            "--timeout=14400000",
            "--force"
        ])
    );
    let nothing = parse_nvme_id_ctrl(&fixture("nvme-id-ctrl-nothing.json")).unwrap();
    assert!(
        nvme_format_plan(&nothing, "nvme", "/dev/nvme0", 1)
            .unwrap_err()
            .contains("OACS bit 1")
    );

    for bad in ["", "{}", "[1]", "garbage"] {
        let e = parse_nvme_id_ctrl(bad).unwrap_err().to_string();
        assert!(e.starts_with("nvme id-ctrl:"), "{e}");
    }
}

#[test]
fn nvme_sanitize_log_states() {
    let state = |name: &str| parse_nvme_sanitize_log(&fixture(name)).unwrap();
    assert_eq!(state("nvme-sanitize-log-never.json"), SanitizeState::Idle);
    // sprog 16384 of 65536.
    assert_eq!(
        state("nvme-sanitize-log-progress.json"),
        SanitizeState::InProgress { percent: Some(25.0) }
    );
    assert_eq!(
        state("nvme-sanitize-log-done.json"),
        SanitizeState::Succeeded { action: Some(4) }
    );
    assert_eq!(
        state("nvme-sanitize-log-keyed-by-text.json"),
        SanitizeState::Succeeded { action: Some(4) }
    );
    assert!(matches!(
        state("nvme-sanitize-log-failed.json"),
        SanitizeState::Failed(_)
    ));
    assert!(parse_nvme_sanitize_log("{\"nvme0\": {}}").is_err());
}

#[test]
fn ata_capabilities_and_command_lines() {
    let micron = parse_hdparm_identify(&fixture("hdparm-identify-sanitize.txt")).unwrap();
    assert_eq!(
        micron,
        AtaCaps {
            security: true,
            security_enabled: false,
            locked: false,
            frozen: false,
            count_expired: false,
            enhanced_erase: true,
            erase_minutes: Some(4),
            enhanced_erase_minutes: Some(8),
            sanitize: true,
            sanitize_crypto: true,
            sanitize_block: true,
            sanitize_overwrite: false,
        }
    );
    let sanitize = ata_sanitize_plan(&micron, "hdparm", "/dev/sdb").unwrap();
    assert_eq!(
        sanitize.steps,
        vec![line(&[
            "hdparm",
            "--yes-i-know-what-i-am-doing",
            "--sanitize-crypto-scramble",
            "/dev/sdb"
        ])]
    );
    let erase = ata_security_erase_plan(&micron, "hdparm", "/dev/sdb").unwrap();
    assert_eq!(erase.label, "ATA SECURITY ERASE UNIT (enhanced)");
    assert_eq!(erase.estimate_minutes, Some(8));
    assert_eq!(
        erase.steps,
        vec![
            line(&[
                "hdparm",
                "--user-master",
                "u",
                "--security-set-pass",
                "ssdlab",
                "/dev/sdb"
            ]),
            line(&[
                "hdparm",
                "--user-master",
                "u",
                "--security-erase-enhanced",
                "ssdlab",
                "/dev/sdb"
            ]),
        ]
    );
    assert_eq!(
        erase.undo,
        Some(line(&[
            "hdparm",
            "--user-master",
            "u",
            "--security-disable",
            "ssdlab",
            "/dev/sdb"
        ]))
    );

    // The 840 EVO as most machines boot it: frozen by the BIOS, and no SANITIZE feature set.
    let evo = parse_hdparm_identify(&fixture("hdparm-identify-840evo-frozen.txt")).unwrap();
    assert!(evo.security && evo.frozen && evo.enhanced_erase && !evo.sanitize);
    assert!(
        ata_security_erase_plan(&evo, "hdparm", "/dev/sdb")
            .unwrap_err()
            .contains("frozen")
    );
    assert!(
        ata_sanitize_plan(&evo, "hdparm", "/dev/sdb")
            .unwrap_err()
            .contains("SANITIZE")
    );

    let locked = parse_hdparm_identify(&fixture("hdparm-identify-locked.txt")).unwrap();
    assert!(locked.locked && locked.security_enabled && !locked.enhanced_erase);
    assert_eq!(locked.erase_minutes, Some(60));
    assert!(
        ata_security_erase_plan(&locked, "hdparm", "/dev/sdb")
            .unwrap_err()
            .contains("will not guess")
    );

    assert!(
        parse_hdparm_identify("/dev/loop0:\n")
            .unwrap_err()
            .to_string()
            .starts_with("hdparm -I")
    );
}

#[test]
fn hdparm_sanitize_status() {
    assert_eq!(
        parse_hdparm_sanitize_status(&fixture("hdparm-sanitize-progress.txt")),
        SanitizeState::InProgress { percent: Some(25.0) }
    );
    assert_eq!(
        parse_hdparm_sanitize_status(&fixture("hdparm-sanitize-done.txt")),
        SanitizeState::Succeeded { action: None }
    );
}

/// Plays back one scripted output per command line, recording what was run.
struct Script {
    outputs: VecDeque<(bool, String)>,
    ran: Vec<Vec<String>>,
    slept_s: u64,
}

impl Script {
    fn new(outputs: &[(bool, &str)]) -> Self {
        Script {
            outputs: outputs.iter().map(|(ok, s)| (*ok, s.to_string())).collect(),
            ran: vec![],
            slept_s: 0,
        }
    }

    fn play(
        &mut self,
        plan: &ssdlab_health::purge::PurgePlan,
        max_polls: u32,
    ) -> Result<Vec<String>, RunFailure> {
        let outputs = &mut self.outputs;
        let ran = &mut self.ran;
        let slept = &mut self.slept_s;
        run_plan(
            plan,
            &mut |argv: &[String]| {
                ran.push(argv.to_vec());
                let (success, text) = outputs.pop_front().expect("a scripted output for every command");
                Ok(ToolRun {
                    success,
                    stdout: if success { text.clone() } else { String::new() },
                    stderr: if success { String::new() } else { text },
                })
            },
            &mut |s| *slept += s,
            5,
            max_polls,
        )
    }
}

#[test]
fn a_sanitize_is_started_and_polled_to_its_end() {
    let caps = parse_nvme_id_ctrl(&fixture("nvme-id-ctrl-sanitize.json")).unwrap();
    let plan = nvme_sanitize_plan(&caps, "nvme", "/dev/nvme0").unwrap();
    let never = fixture("nvme-sanitize-log-never.json");
    let mut script = Script::new(&[
        (true, &never),
        (true, ""),
        (true, &never),
        (true, &fixture("nvme-sanitize-log-progress.json")),
        (true, &fixture("nvme-sanitize-log-done.json")),
    ]);
    let log = script.play(&plan, 100).unwrap();
    assert_eq!(script.ran.len(), 5);
    assert_eq!(
        script.ran[0],
        plan.status.clone().unwrap().0,
        "the status is read before anything is sent"
    );
    assert_eq!(script.slept_s, 10, "two polls before the end, 5 s apart");
    assert_eq!(log.last().unwrap(), "the drive reports the sanitize completed");

    // A failure once started says the drive may still be at it, and is marked started (auto stops there).
    let mut failing = Script::new(&[
        (true, &never),
        (true, ""),
        (true, &fixture("nvme-sanitize-log-failed.json")),
    ]);
    let e = failing.play(&plan, 100).unwrap_err();
    assert!(e.started && e.reason.contains("may still be sanitizing"), "{e:?}");
    let mut lost = Script::new(&[(true, &never), (true, ""), (false, "Permission denied")]);
    assert!(lost.play(&plan, 100).unwrap_err().started);
    // The start failed: it may have begun all the same (a timeout), so it counts as started.
    let mut refused = Script::new(&[(true, &never), (false, "timed out")]);
    let e = refused.play(&plan, 100).unwrap_err();
    assert!(e.started && e.reason.contains("may have begun"), "{e:?}");
    // The status cannot be read before starting: nothing is sent.
    let mut blind = Script::new(&[(false, "Permission denied")]);
    let e = blind.play(&plan, 100).unwrap_err();
    assert!(!e.started && e.reason.contains("nothing was sent"), "{e:?}");
    assert_eq!(blind.ran.len(), 1);

    let mut slow = Script::new(&[
        (true, &never),
        (true, ""),
        (true, &fixture("nvme-sanitize-log-progress.json")),
        (true, &fixture("nvme-sanitize-log-progress.json")),
    ]);
    let e = slow.play(&plan, 2).unwrap_err();
    assert!(
        e.reason.contains("had not reported the end") && e.reason.contains("sanitize-log"),
        "{e:?}"
    );

    // A drive that never reports this sanitize (idle, or an earlier block erase's completion: SANACT 2, not 4)
    // is given up on after twelve polls instead of a day.
    let earlier = fixture("nvme-sanitize-log-done.json").replace("\"cdw10_info\": 4", "\"cdw10_info\": 2");
    let mut outputs = vec![(true, never.clone()), (true, String::new())];
    outputs.extend((0..12).map(|i| {
        let log = if i % 2 == 0 {
            earlier.clone()
        } else {
            fixture("nvme-sanitize-log-never.json")
        };
        (true, log)
    }));
    let outputs: Vec<(bool, &str)> = outputs.iter().map(|(ok, s)| (*ok, s.as_str())).collect();
    let mut idle = Script::new(&outputs);
    let e = idle.play(&plan, 1000).unwrap_err();
    assert!(e.started && e.reason.contains("has not reported it"), "{e:?}");
    assert_eq!(idle.ran.len(), 14);
}

#[test]
fn an_ata_sanitize_completion_left_from_an_earlier_one_is_not_taken_for_this_one() {
    let caps = parse_hdparm_identify(&fixture("hdparm-identify-sanitize.txt")).unwrap();
    let plan = ata_sanitize_plan(&caps, "hdparm", "/dev/sdb").unwrap();
    let done = fixture("hdparm-sanitize-done.txt");
    let progress = fixture("hdparm-sanitize-progress.txt");
    // The drive reports "completed" before this sanitize starts and never shows it in progress: given up on,
    // marked started, and the reason says why.
    let mut outputs = vec![(true, done.as_str()), (true, "")];
    outputs.extend((0..12).map(|_| (true, done.as_str())));
    let mut stale = Script::new(&outputs);
    let e = stale.play(&plan, 1000).unwrap_err();
    assert!(
        e.started && e.reason.contains("from before this one started"),
        "{e:?}"
    );
    // Shown in progress, then completed: that completion is this one's.
    let mut fresh = Script::new(&[(true, &done), (true, ""), (true, &progress), (true, &done)]);
    let log = fresh.play(&plan, 1000).unwrap();
    assert_eq!(log.last().unwrap(), "the drive reports the sanitize completed");
    // Idle before it started: a completion at the first poll is this one's (a crypto scramble takes seconds).
    let idle = "\n/dev/sdb:\nSanitize Idle\n";
    let mut quick = Script::new(&[(true, idle), (true, ""), (true, &done)]);
    assert!(quick.play(&plan, 1000).is_ok());
}

#[test]
fn a_failed_ata_erase_takes_the_temporary_password_off() {
    let caps = parse_hdparm_identify(&fixture("hdparm-identify-sanitize.txt")).unwrap();
    let plan = ata_security_erase_plan(&caps, "hdparm", "/dev/sdb").unwrap();
    assert!(
        plan.notice
            .as_deref()
            .unwrap()
            .contains("--security-disable ssdlab /dev/sdb"),
        "the password and how to unlock are said before anything runs"
    );
    // The password is set, the erase fails (a bridge dropped the command): it may have begun all the same, so
    // nothing else is sent to the drive; the reason says how to check it and take the password off.
    let mut script = Script::new(&[(true, ""), (false, "SG_IO: bad/missing sense data")]);
    let e = script.play(&plan, 1).unwrap_err();
    assert!(e.started, "the erase command itself failed: it may have begun");
    assert!(
        e.reason.contains("bad/missing sense data")
            && e.reason.contains("nothing else was sent")
            && e.reason.contains("hdparm -I /dev/sdb")
            && e.reason.contains("--security-disable ssdlab /dev/sdb"),
        "{e:?}"
    );
    assert_eq!(
        script.ran.len(),
        2,
        "no --security-disable and no -I after the erase command"
    );

    // Setting the password fails, and so does the undo; the drive says a password is set: the error says how to
    // unlock it.
    let locked = fixture("hdparm-identify-locked.txt");
    let mut script = Script::new(&[(false, "timeout"), (false, "locked"), (true, &locked)]);
    let e = script.play(&plan, 1).unwrap_err();
    assert!(
        e.reason
            .contains("may be locked with the user password \"ssdlab\""),
        "{e:?}"
    );
    assert!(!e.started);
    assert_eq!(
        script.ran[2],
        plan.identify.clone().unwrap(),
        "the drive was asked"
    );

    // The first step fails, the undo fails (no password to take off), and the drive says none is set.
    let clean = fixture("hdparm-identify-sanitize.txt");
    let mut script = Script::new(&[
        (false, "permission denied"),
        (false, "not enabled"),
        (true, &clean),
    ]);
    let e = script.play(&plan, 1).unwrap_err();
    assert!(!e.started && e.reason.contains("no password is left"), "{e:?}");
    assert_eq!(script.ran.len(), 3);

    let mut script = Script::new(&[(true, ""), (true, "")]);
    assert_eq!(script.play(&plan, 1).unwrap().len(), 2);
}
