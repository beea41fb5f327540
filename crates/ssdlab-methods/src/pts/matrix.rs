//! The PTS tests' matrices: which cells a round runs, in which order, and which cell and figure is the tracking
//! variable. The order is the specification's: read/write mix in the outer loop, block size from largest to
//! smallest in the inner one.

use ssdlab_core::schema::pts::{PtsCell, PtsCellResult, PtsFlavour, PtsMetric, PtsRound, PtsTest};

/// Read percentages of the IOPS test's mixes (R/W 100/0, 95/5, 65/35, 50/50, 35/65, 5/95, 0/100).
pub const IOPS_READ_PERCENTS: [u32; 7] = [100, 95, 65, 50, 35, 5, 0];
/// The IOPS test's block sizes, largest first.
pub const IOPS_BLOCK_BYTES: [u64; 8] = [
    1 << 20,
    128 << 10,
    64 << 10,
    32 << 10,
    16 << 10,
    8 << 10,
    4 << 10,
    512,
];
/// The latency test's mixes and block sizes.
pub const LATENCY_READ_PERCENTS: [u32; 3] = [100, 65, 0];
pub const LATENCY_BLOCK_BYTES: [u64; 3] = [8 << 10, 4 << 10, 512];
/// The throughput test's block sizes (sequential, 100% read and 100% write each).
pub const THROUGHPUT_BLOCK_BYTES: [u64; 2] = [1 << 20, 128 << 10];

/// Every cell of one round of `test`, in the order they run.
pub fn cells(test: PtsTest, queue_depth: u32) -> Vec<PtsCell> {
    let random = |read_percent, block_bytes, queue_depth| PtsCell {
        read_percent,
        block_bytes,
        sequential: false,
        queue_depth,
    };
    match test {
        PtsTest::Iops => IOPS_READ_PERCENTS
            .iter()
            .flat_map(|&read| {
                IOPS_BLOCK_BYTES
                    .iter()
                    .map(move |&bs| random(read, bs, queue_depth))
            })
            .collect(),
        PtsTest::Latency => LATENCY_READ_PERCENTS
            .iter()
            .flat_map(|&read| LATENCY_BLOCK_BYTES.iter().map(move |&bs| random(read, bs, 1)))
            .collect(),
        PtsTest::Throughput => THROUGHPUT_BLOCK_BYTES
            .iter()
            .flat_map(|&bs| {
                [100, 0].map(|read_percent| PtsCell {
                    read_percent,
                    block_bytes: bs,
                    sequential: true,
                    queue_depth,
                })
            })
            .collect(),
    }
}

/// One test of a run: its cells and its tracking variable.
#[derive(Debug, Clone, PartialEq)]
pub struct SubTestPlan {
    pub cells: Vec<PtsCell>,
    pub tracking_cell: PtsCell,
    pub tracking_metric: PtsMetric,
}

/// The tests a run of `test` makes, in order: one for IOPS and latency; for throughput one per block size, each
/// a round of 100% read and 100% write at that size tracking the write bandwidth (PTS-E: 1024 KiB then 128 KiB;
/// PTS-C: 1024 KiB).
pub fn sub_tests(test: PtsTest, flavour: PtsFlavour, queue_depth: u32) -> Vec<SubTestPlan> {
    let (tracking_cell, tracking_metric) = tracking(test, queue_depth);
    if test != PtsTest::Throughput {
        return vec![SubTestPlan {
            cells: cells(test, queue_depth),
            tracking_cell,
            tracking_metric,
        }];
    }
    let sizes: &[u64] = match flavour {
        PtsFlavour::Enterprise => &THROUGHPUT_BLOCK_BYTES,
        PtsFlavour::Client => &THROUGHPUT_BLOCK_BYTES[..1],
    };
    sizes
        .iter()
        .map(|&block_bytes| {
            let cells: Vec<PtsCell> = cells(test, queue_depth)
                .into_iter()
                .filter(|c| c.block_bytes == block_bytes)
                .collect();
            SubTestPlan {
                cells,
                tracking_cell: PtsCell {
                    block_bytes,
                    ..tracking_cell
                },
                tracking_metric,
            }
        })
        .collect()
}

/// The tracking variable of `test`: its cell and the figure followed.
pub fn tracking(test: PtsTest, queue_depth: u32) -> (PtsCell, PtsMetric) {
    match test {
        PtsTest::Iops => (
            PtsCell {
                read_percent: 0,
                block_bytes: 4 << 10,
                sequential: false,
                queue_depth,
            },
            PtsMetric::Iops,
        ),
        PtsTest::Latency => (
            PtsCell {
                read_percent: 0,
                block_bytes: 4 << 10,
                sequential: false,
                queue_depth: 1,
            },
            PtsMetric::LatencyNsMean,
        ),
        PtsTest::Throughput => (
            PtsCell {
                read_percent: 0,
                block_bytes: 1 << 20,
                sequential: true,
                queue_depth,
            },
            PtsMetric::BytesPerS,
        ),
    }
}

