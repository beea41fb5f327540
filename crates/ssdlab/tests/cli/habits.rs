//! The habits engineers bring from other tools: shell completions, man pages, and fio's option names.

use std::process::Command;

use crate::*;

#[test]
fn completions_and_man_pages_come_from_the_definitions() {
    let bash = run(&["completions", "bash"]);
    expect_code(&bash, 0);
    let script = String::from_utf8(bash.stdout).unwrap();
    assert!(script.contains("fanout") && script.contains("--refresh-all"));
    // The script is valid bash.
    let dir = tempdir();
    let path = dir.path().join("ssdlab.bash");
    std::fs::write(&path, &script).unwrap();
    let checked = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let zsh = String::from_utf8(run(&["completions", "zsh"]).stdout).unwrap();
    assert!(
        zsh.starts_with("#compdef ssdlab"),
        "{}",
        &zsh[..40.min(zsh.len())]
    );
    let tcsh = run(&["completions", "tcsh"]);
    expect_code(&tcsh, 2);
    assert!(stderr(&tcsh).contains("possible values: bash"));

    let page = run(&["man"]);
    expect_code(&page, 0);
    assert!(String::from_utf8(page.stdout).unwrap().starts_with(".ie"));
    let out = dir.path().join("man");
    expect_code(&run(&["man", "--out", out.to_str().unwrap()]), 0);
    for name in [
        "ssdlab",
        "ssdlab-fanout",
        "ssdlab-test-consistency",
        "ssdlab-sim-wa",
    ] {
        let text = std::fs::read_to_string(out.join(format!("{name}.1"))).unwrap();
        assert!(text.contains(".TH"), "{name}.1");
    }
    let fanout = std::fs::read_to_string(out.join("ssdlab-fanout.1")).unwrap();
    assert!(fanout.contains("hedge"), "every flag is documented");
}

