//! ssdlab-core: the vocabulary every other ssdlab crate speaks.
//!
//! This crate owns units and their parsing, the [`device::Device`] interface (submit/reap in the io_uring
//! shape, with a real or virtual clock), the log-linear latency [`histogram`], summary statistics, the seeded
//! random number generators, the workload description ([`workload`]) and the result schema written to
//! `result.json`.
//!
//! It must never do I/O: no files, no sockets, no clock reads, no printing. Anything that touches the
//! operating system lives in `ssdlab-io` or the binary.
#![forbid(unsafe_code)]

pub mod checksum;
pub mod device;
pub mod histogram;
pub mod prom;
pub mod rng;
pub mod schema;
pub mod scratch;
pub mod stats;
pub mod target;
pub mod trace;
pub mod units;
pub mod workload;

pub use device::{Completion, Device, DeviceError, DeviceInfo, DriveFacts, Io, Op};
pub use histogram::Histogram;
