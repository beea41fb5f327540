//! The safety gate against what a hostile but ordinary admin does on loop devices (issue #27): every defect the
//! red team found, each a test that failed before its fix, and every signature `wipefs -n` reports, refused.

use std::os::unix::fs::FileTypeExt;

use crate::*;

/// A file's type, for "it is still what it was".
fn kind(path: &Path) -> Option<&'static str> {
    let t = std::fs::symlink_metadata(path).ok()?.file_type();
    Some(if t.is_symlink() {
        "symlink"
    } else if t.is_char_device() {
        "char device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    })
}

/// Runs ssdlab and kills it after `limit` (a command that should have refused but serves instead).
fn run_with_limit(args: &[&str], limit: std::time::Duration) -> Output {
    let mut child = ssdlab()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// #27 defect 1: a `file:` target that is not a regular file (a device node, a symlink, a FIFO, a socket) is
/// refused by every command that takes one, read-only ones included, and is still there afterwards.
#[test]
fn a_refused_file_target_never_removes_what_is_at_its_path() {
    let dev = LoopDevice::new(8 << 20);
    let dir = tempdir();
    let precious = dir.path().join("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    let (major, minor) = {
        let rdev = std::fs::metadata(&dev.path).unwrap().rdev();
        (libc_major(rdev), libc_minor(rdev))
    };
    let char_node = dir.path().join("null-node");
    sh("mknod", &[char_node.to_str().unwrap(), "c", "1", "3"]);
    let block_node = dir.path().join("loop-node");
    sh(
        "mknod",
        &[
            block_node.to_str().unwrap(),
            "b",
            &major.to_string(),
            &minor.to_string(),
        ],
    );
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let fifo = dir.path().join("fifo");
    sh("mkfifo", &[fifo.to_str().unwrap()]);
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let trace = dir.path().join("reads.iolog");
    std::fs::write(
        &trace,
        "fio version 2 iolog\n/x add\n/x open\n/x read 0 4096\n/x close\n",
    )
    .unwrap();
    let nbd_socket = dir.path().join("nbd.sock");
    for path in [&char_node, &block_node, &link, &fifo, &socket] {
        let before = kind(path);
        for target in [file_target(path, None), file_target(path, Some("1m"))] {
            let cached = format!("cached:{target}?size=8m");
            let commands: Vec<Vec<&str>> = vec![
                vec!["run", "--target", &target, "--rw", "read", "--runtime", "1s"],
                vec!["run", "--target", &target, "--rw", "write", "--runtime", "1s"],
                vec!["scan", "--device", &target],
                vec!["fanout", "--target", &target, "--runtime", "1s"],
                vec![
                    "serve",
                    "--target",
                    &target,
                    "--read-only",
                    "--socket",
                    nbd_socket.to_str().unwrap(),
                ],
                vec![
                    "test",
                    "latency",
                    "--target",
                    &target,
                    "--rw",
                    "randread",
                    "--runtime",
                    "1s",
                ],
                vec![
                    "test",
                    "replay",
                    "--target",
                    &target,
                    "--trace",
                    trace.to_str().unwrap(),
                ],
                vec!["run", "--target", &cached, "--rw", "read", "--runtime", "1s"],
            ];
            for args in commands {
                let out = run_with_limit(&args, std::time::Duration::from_secs(20));
                assert_eq!(
                    out.status.code(),
                    Some(2),
                    "{args:?} on a {before:?}: {}",
                    stderr(&out)
                );
                assert_eq!(
                    kind(path),
                    before,
                    "{args:?} removed or replaced {}",
                    path.display()
                );
                let _ = std::fs::remove_file(&nbd_socket);
            }
        }
    }
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    assert_eq!(
        dev.image_blocks(),
        0,
        "nothing was written through the block node"
    );
}

fn libc_major(rdev: u64) -> u64 {
    ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff)
}

fn libc_minor(rdev: u64) -> u64 {
    ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff)
}

/// #27 defect 1: a scan never creates, so it never removes: a file that another program swaps for a symlink
/// between the walk and the open is skipped, and the symlink stays.
#[test]
fn scan_never_removes_a_file_swapped_for_a_symlink_during_the_walk() {
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, vec![1u8; 8192]).unwrap();
    for i in 0..64 {
        std::fs::write(tree.join(format!("f{i}")), vec![7u8; 8192]).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lost = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swaps = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let (stop, lost, swaps, tree, elsewhere) = (
            stop.clone(),
            lost.clone(),
            swaps.clone(),
            tree.clone(),
            elsewhere.clone(),
        );
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (file, aside) = (tree.join(format!("f{i}")), tree.join(format!(".f{i}.aside")));
                std::fs::rename(&file, &aside).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
                std::thread::yield_now();
                // The symlink must still be ours to remove: a scan that removed it lost another program's file.
                if std::fs::remove_file(&file).is_err() {
                    lost.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                std::fs::rename(&aside, &file).unwrap();
                swaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i = (i + 1) % 64;
            }
        })
    };
    for _ in 0..6 {
        let out = run(&["scan", tree.to_str().unwrap(), "--min-size", "4k"]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        swaps.load(std::sync::atomic::Ordering::Relaxed) > 100,
        "the swapper ran"
    );
    assert_eq!(
        lost.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "a scan removed a symlink"
    );
    for i in 0..64 {
        assert_eq!(
            std::fs::read(tree.join(format!("f{i}"))).unwrap(),
            vec![7u8; 8192]
        );
    }
    assert_eq!(std::fs::read(&elsewhere).unwrap(), vec![1u8; 8192]);
}

