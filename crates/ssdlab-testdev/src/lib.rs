//! ssdlab-testdev: the devices ssdlab's tests run on instead of a drive.
//!
//! [`MemDevice`] is one memory device with a virtual clock whose [`MemOptions`] cover what the tests need: a
//! service time per operation (fixed, or random with a heavy tail), reads that take their data on arrival,
//! slow reads that complete after everything else, a volatile write cache that a FLUSH makes durable and a
//! crash loses, no stored data at all for huge devices, and a log of every operation. [`FaultDevice`] wraps any
//! [`ssdlab_core::device::Device`] and injects faults by [`Rule`]: an error (a negative errno), a short
//! transfer, a torn write, a stall, a refused submission, at chosen operations, operation kinds or byte ranges,
//! or by chance from a seed; every fault it injects is recorded in its [`FaultLog`].
//!
//! Everything here is deterministic: time is virtual (or the wrapped device's), randomness comes from
//! ssdlab-core's seeded generator, and the crate does no I/O, spawns no threads and never reads the wall clock.
//! It is for tests only: no shipped code depends on it.
#![forbid(unsafe_code)]

mod fault;
mod faulty;
mod mem;
mod options;
mod store;

pub use fault::{Fault, Rule, Switch};
pub use faulty::{FaultDevice, FaultLog, Injected};
pub use mem::MemDevice;
pub use options::{MemOptions, ReadsAt, Service, SlowReads};
