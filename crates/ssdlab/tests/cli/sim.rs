//! The virtual SSD at the command line: what `--target sim:...` refuses, and listings that end quietly when
//! their reader goes away. What the virtual drive measures is tested in-process, in
//! `crates/ssdlab-app/tests/virtual_ssd.rs`.

use crate::*;

#[test]
fn sim_targets_are_validated() {
    for (target, says) in [
        ("sim:850pro", "840evo-250g"),
        ("sim:840evo-250g?scale=0", "scale"),
        ("sim:840evo-250g?colour=red", "unknown key"),
    ] {
        let out = run(&["run", "--target", target]);
        expect_usage_error(&out, says);
        assert!(stderr(&out).contains("--target"));
    }
    let out = run(&[
        "run",
        "--target",
        "sim:840evo-120g?scale=1/64",
        "--rw",
        "write",
        "--verify",
    ]);
    expect_usage_error(&out, "--verify");
    // A reader that went away (`| head`) ends the listing quietly: exit 0, no panic. Its end of the pipe is
    // closed before ssdlab starts, so the first write fails with EPIPE every time.
    for args in [
        &["sim", "profiles"][..],
        &["sim", "profiles", "--json"],
        &["devices"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = ssdlab().args(args).stdout(writer).output().unwrap();
        expect_code(&out, 0);
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
}
