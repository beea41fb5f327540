//! `ssdlab erase` on loop devices: every refusal leaves the data as it was; auto purges with the best method the
//! device offers and the whole device then reads zero.

use crate::*;

/// Fills the device with a non-zero pattern through the page cache-free path.
fn fill(disk: &LoopDevice) {
    sh(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", disk.path),
            "bs=1M",
            "count=16",
            "oflag=direct",
            "status=none",
        ],
    );
}

fn all_zero(disk: &LoopDevice) -> bool {
    let data = std::fs::read(&disk.path).unwrap();
    data.iter().all(|&b| b == 0)
}

fn head(disk: &LoopDevice) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 20];
    std::fs::File::open(&disk.path)
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    buf
}

#[test]
fn refusals_leave_every_byte_in_place() {
    let disk = LoopDevice::new(16 << 20);
    fill(&disk);
    let before = head(&disk);
    expect_usage_error(&run(&["erase", "--target", &disk.path]), "--allow-destroy");
    // The firmware purges are not something a loop device has: nothing runs, exit 2 naming the flag.
    for method in ["secure-erase", "sanitize"] {
        let out = run(&[
            "erase",
            "--target",
            &disk.path,
            "--allow-destroy",
            "--method",
            method,
        ]);
        expect_code(&out, 2);
        let text = stderr(&out);
        assert!(
            text.contains(&format!("--method {method}")) && text.contains("has no drive firmware"),
            "{text}"
        );
        assert!(head(&disk) == before, "a refused erase changed the device");
    }

    let dir = tempdir();
    let file = dir.path().join("x.img");
    std::fs::write(&file, b"keep").unwrap();
    expect_usage_error(
        &run(&["erase", "--target", &file_target(&file, None), "--allow-destroy"]),
        "--target",
    );
    expect_usage_error(
        &run(&["erase", "--target", "sim:840evo-120g", "--allow-destroy"]),
        "--target",
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");

    // A file system: refused without --force; mounted: refused even with it, and the file system is intact.
    sh("mkfs.ext4", &["-q", &disk.path]);
    let with_fs = head(&disk);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("filesystem signature"), "{}", stderr(&out));
    assert!(head(&disk) == with_fs, "a refused erase changed the device");
    let mounted = Mounted::new(&disk.path);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy", "--force"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("mounted"), "{}", stderr(&out));
    drop(mounted);
    sh("e2fsck", &["-fn", &disk.path]);
}

#[test]
fn auto_and_zero_erase_the_whole_device() {
    let disk = LoopDevice::new(16 << 20);
    fill(&disk);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy"]);
    expect_code(&out, 0);
    let text = stderr(&out);
    // A loop device has no secure discard; discard punches the image's blocks, which read back as zeroes.
    assert!(text.contains("secdiscard    failed"), "{text}");
    assert!(
        text.contains("erased    with discard; 256 sampled blocks read back erased"),
        "{text}"
    );
    assert!(all_zero(&disk));
    assert_eq!(disk.image_blocks(), 0, "discard deallocated the image");

    fill(&disk);
    let out = run(&[
        "erase",
        "--target",
        &disk.path,
        "--allow-destroy",
        "--method",
        "zero",
        "--samples",
        "64",
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("erased    with zero; 64 sampled blocks"),
        "{}",
        stderr(&out)
    );
    assert!(all_zero(&disk));
}
