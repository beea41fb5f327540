//! `ssdlab erase`'s record: which purge methods were tried on the device, what each did, and whether the sampled
//! blocks read back erased. Written to `result.json` so an erase leaves an auditable record (the device's identity
//! and capacity are in the result's `target`), in the spirit of NIST SP 800-88's certificate of sanitization.
//! It only describes; deciding and verifying are `ssdlab_methods::erase`'s.

use serde::{Deserialize, Serialize};

/// How to purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EraseMethod {
    /// The drive's firmware sanitize (NVMe or ATA SANITIZE: crypto erase, block erase or overwrite).
    Sanitize,
    /// The drive's firmware secure erase (NVMe format with secure erase, ATA SECURITY ERASE UNIT).
    SecureErase,
    /// BLKSECDISCARD.
    #[serde(rename = "secdiscard")]
    SecDiscard,
    /// BLKDISCARD.
    Discard,
    /// BLKZEROOUT: every LBA reads back as zeroes.
    Zero,
}

impl EraseMethod {
    pub const ALL: [EraseMethod; 5] = [
        EraseMethod::Sanitize,
        EraseMethod::SecureErase,
        EraseMethod::SecDiscard,
        EraseMethod::Discard,
        EraseMethod::Zero,
    ];

    /// The name `--method` and `result.json` use.
    pub fn name(self) -> &'static str {
        match self {
            EraseMethod::Sanitize => "sanitize",
            EraseMethod::SecureErase => "secure-erase",
            EraseMethod::SecDiscard => "secdiscard",
            EraseMethod::Discard => "discard",
            EraseMethod::Zero => "zero",
        }
    }

    /// What the method does not promise, in NIST SP 800-88's terms (a purge makes data unrecoverable by any
    /// means; a clear only by reading the LBAs).
    pub fn caveat(self) -> Option<&'static str> {
        match self {
            EraseMethod::Sanitize | EraseMethod::SecDiscard => None,
            EraseMethod::SecureErase => Some(
                "how far a secure erase reaches into an SSD's spare and retired blocks is up to its firmware; NIST \
                 SP 800-88 prefers sanitize where the drive offers it",
            ),
            EraseMethod::Discard => Some(
                "a discard unmaps the blocks and they read back as zeroes, but it is not a purge: old data can \
                 stay in the NAND until garbage collection erases it; use a firmware erase for a purge",
            ),
            EraseMethod::Zero => Some(
                "zero fill clears every LBA, but it is not a purge: old copies can stay in spare blocks until \
                 garbage collection erases them; use a firmware erase for a purge",
            ),
        }
    }

    /// Whether the drive's firmware did it: a block may then read back as all ones (the NAND's erased state) or
    /// as noise (a cryptographic erase) rather than as zeroes.
    pub fn is_firmware(self) -> bool {
        matches!(self, EraseMethod::Sanitize | EraseMethod::SecureErase)
    }
}

/// One method tried or passed over, and what happened, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EraseStep {
    pub method: EraseMethod,
    pub outcome: String,
}

/// How an erase went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EraseAnalysis {
    /// The method whose result verified, if any.
    pub method: Option<EraseMethod>,
    /// Each method tried or passed over, in order.
    pub steps: Vec<EraseStep>,
    /// Blocks sampled: read before the erase, and again after each method that ran.
    pub samples: u32,
    /// Byte offsets of sampled blocks that did not read back erased.
    pub not_erased_offsets_bytes: Vec<u64>,
    /// Sampled blocks that held data (neither all zeroes nor all ones) before the erase: when none did, the
    /// check after it shows little.
    pub held_data_before: u32,
    /// From the first read of the samples to the last, on the device's clock.
    pub elapsed_s: f64,
}

impl EraseAnalysis {
    /// What the verified method does not promise, if anything.
    pub fn caveat(&self) -> Option<&'static str> {
        self.method.and_then(EraseMethod::caveat)
    }
}
