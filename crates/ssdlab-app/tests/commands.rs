//! Whole commands driven through their ports, without a terminal, without root and without the tools installed:
//! a recording console, canned tools answering smartctl, a fixed clock, virtual drives and temporary files.
//! Each test runs a command's plan as the binary would and checks what it said, streamed and wrote.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use ssdlab_app::flags::Given;
use ssdlab_app::ports::{Outcome, Ports};
use ssdlab_app::run::{Plan as RunPlan, RunFlags};
use ssdlab_app::testing::{CannedTools, FixedClock, RecordingConsole};
use ssdlab_app::{TargetPlan, health, methodology, op, scan};
use ssdlab_health::rating::RatingFlags;

/// A small virtual 840 EVO (1/256 of 250 GB).
const SMALL_SIM: &str = "sim:840evo-250g?scale=1/256";

/// 2023-11-14, the time the health fixtures were taken at (their `local_time`).
const FIXTURE_NOW_S: f64 = 1_700_000_000.0;

fn no_stop() -> &'static AtomicBool {
    Box::leak(Box::new(AtomicBool::new(false)))
}

/// The JSON Lines records' types, in order.
fn event_types(console: &RecordingConsole) -> Vec<String> {
    console
        .json
        .as_ref()
        .expect("a JSON console")
        .iter()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("each record is JSON");
            value["type"]
                .as_str()
                .expect("each record has a type")
                .to_string()
        })
        .collect()
}

fn health_fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ssdlab-health/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run_flags(rw: &str, runtime: &str) -> RunFlags {
    RunFlags {
        rw: ssdlab_app::flags::rw_arg(rw).unwrap(),
        mix: 70,
        block_bytes: 4096,
        qd: 4,
        span: "100%".parse().unwrap(),
        runtime_ns: Some(ssdlab_app::flags::duration_arg(runtime).unwrap()),
        bytes: None,
        passes: None,
        rate: None,
        seed: 1,
        norandommap: false,
        verify: false,
        ramp_ns: 0,
        jobs: 1,
    }
}

#[test]
fn a_run_on_a_virtual_drive_streams_every_event_and_writes_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // Filled: reads of a fresh virtual drive's unmapped blocks are not a trusted measurement.
    let plan = RunPlan::new(
        TargetPlan::plain(&format!("{SMALL_SIM}&fill=100%")).unwrap(),
        run_flags("randread", "3s"),
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
    )
    .unwrap();
    let mut console = RecordingConsole::with_json();
    let outcome = ssdlab_app::run::run(
        &plan,
        &mut Ports::new(
            &mut console,
            &CannedTools::default(),
            &FixedClock::at(FIXTURE_NOW_S),
            no_stop(),
        ),
    )
    .unwrap();
    assert_eq!(outcome, Outcome::Passed, "{}", console.text());
    let types = event_types(&console);
    assert_eq!(types.first().map(String::as_str), Some("begin"));
    assert_eq!(types.last().map(String::as_str), Some("verdict"));
    let begin: serde_json::Value = serde_json::from_str(&console.json.as_ref().unwrap()[0]).unwrap();
    assert_eq!(
        begin["data"]["schema"],
        ssdlab_core::schema::SCHEMA,
        "the stream says which schema its options follow"
    );
    // Three virtual seconds: a sample per second, then the phase's summary.
    assert!(types.iter().filter(|t| *t == "sample").count() >= 3, "{types:?}");
    assert!(types.contains(&"summary".to_string()));
    assert!(
        console
            .said
            .iter()
            .any(|l| l.starts_with("ssdlab    run randread")),
        "{}",
        console.text()
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(record["kind"], "run");
    // The ports' clock, not the system's, dates the record.
    assert_eq!(record["started_at"], "2023-11-14T22:13:20Z");
    assert!(out.join("samples.csv").exists() && out.join("report.html").exists());
}

