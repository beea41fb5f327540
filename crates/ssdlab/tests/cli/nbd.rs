//! `ssdlab serve` against real NBD clients (nbdinfo, nbdcopy, qemu-io) and against a client that breaks the
//! protocol. Every server is stopped by a guard's `Drop`, even when a test fails.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use crate::*;

/// A running `ssdlab serve` on a Unix socket; SIGTERM and a wait on drop.
pub(crate) struct Server {
    child: Option<std::process::Child>,
    pub(crate) socket: PathBuf,
    pub(crate) uri: String,
    _dir: tempfile::TempDir,
}

impl Server {
    pub(crate) fn start(target: &str, extra: &[&str]) -> Self {
        let dir = tempdir();
        let socket = dir.path().join("nbd.sock");
        // serve_at returns once the server has greeted, that is once its target is open.
        let child = serve_at(target, &socket, extra);
        let uri = format!("nbd+unix:///?socket={}", socket.display());
        Server {
            child: Some(child),
            socket,
            uri,
            _dir: dir,
        }
    }

    /// Sends SIGTERM and returns the exit code and stderr.
    pub(crate) fn stop(mut self) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        sh("kill", &["-TERM", &child.id().to_string()]);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Sends SIGTERM and waits for the exit, at most `guard` (a hang guard: past it the server is killed and
    /// the test fails); returns the exit code and stderr.
    pub(crate) fn stop_within(mut self, guard: std::time::Duration) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        sh("kill", &["-TERM", &child.id().to_string()]);
        let deadline = std::time::Instant::now() + guard;
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the server did not stop within {guard:?} of SIGTERM");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn tool(name: &str, args: &[&str]) -> Output {
    Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name} runs (scripts/test.sh installs it): {e}"))
}