/// A loop device over another device (`losetup -o OFF /dev/loopY /dev/loopX`), detached on drop.
pub(crate) struct Stacked {
    pub(crate) path: String,
}

impl Stacked {
    pub(crate) fn over(device: &str, offset: u64) -> Self {
        let path = sh(
            "losetup",
            &["-f", "--show", "--offset", &offset.to_string(), device],
        );
        Stacked { path }
    }
}

impl Drop for Stacked {
    fn drop(&mut self) {
        unmount(&self.path);
        let _ = Command::new("losetup").args(["-d", &self.path]).output();
    }
}

pub(crate) fn image_sum(path: &Path) -> u64 {
    // FNV-1a over the whole image: enough to see whether any byte changed.
    std::fs::read(path)
        .unwrap()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

/// Every destructive command on `device`: each must be refused (exit 2) with "is mounted at".
fn destructive_commands_refuse(device: &str, why: &str) {
    let attempts: Vec<Vec<&str>> = vec![
        vec![
            "run",
            "--target",
            device,
            "--rw",
            "write",
            "--passes",
            "1",
            "--allow-destroy",
        ],
        vec![
            "run",
            "--target",
            device,
            "--rw",
            "write",
            "--passes",
            "1",
            "--allow-destroy",
            "--force",
        ],
        vec!["erase", "--target", device, "--allow-destroy", "--method", "zero"],
        vec![
            "erase",
            "--target",
            device,
            "--allow-destroy",
            "--method",
            "discard",
            "--force",
        ],
        vec![
            "op",
            "--target",
            device,
            "--set",
            "25%",
            "--allow-destroy",
            "--force",
        ],
        vec![
            "test",
            "trim",
            "--target",
            device,
            "--allow-destroy",
            "--force",
            "--torture",
            "1s",
        ],
    ];
    for args in attempts {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
    }
}

/// #27 defect 2: a mounted file system on a loop device stacked on the target, at offset 0 or 1 MiB, and one
/// level deeper, makes the target in use for every destructive command, `--force` or not; `devices` says so.
#[test]
fn a_mounted_file_system_on_a_loop_device_stacked_on_the_target_is_in_use() {
    for offset in [0u64, 1 << 20] {
        let disk = LoopDevice::new(64 << 20);
        // The bytes before the stack's offset are the disk's alone: random, and checked afterwards.
        sh(
            "dd",
            &[
                "if=/dev/urandom",
                &format!("of={}", disk.path),
                "bs=1M",
                "count=1",
                "oflag=direct",
                "status=none",
            ],
        );
        let head = std::fs::read(&disk.image).unwrap()[..1 << 20].to_vec();
        let upper = Stacked::over(&disk.path, offset);
        let deepest = Stacked::over(&upper.path, 0);
        sh("mkfs.ext4", &["-q", "-F", &deepest.path]);
        let mounted = Mounted::new(&deepest.path);
        std::fs::write(mounted.dir.path().join("data"), b"in use").unwrap();
        sh("sync", &[]);
        destructive_commands_refuse(&disk.path, "is mounted at");
        let out = run(&[
            "run",
            "--target",
            &disk.path,
            "--rw",
            "write",
            "--passes",
            "1",
            "--allow-destroy",
        ]);
        let name = |p: &str| p.trim_start_matches("/dev/").to_string();
        let chain = format!(
            "{} -> {} -> {}",
            name(&deepest.path),
            name(&upper.path),
            name(&disk.path)
        );
        assert!(
            stderr(&out).contains(&chain),
            "the chain is named: {}",
            stderr(&out)
        );
        // `devices` prints the gate's answer: in use.
        let listed = json_lines(&run(&["devices", "--json"]));
        let entry = listed
            .iter()
            .find(|d| d["device"] == disk.path.as_str())
            .unwrap_or_else(|| panic!("{} not listed", disk.path));
        assert_eq!(entry["in_use"], true, "{entry}");
        // The mounted file system changes its own image as it runs (its journal, lazy initialisation), so the
        // proof that nothing else wrote is a clean check of it, its file, and the disk's own bytes.
        assert_eq!(std::fs::read(mounted.dir.path().join("data")).unwrap(), b"in use");
        drop(mounted);
        sh("e2fsck", &["-n", "-f", &deepest.path]);
        if offset > 0 {
            assert!(
                std::fs::read(&disk.image).unwrap()[..1 << 20] == head[..],
                "the disk's first MiB changed"
            );
        }
    }
}

/// #27 defect 3: sibling loop devices over one image are found by inode, however the image is named (a hard
/// link, a bind-mounted directory), never by path text.
#[test]
fn a_sibling_loop_device_over_a_hard_link_or_a_bind_mount_is_found_by_inode() {
    let disk = LoopDevice::new(64 << 20);
    sh(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", disk.path),
            "bs=1M",
            "count=1",
            "oflag=direct",
            "status=none",
        ],
    );
    let head = std::fs::read(&disk.image).unwrap()[..1 << 20].to_vec();
    let linked = disk.image.with_file_name("hardlink.img");
    std::fs::hard_link(&disk.image, &linked).unwrap();
    let bind = tempdir();
    sh(
        "mount",
        &[
            "--bind",
            disk.image.parent().unwrap().to_str().unwrap(),
            bind.path().to_str().unwrap(),
        ],
    );
    let _bind_guard = Unmount(bind.path().to_path_buf());
    for (what, name) in [
        ("a hard link", linked.clone()),
        ("a bind mount", bind.path().join("disk.img")),
    ] {
        let sibling = Stacked {
            path: sh(
                "losetup",
                &["-f", "--show", "--offset", "1048576", name.to_str().unwrap()],
            ),
        };
        sh("mkfs.ext4", &["-q", "-F", &sibling.path]);
        let mounted = Mounted::new(&sibling.path);
        std::fs::write(mounted.dir.path().join("data"), b"in use").unwrap();
        let out = run(&[
            "run",
            "--target",
            &disk.path,
            "--rw",
            "write",
            "--passes",
            "1",
            "--allow-destroy",
            "--force",
        ]);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is mounted at") && stderr(&out).contains("<-"),
            "{what}: {}",
            stderr(&out)
        );
        assert_eq!(std::fs::read(mounted.dir.path().join("data")).unwrap(), b"in use");
        drop(mounted);
        sh("e2fsck", &["-n", "-f", &sibling.path]);
        assert!(
            std::fs::read(&disk.image).unwrap()[..1 << 20] == head[..],
            "{what}: the first MiB changed"
        );
    }
}

