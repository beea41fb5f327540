//! The DRAM cache as a target against what needs the binary or root: the safety gate through the cache on a
//! loop device, and what the target's parser refuses. Runs through the cache over files, null and the virtual
//! SSD are tested in-process in `crates/ssdlab-app/tests/cache_targets.rs`.

use crate::*;

/// What `--target`'s parser refuses in a cache's parameters, before any plan: each names the key and the fix.
#[test]
fn bad_cache_parameters_name_the_key_and_the_fix() {
    let out = run(&["run", "--target", "cached:null?mode=fast", "--runtime", "1s"]);
    expect_usage_error(&out, "mode=fast");
    assert!(stderr(&out).contains("writeback"), "{}", stderr(&out));
    let out = run(&["run", "--target", "cached:cached:null", "--runtime", "1s"]);
    expect_usage_error(&out, "one cached: prefix");
    let out = run(&[
        "run",
        "--target",
        "cached:null:1g?hot-map=relative/path",
        "--runtime",
        "1s",
    ]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("absolute"), "{}", stderr(&out));
}

#[test]
fn the_safety_gate_applies_through_the_cache() {
    let dev = LoopDevice::new(16 << 20);
    let target = format!("cached:{}", dev.path);
    let out = run(&["run", "--target", &target, "--rw", "randwrite", "--runtime", "1s"]);
    expect_usage_error(&out, "--allow-destroy");
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
    sh("mkfs.ext4", &["-q", "-F", &dev.path]);
    let _mounted = Mounted::new(&dev.path);
    let before = std::fs::read(&dev.image).unwrap();
    let out = run(&[
        "run",
        "--target",
        &target,
        "--rw",
        "randwrite",
        "--runtime",
        "1s",
        "--allow-destroy",
        "--force",
    ]);
    expect_usage_error(&out, "mounted");
    assert!(
        std::fs::read(&dev.image).unwrap() == before,
        "nothing was written"
    );
}