#[test]
fn fio_option_names_work_or_say_what_to_write() {
    // Same meaning: accepted as they are.
    let out = run(&[
        "run",
        "--target",
        "null:64m",
        "--iodepth",
        "2",
        "--blocksize",
        "8k",
        "--readwrite",
        "randread",
        "--ioengine",
        "psync",
        "--numjobs",
        "2",
        "--runtime",
        "200ms",
        "--json",
    ]);
    expect_code(&out, 0);
    let begin = event(&json_lines(&out), "begin")["data"].clone();
    let options = &begin["options"];
    assert_eq!(options["workload"]["queue_depth"], 2, "{options}");
    assert_eq!(options["workload"]["block_bytes"], 8192, "{options}");
    assert_eq!(options["engine"], "psync", "{options}");
    assert_eq!(options["jobs"], 2, "{options}");
    // Another meaning or no need: a hint with ssdlab's spelling, exit 2.
    for (fio, ours) in [
        ("--filename=/dev/sdb", "--target"),
        ("--size", "--span"),
        ("--output-format=json", "--json"),
    ] {
        let out = run(&["run", "--target", "null", fio, "4"]);
        expect_code(&out, 2);
        let text = stderr(&out);
        assert!(
            text.contains("fio's option") && text.contains(ours),
            "{fio}: {text}"
        );
    }
    // #33 point 11: fio's spellings on every command that has the option, or the equivalent named.
    let out = run(&[
        "test",
        "sweep",
        "--target",
        "null:64m",
        "--iodepth",
        "2",
        "--test-size",
        "16m",
        "--to",
        "1m",
        "--json",
    ]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let pts = run(&["test", "pts", "--target", "null:64m", "--iodepth", "0"]);
    assert!(
        stderr(&pts).contains("--qd 0"),
        "--iodepth is --qd on test pts too: {}",
        stderr(&pts)
    );
    let engine = run(&[
        "run",
        "--target",
        "null:64m",
        "--ioengine",
        "libaio",
        "--runtime",
        "100ms",
        "--json",
    ]);
    expect_code(&engine, 0);
    assert_eq!(
        event(&json_lines(&engine), "begin")["data"]["options"]["engine"],
        "iouring"
    );
    assert!(
        stderr(&engine).contains("note      --ioengine libaio: ssdlab has no libaio engine"),
        "{}",
        stderr(&engine)
    );
    // Issue 49's fio habits, end to end: a bare number of seconds, --time_based and --group_reporting, --offset,
    // --randrepeat 0 and --io_size run as fio means them, each said in a note.
    let fio_like = run(&[
        "run",
        "--target",
        "null:64m",
        "--runtime=1",
        "--time_based",
        "--group_reporting",
        "--offset",
        "16m",
        "--randrepeat=0",
        "--io_size=8m",
        "--json",
    ]);
    expect_code(&fio_like, 0);
    let said = stderr(&fio_like);
    for note in [
        "note      --runtime 1: a bare number is seconds, as fio reads it (1s)",
        "note      --time_based ignored",
        "note      --group_reporting ignored",
        "note      --offset 16m is --span 16m: (from 16m to the end)",
        "note      --randrepeat 0: a new pattern this run, --seed ",
    ] {
        assert!(said.contains(note), "{note}: {said}");
    }
    let workload = event(&json_lines(&fio_like), "begin")["data"]["options"]["workload"].clone();
    assert_eq!(workload["span"]["offset_bytes"], 16 << 20, "{workload}");
    assert_eq!(workload["span"]["len_bytes"], 48 << 20, "{workload}");
    assert_eq!(workload["stop"]["runtime_ns"], 1_000_000_000u64, "{workload}");
    assert_eq!(
        workload["stop"]["bytes"],
        8 << 20,
        "--io_size is --bytes: {workload}"
    );
    assert_ne!(workload["seed"], 1, "--randrepeat 0 draws a seed: {workload}");
    // --rate 200MB keeps fio's binary meaning and says both figures, as fio prints them.
    let rated = run(&[
        "run",
        "--target",
        "null:64m",
        "--rate",
        "200MB",
        "--runtime",
        "100ms",
    ]);
    expect_code(&rated, 0);
    assert!(
        stderr(&rated).contains("rate 200 MiB/s (210 MB/s)"),
        "{}",
        stderr(&rated)
    );
    // --offset beside --span names both; --randrepeat takes fio's 0 or 1.
    expect_usage_error(
        &run(&["run", "--target", "null", "--offset", "1m", "--span", "50%"]),
        "--offset 1m and --span both name the region",
    );
    expect_usage_error(
        &run(&["run", "--target", "null", "--randrepeat=maybe"]),
        "--randrepeat maybe: write 0 or 1",
    );
    expect_usage_error(&run(&["run", "--target", "null", "--rw", "rw"]), "--rw randrw");
}

#[test]
fn devices_lists_what_the_safety_gate_would_find() {
    let (blank, formatted) = (LoopDevice::new(32 << 20), LoopDevice::new(32 << 20));
    sh("mkfs.ext4", &["-q", &formatted.path]);
    let out = run(&["devices", "--json"]);
    expect_code(&out, 0);
    let listed = json_lines(&out);
    let find = |path: &str| {
        listed
            .iter()
            .find(|d| d["device"] == path)
            .unwrap_or_else(|| panic!("{path} not listed: {listed:?}"))
            .clone()
    };
    let b = find(&blank.path);
    assert_eq!(b["size_bytes"], 32 << 20);
    assert_eq!(
        (b["in_use"].as_bool(), b["findings"].as_array().map(Vec::len)),
        (Some(false), Some(0))
    );
    let f = find(&formatted.path);
    let findings = f["findings"].to_string();
    assert!(findings.contains("a file system: ext4 (at byte 1080)"), "{f}");
    // The table says the same.
    let table = String::from_utf8(run(&["devices"]).stdout).unwrap();
    let line = table.lines().find(|l| l.starts_with(&formatted.path)).unwrap();
    assert!(line.contains("holds data") && line.contains("ext4"), "{line}");
    let line = table.lines().find(|l| l.starts_with(&blank.path)).unwrap();
    assert!(line.contains("free"), "{line}");
}

#[test]
fn percentages_are_written_either_way() {
    // --op 25% as the reviewers write it, --slower-than 50% for half as fast, --mix 70%.
    let sim = "sim:840evo-250g?scale=1/256";
    let a = run(&[
        "test",
        "consistency",
        "--target",
        sim,
        "--op",
        "25%",
        "--runtime",
        "5s",
        "--json",
    ]);
    let b = run(&[
        "test",
        "consistency",
        "--target",
        sim,
        "--op",
        "25",
        "--runtime",
        "5s",
        "--json",
    ]);
    let options = |out: &std::process::Output| event(&json_lines(out), "begin")["data"]["options"].clone();
    assert_eq!(options(&a), options(&b));
    let scan = |fraction: &str| {
        let out = run(&[
            "scan",
            "--target",
            "sim:840evo-1t?scale=1/256",
            "--dataset",
            "0.5mo:2x8m,7mo:2x8m",
            "--random-reads",
            "0",
            "--slower-than",
            fraction,
            "--json",
        ]);
        event(&json_lines(&out), "analysis")["data"]["slower_than_ratio"].clone()
    };
    assert_eq!(scan("50%"), scan("0.5"));
    let mixed = run(&[
        "run",
        "--target",
        "null:16m",
        "--rw",
        "randrw",
        "--mix",
        "70%",
        "--runtime",
        "100ms",
        "--json",
    ]);
    expect_code(&mixed, 0);
    for bad in [["--op", "2.5%"], ["--op", "lots"]] {
        let out = run(&["test", "consistency", "--target", sim, bad[0], bad[1]]);
        expect_code(&out, 2);
        assert!(stderr(&out).contains("--op"), "{}", stderr(&out));
    }
}

#[test]
fn quiet_leaves_only_errors_on_stderr() {
    let out = run(&[
        "--quiet",
        "run",
        "--target",
        "null:16m",
        "--runtime",
        "100ms",
        "--json",
    ]);
    expect_code(&out, 0);
    assert_eq!(stderr(&out), "", "nothing but errors");
    assert!(!json_lines(&out).is_empty(), "--json still streams");
    let out = run(&["run", "-q", "--target", "null:16m", "--runtime", "1x"]);
    expect_usage_error(&out, "--runtime");
}

#[test]
fn every_result_kind_matches_the_published_schema() {
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/result.schema.json");
    let dir = tempdir();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let sim = "sim:840evo-1t?scale=1/1024&fill=100%&age=4mo";
    for args in [
        vec![
            "run",
            "--target",
            "null:16m",
            "--runtime",
            "200ms",
            "--out",
            &out("run"),
        ],
        vec![
            "test",
            "latency",
            "--target",
            "sim:840evo-250g?scale=1/256",
            "--runtime",
            "2s",
            "--out",
            &out("latency"),
        ],
        vec![
            "scan",
            "--target",
            "sim:840evo-1t?scale=1/256",
            "--dataset",
            "0.5mo:2x4m,7mo:2x4m",
            "--refresh-flagged",
            "--out",
            &out("scan"),
        ],
        vec![
            "scan",
            "--device",
            sim,
            "--regions",
            "4",
            "--region-bytes",
            "1m",
            "--out",
            &out("region-scan"),
        ],
        vec![
            "fanout",
            "--target",
            sim,
            "--target",
            "sim:840evo-1t?scale=1/1024&fill=100%&seed=2",
            "--runtime",
            "1s",
            "--mode",
            "measured",
            "--out",
            &out("fanout"),
        ],
    ] {
        let result = run(&args);
        assert!(
            matches!(result.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&result)
        );
    }
    let mut files: Vec<std::path::PathBuf> = ["run", "latency", "scan", "region-scan", "fanout"]
        .iter()
        .map(|kind| dir.path().join(kind).join("result.json"))
        .collect();
    // And every kind an earlier ssdlab wrote (the reader's fixtures, older forms included), as a reader sees
    // it: read through the migration to this version, then checked.
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ssdlab-core/tests/fixtures/ssdlab1");
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let result = ssdlab_core::schema::RunResult::from_json(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(result.schema, ssdlab_core::schema::SCHEMA);
            let migrated = dir.path().join(format!(
                "migrated-{}",
                path.file_name().unwrap().to_string_lossy()
            ));
            std::fs::write(&migrated, serde_json::to_string(&result).unwrap()).unwrap();
            files.push(migrated);
        }
    }
    let errors = schema_errors(&schema, &files);
    assert!(errors.is_empty(), "{errors}");
    // The check itself catches a result that breaks the schema.
    let broken = dir.path().join("broken.json");
    let mut result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("fanout/result.json")).unwrap()).unwrap();
    result["analysis"]["query"]["shards"] = serde_json::json!("twenty-five");
    std::fs::write(&broken, result.to_string()).unwrap();
    assert!(schema_errors(&schema, &[broken]).contains("shards"));
}

