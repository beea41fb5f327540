//! Purging a whole device with the best method it offers, and checking a sample of blocks reads back erased.
//!
//! The methods, best first: the drive's own sanitize and secure erase (firmware: every cell, spare area
//! included), the kernel's secure discard, discard (the drive unmaps everything; only drives that return zeroes
//! for unmapped blocks then read back erased), and zero fill (every LBA written, which leaves old data in spare
//! blocks until garbage collection). `auto` takes the first one the device offers whose result verifies; a method
//! that ran but did not verify is said, and the next one runs. What a method needs from the device beyond reads is
//! behind [`Purger`], which the binary implements with ioctls and vendor tools; this module decides and verifies,
//! and is generic over devices so it is tested on the simulator too.
//!
//! Verification reads the same sampled blocks before and after: a block is erased when it reads as zeroes, or,
//! after a firmware purge, as all ones or as anything other than what it held (a cryptographic erase leaves
//! unreadable noise, not zeroes).
//!
//! It never decides whether erasing is allowed: the caller opens the device through the safety gate first.

use ssdlab_core::device::{Device, Io, Op};
use ssdlab_core::rng::Rng;

pub use ssdlab_core::schema::erase::{EraseAnalysis, EraseMethod, EraseStep};

/// What a device can do to purge itself, beyond reads and writes.
pub trait Purger {
    /// Ok if the device offers `method`, else why not (in words, for the output).
    fn offers(&mut self, method: EraseMethod) -> Result<(), String>;
    /// Purges the whole device with `method`: what ran, in words, or how it failed.
    fn purge(&mut self, method: EraseMethod) -> Result<String, PurgeFailure>;
    /// What the user must see before `method` runs (nothing for a method not offered) (a temporary password and how to clear it if the purge is
    /// cut off, the drive's time estimate), for a caller whose purger cannot say it itself while it runs.
    fn notices(&mut self, _method: EraseMethod) -> Vec<String> {
        Vec::new()
    }
}

/// How a purge failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeFailure {
    pub reason: String,
    /// The purge had started in the drive and may still be running: nothing else is tried.
    pub started: bool,
}

impl From<String> for PurgeFailure {
    /// A failure before anything started.
    fn from(reason: String) -> Self {
        PurgeFailure {
            reason,
            started: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error("reading back {what}: {cause}")]
    Read { what: String, cause: String },
}

/// Purges with `requested` (or the best method that verifies, for `None`), then reads `samples` blocks
/// (the first, the last and random ones from `seed`) to check they are erased.
pub fn erase<D: Device + ?Sized>(
    device: &mut D,
    purger: &mut dyn Purger,
    requested: Option<EraseMethod>,
    samples: u32,
    seed: u64,
) -> Result<EraseAnalysis, EraseError> {
    let methods: Vec<EraseMethod> = match requested {
        Some(m) => vec![m],
        None => EraseMethod::ALL.to_vec(),
    };
    let started_ns = device.now_ns();
    let mut report = EraseAnalysis {
        method: None,
        steps: vec![],
        samples: 0,
        not_erased_offsets_bytes: vec![],
        held_data_before: 0,
        elapsed_s: 0.0,
    };
    let sampled = Samples::new(device, samples, seed)?;
    let before = sampled.read_all(device)?;
    report.samples = samples;
    report.held_data_before = before.iter().filter(|b| !b.zeroes && !b.ones).count() as u32;
    let baseline = Baseline {
        sampled,
        before,
        samples,
    };
    for method in methods {
        let what = match purge_with(purger, method, &mut report) {
            PurgeAttempt::Ran(what) => what,
            PurgeAttempt::NotRun => continue,
            PurgeAttempt::Abandoned => break,
        };
        if verify_purge(device, &baseline, method, &what, &mut report) == Verified::Stop {
            break;
        }
    }
    report.elapsed_s = device.now_ns().saturating_sub(started_ns) as f64 / 1e9;
    Ok(report)
}

/// The sampled blocks and what they held before any purge, to compare each method's result with.
struct Baseline {
    sampled: Samples,
    before: Vec<Fingerprint>,
    samples: u32,
}

/// What asking the purger for one method came to.
enum PurgeAttempt {
    /// It ran: what ran, in words.
    Ran(String),
    /// Not offered, or failed before it started: the next method is tried.
    NotRun,
    /// Failed after it started: it may still be running in the drive, so nothing else is tried.
    Abandoned,
}

/// Whether the methods after one that ran are still tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verified {
    /// Done: it verified, or its result cannot be read back, so nothing else is tried.
    Stop,
    /// Blocks still hold data: the next method is tried.
    TryNext,
}

