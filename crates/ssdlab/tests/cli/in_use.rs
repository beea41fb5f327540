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
    // Closed before ssdlab looks: a program holding a loop device's image open uses the device.
    drop(file);
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

/// A helper program (a FUSE daemon, qemu-nbd, a shell holding a file) killed and reaped on drop, even when a test
/// fails; a mount it served is unmounted first.
struct Helper {
    child: std::process::Child,
    unmount: Option<PathBuf>,
}

impl Helper {
    fn spawn(cmd: &str, args: &[&str]) -> Self {
        let child = Command::new(cmd)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd} runs (scripts/test.sh installs it): {e}"));
        Helper { child, unmount: None }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(point) = &self.unmount {
            unmount(point);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to 10 s for `ready` (a mount to appear, a socket to be made).
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{what} never became ready");
}

fn is_mounted(point: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(point.to_str().unwrap()))
}

/// The commands that write a `file:` target, each of which must refuse `target` with `why` (exit 2) and leave
/// `image` as it was. `serve` is tried with a socket that must not be left behind.
fn every_writer_refuses(target: &str, image: &Path, why: &str) {
    let before = image_sum(image);
    let socket_dir = tempdir();
    let socket = socket_dir.path().join("nbd.sock");
    for args in [
        vec![
            "run", "--rw", "write", "--bs", "64k", "--bytes", "1m", "--target", target,
        ],
        vec![
            "run",
            "--rw",
            "randwrite",
            "--bytes",
            "1m",
            "--allow-destroy",
            "--force",
            "--target",
            target,
        ],
        vec![
            "test",
            "latency",
            "--span",
            "1m",
            "--runtime",
            "1s",
            "--target",
            target,
        ],
        vec!["serve", "--socket", socket.to_str().unwrap(), "--target", target],
    ] {
        let out = run(&args);
        expect_code(&out, 2);
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
        assert!(!socket.exists(), "serve's socket is removed on a refusal");
    }
    assert_eq!(image_sum(image), before, "{target}: never written");
}

