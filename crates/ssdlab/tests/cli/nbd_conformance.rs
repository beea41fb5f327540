//! `ssdlab serve` and what the NBD protocol asks of a server (issue 36): an export of a file that is not a
//! whole number of blocks (at its exact size, #45), the protocol's default block sizes for a client that negotiates none (12.5 MiB
//! requests at any alignment), the errors the protocol names for questionable requests, and a random
//! transaction log over three connections checked against a model, with multi-connection flush coverage,
//! over `file:` and `cached:` in several configurations. The clients are `nbd_clients.py`, nbdinfo, nbdcopy
//! and qemu-img; every server is stopped by its guard, even when a test fails.

use serde_json::json;

use crate::nbd::{Server, random_file, tool};
use crate::nbd_hostile::clients;
use crate::*;

/// #45 defect 10: a file that is not a whole number of blocks is exported at its exact size, as nbdkit's file
/// plugin exports it (checked side by side): nbdinfo sees every byte, nbdcopy and qemu-img copy the file
/// exactly, and qemu-io writes across the last whole block's end and reads it back, on `file:` and `cached:`,
/// through io_uring and pread/pwrite, without the file ever changing length.
#[test]
fn a_file_that_is_not_whole_blocks_is_exported_whole_and_real_clients_copy_and_write_it() {
    let dir = tempdir();
    for (size, seed) in [(1_000_001usize, 4u8), (511, 5)] {
        let image = dir.path().join(format!("odd-{size}.img"));
        random_file(&image, size, seed);
        let want = std::fs::read(&image).unwrap();
        // The peer: nbdkit's file plugin exports the exact size.
        let peer_socket = dir.path().join("nbdkit.sock");
        let mut peer = Command::new("nbdkit")
            .args([
                "--foreground",
                "--readonly",
                "--unix",
                peer_socket.to_str().unwrap(),
                "file",
            ])
            .arg(&image)
            .spawn()
            .expect("nbdkit runs (scripts/test.sh installs it)");
        for _ in 0..200 {
            if peer_socket.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let peer_size = tool(
            "nbdinfo",
            &[
                "--size",
                &format!("nbd+unix:///?socket={}", peer_socket.display()),
            ],
        );
        let _ = peer.kill();
        let _ = peer.wait();
        let _ = std::fs::remove_file(&peer_socket);
        assert_eq!(
            String::from_utf8_lossy(&peer_size.stdout).trim(),
            size.to_string(),
            "nbdkit"
        );
        for (target, engine) in [
            (file_target(&image, None), "auto"),
            (file_target(&image, None), "psync"),
            (format!("cached:{}", file_target(&image, None)), "auto"),
        ] {
            let server = Server::start(&target, &["--engine", engine]);
            let info = tool("nbdinfo", &["--size", &server.uri]);
            assert_eq!(
                String::from_utf8_lossy(&info.stdout).trim(),
                size.to_string(),
                "{target}"
            );
            let map = tool("nbdinfo", &["--map", &server.uri]);
            assert!(
                map.status.success(),
                "nbdinfo --map: {}",
                String::from_utf8_lossy(&map.stderr)
            );
            let copy = dir.path().join("copy.img");
            let _ = std::fs::remove_file(&copy);
            let out = tool("nbdcopy", &[&server.uri, copy.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "nbdcopy: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(std::fs::read(&copy).unwrap() == want, "{target}: nbdcopy's copy");
            let converted = dir.path().join("converted.img");
            let _ = std::fs::remove_file(&converted);
            let out = tool(
                "qemu-img",
                &[
                    "convert",
                    "-f",
                    "raw",
                    "-O",
                    "raw",
                    &server.uri,
                    converted.to_str().unwrap(),
                ],
            );
            assert!(
                out.status.success(),
                "qemu-img convert: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // qemu's block layer counts whole 512-byte sectors, so its copy ends in zeroes up to the next one, as
            // it does from nbdkit.
            let copied = std::fs::read(&converted).unwrap();
            assert_eq!(
                copied.len(),
                size.next_multiple_of(512),
                "{target}: qemu-img's copy"
            );
            assert!(copied[..size] == want[..], "{target}: qemu-img's copy");
            assert!(
                copied[size..].iter().all(|&b| b == 0),
                "{target}: zeroes past the end"
            );
            // A write of the last 300 bytes (across the end of the last whole 512-byte block), read back.
            let at = size - 300;
            let out = tool(
                "qemu-io",
                &[
                    "-f",
                    "raw",
                    &server.uri,
                    "-c",
                    &format!("write -P 0x5a {at} 300"),
                    "-c",
                    "flush",
                    "-c",
                    &format!("read -P 0x5a {at} 300"),
                ],
            );
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && !said.contains("fail"),
                "{target}: qemu-io: {said}"
            );
            let (code, stderr) = server.stop();
            assert_eq!(code, Some(0), "{stderr}");
            let now = std::fs::read(&image).unwrap();
            assert_eq!(now.len(), size, "{target}: the file never changes length");
            assert!(
                now[..at] == want[..at],
                "{target}: nothing before the write changed"
            );
            assert!(
                now[at..].iter().all(|&b| b == 0x5a),
                "{target}: every byte written"
            );
            std::fs::write(&image, &want).unwrap();
        }
    }
}

#[test]
fn a_client_that_negotiates_nothing_is_served_the_protocols_defaults() {
    for target in ["file", "cached"] {
        let dir = tempdir();
        let file = file_target(&dir.path().join("defaults.img"), Some("32m"));
        let target = match target {
            "file" => file,
            _ => format!("cached:{file}?size=2m"),
        };
        let server = Server::start(&target, &[]);
        let seen = clients(&["defaults", server.socket.to_str().unwrap()]);
        for (key, want) in [
            ("write_error", json!(0)),
            ("read_error", json!(0)),
            ("read_back", json!(true)),
            ("small_write_error", json!(0)),
            ("small_read_back", json!(true)),
            ("zeroes_error", json!(0)),
            ("zeroes_read_back", json!(true)),
            // Past the protocol's 32 MiB: too long.
            ("too_long_error", json!(22)),
            ("pipelined_errors", json!(0)),
            ("pipelined_read_back", json!(true)),
        ] {
            assert_eq!(seen[key], want, "{target}: {key}: {seen}");
        }
        let (code, stderr) = server.stop();
        assert_eq!(code, Some(0), "{stderr}");
    }
}

#[test]
fn questionable_requests_get_the_errors_the_protocol_names_and_unknown_client_flags_close() {
    let dir = tempdir();
    let server = Server::start(&file_target(&dir.path().join("c.img"), Some("8m")), &[]);
    let seen = clients(&["conformance", server.socket.to_str().unwrap()]);
    let (einval, enospc) = (json!(22), json!(28));
    for (key, want) in [
        ("cache_fua", &einval),
        ("flush_fua", &einval),
        ("read_df", &einval),
        ("zeroes_fast_zero", &einval),
        ("read_bit7", &einval),
        ("read_bit9", &einval),
        ("read_past_end", &einval),
        ("read_oversize", &einval),
        ("write_oversize", &einval),
        ("write_past_end", &enospc),
        ("trim_past_end", &enospc),
        ("zeroes_past_end", &enospc),
        ("write_then", &json!(0)),
        ("read_back", &json!(true)),
        ("client_flags_0x4", &json!("closed")),
        ("client_flags_0x80000000", &json!("closed")),
    ] {
        assert_eq!(&seen[key], want, "{key}: {seen}");
    }
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

/// One configuration of the transaction log: a name, the target (with `IMAGE` for the backing file), whether
/// the export is read-only.
const TXLOG_CONFIGS: [(&str, &str, bool); 7] = [
    ("file", "file:IMAGE", false),
    (
        "cached, small",
        "cached:file:IMAGE?size=1m&dirty-limit=50%",
        false,
    ),
    (
        "cached, dirty limit 1%",
        "cached:file:IMAGE?size=4m&dirty-limit=1%",
        false,
    ),
    (
        "cached, dirty limit 90%",
        "cached:file:IMAGE?size=4m&dirty-limit=90%",
        false,
    ),
    (
        "cached, write-through",
        "cached:file:IMAGE?size=1m&mode=writethrough",
        false,
    ),
    (
        "cached, read-only mode",
        "cached:file:IMAGE?size=1m&mode=readonly",
        false,
    ),
    ("cached, read-only export", "cached:file:IMAGE?size=1m", true),
];

#[test]
fn a_random_transaction_log_over_three_connections_matches_the_model_in_every_configuration() {
    // NBD_TXLOG_SEED replays one seed in every configuration; NBD_TXLOG_OPS sets the log's length.
    let seed: Option<u64> = std::env::var("NBD_TXLOG_SEED").ok().map(|s| s.parse().unwrap());
    let ops: u64 = std::env::var("NBD_TXLOG_OPS").map_or(800, |s| s.parse().unwrap());
    for (k, (name, target, read_only)) in TXLOG_CONFIGS.iter().enumerate() {
        let seed = seed.unwrap_or(k as u64 + 1);
        let dir = tempdir();
        let image = dir.path().join("txlog.img");
        random_file(&image, 32 << 20, k as u8);
        let target = target.replace("IMAGE", image.to_str().unwrap());
        let server = Server::start(&target, if *read_only { &["--read-only"] } else { &[] });
        let seen = clients(&[
            "txlog",
            server.socket.to_str().unwrap(),
            &seed.to_string(),
            &ops.to_string(),
            if *read_only { "ro" } else { "rw" },
            &server.pid().to_string(),
            image.to_str().unwrap(),
        ]);
        let counts = &seen["counts"];
        assert!(
            counts["read"].as_u64().unwrap() > 0 && counts["huge"].as_u64().unwrap() > 0,
            "{name} (seed {seed}): {seen}"
        );
        if *read_only {
            assert!(
                counts["refused"].as_u64().unwrap() > 0,
                "{name} (seed {seed}): {seen}"
            );
            let (code, stderr) = server.stop();
            assert_eq!(code, Some(0), "{name}: {stderr}");
        } else {
            assert!(
                counts["write"].as_u64().unwrap() > 0 && counts["flush"].as_u64().unwrap() > 0,
                "{name} (seed {seed}): {seen}"
            );
            // The script checked the image after killing the server; the guard reaps it.
            assert_eq!(
                seen["flush_covered_every_connection"], true,
                "{name} (seed {seed}): {seen}"
            );
            drop(server);
        }
    }
}

/// #45 defect 9: a null export reads zeroes, always. Client A writes a pattern over part of the export; client B,
/// on its own connection, reads 64 places nobody wrote (and the written ones) and gets only zeroes, directly and
/// through the cache (`cached:null:`), whose misses read the null device.
#[test]
fn a_null_export_never_hands_one_clients_data_to_another() {
    for target in ["null:64m", "cached:null:64m"] {
        let server = Server::start(target, &["--qd", "4"]);
        let out = tool(
            "qemu-io",
            &[
                "-f",
                "raw",
                &server.uri,
                "-c",
                "write -P 0xa5 0 4M",
                "-c",
                "flush",
            ],
        );
        assert!(
            out.status.success(),
            "client A: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut reads = vec!["-f".to_string(), "raw".into(), server.uri.clone()];
        for k in 0..64u64 {
            // Never written: 8 MiB and up, in 64 KiB steps and odd sizes.
            reads.push("-c".into());
            reads.push(format!(
                "read -P 0 {} {}",
                (8 << 20) + k * (640 << 10),
                4096 + k * 512
            ));
        }
        if !target.starts_with("cached:") {
            // The null device keeps nothing: what A wrote reads as zeroes too.
            reads.push("-c".into());
            reads.push("read -P 0 0 4M".into());
        }
        let args: Vec<&str> = reads.iter().map(String::as_str).collect();
        let out = tool("qemu-io", &args);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "client B: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !said.contains("Pattern verification failed"),
            "{target}: client B read A's data: {said}"
        );
        assert_eq!(
            said.matches("read ").count(),
            args.len() / 2 - 1,
            "{target}: every read ran: {said}"
        );
        let (code, stderr) = server.stop();
        assert_eq!(code, Some(0), "{stderr}");
    }
}
