//! `run` at the command line: what goes to stdout, Ctrl-C and a closed pipe as the binary meets them, and
//! discard on a loop device. What the engine counts on null and files is tested in-process, in
//! `crates/ssdlab-app/tests/engine_runs.rs`.

use crate::*;

#[test]
fn without_json_nothing_goes_to_stdout() {
    let dir = tempdir();
    let out_dir = dir.path().join("result");
    let out = run(&[
        "run",
        "--target",
        "null",
        "--runtime",
        "200ms",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(out_dir.join("result.json").is_file());
    assert!(out.stdout.is_empty(), "without --json nothing goes to stdout");
}

#[test]
fn interrupt_stops_cleanly_and_keeps_what_was_measured() {
    let dir = tempdir();
    let out_dir = dir.path().join("result");
    let mut child = ssdlab()
        .args([
            "run",
            "--target",
            "null",
            "--runtime",
            "60s",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first sample, then send SIGINT as Ctrl-C would.
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    for line in lines.by_ref() {
        if line.unwrap().contains("\"type\":\"sample\"") {
            break;
        }
    }
    sh("kill", &["-INT", &child.id().to_string()]);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let summary = rest
        .iter()
        .find(|l| l.contains("\"type\":\"summary\""))
        .expect("a summary after the interrupt");
    assert!(summary.contains("\"complete\":false"));
    let result: Value = serde_json::from_slice(&std::fs::read(out_dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["complete"], false);
    assert!(
        result["phases"][0]["summary"]["ios"].as_u64().unwrap() > 0,
        "what was measured is kept"
    );
    assert!(result["phases"][0]["samples"].as_array().unwrap().len() < 30);
}

#[test]
fn closed_stdout_pipe_exits_zero_promptly() {
    let mut child = ssdlab()
        .args(["run", "--target", "null", "--runtime", "30s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let started = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed().as_secs() < 10,
        "a closed pipe stops the run within about a second"
    );
}

#[test]
fn trim_on_a_loop_device_reaches_the_backing_file() {
    let dev = LoopDevice::new(64 << 20);
    expect_code(
        &run(&[
            "run",
            "--target",
            &dev.path,
            "--rw",
            "write",
            "--bs",
            "1m",
            "--passes",
            "1",
            "--allow-destroy",
        ]),
        0,
    );
    assert!(dev.image_blocks() >= 64 * 2048, "writes reached the image");
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "trim",
        "--bs",
        "4m",
        "--passes",
        "1",
        "--allow-destroy",
        "--json",
    ]);
    expect_code(&out, 0);
    let events = json_lines(&out);
    assert_eq!(
        event(&events, "begin")["data"]["target"]["discard_supported"],
        true
    );
    assert!(
        dev.image_blocks() < 1024,
        "BLKDISCARD punched the image ({} blocks left)",
        dev.image_blocks()
    );
}

/// Reads of space never written return zeroes from the file system or the drive's controller without reaching
/// the medium: a read run over it is not trustworthy, and says why; once written, the same run passes. A mixed run
/// says it in a note, since its own writes fill the span as it goes (issue 49: "say only what was measured").
#[test]
fn reads_of_space_never_written_are_not_trusted() {
    let dir = tempdir();
    let target = file_target(&dir.path().join("t.bin"), Some("16m"));
    let write_one_mib = run(&["run", "--target", &target, "--rw", "write", "--bytes", "1m"]);
    expect_code(&write_one_mib, 0);
    assert!(
        stderr(&write_one_mib).contains("note      kept "),
        "{}",
        stderr(&write_one_mib)
    );
    // A sparse file with its first MiB written: its holes read as holes on any file system with SEEK_DATA
    // (preallocated space is a hole only where the file system keeps it unwritten, which tmpfs does not).
    let sparse = dir.path().join("s.bin");
    let file = std::fs::File::create(&sparse).unwrap();
    file.set_len(16 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &vec![0x5a; 1 << 20], 0).unwrap();
    drop(file);
    let target = file_target(&sparse, None);
    let read = |rw: &str| {
        run(&[
            "run",
            "--target",
            &target,
            "--rw",
            rw,
            "--runtime",
            "300ms",
            "--json",
        ])
    };
    let out = read("randread");
    expect_code(&out, 1);
    let events = json_lines(&out);
    let verdict = &event(&events, "verdict")["data"];
    assert_eq!(verdict["passed"], false, "{verdict}");
    let reason = verdict["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("not trustworthy: about 9") && reason.contains("never been written"),
        "{reason}"
    );
    // A randrw that only reads is a read run.
    let all_reads = run(&[
        "run",
        "--target",
        &target,
        "--rw",
        "randrw",
        "--mix",
        "100",
        "--runtime",
        "300ms",
    ]);
    expect_code(&all_reads, 1);
    let mixed = read("randrw");
    expect_code(&mixed, 0);
    assert!(
        stderr(&mixed).contains("until this run's writes reach it"),
        "{}",
        stderr(&mixed)
    );
    // Written through, the same reads measure the medium.
    expect_code(&run(&["run", "--target", &target, "--rw", "write"]), 0);
    expect_code(&read("randread"), 0);
    // A virtual drive's unmapped blocks are the same: fresh, not trusted; filled, trusted.
    let sim = |spec: &str| run(&["run", "--target", spec, "--rw", "randread", "--runtime", "1s"]);
    expect_code(&sim("sim:840evo-120g?scale=1/256"), 1);
    expect_code(&sim("sim:840evo-120g?scale=1/256&fill=100%"), 0);
}
