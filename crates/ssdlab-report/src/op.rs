//! The over-provisioning record: the drive's spare area in both conventions, the raw NAND figure's source, its
//! partitions, what `--set` leaves unused and what applying it discarded.

use std::fmt::Write;

use ssdlab_core::schema::op::{RawNandSource, SpareArea};
use ssdlab_core::schema::{Analysis, RunResult};
use ssdlab_core::units::DecimalBytes;

use crate::{escape, label, table_with_class};

fn spare(s: &SpareArea) -> String {
    format!(
        "OP {:.1}% (of the logical capacity), spare factor {:.1}% (of the NAND): {} logical over {} of NAND",
        100.0 * s.op_ratio,
        100.0 * s.spare_factor_ratio,
        DecimalBytes(s.logical_bytes as f64),
        DecimalBytes(s.physical_bytes as f64)
    )
}

fn source(s: &RawNandSource) -> String {
    match s {
        RawNandSource::Given => "given by --raw-nand".into(),
        RawNandSource::Known(what) => format!("known drive: {what}"),
        RawNandSource::Simulated => "the virtual drive's data blocks".into(),
        RawNandSource::Assumed => "assumed: at least as many GiB as the drive has GB (a lower bound)".into(),
    }
}

pub(crate) fn op(group: &[&RunResult]) -> String {
    let mut out = String::new();
    for r in group {
        let Analysis::Op(a) = &r.analysis else {
            continue;
        };
        if group.len() > 1 {
            let _ = write!(out, "<h3>{}</h3>", escape(&label(r)));
        }
        let mut rows = vec![
            vec!["raw NAND".to_string(), source(&a.raw_nand_source)],
            vec!["built in".into(), spare(&a.built_in)],
        ];
        let partitions: Vec<String> = a.partitions.iter().map(|p| p.to_string()).collect();
        rows.push(vec![
            "partitions".into(),
            if partitions.is_empty() {
                "none".into()
            } else {
                partitions.join(", ")
            },
        ]);
        if let Some(p) = &a.planned {
            rows.push(vec![
                format!("--set {}%", p.unused_percent),
                format!(
                    "usable up to byte {} ({}); {}",
                    p.usable_bytes,
                    DecimalBytes(p.usable_bytes as f64),
                    spare(&p.with_tail_unused)
                ),
            ]);
            if let (Some(offset), Some(len)) = (p.tail_offset_bytes, p.tail_len_bytes) {
                rows.push(vec![
                    "tail left unused".into(),
                    format!("bytes {offset}..{}", offset + len),
                ]);
            }
            if let Some(target) = &p.equivalent_target {
                rows.push(vec!["the same drive built that way".into(), target.clone()]);
            }
        }
        rows.push(vec![
            "applied".into(),
            match &a.applied {
                Some(d) if d.read_back_error.is_some() => format!(
                    "discarded bytes {}..{}; the read-back after it failed: {}",
                    d.offset_bytes,
                    d.offset_bytes + d.len_bytes,
                    d.read_back_error.as_deref().unwrap_or_default()
                ),
                Some(d) => format!(
                    "discarded bytes {}..{}{}; {} sampled tail blocks {}",
                    d.offset_bytes,
                    d.offset_bytes + d.len_bytes,
                    if d.gpt_backup_bytes > 0 {
                        format!(" (the GPT's backup, {} bytes, kept)", d.gpt_backup_bytes)
                    } else {
                        String::new()
                    },
                    d.samples,
                    if d.tail_reads_zero {
                        "read back as zeroes"
                    } else {
                        "do not all read back as zeroes (unmapped all the same)"
                    }
                ),
                None => "no: nothing was written".into(),
            },
        ]);
        for note in &a.notes {
            rows.push(vec!["note".into(), note.clone()]);
        }
        out.push_str(&table_with_class(
            "header",
            &["spare area".into(), String::new()],
            &rows,
        ));
    }
    out
}

/// How a over-provisioning result is shown.
pub(crate) struct Op;

impl crate::views::View for Op {
    type Analysis = ssdlab_core::schema::op::OpAnalysis;
    const HEADING: &'static str = "Over-provisioning: the spare area, and the tail left unused";
    const STORY: &'static str = "The spare area a drive keeps beyond what it shows (over-provisioning), and the part of it a user may leave unused at the end of the drive to give garbage collection room.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        op(group)
    }
}
