//! ssdlab-cache: a DRAM block cache over any [`ssdlab_core::device::Device`], in the spirit of Samsung's RAPID
//! (seed 001) but flush-exact: hot reads admitted by frequency and recency, small writes acknowledged from
//! memory and destaged as large writes in LBA order, sequential streams passed around it.
//!
//! [`store`] holds the memory and every state change of a cached block; [`admission`] decides what deserves a
//! frame; [`device`] is the cache as a `Device` (the `cached:` target, and what the NBD server exports);
//! [`watch`] says which blocks a read miss may cache (none the host changed while it was at the device);
//! [`cost`] is what its work costs in virtual time; [`hotmap`] is the saved list of hot blocks for a warm start. The crate does no I/O of its own and never reads the wall
//! clock: time is the inner device's clock.
//!
//! The promise, checked by assertions that stay on in release builds and by the model tests: every write
//! acknowledged before a FLUSH is on the device, and the device flushed, when that FLUSH completes; dirty data
//! is never evicted; a block never has two destage writes in flight.
#![forbid(unsafe_code)]

pub mod admission;
pub mod cost;
pub mod device;
pub mod hotmap;
pub mod store;
pub mod watch;

pub use device::{CacheConfig, CachedDevice};
pub use hotmap::{HotMap, HotMapError};
pub use store::BLOCK;

/// The default cache size: min(25% of RAM, 1 GiB), as RAPID sized itself.
pub fn default_size_bytes(ram_bytes: u64) -> u64 {
    (ram_bytes / 4).min(1 << 30) / BLOCK * BLOCK
}
