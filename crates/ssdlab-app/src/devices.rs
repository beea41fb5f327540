//! `ssdlab devices`: the machine's block devices and what the safety gate would say about each. Reads only.

use anyhow::{Context, Result};
use ssdlab_core::units::BinaryBytes;
use ssdlab_io::inventory::block_devices;

use crate::ports::{Outcome, Ports};

/// Lists the block devices (as JSON lines when `json`).
pub fn run(json: bool, ports: &mut Ports) -> Result<Outcome> {
    let devices = block_devices().context("cannot list /sys/block")?;
    if json {
        let lines = devices.iter().map(|d| {
            serde_json::json!({
                "device": d.path,
                "model": d.model,
                "size_bytes": d.size_bytes,
                "logical_block_bytes": d.logical_block_bytes,
                "rotational": d.rotational,
                "discard_max_bytes": d.discard_max_bytes,
                "partitions": d.partitions,
                "partition_of": d.parent,
                "extended_partition": d.container,
                "in_use": d.in_use,
                "findings": d.findings,
                "inspect_error": d.inspect_error,
            })
            .to_string()
        });
        return ports.print_lines(lines);
    }
    // The table is the command's output, so it goes to stdout (as `sim profiles` does).
    let mut lines = vec![format!(
        "{:<16}{:>11}{:>7}{:>6}{:>9}  {:<24}state (the safety gate's findings)",
        "device", "size", "sector", "rot", "discard", "model"
    )];
    for d in &devices {
        let state = match (&d.inspect_error, d.findings.is_empty()) {
            (Some(e), _) => format!("not inspected: {e}"),
            (None, true) => "free: no sign of use".into(),
            (None, false) => format!(
                "{}: {}",
                if d.in_use { "IN USE" } else { "holds data" },
                d.findings.join("; ")
            ),
        };
        let partitions = if d.partitions.is_empty() {
            String::new()
        } else {
            format!(" [partitions {}]", d.partitions.join(" "))
        };
        lines.push(format!(
            "{:<16}{:>11}{:>7}{:>6}{:>9}  {:<24}{state}{partitions}",
            d.path.display().to_string(),
            BinaryBytes(d.size_bytes).to_string(),
            d.logical_block_bytes,
            if d.rotational { "yes" } else { "no" },
            if d.discard_max_bytes > 0 { "yes" } else { "no" },
            match (&d.parent, d.container) {
                (Some(disk), true) => format!("extended partition of {disk} (holds its logical ones)"),
                (Some(disk), false) => format!("partition of {disk}"),
                (None, _) if d.model.is_empty() => "-".into(),
                (None, _) => d.model.clone(),
            },
        ));
    }
    if ports.print_lines(lines)? == Outcome::PipeClosed {
        return Ok(Outcome::PipeClosed);
    }
    ports.console.say(&format!(
        "{} block devices and {} partitions; `--allow-destroy` is refused on IN USE ones always, on ones that hold \
         data unless `--force`",
        devices.iter().filter(|d| d.parent.is_none()).count(),
        devices.iter().filter(|d| d.parent.is_some()).count()
    ));
    Ok(Outcome::Passed)
}
