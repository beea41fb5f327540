//! What a fault is and when one is injected: a [`Fault`] kind, the [`Rule`] that chooses which operations get
//! it (operation kinds, a byte range, which of the matching operations, a chance, a [`Switch`]), and the
//! switch a test flips while the device is owned elsewhere. Pure decisions: applying a fault to a device is
//! [`crate::FaultDevice`]'s job.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ssdlab_core::device::{Io, Op};
use ssdlab_core::rng::Rng;

/// EIO: the errno of an I/O error.
pub const EIO: i32 = 5;

/// What happens to an operation a rule picks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// It fails with this errno (its completion's result is the negative errno) and never reaches the device:
    /// a failed write writes nothing, a failed FLUSH makes nothing durable.
    Error(i32),
    /// A read or write moves only its first `keep_bytes` and completes with that count: a short transfer (as a
    /// read at the end of a file is, to the byte). The prefix goes to the device below as it is: over a device
    /// that takes only whole blocks, keep a multiple of its block. Other operations fail with EIO.
    Short { keep_bytes: u64 },
    /// A write whose first `landed_bytes` (rounded down to the device's block) reach the device, completing
    /// with EIO: the caller cannot know how much landed. Other operations fail with EIO.
    Torn { landed_bytes: u64 },
    /// It completes normally, this long after the device finished it: a stall on the device's clock.
    Stall { ns: u64 },
    /// The submission is refused with this reason (a device that rejects work outright: busy sanitizing,
    /// gone); nothing of the batch is accepted.
    Refuse(String),
    /// Silent corruption: a read or write completes normally with one byte of its data changed (XOR `mask`),
    /// `byte` bytes into the transfer (modulo its length). A read returns the changed byte; a write stores it
    /// (the caller's buffer is given back as it was). Other operations pass untouched.
    Corrupt { byte: u64, mask: u8 },
    /// A lost operation: it completes as done and never reaches the device (a write or discard a lying cache
    /// dropped, a flush that flushed nothing). A read cannot be lost: it fails with EIO.
    Lost,
    /// A misdirected read or write: it completes normally at another place, `by_bytes` further on (wrapping
    /// within the device, rounded down to its block). A write lands there and its own place keeps its old
    /// data; a read returns the other place's data. Other operations pass untouched.
    Misdirect { by_bytes: u64 },
}

impl Fault {
    /// An I/O error.
    pub fn eio() -> Self {
        Fault::Error(EIO)
    }

    /// Whether the caller is told: an error, a short or torn transfer or a refusal is seen in the completion;
    /// a stall, corruption, a lost or misdirected operation is not (only a check of the data can find them).
    pub fn is_silent(&self) -> bool {
        matches!(
            self,
            Fault::Stall { .. } | Fault::Corrupt { .. } | Fault::Lost | Fault::Misdirect { .. }
        )
    }
}

/// A switch shared between a test and a rule inside a device the test no longer holds: the rule applies only
/// while it is on.
#[derive(Debug, Clone, Default)]
pub struct Switch(Arc<AtomicBool>);

