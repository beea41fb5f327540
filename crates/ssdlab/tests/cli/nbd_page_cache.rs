//! `ssdlab serve --target file:IMG?cache=page` keeps nbdkit's promise: a write is acknowledged from the page
//! cache, and a FLUSH (or a write with FUA) is not answered until no page of the image is dirty or under
//! writeback. The oracle (`flush_oracle.py`) looks from outside the server, with cachestat(2) on the image, and
//! must catch nbdkit with its fua filter set to discard FLUSH and FUA (a known-bad peer).

use std::os::unix::net::UnixStream;

use crate::nbd::{Server, tool};
use crate::*;

/// One round per line: ("flush", dirty before, dirty after) or ("fua", dirty after, 0); the oracle's output when
/// it failed.
fn oracle(uri: &str, image: &Path) -> Result<Vec<(String, u64, u64)>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/flush_oracle.py");
    // Debian's python3 has the nbd module (python3-libnbd); a python3 earlier in PATH may not.
    let out = tool("/usr/bin/python3", &[script, uri, image.to_str().unwrap(), "6"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let n = |i: usize| f.get(i).map_or(0, |v| v.parse().unwrap());
            (f[0].to_string(), n(1), n(2))
        })
        .collect())
}

/// The oracle against an ssdlab server; a failure shows what the server said.
fn oracle_of(server: Server, image: &Path) -> (Vec<(String, u64, u64)>, Option<i32>, String) {
    match oracle(&server.uri, image) {
        Ok(rounds) => {
            let (code, stderr) = server.stop();
            (rounds, code, stderr)
        }
        Err(said) => {
            let (code, stderr) = server.stop();
            panic!("the oracle failed: {said}\nthe server (exit {code:?}) said: {stderr}");
        }
    }
}

/// A test directory on /var/tmp, a disk: a page-cache image there can be written back and dropped.
fn on_disk() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ssdlab-test-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

fn fresh_image(path: &Path) {
    std::fs::File::create(path).unwrap().set_len(64 << 20).unwrap();
}

#[test]
fn a_page_cache_export_answers_flush_and_fua_only_once_nothing_is_dirty() {
    // On disk, not tmpfs: tmpfs pages stay dirty whatever is synced.
    let dir = on_disk();
    let image = dir.path().join("page.img");
    fresh_image(&image);
    let server = Server::start(&format!("file:{}?cache=page", image.display()), &[]);
    let (rounds, code, stderr) = oracle_of(server, &image);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("?cache=page"),
        "the export says what it serves: {stderr}"
    );
    assert_eq!(rounds.len(), 12, "{rounds:?}");
    for (kind, before, after) in &rounds {
        match kind.as_str() {
            "flush" => {
                assert!(*before > 0, "the writes never reached the page cache: {rounds:?}");
                assert_eq!(
                    *after, 0,
                    "a FLUSH was answered with pages still dirty: {rounds:?}"
                );
            }
            _ => assert_eq!(
                *before, 0,
                "a FUA write was answered with pages dirty: {rounds:?}"
            ),
        }
    }

    // O_DIRECT (the default) leaves nothing in the page cache to flush at all.
    let direct = dir.path().join("direct.img");
    fresh_image(&direct);
    let server = Server::start(&format!("file:{}", direct.display()), &[]);
    let (rounds, _, _) = oracle_of(server, &direct);
    assert!(rounds.iter().all(|r| r.1 == 0 && r.2 == 0), "{rounds:?}");

    // The negative control: nbdkit's fua filter with fuamode=discard ignores FLUSH and FUA, and the oracle must
    // see the dirty pages it leaves.
    let peer = dir.path().join("peer.img");
    fresh_image(&peer);
    let socket = dir.path().join("nbdkit.sock");
    let _nbdkit = Killed(
        Command::new("nbdkit")
            .args([
                "--foreground",
                "-U",
                socket.to_str().unwrap(),
                "--filter=fua",
                "file",
            ])
            .arg(&peer)
            .arg("fuamode=discard")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nbdkit starts (scripts/test.sh installs it)"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while UnixStream::connect(&socket).is_err() {
        assert!(std::time::Instant::now() < deadline, "nbdkit never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let rounds = oracle(&format!("nbd+unix:///?socket={}", socket.display()), &peer)
        .unwrap_or_else(|said| panic!("the oracle failed against nbdkit: {said}"));
    assert!(
        rounds
            .iter()
            .any(|(kind, _, after)| kind == "flush" && *after > 0)
            && rounds.iter().any(|(kind, dirty, _)| kind == "fua" && *dirty > 0),
        "the oracle no longer catches nbdkit discarding FLUSH and FUA: {rounds:?}"
    );
}

/// Copies the whole export into `to`: with nbdcopy (structured replies, four connections, 256 KiB requests), or
/// with libnbd from Python asking for simple replies (1 MiB requests, one at a time).
fn copy_out(uri: &str, to: &Path, simple: bool) {
    let out = if simple {
        let script = "import nbd, sys\n\
            h = nbd.NBD(); h.set_request_structured_replies(False); h.connect_uri(sys.argv[1])\n\
            size = h.get_size(); out = open(sys.argv[2], 'wb'); at = 0\n\
            while at < size:\n    n = min(1 << 20, size - at); out.write(h.pread(n, at)); at += n\n";
        tool("/usr/bin/python3", &["-c", script, uri, to.to_str().unwrap()])
    } else {
        tool("nbdcopy", &[uri, to.to_str().unwrap()])
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn large_reads_of_a_page_cache_export_are_the_images_bytes_cold_and_warm_with_either_reply() {
    // On disk, not tmpfs, so the image's pages can be dropped and its first reads go through the device.
    let dir = on_disk();
    let image = dir.path().join("page.img");
    crate::nbd::random_file(&image, 24 << 20, 5);
    let expected = std::fs::read(&image).unwrap();
    let server = Server::start(&format!("file:{}?cache=page", image.display()), &[]);
    for (round, simple) in [(0, false), (1, false), (2, true), (3, true)] {
        if round % 2 == 0 {
            // Written back, then dropped from the page cache: cold.
            sh("sync", &[]);
            sh(
                "dd",
                &[
                    &format!("if={}", image.display()),
                    "iflag=nocache",
                    "count=0",
                    "status=none",
                ],
            );
        }
        let copy = dir.path().join(format!("copy-{round}.img"));
        copy_out(&server.uri, &copy, simple);
        assert!(
            std::fs::read(&copy).unwrap() == expected,
            "round {round} (simple replies: {simple}) read other bytes than the image's"
        );
    }
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}