/// Runs `method` if the device offers it; every outcome but a run is recorded as a step of `report` (a run is
/// recorded once it is verified).
fn purge_with(purger: &mut dyn Purger, method: EraseMethod, report: &mut EraseAnalysis) -> PurgeAttempt {
    if let Err(why) = purger.offers(method) {
        report.steps.push(step(method, format!("not offered: {why}")));
        return PurgeAttempt::NotRun;
    }
    match purger.purge(method) {
        Ok(what) => PurgeAttempt::Ran(what),
        Err(failure) if failure.started => {
            report.steps.push(step(
                method,
                format!(
                    "failed after it started: {}; nothing else was tried",
                    failure.reason
                ),
            ));
            PurgeAttempt::Abandoned
        }
        Err(failure) => {
            report
                .steps
                .push(step(method, format!("failed: {}", failure.reason)));
            PurgeAttempt::NotRun
        }
    }
}

/// Reads the sampled blocks back after `method` ran (`what`, in words) and records in `report` whether they
/// read back erased; says whether the next method is still tried.
fn verify_purge<D: Device + ?Sized>(
    device: &mut D,
    baseline: &Baseline,
    method: EraseMethod,
    what: &str,
    report: &mut EraseAnalysis,
) -> Verified {
    let samples = baseline.samples;
    // The purge ran: a read-back that fails now is part of the record, not an error that would lose it
    // (a drive still sanitizing in the background fails reads until it is done).
    let after = match baseline.sampled.read_all(device) {
        Ok(after) => after,
        Err(e) => {
            report.steps.push(step(
                method,
                format!(
                    "ran ({what}), but reading the samples back failed ({e}), so it is not verified; \
                     nothing else was tried"
                ),
            ));
            return Verified::Stop;
        }
    };
    let not_erased: Vec<u64> = baseline
        .sampled
        .offsets
        .iter()
        .zip(baseline.before.iter().zip(&after))
        .filter(|(_, (was, now))| !erased(method, was, now))
        .map(|(&offset, _)| offset)
        .collect();
    if not_erased.is_empty() {
        report.steps.push(step(
            method,
            format!("done ({what}); {samples} sampled blocks read back erased"),
        ));
        report.method = Some(method);
        report.not_erased_offsets_bytes.clear();
        return Verified::Stop;
    }
    report.steps.push(step(
        method,
        format!(
            "ran ({what}), but {} of {samples} sampled blocks still hold data (first at byte {})",
            not_erased.len(),
            not_erased[0]
        ),
    ));
    report.not_erased_offsets_bytes = not_erased;
    Verified::TryNext
}

/// One step of the record: the method and its outcome in words.
fn step(method: EraseMethod, outcome: String) -> EraseStep {
    EraseStep { method, outcome }
}

/// What is kept of a sampled block to compare before and after: whether it was all zeroes or all ones, and 64
/// of its 8-byte words spread over it (so a million samples do not keep a million blocks).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    zeroes: bool,
    ones: bool,
    words: [u64; FINGERPRINT_WORDS],
}

const FINGERPRINT_WORDS: usize = 64;

impl Fingerprint {
    fn of(block: &[u8]) -> Self {
        let stride = (block.len() / 8 / FINGERPRINT_WORDS).max(1) * 8;
        let mut words = [0u64; FINGERPRINT_WORDS];
        for (i, word) in words.iter_mut().enumerate() {
            let at = (i * stride).min(block.len() - 8);
            *word = u64::from_le_bytes(block[at..at + 8].try_into().unwrap());
        }
        Fingerprint {
            zeroes: block.iter().all(|&b| b == 0),
            ones: block.iter().all(|&b| b == 0xff),
            words,
        }
    }
}

/// Whether a sampled block that was `was` before the purge and is `now` after it counts as erased by `method`:
/// zeroes always. After a firmware purge also all ones, anything where the block held no data (a cryptographic
/// erase turns an empty block into noise too), or noise that shares at most a tenth of the sampled words with
/// what the block held (a cryptographic erase changes every word; a block with a few bytes changed still holds
/// its data). The kernel's methods must leave zeroes.
fn erased(method: EraseMethod, was: &Fingerprint, now: &Fingerprint) -> bool {
    let same_words = was.words.iter().zip(&now.words).filter(|(a, b)| a == b).count();
    let held_nothing = was.zeroes || was.ones;
    now.zeroes || (method.is_firmware() && (now.ones || held_nothing || same_words * 10 <= FINGERPRINT_WORDS))
}

