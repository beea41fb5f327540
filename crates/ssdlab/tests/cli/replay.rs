//! `ssdlab test replay` and `ssdlab trace synth`: traces from the real tools (fio's write_iolog, blkparse),
//! replayed onto loop devices and the virtual drive, checked against what was recorded; a trace on stdout, and
//! Ctrl-C. Replays of traces written by hand or by `trace synth` on virtual drives, and the refusals of bad traces
//! and flags, are tested in-process in `crates/ssdlab-app/tests/trace_replays.rs`.

use crate::*;

/// `ssdlab test replay --target TARGET --trace TRACE EXTRA...`.
/// Saves blkparse's text as `name` in `dir`, replays it on a small virtual 840 EVO and returns the result's
/// output and the result's analysis.
fn replay_blkparse_text(dir: &Path, name: &str, text: &[u8]) -> (Output, Value) {
    let trace = dir.join(name);
    std::fs::write(&trace, text).unwrap();
    let out_dir = dir.join("replay");
    let out = replay(
        "sim:840evo-120g?scale=1/64",
        trace.to_str().unwrap(),
        &["--out", out_dir.to_str().unwrap()],
    );
    expect_code(&out, 0);
    let analysis = read_result(&out_dir)["analysis"].clone();
    (out, analysis)
}

fn replay(target: &str, trace: &str, extra: &[&str]) -> Output {
    let mut args = vec!["test", "replay", "--target", target, "--trace", trace];
    args.extend_from_slice(extra);
    run(&args)
}

/// Every pread64/pwrite64 strace (run with -y, which names each descriptor's file) saw on `device`:
/// (is_write, offset, length).
fn straced_io(path: &Path, device: &str) -> Vec<(bool, u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let on_device = format!("<{device}>");
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("pread64(").or_else(|| line.find("pwrite64(")) else {
            continue;
        };
        let args = &line[at..];
        let fd_end = args.find(',').unwrap();
        if !args[..fd_end].ends_with(&on_device) {
            continue; // the loader reading the binary, or anything else
        }
        let write = args.starts_with("pwrite64");
        // ..., LEN, OFFSET) = RET
        let close = args.rfind(')').unwrap();
        let fields: Vec<&str> = args[..close].rsplitn(3, ',').map(str::trim).collect();
        calls.push((write, fields[0].parse().unwrap(), fields[1].parse().unwrap()));
    }
    calls
}

#[test]
fn a_recorded_fio_iolog_replays_as_the_same_operations() {
    let dev = LoopDevice::new(64 << 20);
    let dir = tempdir();
    let log = dir.path().join("fio.iolog");
    // fio records its own run on a real device.
    let fio = Command::new("fio")
        .args([
            "--name=rec",
            &format!("--filename={}", dev.path),
            "--direct=1",
            "--ioengine=psync",
            "--rw=randrw",
            "--bsrange=4k-64k",
            "--size=32m",
            "--io_size=4m",
            "--randseed=7",
            &format!("--write_iolog={}", log.display()),
        ])
        .output()
        .expect("fio (scripts/test.sh installs it)");
    assert!(fio.status.success(), "{}", String::from_utf8_lossy(&fio.stderr));
    let recorded: Vec<(bool, u64, u64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [_, _, "read", off, len] => Some((false, off.parse().unwrap(), len.parse().unwrap())),
                [_, _, "write", off, len] => Some((true, off.parse().unwrap(), len.parse().unwrap())),
                _ => None,
            }
        })
        .collect();
    assert!(recorded.len() > 50, "fio recorded {} operations", recorded.len());
    // ssdlab replays it through pread/pwrite, one at a time, while strace watches every call.
    let calls = dir.path().join("strace.txt");
    let out_dir = dir.path().join("replay");
    let status = Command::new("strace")
        .args(["-f", "-y", "-e", "trace=pread64,pwrite64", "-o"])
        .arg(&calls)
        .arg(env!("CARGO_BIN_EXE_ssdlab"))
        .args([
            "test",
            "replay",
            "--target",
            &dev.path,
            "--engine",
            "psync",
            "--allow-destroy",
        ])
        .arg("--trace")
        .arg(&log)
        .args(["--as-fast-as-possible", "--qd", "1", "--out"])
        .arg(&out_dir)
        .output()
        .expect("strace (scripts/test.sh installs it)");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    // Before anything runs, the safety gate reads the device's last block at both sector sizes (looking for a
    // GPT backup header alone): those two reads come first, and then the replay's.
    let size = 64u64 << 20;
    let mut seen = straced_io(&calls, &dev.path);
    assert_eq!(
        seen.drain(..2).collect::<Vec<_>>(),
        vec![(false, size - 512, 512), (false, size - 4096, 512)],
        "the gate's reads"
    );
    assert_eq!(
        seen, recorded,
        "the replay issued exactly the recorded operations, in order"
    );
    let a = &read_result(&out_dir)["analysis"];
    assert_eq!(a["format"], "fio-iolog");
    assert_eq!(a["replayed_ops"].as_u64().unwrap() as usize, recorded.len());
    assert_eq!(a["fit"]["remapped_ops"], 0);
    assert!(
        a["fidelity"].is_null(),
        "as fast as possible: no fidelity to report"
    );
    assert!(a["average_data_rate_bytes_per_s"].as_f64().unwrap() > 0.0);
}

