//! `test replay` and `trace synth` in-process on virtual drives: an MSR trace folded onto a smaller drive, the
//! cache speeding a synthetic desktop trace (and the report's comparison of the two replays), a trace file never
//! overwritten, and malformed traces and flags named. Traces recorded by the real tools (fio, blktrace, blkparse),
//! loop devices, Ctrl-C and what goes to stdout stay with the binary's tests.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;
use ssdlab_app::flags::{self, Given};
use ssdlab_app::methodology::MethodPlan;
use ssdlab_app::methodology::options::{self, ReplayFlags};
use ssdlab_app::ports::Outcome;
use ssdlab_trace::synth::Profile;

/// `test replay` in-process on `target` with `flags`, into `out_dir`.
fn replay(target: &str, flags: ReplayFlags, out_dir: Option<&Path>) -> Ran {
    test_command(
        target,
        MethodPlan::Replay(options::replay(flags).unwrap()),
        out_dir,
    )
}

/// What `options::replay` refuses (reading the trace included), as the binary would say it.
fn replay_refusal(flags: ReplayFlags) -> String {
    format!("{:#}", options::replay(flags).map(|_| ()).unwrap_err())
}

/// `trace synth --profile PROFILE --duration DURATION [--out OUT]`'s plan.
fn synth(profile: Profile, duration: &str, out: Option<&Path>) -> anyhow::Result<ssdlab_app::trace::Plan> {
    ssdlab_app::trace::Plan::new(
        profile,
        1,
        flags::given_duration(duration).unwrap(),
        None::<Given<u64>>,
        out.map(Path::to_path_buf),
    )
}

#[test]
fn an_msr_trace_is_folded_onto_a_smaller_device_and_said() {
    let dir = tempdir();
    let csv = dir.path().join("hm_1.csv");
    // Three rows in the MSR Cambridge layout, the last past a 1/256-scale drive's end (about 470 MB).
    std::fs::write(
        &csv,
        "128166372003061629,hm,1,Read,3420143616,65536,1366\n\
         128166372016382155,hm,1,Write,4096,4096,1150\n\
         128166372016383598,hm,1,Write,3420213248,512,1006\n",
    )
    .unwrap();
    let out_dir = dir.path().join("msr");
    let ran = replay(
        "sim:840evo-120g?scale=1/256",
        replay_defaults(&csv),
        Some(&out_dir),
    );
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    let said = ran.text();
    assert!(said.contains("2 operation(s) were folded"), "{said}");
    assert!(
        said.contains("widened to whole 512-byte logical blocks") || said.contains("trace     msr"),
        "{said}"
    );
    let a = &read_result(&out_dir)["analysis"];
    assert_eq!(a["format"], "msr");
    assert_eq!(a["fit"]["remapped_ops"], 2);
    // Two disks in one file: the choice is asked for by its flag.
    std::fs::write(&csv, "1,hm,1,Read,0,4096,1\n2,hm,2,Read,0,4096,1\n").unwrap();
    assert_one_line_naming(&replay_refusal(replay_defaults(&csv)), "--disk");
}