/// A tracking value as a person reads it: "6,120 IOPS", "408.0 MB/s", "111.2 us mean".
pub fn format_value(value: f64, metric: PtsMetric) -> String {
    match metric {
        PtsMetric::Iops => format!("{value:.0} IOPS"),
        PtsMetric::BytesPerS => format!("{:.1} MB/s", value / 1e6),
        PtsMetric::LatencyNsMean => format!("{:.1} µs mean", value / 1e3),
    }
}

/// The figure `metric` of a cell's result.
pub fn value(result: &PtsCellResult, metric: PtsMetric) -> f64 {
    match metric {
        PtsMetric::Iops => result.iops,
        PtsMetric::BytesPerS => result.bytes_per_s,
        PtsMetric::LatencyNsMean => result.latency_ns_mean,
    }
}

pub use ssdlab_core::schema::pts::size_token;

/// The phase name of a cell in a round: `r03-rw65-4k` (65% reads, random), `r03-seq-rw0-1m`.
pub fn phase_name(round: u32, cell: &PtsCell) -> String {
    format!(
        "r{round:02}-{}rw{}-{}",
        if cell.sequential { "seq-" } else { "" },
        cell.read_percent,
        size_token(cell.block_bytes)
    )
}

/// Every cell averaged over `rounds` (the measurement window): IOPS, bandwidth and mean latency are averaged,
/// the maximum latency is the window's maximum. A cell missing from some round is averaged over those it ran in.
pub fn window_average(rounds: &[&PtsRound]) -> Vec<PtsCellResult> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .cells
        .iter()
        .map(|c| {
            let runs: Vec<&PtsCellResult> = rounds
                .iter()
                .filter_map(|r| r.cells.iter().find(|x| x.cell == c.cell))
                .collect();
            let n = runs.len() as f64;
            PtsCellResult {
                cell: c.cell,
                iops: runs.iter().map(|r| r.iops).sum::<f64>() / n,
                bytes_per_s: runs.iter().map(|r| r.bytes_per_s).sum::<f64>() / n,
                latency_ns_mean: runs.iter().map(|r| r.latency_ns_mean).sum::<f64>() / n,
                latency_ns_max: runs.iter().map(|r| r.latency_ns_max).max().unwrap_or(0),
                // Percentiles do not average: the caller computes the window's from merged histograms.
                latency_ns_p99_999: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iops_matrix_is_the_specifications_in_its_order() {
        let cells = cells(PtsTest::Iops, 32);
        assert_eq!(cells.len(), 56);
        // Mix outer, block size inner, largest first: R/W 100/0 at 1024 KiB first, 0/100 at 0.5 KiB last.
        assert_eq!((cells[0].read_percent, cells[0].block_bytes), (100, 1 << 20));
        assert_eq!((cells[7].read_percent, cells[7].block_bytes), (100, 512));
        assert_eq!((cells[8].read_percent, cells[8].block_bytes), (95, 1 << 20));
        assert_eq!((cells[55].read_percent, cells[55].block_bytes), (0, 512));
        let (tracking, metric) = tracking(PtsTest::Iops, 32);
        assert_eq!(metric, PtsMetric::Iops);
        assert!(
            cells.contains(&tracking),
            "the tracking cell is one of the matrix"
        );
        assert!(cells.iter().all(|c| !c.sequential && c.queue_depth == 32));
    }

    #[test]
    fn latency_and_throughput_matrices() {
        let latency = cells(PtsTest::Latency, 32);
        assert_eq!(latency.len(), 9);
        assert!(latency.iter().all(|c| c.queue_depth == 1 && !c.sequential));
        assert!(latency.contains(&tracking(PtsTest::Latency, 32).0));
        let throughput = cells(PtsTest::Throughput, 8);
        assert_eq!(throughput.len(), 4);
        assert!(throughput.iter().all(|c| c.sequential && c.queue_depth == 8));
        assert!(throughput.contains(&tracking(PtsTest::Throughput, 8).0));
    }

    #[test]
    fn names_and_the_window_average() {
        let cell = cells(PtsTest::Iops, 32)[21]; // 65/35 at 8 KiB
        assert_eq!(phase_name(3, &cell), "r03-rw65-8k");
        assert_eq!(size_token(512), "512b");
        assert_eq!(size_token(1 << 20), "1m");
        let result = |iops: f64, max: u64| PtsCellResult {
            cell,
            iops,
            bytes_per_s: iops * 8192.0,
            latency_ns_mean: 1e9 / iops,
            latency_ns_max: max,
            latency_ns_p99_999: None,
        };
        let rounds: Vec<PtsRound> = [(1000.0, 5), (3000.0, 9)]
            .iter()
            .enumerate()
            .map(|(i, &(iops, max))| PtsRound {
                round: i as u32 + 1,
                tracking: iops,
                cells: vec![result(iops, max)],
            })
            .collect();
        let avg = window_average(&rounds.iter().collect::<Vec<_>>());
        assert_eq!(avg.len(), 1);
        assert_eq!(avg[0].iops, 2000.0);
        assert_eq!(avg[0].latency_ns_max, 9);
    }
}
