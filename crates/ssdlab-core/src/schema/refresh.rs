//! What `ssdlab refresh` did: each file chosen and how it ended, the bytes rewritten, and the speeds its own
//! reads measured before and after.

use serde::{Deserialize, Serialize};

/// How one file's refresh ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RefreshOutcome {
    /// Rewritten in place and verified.
    Refreshed,
    /// `--dry-run`: it would be rewritten.
    Would,
    /// Not touched: refused before any write (in use, changed, pending elsewhere, ...).
    Skipped,
    /// Another program wanted it; ssdlab stopped and left it as it was.
    GaveWay,
    /// A read, write or verification failed; the reason says what state the file is in.
    Failed,
    /// Stopped by Ctrl-C, its times put back.
    Interrupted,
}

/// One file of a refresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefreshedFile {
    /// The path, readable (bytes that are not UTF-8 as `\xNN`).
    pub name: String,
    pub outcome: RefreshOutcome,
    pub size_bytes: u64,
    /// Bytes rewritten (the size for a refreshed file).
    pub rewritten_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Read speed of the old data (from the scan it came from, or refresh's first reads) and of the rewritten
    /// data (its verification reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_bytes_per_s: Option<f64>,
}

/// A whole refresh run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefreshAnalysis {
    pub dry_run: bool,
    /// Bytes chosen for rewriting: the wear cost in host writes.
    pub selected_bytes: u64,
    /// Files passed over as younger than `--older-than`.
    pub younger_files: u32,
    pub files: Vec<RefreshedFile>,
    pub rewritten_bytes: u64,
    pub seconds: f64,
    /// Time spent paused while the device was busy with other work.
    pub paused_s: f64,
    /// Files skipped, given up, failed or left pending (settling included).
    pub problems: u32,
}
