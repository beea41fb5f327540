//! Each kind's headline figures, taken from the typed analysis: the numbers a reviewer quotes (plateau and
//! steady IOPS, the TRIM states, the best sequential speeds, p99 latency, the storage bench's data rate). The
//! baseline table sets them against one result, and the ranking draws them as bars when several results of a
//! kind are compared. It never renders a result's own sections.

use ssdlab_core::schema::RunResult;
use ssdlab_core::schema::options::SweepAxis;
use ssdlab_core::schema::pts::PtsMetric;
use ssdlab_core::units::Nanos;

use crate::label;
use crate::svg::bars_with_spread;

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
        .then(|| ssdlab_core::stats::sample_std_dev(values) / (values.len() as f64).sqrt() / m)
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

/// A percentage to a tenth: a coefficient of variation of a few percent and its spread.
fn percent_tenths(v: f64) -> String {
    format!("{:.1}%", 100.0 * v)
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

/// Consistency's headline figures. What the method is about is how steady the drive is, so its variation is
/// the coefficient of variation of the steady seconds' IOPS (their standard deviation over their mean): a raw
/// standard deviation ranks a slower drive as steadier. Spreads treat the steady seconds as independent samples
/// (garbage collection makes neighbours alike, so they are a lower bound).
pub(crate) fn consistency(a: &ssdlab_core::schema::ConsistencyAnalysis) -> Vec<Figure> {
    use Better::{Higher, Lower};
    let seconds = f64::from(a.steady_window_s.min(a.samples));
    let cv = (a.steady_iops_mean > 0.0).then(|| a.steady_iops_std_dev / a.steady_iops_mean);
    // The standard error of a mean (sd / sqrt(n)) and of a coefficient of variation (McKay's approximation,
    // cv x sqrt((1 + 2 cv^2) / 2n)), relative to each.
    let mean_spread = cv.filter(|_| seconds >= 2.0).map(|cv| cv / seconds.sqrt());
    let cv_spread = cv
        .filter(|_| seconds >= 2.0)
        .map(|cv| ((1.0 + 2.0 * cv * cv) / (2.0 * seconds)).sqrt());
    let mut figures = vec![
        figure("plateau IOPS", a.plateau_iops, Higher, count),
        figure("steady IOPS", a.steady_iops_mean, Higher, count).with_spread(mean_spread),
    ];
    if let Some(cv) = cv {
        figures.push(figure("steady IOPS variation (CV)", cv, Lower, percent_tenths).with_spread(cv_spread));
    }
    figures
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
    // The sets' names are fixed, so each case's figure has a name that lives as long as the program: the default
    // set's, then the NVMe set's own (SEQ1M Q8T1 and RND4K Q1T1 are in both).
    const NAMES: [(&str, bool, &str); 12] = [
        ("SEQ1M Q8T1", true, "SEQ1M Q8T1 read"),
        ("SEQ1M Q8T1", false, "SEQ1M Q8T1 write"),
        ("SEQ1M Q1T1", true, "SEQ1M Q1T1 read"),
        ("SEQ1M Q1T1", false, "SEQ1M Q1T1 write"),
        ("RND4K Q32T1", true, "RND4K Q32T1 read"),
        ("RND4K Q32T1", false, "RND4K Q32T1 write"),
        ("RND4K Q1T1", true, "RND4K Q1T1 read"),
        ("RND4K Q1T1", false, "RND4K Q1T1 write"),
        ("SEQ128K Q32T1", true, "SEQ128K Q32T1 read"),
        ("SEQ128K Q32T1", false, "SEQ128K Q32T1 write"),
        ("RND4K Q32T16", true, "RND4K Q32T16 read"),
        ("RND4K Q32T16", false, "RND4K Q32T16 write"),
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
        let mut items: Vec<(String, f64, usize, Option<f64>)> = Vec::new();
        let mut shape = None;
        for (i, (r, figs)) in group.iter().zip(&all).enumerate() {
            if let Some(f) = figs.iter().find(|f| f.name == name && f.value.is_finite()) {
                items.push((label(r), f.value, i, f.spread.map(|s| s * f.value.abs())));
                shape = Some((f.better, f.format));
            }
        }
        let Some((better, format)) = shape else {
            continue;
        };
        if items.len() < 2 {
            continue;
        }
        let order = |a: &(String, f64, usize, Option<f64>), b: &(String, f64, usize, Option<f64>)| {
            a.1.total_cmp(&b.1)
        };
        match better {
            Better::Higher => items.sort_by(|a, b| order(b, a)),
            Better::Lower => items.sort_by(order),
        }
        let ranks = rank_labels(&items);
        for (item, rank) in items.iter_mut().zip(ranks) {
            item.0 = format!("{rank}  {}", item.0);
        }
        let title = match better {
            Better::Higher => format!("{name}, ranked (higher is better)"),
            Better::Lower => format!("{name}, ranked (lower is better)"),
        };
        charts.push_str(&bars_with_spread(&title, name, &items, format));
    }
    if charts.is_empty() {
        return String::new();
    }
    format!(
        "<h3>Ranked</h3><p class=\"meta\">A whisker and ± are two standard errors, where the results hold the \
         samples to tell; results within each other's two standard errors share a rank (=2).</p>\
         <div class=\"charts\">{charts}</div>"
    )
}

/// The ranks of `items`, best first: "1", "2", ..., or "=2" for results within each other's spread (two standard
/// errors of their difference, where both have one; equal values otherwise). A run of ties takes the rank of its
/// first.
fn rank_labels(items: &[(String, f64, usize, Option<f64>)]) -> Vec<String> {
    let tied = |a: &(String, f64, usize, Option<f64>), b: &(String, f64, usize, Option<f64>)| match (a.3, b.3)
    {
        (Some(sa), Some(sb)) => (a.1 - b.1).abs() <= 2.0 * sa.hypot(sb),
        _ => a.1 == b.1,
    };
    let mut ranks: Vec<usize> = Vec::with_capacity(items.len());
    for k in 0..items.len() {
        let rank = if k > 0 && tied(&items[k - 1], &items[k]) {
            ranks[k - 1]
        } else {
            k + 1
        };
        ranks.push(rank);
    }
    ranks
        .iter()
        .map(|&r| match ranks.iter().filter(|&&x| x == r).count() {
            1 => r.to_string(),
            _ => format!("={r}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::schema::{ConsistencyAnalysis, SniaSteadyState};

    fn steady(mean: f64, std_dev: f64, seconds: u32) -> ConsistencyAnalysis {
        ConsistencyAnalysis {
            tested_bytes: 1 << 30,
            op_percent: 0,
            plateau_iops: 2.0 * mean,
            cliff: None,
            steady_window_s: seconds,
            steady_iops_mean: mean,
            steady_iops_std_dev: std_dev,
            steady_consistency_ratio: Some(mean / std_dev),
            snia: SniaSteadyState {
                round_s: 60,
                rounds: 0,
                achieved: false,
                first_window_start_round: None,
                window_mean: None,
                range_excursion: None,
                slope_excursion: None,
            },
            random_bytes_written: 0,
            samples: seconds + 60,
        }
    }

    /// The outside review's case: the drive as shipped (4.3K IOPS, sd 900) has the smaller standard deviation
    /// but more than twice the relative spread of the same drive with 25% over-provisioning (9K IOPS, sd 1000);
    /// steadiness is ranked by the coefficient of variation, so the over-provisioned drive comes first.
    #[test]
    fn consistency_ranks_steadiness_by_the_coefficient_of_variation() {
        let cv = |a: &ConsistencyAnalysis| {
            consistency(a)
                .into_iter()
                .find(|f| f.name == "steady IOPS variation (CV)")
                .expect("a CV figure")
        };
        let (shipped, op25) = (cv(&steady(4300.0, 900.0, 600)), cv(&steady(9000.0, 1000.0, 600)));
        assert!(matches!(op25.better, Better::Lower));
        assert!(
            op25.value < shipped.value / 1.8,
            "{} vs {}",
            op25.value,
            shipped.value
        );
        assert!(
            consistency(&steady(0.0, 0.0, 600))
                .iter()
                .all(|f| f.name != "steady IOPS variation (CV)")
        );
    }

    #[test]
    fn results_within_each_others_spread_share_a_rank() {
        let item = |v: f64, se: Option<f64>| (String::new(), v, 0, se);
        // 100 and 97 are within two standard errors (4 each); 80 is not.
        let ranks = rank_labels(&[
            item(100.0, Some(4.0)),
            item(97.0, Some(4.0)),
            item(80.0, Some(4.0)),
        ]);
        assert_eq!(ranks, vec!["=1", "=1", "3"]);
        // Without spreads only equal values tie.
        let ranks = rank_labels(&[item(100.0, None), item(100.0, None), item(99.0, None)]);
        assert_eq!(ranks, vec!["=1", "=1", "3"]);
        let ranks = rank_labels(&[item(100.0, Some(0.1)), item(99.0, Some(0.1))]);
        assert_eq!(ranks, vec!["1", "2"]);
    }

    #[test]
    fn every_case_of_either_quick_set_has_its_figure() {
        use ssdlab_core::schema::quick::{QuickAnalysis, QuickCase};
        let case = |name: &str, read: bool| QuickCase {
            name: name.into(),
            read,
            sequential: name.starts_with("SEQ"),
            block_bytes: 4096,
            queue_depth: 32,
            threads: if name.ends_with("T16") { 16 } else { 1 },
            bytes_per_s: vec![1e6, 1.1e6],
            iops: vec![244.0, 268.0],
            latency_ns_mean: 1e5,
            latency_ns_p99: 200_000,
            latency_ns_mean_by_repeat: Vec::new(),
            latency_ns_p99_by_repeat: Vec::new(),
        };
        for set in [
            ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"],
            ["SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16", "RND4K Q1T1"],
        ] {
            let a = QuickAnalysis {
                span_bytes: 1 << 30,
                repeats: 2,
                runtime_s: 5.0,
                prepared: true,
                cases: set.iter().flat_map(|n| [case(n, true), case(n, false)]).collect(),
            };
            let names: Vec<&str> = quick(&a).iter().map(|f| f.name).collect();
            assert_eq!(names.len(), 8, "{names:?}");
            for n in set {
                assert!(names.contains(&format!("{n} read").as_str()), "{n}: {names:?}");
            }
        }
    }
}
