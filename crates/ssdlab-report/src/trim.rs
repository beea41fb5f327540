//! The TRIM section: sequential write speed clean, dirty and after TRIM, as a table and against the data each
//! pass wrote.

use ssdlab_core::schema::{Analysis, RunResult, TrimAnalysis};

use crate::svg::{Axis, Chart, Mark, Scale, Series};
use crate::{charts, label, mb_s, overlay_prefix, phase, table};

pub(crate) fn trim(group: &[&RunResult]) -> String {
    let mut header = vec!["sequential write".to_string()];
    header.extend(
        [
            "Clean",
            "Dirty",
            "After TRIM",
            "restored",
            "discard",
            "trimmed reads zero",
        ]
        .map(String::from),
    );
    let rows: Vec<Vec<String>> = group
        .iter()
        .map(|r| {
            let Some(a) = analysis(r) else {
                return vec![label(r), "not measured".into()];
            };
            if !a.discard_supported {
                return vec![label(r), "discard not advertised: not measured".into()];
            }
            vec![
                label(r),
                format!("{} MB/s", mb_s(a.clean_bytes_per_s)),
                format!("{} MB/s", mb_s(a.dirty_bytes_per_s)),
                format!("{} MB/s", mb_s(a.after_trim_bytes_per_s)),
                format!("{:.0}%", 100.0 * a.restored_fraction),
                format!(
                    "advertised, up to {} at once",
                    ssdlab_core::units::BinaryBytes(a.discard_max_bytes)
                ),
                match a.trimmed_reads_zero {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "not checked".into(),
                },
            ]
        })
        .collect();
    let mut out = table(&header, &rows);
    let mut series = Vec::new();
    for r in group {
        for (kind, name) in ["clean", "dirty", "after-trim"].into_iter().enumerate() {
            if let Some(p) = phase(r, name) {
                let prefix = overlay_prefix(group, r);
                // Against the data each pass has written (as reviewers draw it), so a long dirty pass does not
                // squeeze the short clean and after-TRIM ones out of sight.
                let mut written_gb = 0.0;
                let points = p
                    .samples
                    .iter()
                    .map(|s| {
                        written_gb += s.bytes as f64 / 1e9;
                        (written_gb, s.bytes_per_s / 1e6)
                    })
                    .collect();
                series.push(Series {
                    name: format!("{prefix}{name}"),
                    points,
                    mark: Mark::LineWithDots,
                    style: crate::result_style(group, r, kind),
                });
            }
        }
    }
    out.push_str(&charts(&[Chart {
        title: "Sequential 128 KiB writes: clean, dirty, after TRIM".into(),
        x: Axis::new("GB written in the pass", Scale::Linear),
        y: Axis::new("MB/s", Scale::Linear),
        series,
    }]));
    out
}

fn analysis(r: &RunResult) -> Option<&TrimAnalysis> {
    match &r.analysis {
        Analysis::Trim(m) => m.measured.as_ref(),
        _ => None,
    }
}

/// How a trim validation result is shown.
pub(crate) struct Trim;

impl crate::views::View for Trim {
    type Analysis = ssdlab_core::schema::TrimAnalysis;
    const HEADING: &'static str = "TRIM validation";
    const STORY: &'static str = "Sequential write speed on a clean drive, after random writes have dirtied it, and after the whole span is TRIMmed, as the 840 EVO reviews validated TRIM. Speed restored after the TRIM means the drive reclaimed the blocks; a drive that reclaims only while idle needs idle time (--idle) before it shows it.";
    const MEASURED_PHASES: &'static [&'static str] = &["clean", "dirty", "after-trim"];

    fn section(group: &[&ssdlab_core::schema::RunResult]) -> String {
        trim(group)
    }

    fn lines(analysis: &Self::Analysis) -> Vec<String> {
        crate::text::methods::trim_lines(analysis)
    }

    fn figures(_: &ssdlab_core::schema::RunResult, analysis: &Self::Analysis) -> Vec<crate::figures::Figure> {
        crate::figures::trim(analysis)
    }

    fn tidy(analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        crate::tidy::trim(analysis)
    }
}
