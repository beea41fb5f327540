//! The sweep section: write and read MB/s against transfer size (ATTO), or random IOPS against queue depth, and
//! a table per result.

use std::fmt::Write;

use ssdlab_core::schema::options::SweepAxis;
use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult, SweepRow};

use crate::svg::{Axis, Chart, Mark, Scale, Series, binary_size};
use crate::{charts, escape, label, mb_s, overlay_prefix, table};

/// One direction's speed in a sweep row.
type Speed = fn(&SweepRow) -> f64;

/// A line through the rows measured to their end, and the rows an interrupt cut short as dots of their own
/// ("NAME: cut short, partial"), never joined to the line.
fn lines(name: String, rows: &[SweepRow], point: impl Fn(&SweepRow) -> Option<(f64, f64)>) -> Vec<Series> {
    let full: Vec<(f64, f64)> = rows.iter().filter(|r| !r.partial).filter_map(&point).collect();
    let partial: Vec<(f64, f64)> = rows.iter().filter(|r| r.partial).filter_map(&point).collect();
    let mut out = vec![Series {
        name: name.clone(),
        points: full,
        mark: Mark::LineWithDots,
        style: None,
    }];
    if !partial.is_empty() {
        out.push(Series {
            name: format!("{name}: cut short, partial"),
            points: partial,
            mark: Mark::Dots,
            style: None,
        });
    }
    out
}

/// A point's label in a table, marked when an interrupt cut it short.
fn marked(label: String, row: &SweepRow) -> String {
    if row.partial {
        format!("{label} (partial)")
    } else {
        label
    }
}

pub(crate) fn sweep(group: &[&RunResult]) -> String {
    let (by_size, others): (Vec<&RunResult>, Vec<&RunResult>) =
        group.iter().partition(|r| axis_of(r) == SweepAxis::Size);
    let (by_mix, by_qd): (Vec<&RunResult>, Vec<&RunResult>) =
        others.into_iter().partition(|r| axis_of(r) == SweepAxis::Mix);
    let mut out = String::new();
    if !by_mix.is_empty() {
        out.push_str(&mix_sweeps(&by_mix));
    }
    if !by_size.is_empty() {
        out.push_str(&size_sweeps(&by_size));
    }
    if !by_qd.is_empty() {
        out.push_str(&queue_depth_sweeps(&by_qd));
    }
    out
}

fn axis_of(r: &RunResult) -> SweepAxis {
    match &r.analysis {
        Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) => a.axis,
        _ => SweepAxis::Size,
    }
}

/// The mix chart: random IOPS against the share of reads (all, and each direction's part), and a table per
/// result.
fn mix_sweeps(group: &[&RunResult]) -> String {
    let mut series = Vec::new();
    for r in group {
        let prefix = overlay_prefix(group, r);
        let parts: [(&str, Speed); 3] = [
            ("all operations", |row| row.read_iops + row.write_iops),
            ("reads", |row| row.read_iops),
            ("writes", |row| row.write_iops),
        ];
        for (part, iops) in parts {
            series.extend(lines(format!("{prefix}{part}"), rows_of(r), |row| {
                Some((row.read_percent? as f64, iops(row)))
            }));
        }
    }
    let (block, qd) = group
        .first()
        .and_then(|r| rows_of(r).first())
        .map_or((4096, 0), |row| {
            (row.transfer_bytes, row.queue_depth.unwrap_or(0))
        });
    let mut out = charts(&[Chart {
        title: format!(
            "Random {} IOPS at QD{qd} by share of reads",
            binary_size(block as f64)
        ),
        x: Axis::new("reads (% of operations)", Scale::Linear).range(Some(0.0), Some(100.0)),
        y: Axis::new("IOPS", Scale::Linear).range(Some(0.0), None),
        series,
    }]);
    for r in group {
        out.push_str(&result_table(r, "reads", |row| {
            row.read_percent.map_or("–".into(), |p| format!("{p}%"))
        }));
    }
    out
}

