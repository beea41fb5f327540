//! `ssdlab erase` on loop devices: every refusal leaves the data as it was; auto purges with the best method the
//! device offers and the whole device then reads zero.

use crate::*;

/// Fills the device with a non-zero pattern through the page cache-free path.
fn fill(disk: &LoopDevice) {
    // A fixed pattern, not random bytes: random data carries a file-system signature now and then (an ext
    // superblock's magic and a journal flag at byte 1080 came up once in a full run), and the erase gate rightly
    // refuses a device that carries one.
    use std::io::Write;
    let mut device = std::fs::OpenOptions::new().write(true).open(&disk.path).unwrap();
    let chunk = vec![0x5a_u8; 1 << 20];
    for _ in 0..16 {
        device.write_all(&chunk).unwrap();
    }
    device.sync_all().unwrap();
}

fn all_zero(disk: &LoopDevice) -> bool {
    let data = std::fs::read(&disk.path).unwrap();
    data.iter().all(|&b| b == 0)
}

fn head(disk: &LoopDevice) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 20];
    std::fs::File::open(&disk.path)
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    buf
}

#[test]
fn refusals_leave_every_byte_in_place() {
    let disk = LoopDevice::new(16 << 20);
    fill(&disk);
    let before = head(&disk);
    expect_usage_error(&run(&["erase", "--target", &disk.path]), "--allow-destroy");
    // The firmware purges are not something a loop device has: nothing runs, exit 2 naming the flag.
    for method in ["secure-erase", "sanitize"] {
        let out = run(&[
            "erase",
            "--target",
            &disk.path,
            "--allow-destroy",
            "--method",
            method,
        ]);
        expect_code(&out, 2);
        let text = stderr(&out);
        assert!(
            text.contains(&format!("--method {method}")) && text.contains("has no drive firmware"),
            "{text}"
        );
        assert!(head(&disk) == before, "a refused erase changed the device");
    }

    let dir = tempdir();
    let file = dir.path().join("x.img");
    std::fs::write(&file, b"keep").unwrap();
    // A record that could not be written: refused before anything is erased.
    let out = run(&[
        "erase",
        "--target",
        &disk.path,
        "--allow-destroy",
        "--out",
        file.to_str().unwrap(),
    ]);
    expect_usage_error(&out, "--out");
    assert!(head(&disk) == before, "an erase without its record ran");
    // A refusal at the gate leaves nothing behind, not even the record's directory.
    let record = dir.path().join("record");
    expect_usage_error(
        &run(&["erase", "--target", &disk.path, "--out", record.to_str().unwrap()]),
        "--allow-destroy",
    );
    assert!(!record.exists(), "a refused erase created its --out directory");
    expect_usage_error(
        &run(&["erase", "--target", &file_target(&file, None), "--allow-destroy"]),
        "--target",
    );
    expect_usage_error(
        &run(&["erase", "--target", "sim:840evo-120g", "--allow-destroy"]),
        "--target",
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");

    // A file system: refused without --force; mounted: refused even with it, and the file system is intact.
    sh("mkfs.ext4", &["-q", &disk.path]);
    let with_fs = head(&disk);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("a file system: ext4"), "{}", stderr(&out));
    assert!(head(&disk) == with_fs, "a refused erase changed the device");
    let mounted = Mounted::new(&disk.path);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy", "--force"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("mounted"), "{}", stderr(&out));
    drop(mounted);
    sh("e2fsck", &["-fn", &disk.path]);
}

#[test]
fn auto_and_zero_erase_the_whole_device() {
    let disk = LoopDevice::new(16 << 20);
    fill(&disk);
    let out = run(&["erase", "--target", &disk.path, "--allow-destroy"]);
    expect_code(&out, 0);
    let text = stderr(&out);
    // A loop device has no secure discard; discard punches the image's blocks, which read back as zeroes.
    assert!(text.contains("secdiscard    failed"), "{text}");
    assert!(
        text.contains("erased    with discard; 256 sampled blocks read back erased"),
        "{text}"
    );
    assert!(all_zero(&disk));
    assert_eq!(disk.image_blocks(), 0, "discard deallocated the image");

    fill(&disk);
    let dir = tempdir();
    let record = dir.path().join("record");
    let out = run(&[
        "erase",
        "--target",
        &disk.path,
        "--allow-destroy",
        "--method",
        "zero",
        "--samples",
        "64",
        "--json",
        "--out",
        record.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("erased    with zero; 64 sampled blocks"),
        "{}",
        stderr(&out)
    );
    assert!(all_zero(&disk));
    // The erase record: the device, the method that verified, every step, the read-back check; streamed and
    // written, and as the published schema describes it.
    let events = json_lines(&out);
    assert_eq!(event(&events, "analysis")["data"]["method"], "zero");
    assert_eq!(event(&events, "verdict")["data"]["passed"], true);
    let result: Value = serde_json::from_slice(&std::fs::read(record.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["kind"], "erase");
    assert_eq!(result["target"]["capacity_bytes"], 16 << 20);
    assert_eq!(result["options"]["erase_method"], "zero");
    assert_eq!(result["analysis"]["samples"], 64);
    assert_eq!(
        result["analysis"]["held_data_before"], 64,
        "fill() wrote every block"
    );
    assert_eq!(result["analysis"]["steps"][0]["method"], "zero");
    assert!(
        result["analysis"]["caveat"].is_null(),
        "the caveat is the method's, not stored twice"
    );
    // Read back as a reader does: the options as erase's own shape, not another command's.
    let text = std::fs::read_to_string(record.join("result.json")).unwrap();
    let read = ssdlab_core::schema::RunResult::from_json(&text).unwrap();
    assert!(
        matches!(read.options, ssdlab_core::schema::options::RunOptions::Erase(_)),
        "{:?}",
        read.options
    );
    let errors = schema_errors(&result_schema(), &[record.join("result.json")]);
    assert!(errors.is_empty(), "{errors}");
    let page = std::fs::read_to_string(record.join("report.html")).unwrap();
    assert!(page.contains("erased with zero: all 64 sampled blocks read back erased"));
    assert!(page.contains("zero fill clears every LBA"), "the caveat is shown");
}
