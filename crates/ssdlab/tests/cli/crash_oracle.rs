//! The cache's crash oracle over NBD: a client writes (some FUA) and flushes through `ssdlab serve` of a
//! `cached:` export, the server is killed with SIGKILL at a random moment (a fair stand-in for power loss of
//! a RAM cache), and every block of the backing file must then hold the value of the newest write the client
//! saw acknowledged before it sent the last completed FLUSH (or acknowledged as FUA), or a value written after
//! it. The same oracle run against nbdkit's cache filter (writeback, with a size limit) must find losses: that
//! shows the oracle can fail.
//!
//! `CRASH_ORACLE_KILLS` sets the number of kills (20 by default; `scripts/cache-crash-oracle.sh` runs 200).

use std::collections::HashMap;
use std::io::{Read, Write};

use crate::*;

const BLOCK: u64 = 4096;
const BLOCKS: u64 = 4096;

/// One client write as the client saw it.
#[derive(Clone, Copy)]
struct Written {
    version: u64,
    /// The client's step at which its reply came, if it came.
    acked: Option<u64>,
    fua: bool,
}

fn stamp(version: u64, block: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    b[..8].copy_from_slice(&version.to_le_bytes());
    b[8..16].copy_from_slice(&block.to_le_bytes());
    b
}

fn request(command: u16, flags: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut r = 0x2560_9513u32.to_be_bytes().to_vec();
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&command.to_be_bytes());
    r.extend_from_slice(&cookie.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&length.to_be_bytes());
    r
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One round: serve, write and flush until a random step, kill, check. Returns the violations found.
fn round(seed: u64, start: &dyn Fn(&Path, &Path) -> std::process::Child) -> Vec<String> {
    let dir = tempdir();
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(BLOCK * BLOCKS)
        .unwrap();
    let socket = dir.path().join("s.sock");
    let mut server = start(&image, &socket);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: the server never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut s = crate::nbd::negotiate(&socket);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut history: HashMap<u64, Vec<Written>> = HashMap::new();
    // Cookie -> (block, index in its history) for writes; flushes carry u64::MAX as block.
    let mut pending: HashMap<u64, (u64, usize, u64)> = HashMap::new();
    let mut durable_point: Option<u64> = None;
    let mut version = 1;
    let kill_at = 20 + rng.below(400);
    let mut step = 0;
    'run: loop {
        // Send a batch of up to 8 requests, never two writes of one block in flight.
        let batch = 1 + rng.below(8);
        let mut sent = 0;
        let mut out = Vec::new();
        for _ in 0..batch {
            step += 1;
            let cookie = step;
            if rng.below(12) == 0 {
                out.extend(request(3, 0, cookie, 0, 0));
                pending.insert(cookie, (u64::MAX, 0, step));
            } else {
                let block = rng.below(BLOCKS);
                if pending.values().any(|p| p.0 == block) {
                    continue;
                }
                let fua = rng.below(8) == 0;
                let h = history.entry(block).or_default();
                h.push(Written {
                    version,
                    acked: None,
                    fua,
                });
                out.extend(request(1, u16::from(fua), cookie, block * BLOCK, BLOCK as u32));
                out.extend(stamp(version, block));
                pending.insert(cookie, (block, h.len() - 1, step));
                version += 1;
            }
            sent += 1;
        }
        if s.write_all(&out).is_err() {
            break;
        }
        if step >= kill_at {
            // Power loss with this batch in flight (some of it may have been answered already).
            server.kill().unwrap();
            break 'run;
        }
        for _ in 0..sent {
            let mut reply = [0u8; 16];
            if s.read_exact(&mut reply).is_err() {
                break 'run;
            }
            let error = u32::from_be_bytes(reply[4..8].try_into().unwrap());
            let cookie = u64::from_be_bytes(reply[8..16].try_into().unwrap());
            assert_eq!(error, 0, "seed {seed}: request {cookie} failed with {error}");
            let (block, index, sent_at) = pending.remove(&cookie).expect("a reply to a request sent");
            step += 1;
            if block == u64::MAX {
                durable_point = Some(durable_point.map_or(sent_at, |d: u64| d.max(sent_at)));
            } else {
                history.get_mut(&block).unwrap()[index].acked = Some(step);
            }
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let data = std::fs::read(&image).unwrap();
    let mut violations = Vec::new();
    for (block, writes) in &history {
        let at = (*block * BLOCK) as usize;
        let got = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        // The newest write that had to be durable: acknowledged before the last completed flush was sent, or
        // acknowledged as FUA.
        let must = writes.iter().rposition(|w| {
            w.acked
                .is_some_and(|a| w.fua || durable_point.is_some_and(|p| a < p))
        });
        let (base, later) = match must {
            Some(i) => (writes[i].version, &writes[i + 1..]),
            None => (0, &writes[..]),
        };
        if got != base && !later.iter().any(|w| w.version == got) {
            violations.push(format!(
                "seed {seed}: block {block} holds version {got}; version {base} was durable{}",
                if later.is_empty() {
                    String::new()
                } else {
                    format!(" and {} later writes were sent", later.len())
                }
            ));
        }
    }
    violations
}

fn kills() -> u64 {
    std::env::var("CRASH_ORACLE_KILLS").map_or(20, |s| s.parse().expect("CRASH_ORACLE_KILLS is a number"))
}

fn ssdlab_cached(image: &Path, socket: &Path) -> std::process::Child {
    // A 1 MiB cache over 16 MiB, so destaging, the dirty limit and eviction all happen.
    let target = format!("cached:file:{}?size=1m", image.display());
    ssdlab()
        .args([
            "serve",
            "--target",
            &target,
            "--socket",
            socket.to_str().unwrap(),
            "--qd",
            "8",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ssdlab serve starts")
}

#[test]
fn killing_a_cached_export_loses_nothing_a_flush_or_fua_covered() {
    let mut violations = Vec::new();
    for seed in 0..kills() {
        violations.extend(round(seed, &ssdlab_cached));
    }
    eprintln!(
        "ssdlab serve cached: {} violations in {} kills",
        violations.len(),
        kills()
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[test]
fn the_oracle_catches_nbdkits_cache_filter_losing_data() {
    let nbdkit = |image: &Path, socket: &Path| {
        Command::new("nbdkit")
            .args([
                "--foreground",
                "-U",
                socket.to_str().unwrap(),
                "--filter=cache",
                "file",
            ])
            .arg(image)
            .args(["cache=writeback", "cache-max-size=1M"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nbdkit starts (scripts/test.sh installs it)")
    };
    let mut violations = 0;
    for seed in 0..kills() {
        violations += round(seed, &nbdkit).len();
    }
    eprintln!(
        "nbdkit --filter=cache: {violations} violations in {} kills",
        kills()
    );
    assert!(
        violations > 0,
        "the oracle found no loss in nbdkit's writeback cache filter with a size limit"
    );
}