#[test]
fn a_stop_request_ends_a_run_as_interrupted_with_what_was_measured() {
    let plan = RunPlan::new(
        TargetPlan::plain(SMALL_SIM).unwrap(),
        run_flags("randwrite", "60s"),
        None,
    )
    .unwrap();
    let mut console = RecordingConsole {
        interrupt: true,
        ..RecordingConsole::with_json()
    };
    let outcome = ssdlab_app::run::run(
        &plan,
        &mut Ports::new(
            &mut console,
            &CannedTools::default(),
            &FixedClock::at(FIXTURE_NOW_S),
            no_stop(),
        ),
    )
    .unwrap();
    assert_eq!(outcome, Outcome::Interrupted, "{}", console.text());
    assert!(
        console
            .said
            .iter()
            .any(|l| l.contains("interrupted before the end condition")),
        "{}",
        console.text()
    );
}

/// The recording skeleton: `--out` is checked when the plan is made and created only once the gate has let the
/// command through, so a refusal (here, a pseudo file the opener never writes, and a workload larger than its
/// device) leaves no directory behind; a run that goes through leaves it with its result and says which files.
#[test]
fn out_is_created_only_after_the_gate_and_taken_away_by_a_refusal_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let ports = |console: &mut RecordingConsole, f: &mut dyn FnMut(&mut Ports)| {
        let (tools, clock) = (CannedTools::default(), FixedClock::at(FIXTURE_NOW_S));
        f(&mut Ports::new(console, &tools, &clock, no_stop()));
    };
    // Refused by the gate: procfs is never written.
    let out = dir.path().join("refused-by-the-gate");
    let plan = RunPlan::new(
        TargetPlan::plain("file:/proc/sys/vm/swappiness").unwrap(),
        run_flags("write", "1s"),
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    ports(&mut console, &mut |p| {
        let error = ssdlab_app::run::run(&plan, p).unwrap_err();
        assert!(format!("{error:#}").contains("proc"), "{error:#}");
    });
    assert!(!out.exists(), "a gate's refusal left --out behind");
    // Through the gate, then refused by the workload's check against the device: the directory made ready
    // for it is taken away again.
    let out = dir.path().join("refused-after-the-gate");
    let mut flags = run_flags("randread", "1s");
    flags.block_bytes = 2 << 20;
    let plan = RunPlan::new(
        TargetPlan::plain("null:1m").unwrap(),
        flags,
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    ports(&mut console, &mut |p| {
        assert!(ssdlab_app::run::run(&plan, p).is_err());
    });
    assert!(!out.exists(), "a refusal after the gate left --out behind");
    // A directory that was there before is never taken away, refusal or not.
    std::fs::create_dir(&out).unwrap();
    let mut console = RecordingConsole::default();
    ports(&mut console, &mut |p| {
        assert!(ssdlab_app::run::run(&plan, p).is_err());
    });
    assert!(out.is_dir(), "a directory the user made was removed");
    // A run that goes through: the directory holds the result, and the line says what was written.
    let out = dir.path().join("ran");
    let plan = RunPlan::new(
        TargetPlan::plain("null:1m").unwrap(),
        run_flags("randread", "1s"),
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    ports(&mut console, &mut |p| {
        assert_eq!(ssdlab_app::run::run(&plan, p).unwrap(), Outcome::Passed);
    });
    let line = console
        .said
        .iter()
        .find(|l| l.starts_with("results   "))
        .cloned()
        .unwrap_or_default();
    assert!(
        line.contains("result.json") && line.contains("samples.csv") && line.contains("report.html"),
        "{line}"
    );
    for name in ["result.json", "samples.csv", "report.html"] {
        assert!(out.join(name).is_file(), "{name}");
    }
}

#[test]
fn run_plans_refuse_bad_flags_before_anything_opens() {
    let refused = |flags: RunFlags, target: &str, flag: &str| {
        let e = RunPlan::new(TargetPlan::plain(target).unwrap(), flags, None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(flag), "{flag}: {e}");
    };
    // What one flag's value parser refuses says how to write it (the binary names the flag and the value).
    assert!(
        ssdlab_app::flags::rw_arg("sideways")
            .unwrap_err()
            .starts_with("use ")
    );
    assert!(
        ssdlab_app::flags::rw_arg("rw")
            .unwrap_err()
            .contains("--rw randrw")
    );
    assert!(
        ssdlab_app::flags::duration_arg("soon")
            .unwrap_err()
            .contains("a duration")
    );
    assert!(
        ssdlab_app::flags::duration_arg("10")
            .unwrap_err()
            .contains("fio's bare 10 means 10s")
    );
    assert!("0%".parse::<ssdlab_app::flags::SpanFlag>().is_err());
    assert!(ssdlab_app::flags::rate_arg("fast").is_err());
    refused(
        RunFlags {
            mix: 101,
            ..run_flags("randrw", "1s")
        },
        "null",
        "--mix",
    );
    refused(
        RunFlags {
            verify: true,
            ..run_flags("randwrite", "1s")
        },
        SMALL_SIM,
        "--verify",
    );
}

#[test]
fn health_reads_a_drive_through_the_tools_port_and_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    // /dev/null is a device node anyone may name; what smartctl says of it is canned.
    let tools = CannedTools::default().answer(
        "smartctl --json=c -x /dev/null",
        0,
        &health_fixture("ata-samsung-840evo-1t.json"),
    );
    let plan = || {
        health::Plan::new(
            vec!["/dev/null".into()],
            false,
            vec![],
            Some(history.clone()),
            Given::of("all", None),
            RatingFlags::default(),
            None,
            None,
            "smartctl".into(),
            80.0,
        )
        .unwrap()
    };
    let clock = FixedClock::at(FIXTURE_NOW_S);
    let mut console = RecordingConsole::with_json();
    let outcome = health::run(&plan(), &mut Ports::new(&mut console, &tools, &clock, no_stop())).unwrap();
    assert!(
        matches!(outcome, Outcome::Passed | Outcome::Failed),
        "{outcome:?}"
    );
    assert!(console.text().contains("840 EVO"), "{}", console.text());
    assert_eq!(event_types(&console), ["begin", "analysis", "verdict"]);
    assert_eq!(
        tools.asked.lock().unwrap().as_slice(),
        ["smartctl --json=c -x /dev/null"]
    );
    // The reading is appended to the drive's history, once per time stamp (beside the manifest that proves the
    // history file ssdlab's own).
    let files: Vec<PathBuf> = std::fs::read_dir(&history)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with(ssdlab_outputs::MANIFEST_NAME))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let lines = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
    assert_eq!(lines(&files[0]), 1);
    let mut again = RecordingConsole::default();
    health::run(&plan(), &mut Ports::new(&mut again, &tools, &clock, no_stop())).unwrap();
    assert_eq!(lines(&files[0]), 1, "the same snapshot is not recorded twice");
}