pub(crate) fn random_file(path: &Path, bytes: usize, seed: u8) {
    let mut data = vec![0u8; bytes];
    let mut x = 0x9E37_79B9u32 ^ u32::from(seed);
    for b in &mut data {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    std::fs::write(path, data).unwrap();
}

#[test]
fn real_clients_see_the_export_round_trip_its_data_and_the_server_stops_cleanly() {
    let dir = tempdir();
    let image = dir.path().join("export.img");
    let server = Server::start(&file_target(&image, Some("32m")), &[]);
    let info = tool("nbdinfo", &[&server.uri]);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    for line in [
        "export-size: 33554432",
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
    ] {
        assert!(text.contains(line), "nbdinfo lacks {line}:\n{text}");
    }
    // nbdcopy in and out, compared byte for byte.
    let source = dir.path().join("source.img");
    let back = dir.path().join("back.img");
    random_file(&source, 32 << 20, 1);
    assert!(
        tool("nbdcopy", &[source.to_str().unwrap(), &server.uri])
            .status
            .success()
    );
    assert!(
        tool("nbdcopy", &[&server.uri, back.to_str().unwrap()])
            .status
            .success()
    );
    assert!(
        std::fs::read(&source).unwrap() == std::fs::read(&back).unwrap(),
        "nbdcopy round trip"
    );
    // qemu-io: patterns, FUA, flush, zeroes and discard, each read back.
    let out = tool(
        "qemu-io",
        &[
            "-f",
            "raw",
            &server.uri,
            "-c",
            "write -P 0xab 1M 2M",
            "-c",
            "flush",
            "-c",
            "read -P 0xab 1M 2M",
            "-c",
            "write -P 0xcd -f 5M 64k",
            "-c",
            "read -P 0xcd 5M 64k",
            "-c",
            "write -z 8M 4M",
            "-c",
            "read -P 0 8M 4M",
            "-c",
            "discard 16M 1M",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !text.contains("failed") && !text.contains("error"),
        "{text}"
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("0 errors, 0 protocol violations"), "{stderr}");
    assert!(!dir.path().join("nbd.sock").exists());
    // The file holds what the clients wrote.
    let data = std::fs::read(&image).unwrap();
    assert!(data[1 << 20..3 << 20].iter().all(|&b| b == 0xab));
    assert!(data[8 << 20..12 << 20].iter().all(|&b| b == 0));
}

#[test]
fn a_cached_export_is_destaged_when_the_server_is_stopped() {
    let dir = tempdir();
    let image = dir.path().join("cached.img");
    let target = format!("cached:{}?size=64m", file_target(&image, Some("16m")));
    let record = dir.path().join("record");
    // Without the poll after each reply: the loop then always sleeps in its wait, and the record says so.
    let server = Server::start(&target, &["--out", record.to_str().unwrap(), "--poll-us", "0"]);
    let source = dir.path().join("source.img");
    random_file(&source, 16 << 20, 2);
    // Small requests, so the writes are absorbed by the cache rather than sent around it.
    let out = tool(
        "nbdcopy",
        &["--request-size=65536", source.to_str().unwrap(), &server.uri],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("dirty now 0 bytes"), "{stderr}");
    assert!(
        std::fs::read(&source).unwrap() == std::fs::read(&image).unwrap(),
        "the file holds the copy"
    );
    // The session's record: what nbdcopy wrote, and the cache destaged to the last byte.
    let json = std::fs::read_to_string(record.join("result.json")).unwrap();
    let result = ssdlab_core::schema::RunResult::from_json(&json).unwrap();
    let ssdlab_core::schema::Analysis::Serve(a) = &result.analysis else {
        panic!("{:?}", result.analysis);
    };
    let ssdlab_core::schema::options::RunOptions::Serve(flags) = &result.options else {
        panic!("{:?}", result.options);
    };
    assert_eq!(flags.poll_us, Some(0));
    assert_eq!(
        (a.export_name.as_str(), a.export_size_bytes),
        ("ssdlab", 16 << 20)
    );
    assert_eq!(a.stats.bytes_written, 16 << 20);
    let cache = a.cache.as_ref().expect("a cached export's counters");
    assert_eq!(cache.dirty_bytes, 0);
    // What the cache absorbed it destaged; the sequential run past its cutoff went around it.
    assert_eq!(
        cache.destaged_bytes + cache.sequential_bypass_bytes,
        16 << 20,
        "{cache:?}"
    );
    let errors = schema_errors(&result_schema(), &[record.join("result.json")]);
    assert!(errors.is_empty(), "{errors}");
    assert!(
        std::fs::read_to_string(record.join("report.html"))
            .unwrap()
            .contains("NBD export")
    );
}

/// Connects to a server that may have bound its socket but not yet called listen(2) (the file appears at bind).
pub(crate) fn connect(socket: &Path) -> UnixStream {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match UnixStream::connect(socket) {
            Ok(s) => return s,
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("connecting to {}: {e}", socket.display()),
        }
    }
}

/// The client side of the handshake, by hand: fixed newstyle, NBD_OPT_GO asking for block sizes.
pub(crate) fn negotiate(socket: &Path) -> UnixStream {
    let mut s = connect(socket);
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut option = b"IHAVEOPT".to_vec();
    option.extend_from_slice(&7u32.to_be_bytes());
    option.extend_from_slice(&8u32.to_be_bytes());
    option.extend_from_slice(&0u32.to_be_bytes());
    option.extend_from_slice(&1u16.to_be_bytes());
    option.extend_from_slice(&3u16.to_be_bytes());
    s.write_all(&option).unwrap();
    loop {
        let mut header = [0u8; 20];
        s.read_exact(&mut header).unwrap();
        let kind = u32::from_be_bytes(header[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(header[16..20].try_into().unwrap());
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data).unwrap();
        if kind == 1 {
            return s;
        }
        assert!(
            kind < 1 << 31,
            "option error {kind:#x}: {}",
            String::from_utf8_lossy(&data)
        );
    }
}

fn request(command: u16, offset: u64, length: u32) -> Vec<u8> {
    let mut r = 0x2560_9513u32.to_be_bytes().to_vec();
    r.extend_from_slice(&0u16.to_be_bytes());
    r.extend_from_slice(&command.to_be_bytes());
    r.extend_from_slice(&0x1234u64.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&length.to_be_bytes());
    r
}

#[test]
fn bad_requests_get_nbd_errors_a_broken_stream_loses_only_its_connection() {
    let dir = tempdir();
    // A read-only export serves what is there: it never creates a file.
    std::fs::File::create(dir.path().join("e.img"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let server = Server::start(&file_target(&dir.path().join("e.img"), None), &["--read-only"]);
    let mut s = negotiate(&server.socket);
    let expect_error = |s: &mut UnixStream, req: Vec<u8>, errno: u32| {
        s.write_all(&req).unwrap();
        let mut reply = [0u8; 16];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), errno);
        assert_eq!(u64::from_be_bytes(reply[8..16].try_into().unwrap()), 0x1234);
    };
    expect_error(&mut s, request(0, 1 << 20, 4096), 22); // beyond the end: EINVAL
    expect_error(&mut s, request(0, 100, 512), 22); // unaligned: EINVAL
    expect_error(&mut s, request(4, 0, 4096), 1); // trim on a read-only export: EPERM
    expect_error(&mut s, request(99, 0, 0), 22); // unknown command: EINVAL
    expect_error(&mut s, request(7, 0, 4096), 22); // block status without a metadata context: EINVAL
    // Garbage where a request header belongs: the server hangs up on this client only.
    s.write_all(&[0xee; 28]).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no reply to garbage");
    // Garbage during the handshake too.
    let mut g = UnixStream::connect(&server.socket).unwrap();
    let _ = g.write_all(b"not an nbd client at all");
    drop(g);
    let info = tool("nbdinfo", &["--size", &server.uri]);
    assert_eq!(String::from_utf8_lossy(&info.stdout).trim(), "1048576");
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("1 protocol violations"), "{stderr}");
}

#[test]
fn serve_refuses_what_it_should_and_touches_nothing() {
    let dir = tempdir();
    let image = dir.path().join("r.img");
    let target = file_target(&image, Some("1m"));
    let out = run(&["serve", "--target", &target, "--listen", "0.0.0.0:0"]);
    expect_usage_error(&out, "--allow-remote");
    let out = run(&[
        "serve",
        "--target",
        &target,
        "--socket",
        "/nonexistent/s",
        "--poll-us",
        "1001",
    ]);
    // clap's own refusal: exit 2, the flag and the range allowed.
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("--poll-us") && stderr(&out).contains("0..=1000"),
        "{}",
        stderr(&out)
    );
    let taken = dir.path().join("taken");
    std::fs::write(&taken, b"keep me").unwrap();
    let out = run(&["serve", "--target", &target, "--socket", taken.to_str().unwrap()]);
    expect_usage_error(&out, "--socket");
    assert_eq!(std::fs::read(&taken).unwrap(), b"keep me");
    let out = run(&["serve", "--target", &target]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("--socket"), "{}", stderr(&out));
}

