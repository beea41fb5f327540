//! Refresh: never risk a byte, and keep every promise (regressions for the red teams' findings).

use crate::*;

/// Everything about a file that a refresh must preserve.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileFacts {
    pub(crate) content_hash: u64,
    pub(crate) size: u64,
    pub(crate) blocks: u64,
    pub(crate) mode: u32,
    pub(crate) nlink: u64,
    pub(crate) atime: (i64, i64),
    pub(crate) mtime: (i64, i64),
}

/// Reads facts without touching atime (O_NOATIME; the tests run as root).
pub(crate) fn facts(path: &Path) -> FileFacts {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_noatime())
        .open(path)
        .unwrap();
    let mut data = Vec::new();
    file.read_to_end(&mut data).unwrap();
    let meta = std::fs::symlink_metadata(path).unwrap();
    FileFacts {
        content_hash: data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        }),
        size: meta.len(),
        blocks: meta.blocks(),
        mode: meta.mode(),
        nlink: meta.nlink(),
        atime: (meta.atime(), meta.atime_nsec()),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    }
}

pub(crate) const fn libc_o_noatime() -> i32 {
    0o1000000 // O_NOATIME on Linux
}

pub(crate) fn write_random(path: &Path, len: usize, seed: u64) {
    let mut x = seed | 1;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, data).unwrap();
    // Written a minute ago: refresh leaves files modified in the last moments alone.
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(minute_ago)
        .unwrap();
}

/// A tree with the awkward cases: hard links, a sparse file, an unaligned size, unusual permissions, old
/// timestamps, a nested directory.
pub(crate) fn awkward_tree(root: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(root.join("nested")).unwrap();
    write_random(&root.join("a.bin"), 3 << 20, 1);
    std::fs::hard_link(root.join("a.bin"), root.join("a-link.bin")).unwrap();
    write_random(&root.join("odd.bin"), 100_003, 2);
    write_random(&root.join("nested/c.bin"), 2 << 20, 3);
    let sparse = root.join("sparse.img");
    let file = std::fs::File::create(&sparse).unwrap();
    file.set_len(8 << 20).unwrap();
    file.write_all_at(&vec![0x5a; 1 << 20], 2 << 20).unwrap();
    file.sync_all().unwrap();
    // Written a minute ago, as write_random's files are: a loaded machine could otherwise start the first
    // refresh within the 100 ms in which refresh leaves a just-modified file alone (seen once in a full run).
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    write_random(&root.join("secret.bin"), 300_000, 4);
    std::fs::set_permissions(
        root.join("secret.bin"),
        std::os::unix::fs::PermissionsExt::from_mode(0o400),
    )
    .unwrap();
    for name in ["secret.bin", "odd.bin", "nested/c.bin"] {
        sh(
            "touch",
            &[
                "-a",
                "-d",
                "2019-03-04 05:06:07.123456789",
                root.join(name).to_str().unwrap(),
            ],
        );
        sh(
            "touch",
            &[
                "-m",
                "-d",
                "2018-01-02 03:04:05.987654321",
                root.join(name).to_str().unwrap(),
            ],
        );
    }
    [
        "a.bin",
        "a-link.bin",
        "odd.bin",
        "nested/c.bin",
        "sparse.img",
        "secret.bin",
    ]
    .iter()
    .map(|n| root.join(n))
    .collect()
}

