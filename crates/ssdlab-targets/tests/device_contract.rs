//! The `Device` contract (ssdlab-core's device module), checked the same way against every backend: null,
//! pread/pwrite, io_uring, the virtual SSD and the memory test device (bare and under the fault wrapper). A
//! backend that breaks a promise the runner relies on fails here by name.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::device::{Completion, Device, DeviceError, Io, Op};
use ssdlab_io::Engine;
use ssdlab_targets::{Access, OpenOptions};
use ssdlab_testdev::{FaultDevice, MemDevice};

const SLOTS: u32 = 4;
const BYTES: usize = 64 << 10;

fn open(target: &str, engine: Engine) -> Box<dyn Device> {
    let options = OpenOptions {
        access: Access::Destructive {
            allow_destroy: false,
            force: false,
        },
        engine,
        allow_atime: true,
        lay_out_files: true,
        flag: "--target",
        force_scope: ssdlab_targets::ForceScope::Signatures,
    };
    Box::new(ssdlab_targets::open(target, &options).expect(target).device)
}

/// Reaps until `n` completions arrived (a device may hand them back in several calls).
fn reap_all(device: &mut dyn Device, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    for _ in 0..1000 {
        if out.len() >= n {
            break;
        }
        device.reap(1, None, &mut out).unwrap();
    }
    assert_eq!(
        out.len(),
        n,
        "{}: every submitted operation completes",
        device.info().target
    );
    out
}

/// Runs the contract; `stores_data` says whether reads return what was written.
fn contract(device: &mut dyn Device, stores_data: bool) {
    let name = device.info().target.clone();
    device.prepare(SLOTS, BYTES).unwrap();
    for slot in 0..SLOTS {
        assert!(
            device.buffer(slot).len() >= BYTES,
            "{name}: slot {slot} holds the prepared size"
        );
        device.buffer_mut(slot)[..BYTES].fill(slot as u8 + 1);
    }
    assert_eq!(device.in_flight(), 0);
    // Writes in every slot; completions carry their slot, tag and length, and the clock moves forward.
    let before = device.now_ns();
    let writes: Vec<Io> = (0..SLOTS)
        .map(|slot| Io {
            op: Op::Write,
            offset: slot as u64 * BYTES as u64,
            len: BYTES as u64,
            slot,
            tag: 100 + slot as u64,
        })
        .collect();
    assert_eq!(
        device.submit(&writes).unwrap(),
        SLOTS as usize,
        "{name}: accepts a full queue"
    );
    assert_eq!(
        device.in_flight(),
        SLOTS as usize,
        "{name}: counts what is in flight"
    );
    // A slot in flight cannot be reused.
    match device.submit(&writes[..1]) {
        Err(DeviceError::Invalid(_)) => {}
        other => panic!("{name}: reusing a busy slot must be refused, got {other:?}"),
    }
    let done = reap_all(device, SLOTS as usize);
    for c in &done {
        assert_eq!(
            c.tag,
            100 + c.slot as u64,
            "{name}: the tag comes back with its slot"
        );
        assert_eq!(c.result, BYTES as i64, "{name}: a whole transfer");
        assert_eq!(c.op, Op::Write);
        assert!(
            before <= c.submitted_ns && c.submitted_ns <= c.completed_ns,
            "{name}: {c:?}"
        );
        assert!(
            c.completed_ns <= device.now_ns(),
            "{name}: completions are not in the future"
        );
    }
    assert_eq!(device.in_flight(), 0, "{name}: nothing left in flight");
    // Nothing in flight: reap returns at once with nothing.
    let mut none = Vec::new();
    assert_eq!(device.reap(1, None, &mut none).unwrap(), 0, "{name}");
    // A transfer larger than the slot's buffer is refused.
    let too_big = Io {
        op: Op::Read,
        offset: 0,
        len: (device.buffer(0).len() + 4096) as u64,
        slot: 0,
        tag: 1,
    };
    assert!(
        device.submit(&[too_big]).is_err(),
        "{name}: an oversized transfer is refused"
    );
    // Reads come back in the slots they were given; a storing device returns what was written.
    for slot in 0..SLOTS {
        device.buffer_mut(slot).fill(0);
    }
    let reads: Vec<Io> = (0..SLOTS)
        .map(|slot| Io {
            op: Op::Read,
            offset: (SLOTS - 1 - slot) as u64 * BYTES as u64,
            len: BYTES as u64,
            slot,
            tag: slot as u64,
        })
        .collect();
    device.submit(&reads).unwrap();
    for c in reap_all(device, SLOTS as usize) {
        assert_eq!(c.result, BYTES as i64, "{name}");
        if stores_data {
            let expected = (SLOTS - c.slot) as u8;
            assert!(
                device.buffer(c.slot)[..BYTES].iter().all(|&b| b == expected),
                "{name}: slot {} read back what was written at its offset",
                c.slot
            );
        }
    }
    // Waiting moves the clock at least that far.
    let t = device.now_ns() + 1_000_000;
    device.wait_until(t);
    assert!(device.now_ns() >= t, "{name}: wait_until reaches its time");
}

#[test]
fn every_backend_keeps_the_device_contract() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| format!("file:{}:16m", dir.path().join(name).display());
    contract(open("null:64m", Engine::Auto).as_mut(), false);
    contract(open(&file("psync.img"), Engine::Psync).as_mut(), true);
    let mut uring = open(&file("uring.img"), Engine::IoUring);
    assert!(
        uring.info().backend.contains("io_uring"),
        "{}",
        uring.info().backend
    );
    contract(uring.as_mut(), true);
    contract(open("sim:840evo-120g?scale=1/256", Engine::Auto).as_mut(), false);
    contract(&mut MemDevice::new(16 << 20, 1000), true);
    // The fault wrapper with no rules is the device below.
    contract(&mut FaultDevice::new(MemDevice::new(16 << 20, 1000), 1), true);
    // The cache keeps the same contract over a real and a virtual device, in every mode.
    for mode in ["writeback", "writethrough", "readonly"] {
        let cached = format!("cached:{}?size=2m&mode={mode}", file(&format!("{mode}.img")));
        contract(open(&cached, Engine::Auto).as_mut(), true);
        let cached = format!("cached:sim:840evo-120g?scale=1/256&size=2m&mode={mode}");
        contract(open(&cached, Engine::Auto).as_mut(), false);
    }
}
