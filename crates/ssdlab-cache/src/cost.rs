//! What the cache's own work costs in virtual time, so that a cache over the virtual SSD gives meaningful
//! numbers. On a real device nothing here is used: the work takes the time it takes.
//!
//! The model is one CPU doing a fixed amount of bookkeeping per operation (look-up, list updates, completion)
//! plus a memory copy at a fixed bandwidth. The figures are calibrated on seed 001's RAPID review (a 2013
//! desktop with DDR3, Windows' storage stack around the cache): its 512 MB ATTO run peaked at 3.8-4 GB/s, which
//! a copy at 4.2 GB/s plus the per-request cost gives, and its QD1 4 KiB write took 13.5 µs end to end, which
//! 0.7 µs per request plus the 4 KiB copy (about 1 µs) leaves to the host's stack and the destaging it waits for.

/// A per-operation CPU cost plus memory copy time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    pub op_cpu_ns: u64,
    pub copy_bytes_per_s: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            op_cpu_ns: 700,
            copy_bytes_per_s: 4.2e9,
        }
    }
}

impl CostModel {
    /// The virtual time one operation that copies `bytes` keeps the CPU busy.
    pub fn op_ns(&self, bytes: u64) -> u64 {
        self.op_cpu_ns + (bytes as f64 / self.copy_bytes_per_s * 1e9).round() as u64
    }

    /// How the model is stated in a device's notes.
    pub fn describe(&self) -> String {
        format!(
            "the cache's own work is charged in virtual time: {:.1} µs of CPU per operation plus copies at {:.1} GB/s",
            self.op_cpu_ns as f64 / 1000.0,
            self.copy_bytes_per_s / 1e9
        )
    }
}
