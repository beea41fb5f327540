//! ssdlab-sim: a virtual SSD that runs in virtual time.
//!
//! This crate owns the flash translation layer ([`ftl`]: page mapping, greedy garbage collection with a
//! free-block reserve, TRIM, erase counts) and the analytic write-amplification model it is checked against
//! ([`wa`]), the read retries of aged data ([`retention`]) and the timing model around them ([`device`]). It never reads the wall clock, never opens a file and never spawns a thread: the same inputs and
//! seed give bit-identical results.
#![forbid(unsafe_code)]

pub mod device;
pub mod ftl;
mod page_times;
pub mod profile;
pub mod retention;
pub mod spec;
pub mod store;
pub mod wa;
