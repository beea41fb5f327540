//! `ssdlab fanout --from DIR...`: the query over drives measured on different hosts, from their saved fan-out
//! results. Each drive's histogram is merged exactly (bucket for bucket); runs of different read sizes, lengths,
//! seeds or modes, and runs that were interrupted, are refused with the reason, since a query's latency mixes
//! only like reads. Every drive is named by its host (`HOST:/dev/nvme0n1`): two hosts' drives of the same name
//! are two drives. A drive reads the same offsets wherever it is measured (its stream is keyed by its target and
//! the seed), so results from two hosts make the query the same drives make when measured together.
//!
//! It reads result files only; it never opens a drive.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::device::ClockKind;
use ssdlab_core::histogram::{BUCKETS, Histogram};
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
    pub seed: u64,
    pub mode: String,
    pub clock: ClockKind,
    pub capacity_bytes: u64,
}

/// Reads every result and checks they are alike: fan-out results, one read size, one run length.
#[expect(
    clippy::too_many_lines,
    reason = "over 80 lines before the rule; split when next changed"
)]
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
        if !result.complete {
            bail!(
                "--from {shown}: an interrupted fan-out (its drives read for less than its runtime); measure that \
                 host again"
            );
        }
        let block_bytes = size_flag("bs", &options.bs).map_err(|e| anyhow!("--from {shown}: {e}"))?;
        let runtime_ns = parse_duration_ns(&options.runtime)
            .map_err(|e| anyhow!("--from {shown}: its runtime {}: {e}", options.runtime))?;
        // What the query arithmetic relies on, as the flags check it for a fan-out measured here.
        if !(512..=1 << 20).contains(&block_bytes)
            || !block_bytes.is_multiple_of(512)
            || runtime_ns < 100_000_000
        {
            bail!(
                "--from {shown}: reads of {} for {} are not a fan-out this version measures (a multiple of 512 \
                 from 512 to 1m, for at least 100ms)",
                options.bs,
                options.runtime
            );
        }
        let merged = merged.get_or_insert_with(|| {
            first_dir = dir.clone();
            Merged {
                drives: Vec::new(),
                reads: Vec::new(),
                block_bytes,
                runtime_ns,
                runtime: options.runtime.clone(),
                bs: options.bs.clone(),
                seed: options.seed,
                mode: options.mode.clone(),
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
        if options.seed != merged.seed {
            bail!(
                "--from {shown}: measured with --seed {} and {} with --seed {}; every host uses one seed, so each \
                 drive reads the offsets it would read measured with the others",
                options.seed,
                first_dir.display(),
                merged.seed
            );
        }
        if options.mode != merged.mode {
            bail!(
                "--from {shown}: measured in --mode {} and {} in --mode {}; merge runs of one mode",
                options.mode,
                first_dir.display(),
                merged.mode
            );
        }
        if result.target.clock != merged.clock {
            bail!(
                "--from {shown}: virtual drives and real ones keep different clocks; merge results of one kind"
            );
        }
        merged.capacity_bytes += result.target.capacity_bytes;
        let host = &result.host.hostname;
        for drive in &analysis.drives {
            if let Some(&(bad, _)) = drive
                .histogram
                .buckets
                .iter()
                .find(|(i, _)| *i as usize >= BUCKETS)
            {
                bail!(
                    "--from {shown}: drive {} has a histogram bucket {bad}, past the last ({}): not a result this \
                     version wrote",
                    drive.name,
                    BUCKETS - 1
                );
            }
            let mut histogram = Histogram::new();
            histogram.merge_sparse(&drive.histogram.to_sparse());
            merged.drives.push(FleetDrive {
                name: format!("{host}:{}", drive.name),
                target: format!("{host}:{}", drive.target),
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
