//! The region scan: read speed across the LBA range of one device, read-only. The device is cut into equal
//! regions, the start of each is read (all of it, or `read_bytes` of it), and a region that reads below a
//! fraction of the median is read again: contention passes, a media slowdown repeats.
//!
//! It only reads, through [`Device`]; opening the device read-only is the caller's job.

use ssdlab_core::device::{Device, DeviceError, DeviceInfo};
use ssdlab_core::schema::{RegionRow, RegionScanAnalysis, Verdict};
use ssdlab_core::stats::median;

use super::read::{Reader, ScanItem, ScanReads, scan_item};
use crate::session::MethodError;

/// What to read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegionScanOptions {
    /// How many equal regions the device is cut into (2 to 100000).
    pub regions: u32,
    /// How much of each region to read (None: all of it).
    pub read_bytes: Option<u64>,
    pub reader: Reader,
    /// A region is slow below this fraction of the median speed, twice.
    pub slower_than: f64,
}

/// Where the regions fall on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionPlan {
    pub region_bytes: u64,
    /// Bytes read at the start of each region.
    pub read_bytes: u64,
}

/// Cuts the device into aligned regions. Errors name the flag that asks for the impossible.
pub fn plan(info: &DeviceInfo, options: &RegionScanOptions) -> Result<RegionPlan, MethodError> {
    if !(2..=100_000).contains(&options.regions) {
        return Err(MethodError::Invalid(format!(
            "--regions {}: use 2 to 100000",
            options.regions
        )));
    }
    if options.read_bytes == Some(0) {
        return Err(MethodError::Invalid(
            "--region-bytes 0: read at least 4k of each region, or leave it out to read all of it".into(),
        ));
    }
    let align = (info.logical_block_bytes.max(512) as u64).max(4096);
    let region_bytes = info.capacity_bytes / options.regions as u64 / align * align;
    if region_bytes == 0 {
        return Err(MethodError::Invalid(format!(
            "--regions {}: the device ({} bytes) is too small for that many regions of at least {align} bytes",
            options.regions, info.capacity_bytes
        )));
    }
    let read_bytes = options
        .read_bytes
        .map_or(region_bytes, |l| l.next_multiple_of(align).min(region_bytes));
    Ok(RegionPlan {
        region_bytes,
        read_bytes,
    })
}

/// A read error, said as the region's: a region that cannot be read ends the region scan (a row without a speed
/// would be a hole in the curve nobody sees), so the error says where.
fn in_region(offset: u64, e: DeviceError) -> DeviceError {
    match e {
        DeviceError::Os { what, cause } => DeviceError::Os {
            what: format!("the region at byte {offset}: {what}"),
            cause,
        },
        DeviceError::Invalid(why) => DeviceError::Invalid(format!("the region at byte {offset}: {why}")),
        other => other,
    }
}

/// Reads every region, re-reads the slow ones, and judges. A region that fails to read ends it with an error
/// naming the region.
pub fn region_scan(
    device: &mut dyn Device,
    options: &RegionScanOptions,
) -> Result<(RegionScanAnalysis, Verdict), MethodError> {
    let plan = plan(device.info(), options)?;
    let name = device.info().target.clone();
    let read = |device: &mut dyn Device, offset: u64| -> Result<f64, MethodError> {
        let item = ScanItem {
            name: format!("region at {offset}"),
            name_bytes_hex: None,
            device: name.clone(),
            age_s: 0.0,
            ranges: vec![(offset, plan.read_bytes)],
        };
        let reads = ScanReads {
            reader: options.reader,
            random_reads: 0,
        };
        scan_item(device, &item, &reads)
            .map(|scan| scan.bytes_per_s)
            .map_err(|e| MethodError::Device(in_region(offset, e)))
    };
    let mut regions = Vec::with_capacity(options.regions as usize);
    for i in 0..options.regions as u64 {
        let offset = i * plan.region_bytes;
        regions.push(RegionRow {
            offset_bytes: offset,
            bytes: plan.read_bytes,
            bytes_per_s: read(device, offset)?,
            reread_bytes_per_s: None,
        });
    }
    let speeds: Vec<f64> = regions.iter().map(|r| r.bytes_per_s).collect();
    let median_bytes_per_s = median(&speeds);
    let limit_bytes_per_s = options.slower_than * median_bytes_per_s;
    let mut slow_region_offsets = Vec::new();
    for row in regions.iter_mut().filter(|r| r.bytes_per_s < limit_bytes_per_s) {
        let again = read(device, row.offset_bytes)?;
        row.reread_bytes_per_s = Some(again);
        if again < limit_bytes_per_s {
            slow_region_offsets.push(row.offset_bytes);
        }
    }
    let analysis = RegionScanAnalysis {
        region_bytes: plan.region_bytes,
        median_bytes_per_s,
        min_bytes_per_s: speeds.iter().copied().fold(f64::INFINITY, f64::min),
        max_bytes_per_s: speeds.iter().copied().fold(0.0, f64::max),
        slow_region_offsets,
        regions,
    };
    // Slow regions, confirmed by a second read, are what a region scan exists to find.
    let verdict = Verdict {
        finding: !analysis.slow_region_offsets.is_empty(),
        passed: analysis.slow_region_offsets.is_empty(),
        reasons: if analysis.slow_region_offsets.is_empty() {
            vec![]
        } else {
            vec![format!(
                "{} regions read at less than {} of the median speed, twice",
                analysis.slow_region_offsets.len(),
                options.slower_than
            )]
        },
    };
    Ok((analysis, verdict))
}