/// The queue-depth scaling charts: random IOPS, and mean and p99 latency, against queue depth, write and read; and
/// a table per result.
fn queue_depth_sweeps(group: &[&RunResult]) -> String {
    let mut series = Vec::new();
    for r in group {
        let prefix = overlay_prefix(group, r);
        let directions: [(&str, Speed); 2] = [("write", |row| row.write_iops), ("read", |row| row.read_iops)];
        for (direction, iops) in directions {
            series.extend(lines(format!("{prefix}random {direction}"), rows_of(r), |row| {
                Some((row.queue_depth? as f64, iops(row)))
            }));
        }
    }
    let block = group
        .first()
        .and_then(|r| rows_of(r).first())
        .map_or(4096, |row| row.transfer_bytes);
    // Latency against queue depth, from each point's phase (`randwrite-qd8`): flat while the drive has idle
    // parallelism, then rising with the queue once IOPS stop scaling (Little's law).
    let mut latency = Vec::new();
    for r in group {
        let prefix = overlay_prefix(group, r);
        for direction in ["write", "read"] {
            for (figure, pick) in [
                ("mean", (|l| l.mean) as fn(&ssdlab_core::schema::LatencyNs) -> f64),
                ("p99", |l| l.p99 as f64),
            ] {
                let points: Vec<(f64, f64)> = rows_of(r)
                    .iter()
                    .filter_map(|row| {
                        let qd = row.queue_depth?;
                        let phase = crate::phase(r, &format!("rand{direction}-qd{qd}"))?;
                        Some((f64::from(qd), pick(&phase.summary.latency_ns) / 1e3))
                    })
                    .collect();
                if !points.is_empty() {
                    latency.push(Series {
                        name: format!("{prefix}random {direction}, {figure}"),
                        points,
                        mark: Mark::LineWithDots,
                        style: None,
                    });
                }
            }
        }
    }
    let mut figures = vec![Chart {
        title: format!("Random {} IOPS by queue depth", binary_size(block as f64)),
        x: Axis::new("queue depth", Scale::Log2),
        y: Axis::new("IOPS", Scale::Linear),
        series,
    }];
    if !latency.is_empty() {
        figures.push(Chart {
            title: format!("Random {} latency by queue depth", binary_size(block as f64)),
            x: Axis::new("queue depth", Scale::Log2),
            y: Axis::new("latency (log scale)", Scale::Log10).format(crate::svg::micros),
            series: latency,
        });
    }
    let mut out = charts(&figures);
    for r in group {
        out.push_str(&result_table(r, "QD", |row| {
            row.queue_depth.map_or("–".into(), |q| q.to_string())
        }));
    }
    out
}

/// ATTO's chart and tables: sequential MB/s against transfer size.
fn size_sweeps(group: &[&RunResult]) -> String {
    let mut series = Vec::new();
    for r in group {
        let rows = rows_of(r);
        let prefix = overlay_prefix(group, r);
        let directions: [(&str, Speed); 2] = [
            ("write", |row| row.write_bytes_per_s),
            ("read", |row| row.read_bytes_per_s),
        ];
        for (direction, speed) in directions {
            series.extend(lines(format!("{prefix}{direction}"), rows, |row| {
                Some((row.transfer_bytes as f64, speed(row) / 1e6))
            }));
        }
    }
    let mut out = charts(&[Chart {
        title: "Sequential throughput by transfer size".into(),
        // K and M on this axis are binary (KiB, MiB), as transfer sizes are given; the rate axis is written out in
        // MB/s, so a "4K" never means 4 KiB on one axis and 4000 MB/s on the other.
        x: Axis::new("transfer size (K = KiB, M = MiB)", Scale::Log2).format(binary_size),
        y: Axis::new("MB/s", Scale::Linear).format(whole_number),
        series,
    }]);
    for r in group {
        out.push_str(&all_from_cache_note(group, r));
    }
    if group.len() > 1 {
        out.push_str(&side_by_side(group));
        return out;
    }
    for r in group {
        out.push_str(&result_table(r, "transfer", |row| {
            binary_size(row.transfer_bytes as f64)
        }));
    }
    out
}

/// A rate tick as a whole number ("4000", not "4K", beside an axis whose K is a kibibyte).
fn whole_number(v: f64) -> String {
    if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else {
        crate::svg::compact(v)
    }
}