/// The NVMe drive's snapshot of a health run through canned tools, as its JSON Lines analysis record says it.
fn nvme_snapshot(tools: &CannedTools) -> serde_json::Value {
    let plan = health::Plan::new(
        vec!["/dev/null".into()],
        false,
        vec![],
        None,
        Given::of("all", None),
        RatingFlags::default(),
        None,
        None,
        "smartctl".into(),
        80.0,
    )
    .unwrap();
    let mut console = RecordingConsole::with_json();
    let clock = FixedClock::at(FIXTURE_NOW_S);
    health::run(&plan, &mut Ports::new(&mut console, tools, &clock, no_stop())).unwrap();
    let analysis = console
        .json
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "analysis")
        .unwrap();
    // The first (only) drive's snapshot, wherever the record nests it.
    fn find(v: &serde_json::Value) -> Option<serde_json::Value> {
        if v.get("nand_written_source").is_some() {
            return Some(v.clone());
        }
        match v {
            serde_json::Value::Object(o) => o.values().find_map(find),
            serde_json::Value::Array(a) => a.iter().find_map(find),
            _ => None,
        }
    }
    find(&analysis).expect("a drive's snapshot")
}

#[test]
fn an_nvme_drives_nand_writes_come_from_the_ocp_log_else_the_endurance_log_and_it_says_which() {
    // A real Samsung 970 EVO Plus (host writes 23.05 TB); the logs nvme-cli would print for it are constructed.
    let smartctl = health_fixture("real/nvme-samsung-970evoplus-250g.json");
    let base = || CannedTools::default().answer("smartctl --json=c -x /dev/null", 0, &smartctl);
    let ocp = base().answer(
        "nvme ocp smart-add-log /dev/null -o json",
        0,
        r#"{"Physical media units written": {"hi": 0, "lo": 40000000000000}}"#,
    );
    let s = nvme_snapshot(&ocp);
    assert_eq!(s["nand_written_bytes"], 40_000_000_000_000u64, "{s:#}");
    assert!(
        s["nand_written_source"]
            .as_str()
            .unwrap()
            .contains("OCP Datacenter SMART log (C0h)"),
        "{s:#}"
    );
    assert_eq!(
        ocp.asked.lock().unwrap().len(),
        2,
        "the endurance log is not read when the OCP log answers"
    );

    let endurance = base()
        .answer("nvme ocp smart-add-log /dev/null -o json", 1, "")
        .answer(
            "nvme endurance-log /dev/null --group-id=1 -o json",
            0,
            r#"{"data_units_written": 23052, "media_units_written": 35000}"#,
        );
    let s = nvme_snapshot(&endurance);
    assert_eq!(s["nand_written_bytes"], 35_000_000_000_000u64);
    assert!(
        s["nand_written_source"]
            .as_str()
            .unwrap()
            .contains("Endurance Group Information log (09h)")
    );

    // Neither log: the source says what each attempt said; a NAND figure below host writes is not trusted.
    let neither = base();
    let s = nvme_snapshot(&neither);
    assert!(s["nand_written_bytes"].is_null());
    let why = s["nand_written_source"].as_str().unwrap();
    assert!(
        why.contains("OCP log C0h: nvme-cli is not installed") && why.contains("Endurance Group log 09h"),
        "{why}"
    );
    let implausible = base().answer(
        "nvme ocp smart-add-log /dev/null -o json",
        0,
        r#"{"physical_media_units_written": {"hi": 0, "lo": 1000}}"#,
    );
    let s = nvme_snapshot(&implausible);
    assert!(s["nand_written_bytes"].is_null(), "{s:#}");
    assert!(s["notes"].to_string().contains("implausible"), "{s:#}");
}