/// The sampled blocks: the first, the last and random ones.
struct Samples {
    block: u64,
    offsets: Vec<u64>,
}

impl Samples {
    fn new<D: Device + ?Sized>(device: &mut D, samples: u32, seed: u64) -> Result<Self, EraseError> {
        let info = device.info().clone();
        let block = u64::from(info.logical_block_bytes.max(4096));
        let blocks = info.capacity_bytes / block;
        if blocks == 0 {
            return Err(EraseError::Read {
                what: "the device".into(),
                cause: format!("it is smaller than one {block}-byte block, so no block can be checked"),
            });
        }
        device.prepare(1, block as usize).map_err(|e| EraseError::Read {
            what: "the device".into(),
            cause: e.to_string(),
        })?;
        let mut rng = Rng::new(seed);
        let offsets = (0..samples)
            .map(|i| {
                block
                    * match i {
                        0 => 0,
                        1 => blocks - 1,
                        _ => rng.below(blocks),
                    }
            })
            .collect();
        Ok(Samples { block, offsets })
    }

    /// Every sampled block's fingerprint, in order.
    fn read_all<D: Device + ?Sized>(&self, device: &mut D) -> Result<Vec<Fingerprint>, EraseError> {
        let read_error = |offset: u64, cause: String| EraseError::Read {
            what: format!("byte {offset}"),
            cause,
        };
        let mut prints = Vec::with_capacity(self.offsets.len());
        for (i, &offset) in self.offsets.iter().enumerate() {
            let done = device
                .complete(Io {
                    op: Op::Read,
                    offset,
                    len: self.block,
                    slot: 0,
                    tag: i as u64,
                })
                .map_err(|e| read_error(offset, e.to_string()))?;
            if done.result < 0 {
                let err = std::io::Error::from_raw_os_error((-done.result) as i32);
                return Err(read_error(offset, err.to_string()));
            }
            if done.result != self.block as i64 {
                let short = format!("only {} of {} bytes came back", done.result, self.block);
                return Err(read_error(offset, short));
            }
            prints.push(Fingerprint::of(&device.buffer(0)[..self.block as usize]));
        }
        Ok(prints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_testdev::{Fault, FaultDevice, MemDevice, Rule, Switch};

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
        fn purge(&mut self, method: EraseMethod) -> Result<String, PurgeFailure> {
            self.1.push(method);
            Ok("as told".into())
        }
    }

    #[test]
    fn auto_takes_the_best_offered_method_that_verifies() {
        let mut device = MemDevice::new(1 << 20, 1000);
        let mut purger = Offering(vec![EraseMethod::Discard, EraseMethod::Zero], vec![]);
        let report = erase(&mut device, &mut purger, None, 16, 7).unwrap();
        assert_eq!(report.method, Some(EraseMethod::Discard));
        assert_eq!(purger.1, vec![EraseMethod::Discard], "zero fill was not needed");
        let names: Vec<&str> = report.steps.iter().map(|s| s.method.name()).collect();
        assert_eq!(names, ["sanitize", "secure-erase", "secdiscard", "discard"]);
        assert!(report.steps[0].outcome.starts_with("not offered"));
    }

    #[test]
    fn data_left_behind_is_found_and_every_method_is_tried() {
        let mut device = MemDevice::new(1 << 20, 1000);
        // The last block still holds data (sample 1 is always the last block).
        let len = device.data().len();
        device.data_mut()[len - 1] = 0x5a;
        let mut purger = Offering(EraseMethod::ALL.to_vec(), vec![]);
        let report = erase(&mut device, &mut purger, None, 8, 7).unwrap();
        assert_eq!(report.method, None);
        assert_eq!(purger.1, EraseMethod::ALL.to_vec());
        assert_eq!(report.not_erased_offsets_bytes, vec![(1 << 20) - 4096]);
        assert!(
            report.steps.iter().all(|s| s.outcome.contains("still hold data")),
            "{:?}",
            report.steps
        );
    }

    #[test]
    fn only_a_firmware_erase_may_leave_ones() {
        let mut device = MemDevice::new(1 << 20, 1000);
        device.data_mut().fill(0xff);
        let mut purger = Offering(EraseMethod::ALL.to_vec(), vec![]);
        let report = erase(&mut device, &mut purger, Some(EraseMethod::SecureErase), 8, 7).unwrap();
        assert_eq!(report.method, Some(EraseMethod::SecureErase));
        let report = erase(&mut device, &mut purger, Some(EraseMethod::Discard), 8, 7).unwrap();
        assert_eq!(report.method, None);
    }

    #[test]
    fn a_cryptographic_erase_counts_when_every_block_changed() {
        let print = |b: &[u8]| Fingerprint::of(b);
        let data = vec![0x5a; 4096];
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        // The fingerprint samples one 8-byte word every 64 bytes of a 4 KiB block.
        let mut nudged = data.clone();
        nudged[64] ^= 1;
        let changed = |words: usize| {
            let mut b = data.clone();
            for w in 0..words {
                b[w * 64] ^= 0xff;
            }
            print(&b)
        };
        let (was, zeroes) = (print(&data), print(&[0; 4096]));
        assert!(erased(EraseMethod::Sanitize, &was, &print(&noise)));
        assert!(erased(EraseMethod::SecureErase, &was, &print(&[0xff; 4096])));
        assert!(
            !erased(EraseMethod::Sanitize, &was, &was),
            "unchanged data is not erased"
        );
        assert!(
            !erased(EraseMethod::Sanitize, &was, &print(&nudged)),
            "one changed byte is not erased"
        );
        assert!(
            !erased(EraseMethod::Sanitize, &was, &changed(57)),
            "seven words the same: still data"
        );
        assert!(
            erased(EraseMethod::Sanitize, &was, &changed(58)),
            "six the same, as noise may leave"
        );
        assert!(
            !erased(EraseMethod::Discard, &was, &print(&noise)),
            "only a firmware purge may leave noise"
        );
        assert!(erased(EraseMethod::Zero, &was, &zeroes));
        assert!(
            erased(EraseMethod::Sanitize, &zeroes, &print(&noise)),
            "an empty block held nothing to leak"
        );
        assert!(
            !erased(EraseMethod::Zero, &zeroes, &print(&noise)),
            "zero fill must leave zeroes"
        );
    }

    #[test]
    fn a_purge_that_started_and_failed_stops_auto() {
        struct Started;
        impl Purger for Started {
            fn offers(&mut self, _: EraseMethod) -> Result<(), String> {
                Ok(())
            }
            fn purge(&mut self, _: EraseMethod) -> Result<String, PurgeFailure> {
                Err(PurgeFailure {
                    reason: "status unknown".into(),
                    started: true,
                })
            }
        }
        let mut device = MemDevice::new(1 << 20, 1000);
        device.data_mut().fill(7);
        let report = erase(&mut device, &mut Started, None, 8, 1).unwrap();
        assert_eq!(report.method, None);
        assert_eq!(report.steps.len(), 1, "{:?}", report.steps);
        assert!(report.steps[0].outcome.contains("nothing else was tried"));
        assert_eq!(report.held_data_before, 8);
    }

    #[test]
    fn a_purge_whose_read_back_fails_is_recorded_unverified_not_lost() {
        struct Sanitizing(Switch);
        impl Purger for Sanitizing {
            fn offers(&mut self, _: EraseMethod) -> Result<(), String> {
                Ok(())
            }
            fn purge(&mut self, _: EraseMethod) -> Result<String, PurgeFailure> {
                self.0.set(true);
                Ok("sanitize started".into())
            }
        }
        // A drive still sanitizing in the background refuses reads once the purge started.
        let sanitizing = Switch::new(false);
        let mut inner = MemDevice::new(1 << 20, 1000);
        inner.data_mut().fill(7);
        let mut device = FaultDevice::new(inner, 1).rule(
            Rule::new(Fault::Refuse("sanitize in progress".into()))
                .on(&[Op::Read])
                .when(&sanitizing),
        );
        let report =
            erase(&mut device, &mut Sanitizing(sanitizing), None, 8, 1).expect("a record, not an error");
        assert_eq!(report.method, None, "not verified");
        assert_eq!(report.steps.len(), 1, "{:?}", report.steps);
        let outcome = &report.steps[0].outcome;
        assert!(
            outcome.contains("ran (sanitize started)") && outcome.contains("sanitize in progress"),
            "{outcome}"
        );
        assert_eq!(report.held_data_before, 8);
    }
}
