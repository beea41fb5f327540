//! Each kind's headline figures, taken from the typed analysis: the numbers a reviewer quotes (plateau and
//! steady IOPS, the TRIM states, the best sequential speeds, p99 latency, the storage bench's data rate). The
//! baseline table sets them against one result, and the ranking draws them as bars when several results of a
//! kind are compared. It never renders a result's own sections.

use ssdlab_core::schema::RunResult;
use ssdlab_core::schema::options::SweepAxis;
use ssdlab_core::schema::pts::PtsMetric;
use ssdlab_core::units::Nanos;

use crate::label;
use crate::svg::bars_coloured;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    Higher,
    Lower,
}

/// One headline figure of a result.
pub(crate) struct Figure {
    pub name: &'static str,
    pub value: f64,
    pub better: Better,
    pub format: fn(f64) -> String,
    /// How far the figure would move on its own, relative to it: the standard error of the mean of its per-second
    /// samples or its repeats; None where the result holds nothing to measure it from.
    pub spread: Option<f64>,
}

impl Figure {
    fn with_spread(mut self, spread: Option<f64>) -> Self {
        self.spread = spread.filter(|s| s.is_finite());
        self
    }
}

/// The standard error of the mean of `values` over that mean (sd / sqrt(n) / mean): how far the figure, a mean
/// of these samples or repeats, would move on its own. None for fewer than two, or a zero mean.
fn relative_spread(values: &[f64]) -> Option<f64> {
    let m = ssdlab_core::stats::mean(values);
    (values.len() >= 2 && m > 0.0)
        .then(|| ssdlab_core::stats::std_dev(values) / (values.len() as f64).sqrt() / m)
}

fn mb(v: f64) -> String {
    format!("{:.1} MB/s", v / 1e6)
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}

fn ns(v: f64) -> String {
    Nanos(v).to_string()
}

fn percent(v: f64) -> String {
    format!("{:.0}%", 100.0 * v)
}

fn figure(name: &'static str, value: f64, better: Better, format: fn(f64) -> String) -> Figure {
    Figure {
        name,
        value,
        better,
        format,
        spread: None,
    }
}

/// Run's headline figures.
pub(crate) fn run(r: &ssdlab_core::schema::RunResult) -> Vec<Figure> {
    use Better::{Higher, Lower};
    r.phases
        .first()
        .map(|p| {
            let s = &p.summary;
            // Whole seconds only: a trailing partial window is noisier than the run.
            let whole: Vec<&ssdlab_core::schema::Sample> =
                p.samples.iter().filter(|x| x.seconds >= 0.999).collect();
            let iops: Vec<f64> = whole.iter().map(|x| x.iops).collect();
            let rate: Vec<f64> = whole.iter().map(|x| x.bytes_per_s).collect();
            vec![
                figure("IOPS", s.iops, Higher, count).with_spread(relative_spread(&iops)),
                figure("throughput", s.bytes_per_s, Higher, mb).with_spread(relative_spread(&rate)),
                figure("mean latency", s.latency_ns.mean, Lower, ns),
                figure("p99 latency", s.latency_ns.p99 as f64, Lower, ns),
            ]
        })
        .unwrap_or_default()
}

/// Consistency's headline figures.
pub(crate) fn consistency(a: &ssdlab_core::schema::ConsistencyAnalysis) -> Vec<Figure> {
    use Better::{Higher, Lower};
    vec![
        figure("plateau IOPS", a.plateau_iops, Higher, count),
        // No spread: the steady state's per-second standard deviation is the drive's own variation (GC), not
        // the uncertainty of its mean, and the analysis keeps no sample count to turn one into the other.
        figure("steady IOPS", a.steady_iops_mean, Higher, count),
        figure("steady std dev", a.steady_iops_std_dev, Lower, count),
    ]
}

/// Trim's headline figures.
pub(crate) fn trim(a: &ssdlab_core::schema::TrimAnalysis) -> Vec<Figure> {
    use Better::Higher;
    vec![
        figure("clean", a.clean_bytes_per_s, Higher, mb),
        figure("dirty", a.dirty_bytes_per_s, Higher, mb),
        figure("after TRIM", a.after_trim_bytes_per_s, Higher, mb),
        figure("restored", a.restored_fraction, Higher, percent),
    ]
}

/// Sweep's headline figures.
pub(crate) fn sweep(a: &ssdlab_core::schema::SweepAnalysis) -> Vec<Figure> {
    use Better::Higher;
    // Each axis has its own figures, so sweeps of different axes are never set against each other.
    let max = |f: fn(&ssdlab_core::schema::SweepRow) -> f64| a.rows.iter().map(f).fold(0.0, f64::max);
    let at_mix = |p: u32| {
        a.rows
            .iter()
            .find(|r| r.read_percent == Some(p))
            .map_or(f64::NAN, |r| r.read_iops + r.write_iops)
    };
    match a.axis {
        SweepAxis::Size => vec![
            figure("best sequential write", max(|r| r.write_bytes_per_s), Higher, mb),
            figure("best sequential read", max(|r| r.read_bytes_per_s), Higher, mb),
        ],
        SweepAxis::Qd => vec![
            figure("best random write IOPS", max(|r| r.write_iops), Higher, count),
            figure("best random read IOPS", max(|r| r.read_iops), Higher, count),
        ],
        SweepAxis::Mix => vec![
            figure("IOPS, 0% reads", at_mix(0), Higher, count),
            figure("IOPS, 50% reads", at_mix(50), Higher, count),
            figure("IOPS, 100% reads", at_mix(100), Higher, count),
        ],
    }
}