#[test]
fn health_without_smartctl_names_the_package_to_install() {
    let plan = health::Plan::new(
        vec!["/dev/null".into()],
        false,
        vec![],
        None,
        Given::of("all", None),
        RatingFlags::default(),
        None,
        None,
        "smartctl".into(),
        80.0,
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    let e = health::run(
        &plan,
        &mut Ports::new(
            &mut console,
            &CannedTools::default(),
            &FixedClock::at(FIXTURE_NOW_S),
            no_stop(),
        ),
    )
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("apt-get install smartmontools"),
        "{e:#}"
    );
}

#[test]
fn health_scans_with_smartctl_and_reads_each_drive_with_its_type() {
    // smartctl 7.3's --scan-open --json=c, its drive renamed to a node anyone may name.
    let scan = r#"{"json_format_version":[1,0],"smartctl":{"version":[7,3],"argv":["smartctl","--scan-open","--json=c"],"exit_status":0},"devices":[{"name":"/dev/null","info_name":"/dev/null [SAT]","type":"sat","protocol":"ATA"}]}"#;
    let tools = CannedTools::default()
        .answer("smartctl --scan-open --json=c", 0, scan)
        .answer(
            "smartctl --json=c -x -d sat /dev/null",
            0,
            &health_fixture("ata-intel-dc.json"),
        );
    let plan = health::Plan::new(
        vec![],
        true,
        vec![],
        None,
        Given::of("all", None),
        RatingFlags::default(),
        None,
        None,
        "smartctl".into(),
        80.0,
    )
    .unwrap();
    let mut console = RecordingConsole::default();
    health::run(
        &plan,
        &mut Ports::new(&mut console, &tools, &FixedClock::at(FIXTURE_NOW_S), no_stop()),
    )
    .unwrap();
    assert_eq!(
        tools.asked.lock().unwrap().as_slice(),
        [
            "smartctl --scan-open --json=c",
            "smartctl --json=c -x -d sat /dev/null"
        ]
    );
    assert!(console.text().contains("INTEL"), "{}", console.text());
}