#[test]
fn a_writable_export_of_a_block_device_passes_the_safety_gate() {
    let dev = LoopDevice::new(16 << 20);
    let dir = tempdir();
    let socket = dir.path().join("s.sock");
    let out = run(&[
        "serve",
        "--target",
        &dev.path,
        "--socket",
        socket.to_str().unwrap(),
    ]);
    expect_usage_error(&out, "--allow-destroy");
    assert!(!socket.exists(), "the socket is removed after a refusal");
    // Read-only needs no permission.
    let server = Server::start(&dev.path, &["--read-only"]);
    let info = tool("nbdinfo", &[&server.uri]);
    assert!(String::from_utf8_lossy(&info.stdout).contains("is_read_only: true"));
    let (code, _) = server.stop();
    assert_eq!(code, Some(0));
    assert_eq!(dev.image_blocks(), 0, "nothing was written");
}

/// Commands that undo what a test set up (unmount, detach, stop), run in reverse order on drop.
struct Undo(Vec<Vec<String>>);

impl Undo {
    fn push(&mut self, command: &[&str]) {
        self.0.push(command.iter().map(|s| s.to_string()).collect());
    }
    /// Runs the newest undo now (it succeeded or not), so the order of teardown is the test's.
    fn pop(&mut self) {
        if let Some(c) = self.0.pop() {
            let _ = Command::new(&c[0]).args(&c[1..]).output();
        }
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        while !self.0.is_empty() {
            self.pop();
        }
    }
}