/// Defect 2: an image mounted through FUSE (fuse2fs) is held open by the FUSE daemon. Every command that writes
/// refuses it, naming the daemon, with or without `--force`; the mounted file system stays whole (its file
/// reads back, e2fsck finds nothing) and is writable again once unmounted. The same for a loop device that
/// fuse2fs serves from.
#[test]
fn an_image_mounted_through_fuse_is_never_written() {
    let dir = tempdir();
    let image = dir.path().join("fs.img");
    std::fs::File::create(&image).unwrap().set_len(32 << 20).unwrap();
    mkfs_ext4_settled(image.to_str().unwrap());
    let point = dir.path().join("m");
    std::fs::create_dir(&point).unwrap();
    let mut daemon = Helper::spawn(
        "fuse2fs",
        &[
            "-f",
            image.to_str().unwrap(),
            point.to_str().unwrap(),
            "-o",
            "fakeroot",
        ],
    );
    daemon.unmount = Some(point.clone());
    wait_for("the FUSE mount", || is_mounted(&point));
    std::fs::write(point.join("kept"), b"written through FUSE").unwrap();
    sh("sync", &[]);
    every_writer_refuses(&file_target(&image, None), &image, "(fuse2fs) has it open");
    assert_eq!(
        std::fs::read(point.join("kept")).unwrap(),
        b"written through FUSE"
    );
    drop(daemon);
    let fsck = Command::new("e2fsck")
        .args(["-f", "-n"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "e2fsck: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    // Free again: the user's own file is theirs to write.
    expect_code(&write_1m(&file_target(&image, None)), 0);

    // fuse2fs on a loop device: the device and the file below it are both in use.
    let disk = LoopDevice::new(32 << 20);
    mkfs_ext4_settled(&disk.path);
    let mut daemon = Helper::spawn(
        "fuse2fs",
        &["-f", &disk.path, point.to_str().unwrap(), "-o", "fakeroot"],
    );
    daemon.unmount = Some(point.clone());
    wait_for("the FUSE mount", || is_mounted(&point));
    let before = image_sum(&disk.image);
    let out = run(&[
        "run",
        "--rw",
        "write",
        "--bytes",
        "1m",
        "--allow-destroy",
        "--force",
        "--target",
        &disk.path,
    ]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("(fuse2fs) has it open"), "{}", stderr(&out));
    let out = write_1m(&file_target(&disk.image, None));
    expect_code(&out, 2);
    assert!(
        // fuse2fs mounts a block device as fuseblk, by its number: the loop device is mounted.
        stderr(&out).contains(&format!("{} is mounted at", disk.path))
            || stderr(&out).contains("(fuse2fs) has /dev/loop"),
        "{}",
        stderr(&out)
    );
    assert_eq!(image_sum(&disk.image), before, "never written");
}

/// Defect 3: QEMU never opens O_EXCL; it holds its images open and takes OFD locks. An image exported by
/// qemu-nbd, a loop device it exports and the image below that loop device are refused (naming qemu-nbd), even
/// with `--allow-destroy --force`. The other way round, while ssdlab writes a file it holds an OFD write lock,
/// so QEMU refuses to open it.
#[test]
fn images_and_devices_used_by_qemu_are_never_written_and_qemu_sees_ssdlab_writing() {
    let dir = tempdir();
    let image = dir.path().join("vm.img");
    random_image(&image, 16 << 20);
    let socket = dir.path().join("q.sock");
    let exporter = Helper::spawn(
        "qemu-nbd",
        &[
            "-t",
            "-k",
            socket.to_str().unwrap(),
            "-f",
            "raw",
            image.to_str().unwrap(),
        ],
    );
    wait_for("qemu-nbd", || socket.exists());
    every_writer_refuses(
        &file_target(&image, None),
        &image,
        "(qemu-nbd) has it open for reading and writing",
    );
    drop(exporter);

    let disk = LoopDevice::new(16 << 20);
    let socket = dir.path().join("q2.sock");
    let exporter = Helper::spawn(
        "qemu-nbd",
        &["-t", "-k", socket.to_str().unwrap(), "-f", "raw", &disk.path],
    );
    wait_for("qemu-nbd", || socket.exists());
    let before = image_sum(&disk.image);
    for args in [
        vec![
            "run",
            "--rw",
            "write",
            "--bytes",
            "1m",
            "--allow-destroy",
            "--force",
            "--target",
            &disk.path,
        ],
        vec![
            "erase",
            "--target",
            &disk.path,
            "--allow-destroy",
            "--method",
            "zero",
        ],
    ] {
        let out = run(&args);
        expect_code(&out, 2);
        assert!(
            stderr(&out).contains("(qemu-nbd) has it open"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = write_1m(&file_target(&disk.image, None));
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("(qemu-nbd) has /dev/loop"),
        "{}",
        stderr(&out)
    );
    assert_eq!(image_sum(&disk.image), before, "never written");
    drop(exporter);

    // ssdlab serving the image holds its lock (taken before it greets a client): qemu-io cannot open it for
    // writing meanwhile.
    let server = crate::nbd::Server::start(&file_target(&image, None), &[]);
    let qemu = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write 0 4k"])
        .arg(&image)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&qemu.stderr).into_owned() + &String::from_utf8_lossy(&qemu.stdout);
    drop(server);
    assert!(
        !qemu.status.success() && said.contains("lock"),
        "QEMU sees the lock: {said}"
    );
}

/// Defect 4: a loop device over a file on an overlay keeps the overlay's anonymous (device, inode); once the
/// overlay is unmounted lazily, that identity names no file here, and the layer file holding the bytes was
/// written under the mounted ext4. An unidentifiable backing is unknown, and unknown is in use while the loop
/// device is used.
#[test]
fn a_loop_device_over_a_lazily_unmounted_overlay_keeps_its_layer_file_in_use() {
    let dir = tempdir();
    for d in ["lower", "upper", "work", "merged", "mnt"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    let at = |d: &str| dir.path().join(d).display().to_string();
    sh(
        "mount",
        &[
            "-t",
            "overlay",
            "overlay",
            "-o",
            &format!(
                "lowerdir={},upperdir={},workdir={}",
                at("lower"),
                at("upper"),
                at("work")
            ),
            &at("merged"),
        ],
    );
    let merged_image = dir.path().join("merged/a.img");
    // The loop device made below has a backing file the gate cannot identify: no other test's loop device
    // may be written meanwhile (the gate would rightly refuse it).
    let _alone = unidentifiable_loops();
    std::fs::File::create(&merged_image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let over = Stacked::over(merged_image.to_str().unwrap(), 0);
    mkfs_ext4_settled(&over.path);
    sh("mount", &[&over.path, &at("mnt")]);
    let mounted = Unmount(at("mnt").into());
    std::fs::write(dir.path().join("mnt/data"), b"in use").unwrap();
    sh("sync", &[]);
    sh("umount", &["-l", &at("merged")]);
    let layer = dir.path().join("upper/a.img");
    let before = image_sum(&layer);
    let out = write_1m(&file_target(&layer, None));
    expect_code(&out, 2);
    assert!(stderr(&out).contains("cannot be identified"), "{}", stderr(&out));
    assert_eq!(image_sum(&layer), before, "never written");
    assert_eq!(std::fs::read(dir.path().join("mnt/data")).unwrap(), b"in use");
    drop(mounted);
    drop(over);
}

/// A transient opener (udev's probe, smartd's periodic open, a backup agent's stat-and-read) is not a refusal:
/// a use that is gone within a second is looked past. One that stays is refused, naming the process.
#[test]
fn a_transient_opener_is_waited_out_and_a_lasting_one_is_named() {
    let dir = tempdir();
    let image = dir.path().join("data.img");
    random_image(&image, 4 << 20);
    let script = format!("exec 3<'{}'; sleep 0.4", image.display());
    let brief = Helper::spawn("sh", &["-c", &script]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = write_1m(&file_target(&image, None));
    expect_code(&out, 0);
    drop(brief);
    let script = format!("exec 3<'{}'; sleep 30", image.display());
    let lasting = Helper::spawn("sh", &["-c", &script]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = write_1m(&file_target(&image, None));
    expect_code(&out, 2);
    // The shell and the sleep it started both hold the descriptor.
    let pid = lasting.child.id().to_string();
    assert!(
        stderr(&out).contains(&format!("process {pid} (sh) has it open for reading")),
        "{}",
        stderr(&out)
    );
}

/// `run --rw write --bytes 1m` on `target`.
fn write_1m(target: &str) -> Output {
    run(&["run", "--rw", "write", "--bytes", "1m", "--target", target])
}

/// `length` bytes of seeded noise at `path`.
fn random_image(path: &Path, length: usize) {
    crate::nbd::random_file(path, length, 9);
}

/// Defect 5: `--prom FILE` replaces only ssdlab's own metrics there. A user's file (or a symlink to one) named by
/// `scan --prom`, `health --prom` or `fanout --prom` is refused before anything is measured, and left as it was;
/// ssdlab's own file is replaced on the next run, atomically, as node_exporter's textfile collector expects.
#[test]
fn prom_never_replaces_a_users_file() {
    let dir = tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    crate::nbd::random_file(&data.join("a.bin"), 256 << 10, 3);
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "my notes").unwrap();
    let link = dir.path().join("link.prom");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let health = crate::health::health_fixture("nvme-ok.json");
    for prom in [&victim, &link] {
        let prom = prom.to_str().unwrap();
        for args in [
            vec!["scan", data.to_str().unwrap(), "--prom", prom],
            vec![
                "health",
                "--no-history",
                "--from",
                health.to_str().unwrap(),
                "--prom",
                prom,
            ],
            vec![
                "fanout",
                "--target",
                "null:64m",
                "--target",
                "null:128m",
                "--runtime",
                "1s",
                "--prom",
                prom,
            ],
        ] {
            let out = run(&args);
            expect_code(&out, 2);
            assert!(stderr(&out).contains("--prom"), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("not ssdlab's own"),
                "{args:?}: {}",
                stderr(&out)
            );
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "my notes");
        }
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let ours = dir.path().join("ssdlab.prom");
    for _ in 0..2 {
        let out = run(&[
            "health",
            "--no-history",
            "--from",
            health.to_str().unwrap(),
            "--prom",
            ours.to_str().unwrap(),
        ]);
        expect_code(&out, 0);
    }
    // Edited by hand, it is the user's now.
    std::fs::write(&ours, "# mine now\n").unwrap();
    let out = run(&[
        "health",
        "--no-history",
        "--from",
        health.to_str().unwrap(),
        "--prom",
        ours.to_str().unwrap(),
    ]);
    expect_code(&out, 2);
    assert_eq!(std::fs::read_to_string(&ours).unwrap(), "# mine now\n");
}

/// Defect 6: `refresh --state-dir DIR` never truncates a user's file named `lock` (nor appends to a file named
/// like its journal): the refusal names the file; nothing in the tree is rewritten.
#[test]
fn refresh_never_truncates_a_users_lock_file() {
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    crate::nbd::random_file(&tree.join("old.bin"), 1 << 20, 4);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("lock"), "a user's file that happens to be named lock").unwrap();
    let out = run(&[
        "refresh",
        tree.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("lock is not ssdlab's own lock"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(state.join("lock")).unwrap(),
        "a user's file that happens to be named lock"
    );
}

/// Defect 7: `--out DIR` replaces nothing of the user's, and no earlier result by surprise. A directory that
/// holds a result is refused without `--replace` (the earlier result intact); with it, ssdlab's own files are
/// replaced and the user's report.html, samples.csv and charts stay byte for byte (a user's file under a name the
/// result is written to refuses the run before it measures). The demo's default directory holding its own
/// output is replaced; a directory the user named that holds a demo's results is refused.
#[test]
fn out_replaces_nothing_of_the_users_and_no_result_by_surprise() {
    let dir = tempdir();
    let out_dir = dir.path().join("result");
    let args = |replace: bool| {
        let mut a = vec![
            "run",
            "--target",
            "null:64m",
            "--bytes",
            "16m",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        if replace {
            a.push("--replace");
        }
        a
    };
    expect_code(&run(&args(false)), 0);
    let first = std::fs::read(out_dir.join("result.json")).unwrap();
    let out = run(&args(false));
    expect_usage_error(&out, "already holds a result");
    assert_eq!(std::fs::read(out_dir.join("result.json")).unwrap(), first, "kept");
    // The user's files beside ssdlab's: a chart of theirs, a note, and their own samples.csv (replacing ours).
    let charts = out_dir.join("charts");
    let mut chart_names: Vec<String> = std::fs::read_dir(&charts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    chart_names.sort();
    std::fs::write(charts.join(&chart_names[0]), "<svg>mine</svg>").unwrap();
    std::fs::write(out_dir.join("notes.txt"), "mine").unwrap();
    expect_code(&run(&args(true)), 0);
    assert_ne!(
        std::fs::read(out_dir.join("result.json")).unwrap(),
        first,
        "replaced with --replace"
    );
    assert_eq!(
        std::fs::read_to_string(charts.join(&chart_names[0])).unwrap(),
        "<svg>mine</svg>"
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("notes.txt")).unwrap(),
        "mine"
    );
    std::fs::write(out_dir.join("samples.csv"), "my,own\n").unwrap();
    let out = run(&args(true));
    expect_usage_error(&out, "samples.csv is not ssdlab's own");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("samples.csv")).unwrap(),
        "my,own\n"
    );
    std::fs::write(out_dir.join("samples.csv"), "").unwrap();
    std::fs::remove_file(out_dir.join("samples.csv")).unwrap();
    std::fs::write(out_dir.join("report.html"), "MY PAGE").unwrap();
    expect_usage_error(&run(&args(true)), "report.html is not ssdlab's own");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("report.html")).unwrap(),
        "MY PAGE"
    );
    // A directory the user named that holds a demo's results: refused before any step runs.
    let demo = dir.path().join("demo");
    let step = demo.join("consistency");
    expect_code(
        &run(&[
            "run",
            "--target",
            "null:64m",
            "--bytes",
            "16m",
            "--out",
            step.to_str().unwrap(),
        ]),
        0,
    );
    let out = run(&["demo", "--out", demo.to_str().unwrap()]);
    expect_usage_error(&out, "already holds a demo's results");
    assert!(!demo.join("report.html").exists());
}

/// Refresh keeps its per-file write lease: a file another process holds open during a multi-file refresh is
/// given up with the reason, naming the process (exit 1, files skipped), and the others are rewritten.
#[test]
fn refresh_gives_up_a_file_in_use_naming_who_holds_it_and_goes_on() {
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for name in ["a.bin", "b.bin"] {
        crate::nbd::random_file(&tree.join(name), 2 << 20, 5);
        let aged = Command::new("touch")
            .args(["-d", "2020-01-01"])
            .arg(tree.join(name))
            .status();
        assert!(aged.unwrap().success());
    }
    let script = format!("exec 3<'{}'; sleep 60", tree.join("b.bin").display());
    let holder = Helper::spawn("sh", &["-c", &script]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = std::fs::read(tree.join("b.bin")).unwrap();
    let state = dir.path().join("state");
    let out = run(&[
        "refresh",
        tree.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    let said = stderr(&out);
    assert!(said.contains("done      ") && said.contains("a.bin"), "{said}");
    let pid = holder.child.id();
    assert!(
        said.contains(&format!(
            "b.bin: open in another process for longer than refresh waits: process {pid} (sh)"
        )),
        "{said}"
    );
    assert_eq!(std::fs::read(tree.join("b.bin")).unwrap(), before);
}

/// Maps and locks are matched by the device number the kernel gives the file system, which on btrfs differs
/// from `stat`'s (a subvolume's own): a file in a subvolume that another process has mapped (its descriptor
/// closed) is found by /proc/PID/maps.
#[test]
fn a_mapped_file_in_a_btrfs_subvolume_is_in_use() {
    let disk = LoopDevice::new(256 << 20);
    sh("mkfs.btrfs", &["-q", "-f", &disk.path]);
    let mounted = Mounted::new(&disk.path);
    let sub = mounted.dir.path().join("sub");
    sh("btrfs", &["subvolume", "create", sub.to_str().unwrap()]);
    let image = sub.join("mapped.img");
    crate::nbd::random_file(&image, 1 << 20, 6);
    let st_dev = std::fs::metadata(&image).unwrap().dev();
    let mount_dev = std::fs::metadata(mounted.dir.path()).unwrap().dev();
    assert_ne!(st_dev, mount_dev, "a subvolume has a device number of its own");
    let script = format!(
        "import mmap, os, time\nf = open('{}', 'rb')\nm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\nf.close()\n\
         print('mapped', flush=True)\ntime.sleep(60)\n",
        image.display()
    );
    let mut mapper = Helper::spawn("python3", &["-c", &script]);
    // The helper's stdout is not kept; wait until its map shows.
    let pid = mapper.child.id();
    wait_for("the mapping", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("mapped.img"))
    });
    let before = image_sum(&image);
    let out = run(&[
        "run",
        "--rw",
        "write",
        "--bytes",
        "64k",
        "--bs",
        "64k",
        "--target",
        &file_target(&image, None),
    ]);
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains(&format!("process {pid} (python3) has it mapped into its memory")),
        "{}",
        stderr(&out)
    );
    assert_eq!(image_sum(&image), before);
    let _ = mapper.child.kill();
}

/// Without root, other users' processes cannot be checked: ssdlab reads what it can (/proc/locks, the mount
/// table), writes the user's own file, and says which processes went unchecked; kernel threads are not among
/// them (they hold no files).
#[test]
fn without_root_the_unchecked_processes_are_said_not_refused() {
    let dir = tempdir();
    let own = dir.path().join("nobody");
    std::fs::create_dir(&own).unwrap();
    sh("chown", &["65534:65534", own.to_str().unwrap()]);
    let _ = Command::new("chmod").arg("755").arg(dir.path()).status();
    let target = file_target(&own.join("f"), Some("4m"));
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_ssdlab"))
        .args(["run", "--rw", "write", "--bytes", "1m", "--target", &target])
        .output()
        .unwrap();
    expect_code(&out, 0);
    let said = stderr(&out);
    assert!(
        said.contains("could not be checked for open files or maps"),
        "{said}"
    );
    assert!(
        !said.contains("kthreadd"),
        "kernel threads are not listed: {said}"
    );
}

/// Upgrades: outputs an older ssdlab wrote before it kept a manifest are taken on by their formats, so a timer's
/// `--prom` file and a result directory replaced with `--replace` keep working; a file of the user's beside them
/// is not taken on.
#[test]
fn an_older_ssdlabs_outputs_are_taken_on_by_their_formats() {
    let dir = tempdir();
    let health = crate::health::health_fixture("nvme-ok.json");
    let prom = dir.path().join("ssdlab-health.prom");
    let health_args = [
        "health",
        "--no-history",
        "--from",
        health.to_str().unwrap(),
        "--prom",
        prom.to_str().unwrap(),
    ];
    expect_code(&run(&health_args), 0);
    // As an older version left it: no manifest.
    std::fs::remove_file(dir.path().join(".ssdlab-outputs.json")).unwrap();
    expect_code(&run(&health_args), 0);
    let out_dir = dir.path().join("result");
    let args = [
        "run",
        "--target",
        "null:64m",
        "--bytes",
        "16m",
        "--out",
        out_dir.to_str().unwrap(),
        "--replace",
    ];
    expect_code(&run(&args), 0);
    std::fs::remove_file(out_dir.join(".ssdlab-outputs.json")).unwrap();
    std::fs::write(out_dir.join("notes.csv"), "my notes, not a header\n").unwrap();
    expect_code(&run(&args), 0);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("notes.csv")).unwrap(),
        "my notes, not a header\n"
    );
    // A user's page where a result's page goes, in an older directory: not taken on, refused.
    std::fs::remove_file(out_dir.join(".ssdlab-outputs.json")).unwrap();
    std::fs::write(out_dir.join("report.html"), "MY PAGE").unwrap();
    expect_usage_error(&run(&args), "report.html is not ssdlab's own");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("report.html")).unwrap(),
        "MY PAGE"
    );
}