#[test]
fn health_plans_refuse_bad_ratings_and_windows() {
    let plan = |window: &str, rating: RatingFlags| {
        health::Plan::new(
            vec![],
            false,
            vec![],
            None,
            health::window_arg(window).unwrap(),
            rating,
            None,
            None,
            "smartctl".into(),
            80.0,
        )
    };
    assert!(health::window_arg("0s").is_err() && health::window_arg("30").is_err());
    let zero_pe = RatingFlags {
        pe_cycles: Some(0),
        ..Default::default()
    };
    assert!(
        plan("all", zero_pe)
            .unwrap_err()
            .to_string()
            .starts_with("--rated-pe")
    );
    let negative = RatingFlags {
        tbw_tb: Some(-1.0),
        ..Default::default()
    };
    assert!(
        plan("all", negative)
            .unwrap_err()
            .to_string()
            .starts_with("--rated-tbw")
    );
}

#[test]
fn op_on_a_virtual_drive_says_what_the_spare_area_buys_and_refuses_to_apply_it() {
    let plan = |set: Option<&str>, allow_destroy: bool| {
        op::Plan::new(
            TargetPlan {
                allow_destroy,
                ..TargetPlan::plain("sim:840evo-250g").unwrap()
            },
            set.map(|s| op::share_arg(s).unwrap()),
            None,
            64,
            1,
            None,
        )
    };
    let mut console = RecordingConsole::with_json();
    let outcome = op::run(
        &plan(Some("25%"), false).unwrap(),
        &mut Ports::system(&mut console),
    )
    .unwrap();
    assert_eq!(outcome, Outcome::Passed);
    let text = console.text();
    assert!(text.contains("built in") && text.contains("with it"), "{text}");
    assert!(text.contains("sim:840evo-250g?op="), "{text}");
    assert_eq!(event_types(&console), ["begin", "analysis", "verdict"]);
    let e = op::run(
        &plan(Some("25%"), true).unwrap(),
        &mut Ports::system(&mut RecordingConsole::default()),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("a parameter, not something to apply"),
        "{e}"
    );
    assert!(
        plan(None, true)
            .unwrap_err()
            .to_string()
            .starts_with("--allow-destroy")
    );
    assert!(op::share_arg("half").is_err() && op::share_arg("100%").is_err());
    let raw = op::Plan::new(
        TargetPlan::plain("sim:840evo-250g").unwrap(),
        None,
        Some(ssdlab_app::flags::given_size("256g").unwrap()),
        64,
        1,
        None,
    );
    assert!(raw.unwrap_err().to_string().starts_with("--raw-nand"));
    let file = op::Plan::new(
        TargetPlan::plain("file:/tmp/x:1m").unwrap(),
        None,
        None,
        64,
        1,
        None,
    );
    assert!(file.unwrap_err().to_string().contains("a property of a drive"));
}

#[test]
fn a_latency_test_on_a_virtual_drive_records_its_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("latency");
    let options = methodology::options::latency(methodology::options::LatencyFlags {
        rw: ssdlab_methods::latency::LatencyRw::RandRead,
        span_bytes: 64 << 20,
        runtime_ns: 2_000_000_000,
    })
    .unwrap();
    let plan = methodology::Plan::new(
        TargetPlan::plain(SMALL_SIM).unwrap(),
        1,
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
        methodology::MethodPlan::Latency(options),
    )
    .unwrap();
    let mut console = RecordingConsole::with_json();
    let outcome = methodology::run(plan, &mut Ports::system(&mut console)).unwrap();
    assert!(
        matches!(outcome, Outcome::Passed | Outcome::Failed),
        "{outcome:?}"
    );
    let types = event_types(&console);
    assert_eq!(types.first().map(String::as_str), Some("begin"));
    assert!(types.contains(&"analysis".to_string()) && types.contains(&"verdict".to_string()));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(record["kind"], "latency");
}

