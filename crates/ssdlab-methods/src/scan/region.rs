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

/// A read error, said as the region's.
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

/// Reads every region, re-reads the slow ones, and judges. A region that fails to read is kept as a row without
/// a speed (its error said) and the scan goes on: the regions read are still a measurement, and the verdict
/// fails naming the regions that were not. Only a device none of whose regions can be read ends it with an
/// error.
pub fn region_scan(
    device: &mut dyn Device,
    options: &RegionScanOptions,
) -> Result<(RegionScanAnalysis, Verdict), MethodError> {
    let plan = plan(device.info(), options)?;
    let name = device.info().target.clone();
    let read = |device: &mut dyn Device, offset: u64| -> Result<f64, DeviceError> {
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
            .map_err(|e| in_region(offset, e))
    };
    let mut regions = Vec::with_capacity(options.regions as usize);
    let mut first_error = None;
    for i in 0..options.regions as u64 {
        let offset = i * plan.region_bytes;
        let (bytes_per_s, error) = match read(device, offset) {
            Ok(speed) => (Some(speed), None),
            Err(e) => {
                let said = e.to_string();
                first_error.get_or_insert(e);
                (None, Some(said))
            }
        };
        regions.push(RegionRow {
            offset_bytes: offset,
            bytes: plan.read_bytes,
            measured: bytes_per_s.is_some(),
            bytes_per_s,
            error,
            reread_bytes_per_s: None,
        });
    }
    if let Some(e) = first_error.filter(|_| regions.iter().all(|r| !r.measured)) {
        return Err(MethodError::Device(e));
    }
    let speeds: Vec<f64> = regions.iter().filter_map(|r| r.bytes_per_s).collect();
    let median_bytes_per_s = median(&speeds);
    let limit_bytes_per_s = options.slower_than * median_bytes_per_s;
    let mut slow_region_offsets = Vec::new();
    for row in regions
        .iter_mut()
        .filter(|r| r.bytes_per_s.is_some_and(|s| s < limit_bytes_per_s))
    {
        match read(device, row.offset_bytes) {
            Ok(again) => {
                row.reread_bytes_per_s = Some(again);
                if again < limit_bytes_per_s {
                    slow_region_offsets.push(row.offset_bytes);
                }
            }
            // A slow region that then fails to read is unreadable: its first speed is kept as measured.
            Err(e) => row.error = Some(e.to_string()),
        }
    }
    let unreadable_region_offsets: Vec<u64> = regions
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.offset_bytes)
        .collect();
    assert!(!speeds.is_empty(), "a scan with no region read ended above");
    let analysis = RegionScanAnalysis {
        region_bytes: plan.region_bytes,
        median_bytes_per_s,
        min_bytes_per_s: speeds.iter().copied().fold(f64::INFINITY, f64::min),
        max_bytes_per_s: speeds.iter().copied().fold(0.0, f64::max),
        unreadable_region_offsets,
        slow_region_offsets,
        regions,
    };
    let verdict = judge(&analysis, options.slower_than);
    Ok((analysis, verdict))
}

/// Regions that could not be read fail the scan (the drive failed to return data it holds); slow regions,
/// confirmed by a second read, are what a region scan exists to find.
fn judge(analysis: &RegionScanAnalysis, slower_than: f64) -> Verdict {
    let mut reasons = vec![];
    if let Some(error) = analysis.regions.iter().find_map(|r| r.error.as_ref()) {
        let measured = analysis.regions.iter().filter(|r| r.measured).count();
        reasons.push(format!(
            "{} of {} regions could not be read (first: {error}); the speeds are of the {measured} that were",
            analysis.unreadable_region_offsets.len(),
            analysis.regions.len(),
        ));
    }
    if !analysis.slow_region_offsets.is_empty() {
        reasons.push(format!(
            "{} regions read at less than {slower_than} of the median speed, twice",
            analysis.slow_region_offsets.len()
        ));
    }
    let unreadable = !analysis.unreadable_region_offsets.is_empty();
    let slow = !analysis.slow_region_offsets.is_empty();
    Verdict {
        finding: slow && !unreadable,
        passed: !slow && !unreadable,
        reasons,
        unknown: false,
    }
}