/// #27 defect 4: `hot-map=PATH` never replaces a file that is not an ssdlab hot map, never follows a symlink,
/// in read-only runs too, and leaves no temporary file behind.
#[test]
fn a_hot_map_path_that_is_not_a_hot_map_is_never_replaced() {
    let dir = tempdir();
    let data = dir.path().join("data.img");
    // Written, not sparse: reads of a hole are not trusted as a measurement.
    std::fs::write(&data, vec![0x5a; 8 << 20]).unwrap();
    let maps = dir.path().join("maps");
    std::fs::create_dir(&maps).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"someone's file").unwrap();
    let not_a_map = maps.join("notes.txt");
    std::fs::write(&not_a_map, b"my notes").unwrap();
    let link = maps.join("link.map");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for (path, says) in [(&not_a_map, "not an ssdlab hot map"), (&link, "symbolic link")] {
        for rw in ["read", "write"] {
            let target = format!(
                "cached:{}?size=8m&hot-map={}",
                file_target(&data, None),
                path.display()
            );
            let out = run(&["run", "--target", &target, "--rw", rw, "--runtime", "1s"]);
            expect_usage_error(&out, says);
        }
    }
    assert_eq!(std::fs::read(&not_a_map).unwrap(), b"my notes");
    assert_eq!(std::fs::read(&victim).unwrap(), b"someone's file");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let mut left: Vec<String> = std::fs::read_dir(&maps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["link.map", "notes.txt"], "no temporary file was left");
    // A path where nothing is gets a hot map, which the next run may replace.
    let fresh = maps.join("fresh.map");
    let target = format!(
        "cached:{}?size=8m&hot-map={}",
        file_target(&data, None),
        fresh.display()
    );
    for _ in 0..2 {
        expect_code(
            &run(&["run", "--target", &target, "--rw", "randread", "--runtime", "1s"]),
            0,
        );
        assert!(std::fs::read(&fresh).unwrap().starts_with(b"SSDLAB-HOTMAP"));
    }
}

/// Tries to mount `device` at a fresh directory every 100 ms while `child` runs; returns how many attempts were
/// made while it was running and how many of those mounted.
fn mount_attempts(device: &str, child: &mut std::process::Child, tries: u32) -> (u32, u32) {
    let dir = tempdir();
    let (mut made, mut mounted) = (0, 0);
    for _ in 0..tries {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if child.try_wait().unwrap().is_some() {
            break;
        }
        made += 1;
        let out = Command::new("mount")
            .args(["-t", "ext4", device, dir.path().to_str().unwrap()])
            .output()
            .unwrap();
        if out.status.success() {
            mounted += 1;
            unmount(dir.path());
        }
    }
    (made, mounted)
}

