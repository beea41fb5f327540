//! Destructive safety on real block devices.

use crate::*;

#[test]
fn block_device_writes_need_allow_destroy() {
    let dev = LoopDevice::new(16 << 20);
    for rw in ["write", "randwrite", "randrw", "trim"] {
        let out = run(&["run", "--target", &dev.path, "--rw", rw, "--runtime", "1s"]);
        expect_usage_error(&out, "--allow-destroy");
    }
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
    // Reading needs no permission.
    expect_code(
        &run(&["run", "--target", &dev.path, "--rw", "randread", "--passes", "1"]),
        0,
    );
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "randwrite",
        "--passes",
        "1",
        "--allow-destroy",
        "--json",
    ]);
    expect_code(&out, 0);
    assert_eq!(summary(&json_lines(&out))["ios"], 4096);
}

#[test]
fn a_device_with_a_filesystem_is_refused_unless_forced() {
    let dev = LoopDevice::new(32 << 20);
    sh("mkfs.ext4", &["-q", "-F", &dev.path]);
    let before = std::fs::read(&dev.image).unwrap();
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "randwrite",
        "--runtime",
        "1s",
        "--allow-destroy",
    ]);
    expect_usage_error(&out, "a file system: ext4 (at byte 1080)");
    assert!(
        stderr(&out).contains("--force"),
        "the refusal says how to override"
    );
    assert!(
        std::fs::read(&dev.image).unwrap() == before,
        "nothing was written"
    );
    // Reads are allowed, and --force overrides.
    expect_code(
        &run(&[
            "run",
            "--target",
            &dev.path,
            "--rw",
            "randread",
            "--runtime",
            "1s",
        ]),
        0,
    );
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "randwrite",
        "--passes",
        "1",
        "--allow-destroy",
        "--force",
    ]);
    expect_code(&out, 0);
}

#[test]
fn a_mounted_device_is_refused() {
    let dev = LoopDevice::new(32 << 20);
    sh("mkfs.ext4", &["-q", "-F", &dev.path]);
    let mounted = Mounted::new(&dev.path);
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "write",
        "--runtime",
        "1s",
        "--allow-destroy",
    ]);
    expect_usage_error(&out, "mounted");
    assert!(
        stderr(&out).contains(mounted.dir.path().to_str().unwrap()),
        "names the mount point"
    );
}

/// #14 defect 2: --force overrides signs of past use, never a device in use.
#[test]
fn a_mounted_device_is_refused_even_with_force() {
    let dev = LoopDevice::new(64 << 20);
    sh("mkfs.ext4", &["-q", "-F", &dev.path]);
    let mounted = Mounted::new(&dev.path);
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "write",
        "--runtime",
        "1s",
        "--allow-destroy",
        "--force",
    ]);
    expect_usage_error(&out, "mounted");
    assert!(
        stderr(&out).contains("--force does not override"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains(mounted.dir.path().to_str().unwrap()));
    // A second loop device over the same backing file, at an offset, reaches the same bytes: still in use.
    let sibling = sh(
        "losetup",
        &["-f", "--show", "--offset", "1048576", dev.image.to_str().unwrap()],
    );
    let out = run(&[
        "test",
        "trim",
        "--target",
        &sibling,
        "--allow-destroy",
        "--force",
        "--torture",
        "1s",
    ]);
    let _ = Command::new("losetup").args(["-d", &sibling]).output();
    expect_usage_error(&out, "is mounted at");
    assert!(stderr(&out).contains("-> disk.img <-"), "{}", stderr(&out));
}

/// #14 defect 1: a destructive test never touches more than the region it was given.
#[test]
fn a_sweep_region_too_small_for_its_transfers_is_refused_not_widened() {
    let dev = LoopDevice::new(256 << 20);
    let out = run(&[
        "test",
        "sweep",
        "--target",
        &dev.path,
        "--allow-destroy",
        "--test-size",
        "1m",
        "--to",
        "4m",
    ]);
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("--test-size 1 MiB holds no 4 MiB transfer"),
        "{}",
        stderr(&out)
    );
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
}

#[test]
fn a_partition_table_is_refused() {
    let dev = LoopDevice::new(32 << 20);
    // A GPT label written by hand with sgdisk/sfdisk would need extra packages; write the two signatures the
    // guard looks for: a protective MBR entry and the "EFI PART" header at LBA 1.
    let image = std::fs::OpenOptions::new().write(true).open(&dev.image).unwrap();
    let mut mbr = [0u8; 512];
    mbr[446 + 4] = 0xEE; // protective partition type
    mbr[446 + 8] = 1;
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    image.write_all_at(&mbr, 0).unwrap();
    image.write_all_at(b"EFI PART", 512).unwrap();
    image.sync_all().unwrap();
    // Closed before ssdlab looks: a program holding a loop device's image open uses the device.
    drop(image);
    sh("blockdev", &["--flushbufs", &dev.path]);
    let out = run(&[
        "run",
        "--target",
        &dev.path,
        "--rw",
        "write",
        "--runtime",
        "1s",
        "--allow-destroy",
    ]);
    expect_usage_error(&out, "partition table");
}

/// A symlink under /dev, removed on drop.
pub(crate) struct DevLink(PathBuf);

impl Drop for DevLink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_symlink_to_a_device_is_never_followed_into_a_write() {
    let dev = LoopDevice::new(16 << 20);
    let link = DevLink(PathBuf::from(format!(
        "/dev/ssdlab-test-link-{}",
        std::process::id()
    )));
    std::os::unix::fs::symlink(&dev.path, &link.0).unwrap();
    let link_path = link.0.to_str().unwrap();
    let out = run(&[
        "run",
        "--target",
        link_path,
        "--rw",
        "write",
        "--runtime",
        "1s",
        "--allow-destroy",
        "--force",
    ]);
    expect_usage_error(&out, "symbolic link");
    assert!(stderr(&out).contains(&dev.path), "names the real device");
    // Reads may go through a link (nothing is destroyed).
    expect_code(
        &run(&["run", "--target", link_path, "--rw", "randread", "--passes", "1"]),
        0,
    );

    let dir = tempdir();
    let file_link = dir.path().join("disk");
    std::os::unix::fs::symlink(&dev.path, &file_link).unwrap();
    let out = run(&[
        "run",
        "--target",
        &file_target(&file_link, None),
        "--rw",
        "write",
        "--runtime",
        "1s",
    ]);
    expect_usage_error(&out, "symbolic link");
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
}

#[test]
fn an_unprivileged_user_gets_a_clear_permission_error() {
    let dev = LoopDevice::new(16 << 20);
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_ssdlab"),
        ])
        .args([
            "run",
            "--target",
            &dev.path,
            "--rw",
            "randread",
            "--runtime",
            "1s",
        ])
        .output()
        .unwrap();
    expect_usage_error(&out, "--target");
    assert!(stderr(&out).contains("run as root"), "{}", stderr(&out));
}
