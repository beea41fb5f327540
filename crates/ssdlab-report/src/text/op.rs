//! The partitions `op` lists, as stderr shows them. It prints nothing itself.

use ssdlab_core::schema::op::Partition;
use ssdlab_core::units::{BinaryBytes, DecimalBytes};

fn bytes(n: u64) -> String {
    format!("{} ({})", DecimalBytes(n as f64), BinaryBytes(n))
}

/// Prints the partitions and what follows the last one.
pub fn partition_lines(shown: &[Partition], capacity_bytes: u64) -> Vec<String> {
    let mut out = Vec::new();
    let Some(end) = shown
        .iter()
        .map(|p| p.start_bytes.saturating_add(p.len_bytes))
        .max()
    else {
        say!(out, "partitions  none");
        return out;
    };
    let names: Vec<String> = shown.iter().map(|p| p.to_string()).collect();
    say!(
        out,
        "partitions  {}; {} after the last unpartitioned (spare only if it was discarded and never written since)",
        names.join(", "),
        bytes(capacity_bytes.saturating_sub(end))
    );
    out
}
