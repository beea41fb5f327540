//! ssdlab-report: renders results (the `ssdlab/4` schema; `ssdlab/1` to `/3` read through their migration) into one self-contained HTML page with inline SVG
//! charts and inline CSS: no scripts, no external fetches, readable on a laptop screen.
//!
//! It renders only from [`RunResult`] values, so `ssdlab report` can redraw any old result directory, and several
//! results of the same kind are drawn side by side with overlaid series (default vs 25% OP, drive A vs B).
//! It does no I/O: the caller reads result.json and writes the page.
#![forbid(unsafe_code)]

mod baseline;
mod consistency;
mod distribution;
mod erase;
mod fanout;
mod figures;
mod files;
mod header;
pub mod health;
mod labels;
mod latency;
mod op;
mod pts;
mod quick;
mod refresh;
mod region_scan;
mod replay;
mod run;
mod scan;
mod serve;
pub mod svg;
mod sweep;
pub mod text;
pub mod tidy;
mod trim;
mod views;

use std::fmt::Write;

use ssdlab_core::schema::{PhaseResult, RunResult};
use svg::{Chart, Mark, Series};

pub use files::{ChartFile, GENERATOR_META, chart_files_of_page};
pub use labels::label;
pub(crate) use labels::uncached_target;

// Charts are 800 user units wide with 12-unit ticks and scale with their box: two a row in the page's 1132 px drew
// ticks at 9 px, so a chart gets a row of its own, at most 860 px wide (ticks at 10-13 px). The report test's
// layout check measures it in Chromium.
const CSS: &str = r#"td.time{white-space:nowrap}
nav.toc ol{columns:2;margin:0 0 1.5em}nav.toc h2{font-size:1.1em}