/// nbdfuse exposes the export as a file; losetup makes it a block device. Returns the loop device.
fn attach(server: &Server, fuse_dir: &Path, undo: &mut Undo) -> String {
    let disk = fuse_dir.join("disk");
    let mut fuse = Command::new("nbdfuse")
        .arg(&disk)
        .args(["--unix", server.socket.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdfuse runs (scripts/test.sh installs libnbd-bin and fuse3)");
    undo.push(&["fusermount3", "-u", fuse_dir.to_str().unwrap()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !disk.exists() {
        assert!(fuse.try_wait().unwrap().is_none(), "nbdfuse exited");
        assert!(
            std::time::Instant::now() < deadline,
            "nbdfuse never showed the export"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // nbdfuse exits when fusermount3 unmounts it; reap it then.
    std::thread::spawn(move || fuse.wait());
    let loop_dev = sh("losetup", &["-f", "--show", disk.to_str().unwrap()]);
    undo.push(&["losetup", "-d", &loop_dev]);
    loop_dev
}

fn tree() -> Vec<(String, Vec<u8>)> {
    (0..40)
        .map(|i| {
            let len = 1 + (i * 7919 % 300_000);
            let data: Vec<u8> = (0..len).map(|j| (j * 31 + i * 17) as u8).collect();
            (format!("dir{}/file{i}.bin", i % 5), data)
        })
        .collect()
}

#[test]
fn ext4_on_a_cached_export_through_nbdfuse_and_a_loop_device_survives_a_fresh_server() {
    let dir = tempdir();
    let image = dir.path().join("fs.img");
    let fuse_dir = dir.path().join("fuse");
    let mount_dir = dir.path().join("mnt");
    std::fs::create_dir_all(&fuse_dir).unwrap();
    std::fs::create_dir_all(&mount_dir).unwrap();
    {
        let server = Server::start(
            &format!("cached:{}?size=16m", file_target(&image, Some("64m"))),
            &[],
        );
        let mut undo = Undo(Vec::new());
        let dev = attach(&server, &fuse_dir, &mut undo);
        sh("mkfs.ext4", &["-q", "-F", &dev]);
        sh("mount", &[&dev, mount_dir.to_str().unwrap()]);
        undo.push(&["umount", mount_dir.to_str().unwrap()]);
        for (name, data) in tree() {
            let path = mount_dir.join(&name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, data).unwrap();
        }
        undo.pop(); // umount
        undo.pop(); // losetup -d
        undo.pop(); // fusermount3 -u
        let (code, stderr) = server.stop();
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains("dirty now 0 bytes"), "{stderr}");
    }
    // The image, read directly: a clean file system.
    let fsck = Command::new("e2fsck").args(["-fn"]).arg(&image).output().unwrap();
    assert!(
        fsck.status.success(),
        "e2fsck -fn: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    // Through a fresh server without the cache, every file reads back as written.
    let server = Server::start(&file_target(&image, None), &["--read-only"]);
    let mut undo = Undo(Vec::new());
    let dev = attach(&server, &fuse_dir, &mut undo);
    sh("mount", &["-o", "ro", &dev, mount_dir.to_str().unwrap()]);
    undo.push(&["umount", mount_dir.to_str().unwrap()]);
    for (name, data) in tree() {
        assert!(
            std::fs::read(mount_dir.join(&name)).unwrap() == data,
            "{name} differs after remounting"
        );
    }
}

#[test]
fn fio_writes_and_verifies_through_the_nbd_engine_on_a_cached_export() {
    let dir = tempdir();
    let image = dir.path().join("fio.img");
    let server = Server::start(
        &format!("cached:{}?size=4m", file_target(&image, Some("32m"))),
        &[],
    );
    let out = tool(
        "fio",
        &[
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", server.uri),
            "--rw=randwrite",
            "--bs=4k",
            "--size=32m",
            "--iodepth=8",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--output-format=json",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "fio: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let job = &json["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["write"]["total_ios"], 8192, "every block written once");
    assert!(
        job["read"]["total_ios"].as_u64().unwrap() >= 8192,
        "and read back to verify"
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

/// A libnbd client (Python binding) that writes 64 KiB at 32 MiB without a flush, asks for the block status of
/// that MiB on the same connection, then lets nbdcopy copy the whole export over another connection while the
/// write may still be only in the server's cache. Prints the first descriptor and whether the copy holds the
/// written bytes.
const DIRTY_STATUS_PROBE: &str = r#"
import nbd, subprocess, sys
uri, copy = sys.argv[1], sys.argv[2]
h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_uri(uri)
h.pwrite(b"\x55" * 65536, 32 << 20)
seen = []
h.block_status(1 << 20, 32 << 20, lambda meta, off, entries, err: seen.extend(entries) or 0)
print("first", seen[0], seen[1])
one = []
h.block_status(1 << 20, 0, lambda meta, off, entries, err: one.extend(entries) or 0, nbd.CMD_FLAG_REQ_ONE)
print("reqone", len(one) // 2, one[0])
run = subprocess.run(["nbdcopy", uri, copy], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
with open(copy, "rb") as f:
    f.seek(32 << 20)
    print("copied", f.read(65536) == b"\x55" * 65536)
h.shutdown()
"#;

/// Runs the probe against `uri` and returns (length, flags) of the first descriptor and whether the copy kept
/// the write.
fn dirty_status_probe(uri: &str, copy: &Path) -> ((u64, u32), bool) {
    // Debian's python3 has the nbd module (python3-libnbd); a python3 earlier in PATH may not.
    let out = tool(
        "/usr/bin/python3",
        &["-c", DIRTY_STATUS_PROBE, uri, copy.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .trim()
            .to_string()
    };
    let first: Vec<u64> = field("first ").split(' ').map(|v| v.parse().unwrap()).collect();
    let req_one: Vec<u64> = field("reqone ").split(' ').map(|v| v.parse().unwrap()).collect();
    assert!(
        req_one[0] == 1 && req_one[1] <= 1 << 20,
        "REQ_ONE: one descriptor within the request: {req_one:?}"
    );
    ((first[0], first[1] as u32), field("copied ") == "True")
}

#[test]
fn block_status_maps_holes_and_reports_dirty_cached_blocks_as_data_where_nbdkits_cache_filter_loses_them() {
    let dir = tempdir();
    let image = dir.path().join("sparse.img");
    std::fs::File::create(&image).unwrap().set_len(64 << 20).unwrap();
    {
        // One 4 KiB block of data at 8 MiB; the rest of the file is a hole.
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
        f.write_all_at(&[0xa5; 4096], 8 << 20).unwrap();
        f.sync_all().unwrap();
    }
    let server = Server::start(&format!("cached:file:{}", image.display()), &[]);
    let map = tool("nbdinfo", &["--map", &server.uri]);
    let text = String::from_utf8_lossy(&map.stdout);
    assert!(map.status.success(), "{}", String::from_utf8_lossy(&map.stderr));
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        vec![
            vec!["0", "8388608", "3", "hole,zero"],
            vec!["8388608", "4096", "0", "data"],
            vec!["8392704", "58716160", "3", "hole,zero"],
        ],
        "nbdinfo --map of the sparse file:\n{text}"
    );
    // A write still in the cache is data, and nbdcopy (which skips holes) copies it.
    let ((len, flags), copied) = dirty_status_probe(&server.uri, &dir.path().join("copy.img"));
    assert_eq!(
        (len, flags),
        (65536, 0),
        "the dirty 64 KiB must be reported as data"
    );
    assert!(copied, "nbdcopy lost a write the cache held");
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");

    // The negative control: nbdkit's cache filter (writeback) passes the file's holes through while the data
    // sits in its cache, so the same probe must catch it reporting a hole and nbdcopy skipping the write.
    let peer_image = dir.path().join("peer.img");
    std::fs::File::create(&peer_image)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let socket = dir.path().join("nbdkit.sock");
    let mut nbdkit = Command::new("nbdkit")
        .args([
            "--foreground",
            "-U",
            socket.to_str().unwrap(),
            "--filter=cache",
            "file",
        ])
        .arg(&peer_image)
        .args(["cache=writeback", "cache-max-size=64M"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdkit starts (scripts/test.sh installs it)");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while UnixStream::connect(&socket).is_err() {
        assert!(std::time::Instant::now() < deadline, "nbdkit never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///?socket={}", socket.display());
    let ((_, peer_flags), peer_copied) = dirty_status_probe(&uri, &dir.path().join("peer-copy.img"));
    let _ = nbdkit.kill();
    let _ = nbdkit.wait();
    assert!(
        peer_flags & 1 == 1 && !peer_copied,
        "the probe no longer catches nbdkit's cache filter (flags {peer_flags}, copied {peer_copied})"
    );
}

/// #28 defect 6: an export of a virtual drive keeps what clients write (a sparse store), so qemu-io's
/// write-then-read checks pass and the drive's NAND counters move.
#[test]
fn an_export_of_a_virtual_drive_keeps_what_clients_write() {
    let dir = tempdir();
    let out = dir.path().join("record");
    let server = Server::start("sim:840evo-250g?scale=1/256", &["--out", out.to_str().unwrap()]);
    let run = tool(
        "qemu-io",
        &[
            "-f",
            "raw",
            &server.uri,
            "-c",
            "write -P 0xab 1M 2M",
            "-c",
            "flush",
            "-c",
            "read -P 0xab 1M 2M",
            "-c",
            "write -P 0xcd 1536k 4k",
            "-c",
            "read -P 0xcd 1536k 4k",
            "-c",
            "read -P 0xab 1540k 4k",
            "-c",
            "discard 2M 1M",
            "-c",
            "read -P 0 2M 1M",
            "-c",
            "read -P 0 16M 64k",
        ],
    );
    let text = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success()
            && !text.contains("failed")
            && !text.contains("error")
            && !text.contains("mismatch"),
        "{text}"
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let notes = read_result(&out)["target"]["notes"].to_string();
    assert!(notes.contains("keeps the data written"), "{notes}");
}

/// The red team's F4: the server removes its socket when it stops only if the path still holds that socket.
#[test]
fn a_stopped_server_never_removes_a_file_put_where_its_socket_was() {
    let dir = tempdir();
    let image = dir.path().join("i.img");
    std::fs::File::create(&image).unwrap().set_len(1 << 20).unwrap();
    let socket = dir.path().join("s.sock");
    let child = serve_at(&file_target(&image, None), &socket, &["--read-only"]);
    std::fs::rename(&socket, dir.path().join("moved.sock")).unwrap();
    std::fs::write(&socket, b"precious").unwrap();
    sh("kill", &["-TERM", &child.id().to_string()]);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&socket).unwrap(), b"precious");
}
