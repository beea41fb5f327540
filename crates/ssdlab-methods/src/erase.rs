//! Purging a whole device with the best method it offers, and checking a sample of blocks reads back erased.
//!
//! The methods, best first: the drive's own secure erase (firmware: every cell, spare area included), the
//! kernel's secure discard, discard (the drive unmaps everything; only drives that return zeroes for unmapped
//! blocks then read back erased), and zero fill (every LBA written, which leaves old data in spare blocks until
//! garbage collection). `auto` takes the first one the device offers whose result verifies; a method that ran
//! but did not verify is said, and the next one runs. What a method needs from the device beyond reads is behind
//! [`Purger`], which the binary implements with ioctls and vendor tools; this module decides and verifies, and is
//! generic over devices so it is tested on the simulator too.
//!
//! It never decides whether erasing is allowed: the caller opens the device through the safety gate first.

use ssdlab_core::device::{Completion, Device, Io, Op};
use ssdlab_core::rng::Rng;

/// How to purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraseMethod {
    /// The drive's firmware secure erase (NVMe format with secure erase, ATA SECURITY ERASE UNIT).
    SecureErase,
    /// BLKSECDISCARD.
    SecDiscard,
    /// BLKDISCARD.
    Discard,
    /// BLKZEROOUT: every LBA reads back as zeroes.
    Zero,
}

impl EraseMethod {
    pub const ALL: [EraseMethod; 4] = [
        EraseMethod::SecureErase,
        EraseMethod::SecDiscard,
        EraseMethod::Discard,
        EraseMethod::Zero,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EraseMethod::SecureErase => "secure-erase",
            EraseMethod::SecDiscard => "secdiscard",
            EraseMethod::Discard => "discard",
            EraseMethod::Zero => "zero",
        }
    }

    /// What the method does not promise, in NIST SP 800-88's terms (a purge makes data unrecoverable by any
    /// means; a clear only by reading the LBAs).
    pub fn caveat(self) -> Option<&'static str> {
        match self {
            EraseMethod::SecureErase | EraseMethod::SecDiscard => None,
            EraseMethod::Discard => Some(
                "a discard unmaps the blocks and they read back as zeroes, but it is not a purge: old data can \
                 stay in the NAND until garbage collection erases it; use a firmware erase for a purge",
            ),
            EraseMethod::Zero => Some(
                "zero fill clears every LBA, but it is not a purge: old copies can stay in spare blocks until \
                 garbage collection erases them; use a firmware erase for a purge",
            ),
        }
    }

    /// Whether a block it erased may read back as all ones rather than all zeroes (firmware erase leaves the
    /// NAND's erased state or a vendor pattern).
    fn may_read_ones(self) -> bool {
        self == EraseMethod::SecureErase
    }
}

/// What a device can do to purge itself, beyond reads and writes.
pub trait Purger {
    /// Ok if the device offers `method`, else why not (in words, for the output).
    fn offers(&mut self, method: EraseMethod) -> Result<(), String>;
    /// Purges the whole device with `method`; the error says what failed.
    fn purge(&mut self, method: EraseMethod) -> Result<(), String>;
}

/// How an erase went.
#[derive(Debug, Clone, PartialEq)]
pub struct EraseReport {
    /// The method whose result verified, if any.
    pub method: Option<EraseMethod>,
    /// Each method tried or passed over, and what happened, in order.
    pub steps: Vec<(EraseMethod, String)>,
    /// Blocks read back after the last method that ran.
    pub samples: u32,
    /// Offsets of sampled blocks that did not read back erased.
    pub not_erased: Vec<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error("reading back {what}: {cause}")]
    Read { what: String, cause: String },
}

/// Purges with `requested` (or the best method that verifies, for `None`), then reads `samples` blocks
/// (the first, the last and random ones from `seed`) to check they are erased.
pub fn erase<D: Device>(
    device: &mut D,
    purger: &mut dyn Purger,
    requested: Option<EraseMethod>,
    samples: u32,
    seed: u64,
) -> Result<EraseReport, EraseError> {
    let methods: Vec<EraseMethod> = match requested {
        Some(m) => vec![m],
        None => EraseMethod::ALL.to_vec(),
    };
    let mut report = EraseReport {
        method: None,
        steps: vec![],
        samples: 0,
        not_erased: vec![],
    };
    for method in methods {
        if let Err(why) = purger.offers(method) {
            report.steps.push((method, format!("not offered: {why}")));
            continue;
        }
        if let Err(why) = purger.purge(method) {
            report.steps.push((method, format!("failed: {why}")));
            continue;
        }
        let not_erased = verify(device, method, samples, seed)?;
        report.samples = samples;
        if not_erased.is_empty() {
            report
                .steps
                .push((method, format!("done; {samples} sampled blocks read back erased")));
            report.method = Some(method);
            report.not_erased.clear();
            break;
        }
        report.steps.push((
            method,
            format!(
                "ran, but {} of {samples} sampled blocks still hold data (first at byte {})",
                not_erased.len(),
                not_erased[0]
            ),
        ));
        report.not_erased = not_erased;
    }
    Ok(report)
}