#[test]
fn a_scan_lists_the_slowest_flagged_files_and_counts_the_rest() {
    let out = run(&[
        "scan",
        "--target",
        "sim:840evo-1t?scale=1/256",
        "--random-reads",
        "0",
    ]);
    expect_code(&out, 1);
    let text = stderr(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("FLAGGED")).count(),
        10,
        "{text}"
    );
    let total = text
        .lines()
        .find(|l| l.starts_with("flagged"))
        .expect("a total line");
    assert!(total.contains("36 files") && total.contains("GiB"), "{total}");
}

#[test]
fn ctrl_c_ends_a_command_that_does_not_watch_for_it_at_once() {
    // `sim wa` has no stop to poll: its SIGINT handler must not be installed (a handler nothing reads would swallow
    // the first Ctrl-C and let the command run to its end).
    use std::os::unix::process::ExitStatusExt;
    let mut child = ssdlab()
        .args([
            "sim",
            "wa",
            "--op",
            "25",
            "--logical-units",
            "16777216",
            "--measure",
            "200",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(2), "ended by SIGINT itself: {status:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// #33 point 8: every table a command prints on stderr fits an 80-column terminal. A table row is a line with
/// at least three gaps of two spaces after its label column; prose lines (notes, verdicts) wrap as prose does.
#[test]
fn stderr_tables_fit_80_columns() {
    let sim = "sim:840evo-250g?scale=1/256";
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "run",
            "--target",
            "null:64m",
            "--rw",
            "randrw",
            "--runtime",
            "200ms",
        ],
        vec![
            "run",
            "--target",
            "null:64m",
            "--rate",
            "20kiops",
            "--runtime",
            "200ms",
        ],
        vec!["test", "trim", "--target", sim],
        vec![
            "test",
            "pts",
            "--target",
            sim,
            "--test",
            "latency",
            "--round-time",
            "100ms",
            "--max-rounds",
            "5",
        ],
        vec![
            "test",
            "pts",
            "--target",
            sim,
            "--round-time",
            "100ms",
            "--max-rounds",
            "5",
        ],
        vec![
            "scan",
            "--target",
            "sim:840evo-1t?scale=1/256",
            "--random-reads",
            "20",
        ],
        vec!["fanout", "--fleet", "field-report", "--runtime", "5s"],
        vec![
            "quick",
            "--target",
            sim,
            "--runtime",
            "200ms",
            "--repeats",
            "2",
            "--size",
            "64m",
        ],
    ];
    for argv in commands {
        let out = run(&argv);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{argv:?}: {}",
            stderr(&out)
        );
        for line in stderr(&out).lines() {
            let body = line.get(10..).unwrap_or("");
            let table_row = body.matches("  ").count() >= 3;
            assert!(
                !table_row || line.chars().count() <= 80,
                "{argv:?}: a table row of {} columns:\n{line}",
                line.chars().count()
            );
        }
    }
}

