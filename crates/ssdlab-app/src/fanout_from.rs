//! `ssdlab fanout --from DIR...`: the query over drives measured on different hosts, from their saved fan-out
//! results. Each drive's histogram is merged exactly (bucket for bucket); runs of different read sizes or
//! lengths are refused with the reason, since a query's latency mixes only like reads. A drive reads the same
//! offsets wherever it is measured (its stream is keyed by its target), so results from two hosts make the
//! query the same drives make when measured together.
//!
//! It reads result files only; it never opens a drive.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::device::ClockKind;
use ssdlab_core::histogram::Histogram;
use ssdlab_core::schema::Analysis;
use ssdlab_core::schema::options::RunOptions;
use ssdlab_core::units::parse_duration_ns;
use ssdlab_methods::fanout::fleet::FleetDrive;
use ssdlab_methods::fanout::measure::DriveReads;

use crate::flags::size_flag;

/// The drives of several saved fan-outs, ready for the query arithmetic.
#[derive(Debug, Clone)]
pub struct Merged {
    pub drives: Vec<FleetDrive>,
    pub reads: Vec<DriveReads>,
    pub block_bytes: u64,
    pub runtime_ns: u64,
    /// The runtime as the first result wrote it (for the record and the workload line).
    pub runtime: String,
    pub bs: String,
    pub clock: ClockKind,
    pub capacity_bytes: u64,
}

/// Reads every result and checks they are alike: fan-out results, one read size, one run length.
pub fn merge(dirs: &[PathBuf]) -> Result<Merged> {
    let results = crate::report::read_results(dirs)?;
    let mut merged: Option<Merged> = None;
    let mut first_dir = PathBuf::new();
    for (dir, result) in dirs.iter().zip(results) {
        let shown = dir.display();
        let (Analysis::Fanout(analysis), RunOptions::Fanout(options)) = (&result.analysis, &result.options)
        else {
            bail!(
                "--from {shown}: a {} result; --from merges fan-out results (ssdlab fanout --target ... --out DIR \
                 on each host)",
                result.analysis.kind()
            );
        };
        let block_bytes = size_flag("bs", &options.bs).map_err(|e| anyhow!("--from {shown}: {e}"))?;
        let runtime_ns = parse_duration_ns(&options.runtime)
            .map_err(|e| anyhow!("--from {shown}: its runtime {}: {e}", options.runtime))?;
        let merged = merged.get_or_insert_with(|| {
            first_dir = dir.clone();
            Merged {
                drives: Vec::new(),
                reads: Vec::new(),
                block_bytes,
                runtime_ns,
                runtime: options.runtime.clone(),
                bs: options.bs.clone(),
                clock: result.target.clock,
                capacity_bytes: 0,
            }
        });
        if block_bytes != merged.block_bytes {
            bail!(
                "--from {shown}: its drives read {} at a time and those of {} read {}; a query's latency mixes \
                 only like reads: measure every host with the same --bs",
                options.bs,
                first_dir.display(),
                merged.bs
            );
        }
        if runtime_ns != merged.runtime_ns {
            bail!(
                "--from {shown}: its drives read for {} and those of {} for {}; drives that ran for different \
                 times saw different stretches of their behaviour (a drive's GC, a refresh): measure every host \
                 with the same --runtime",
                options.runtime,
                first_dir.display(),
                merged.runtime
            );
        }
        if result.target.clock != merged.clock {
            bail!(
                "--from {shown}: virtual drives and real ones keep different clocks; merge results of one kind"
            );
        }
        merged.capacity_bytes += result.target.capacity_bytes;
        for drive in &analysis.drives {
            let mut histogram = Histogram::new();
            histogram.merge_sparse(&drive.histogram.to_sparse());
            merged.drives.push(FleetDrive {
                name: drive.name.clone(),
                target: drive.target.clone(),
                data_age_months: drive.data_age_months,
            });
            merged.reads.push(DriveReads {
                histogram,
                per_second: drive.per_second.clone(),
                runtime_s: analysis.runtime_s,
                failure: drive.failure.clone(),
            });
        }
    }
    merged.ok_or_else(|| anyhow!("--from: give at least one result directory"))
}