/// One blktrace record (struct blk_io_trace, little-endian) as the kernel writes it.
fn blk_io_trace(seq: u32, time_ns: u64, sector: u64, bytes: u32, action: u32, pdu: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&0x6561_7407u32.to_le_bytes()); // magic | version 7
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&time_ns.to_le_bytes());
    r.extend_from_slice(&sector.to_le_bytes());
    r.extend_from_slice(&bytes.to_le_bytes());
    r.extend_from_slice(&action.to_le_bytes());
    r.extend_from_slice(&4242u32.to_le_bytes()); // pid
    r.extend_from_slice(&(7u32 << 20).to_le_bytes()); // device 7,0
    r.extend_from_slice(&0u32.to_le_bytes()); // cpu
    r.extend_from_slice(&0u16.to_le_bytes()); // error
    r.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
    r.extend_from_slice(pdu);
    r
}

#[test]
fn blkparse_output_of_the_real_tool_replays_its_queued_requests() {
    // Categories and actions from linux/blktrace_api.h.
    const READ: u32 = 1 << 0;
    const WRITE: u32 = 1 << 1;
    const QUEUE: u32 = 1 << 4;
    const ISSUE: u32 = 1 << 6;
    const COMPLETE: u32 = 1 << 7;
    const NOTIFY: u32 = 1 << 10;
    const DISCARD: u32 = 1 << 13;
    let act = |ta: u32, tc: u32| (tc << 16) | ta;
    let dir = tempdir();
    // (time, sector, bytes, category): a 64 KiB write, a 4 KiB read 5 ms later, a 1 MiB discard.
    let requests = [
        (1_000u64, 0u64, 65536u32, WRITE),
        (5_001_000, 128, 4096, READ),
        (9_000_000, 2048, 1 << 20, WRITE | DISCARD),
    ];
    let mut bin = blk_io_trace(0, 0, 0, 0, act(0, NOTIFY), b"dd\0");
    let mut seq = 1;
    for (t, sector, bytes, tc) in requests {
        for (ta, extra, dt) in [(1, QUEUE, 0), (7, ISSUE, 500), (8, COMPLETE, 90_000)] {
            bin.extend(blk_io_trace(seq, t + dt, sector, bytes, act(ta, tc | extra), &[]));
            seq += 1;
        }
    }
    std::fs::write(dir.path().join("syn.blktrace.0"), bin).unwrap();
    let parsed = Command::new("blkparse")
        .args(["-i", "syn", "-D"])
        .arg(dir.path())
        .output()
        .expect("blkparse (scripts/test.sh installs blktrace)");
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let (out, a) = replay_blkparse_text(dir.path(), "trace.txt", &parsed.stdout);
    assert_eq!(a["format"], "blkparse");
    assert_eq!(
        (a["reads"].as_u64(), a["writes"].as_u64(), a["trims"].as_u64()),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(
        (
            a["read_bytes"].as_u64(),
            a["write_bytes"].as_u64(),
            a["trim_bytes"].as_u64()
        ),
        (Some(4096), Some(65536), Some(1 << 20))
    );
    // The queue events' times, from the first: 9 ms from the write to the discard.
    assert!(
        (a["trace_duration_s"].as_f64().unwrap() - 0.008999).abs() < 1e-9,
        "{}",
        a["trace_duration_s"]
    );
    assert!(stderr(&out).contains("the queue (Q) events"));
}

#[test]
fn blktrace_records_a_loop_device_where_the_kernel_allows_it() {
    let dev = LoopDevice::new(32 << 20);
    let dir = tempdir();
    if !Path::new("/sys/kernel/debug/block").exists() {
        let _ = Command::new("mount")
            .args(["-t", "debugfs", "none", "/sys/kernel/debug"])
            .output();
    }
    let blktrace = Command::new("blktrace")
        .args(["-d", &dev.path, "-o", "rec", "-w", "3", "-D"])
        .arg(dir.path())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("blktrace (scripts/test.sh installs it)");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let dd = Command::new("dd")
        .args([
            &format!("of={}", dev.path),
            "if=/dev/zero",
            "bs=64k",
            "count=16",
            "oflag=direct",
        ])
        .output()
        .unwrap();
    assert!(dd.status.success());
    let traced = blktrace.wait_with_output().unwrap();
    let complaint = String::from_utf8_lossy(&traced.stderr).to_string();
    if !traced.status.success() || complaint.contains("failed") {
        eprintln!(
            "SKIPPED blktrace_records_a_loop_device_where_the_kernel_allows_it: this kernel refused blktrace \
             (needs debugfs and CONFIG_BLK_DEV_IO_TRACE, and no lockdown): {}",
            complaint.lines().next().unwrap_or("")
        );
        return;
    }
    let parsed = Command::new("blkparse")
        .args(["-i", "rec", "-D"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (_, a) = replay_blkparse_text(dir.path(), "rec.txt", &parsed.stdout);
    assert_eq!(
        a["write_bytes"].as_u64(),
        Some(16 * 65536),
        "dd's 16 writes of 64 KiB"
    );
}

/// What goes to stdout: without `--out` the trace itself, and `--out -` is stdout too. (A file never
/// overwritten and malformed traces are tested in-process in `crates/ssdlab-app/tests/trace_replays.rs`.)
#[test]
fn trace_synth_writes_its_trace_to_stdout_and_dash_is_stdout() {
    let dir = tempdir();
    // To stdout: a fio iolog v3 that starts with its header.
    let out = run(&["trace", "synth", "--profile", "light", "--duration", "2s"]);
    expect_code(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("fio version 3 iolog\n"));
    // `--out -` is stdout too, not a file named "-" (run from the temporary directory, where one would appear).
    let dash = ssdlab()
        .args([
            "trace",
            "synth",
            "--profile",
            "light",
            "--duration",
            "2s",
            "--out",
            "-",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    expect_code(&dash, 0);
    assert_eq!(dash.stdout, out.stdout, "the same trace, on stdout");
    assert!(!dir.path().join("-").exists());
}

#[test]
fn a_trace_that_writes_needs_allow_destroy_on_a_device_and_one_that_reads_does_not() {
    let dev = LoopDevice::new(16 << 20);
    let dir = tempdir();
    let reads = dir.path().join("reads.iolog");
    std::fs::write(
        &reads,
        "fio version 3 iolog\n0 /f read 0 4096\n100 /f read 8192 4096\n",
    )
    .unwrap();
    let out = replay(&dev.path, reads.to_str().unwrap(), &[]);
    expect_code(&out, 0);
    let writes = dir.path().join("writes.iolog");
    std::fs::write(&writes, "fio version 3 iolog\n0 /f write 0 4096\n").unwrap();
    let before = std::fs::read(&dev.image).unwrap();
    let out = replay(&dev.path, writes.to_str().unwrap(), &[]);
    expect_usage_error(&out, "--allow-destroy");
    assert_eq!(std::fs::read(&dev.image).unwrap(), before, "nothing was written");
}

#[test]
fn ctrl_c_during_a_long_gap_in_the_trace_stops_the_replay_at_once() {
    // Two reads an hour apart on a real device: the replay sleeps through the gap in slices and hears Ctrl-C.
    let dev = LoopDevice::new(16 << 20);
    let dir = tempdir();
    let trace = dir.path().join("gap.iolog");
    std::fs::write(
        &trace,
        "fio version 3 iolog\n0 /f read 0 4096\n3600000000 /f read 8192 4096\n",
    )
    .unwrap();
    let out_dir = dir.path().join("gap");
    let mut child = ssdlab()
        .args(["test", "replay", "--target", &dev.path, "--trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    for line in lines.by_ref() {
        if line.unwrap().contains("replay started") {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let asked = std::time::Instant::now();
    sh("kill", &["-INT", &child.id().to_string()]);
    let _rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(5),
        "stopped within a slice, not after the hour"
    );
    let result = read_result(&out_dir);
    assert_eq!(result["complete"], false);
    assert_eq!(
        result["analysis"]["replayed_ops"], 1,
        "the read before the gap is kept"
    );
}
