//! Bad input: one line naming the flag, exit code 2, nothing written.

use crate::*;

#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--target", "null", "--bs", "1x"], "--bs"),
        (&["--target", "null", "--bs", "1000"], "--bs"),
        (&["--target", "null", "--bs", "128m"], "--bs"),
        (&["--target", "null", "--qd", "0"], "--qd"),
        (&["--target", "null", "--qd", "4096"], "--qd"),
        (&["--target", "null:1g", "--span", "0:2g"], "--span"),
        (&["--target", "null", "--span", "150%"], "--span"),
        (&["--target", "null", "--runtime", "5 fortnights"], "--runtime"),
        (&["--target", "null", "--rate", "0"], "--rate"),
        (&["--target", "null", "--rw", "scribble"], "--rw"),
        (&["--target", "null", "--mix", "101"], "--mix"),
        (&["--target", "null", "--passes", "0"], "--passes"),
        (&["--target", "sda"], "--target"),
        (&["--target", "null:0"], "--target"),
    ];
    for (args, flag) in cases {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        let out = run(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(flag),
            "{args:?} should name {flag}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn bad_file_targets_are_explained_and_left_alone() {
    let dir = tempdir();
    let missing = dir.path().join("missing.img");
    let out = run(&["run", "--target", &file_target(&missing, None), "--rw", "write"]);
    expect_usage_error(&out, "does not exist");
    assert!(stderr(&out).contains(":1g"), "suggests giving a size");
    assert!(!missing.exists(), "nothing was created");

    let out = run(&["run", "--target", &file_target(dir.path(), None)]);
    expect_usage_error(&out, "is a directory");

    // Refused after opening (the block size is checked against the device): the file made for it is removed,
    // and an existing file that was extended for it is cut back.
    let fresh = dir.path().join("fresh.img");
    let out = run(&[
        "run",
        "--target",
        &file_target(&fresh, Some("8m")),
        "--rw",
        "write",
        "--bs",
        "1000",
    ]);
    expect_usage_error(&out, "--bs");
    assert!(!fresh.exists(), "the file created for a refused run is removed");
    // A run that only reads never creates a file.
    let out = run(&["run", "--target", &file_target(&fresh, Some("8m"))]);
    expect_usage_error(&out, "never creates a file");
    assert!(!fresh.exists());

    let small = dir.path().join("small.img");
    std::fs::write(&small, vec![7u8; 1 << 20]).unwrap();
    let out = run(&[
        "run",
        "--target",
        &file_target(&small, None),
        "--rw",
        "write",
        "--bs",
        "2m",
        "--runtime",
        "1s",
    ]);
    expect_usage_error(&out, "--span");
    assert_eq!(
        std::fs::read(&small).unwrap(),
        vec![7u8; 1 << 20],
        "nothing was written"
    );
}

#[test]
fn a_block_size_that_is_not_a_multiple_of_the_logical_block_is_refused() {
    let dev = LoopDevice::new(16 << 20);
    expect_code(
        &run(&[
            "run", "--target", &dev.path, "--bs", "1536", "--rw", "randread", "--passes", "1",
        ]),
        0,
    );
    let dev = LoopDevice::with_sector_size(16 << 20, 4096);
    let out = run(&["run", "--target", &dev.path, "--bs", "1536", "--rw", "randread"]);
    expect_usage_error(&out, "--bs 1536");
    assert!(
        stderr(&out).contains("4096"),
        "names the logical block size: {}",
        stderr(&out)
    );
}

/// #14 defect 5: input checked before the run, in one line.
#[test]
fn flags_are_checked_before_anything_runs() {
    let started = std::time::Instant::now();
    let out = run(&[
        "test",
        "latency",
        "--target",
        "null:64m",
        "--runtime",
        "30s",
        "--out",
        "/proc/ssdlab-x",
    ]);
    expect_usage_error(&out, "--out");
    assert!(started.elapsed().as_secs() < 10, "refused before the 30 s run");
    expect_usage_error(&run(&["run", "--target", "null", "--bs", "-4k"]), "--bs");
    let out = run(&[
        "test",
        "latency",
        "--target",
        "null:64m",
        "--runtime",
        "1s",
        "--span",
        "10t",
        "--json",
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("larger than"),
        "the clamp is said: {}",
        stderr(&out)
    );
}

#[test]
fn an_open_failure_names_the_flag_given_and_its_cause_once() {
    for (args, flag) in [
        (
            &["scan", "--device", "/dev/ssdlab-no-such-device"][..],
            "--device /dev/ssdlab-no-such-device",
        ),
        (
            &[
                "run",
                "--target",
                "file:/ssdlab-no-such-dir/x:1m",
                "--rw",
                "write",
                "--runtime",
                "1s",
            ][..],
            "--target file:/ssdlab-no-such-dir/x:1m",
        ),
    ] {
        let out = run(args);
        expect_code(&out, 2);
        let err = stderr(&out);
        assert!(err.contains(flag), "{err}");
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "the cause once: {err}"
        );
    }
}