/// Over a `cached:` target whose test region fits the cache, every read hits and every write is absorbed: the
/// sweep then measures the cache's modelled memory cost, the same for reads and writes, and says so rather than
/// leave two identical columns to look like a mistake. Nothing for a result the drive behind the cache served.
fn all_from_cache_note(group: &[&RunResult], r: &RunResult) -> String {
    let (mut hits, mut absorbed, mut misses, mut around) = (0u64, 0u64, 0u64, 0u64);
    for p in &r.phases {
        if let Some(c) = &p.summary.cache {
            hits += c.read_hits;
            absorbed += c.writes_absorbed;
            misses += c.read_misses;
            around += c.writes_around;
        }
    }
    if hits + absorbed == 0 || misses + around > 0 {
        return String::new();
    }
    format!(
        "<p class=\"meta\">{}every read ({hits}) and every write ({absorbed}) was served by the DRAM cache: the \
         test region fits in it, so these figures are the cache's modelled memory cost (a fixed time per request \
         and copies at one speed), the same for reads and writes; the drive behind it did none of this work.</p>",
        escape(&overlay_prefix(group, r))
    )
}

/// One result's points as a table under its name: the point (`first`), then write and read MB/s and IOPS.
fn result_table(r: &RunResult, first: &str, point: fn(&SweepRow) -> String) -> String {
    let header: Vec<String> = [first, "write MB/s", "read MB/s", "write IOPS", "read IOPS"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<Vec<String>> = rows_of(r)
        .iter()
        .map(|row| {
            vec![
                marked(point(row), row),
                mb_s(row.write_bytes_per_s),
                mb_s(row.read_bytes_per_s),
                format!("{:.0}", row.write_iops),
                format!("{:.0}", row.read_iops),
            ]
        })
        .collect();
    format!("<h3>{}</h3>{}", escape(&label(r)), table(&header, &rows))
}

/// Several sweeps in one table, as ATTO comparisons are published: a row per transfer size, write and read MB/s
/// of every result side by side under the result's name.
fn side_by_side(group: &[&RunResult]) -> String {
    let mut t = String::from("<div class=\"wide\"><table><tr><th rowspan=\"2\">transfer</th>");
    for r in group {
        let _ = write!(t, "<th colspan=\"2\">{}</th>", escape(&label(r)));
    }
    t.push_str("</tr><tr>");
    for _ in group {
        t.push_str("<th>write MB/s</th><th>read MB/s</th>");
    }
    t.push_str("</tr>");
    let mut sizes: Vec<u64> = group
        .iter()
        .flat_map(|r| rows_of(r).iter().map(|row| row.transfer_bytes))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let _ = write!(t, "<tr><td>{}</td>", binary_size(size as f64));
        for r in group {
            match rows_of(r).iter().find(|row| row.transfer_bytes == size) {
                Some(row) => {
                    let _ = write!(
                        t,
                        "<td>{}</td><td>{}</td>",
                        marked(mb_s(row.write_bytes_per_s), row),
                        marked(mb_s(row.read_bytes_per_s), row)
                    );
                }
                None => t.push_str("<td>–</td><td>–</td>"),
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    t
}

/// The rows of a sweep result (none when it was stopped before the first size).
fn rows_of(r: &RunResult) -> &[SweepRow] {
    match &r.analysis {
        Analysis::Sweep(MethodAnalysis {
            measured: Some(a), ..
        }) => &a.rows,
        _ => &[],
    }
}

/// How a sweeps result is shown.
pub(crate) struct Sweep;

impl crate::views::View for Sweep {
    type Analysis = ssdlab_core::schema::SweepAnalysis;
    const HEADING: &'static str = "Sweeps: transfer size (ATTO), queue depth, read/write mix";
    const STORY: &'static str = "One figure swept across transfer sizes (ATTO's chart), queue depths or read/write mixes, every other setting held. The transfer-size sweep shows where the interface, not the NAND, becomes the limit; the queue-depth sweep how much parallelism the drive needs to reach it.";

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        sweep(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::sweep_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::sweep(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::sweep(analysis)
    }
}