/// The sampled blocks (offsets) that did not read back erased.
fn verify<D: Device>(
    device: &mut D,
    method: EraseMethod,
    samples: u32,
    seed: u64,
) -> Result<Vec<u64>, EraseError> {
    let info = device.info().clone();
    let read_error = |what: String, cause: String| EraseError::Read { what, cause };
    let block = u64::from(info.logical_block_bytes.max(4096));
    let blocks = info.capacity_bytes / block;
    if blocks == 0 {
        return Err(read_error(
            "the device".into(),
            format!("it is smaller than one {block}-byte block, so no block can be checked"),
        ));
    }
    device
        .prepare(1, block as usize)
        .map_err(|e| read_error("the device".into(), e.to_string()))?;
    let mut rng = Rng::new(seed);
    let mut not_erased = vec![];
    let mut done: Vec<Completion> = vec![];
    for i in 0..samples {
        let index = match i {
            0 => 0,
            1 => blocks - 1,
            _ => rng.below(blocks),
        };
        let offset = index * block;
        let io = Io {
            op: Op::Read,
            offset,
            len: block,
            slot: 0,
            tag: u64::from(i),
        };
        device
            .submit(&[io])
            .map_err(|e| read_error(format!("byte {offset}"), e.to_string()))?;
        done.clear();
        device
            .reap(1, None, &mut done)
            .map_err(|e| read_error(format!("byte {offset}"), e.to_string()))?;
        let completion = done[0];
        if completion.result != block as i64 {
            return Err(read_error(
                format!("byte {offset}"),
                format!("the read returned {}", completion.result),
            ));
        }
        let data = device.buffer(0);
        let erased =
            data.iter().all(|&b| b == 0) || (method.may_read_ones() && data.iter().all(|&b| b == 0xff));
        if !erased {
            not_erased.push(offset);
        }
    }
    Ok(not_erased)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_engine::testdev::MemDevice;

    /// Offers what it is told to; "purges" nothing (the device's data is set up by the test).
    struct Offering(Vec<EraseMethod>, Vec<EraseMethod>);

    impl Purger for Offering {
        fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
            if self.0.contains(&method) {
                Ok(())
            } else {
                Err("no".into())
            }
        }
        fn purge(&mut self, method: EraseMethod) -> Result<(), String> {
            self.1.push(method);
            Ok(())
        }
    }

    #[test]
    fn auto_takes_the_best_offered_method_that_verifies() {
        let mut device = MemDevice::new(1 << 20, 1000);
        let mut purger = Offering(vec![EraseMethod::Discard, EraseMethod::Zero], vec![]);
        let report = erase(&mut device, &mut purger, None, 16, 7).unwrap();
        assert_eq!(report.method, Some(EraseMethod::Discard));
        assert_eq!(purger.1, vec![EraseMethod::Discard], "zero fill was not needed");
        let names: Vec<&str> = report.steps.iter().map(|(m, _)| m.name()).collect();
        assert_eq!(names, ["secure-erase", "secdiscard", "discard"]);
        assert!(report.steps[0].1.starts_with("not offered"));
    }

    #[test]
    fn data_left_behind_is_found_and_every_method_is_tried() {
        let mut device = MemDevice::new(1 << 20, 1000);
        // The last block still holds data (sample 1 is always the last block).
        let len = device.data.len();
        device.data[len - 1] = 0x5a;
        let mut purger = Offering(EraseMethod::ALL.to_vec(), vec![]);
        let report = erase(&mut device, &mut purger, None, 8, 7).unwrap();
        assert_eq!(report.method, None);
        assert_eq!(purger.1, EraseMethod::ALL.to_vec());
        assert_eq!(report.not_erased, vec![(1 << 20) - 4096]);
        assert!(
            report.steps.iter().all(|(_, s)| s.contains("still hold data")),
            "{:?}",
            report.steps
        );
    }

    #[test]
    fn only_a_firmware_erase_may_leave_ones() {
        let mut device = MemDevice::new(1 << 20, 1000);
        device.data.fill(0xff);
        let mut purger = Offering(EraseMethod::ALL.to_vec(), vec![]);
        let report = erase(&mut device, &mut purger, Some(EraseMethod::SecureErase), 8, 7).unwrap();
        assert_eq!(report.method, Some(EraseMethod::SecureErase));
        let report = erase(&mut device, &mut purger, Some(EraseMethod::Discard), 8, 7).unwrap();
        assert_eq!(report.method, None);
    }
}