/// #27 defect 5: `--force` overrides signatures only; the exclusive claim is held for the whole run and the
/// whole life of a writable export, so nothing can mount the device meanwhile.
#[test]
fn force_never_drops_the_exclusive_claim() {
    let disk = LoopDevice::new(64 << 20);
    sh("mkfs.ext4", &["-q", "-F", &disk.path]);
    let mut child = ssdlab()
        .args([
            "run",
            "--target",
            &disk.path,
            "--rw",
            "randwrite",
            "--runtime",
            "4s",
            "--allow-destroy",
            "--force",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (made, mounted) = mount_attempts(&disk.path, &mut child, 20);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(made >= 10, "the mounts were tried while the run ran ({made})");
    assert_eq!(mounted, 0, "the device was mounted during a --force run");

    // A writable export with --force: claimed for as long as it serves.
    sh("mkfs.ext4", &["-q", "-F", &disk.path]);
    let dir = tempdir();
    let socket = dir.path().join("nbd.sock");
    let mut server = serve_at(&disk.path, &socket, &["--allow-destroy", "--force"]);
    let (made, mounted) = mount_attempts(&disk.path, &mut server, 10);
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .output();
    let _ = server.wait();
    assert!(made >= 5, "the mounts were tried while it served ({made})");
    assert_eq!(
        mounted, 0,
        "the device was mounted under a writable --force export"
    );
}

/// #27 defect 7: no symlink anywhere in the path is followed into a write, a symlinked directory included.
#[test]
fn a_symlinked_directory_in_the_path_is_never_followed_into_a_write() {
    let disk = LoopDevice::new(16 << 20);
    // A symlinked directory inside /dev (block targets are /dev paths), removed on drop.
    struct Link(PathBuf);
    impl Drop for Link {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let dev_link = Link(PathBuf::from(format!(
        "/dev/ssdlab-test-dir-link-{}",
        std::process::id()
    )));
    std::os::unix::fs::symlink("/dev", &dev_link.0).unwrap();
    let through = dev_link.0.join(disk.path.trim_start_matches("/dev/"));
    let out = run(&[
        "run",
        "--target",
        through.to_str().unwrap(),
        "--rw",
        "write",
        "--passes",
        "1",
        "--allow-destroy",
    ]);
    expect_usage_error(&out, "symbolic link");
    assert_eq!(disk.image_blocks(), 0, "nothing was written");
    // Reading through a link is fine (as /dev/disk/by-id/... is).
    expect_code(
        &run(&[
            "run",
            "--target",
            through.to_str().unwrap(),
            "--rw",
            "read",
            "--passes",
            "1",
        ]),
        0,
    );
}

/// #27 defect 8: `op --set` refuses a GPT whose backup header is missing.
#[test]
fn op_refuses_a_gpt_whose_backup_header_is_missing() {
    let disk = LoopDevice::new(64 << 20);
    partition(
        &disk,
        "label: gpt
start=2048, size=20480
",
    );
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", disk.path),
            "bs=512",
            &format!("seek={}", (64 << 20) / 512 - 1),
            "count=1",
            "oflag=direct",
            "status=none",
        ],
    );
    let before = image_sum(&disk.image);
    let out = run(&[
        "op",
        "--target",
        &disk.path,
        "--set",
        "25%",
        "--allow-destroy",
        "--force",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("backup header is missing"),
        "{}",
        stderr(&out)
    );
    assert_eq!(image_sum(&disk.image), before);
}

/// #27 defect 9: refresh refuses the kernel's pseudo file systems before it opens anything.
#[test]
fn refresh_refuses_pseudo_file_systems() {
    let state = tempdir();
    for (path, kind) in [
        ("/sys/devices", "sysfs"),
        ("/proc/sys", "procfs"),
        ("/dev", "devtmpfs"),
    ] {
        for dry in [true, false] {
            let mut args = vec!["refresh", path, "--state-dir", state.path().to_str().unwrap()];
            if dry {
                args.push("--dry-run");
            }
            let out = run(&args);
            expect_usage_error(&out, kind);
            assert!(!stderr(&out).contains("would rewrite"), "{}", stderr(&out));
        }
    }
}

/// #27 defect 10: refresh on a nearly full btrfs stops cleanly before it fills it: the file is as it was, its
/// time too, and the file system keeps its free space.
#[test]
fn refresh_on_a_nearly_full_copy_on_write_file_system_stops_with_room_left() {
    let disk = LoopDevice::new(320 << 20);
    sh("mkfs.btrfs", &["-q", "-f", &disk.path]);
    let mounted = Mounted::new(&disk.path);
    let root = mounted.dir.path();
    let file = root.join("old.bin");
    sh(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", file.display()),
            "bs=1M",
            "count=140",
            "status=none",
        ],
    );
    // Fill the rest until about 20 MB are left.
    let free = |p: &Path| {
        let out = sh("df", &["--output=avail", "-B1", p.to_str().unwrap()]);
        out.lines().last().unwrap().trim().parse::<u64>().unwrap()
    };
    let filler = root.join("filler");
    sh("sync", &[]);
    let fill = free(root).saturating_sub(20 << 20) >> 20;
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", filler.display()),
            "bs=1M",
            &format!("count={fill}"),
            "status=none",
        ],
    );
    sh("touch", &["-d", "200 days ago", file.to_str().unwrap()]);
    sh("sync", &[]);
    let before = std::fs::read(&file).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let free_before = free(root);
    let state = tempdir();
    let out = run(&[
        "refresh",
        root.to_str().unwrap(),
        "--older-than",
        "90d",
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("copy-on-write file system has"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("No space left"), "{}", stderr(&out));
    assert!(std::fs::read(&file).unwrap() == before, "the file changed");
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        mtime,
        "its time was put back"
    );
    sh("sync", &[]);
    assert!(free(root) + (4 << 20) >= free_before, "the free space is kept");
}