#[test]
fn refresh_survives_sigkill_at_any_moment() {
    assert!(
        is_root(),
        "the refresh torture test needs root (O_NOATIME on any file, leases)"
    );
    let dir = tempdir();
    let tree = dir.path().join("tree");
    let state = dir.path().join("state");
    let files = awkward_tree(&tree);
    let before: Vec<FileFacts> = files.iter().map(|f| facts(f)).collect();
    let refresh = || {
        let mut c = ssdlab();
        c.args([
            "refresh",
            tree.to_str().unwrap(),
            "--chunk",
            "64k",
            "--state-dir",
            state.to_str().unwrap(),
        ]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    // How long an uninterrupted run takes, so the kills can land anywhere in it.
    let started = std::time::Instant::now();
    expect_code(&refresh().stderr(Stdio::piped()).output().unwrap(), 0);
    let full_us = (started.elapsed().as_micros() as u64).max(1000);
    // Kill it at pseudo-random moments; after every kill every file's content is byte-identical.
    let kills = std::env::var("SSDLAB_REFRESH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50u64);
    let seed = std::env::var("SSDLAB_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut x = seed | 1;
    let mut cut_mid_file = 0;
    for kill in 0..kills {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut child = refresh().spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_micros(x % full_us));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let journal = std::fs::read_to_string(state.join("refresh-journal.jsonl")).unwrap_or_default();
        let begun = journal.matches("\"event\":\"begin\"").count();
        let ended = journal.matches("\"event\":\"end\"").count();
        if begun > ended {
            cut_mid_file += 1;
        }
        for (file, expected) in files.iter().zip(&before) {
            let now = facts(file);
            assert_eq!(
                (now.content_hash, now.size),
                (expected.content_hash, expected.size),
                "seed {seed:#x}, kill {kill}: {} changed",
                file.display()
            );
        }
    }
    // A final run completes and leaves everything as it was: contents, sizes, holes, permissions, links, times.
    let out = refresh().stderr(Stdio::piped()).output().unwrap();
    expect_code(&out, 0);
    for (file, expected) in files.iter().zip(&before) {
        assert_eq!(
            &facts(file),
            expected,
            "seed {seed:#x}: {} after the final run",
            file.display()
        );
    }
    assert!(
        cut_mid_file * 4 >= kills,
        "only {cut_mid_file} of {kills} kills landed inside a file (seed {seed:#x})"
    );
}

/// Starts a refresh of one file slow enough (64 KiB chunks at 8 MiB/s) for another process to cut in.
pub(crate) fn slow_refresh(path: &Path, state: &Path) -> std::process::Child {
    ssdlab()
        .args([
            "refresh",
            path.to_str().unwrap(),
            "--chunk",
            "64k",
            "--rate",
            "8m",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn refresh_leaves_a_file_alone_when_another_process_writes_to_it() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = dir.path().join("busy.bin");
    write_random(&path, 32 << 20, 9);
    let original = std::fs::read(&path).unwrap();
    let child = slow_refresh(&path, &state);
    std::thread::sleep(std::time::Duration::from_millis(700));
    // Another process opens the file for writing (it waits while ssdlab holds its lease) and writes.
    let writer = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", path.display()),
            "bs=4096",
            "count=2",
            "seek=7000",
            "conv=notrunc",
        ])
        .output()
        .unwrap();
    assert!(writer.status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("gave way"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now = std::fs::read(&path).unwrap();
    let at = 7000 * 4096;
    assert!(
        now[at..at + 8192].iter().all(|&b| b == 0),
        "the other process's data is intact"
    );
    assert_eq!(now[..at], original[..at]);
    assert_eq!(now[at + 8192..], original[at + 8192..]);
}

#[test]
fn refresh_refuses_what_it_must_not_rewrite() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let root = dir.path().join("t");
    std::fs::create_dir_all(&root).unwrap();
    write_random(&root.join("plain.bin"), 100_000, 1);
    write_random(&root.join("immutable.bin"), 100_000, 2);
    write_random(&root.join("append.bin"), 100_000, 3);
    std::os::unix::fs::symlink("plain.bin", root.join("link.bin")).unwrap();
    sh("chattr", &["+i", root.join("immutable.bin").to_str().unwrap()]);
    sh("chattr", &["+a", root.join("append.bin").to_str().unwrap()]);
    struct Unchattr(PathBuf);
    impl Drop for Unchattr {
        fn drop(&mut self) {
            for f in ["immutable.bin", "append.bin"] {
                let _ = Command::new("chattr")
                    .args(["-i", "-a", self.0.join(f).to_str().unwrap()])
                    .output();
            }
        }
    }
    let _unchattr = Unchattr(root.clone());
    // A swap file in use.
    let swap = root.join("swap.img");
    std::fs::write(&swap, vec![0u8; 16 << 20]).unwrap();
    std::fs::set_permissions(&swap, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    sh("mkswap", &[swap.to_str().unwrap()]);
    let swapped_on = Command::new("swapon")
        .arg(&swap)
        .status()
        .is_ok_and(|s| s.success());
    struct Swapoff(PathBuf, bool);
    impl Drop for Swapoff {
        fn drop(&mut self) {
            if self.1 {
                let _ = Command::new("swapoff").arg(&self.0).output();
            }
        }
    }
    let _swapoff = Swapoff(swap.clone(), swapped_on);
    assert!(swapped_on, "swapon must work for this test (CI runs as root)");

    let out = run(&[
        "refresh",
        root.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    let text = stderr(&out);
    for (name, says) in [
        ("link.bin", "symbolic link"),
        ("immutable.bin", "immutable"),
        ("append.bin", "append-only"),
        ("swap.img", "swap"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(name) && l.contains(says)),
            "{name} should be refused ({says}):\n{text}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("done") && l.contains("plain.bin")),
        "{text}"
    );
}

#[test]
fn refresh_refuses_reflinked_files() {
    let dev = LoopDevice::new(300 << 20);
    if Command::new("mkfs.btrfs").arg("--version").output().is_err() {
        panic!("mkfs.btrfs is needed (apt-get install btrfs-progs; .ci/run installs it)");
    }
    sh("mkfs.btrfs", &["-q", "-f", &dev.path]);
    let mounted = Mounted::new(&dev.path);
    let root = mounted.dir.path();
    write_random(&root.join("original.bin"), 1 << 20, 5);
    sh(
        "cp",
        &[
            "--reflink=always",
            root.join("original.bin").to_str().unwrap(),
            root.join("clone.bin").to_str().unwrap(),
        ],
    );
    let state = tempdir();
    let out = run(&[
        "refresh",
        root.join("clone.bin").to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    assert!(stderr(&out).contains("shares extents"), "{}", stderr(&out));
}

#[test]
fn refresh_bad_input_and_dry_run() {
    let dir = tempdir();
    write_random(&dir.path().join("f.bin"), 50_000, 7);
    let path = dir.path().to_str().unwrap();
    expect_usage_error(&run(&["refresh", "/no/such/path"]), "PATH");
    expect_usage_error(&run(&["refresh", path, "--rate", "0"]), "--rate");
    expect_usage_error(
        &run(&["refresh", path, "--older-than", "3 fortnights"]),
        "--older-than",
    );
    expect_usage_error(&run(&["refresh", path, "--chunk", "1000"]), "--chunk");
    // A plain number is not a duration: 90 meant days to one user and seconds to ssdlab.
    expect_usage_error(&run(&["refresh", path, "--older-than", "90"]), "--older-than");
    let before = facts(&dir.path().join("f.bin"));
    let out = run(&["refresh", path, "--dry-run"]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("wear cost") && stderr(&out).contains("would"));
    assert_eq!(
        facts(&dir.path().join("f.bin")),
        before,
        "a dry run writes nothing"
    );
    // Nothing is older than a year here.
    let out = run(&["refresh", path, "--older-than", "1y", "--dry-run"]);
    assert!(stderr(&out).contains("0 files"), "{}", stderr(&out));
}

/// Starts a slow refresh, waits until it has written some chunks, and SIGKILLs it.
pub(crate) fn refresh_killed_mid_file(path: &Path, state: &Path) {
    let child = slow_refresh(path, state);
    std::thread::sleep(std::time::Duration::from_millis(900));
    unsafe_kill(child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn unsafe_kill(pid: u32) {
    sh("kill", &["-KILL", &pid.to_string()]);
}

pub(crate) fn old_file(dir: &Path, name: &str, len: usize, seed: u64) -> PathBuf {
    let path = dir.join(name);
    write_random(&path, len, seed);
    sh(
        "touch",
        &["-d", "2019-03-04 05:06:07.123456789", path.to_str().unwrap()],
    );
    path
}

#[test]
fn a_killed_refresh_is_settled_by_the_next_run_whatever_it_selects() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "old.bin", 16 << 20, 31);
    let before = facts(&path);
    refresh_killed_mid_file(&path, &state);
    // Each window puts the original times back before it closes, so the kill left at most one write's time; it
    // did leave an unfinished journal entry, which the next run must settle whatever it selects.
    let journal = std::fs::read_to_string(state.join("refresh-journal.jsonl")).unwrap();
    assert!(journal.contains("\"event\":\"begin\""), "{journal}");
    // The next run selects nothing (another path, and only old files), yet settles it.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let out = run(&[
        "refresh",
        other.to_str().unwrap(),
        "--older-than",
        "1d",
        "--chunk",
        "128k",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("settled"), "{}", stderr(&out));
    let after = facts(&path);
    assert_eq!(after.content_hash, before.content_hash);
    assert_eq!((after.atime, after.mtime), (before.atime, before.mtime));
}

/// Red team, session 3: an entry journalled with a relative path, or whose file system was not mounted where it
/// was when the next run came, was dropped as "gone" and the write's modification time stayed for good.
#[test]
fn an_entry_waits_for_its_file_system_and_survives_a_relative_path() {
    assert!(is_root());
    let dev = LoopDevice::new(128 << 20);
    sh("mkfs.ext4", &["-q", &dev.path]);
    let mnt = tempdir();
    sh("mount", &[&dev.path, mnt.path().to_str().unwrap()]);
    let work = mnt.path().join("data");
    std::fs::create_dir(&work).unwrap();
    let path = old_file(&work, "old.bin", 16 << 20, 33);
    let before = facts(&path);
    let state = tempdir();
    // Killed while refreshing a path given relative to the mount.
    let child = ssdlab()
        .current_dir(mnt.path())
        .args(["refresh", "data", "--chunk", "64k", "--rate", "8m", "--state-dir"])
        .arg(state.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    unsafe_kill(child.id());
    let _ = child.wait_with_output();
    let journal = std::fs::read_to_string(state.path().join("refresh-journal.jsonl")).unwrap();
    assert!(
        journal.contains(&format!("{}", work.display())),
        "absolute paths: {journal}"
    );
    // The next run comes while the file system is unmounted: the entry must wait, not be dropped.
    unmount(mnt.path());
    let elsewhere = tempdir();
    let out = run(&[
        "refresh",
        elsewhere.path().to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    expect_code(&out, 1);
    assert!(stderr(&out).contains("not mounted"), "{}", stderr(&out));
    // Mounted again, a run from another directory settles it.
    sh("mount", &[&dev.path, mnt.path().to_str().unwrap()]);
    let out = run(&[
        "refresh",
        elsewhere.path().to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    unmount_after(&mnt, || {
        expect_code(&out, 0);
        let after = facts(&path);
        assert_eq!(after.content_hash, before.content_hash);
        assert_eq!(after.mtime, before.mtime, "{}", stderr(&out));
    });
}

/// A loop device attached over an existing image by the test itself: unmounted and detached on drop.
struct Attached(String);

impl Drop for Attached {
    fn drop(&mut self) {
        unmount(&self.0);
        let _ = Command::new("losetup").args(["-d", &self.0]).output();
    }
}

#[test]
fn an_xfs_entry_follows_its_file_system_to_a_new_device_number_and_forget_drops_one_that_never_returns() {
    // XFS reports its device number as f_fsid: the journal must know the file system by its UUID, or an
    // entry waits forever once the loop device (or disk) is renumbered.
    assert!(is_root());
    let dev = LoopDevice::new(320 << 20);
    sh("mkfs.xfs", &["-q", &dev.path]);
    let mnt = tempdir();
    let mnt_path = mnt.path().to_str().unwrap().to_string();
    sh("mount", &[&dev.path, &mnt_path]);
    let path = old_file(mnt.path(), "old.bin", 16 << 20, 34);
    let before = facts(&path);
    let state = tempdir();
    let state_path = state.path().to_str().unwrap().to_string();
    refresh_killed_mid_file(&path, state.path());
    sh("umount", &[&mnt_path]);
    sh("losetup", &["-d", &dev.path]);
    // Another device takes the freed number; the image comes back under a new one. Other tests attach and
    // detach loop devices meanwhile, so a number freed elsewhere may go to the squatter: squat again until the
    // image's new number differs.
    let mut squatters = vec![LoopDevice::new(1 << 20)];
    let mut again = Attached(sh("losetup", &["-f", "--show", dev.image.to_str().unwrap()]));
    while again.0 == dev.path && squatters.len() < 8 {
        drop(again);
        squatters.push(LoopDevice::new(1 << 20));
        again = Attached(sh("losetup", &["-f", "--show", dev.image.to_str().unwrap()]));
    }
    assert_ne!(again.0, dev.path, "the image is renumbered");
    sh("mount", &[&again.0, &mnt_path]);
    let elsewhere = tempdir();
    let next = |extra: &[&str]| {
        let mut args = vec!["refresh"];
        args.extend_from_slice(extra);
        args.extend(["--state-dir", &state_path]);
        run(&args)
    };
    let out = next(&[elsewhere.path().to_str().unwrap()]);
    unmount_after(&mnt, || {
        expect_code(&out, 0);
        assert!(stderr(&out).contains("settled"), "{}", stderr(&out));
        let after = facts(&path);
        assert_eq!(after.content_hash, before.content_hash);
        assert_eq!(after.mtime, before.mtime, "{}", stderr(&out));
    });
    // Killed again, and this time the file system never comes back: every run says the entry is pending
    // (exit 1) and how to drop it, and --forget drops it with the time to put back by hand.
    sh("mount", &[&again.0, &mnt_path]);
    refresh_killed_mid_file(&path, state.path());
    sh("umount", &[&mnt_path]);
    let out = next(&[elsewhere.path().to_str().unwrap()]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("not mounted") && stderr(&out).contains("--forget"),
        "{}",
        stderr(&out)
    );
    let out = next(&["--forget", &mnt_path, elsewhere.path().to_str().unwrap()]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("--forget"), "{}", stderr(&out));
    let out = next(&["--forget", &mnt_path]);
    expect_code(&out, 0);
    let seconds = before.mtime.0.to_string();
    assert!(
        stderr(&out).contains("forgot") && stderr(&out).contains(&format!("@{seconds}.")),
        "{}",
        stderr(&out)
    );
    expect_code(&next(&[elsewhere.path().to_str().unwrap()]), 0);
    let out = next(&["--forget", &mnt_path]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("nothing is pending"), "{}", stderr(&out));
}

/// Runs checks on a mounted file system and unmounts it afterwards, even when a check fails.
pub(crate) fn unmount_after(mnt: &tempfile::TempDir, checks: impl FnOnce()) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(checks));
    unmount(mnt.path());
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn an_edit_after_a_kill_keeps_its_own_mtime() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "edited.bin", 16 << 20, 32);
    let before = facts(&path);
    refresh_killed_mid_file(&path, &state);
    // The owner edits the file (same size) before the next run.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", path.display()),
            "bs=1",
            "count=3",
            "seek=5",
            "conv=notrunc",
        ],
    );
    let edited = facts(&path);
    let other = dir.path().join("empty");
    std::fs::create_dir(&other).unwrap();
    let out = run(&[
        "refresh",
        other.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(
        stderr(&out).contains("changed by someone else"),
        "{}",
        stderr(&out)
    );
    let after = facts(&path);
    assert_eq!(
        after.mtime, edited.mtime,
        "the 2019 mtime must not be put back over the edit"
    );
    assert_ne!(after.mtime, before.mtime);
}

#[test]
fn a_new_file_on_a_reused_inode_never_gets_the_old_files_times() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "doomed.bin", 16 << 20, 33);
    refresh_killed_mid_file(&path, &state);
    std::fs::remove_file(&path).unwrap();
    write_random(&path, 16 << 20, 34);
    let fresh = facts(&path);
    let other = dir.path().join("empty");
    std::fs::create_dir(&other).unwrap();
    let out = run(&[
        "refresh",
        other.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("gone or replaced"), "{}", stderr(&out));
    assert_eq!(facts(&path), fresh, "the new file is untouched");
}

#[test]
fn chmod_during_a_refresh_gives_way_and_puts_the_times_back() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "chmod.bin", 32 << 20, 35);
    let before = facts(&path);
    let child = slow_refresh(&path, &state);
    std::thread::sleep(std::time::Duration::from_millis(700));
    sh("chmod", &["600", path.to_str().unwrap()]);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("gave way") && text.contains("mode") && text.contains("times put back"),
        "{text}"
    );
    let after = facts(&path);
    assert_eq!(after.content_hash, before.content_hash);
    assert_eq!((after.atime, after.mtime), (before.atime, before.mtime));
    assert_eq!(after.mode & 0o777, 0o600, "the owner's chmod stays");
}

#[test]
fn a_refreshed_binary_can_be_executed_while_refresh_runs() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = dir.path().join("true-copy");
    // A real executable, padded so the refresh takes a while.
    let mut exe = std::fs::read("/bin/true").unwrap();
    exe.resize(exe.len().max(16 << 20), 0);
    std::fs::write(&path, &exe).unwrap();
    sh("chmod", &["755", path.to_str().unwrap()]);
    let child = slow_refresh(&path, &state);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The kernel refuses an exec (ETXTBSY) at the instant a writable descriptor is open; refresh opens one only
    // for a window of one write, so an exec fails only when it meets that instant. With a lease held for a whole
    // file, 1 exec in 10 failed; with per-chunk windows it is well under 1 in 100. Allow a few in 50 so the test
    // does not flake under load, while a regression to whole-file holding (most execs failing) fails it.
    let mut failures = 0;
    let tries = 50;
    for _ in 0..tries {
        match Command::new(&path).status() {
            Ok(s) if s.success() => {}
            _ => failures += 1,
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        failures <= 5,
        "{failures} of {tries} execs failed while refresh ran: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_second_refresh_on_the_same_state_directory_is_told_who_holds_it() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "big.bin", 32 << 20, 36);
    let child = slow_refresh(&path, &state);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = run(&[
        "refresh",
        path.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_usage_error(&out, "--state-dir");
    assert!(
        stderr(&out).contains(&format!("process {}", child.id())),
        "{}",
        stderr(&out)
    );
    unsafe_kill(child.id());
    let _ = child.wait_with_output();
}

#[test]
fn odd_names_a_damaged_journal_and_a_state_directory_inside_the_tree_are_no_dead_ends() {
    assert!(is_root());
    use std::os::unix::ffi::OsStrExt;
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let odd = tree.join(std::ffi::OsStr::from_bytes(b"caf\xe9.idx"));
    write_random(&odd, 300_000, 37);
    let touched = Command::new("touch")
        .arg("-d")
        .arg("2019-01-01")
        .arg(&odd)
        .status();
    assert!(touched.unwrap().success());
    let before = facts(&odd);
    // The state directory lives inside the tree being refreshed, with a damaged journal line.
    let state = tree.join(".ssdlab-state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(
        state.join("refresh-journal.jsonl"),
        b"{\"event\":\"begin\",\xff\xfe}\n",
    )
    .unwrap();
    for _ in 0..2 {
        let out = run(&[
            "refresh",
            tree.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ]);
        expect_code(&out, 0);
        assert!(stderr(&out).contains("caf\\xe9.idx"), "{}", stderr(&out));
    }
    let after = facts(&odd);
    assert_eq!(
        (after.content_hash, after.mtime),
        (before.content_hash, before.mtime)
    );
    // The refreshed file is not selected again by --older-than before that much time has passed.
    let out = run(&[
        "refresh",
        tree.to_str().unwrap(),
        "--older-than",
        "1d",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("0 files"), "{}", stderr(&out));
}

#[test]
fn scan_moves_no_time_and_creates_nothing() {
    assert!(is_root());
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    write_random(&tree.join("sub/a.bin"), 300_000, 38);
    sh(
        "touch",
        &["-a", "-d", "2020-01-01", tree.join("sub").to_str().unwrap()],
    );
    sh(
        "touch",
        &["-a", "-d", "2020-01-01", tree.join("sub/a.bin").to_str().unwrap()],
    );
    let dir_atime = std::fs::metadata(tree.join("sub")).unwrap().atime();
    let file_atime = std::fs::metadata(tree.join("sub/a.bin")).unwrap().atime();
    let out = run(&[
        "scan",
        tree.to_str().unwrap(),
        "--state-dir",
        dir.path().join("s").to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert_eq!(
        std::fs::metadata(tree.join("sub")).unwrap().atime(),
        dir_atime,
        "directory atime"
    );
    assert_eq!(
        std::fs::metadata(tree.join("sub/a.bin")).unwrap().atime(),
        file_atime,
        "file atime"
    );
    assert!(!dir.path().join("s").exists(), "scan creates no state directory");
    let missing = dir.path().join("X");
    let out = run(&["scan", "--device", &format!("file:{}:16m", missing.display())]);
    expect_usage_error(&out, "--device");
    assert!(!missing.exists(), "a read-only scan never creates a file");
}

#[test]
fn a_file_renamed_after_a_kill_still_gets_its_times_back() {
    assert!(is_root());
    let dir = tempdir();
    let state = dir.path().join("state");
    let path = old_file(dir.path(), "moving.bin", 16 << 20, 39);
    let before = facts(&path);
    refresh_killed_mid_file(&path, &state);
    let moved = dir.path().join("moved.bin");
    std::fs::rename(&path, &moved).unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = run(&[
        "refresh",
        empty.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let after = facts(&moved);
    assert_eq!(after.content_hash, before.content_hash);
    assert_eq!(
        (after.atime, after.mtime),
        (before.atime, before.mtime),
        "{}",
        stderr(&out)
    );
}

/// What another program does to a file between a kill and the next run, in the mixed torture.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Meanwhile {
    Nothing,
    Edit,
    Chmod,
    Rename,
    Replace,
    SetXattr,
}

#[test]
fn refresh_survives_kills_mixed_with_other_programs() {
    assert!(is_root());
    let rounds = std::env::var("SSDLAB_REFRESH_MIXED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12u64);
    let seed = std::env::var("SSDLAB_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_u64);
    let dir = tempdir();
    let state = dir.path().join("state");
    let mut x = seed | 1;
    let scenarios = [
        Meanwhile::Nothing,
        Meanwhile::Edit,
        Meanwhile::Chmod,
        Meanwhile::Rename,
        Meanwhile::Replace,
        Meanwhile::SetXattr,
    ];
    for round in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let meanwhile = scenarios[(round % scenarios.len() as u64) as usize];
        let ctx = format!("seed {seed:#x}, round {round}, {meanwhile:?}");
        let sub = dir.path().join(format!("r{round}"));
        std::fs::create_dir(&sub).unwrap();
        let path = old_file(&sub, "f.bin", 2 << 20, round + 100);
        let before = facts(&path);
        let mut child = ssdlab()
            .args([
                "refresh",
                sub.to_str().unwrap(),
                "--chunk",
                "64k",
                "--rate",
                "16m",
                "--state-dir",
                state.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10 + x % 150));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            facts(&path).content_hash,
            before.content_hash,
            "{ctx}: content after the kill"
        );
        // Some time passes, then another program acts.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let mut current = path.clone();
        match meanwhile {
            Meanwhile::Nothing => {}
            Meanwhile::Edit => {
                sh(
                    "dd",
                    &[
                        "if=/dev/zero",
                        &format!("of={}", path.display()),
                        "bs=1",
                        "count=3",
                        "seek=9",
                        "conv=notrunc",
                    ],
                );
            }
            Meanwhile::Chmod => {
                sh("chmod", &["600", path.to_str().unwrap()]);
            }
            Meanwhile::Rename => {
                current = sub.join("renamed.bin");
                std::fs::rename(&path, &current).unwrap();
            }
            Meanwhile::Replace => {
                std::fs::remove_file(&path).unwrap();
                write_random(&path, 2 << 20, round + 1000);
            }
            Meanwhile::SetXattr => {
                let name = path.to_str().unwrap();
                sh("setfattr", &["-n", "user.kept", "-v", "yes", name]);
            }
        }
        let acted = facts(&current);
        // The next run comes a little later (refresh leaves files modified a moment ago alone), settles and
        // refreshes the whole directory, uninterrupted.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let out = run(&[
            "refresh",
            sub.to_str().unwrap(),
            "--chunk",
            "64k",
            "--state-dir",
            state.to_str().unwrap(),
        ]);
        expect_code(&out, 0);
        let after = facts(&current);
        assert_eq!(
            after.content_hash,
            acted.content_hash,
            "{ctx}: content: {}",
            stderr(&out)
        );
        assert_eq!(after.mode, acted.mode, "{ctx}: mode");
        assert_eq!(after.nlink, acted.nlink, "{ctx}: links");
        match meanwhile {
            Meanwhile::Nothing | Meanwhile::Chmod | Meanwhile::Rename | Meanwhile::SetXattr => assert_eq!(
                (after.atime, after.mtime),
                (before.atime, before.mtime),
                "{ctx}: times: {}",
                stderr(&out)
            ),
            // The owner's edit and the new file keep the times they have.
            Meanwhile::Edit | Meanwhile::Replace => {
                assert_eq!(after.mtime, acted.mtime, "{ctx}: mtime: {}", stderr(&out));
                assert_ne!(after.mtime, before.mtime, "{ctx}");
            }
        }
        if let Meanwhile::SetXattr = meanwhile {
            let value = sh(
                "getfattr",
                &["--only-values", "-n", "user.kept", current.to_str().unwrap()],
            );
            assert_eq!(value.trim(), "yes", "{ctx}: the xattr stays");
        }
    }
}

#[test]
fn a_full_copy_on_write_file_system_is_not_written_and_keeps_the_times() {
    // On a full btrfs an overwrite needs new space: refresh sees there is none before it writes (it would fail
    // with ENOSPC after the kernel had moved the modification time), gives way and keeps the original time. The
    // write-failure path behind it is the crash tests' (a write error that leaves the chunk as it was).
    assert!(is_root());
    let dev = LoopDevice::new(256 << 20);
    sh("mkfs.btrfs", &["-q", "-f", &dev.path]);
    let mnt = tempdir();
    sh("mount", &[&dev.path, mnt.path().to_str().unwrap()]);
    let path = old_file(mnt.path(), "old.bin", 2 << 20, 35);
    let before = facts(&path);
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "oflag=direct"])
        .arg(format!("of={}", mnt.path().join("fill").display()))
        .output();
    sh("sync", &[]);
    let state = tempdir();
    let out = run(&[
        "refresh",
        path.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    unmount_after(&mnt, || {
        let after = facts(&path);
        assert_eq!(after.content_hash, before.content_hash);
        assert_eq!(after.mtime, before.mtime, "{}", stderr(&out));
        expect_code(&out, 1);
        assert!(
            stderr(&out).contains("copy-on-write file system has") && stderr(&out).contains("times put back"),
            "{}",
            stderr(&out)
        );
    });
}

#[test]
fn refresh_streams_and_writes_what_it_did() {
    let dir = tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_random(&data.join("old.bin"), 1 << 20, 21);
    write_random(&data.join("young.bin"), 1 << 20, 22);
    sh(
        "touch",
        &["-d", "2020-01-01", data.join("old.bin").to_str().unwrap()],
    );
    let state = dir.path().join("state");
    let out_dir = dir.path().join("out");
    let out = run(&[
        "refresh",
        data.to_str().unwrap(),
        "--older-than",
        "90d",
        "--state-dir",
        state.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    expect_code(&out, 0);
    let events = json_lines(&out);
    let a = &event(&events, "analysis")["data"];
    assert_eq!(a["younger_files"], 1);
    let files = a["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{a}");
    assert_eq!(files[0]["outcome"], "refreshed");
    assert_eq!(files[0]["rewritten_bytes"], 1 << 20);
    assert!(files[0]["after_bytes_per_s"].as_f64().unwrap() > 0.0);
    let result = read_result(&out_dir);
    assert_eq!(result["kind"], "refresh");
    assert_eq!(result["analysis"], *a);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("Refresh: stale files rewritten") && html.contains("old.bin"));
    // A dry run records what it would do and writes nothing.
    let dry = run(&["refresh", data.to_str().unwrap(), "--dry-run", "--json"]);
    expect_code(&dry, 0);
    let events = json_lines(&dry);
    let files = event(&events, "analysis")["data"]["files"]
        .as_array()
        .unwrap()
        .clone();
    assert!(files.iter().all(|f| f["outcome"] == "would"), "{files:?}");
    let forget = run(&["refresh", "--forget", data.to_str().unwrap(), "--json"]);
    expect_code(&forget, 2);
    assert!(stderr(&forget).contains("--json"), "{}", stderr(&forget));
}

#[test]
fn refresh_refuses_results_inside_the_tree_it_rewrites() {
    let dir = tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_random(&data.join("old.bin"), 1 << 20, 23);
    let inside = data.join("results");
    let out = run(&[
        "refresh",
        data.to_str().unwrap(),
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--out",
        inside.to_str().unwrap(),
    ]);
    expect_usage_error(&out, "--out");
    assert!(!inside.exists(), "nothing was created in the tree");
}

/// A directory bind-mounted elsewhere inside the tree is met twice, and the walk walks it once. Before, the path
/// met first was kept, and when that was the bind mount's, refresh refused the file (its open beneath the root
/// does not cross mounts) though its own path was in the tree too. Mount points are now walked last, so the file
/// is rewritten through its own path.
#[test]
fn a_bind_mount_inside_the_tree_does_not_hide_a_files_own_path() {
    let dir = tempdir();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(root.join("z-real")).unwrap();
    let file = old_file(&root.join("z-real"), "f.bin", 300_000, 11);
    // Two bind mounts of the one directory, both met before it.
    let mut bound = Vec::new();
    for name in ["a-bind", "b-bind"] {
        std::fs::create_dir_all(root.join(name)).unwrap();
        sh(
            "mount",
            &[
                "--bind",
                root.join("z-real").to_str().unwrap(),
                root.join(name).to_str().unwrap(),
            ],
        );
        bound.push(Unmount(root.join(name)));
    }
    let before = facts(&file);
    let state = dir.path().join("state");
    let out = run(&[
        "refresh",
        root.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(text.contains(&format!("done      {}", file.display())), "{text}");
    assert!(text.contains("0 files skipped, given up or pending"), "{text}");
    assert!(
        !text.contains("-bind/"),
        "the file is named by its own path: {text}"
    );
    assert_eq!(facts(&file), before, "rewritten in place, times put back");
}