/// Latency's headline figures.
pub(crate) fn latency(a: &ssdlab_core::schema::LatencyAnalysis) -> Vec<Figure> {
    use Better::{Higher, Lower};
    vec![
        figure("IOPS", a.iops, Higher, count),
        figure("mean latency", a.latency_ns_mean, Lower, ns),
        figure("p99 latency", a.latency_ns_p99 as f64, Lower, ns),
        figure("maximum latency", a.latency_ns_max as f64, Lower, ns),
    ]
}

/// Quick's headline figures.
pub(crate) fn quick(a: &ssdlab_core::schema::quick::QuickAnalysis) -> Vec<Figure> {
    use Better::Higher;
    // The set's names are fixed, so each case's figure has a name that lives as long as the program.
    const NAMES: [(&str, bool, &str); 8] = [
        ("SEQ1M Q8T1", true, "SEQ1M Q8T1 read"),
        ("SEQ1M Q8T1", false, "SEQ1M Q8T1 write"),
        ("SEQ1M Q1T1", true, "SEQ1M Q1T1 read"),
        ("SEQ1M Q1T1", false, "SEQ1M Q1T1 write"),
        ("RND4K Q32T1", true, "RND4K Q32T1 read"),
        ("RND4K Q32T1", false, "RND4K Q32T1 write"),
        ("RND4K Q1T1", true, "RND4K Q1T1 read"),
        ("RND4K Q1T1", false, "RND4K Q1T1 write"),
    ];
    NAMES
        .iter()
        .filter_map(|&(case, read, name)| {
            let c = a.cases.iter().find(|c| c.name == case && c.read == read)?;
            Some(figure(name, c.mean_bytes_per_s(), Higher, mb).with_spread(relative_spread(&c.bytes_per_s)))
        })
        .collect()
}

/// Pts's headline figures.
pub(crate) fn pts(a: &ssdlab_core::schema::pts::PtsAnalysis) -> Vec<Figure> {
    use Better::{Higher, Lower};
    // Named by what is tracked, so PTS tests of different kinds are never set against each other.
    let (name, better, format): (&'static str, Better, fn(f64) -> String) = match a.first.tracking_metric {
        PtsMetric::Iops => ("steady-state IOPS (tracking)", Higher, count),
        PtsMetric::BytesPerS => ("steady-state bandwidth (tracking)", Higher, mb),
        PtsMetric::LatencyNsMean => ("steady-state mean response (tracking)", Lower, ns),
    };
    // The first test's: PTS-E's throughput runs 1024 KiB first, the size PTS-C runs alone.
    a.first
        .steady_state
        .window_mean
        .map(|m| vec![figure(name, m, better, format)])
        .unwrap_or_default()
}

/// Replay's headline figures.
pub(crate) fn replay(a: &ssdlab_core::schema::replay::ReplayAnalysis) -> Vec<Figure> {
    use Better::{Higher, Lower};
    vec![
        figure("average data rate", a.average_data_rate_bytes_per_s, Higher, mb),
        figure("average service time", a.average_service_time_ns, Lower, ns),
        figure("p99 latency", a.latency_ns.p99 as f64, Lower, ns),
    ]
}

/// Fanout's headline figures.
pub(crate) fn fanout(a: &ssdlab_core::schema::fanout::FanoutAnalysis) -> Vec<Figure> {
    use Better::Lower;
    vec![
        figure("query median", a.query.latency_ns.p50 as f64, Lower, ns),
        figure("query p95", a.query.latency_ns.p95 as f64, Lower, ns),
        figure("query p99", a.query.latency_ns.p99 as f64, Lower, ns),
    ]
}

/// Scan's headline figures.
pub(crate) fn scan(a: &ssdlab_core::schema::ScanAnalysis) -> Vec<Figure> {
    use Better::Lower;
    vec![
        figure("bulk-read hours", a.total_bulk_read_hours, Lower, |v| {
            format!("{v:.2} h")
        }),
        figure("flagged files", a.flagged.len() as f64, Lower, count),
    ]
}

/// Ranked bar charts of `group`'s headline figures, one per figure that at least two results have, best first
/// (highest or lowest, as the figure is better), each bar in its result's series colour. Nothing for a lone
/// result.
pub(crate) fn ranking(group: &[&RunResult]) -> String {
    if group.len() < 2 {
        return String::new();
    }
    let all: Vec<Vec<Figure>> = group.iter().map(|r| crate::views::figures(r)).collect();
    let mut names: Vec<&'static str> = Vec::new();
    for f in all.iter().flatten() {
        if !names.contains(&f.name) {
            names.push(f.name);
        }
    }
    let mut charts = String::new();
    for name in names {
        let mut items: Vec<(String, f64, usize)> = Vec::new();
        let mut shape = None;
        for (i, (r, figs)) in group.iter().zip(&all).enumerate() {
            if let Some(f) = figs.iter().find(|f| f.name == name && f.value.is_finite()) {
                items.push((label(r), f.value, i));
                shape = Some((f.better, f.format));
            }
        }
        let Some((better, format)) = shape else {
            continue;
        };
        if items.len() < 2 {
            continue;
        }
        let order = |a: &(String, f64, usize), b: &(String, f64, usize)| a.1.total_cmp(&b.1);
        match better {
            Better::Higher => items.sort_by(|a, b| order(b, a)),
            Better::Lower => items.sort_by(order),
        }
        let title = match better {
            Better::Higher => format!("{name}, ranked (higher is better)"),
            Better::Lower => format!("{name}, ranked (lower is better)"),
        };
        charts.push_str(&bars_coloured(&title, name, &items, format));
    }
    if charts.is_empty() {
        return String::new();
    }
    format!("<h3>Ranked</h3><div class=\"charts\">{charts}</div>")
}