/// On a terminal 60 columns wide (a real pseudo-terminal, through util-linux's `script`), a sentence longer than
/// a table is broken at the width under its label, a figure keeps its unit, table rows are left as laid out, and
/// the progress line is cleared with an erase sequence, never padded with spaces to the width. Into a pipe the
/// same sentence stays whole (issue 49).
#[test]
fn on_a_terminal_sentences_wrap_at_its_width_and_in_a_pipe_they_stay_whole() {
    let dir = tempdir();
    let log = dir.path().join("pty.log");
    let command = format!(
        "stty cols 60 rows 24; {} run --target null --rw randrw --runtime 2s 2>&1",
        env!("CARGO_BIN_EXE_ssdlab")
    );
    let ran = Command::new("script")
        .args(["-qfec", &command])
        .arg(&log)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux's script runs");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let session = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = session
        .split(['\n', '\r'])
        .filter(|l| !l.is_empty() && !l.starts_with("Script ") && !l.contains('\u{1b}'))
        .collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("ssdlab    run randrw"))
        .unwrap_or_else(|| panic!("{session}"));
    assert!(
        lines[header].chars().count() <= 60 && lines[header + 1].starts_with("          "),
        "{session}"
    );
    let table_row = lines.iter().find(|l| l.starts_with("total ")).unwrap();
    assert!(
        table_row.chars().count() > 60,
        "a table row is not broken: {session}"
    );
    for l in &lines {
        assert!(
            !l.starts_with("          ") || !l.trim_start().starts_with("TiB"),
            "{session}"
        );
        assert!(!l.ends_with("     "), "a line padded with spaces: {l:?}");
    }
    // The progress line was drawn and cleared by erasing, within the width.
    assert!(
        session.contains("\u{1b}[K") && session.contains("% ETA"),
        "{session}"
    );
    for drawn in session.split("\u{1b}[2K").filter(|d| d.contains("% ETA")) {
        let shown = drawn.split('\u{1b}').next().unwrap().trim_end_matches('\r');
        assert!(shown.chars().count() <= 60, "{shown:?}");
    }
    // Into a pipe: the same sentence whole.
    let piped = run(&["run", "--target", "null", "--rw", "randrw", "--runtime", "1s"]);
    expect_code(&piped, 0);
    let text = stderr(&piped);
    let whole = text
        .lines()
        .find(|l| l.starts_with("ssdlab    run randrw"))
        .unwrap();
    assert!(whole.chars().count() > 60 && whole.contains("seed 1"), "{text}");
}