impl Switch {
    pub fn new(on: bool) -> Self {
        Switch(Arc::new(AtomicBool::new(on)))
    }

    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::SeqCst);
    }

    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Which operations get a fault. An operation *matches* when its kind and byte range do (and the switch, if
/// any, is on); of the matching operations the first `after` pass, then up to `times` get the fault, each with
/// the rule's chance. Counts are per rule, in submission order, so "the third write fails" is
/// `Rule::new(Fault::eio()).on(&[Op::Write]).after(2).once()`. A device asks its rules in the order they were
/// added, and an operation one rule picks is not shown to the rules after it (they neither count it nor draw
/// for it).
#[derive(Debug, Clone)]
pub struct Rule {
    pub(crate) fault: Fault,
    ops: Option<Vec<Op>>,
    range: Option<Range<u64>>,
    after: u64,
    times: Option<u64>,
    /// Out of 2^32.
    chance: Option<u64>,
    switch: Option<Switch>,
    matched: u64,
    fired: u64,
}

impl Rule {
    /// Every operation gets `fault`; narrow it with the other methods.
    pub fn new(fault: Fault) -> Self {
        Rule {
            fault,
            ops: None,
            range: None,
            after: 0,
            times: None,
            chance: None,
            switch: None,
            matched: 0,
            fired: 0,
        }
    }

    /// Only operations of these kinds.
    pub fn on(mut self, ops: &[Op]) -> Self {
        self.ops = Some(ops.to_vec());
        self
    }

    /// Only operations overlapping these bytes (a FLUSH covers the whole device).
    pub fn within(mut self, bytes: Range<u64>) -> Self {
        self.range = Some(bytes);
        self
    }

    /// The first `n` matching operations pass.
    pub fn after(mut self, n: u64) -> Self {
        self.after = n;
        self
    }

    /// At most `n` operations get the fault.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    pub fn once(self) -> Self {
        self.times(1)
    }

    /// Each eligible operation gets the fault with probability `p`, drawn from the device's seed.
    pub fn chance(mut self, p: f64) -> Self {
        assert!((0.0..=1.0).contains(&p), "a probability, not {p}");
        self.chance = Some((p * 4_294_967_296.0) as u64);
        self
    }

    /// Only while `switch` is on (operations while it is off do not count as matching).
    pub fn when(mut self, switch: &Switch) -> Self {
        self.switch = Some(switch.clone());
        self
    }

    /// Whether `io` gets this rule's fault; counts it if it matches. `rng` is the rule's own stream.
    pub(crate) fn decide(&mut self, io: &Io, rng: &mut Rng) -> bool {
        let kind = self.ops.as_ref().is_none_or(|ops| ops.contains(&io.op));
        let place = self.range.as_ref().is_none_or(|r| {
            io.op == Op::Flush || (io.offset < r.end && r.start < io.offset.saturating_add(io.len.max(1)))
        });
        let on = self.switch.as_ref().is_none_or(Switch::is_on);
        if !(kind && place && on) {
            return false;
        }
        self.matched += 1;
        if self.matched <= self.after || self.times.is_some_and(|t| self.fired >= t) {
            return false;
        }
        if let Some(c) = self.chance
            && (rng.next_u64() >> 32) >= c
        {
            return false;
        }
        self.fired += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(op: Op, offset: u64, len: u64) -> Io {
        Io {
            op,
            offset,
            len,
            slot: 0,
            tag: 0,
        }
    }

    #[test]
    fn kinds_places_counts_and_switches_choose_the_operations() {
        let mut rng = Rng::new(1);
        let mut third_write = Rule::new(Fault::eio()).on(&[Op::Write]).after(2).once();
        let picked: Vec<bool> = (0..6)
            .map(|i| {
                let op = if i % 2 == 0 { Op::Write } else { Op::Read };
                third_write.decide(&io(op, 0, 512), &mut rng)
            })
            .collect();
        assert_eq!(picked, [false, false, false, false, true, false]);

        let mut place = Rule::new(Fault::eio()).within(4096..8192);
        assert!(
            !place.decide(&io(Op::Read, 0, 4096), &mut rng),
            "ends where it starts"
        );
        assert!(place.decide(&io(Op::Read, 8191, 1), &mut rng));
        assert!(
            place.decide(&io(Op::Flush, 0, 0), &mut rng),
            "a flush covers everything"
        );

        let switch = Switch::new(false);
        let mut switched = Rule::new(Fault::eio()).when(&switch).once();
        assert!(!switched.decide(&io(Op::Read, 0, 512), &mut rng));
        switch.set(true);
        assert!(switched.decide(&io(Op::Read, 0, 512), &mut rng));
        assert!(!switched.decide(&io(Op::Read, 0, 512), &mut rng), "once");
    }

    #[test]
    fn a_chance_is_about_right_and_replays_from_the_seed() {
        let draw = |seed: u64| {
            let mut rng = Rng::new(seed);
            let mut rule = Rule::new(Fault::eio()).chance(0.25);
            (0..4000)
                .map(|_| rule.decide(&io(Op::Read, 0, 512), &mut rng))
                .collect::<Vec<_>>()
        };
        let hits = draw(3).iter().filter(|&&b| b).count();
        assert!((800..1200).contains(&hits), "{hits} of 4000 at 25%");
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
