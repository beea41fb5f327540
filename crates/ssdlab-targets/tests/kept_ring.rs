//! One io_uring per thread across files (`on_this_threads_ring`): the second file is read on the first file's
//! ring and buffers, each file reads its own bytes, and a thread of its own gets a ring of its own.

use ssdlab_core::device::{Device, Io, Op};
use ssdlab_io::Engine;
use ssdlab_targets::{Access, ForceScope, OpenOptions, on_this_threads_ring, open};

fn psync_open(path: &std::path::Path) -> Box<dyn Device + Send> {
    let options = OpenOptions {
        access: Access::ReadOnly,
        engine: Engine::Psync,
        allow_atime: false,
        lay_out_files: false,
        flag: "PATH",
        force_scope: ForceScope::Signatures,
    };
    let opened = open(&format!("file:{}", path.display()), &options).expect("opens");
    on_this_threads_ring(opened.device)
}

/// The io_uring instances this process holds open.
fn rings_open() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("io_uring")))
        .count()
}

/// Reads the file's first 4 KiB through `device`; returns the bytes and where the slot's buffer lives.
fn first_block(device: &mut dyn Device) -> (Vec<u8>, usize) {
    device.prepare(2, 4096).unwrap();
    let io = Io {
        op: Op::Read,
        offset: 0,
        len: 4096,
        slot: 0,
        tag: 0,
    };
    let done = device.complete(io).unwrap();
    assert_eq!(done.result, 4096);
    (device.buffer(0).to_vec(), device.buffer(0).as_ptr() as usize)
}

#[test]
fn files_read_one_after_another_share_this_threads_ring_and_each_reads_its_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..3u8)
        .map(|i| {
            let path = dir.path().join(format!("f{i}"));
            std::fs::write(&path, vec![i + 1; 8192]).unwrap();
            path
        })
        .collect();
    let mut buffers = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let mut device = psync_open(path);
        assert!(
            device.info().backend.starts_with("io_uring"),
            "{}",
            device.info().backend
        );
        let (bytes, at) = first_block(device.as_mut());
        assert!(
            bytes.iter().all(|&b| b == i as u8 + 1),
            "file {i} read another file's bytes"
        );
        assert_eq!(rings_open(), 1, "one ring for every file");
        drop(device);
        // Kept for the next file, not torn down.
        assert_eq!(rings_open(), 1, "the ring is kept between files");
        buffers.push(at);
    }
    assert!(
        buffers.windows(2).all(|w| w[0] == w[1]),
        "every file read into the first file's registered buffers: {buffers:?}"
    );
    // Another thread sets up its own ring (a ring belongs to the thread that set it up).
    let path = paths[0].clone();
    let elsewhere = std::thread::spawn(move || first_block(psync_open(&path).as_mut()))
        .join()
        .unwrap();
    assert!(elsewhere.0.iter().all(|&b| b == 1));
    assert_ne!(elsewhere.1, buffers[0]);
    assert_eq!(rings_open(), 1, "the other thread's ring ended with it");
}