#[test]
fn the_cache_speeds_a_synthetic_desktop_trace_in_the_storage_bench_table() {
    let dir = tempdir();
    let trace = dir.path().join("light.iolog");
    let plan = synth(Profile::Light, "20s", Some(&trace)).unwrap();
    let made = ran(|ports| ssdlab_app::trace::run(&plan, ports));
    assert_eq!(made.outcome, Outcome::Passed, "{}", made.text());
    let mut dirs = Vec::new();
    for (name, target) in [
        ("plain", "sim:840evo-250g?scale=1/16"),
        ("rapid", "cached:sim:840evo-250g?scale=1/16&size=256m"),
    ] {
        let out_dir = dir.path().join(name);
        let ran = replay(target, replay_defaults(&trace), Some(&out_dir));
        assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
        assert!(
            ran.text().contains("bench     average data rate"),
            "{}",
            ran.text()
        );
        dirs.push(out_dir);
    }
    let plain = read_result(&dirs[0]);
    let rapid = read_result(&dirs[1]);
    let figure = |r: &Value, k: &str| r["analysis"][k].as_f64().unwrap();
    assert_eq!(
        plain["analysis"]["replayed_ops"],
        rapid["analysis"]["replayed_ops"]
    );
    assert!(figure(&rapid, "average_service_time_ns") < figure(&plain, "average_service_time_ns"));
    assert!(
        figure(&rapid, "average_data_rate_bytes_per_s") > figure(&plain, "average_data_rate_bytes_per_s")
    );
    assert!(plain["analysis"]["fidelity"]["late_ns_max"].as_u64().is_some());
    let csv = std::fs::read_to_string(dirs[0].join("replay.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    // Side by side, the report adds RAPID's comparison row.
    let page = dir.path().join("both.html");
    let report = ssdlab_app::report::Plan {
        results: dirs.clone(),
        out: page.clone(),
        label: vec![],
        baseline: None,
    };
    let drawn = ran(|ports| ssdlab_app::report::run(&report, ports));
    assert_eq!(drawn.outcome, Outcome::Passed, "{}", drawn.text());
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        html.contains("avg service time") && html.contains(" vs "),
        "the comparison row"
    );
    // Each change is coloured by whether it is better (issue 49): the cache raised the data rate and shortened
    // the service time, both green.
    let changes = &html[html.find("The cache's effect").expect("the cache's table")..];
    let row = &changes[changes.find(" vs ").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    let cells: Vec<&str> = row.split("<td").skip(1).collect();
    assert!(
        cells[0].starts_with(" class=\"better\">+") && cells[1].starts_with(" class=\"better\">-"),
        "{row}"
    );
    // At the trace's own times both replays move the trace's data: one line, saying how far apart they are,
    // not two lines drawn exactly over each other (#33 point 14).
    assert!(
        html.contains("all 2 replays (the trace sets the pace"),
        "one line for the data moved"
    );
}

#[test]
fn trace_synth_never_overwrites_and_bad_input_is_named() {
    let dir = tempdir();
    let trace = dir.path().join("t.iolog");
    std::fs::write(&trace, "keep me").unwrap();
    let plan = synth(Profile::Heavy, "60s", Some(&trace)).unwrap();
    assert_one_line_naming(&refusal(|ports| ssdlab_app::trace::run(&plan, ports)), "--out");
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "keep me");
    assert_one_line_naming(
        &format!("{:#}", synth(Profile::Light, "0s", None).unwrap_err()),
        "--duration",
    );

    // Malformed traces: the line at fault, and nothing run.
    std::fs::write(
        &trace,
        "fio version 3 iolog\n1 /f read 0 4096\n2 /f read zero 4096\n",
    )
    .unwrap();
    assert_one_line_naming(&replay_refusal(replay_defaults(&trace)), "line 3");
    std::fs::write(&trace, "nothing I know\n").unwrap();
    assert_one_line_naming(&replay_refusal(replay_defaults(&trace)), "--format");
    let missing = dir.path().join("absent");
    assert_one_line_naming(&replay_refusal(replay_defaults(&missing)), "--trace");
    assert_one_line_naming(&replay_refusal(replay_defaults(dir.path())), "is a directory");
    // The trace is read line by line: a line that is not text is named by its number.
    std::fs::write(
        &trace,
        b"fio version 3 iolog\n1 /f read 0 4096\n2 /f read \xff\xfe 4096\n".as_slice(),
    )
    .unwrap();
    assert_one_line_naming(
        &replay_refusal(replay_defaults(&trace)),
        "line 3: cannot be read as text",
    );
    std::fs::write(&trace, "fio version 3 iolog\n1 /f read 0 4096\n").unwrap();
    assert_one_line_naming(
        &replay_refusal(ReplayFlags {
            time_scale: 0.0,
            ..replay_defaults(&trace)
        }),
        "--time-scale",
    );
    assert_one_line_naming(
        &replay_refusal(ReplayFlags {
            qd: 0,
            ..replay_defaults(&trace)
        }),
        "--qd",
    );
}
