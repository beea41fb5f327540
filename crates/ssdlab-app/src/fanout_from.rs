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
use ssdlab_core::schema::fanout::FanoutAnalysis;
use ssdlab_core::schema::options::{FanoutFlags, RunOptions};
use ssdlab_core::schema::{Analysis, RunResult};
use ssdlab_core::units::{BinaryBytes, Nanos};
use ssdlab_methods::fanout::fleet::FleetDrive;
use ssdlab_methods::fanout::measure::DriveReads;

/// The drives of several saved fan-outs, ready for the query arithmetic.
#[derive(Debug, Clone)]
pub struct Merged {
    pub drives: Vec<FleetDrive>,
    pub reads: Vec<DriveReads>,
    pub block_bytes: u64,
    pub runtime_ns: u64,
    pub seed: u64,
    pub mode: String,
    pub clock: ClockKind,
    pub capacity_bytes: u64,
}

/// Reads every result and checks they are alike: fan-out results, one read size, one run length.
pub fn merge(dirs: &[PathBuf]) -> Result<Merged> {
    let results = crate::report::read_results(dirs)?;
    let mut merged: Option<Merged> = None;
    let mut first_dir = PathBuf::new();
    for (dir, result) in dirs.iter().zip(results) {
        let shown = dir.display().to_string();
        let (analysis, options, block_bytes, runtime_ns) = fanout_of(&shown, &result)?;
        let merged = merged.get_or_insert_with(|| {
            first_dir = dir.clone();
            Merged {
                drives: Vec::new(),
                reads: Vec::new(),
                block_bytes,
                runtime_ns,
                seed: options.seed,
                mode: options.mode.clone(),
                clock: result.target.clock,
                capacity_bytes: 0,
            }
        });
        let first = first_dir.display().to_string();
        check_alike(&shown, &result, (block_bytes, runtime_ns), merged, &first)?;
        merged.capacity_bytes += result.target.capacity_bytes;
        add_drives(merged, &shown, &result.host.hostname, analysis)?;
    }
    merged.ok_or_else(|| anyhow!("--from: give at least one result directory"))
}

/// A complete fan-out result's analysis, options, read size and run length in nanoseconds, checked as the flags
/// check a fan-out measured here.
fn fanout_of<'a>(
    shown: &str,
    result: &'a RunResult,
) -> Result<(&'a FanoutAnalysis, &'a FanoutFlags, u64, u64)> {
    let (Analysis::Fanout(analysis), RunOptions::Fanout(options)) = (&result.analysis, &result.options)
    else {
        bail!(
            "--from {shown}: a {} result; --from merges fan-out results (ssdlab fanout --target ... --out DIR on \
             each host)",
            result.analysis.kind()
        );
    };
    if !result.complete {
        bail!(
            "--from {shown}: an interrupted fan-out (its drives read for less than its runtime); measure that host \
             again"
        );
    }
    let (block_bytes, runtime_ns) = (options.block_bytes, options.runtime_ns);
    // What the query arithmetic relies on, as the flags check it for a fan-out measured here.
    if !(512..=1 << 20).contains(&block_bytes) || !block_bytes.is_multiple_of(512) || runtime_ns < 100_000_000
    {
        bail!(
            "--from {shown}: reads of {} for {} are not a fan-out this version measures (a multiple of 512 from \
             512 to 1m, for at least 100ms)",
            BinaryBytes(block_bytes),
            Nanos(runtime_ns as f64)
        );
    }
    Ok((analysis, options, block_bytes, runtime_ns))
}

/// Refuses a result unlike the first: a query's latency mixes only like reads (one size, run length, seed, mode
/// and kind of clock).
fn check_alike(
    shown: &str,
    result: &RunResult,
    (block_bytes, runtime_ns): (u64, u64),
    merged: &Merged,
    first: &str,
) -> Result<()> {
    let RunOptions::Fanout(options) = &result.options else {
        unreachable!("checked by fanout_of");
    };
    if block_bytes != merged.block_bytes {
        bail!(
            "--from {shown}: its drives read {} at a time and those of {first} read {}; a query's latency mixes \
             only like reads: measure every host with the same --bs",
            BinaryBytes(block_bytes),
            BinaryBytes(merged.block_bytes)
        );
    }
    if runtime_ns != merged.runtime_ns {
        bail!(
            "--from {shown}: its drives read for {} and those of {first} for {}; drives that ran for different \
             times saw different stretches of their behaviour (a drive's GC, a refresh): measure every host with \
             the same --runtime",
            Nanos(runtime_ns as f64),
            Nanos(merged.runtime_ns as f64)
        );
    }
    if options.seed != merged.seed {
        bail!(
            "--from {shown}: measured with --seed {} and {first} with --seed {}; every host uses one seed, so each \
             drive reads the offsets it would read measured with the others",
            options.seed,
            merged.seed
        );
    }
    if options.mode != merged.mode {
        bail!(
            "--from {shown}: measured in --mode {} and {first} in --mode {}; merge runs of one mode",
            options.mode,
            merged.mode
        );
    }
    if result.target.clock != merged.clock {
        bail!(
            "--from {shown}: virtual drives and real ones keep different clocks; merge results of one kind"
        );
    }
    Ok(())
}

/// Adds a result's drives, each named by its host, with its histogram merged exactly.
fn add_drives(merged: &mut Merged, shown: &str, host: &str, analysis: &FanoutAnalysis) -> Result<()> {
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
            started: None,
            histogram,
            per_second: drive.per_second.clone(),
            runtime_s: analysis.runtime_s,
            failure: drive.failure.clone(),
            host_wait: drive
                .host_wait_ratio
                .zip(drive.host_wait_mean_ns)
                .map(|(ratio, mean_ns)| {
                    let wait_ns = (ratio * analysis.runtime_s * 1e9) as u64;
                    ssdlab_methods::fanout::measure::HostWait {
                        wait_ns,
                        scheduled: wait_ns / mean_ns.max(1),
                    }
                }),
        });
    }
    Ok(())
}
