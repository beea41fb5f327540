//! `ssdlab serve` and what the NBD protocol asks of a server (issue 36): an export of a file that is not a
//! whole number of blocks, the protocol's default block sizes for a client that negotiates none (12.5 MiB
//! requests at any alignment), the errors the protocol names for questionable requests, and a random
//! transaction log over three connections checked against a model, with multi-connection flush coverage,
//! over `file:` and `cached:` in several configurations. The clients are `nbd_clients.py`, nbdinfo, nbdcopy
//! and qemu-img; every server is stopped by its guard, even when a test fails.

use serde_json::json;

use crate::nbd::{Server, random_file, tool};
use crate::nbd_hostile::clients;
use crate::*;

#[test]
fn a_file_that_is_not_whole_blocks_is_exported_rounded_down_and_real_clients_copy_it() {
    let dir = tempdir();
    let image = dir.path().join("odd.img");
    random_file(&image, 1_000_001, 4);
    let server = Server::start(&file_target(&image, None), &["--read-only"]);
    let size = tool("nbdinfo", &["--size", &server.uri]);
    assert_eq!(String::from_utf8_lossy(&size.stdout).trim(), "999936");
    let map = tool("nbdinfo", &["--map", &server.uri]);
    assert!(
        map.status.success(),
        "nbdinfo --map: {}",
        String::from_utf8_lossy(&map.stderr)
    );
    let want = std::fs::read(&image).unwrap()[..999_936].to_vec();
    let copy = dir.path().join("copy.img");
    let out = tool("nbdcopy", &[&server.uri, copy.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "nbdcopy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&copy).unwrap() == want, "nbdcopy's copy");
    let converted = dir.path().join("converted.img");
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
    assert!(std::fs::read(&converted).unwrap() == want, "qemu-img's copy");
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("last 65 bytes are not exported"),
        "serve says what it left out: {stderr}"
    );
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
