//! What `op` found and did, as stderr shows it: the drive, its raw NAND and built-in spare area, the
//! partitions, the plan for `--set` and the discard. It prints nothing itself.

use ssdlab_core::device::DeviceInfo;
use ssdlab_core::schema::op::{OpAnalysis, OpApplied, Partition, RawNandSource, SpareArea};
use ssdlab_core::units::{BinaryBytes, DecimalBytes};

/// A size in decimal and binary units: "256.06 GB (238.47 GiB)".
pub fn bytes(n: u64) -> String {
    format!("{} ({})", DecimalBytes(n as f64), BinaryBytes(n))
}

/// Both conventions of a spare area.
pub fn describe(spare: &SpareArea) -> String {
    format!(
        "OP {:.1}% = (physical - logical) / logical; spare factor {:.1}% = (physical - logical) / physical",
        100.0 * spare.op_ratio,
        100.0 * spare.spare_factor_ratio
    )
}

/// Where the raw NAND figure comes from.
pub fn source_text(source: &RawNandSource) -> String {
    match source {
        RawNandSource::Given => "given by --raw-nand".into(),
        RawNandSource::Known(what) => format!("known drive: {what}"),
        RawNandSource::Simulated => "the virtual drive's data blocks".into(),
        RawNandSource::Assumed => {
            "assumed: a drive sold as N GB carries at least N GiB of NAND (the decimal/binary \
             difference); give --raw-nand SIZE for the exact figure"
                .into()
        }
    }
}

/// The partitions and what follows the last one.
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

/// A drive as `op` examined it (`shown` is the path given): the drive, raw NAND, built-in spare area, partitions,
/// notes, and with `--set` what it means and how to partition for it.
pub fn drive_lines(record: &OpAnalysis, info: &DeviceInfo, shown: &str) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "drive       {shown} ({}), {} logical",
        info.model.trim(),
        bytes(info.capacity_bytes)
    );
    for note in &record.notes {
        say!(out, "note        {note}");
    }
    say!(
        out,
        "raw NAND    {}: {}",
        bytes(record.built_in.physical_bytes),
        source_text(&record.raw_nand_source)
    );
    say!(
        out,
        "built in    {}{}",
        describe(&record.built_in),
        if record.raw_nand_source == RawNandSource::Assumed {
            " (at least)"
        } else {
            ""
        }
    );
    out.extend(partition_lines(&record.partitions, info.capacity_bytes));
    let Some(planned) = &record.planned else {
        say!(
            out,
            "to add spare area, leave a share of the drive unused: --set 25% shows what it means, and with \
             --allow-destroy discards that tail"
        );
        return out;
    };
    say!(
        out,
        "--set {}% leaves the last {} unused: usable {}",
        planned.unused_percent,
        bytes(info.capacity_bytes - planned.usable_bytes),
        bytes(planned.usable_bytes)
    );
    say!(out, "with it     {}", describe(&planned.with_tail_unused));
    let sector = u64::from(info.logical_block_bytes.max(512));
    let first = (1u64 << 20) / sector;
    let size = (planned.usable_bytes / sector).saturating_sub(first);
    say!(
        out,
        "partitions  must end at or before byte {} (sector {} of {sector} bytes){}",
        planned.usable_bytes,
        planned.usable_bytes / sector,
        if size > 0 {
            format!(
                "; e.g. one partition from 1 MiB: `printf 'label: gpt\\nstart={first}, size={size}\\n' | sfdisk \
                 {shown}`, and leave the rest unpartitioned"
            )
        } else {
            String::new()
        }
    );
    out
}

/// What the discard did, and where partitions must stay.
pub fn applied_lines(applied: &OpApplied, usable_bytes: u64) -> Vec<String> {
    let mut out = Vec::new();
    say!(
        out,
        "discarded   bytes {}..{} ({}){}",
        applied.offset_bytes,
        applied.offset_bytes + applied.len_bytes,
        bytes(applied.len_bytes),
        if applied.gpt_backup_bytes > 0 {
            format!(
                "; the last {} bytes hold the GPT's backup and were kept",
                applied.gpt_backup_bytes
            )
        } else {
            String::new()
        }
    );
    match &applied.read_back_error {
        Some(e) => say!(
            out,
            "read back   failed after the discard: {e}; the tail was discarded all the same"
        ),
        None => say!(
            out,
            "read back   {} sampled tail blocks {}",
            applied.samples,
            if applied.tail_reads_zero {
                "read as zeroes"
            } else {
                "do not all read as zeroes (the drive does not promise zeroes after a discard; the blocks are unmapped all the same)"
            }
        ),
    }
    say!(
        out,
        "done        keep every partition below byte {usable_bytes}: a write to the tail takes the spare area back"
    );
    out
}