/// One signature a Debian package (or a crafted header) can put on a device.
struct Case {
    name: &'static str,
    /// A shell command writing it onto "$DEV" (and "$TMP" for scratch files).
    script: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "ext2",
        script: "mkfs.ext2 -q -F $DEV",
    },
    Case {
        name: "ext3",
        script: "mkfs.ext3 -q -F $DEV",
    },
    Case {
        name: "ext4",
        script: "mkfs.ext4 -q -F $DEV",
    },
    Case {
        name: "xfs",
        script: "mkfs.xfs -q -f $DEV",
    },
    Case {
        name: "btrfs",
        script: "mkfs.btrfs -q -f $DEV",
    },
    Case {
        name: "vfat",
        script: "mkfs.vfat $DEV",
    },
    Case {
        name: "exfat",
        script: "mkfs.exfat $DEV",
    },
    Case {
        name: "ntfs",
        script: "mkfs.ntfs -Q -F -q $DEV",
    },
    Case {
        name: "f2fs",
        script: "mkfs.f2fs -q -f $DEV",
    },
    Case {
        name: "jfs",
        script: "mkfs.jfs -q $DEV",
    },
    Case {
        name: "reiserfs",
        script: "mkfs.reiserfs -q -f $DEV",
    },
    Case {
        name: "nilfs2",
        script: "mkfs.nilfs2 -q -f $DEV",
    },
    Case {
        name: "udf",
        script: "mkudffs $DEV",
    },
    Case {
        name: "minix",
        script: "mkfs.minix $DEV",
    },
    Case {
        name: "bfs",
        script: "mkfs.bfs $DEV",
    },
    Case {
        name: "swap",
        script: "mkswap $DEV",
    },
    Case {
        name: "squashfs",
        script: "mkdir -p $TMP/sq && echo x > $TMP/sq/x && mksquashfs $TMP/sq $TMP/sq.img -quiet -noappend && dd if=$TMP/sq.img of=$DEV conv=notrunc status=none",
    },
    Case {
        name: "iso9660",
        script: "mkdir -p $TMP/iso && echo x > $TMP/iso/x && genisoimage -quiet -o $TMP/x.iso $TMP/iso && dd if=$TMP/x.iso of=$DEV conv=notrunc status=none",
    },
    Case {
        name: "luks1",
        script: "printf pw | cryptsetup luksFormat -q --type luks1 --pbkdf-force-iterations 1000 $DEV -",
    },
    Case {
        name: "luks2",
        script: "printf pw | cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 $DEV -",
    },
    Case {
        name: "luks2 with its first header lost",
        script: "printf pw | cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 $DEV - && dd if=/dev/zero of=$DEV bs=4096 count=1 conv=notrunc status=none",
    },
    Case {
        name: "LVM2 physical volume",
        script: "pvcreate -q -y $DEV",
    },
    Case {
        name: "bcache",
        script: "make-bcache -B $DEV",
    },
    Case {
        name: "md RAID 1.0 (at the end)",
        script: "python3 $TMP/md.py $DEV 1.0",
    },
    Case {
        name: "md RAID 1.2",
        script: "python3 $TMP/md.py $DEV 1.2",
    },
    Case {
        name: "gpt",
        script: "printf 'label: gpt\\nstart=2048, size=20480\\n' | sfdisk -q --no-reread $DEV",
    },
    Case {
        name: "gpt with only its backup header",
        script: "printf 'label: gpt\\nstart=2048, size=20480\\n' | sfdisk -q --no-reread $DEV && dd if=/dev/zero of=$DEV bs=512 seek=1 count=1 conv=notrunc status=none",
    },
    Case {
        name: "dos",
        script: "printf 'start=2048, size=20480, type=83\\n' | sfdisk -q --no-reread $DEV",
    },
];

