//! The region-scan section: read speed by position on the device, and each result's minimum, median, maximum
//! and slow regions.

use ssdlab_core::schema::{Analysis, RegionScanAnalysis, RunResult};

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, label, table};

pub(crate) fn region_scan(group: &[&RunResult]) -> String {
    let scans: Vec<(&RunResult, &RegionScanAnalysis)> = group
        .iter()
        .filter_map(|r| match &r.analysis {
            Analysis::RegionScan(a) => Some((*r, a)),
            _ => None,
        })
        .collect();
    let series: Vec<Series> = scans
        .iter()
        .map(|(r, a)| Series {
            name: label(r),
            points: a
                .regions
                .iter()
                // A region that could not be read is a gap in the line, never a speed of zero.
                .map(|x| {
                    (
                        x.offset_bytes as f64 / 1e9,
                        x.bytes_per_s.map_or(f64::NAN, |b| b / 1e6),
                    )
                })
                .collect(),
            mark: Mark::LineWithDots,
            style: None,
        })
        .collect();
    let mut out = charts(&[Chart {
        title: "Read speed by position on the device".into(),
        x: Axis::new("offset (GB)", Scale::Linear),
        y: Axis::new("MB/s", Scale::Linear),
        series,
    }]);
    let header: Vec<String> = [
        "",
        "min MB/s",
        "median MB/s",
        "max MB/s",
        "slow regions",
        "unreadable regions",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = scans
        .iter()
        .map(|(r, a)| {
            vec![
                label(r),
                format!("{:.1}", a.min_bytes_per_s / 1e6),
                format!("{:.1}", a.median_bytes_per_s / 1e6),
                format!("{:.1}", a.max_bytes_per_s / 1e6),
                a.slow_region_offsets.len().to_string(),
                a.unreadable_region_offsets.len().to_string(),
            ]
        })
        .collect();
    out.push_str(&table(&header, &rows));
    out
}

/// How a read speed across the device (region scan) result is shown.
pub(crate) struct RegionScan;

impl crate::views::View for RegionScan {
    type Analysis = ssdlab_core::schema::RegionScanAnalysis;
    const HEADING: &'static str = "Read speed across the device (region scan)";
    const STORY: &'static str = "The whole device read region by region, whatever files it holds: read speed across the device. Regions that read slowly are old data the drive has not refreshed, or a failing area; a healthy drive reads evenly.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        region_scan(group)
    }
}
