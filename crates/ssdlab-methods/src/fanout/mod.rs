//! Fan-out: which drive makes a distributed query slow, and what fixing it buys (seed 000: a search over 25
//! shards is as slow as the slowest shard; seed 004: the slowest drive bounds the array).
//!
//! Every drive runs the same random-read load ([`measure`]); a query that waits for all of them has the
//! product of their latency CDFs as its CDF ([`dist`]), which gives its percentiles for the drives given, for
//! more shards like them, for hedged requests and replicas, and each drive's share of the tail
//! ([`analysis`]); [`attribution`] says which drive or cohort of drives by data age makes the query slow at each
//! percentile, and what fixing it buys. [`fleet`] describes the virtual fleet of seed 000's 25 drives. Nothing here opens a device or
//! writes to one.

pub mod analysis;
pub mod attribution;
pub mod dist;
pub mod export;
pub mod fleet;
pub mod measure;

pub use analysis::{RunShape, WhatIf, analyze, verdict};