/// Writes an md RAID v1.x superblock (checksummed as mdadm does) at its version's place: 1.0 near the end
/// ((size - 8 KiB) rounded down to 4 KiB), 1.2 at 4 KiB. mdadm needs the md driver to create one; libblkid and
/// the kernel read exactly this layout (struct mdp_superblock_1).
const MD_PY: &str = r#"
import os, struct, sys
dev, version = sys.argv[1], sys.argv[2]
fd = os.open(dev, os.O_RDWR)
size = os.lseek(fd, 0, os.SEEK_END)
off = (size - 8192) & ~4095 if version == "1.0" else 4096
sb = bytearray(512)
struct.pack_into("<II", sb, 0, 0xa92b4efc, 1)
sb[16:32] = bytes(range(1, 17))
sb[32:40] = b"ssdlab:0"
struct.pack_into("<I", sb, 72, 1)
struct.pack_into("<I", sb, 92, 2)
struct.pack_into("<Q", sb, 144, off // 512)
sb[168:184] = bytes(range(17, 33))
struct.pack_into("<I", sb, 220, 2)
struct.pack_into("<HH", sb, 256, 0, 1)
total = sum(struct.unpack_from("<65I", sb, 0))
struct.pack_into("<I", sb, 216, ((total & 0xffffffff) + (total >> 32)) & 0xffffffff)
os.pwrite(fd, bytes(sb), off)
os.fsync(fd)
"#;

/// #27 defect 6: every signature `wipefs -n` sees is refused, named by its type and place.
#[test]
fn every_signature_wipefs_reports_is_refused_and_named_with_its_place() {
    let scratch = tempdir();
    std::fs::write(scratch.path().join("md.py"), MD_PY).unwrap();
    let mut failures = Vec::new();
    for case in CASES {
        // Sparse, and large enough for every mkfs (XFS wants 300 MB).
        let disk = LoopDevice::new(512 << 20);
        let out = Command::new("sh")
            .args(["-c", case.script])
            .env("DEV", &disk.path)
            .env("TMP", scratch.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {} (scripts/test.sh installs the tools): {}",
            case.name,
            case.script,
            String::from_utf8_lossy(&out.stderr)
        );
        // What wipefs sees: TYPE and OFFSET (hex) per signature.
        let seen = sh("wipefs", &["-n", "--noheadings", "-O", "TYPE,OFFSET", &disk.path]);
        let seen: Vec<(String, u64)> = seen
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let kind = f.next()?.to_string();
                let offset = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                Some((kind, offset))
            })
            .collect();
        assert!(!seen.is_empty(), "{}: wipefs sees nothing", case.name);
        let out = run(&[
            "run",
            "--target",
            &disk.path,
            "--rw",
            "write",
            "--passes",
            "1",
            "--allow-destroy",
        ]);
        let text = stderr(&out);
        if out.status.code() != Some(2) {
            failures.push(format!("{}: not refused: {text}", case.name));
            continue;
        }
        for (kind, offset) in &seen {
            if !text.contains(&format!(": {kind} (at byte {offset})")) {
                failures.push(format!("{}: {kind} at {offset} not named: {text}", case.name));
            }
        }
        let after = sh("wipefs", &["-n", "--noheadings", "-O", "TYPE,OFFSET", &disk.path]);
        assert_eq!(
            after.lines().count(),
            seen.len(),
            "{}: the refusal changed the device",
            case.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A process holding a mount in a mount namespace of its own, killed (and the mount with it) on drop.
struct NamespaceMount {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl NamespaceMount {
    fn new(device: &str) -> Self {
        let dir = tempdir();
        let script = format!(
            "mount {device} {} && echo mounted && exec sleep 600",
            dir.path().display()
        );
        let mut child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("unshare (util-linux) starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "mounted", "the mount in the namespace failed");
        NamespaceMount { child, _dir: dir }
    }
}

impl Drop for NamespaceMount {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The red team's F1: a loop device stacked on a device that is mounted only in another mount namespace (no
/// trace in our mountinfo, but the kernel's claim) is in use, as the device itself is.
#[test]
fn a_loop_device_over_a_device_mounted_in_another_namespace_is_in_use() {
    let disk = LoopDevice::new(64 << 20);
    sh("mkfs.ext4", &["-q", "-F", &disk.path]);
    let _mounted = NamespaceMount::new(&disk.path);
    // At an offset past ext4's superblocks, where libblkid sees no signature.
    let upper = Stacked::over(&disk.path, 3 << 20);
    let out = run(&[
        "run",
        "--target",
        &upper.path,
        "--rw",
        "write",
        "--passes",
        "1",
        "--allow-destroy",
        "--force",
    ]);
    expect_usage_error(&out, "open exclusively");
    let name = disk.path.trim_start_matches("/dev/");
    assert!(stderr(&out).contains(&format!("/dev/{name}")), "{}", stderr(&out));
    let listed = json_lines(&run(&["devices", "--json"]));
    let entry = listed
        .iter()
        .find(|d| d["device"] == upper.path.as_str())
        .unwrap();
    assert_eq!(entry["in_use"], true, "{entry}");
}

/// The red team's F2: a `file:` target written through a symlinked directory is refused (created or existing);
/// read through one, it is fine.
#[test]
fn a_file_target_is_never_written_through_a_symlinked_directory() {
    let dir = tempdir();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("big"), vec![5u8; 1 << 20]).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    for target in [
        file_target(&link.join("big"), None),
        file_target(&link.join("new"), Some("1m")),
    ] {
        let out = run(&["run", "--target", &target, "--rw", "write", "--runtime", "1s"]);
        expect_usage_error(&out, "symbolic link");
        assert!(
            stderr(&out).contains(outside.to_str().unwrap()),
            "names the real path: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read(outside.join("big")).unwrap(), vec![5u8; 1 << 20]);
    assert!(!outside.join("new").exists());
    expect_code(
        &run(&[
            "run",
            "--target",
            &file_target(&link.join("big"), None),
            "--rw",
            "read",
            "--runtime",
            "1s",
        ]),
        0,
    );
    // refresh, which writes in place, the same.
    let out = run(&["refresh", link.to_str().unwrap(), "--dry-run"]);
    expect_usage_error(&out, "symbolic link");
    // A hot map under a symlinked directory.
    let data = dir.path().join("data.img");
    std::fs::File::create(&data).unwrap().set_len(8 << 20).unwrap();
    let target = format!(
        "cached:{}?size=8m&hot-map={}",
        file_target(&data, None),
        link.join("m.map").display()
    );
    expect_usage_error(
        &run(&["run", "--target", &target, "--runtime", "1s"]),
        "symbolic link",
    );
    assert!(!outside.join("m.map").exists());
}

/// The red team's F5: an active swap file is never written or extended as a `file:` target, and a loop device
/// over one is in use.
#[test]
fn an_active_swap_file_is_never_written() {
    let dir = tempdir();
    let swap = dir.path().join("swapfile");
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", swap.display()),
            "bs=1M",
            "count=32",
            "status=none",
        ],
    );
    std::fs::set_permissions(&swap, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    sh("mkswap", &["-q", swap.to_str().unwrap()]);
    sh("swapon", &[swap.to_str().unwrap()]);
    struct SwapOff(PathBuf);
    impl Drop for SwapOff {
        fn drop(&mut self) {
            let _ = Command::new("swapoff").arg(&self.0).output();
        }
    }
    let _off = SwapOff(swap.clone());
    for size in [None, Some("64m")] {
        let out = run(&[
            "run",
            "--target",
            &file_target(&swap, size),
            "--rw",
            "write",
            "--runtime",
            "1s",
        ]);
        expect_usage_error(&out, "active swap file");
    }
    assert_eq!(
        std::fs::metadata(&swap).unwrap().len(),
        32 << 20,
        "never extended"
    );
    // The second red team: a file mounted over the swap file's path hides it from /proc/swaps' path; reached by
    // a hard link, it is still the active swap file, and the kernel's mark says so.
    let link = dir.path().join("swap.hl");
    std::fs::hard_link(&swap, &link).unwrap();
    let decoy = dir.path().join("decoy");
    std::fs::write(&decoy, b"").unwrap();
    sh(
        "mount",
        &["--bind", decoy.to_str().unwrap(), swap.to_str().unwrap()],
    );
    let shadow = Unmount(swap.clone());
    for size in [None, Some("128m")] {
        let out = run(&[
            "run",
            "--target",
            &file_target(&link, size),
            "--rw",
            "write",
            "--runtime",
            "1s",
        ]);
        expect_usage_error(&out, "active swap file");
        assert_eq!(
            std::fs::metadata(&link).unwrap().len(),
            32 << 20,
            "never extended"
        );
    }
    drop(shadow);
    let over = Stacked {
        path: sh("losetup", &["-f", "--show", swap.to_str().unwrap()]),
    };
    let out = run(&[
        "run",
        "--target",
        &over.path,
        "--rw",
        "write",
        "--passes",
        "1",
        "--allow-destroy",
        "--force",
    ]);
    expect_usage_error(&out, "active swap file");
}

/// The last review: a `file:` target that is the disk of a mounted loop device is refused before it is opened for
/// writing or extended (a larger size once grew it, then refused and shrank it back), plain or under the cache.
#[test]
fn a_file_that_is_the_disk_of_a_mounted_loop_device_is_never_written_or_extended() {
    let dir = tempdir();
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image).unwrap().set_len(32 << 20).unwrap();
    let over = Stacked::over(image.to_str().unwrap(), 0);
    mkfs_ext4_settled(&over.path);
    let mounted = Mounted::new(&over.path);
    std::fs::write(mounted.dir.path().join("data"), b"in use").unwrap();
    sh("sync", &[]);
    let before = image_sum(&image);
    for target in [
        file_target(&image, None),
        file_target(&image, Some("64m")),
        format!("cached:{}", file_target(&image, Some("64m"))),
    ] {
        let out = run(&["run", "--target", &target, "--rw", "write", "--runtime", "1s"]);
        expect_usage_error(&out, "in use as a disk");
        expect_usage_error(&out, "is mounted at");
        assert_eq!(
            std::fs::metadata(&image).unwrap().len(),
            32 << 20,
            "{target}: never extended"
        );
        assert_eq!(image_sum(&image), before, "{target}: never written");
    }
    assert_eq!(std::fs::read(mounted.dir.path().join("data")).unwrap(), b"in use");
}

/// The second red team: an overlay shows its upper layer's file under a device number of its own, so a loop
/// device over one name and a write to the other did not meet, and a mounted ext4 was written. Both ways round
/// are refused now.
#[test]
fn a_file_on_an_overlay_and_its_layer_file_are_one_disk() {
    let dir = tempdir();
    for d in ["lower", "upper", "work", "merged"] {
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
    let _overlay = Unmount(at("merged").into());
    // The loop device made below has a backing file the gate cannot identify: no other test's loop device
    // may be written meanwhile (the gate would rightly refuse it).
    let _alone = unidentifiable_loops();
    // (loop device over, ssdlab writes): the upper file under the merged name, then the other way round.
    for (image, loop_over, target) in [
        ("a.img", "upper/a.img", "merged/a.img"),
        ("b.img", "merged/b.img", "upper/b.img"),
    ] {
        let merged = dir.path().join("merged").join(image);
        std::fs::File::create(&merged).unwrap().set_len(32 << 20).unwrap();
        let over = Stacked::over(&at(loop_over), 0);
        mkfs_ext4_settled(&over.path);
        let mounted = Mounted::new(&over.path);
        std::fs::write(mounted.dir.path().join("data"), b"in use").unwrap();
        sh("sync", &[]);
        let target_path = dir.path().join(target);
        let before = image_sum(&target_path);
        let out = run(&[
            "run",
            "--target",
            &file_target(&target_path, None),
            "--rw",
            "write",
            "--runtime",
            "1s",
        ]);
        expect_usage_error(&out, "is mounted at");
        assert_eq!(image_sum(&target_path), before, "{target}: never written");
        drop(mounted);
        drop(over);
    }
}

/// The red team's F6: `--out` replaces only ssdlab's own files, and `report --out` only a report ssdlab wrote.
#[test]
fn out_never_replaces_a_file_ssdlab_did_not_write() {
    let dir = tempdir();
    for (name, content) in [
        ("report.html", "MY OWN PAGE"),
        ("result.json", "{\"mine\": true}"),
        ("samples.csv", "a,b"),
    ] {
        let out_dir = dir.path().join(name);
        std::fs::create_dir(&out_dir).unwrap();
        std::fs::write(out_dir.join(name), content).unwrap();
        for replace in [false, true] {
            let mut args = vec![
                "run",
                "--target",
                "null",
                "--runtime",
                "1s",
                "--out",
                out_dir.to_str().unwrap(),
            ];
            if replace {
                args.push("--replace");
            }
            let out = run(&args);
            // A result.json is a result: refused as one without --replace, as not ssdlab's own with it.
            let why = if name == "result.json" && !replace {
                "already holds a result"
            } else {
                "never replaces a file that is not its own"
            };
            expect_usage_error(&out, why);
            assert_eq!(std::fs::read_to_string(out_dir.join(name)).unwrap(), content);
        }
    }
    // A CSV of the user's under a name this result does not write stays, and the run goes on.
    let beside = dir.path().join("beside");
    std::fs::create_dir(&beside).unwrap();
    std::fs::write(beside.join("data.csv"), "a,b").unwrap();
    expect_code(
        &run(&[
            "run",
            "--target",
            "null",
            "--runtime",
            "1s",
            "--out",
            beside.to_str().unwrap(),
        ]),
        0,
    );
    assert_eq!(std::fs::read_to_string(beside.join("data.csv")).unwrap(), "a,b");
    // Its own result directory is rewritten with --replace, and its own report replaced.
    let ours = dir.path().join("ours");
    for replace in [false, true] {
        let mut args = vec![
            "run",
            "--target",
            "null",
            "--runtime",
            "1s",
            "--out",
            ours.to_str().unwrap(),
        ];
        if replace {
            args.push("--replace");
        }
        expect_code(&run(&args), 0);
    }
    let page = dir.path().join("page.html");
    std::fs::write(&page, "MY PAGE").unwrap();
    expect_usage_error(
        &run(&["report", ours.to_str().unwrap(), "--out", page.to_str().unwrap()]),
        "is not ssdlab's own report page",
    );
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "MY PAGE");
    let fresh = dir.path().join("fresh.html");
    for _ in 0..2 {
        expect_code(
            &run(&["report", ours.to_str().unwrap(), "--out", fresh.to_str().unwrap()]),
            0,
        );
    }
}

/// A GPT backup header alone at the end (no protective MBR, no primary, its entries gone): libblkid does not
/// see it, the gate's own check does. A whole table with its start wiped is refused too, by one or the other.
#[test]
fn a_gpt_backup_header_alone_is_refused_though_libblkid_misses_it() {
    let disk = LoopDevice::new(64 << 20);
    let last_lba = (64u64 << 20) / 512 - 1;
    // A header that checksums and names its own place, nothing else: written by hand (CRC-32 in Python).
    let script = format!(
        r#"
import os, struct, zlib
h = bytearray(512)
h[0:8] = b"EFI PART"
struct.pack_into("<IIIIQQQQ", h, 8, 0x10000, 92, 0, 0, {last_lba}, 1, 34, {last_lba} - 33)
struct.pack_into("<QII", h, 72, {last_lba} - 32, 128, 128)
struct.pack_into("<I", h, 16, zlib.crc32(bytes(h[:92])))
fd = os.open("{dev}", os.O_WRONLY)
os.pwrite(fd, bytes(h), {last_lba} * 512)
os.fsync(fd)
"#,
        dev = disk.path
    );
    sh("python3", &["-c", &script]);
    assert_eq!(
        sh("wipefs", &["-n", "--noheadings", &disk.path]),
        "",
        "libblkid sees nothing"
    );
    let out = run(&[
        "run",
        "--target",
        &disk.path,
        "--rw",
        "write",
        "--passes",
        "1",
        "--allow-destroy",
    ]);
    expect_usage_error(
        &out,
        &format!("a partition table: gpt (at byte {})", last_lba * 512),
    );
    // sfdisk's whole table with the protective MBR, the primary and its entries wiped.
    partition(
        &disk,
        "label: gpt
start=2048, size=20480
",
    );
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", disk.path),
            "bs=512",
            "count=34",
            "oflag=direct",
            "status=none",
        ],
    );
    let out = run(&[
        "run",
        "--target",
        &disk.path,
        "--rw",
        "write",
        "--passes",
        "1",
        "--allow-destroy",
    ]);
    expect_usage_error(
        &out,
        &format!("a partition table: gpt (at byte {})", last_lba * 512),
    );
}
