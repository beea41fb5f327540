//! `ssdlab serve` against hostile and careless clients (issue 36): a handshake trickled a byte at a time and
//! connections that say nothing, a client that never reads its replies, clients that hang up in the middle of
//! a write's payload, and more connections than the server takes. Each must hold up only itself, and leave
//! nothing behind once it is gone. The clients are `nbd_clients.py` (python3-libnbd for the well-behaved one);
//! every server is stopped by its guard, even when a test fails. Nothing here asserts a time: deadlines are
//! hang guards, and what is checked is order, memory, descriptors and answers.

use std::io::Write;

use crate::nbd::{Server, connect, negotiate, random_file};
use crate::*;

/// Runs a subcommand of `nbd_clients.py` and returns its JSON answer.
pub(crate) fn clients(args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/nbd_clients.py");
    // Debian's python3 has the nbd module (python3-libnbd); a python3 earlier in PATH may not.
    let out = Command::new("/usr/bin/python3")
        .arg(script)
        .args(args)
        .output()
        .expect("Debian's python3 runs (scripts/test.sh installs python3-libnbd)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nbd_clients.py {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn export(dir: &Path, size: &str) -> String {
    file_target(&dir.join("export.img"), Some(size))
}

#[test]
fn a_trickled_or_silent_handshake_holds_up_nobody_and_is_cut_off_at_its_deadline() {
    let dir = tempdir();
    let server = Server::start(&export(dir.path(), "16m"), &[]);
    let socket = server.socket.to_str().unwrap().to_string();
    let seen = clients(&["handshake-hostile", &socket, &(16 << 20).to_string()]);
    // The well-behaved client connected after them and was done while the trickler was still at it.
    let good_done = seen["good_done_s"].as_f64().unwrap();
    let cut = seen["trickler_cut_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("the server never ended the trickled handshake: {seen}"));
    assert!(
        good_done < cut,
        "the well-behaved client waited for another client's handshake: {seen}"
    );
    assert_eq!(
        seen["silent_closed"], 10,
        "silent connections are closed at the deadline: {seen}"
    );
    // SIGTERM while a handshake is being trickled: the server stops (the trickler is bounded, the guard far
    // longer than the handshake deadline would need).
    let mut trickler = connect(&server.socket);
    let stop_trickling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop_trickling.clone();
    let thread = std::thread::spawn(move || {
        for b in 3u32
            .to_be_bytes()
            .iter()
            .chain(b"IHAVEOPT".iter())
            .cycle()
            .take(300)
        {
            if flag.load(std::sync::atomic::Ordering::Relaxed) || trickler.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (code, stderr) = server.stop_within(std::time::Duration::from_secs(20));
    stop_trickling.store(true, std::sync::atomic::Ordering::Relaxed);
    thread.join().unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("failed handshakes"), "{stderr}");
}

#[test]
fn a_client_that_never_reads_its_replies_holds_a_bounded_amount_of_memory() {
    let dir = tempdir();
    let image = dir.path().join("export.img");
    random_file(&image, 64 << 20, 3);
    let server = Server::start(&file_target(&image, None), &[]);
    let socket = server.socket.to_str().unwrap().to_string();
    // 200 pipelined 4 MiB reads: 800 MiB of replies if the server took them all.
    let seen = clients(&[
        "unread-replies",
        &socket,
        &(64 << 20).to_string(),
        &server.pid().to_string(),
        "200",
    ]);
    let grew = seen["rss_peak_kib"].as_i64().unwrap() - seen["rss_before_kib"].as_i64().unwrap();
    assert!(
        grew < 100 << 10,
        "the server grew by {grew} KiB for a client that reads nothing: {seen}"
    );
    assert!(
        seen["good_reads"].as_u64().unwrap() > 0,
        "a well-behaved client is served meanwhile: {seen}"
    );
    assert_eq!(
        seen["fds_after"], seen["fds_before"],
        "the hog's connection is closed once it hangs up: {seen}"
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn clients_that_hang_up_in_the_middle_of_a_write_leave_nothing_behind() {
    let dir = tempdir();
    let server = Server::start(&export(dir.path(), "16m"), &[]);
    let socket = server.socket.to_str().unwrap().to_string();
    let seen = clients(&["hangups", &socket, &server.pid().to_string(), "80"]);
    assert!(
        seen["fds_after"].as_u64() <= seen["fds_before"].as_u64(),
        "connections left open after their clients hung up: {seen}"
    );
    let grew = seen["rss_after_kib"].as_i64().unwrap() - seen["rss_before_kib"].as_i64().unwrap();
    assert!(
        grew < 64 << 10,
        "the server kept {grew} KiB of abandoned payloads: {seen}"
    );
    // Still serving.
    let info = crate::nbd::tool("nbdinfo", &["--size", &server.uri]);
    assert_eq!(
        String::from_utf8_lossy(&info.stdout).trim(),
        (16 << 20).to_string()
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn past_the_connection_limit_a_client_is_told_why_and_is_served_once_there_is_room() {
    let dir = tempdir();
    let server = Server::start(&export(dir.path(), "16m"), &["--max-connections", "8"]);
    let socket = server.socket.to_str().unwrap().to_string();
    // The guard's own probe connection is gone by now; 8 idle ones fill the server.
    let seen = clients(&[
        "crowd",
        &socket,
        &(16 << 20).to_string(),
        &server.pid().to_string(),
        "8",
        "0",
    ]);
    assert_eq!(seen["idle_connected"], 8, "{seen}");
    // The reason is in the option's error reply (libnbd names only the error kind).
    let refusal = seen["one_more_raw"].as_str().unwrap();
    assert!(
        refusal.contains("0x80000002") && refusal.contains("too many connections (the limit is 8)"),
        "the ninth client should hear why it is refused: {seen}"
    );
    assert!(
        seen["one_more"].as_str().unwrap().contains("policy"),
        "libnbd's client hears a policy refusal: {seen}"
    );
    assert_eq!(seen["after_one_left"], "served", "{seen}");
    // A connection that was refused and one that negotiated by hand are both fine afterwards.
    drop(negotiate(&server.socket));
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("(0 refused"), "{stderr}");
}
