//! What the DRAM cache (`cached:` targets) did over a phase: the statistics every summary carries for it.

use serde::{Deserialize, Serialize};

/// Cumulative counters of a cache; a phase summary holds the difference over the phase ([`CacheStats::since`]),
/// except the gauges (`dirty_bytes`, `cache_bytes`, `metadata_bytes`, `warmed_bytes`), which are as of the phase's
/// end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CacheStats {
    /// "writeback", "writethrough" or "readonly".
    pub mode: crate::target::CacheMode,
    /// The memory that holds cached data.
    pub cache_bytes: u64,
    /// The memory the cache's own bookkeeping takes (index, lists, admission sketch).
    pub metadata_bytes: u64,
    /// Reads served entirely from memory.
    pub read_hits: u64,
    /// Reads that went to the device (wholly or partly uncached).
    pub read_misses: u64,
    /// Blocks admitted after a read miss (the admission policy declines most one-time reads).
    pub admissions: u64,
    /// Clean blocks dropped to make room.
    pub evictions: u64,
    /// Writes acknowledged from memory.
    pub writes_absorbed: u64,
    /// Writes sent to the device instead (sequential streams past the cutoff, partial blocks not cached,
    /// write-through and read-only modes).
    pub writes_around: u64,
    /// Of those, in write-back mode: writes covering part of a block the cache could not merge them into (a
    /// sector written in part that it does not hold, or sectors that would leave a gap in what it holds), and
    /// writes too large for a quarter of the dirty allowance. Absent in records written before they were
    /// counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_around_partial: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_around_large: Option<u64>,
    /// Bytes in sequential streams past the cutoff, which bypass admission.
    pub sequential_bypass_bytes: u64,
    /// Memory held by dirty data at the end: a 4 KiB frame per block, however many of its sectors are dirty.
    pub dirty_bytes: u64,
    /// The most dirty bytes held at once since the cache was opened.
    pub dirty_bytes_peak: u64,
    /// Bytes written to the device by destaging, and in how many writes (their mean size shows coalescing).
    pub destaged_bytes: u64,
    pub destage_writes: u64,
    pub flushes: u64,
    /// Time host writes spent waiting because the dirty limit was reached.
    pub dirty_limit_wait_ns: u64,
    /// Bytes read into the cache from its hot map when it was opened (a gauge: the warm start).
    #[serde(default)]
    pub warmed_bytes: u64,
    /// Time spent passing I/O through (misses not admitted, writes sent to the device) because the host CPU was
    /// busier than the cache's `cpu-limit`, how many times that began, and the reads and writes it affected.
    #[serde(default)]
    pub pass_through_ns: u64,
    #[serde(default)]
    pub pass_through_episodes: u64,
    #[serde(default)]
    pub pass_through_ops: u64,
}

impl CacheStats {
    /// The counters accumulated between `earlier` and `self`; gauges keep their current values.
    pub fn since(&self, earlier: &CacheStats) -> CacheStats {
        CacheStats {
            read_hits: self.read_hits - earlier.read_hits,
            read_misses: self.read_misses - earlier.read_misses,
            admissions: self.admissions - earlier.admissions,
            evictions: self.evictions - earlier.evictions,
            writes_absorbed: self.writes_absorbed - earlier.writes_absorbed,
            writes_around: self.writes_around - earlier.writes_around,
            sequential_bypass_bytes: self.sequential_bypass_bytes - earlier.sequential_bypass_bytes,
            destaged_bytes: self.destaged_bytes - earlier.destaged_bytes,
            destage_writes: self.destage_writes - earlier.destage_writes,
            flushes: self.flushes - earlier.flushes,
            dirty_limit_wait_ns: self.dirty_limit_wait_ns - earlier.dirty_limit_wait_ns,
            pass_through_ns: self.pass_through_ns - earlier.pass_through_ns,
            pass_through_episodes: self.pass_through_episodes - earlier.pass_through_episodes,
            pass_through_ops: self.pass_through_ops - earlier.pass_through_ops,
            writes_around_partial: difference(self.writes_around_partial, earlier.writes_around_partial),
            writes_around_large: difference(self.writes_around_large, earlier.writes_around_large),
            ..*self
        }
    }

    /// The share of reads served from memory.
    pub fn read_hit_ratio(&self) -> f64 {
        let reads = self.read_hits + self.read_misses;
        if reads == 0 {
            0.0
        } else {
            self.read_hits as f64 / reads as f64
        }
    }

    /// The mean size of a destage write in bytes.
    pub fn destage_write_bytes_mean(&self) -> f64 {
        if self.destage_writes == 0 {
            0.0
        } else {
            self.destaged_bytes as f64 / self.destage_writes as f64
        }
    }
}

/// A counter's growth, when both readings have it.
fn difference(now: Option<u64>, earlier: Option<u64>) -> Option<u64> {
    Some(now? - earlier.unwrap_or(0))
}