#[test]
fn a_scan_of_a_virtual_data_set_finds_the_old_files_slow() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scan");
    let plan = scan::Plan::new(scan::ScanFlags {
        paths: vec![],
        target: Some(ssdlab_app::flags::given_target("sim:840evo-250g?scale=1/64").unwrap()),
        device: None,
        regions: None,
        region_bytes: None,
        dataset: "0.5mo:4x8m,7mo:4x8m".into(),
        refresh_flagged: false,
        min_size: Given::of("64k", 64 << 10),
        reader: Some(scan::ReaderChoice::Cat),
        chunk: None,
        qd: None,
        random_reads: Some(0),
        slower_than: 0.5,
        out: Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
        prom: None,
        allow_atime: false,
        state_dir: None,
    })
    .unwrap();
    let mut console = RecordingConsole::with_json();
    let outcome = scan::run(&plan, &mut Ports::system(&mut console)).unwrap();
    // The tidy CSV beside the record: a header and a row per file.
    let csv = std::fs::read_to_string(out.join("files.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9, "{csv}");
    // Seven-month-old data on an 840 EVO reads several times slower: the scan fails its verdict, as it should.
    assert_eq!(outcome, Outcome::Failed, "{}", console.text());
    assert!(console.text().contains("8 files"), "{}", console.text());
}

#[test]
fn a_fanout_over_two_virtual_drives_finds_the_older_one_slower() {
    use ssdlab_app::fanout::{self, FanoutFlags, Mode};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fanout");
    let drive = |age: &str| {
        ssdlab_app::flags::given_target(&format!("sim:840evo-1t?scale=1/256&fill=100%&age={age}")).unwrap()
    };
    let plan = fanout::Plan::new(FanoutFlags {
        targets: vec![drive("1w"), drive("7mo")],
        fleet: None,
        age_by: None,
        refresh_all: false,
        shards: vec![25],
        hedge: Given::of("p95", 95.0),
        mode: Mode::Computed,
        runtime: Given::of("2s", 2_000_000_000),
        bs: Given::of("4k", 4096),
        seed: 1,
        out: Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
        prom: None,
        engine: ssdlab_io::Engine::Auto,
        from: vec![],
    })
    .unwrap();
    let mut console = RecordingConsole::with_json();
    fanout::run(&plan, &mut Ports::system(&mut console)).unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    let drives = record["analysis"]["drives"].as_array().unwrap();
    let p99 = |i: usize| drives[i]["latency_ns"]["p99"].as_u64().unwrap();
    assert!(
        p99(1) > 2 * p99(0),
        "7-month-old data reads slower: {} vs {}",
        p99(1),
        p99(0)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("drives.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    // The same drive twice is refused before anything opens.
    let twice = fanout::Plan::new(FanoutFlags {
        targets: vec![drive("1w"), drive("1w")],
        out: None,
        ..plan_flags_for_refusal()
    });
    assert!(twice.unwrap_err().to_string().contains("a drive given twice"));
}

fn plan_flags_for_refusal() -> ssdlab_app::fanout::FanoutFlags {
    ssdlab_app::fanout::FanoutFlags {
        targets: vec![],
        fleet: None,
        age_by: None,
        refresh_all: false,
        shards: vec![],
        hedge: Given::of("p95", 95.0),
        mode: ssdlab_app::fanout::Mode::Computed,
        runtime: Given::of("1s", 1_000_000_000),
        bs: Given::of("4k", 4096),
        seed: 1,
        out: None,
        prom: None,
        engine: ssdlab_io::Engine::Auto,
        from: vec![],
    }
}

#[test]
fn a_refresh_rewrites_files_in_place_and_a_dry_run_touches_nothing() {
    use ssdlab_app::refresh::{self, RefreshFlags};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let bytes: Vec<u8> = (0..3 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    // Written ten days ago: a file modified a moment ago is fresh, and refresh leaves it alone.
    let ten_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(10 * 86_400);
    for name in ["a", "b"] {
        std::fs::write(data.join(name), &bytes).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(data.join(name))
            .unwrap();
        file.set_modified(ten_days_ago).unwrap();
    }
    let state = dir.path().join("state");
    let flags = |dry_run: bool| RefreshFlags {
        paths: vec![data.clone()],
        chunk: Given::of("1m", 1 << 20),
        dry_run,
        state_dir: Some(state.clone()),
        ..RefreshFlags::default()
    };
    let mut console = RecordingConsole::default();
    let outcome = refresh::run(
        &refresh::Plan::new(flags(true)).unwrap(),
        &mut Ports::system(&mut console),
    )
    .unwrap();
    assert_eq!(outcome, Outcome::Passed, "{}", console.text());
    assert_eq!(
        console.said.iter().filter(|l| l.starts_with("would ")).count(),
        2,
        "{}",
        console.text()
    );
    assert!(!state.exists(), "a dry run takes no lock and writes no state");
    let mut console = RecordingConsole::with_json();
    let outcome = refresh::run(
        &refresh::Plan::new(flags(false)).unwrap(),
        &mut Ports::system(&mut console),
    )
    .unwrap();
    assert_eq!(outcome, Outcome::Passed, "{}", console.text());
    assert_eq!(
        console.said.iter().filter(|l| l.starts_with("done ")).count(),
        2,
        "{}",
        console.text()
    );
    for name in ["a", "b"] {
        assert!(
            std::fs::read(data.join(name)).unwrap() == bytes,
            "{name} holds the same bytes"
        );
    }
    assert_eq!(event_types(&console), ["begin", "analysis", "verdict"]);
    // The refresh log records the files, so their data counts as written now.
    assert!(state.join("refreshed.jsonl").exists());
}

#[test]
fn refresh_plans_refuse_bad_flags_before_anything_is_locked() {
    use ssdlab_app::refresh::{Plan, RefreshFlags};
    let dir = tempfile::tempdir().unwrap();
    let refused = |flags: RefreshFlags, flag: &str| {
        let e = Plan::new(flags).unwrap_err().to_string();
        assert!(e.starts_with(flag), "{flag}: {e}");
    };
    let base = || RefreshFlags {
        paths: vec![dir.path().to_path_buf()],
        chunk: Given::of("1m", 1 << 20),
        ..RefreshFlags::default()
    };
    refused(
        RefreshFlags {
            chunk: Given::of("100k", 100 << 10),
            ..base()
        },
        "--chunk",
    );
    // A rate in operations is refused by the value parser, before any plan.
    assert!(ssdlab_app::refresh::byte_rate_arg("5kiops").is_err());
    refused(
        RefreshFlags {
            slower_than: Some(1.5),
            ..base()
        },
        "--slower-than",
    );
    refused(
        RefreshFlags {
            paths: vec!["/proc/self".into()],
            ..base()
        },
        "PATH",
    );
    refused(
        RefreshFlags {
            paths: vec![dir.path().join("missing")],
            ..base()
        },
        "PATH",
    );
    refused(
        RefreshFlags {
            out: Some(ssdlab_app::export::OutDir::new(dir.path().join("out"), false)),
            ..base()
        },
        "--out",
    );
}

#[test]
fn sim_trace_and_report_print_their_output_through_the_console() {
    use ssdlab_app::{report, sim, trace};
    let mut console = RecordingConsole::default();
    sim::run(
        &sim::Plan::Profiles { json: true },
        &mut Ports::system(&mut console),
    )
    .unwrap();
    assert!(
        console.printed.iter().any(|l| l.contains("840evo-250g")),
        "{:?}",
        console.printed
    );
    let mut console = RecordingConsole::default();
    let plan = trace::Plan::new(
        ssdlab_trace::synth::Profile::Light,
        1,
        Given::of("2s", 2_000_000_000),
        None,
        None,
    )
    .unwrap();
    trace::run(&plan, &mut Ports::system(&mut console)).unwrap();
    assert!(
        console.printed[0].starts_with("fio version 3 iolog"),
        "{:?}",
        &console.printed[..1]
    );
    assert!(
        trace::Plan::new(
            ssdlab_trace::synth::Profile::Light,
            1,
            Given::of("2d", 2 * 86_400_000_000_000),
            None,
            None,
        )
        .is_err()
    );
    // A report of a run redrawn from its directory.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = RunPlan::new(
        TargetPlan::plain("null:1g").unwrap(),
        run_flags("randread", "1s"),
        Some(ssdlab_app::export::OutDir::new(out.clone(), false)),
    )
    .unwrap();
    ssdlab_app::run::run(&run, &mut Ports::system(&mut RecordingConsole::default())).unwrap();
    let page = dir.path().join("page.html");
    let plan = report::Plan {
        results: vec![out],
        out: page.clone(),
        label: vec![],
        baseline: None,
    };
    let mut console = RecordingConsole::default();
    report::run(&plan, &mut Ports::system(&mut console)).unwrap();
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
    assert!(console.text().contains("(1 result)"), "{}", console.text());
}
