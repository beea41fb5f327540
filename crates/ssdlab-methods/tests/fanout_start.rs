//! A live fan-out's drives start reading together: a drive that opens quickly waits for the slowest to open, so
//! the first drives opened do not read alone while the rest are still opening (with many drives that took
//! seconds). Observed in wall time, through a device that notes when its first read was submitted.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ssdlab_core::device::{Completion, Device, DeviceInfo, DeviceResult, Io};
use ssdlab_methods::MethodError;
use ssdlab_methods::fanout::measure::{ReadLoad, run_independent};
use ssdlab_testdev::MemDevice;

/// A memory device that notes the wall time of its first submission.
struct Noted {
    inner: MemDevice,
    first_read: Arc<Mutex<Option<Instant>>>,
}

impl Device for Noted {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        self.inner.prepare(slots, buffer_bytes)
    }
    fn buffer(&self, slot: u32) -> &[u8] {
        self.inner.buffer(slot)
    }
    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        self.inner.buffer_mut(slot)
    }
    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        self.first_read.lock().unwrap().get_or_insert_with(Instant::now);
        self.inner.submit(ios)
    }
    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        self.inner.reap(min, deadline_ns, out)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn wait_until(&mut self, t_ns: u64) {
        self.inner.wait_until(t_ns);
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

#[test]
fn every_drive_starts_reading_once_the_slowest_has_opened() {
    let first_reads: Vec<Arc<Mutex<Option<Instant>>>> = (0..3).map(|_| Arc::new(Mutex::new(None))).collect();
    let slowest_opened = Mutex::new(None);
    let open = |i: usize| -> Result<Box<dyn Device>, MethodError> {
        if i == 0 {
            // The slow one: a drive whose open takes a while (a busy controller, a device node still settling).
            std::thread::sleep(Duration::from_millis(300));
            *slowest_opened.lock().unwrap() = Some(Instant::now());
        }
        Ok(Box::new(Noted {
            inner: MemDevice::new(64 << 20, 100_000),
            first_read: Arc::clone(&first_reads[i]),
        }))
    };
    let load = ReadLoad {
        block_bytes: 4096,
        runtime_ns: 50_000_000,
        seed: 1,
        cpu_wait: ssdlab_methods::fanout::measure::no_cpu_wait,
    };
    let reads = run_independent(3, &open, &load, &AtomicBool::new(false)).unwrap();
    assert!(reads.iter().all(|r| r.histogram.count() > 0));
    let opened = slowest_opened.lock().unwrap().expect("drive 0 opened");
    for (i, first) in first_reads.iter().enumerate() {
        let first = first.lock().unwrap().expect("every drive read");
        assert!(
            first >= opened,
            "drive {i} started reading before the slowest drive had opened"
        );
    }
}
