//! ssdlab-engine: runs a workload on any [`ssdlab_core::Device`] and measures it.
//!
//! This crate runs the workload description (ssdlab-core's `workload`, re-exported here as [`workload`]), and
//! owns the offset generators ([`access`]), the data written
//! and its verification ([`data`]), the runner that keeps the queue full ([`runner`]) and the per-second
//! accounting ([`accounting`]), and runs several jobs of one workload as one phase ([`jobs`]). It is generic over devices, so the same code drives a real drive, a file, the
//! null device or the virtual SSD. It never opens files, never prints and never reads the wall clock: time is
//! the device's clock.
#![forbid(unsafe_code)]

pub mod access;
pub mod accounting;
mod books;
pub mod data;
pub mod jobs;
pub mod replay;
pub mod runner;
/// The workload description lives in ssdlab-core (result.json records it); re-exported for the engine's users.
pub use ssdlab_core::workload;

pub use jobs::run_threaded;
pub use runner::{Observer, PhaseOutcome, run_jobs_ramped, run_phase, run_phase_ramped};
pub use workload::{Pattern, RwMode, Span, StopAt, Workload};
