//! `ssdlab op` on loop devices and virtual drives: the report and the preview write nothing, every refusal leaves
//! the bytes in place, and applying discards exactly the tail (a GPT's backup and every partition kept).
//!
//! This kernel lists no partitions of a loop device, so the partitions here are found in the table on the disk;
//! the kernel's own list (sysfs) is merged with it in the same check, tested in ssdlab-methods.

use crate::*;

fn image(disk: &LoopDevice) -> Vec<u8> {
    std::fs::read(&disk.path).unwrap()
}

fn random_fill(disk: &LoopDevice, mib: u64) {
    sh(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", disk.path),
            "bs=1M",
            &format!("count={mib}"),
            "oflag=direct",
            "status=none",
        ],
    );
}

/// `op --set 25% --allow-destroy` on the device, with `--force` if asked.
fn apply(disk: &LoopDevice, force: bool) -> Output {
    let mut args = vec!["op", "--target", &disk.path, "--set", "25%", "--allow-destroy"];
    if force {
        args.push("--force");
    }
    run(&args)
}

#[test]
fn op_reports_previews_and_discards_the_tail() {
    let disk = LoopDevice::new(64 << 20);
    random_fill(&disk, 64);
    let before = image(&disk);

    let out = run(&["op", "--target", &disk.path]);
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(
        text.contains("OP 7.4% = (physical - logical) / logical"),
        "{text}"
    );
    assert!(text.contains("spare factor 6.9%"), "{text}");
    assert!(text.contains("no NAND of its own"), "{text}");
    let out = run(&["op", "--target", &disk.path, "--raw-nand", "80m"]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("OP 25.0%"), "{}", stderr(&out));

    // Both spellings of the share; a preview writes nothing and says so.
    for share in ["25", "25%"] {
        let out = run(&["op", "--target", &disk.path, "--set", share]);
        expect_code(&out, 0);
        let text = stderr(&out);
        assert!(text.contains("usable 50.33 MB (48 MiB)"), "{text}");
        assert!(text.contains("nothing was written"), "{text}");
        assert!(text.contains("size=96256"), "the partition size to use: {text}");
    }
    assert!(image(&disk) == before, "a preview changed the device");

    // Refusals: each names its flag, exit 2, nothing written.
    for (args, flag) in [
        (vec!["--set", "0"], "--set"),
        (vec!["--set", "95%"], "--set"),
        (vec!["--set", "lots"], "--set"),
        (vec!["--allow-destroy"], "--allow-destroy"),
        (vec!["--raw-nand", "1m"], "--raw-nand"),
        (vec!["--set", "25%", "--raw-nand", "big"], "--raw-nand"),
    ] {
        let mut all = vec!["op", "--target", &disk.path];
        all.extend(args);
        expect_usage_error(&run(&all), flag);
    }
    for target in ["null", "file:/tmp/ssdlab-op-test.img:1m"] {
        expect_usage_error(&run(&["op", "--target", target, "--set", "25"]), "--target");
    }
    // A record that could not be written: refused before the discard.
    let dir = tempdir();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let mut refused = vec!["op", "--target", &disk.path, "--set", "25%", "--allow-destroy"];
    refused.extend(["--out", not_a_dir.to_str().unwrap()]);
    expect_usage_error(&run(&refused), "--out");
    assert!(image(&disk) == before, "a refusal changed the device");

    let record = dir.path().join("record");
    let out = run(&[
        "op",
        "--target",
        &disk.path,
        "--set",
        "25%",
        "--allow-destroy",
        "--json",
        "--out",
        record.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(text.contains("discarded   bytes 50331648..67108864"), "{text}");
    assert!(text.contains("64 sampled tail blocks read as zeroes"), "{text}");
    // The record: streamed and written, read back as op's own shape, as the published schema describes it.
    let events = json_lines(&out);
    assert_eq!(
        event(&events, "analysis")["data"]["applied"]["offset_bytes"],
        50331648
    );
    let json = std::fs::read_to_string(record.join("result.json")).unwrap();
    let result = ssdlab_core::schema::RunResult::from_json(&json).unwrap();
    let ssdlab_core::schema::Analysis::Op(a) = &result.analysis else {
        panic!("{:?}", result.analysis);
    };
    assert!(matches!(
        result.options,
        ssdlab_core::schema::options::RunOptions::Op(_)
    ));
    assert!((a.built_in.op_ratio - 0.0737).abs() < 0.001, "{a:?}");
    let planned = a.planned.as_ref().unwrap();
    assert_eq!(planned.usable_bytes, 48 << 20);
    assert_eq!(
        (planned.tail_offset_bytes, planned.tail_len_bytes),
        (Some(48 << 20), Some(16 << 20))
    );
    let applied = a.applied.as_ref().unwrap();
    assert!(applied.tail_reads_zero && applied.len_bytes == 16 << 20);
    let errors = schema_errors(&result_schema(), &[record.join("result.json")]);
    assert!(errors.is_empty(), "{errors}");
    let page = std::fs::read_to_string(record.join("report.html")).unwrap();
    assert!(
        page.contains("discarded bytes 50331648..67108864"),
        "the report shows it"
    );
    let after = image(&disk);
    assert!(after[..48 << 20] == before[..48 << 20], "the usable area changed");
    assert!(
        after[48 << 20..].iter().all(|&b| b == 0),
        "the tail was not discarded"
    );
}

#[test]
fn op_keeps_partitions_and_the_gpt_backup() {
    let disk = LoopDevice::new(64 << 20);
    random_fill(&disk, 64);
    // Two partitions: 1..21 MiB and 21..60 MiB. The second reaches into a 25% tail (from 48 MiB).
    partition(
        &disk,
        "label: gpt\nstart=2048, size=40960\nstart=43008, size=79872\n",
    );
    let before = image(&disk);
    let out = apply(&disk, false);
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("a partition table: gpt"),
        "{}",
        stderr(&out)
    );
    let out = apply(&disk, true);
    expect_code(&out, 2);
    let text = stderr(&out);
    assert!(
        text.contains("partition GPT entry 2 ends at byte 62914560, inside the tail"),
        "{text}"
    );
    assert!(text.contains("nothing was discarded"), "{text}");
    assert!(image(&disk) == before, "a refusal changed the device");

    // One partition inside the usable area: the tail goes, the partition and the GPT backup stay.
    partition(&disk, "label: gpt\nstart=2048, size=40960\n");
    let before = image(&disk);
    let out = apply(&disk, true);
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(
        text.contains("the last 16896 bytes hold the GPT's backup and were kept"),
        "{text}"
    );
    let after = image(&disk);
    let end = after.len() - 16896;
    assert!(after[..48 << 20] == before[..48 << 20], "the usable area changed");
    assert!(
        after[48 << 20..end].iter().all(|&b| b == 0),
        "the tail was not discarded"
    );
    assert!(after[end..] == before[end..], "the GPT backup changed");
    let verify = sh("sfdisk", &["--verify", &disk.path]);
    assert!(verify.contains("No errors detected"), "{verify}");

    // A file system on the whole device: refused even with --force (its end is the tail), and more so mounted.
    sh("mkfs.ext4", &["-q", "-F", &disk.path]);
    let before = image(&disk);
    let out = apply(&disk, true);
    expect_code(&out, 2);
    let text = stderr(&out);
    assert!(
        text.contains("a file system: ext4") && text.contains("even with --force"),
        "{text}"
    );
    assert!(image(&disk) == before, "a refusal changed the device");
    let out = run(&["op", "--target", &disk.path, "--set", "25%"]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("op would refuse"), "{}", stderr(&out));
    let mounted = Mounted::new(&disk.path);
    let out = apply(&disk, true);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("mounted"), "{}", stderr(&out));
    drop(mounted);
    sh("e2fsck", &["-fn", &disk.path]);
}

#[test]
fn op_on_a_virtual_drive_points_to_its_parameter() {
    let out = run(&[
        "op",
        "--target",
        "sim:840evo-250g?scale=1/64",
        "--set",
        "25%",
        "--json",
    ]);
    expect_code(&out, 0);
    let text = stderr(&out);
    assert!(text.contains("built in    OP 6.9%"), "{text}");
    assert!(text.contains("sim:840evo-250g?op=42.6&scale=1/64"), "{text}");
    let events = json_lines(&out);
    let planned = &event(&events, "analysis")["data"]["planned"];
    assert_eq!(planned["equivalent_target"], "sim:840evo-250g?op=42.6&scale=1/64");
    assert!(
        planned["tail_offset_bytes"].is_null(),
        "nothing to discard on a virtual drive"
    );
    let out = run(&[
        "op",
        "--target",
        "sim:840evo-250g?scale=1/64",
        "--set",
        "25%",
        "--allow-destroy",
    ]);
    expect_code(&out, 2);
    assert!(
        stderr(&out).contains("--target 'sim:840evo-250g?op=42.6&scale=1/64'"),
        "{}",
        stderr(&out)
    );
}
