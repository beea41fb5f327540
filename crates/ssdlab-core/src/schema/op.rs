//! `ssdlab op`'s record: the drive's spare area in both conventions, where its raw NAND figure came from, its
//! partitions, what `--set` would leave unused, and what applying it discarded. Written to `result.json` so a
//! drive prepared for a test (or for service) keeps a record of how. It only describes; the arithmetic, the
//! partition checks and the discard are `ssdlab_methods::op`'s.

use serde::{Deserialize, Serialize};

/// Where a raw NAND figure came from: how far to trust the OP computed from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawNandSource {
    /// `--raw-nand`, given by the user.
    Given,
    /// The known-drive table; the text names the source.
    Known(String),
    /// The virtual SSD's own geometry (data-holding blocks only).
    Simulated,
    /// Nothing better known: a drive sold as N GB carries at least N GiB of NAND, so this is a lower bound.
    Assumed,
}

/// A partition of the disk (as the kernel lists it, or as the table on the disk holds it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Partition {
    pub name: String,
    pub start_bytes: u64,
    pub len_bytes: u64,
}

impl std::fmt::Display for Partition {
    /// `sda1 (bytes 1048576..2097152)`: the name and the byte range it covers.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (bytes {}..{})",
            self.name,
            self.start_bytes,
            self.start_bytes.saturating_add(self.len_bytes)
        )
    }
}

/// What applying a plan did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpApplied {
    /// The discarded range.
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Bytes at the very end left alone because they hold the GPT's backup (0 without a GPT).
    pub gpt_backup_bytes: u64,
    /// Blocks of the tail read back afterwards.
    pub samples: u32,
    /// Whether every sampled block read back as zeroes (drives need not promise it after a discard).
    pub tail_reads_zero: bool,
    /// The flush or read-back after the discard failed (the discard itself was done): why.
    #[serde(default)]
    pub read_back_error: Option<String>,
}

/// Logical and physical capacity and the two ratios between them, as `result.json` keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpareArea {
    /// What the host can address (or, with an unused tail, what it will use).
    pub logical_bytes: u64,
    /// The NAND behind it.
    pub physical_bytes: u64,
    /// (physical - logical) / logical: the convention of "7% OP" and "28% OP".
    pub op_ratio: f64,
    /// (physical - logical) / physical: the spare factor of the write-amplification models.
    pub spare_factor_ratio: f64,
}

/// What `--set` asks for, and on a real drive the tail it leaves unused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpPlanned {
    /// `--set`: the share of the capacity left unused.
    pub unused_percent: f64,
    /// Where the usable area ends (aligned down to 1 MiB): every partition must end at or before it.
    pub usable_bytes: u64,
    /// The spare area with the tail unused.
    pub with_tail_unused: SpareArea,
    /// The range a discard would unmap (a real drive); absent for a virtual one.
    pub tail_offset_bytes: Option<u64>,
    pub tail_len_bytes: Option<u64>,
    /// For a virtual drive: the same drive built with that spare area (`sim:...?op=N`).
    pub equivalent_target: Option<String>,
}

/// How `ssdlab op` found the drive, and what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpAnalysis {
    pub raw_nand_source: RawNandSource,
    /// The spare area the drive has built in.
    pub built_in: SpareArea,
    /// The partitions, each range once (the kernel's names first); empty for a virtual drive.
    pub partitions: Vec<Partition>,
    /// With `--set`.
    pub planned: Option<OpPlanned>,
    /// With `--set` and `--allow-destroy`.
    pub applied: Option<OpApplied>,
    /// What the figures rest on (a virtual block device's arithmetic, a partition table that could not be read).
    #[serde(default)]
    pub notes: Vec<String>,
}
