//! Scan and refresh against what needs the binary or root: promtool reading the metrics, a loop device read
//! only, another file system mounted inside the tree, a reader racing a refresh, and what the flags' parsers
//! refuse. The virtual data sets, real temp files and the plan's refusals are tested in-process in
//! `crates/ssdlab-app/tests/scans.rs`.

use crate::*;

/// The metrics of a file scan of the virtual field report (stale data found, exit 1) and of a region scan of a
/// virtual drive aged in its first quarter (slow regions found, exit 1), as promtool reads them.
#[test]
fn scan_metrics_pass_promtool() {
    let dir = tempdir();
    let prom = dir.path().join("scan.prom");
    let out = run(&[
        "scan",
        "--target",
        "sim:840evo-1t?scale=1/64",
        "--refresh-flagged",
        "--prom",
        prom.to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    let text = promtool_checked(&prom);
    assert!(text.contains("ssdlab_scan_flagged_files{device="), "{text}");
    let prom = dir.path().join("regions.prom");
    let out = run(&[
        "scan",
        "--device",
        "sim:840evo-250g?scale=1/64&fill=25%&age=7mo",
        "--regions",
        "32",
        "--region-bytes",
        "8m",
        "--prom",
        prom.to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    let text = promtool_checked(&prom);
    assert!(text.contains("ssdlab_region_scan_slow_regions{device="), "{text}");
}

#[test]
fn region_scan_of_a_loop_device_reads_only() {
    // Read-only: a block device needs no --allow-destroy.
    let dev = LoopDevice::new(16 << 20);
    // The verdict on a real device depends on timing (a busy CI machine can read one region at half the
    // median twice), so only "ran, was not refused" is asserted: 0 or 1, never 2.
    let out = run(&["scan", "--device", &dev.path, "--regions", "4"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
}

/// What `--slower-than`'s value parser refuses, before any plan: a fraction above 1.
#[test]
fn scan_refuses_a_slower_than_its_parser_cannot_read() {
    let dir = tempdir();
    expect_usage_error(
        &run(&["scan", dir.path().to_str().unwrap(), "--slower-than", "2"]),
        "--slower-than",
    );
}

#[test]
fn refresh_and_scan_stay_on_the_file_system_they_were_given() {
    // Another file system mounted inside the tree is passed over, with the reason.
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("mnt")).unwrap();
    write_random(&tree.join("here.bin"), 200_000, 1);
    let dev = LoopDevice::new(32 << 20);
    sh("mkfs.ext4", &["-q", "-F", &dev.path]);
    sh("mount", &[&dev.path, tree.join("mnt").to_str().unwrap()]);
    let _unmount = Unmount(tree.join("mnt"));
    write_random(&tree.join("mnt/there.bin"), 200_000, 2);
    let state = dir.path().join("state");
    let out = run(&[
        "refresh",
        tree.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    // Passing over what the walk may not enter is not a failure of the refresh.
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("mnt") && l.contains("another file system")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("done") && l.contains("here.bin")),
        "{text}"
    );
    assert!(
        !text.contains("there.bin"),
        "nothing on the other file system is touched: {text}"
    );
    let out = run(&[
        "scan",
        tree.to_str().unwrap(),
        "--json",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    let events = json_lines(&out);
    let files = event(&events, "analysis")["data"]["files"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(files.len(), 1);
    assert!(files[0]["name"].as_str().unwrap().ends_with("here.bin"));
}

#[test]
fn a_reader_during_refresh_is_served_and_the_times_end_as_they_were() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = dir.path().join("read-me.bin");
    write_random(&path, 32 << 20, 21);
    sh("touch", &["-d", "2021-06-07 08:09:10.5", path.to_str().unwrap()]);
    let before = facts(&path);
    let child = slow_refresh(&path, &state);
    std::thread::sleep(std::time::Duration::from_millis(700));
    // A reader opens the file mid-refresh: it gets in (refresh holds a lease only for one chunk, and gives way to
    // it), reads the same bytes, and refresh carries on after it.
    for _ in 0..5 {
        let reader = Command::new("cmp")
            .args(["-s", path.to_str().unwrap(), path.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(reader.success());
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("done"), "{text}");
    let after = facts(&path);
    assert_eq!(after.content_hash, before.content_hash);
    assert_eq!(after.mtime, before.mtime, "the modification time is restored");
}