body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px; padding: 18px 24px 48px; color: #1d2330; background: #fff; }
h1 { font-size: 24px; margin: 8px 0 4px; } h2 { font-size: 19px; margin: 30px 0 8px; border-bottom: 1px solid #d8dce4; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.meta { color: #4a5263; font-size: 13px; }
.story { max-width: 860px; }
.devices { color: #4a5263; font-size: 13px; } .devices dt { font-weight: 600; } .devices dd { margin: 0 0 4px 16px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d8dce4; padding: 4px 10px; text-align: right; } th:first-child, td:first-child { text-align: left; }
th { background: #f2f4f8; font-weight: 600; }
table.header td, table.header th, table.summary td, table.differs td { text-align: left; }
table.summary th { text-align: left; } table.summary td.verdict { min-width: 240px; } table.summary td:first-child { max-width: 240px; } td { overflow-wrap: break-word; }
.pass { color: #0a7b33; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.warn { color: #8a5a00; font-weight: 600; } .unknown { color: #555; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(760px, 100%), 1fr)); gap: 14px; }
.charts > svg.chart { max-width: 860px; }
svg.chart { width: 100%; height: auto; background: #fbfcfe; border: 1px solid #e3e6ec; border-radius: 4px; }
.better { color: #0a7b33; } .worse { color: #b3261e; }
td.n { white-space: nowrap; }
.wide, .scroll { overflow-x: auto; } .wide th, .wide td { font-size: 13px; padding: 4px 6px; }
/* On paper nothing scrolls: every table takes the page's width, its columns share it and long values break, so
   a printed or PDF page keeps every column. */
@media print {
  body { max-width: none; padding: 0; }
  .wide, .scroll { overflow: visible; }
  .wide table, .scroll table { table-layout: fixed; width: 100%; }
  th, td { padding: 2px 3px; font-size: 10px; overflow-wrap: anywhere; }
  td.n { white-space: normal; }
  table.summary td.device, table.summary td.verdict { min-width: 0; }
  svg.chart { break-inside: avoid; }
}
details { margin: 6px 0; } pre { background: #f6f7f9; padding: 8px; overflow-x: auto; font-size: 12px; }
"#;

/// The charts' own styles: in the page, and inside every standalone chart file, so a chart looks the same in both.
pub(crate) const CHART_CSS: &str = r#"
svg .title { font-size: 16px; font-weight: 600; fill: #1d2330; } svg .tick { font-size: 12.5px; fill: #4a5263; }
svg .label { font-size: 13.5px; fill: #1d2330; } svg .grid { stroke: #e6e9ef; } svg .frame { stroke: #8a93a6; }
svg .legend text { font-size: 13px; fill: #1d2330; }
"#;

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

pub(crate) fn phase<'a>(result: &'a RunResult, name: &str) -> Option<&'a PhaseResult> {
    result.phases.iter().find(|p| p.name == name)
}

pub(crate) fn iops_over_time(phase: &PhaseResult) -> Vec<(f64, f64)> {
    phase.samples.iter().map(|s| (s.t_s, s.iops)).collect()
}

pub(crate) fn mb_s(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}", v / 1e6)
    } else {
        "–".into()
    }
}

/// Renders results into one HTML page.
pub fn render(results: &[RunResult]) -> String {
    render_against(results, None)
}

/// Renders results into one HTML page, each set against `results[baseline]` where it is of the same kind.
pub fn render_against(results: &[RunResult], baseline: Option<usize>) -> String {
    let labelled = labels::distinct_labels(results);
    let results = labelled.as_slice();
    let mut html = String::new();
    let title = match results {
        [one] => format!("ssdlab {} — {}", one.kind(), one.target.target),
        _ => format!("ssdlab — {} results", results.len()),
    };
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{GENERATOR_META}<title>{}</title><style>{CSS}{CHART_CSS}</style></head><body>",
        escape(&title)
    );
    let _ = write!(html, "<h1>{}</h1>", escape(&title));
    html.push_str(&header::page_header(results));
    // Group results of the same kind so they are drawn together, in the order the story is told.
    let mut kinds: Vec<&str> = results.iter().map(|r| r.kind()).collect();
    kinds.sort_unstable_by_key(|kind| story_place(kind));
    kinds.dedup();
    if kinds.len() > 1 {
        html.push_str(&contents(results, &kinds));
    }
    for kind in kinds {
        let group: Vec<&RunResult> = results.iter().filter(|r| r.kind() == kind).collect();
        let _ = write!(
            html,
            "<section class=\"kind-{kind}\" id=\"kind-{kind}\"><h2>{}</h2>",
            escape(views::heading(&group[0].analysis))
        );
        let _ = write!(
            html,
            "<p class=\"story\">{}</p>",
            escape(views::story(&group[0].analysis))
        );
        html.push_str(&header::section_header(&group, results.len()));
        html.push_str(&views::section(&group));
        html.push_str(&figures::ranking(&group));
        if let Some(base) = baseline.map(|i| &results[i]).filter(|b| b.kind() == kind) {
            html.push_str(&baseline::against(&group, base));
        }
        html.push_str(&distribution::distribution(&group));
        html.push_str("</section>");
    }
    html.push_str("<p class=\"meta\">Generated by ssdlab from result.json; redraw with <code>ssdlab report DIR…</code></p></body></html>");
    html
}

/// The order a page tells its sections in: the drive measured plainly first, then as the reviews characterised
/// it (consistency, TRIM, transfer sizes, the PTS), then the field report's story (stale data found, rewritten, the
/// fan-out that waits for it), the trace benches, and the drive's health last; any other kind after them,
/// alphabetically (its name is the tie-break).
const STORY: [&str; 15] = [
    "run",
    "quick",
    "latency",
    "consistency",
    "trim",
    "sweep",
    "pts",
    "scan",
    "region-scan",
    "refresh",
    "fanout",
    "replay",
    "health",
    "op",
    "erase",
];

pub(crate) fn story_place(kind: &str) -> (usize, &str) {
    (STORY.iter().position(|k| *k == kind).unwrap_or(STORY.len()), kind)
}

/// The page's table of contents: each section's heading, with how many results it draws.
fn contents(results: &[RunResult], kinds: &[&str]) -> String {
    let mut s = String::from("<nav class=\"toc\"><h2>Contents</h2><ol>");
    for kind in kinds {
        let group: Vec<&RunResult> = results.iter().filter(|r| r.kind() == *kind).collect();
        let count = match group.len() {
            1 => String::new(),
            n => format!(" ({n} results)"),
        };
        let _ = write!(
            s,
            "<li><a href=\"#kind-{kind}\">{}</a>{count}</li>",
            escape(views::heading(&group[0].analysis))
        );
    }
    s.push_str("</ol></nav>");
    s
}

/// The style of a result's `kind`-th series (a phase, a fitted line) when several results share a chart: the
/// result's colour (its place in the group, as in the ranked bars) and a dash per kind, so a drive reads as one
/// colour and its phases as solid, dashed and dotted. None for a lone result, whose series take a colour each.
pub(crate) fn result_style(group: &[&RunResult], r: &RunResult, kind: usize) -> Option<(usize, usize)> {
    // Past the palette, colours repeat: positions (colour, then dash) keep every series apart instead.
    if group.len() < 2 || group.len() > svg::COLOUR_COUNT {
        return None;
    }
    group.iter().position(|g| std::ptr::eq(*g, r)).map(|i| (i, kind))
}

/// A series-name prefix naming the result when several are overlaid (nothing for a lone result).
pub(crate) fn overlay_prefix(group: &[&RunResult], r: &RunResult) -> String {
    if group.len() > 1 {
        format!("{} ", label(r))
    } else {
        String::new()
    }
}

pub(crate) fn charts(charts: &[Chart]) -> String {
    let mut s = String::from("<div class=\"charts\">");
    for chart in charts {
        s.push_str(&chart_svg(chart));
    }
    s.push_str("</div>");
    s
}

/// One chart's SVG element, with an id unique within the page.
pub(crate) fn chart_svg(chart: &Chart) -> String {
    // Ids only need to differ between the charts of one page; the title and series make a stable one.
    let id = chart
        .title
        .bytes()
        .chain(chart.series.iter().flat_map(|x| x.name.bytes()))
        .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    svg::render(chart, id)
}

/// A table with a header row, in a box that scrolls sideways when the table is wider than the page (a wide table
/// never spills over the page's edge).
pub(crate) fn table(header: &[String], rows: &[Vec<String>]) -> String {
    styled_table("scroll", "", header, rows)
}

/// Whether a cell is one figure with its unit ("772 µs", "65.1 ms", "4.06%"), which must not break between the
/// two: a column of them reads down only when each stays on one line.
fn is_figure(cell: &str) -> bool {
    let mut parts = cell.split(' ');
    let (Some(number), unit, None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let numeric = number.trim_end_matches('%');
    !numeric.is_empty()
        && numeric.parse::<f64>().is_ok()
        && unit
            .is_none_or(|u| !u.is_empty() && u.chars().count() <= 5 && !u.chars().any(|c| c.is_ascii_digit()))
}

/// [`table`] with a CSS class: `header` for a field/value list (left-aligned), `wide` for a long row of numbers
/// (smaller headings).
pub(crate) fn table_with_class(class: &str, header: &[String], rows: &[Vec<String>]) -> String {
    match class {
        "wide" => styled_table("scroll wide", "", header, rows),
        _ => styled_table("scroll", class, header, rows),
    }
}

fn styled_table(wrapper: &str, class: &str, header: &[String], rows: &[Vec<String>]) -> String {
    let class = if class.is_empty() {
        String::new()
    } else {
        format!(" class=\"{class}\"")
    };
    let mut t = format!("<div class=\"{wrapper}\"><table{class}><tr>");
    for h in header {
        let _ = write!(t, "<th>{}</th>", escape(h));
    }
    t.push_str("</tr>");
    for row in rows {
        t.push_str("<tr>");
        for cell in row {
            if is_figure(cell) {
                let _ = write!(t, "<td class=\"n\">{}</td>", escape(cell));
            } else {
                let _ = write!(t, "<td>{}</td>", escape(cell));
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    t
}

pub(crate) fn series_of(
    group: &[&RunResult],
    phase_name: &str,
    points: impl Fn(&PhaseResult) -> Vec<(f64, f64)>,
    mark: Mark,
) -> Vec<Series> {
    series_of_phase(group, |r| phase(r, phase_name), points, mark)
}

/// [`series_of`] for the phase `pick` chooses in each result.
pub(crate) fn series_of_phase<'a>(
    group: &[&'a RunResult],
    pick: impl Fn(&'a RunResult) -> Option<&'a PhaseResult>,
    points: impl Fn(&PhaseResult) -> Vec<(f64, f64)>,
    mark: Mark,
) -> Vec<Series> {
    group
        .iter()
        .filter_map(|r| {
            // The result's own colour, even when a result before it lacks the phase.
            pick(r).map(|p| Series {
                name: label(r),
                points: points(p),
                mark,
                style: result_style(group, r, 0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::is_figure;

    #[test]
    fn a_figure_with_its_unit_is_kept_on_one_line_and_words_are_not() {
        for figure in ["772 µs", "65.1 ms", "4.06%", "31774", "319.9", "0.00%"] {
            assert!(is_figure(figure), "{figure}");
        }
        for words in [
            "heavy.iolog (fio-iolog)",
            "as fast as possible",
            "passed",
            "",
            "1 2 3",
            "5 drives each",
        ] {
            assert!(!is_figure(words), "{words}");
        }
    }
}
