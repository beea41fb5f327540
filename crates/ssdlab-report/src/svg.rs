//! Inline SVG charts: scatter and line series on linear or logarithmic axes, with ticks, grid, labels and a
//! legend. Pure string building; every chart is self-contained markup.

use std::fmt::Write;

/// Series colours (the Okabe-Ito colour-blind-safe palette, yellow left out for contrast on white); series past
/// the palette repeat a colour with a dashed line, so no two series look the same.
const COLOURS: [&str; 7] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000",
];

/// How many results can each have a colour of their own.
pub(crate) const COLOUR_COUNT: usize = COLOURS.len();

/// Dash patterns: solid, dashed, dotted.
const DASHES: [&str; 3] = ["", "6 3", "2 3"];

/// The colour and dash pattern of series `i`.
fn style(i: usize) -> (&'static str, &'static str) {
    (COLOURS[i % COLOURS.len()], DASHES[(i / COLOURS.len()) % 3])
}

/// The colour and dash of each series: its own [`Series::style`], or by its position.
fn styles(series: &[Series]) -> Vec<(&'static str, &'static str)> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| match s.style {
            Some((colour, dash)) => (COLOURS[colour % COLOURS.len()], DASHES[dash % DASHES.len()]),
            None => style(i),
        })
        .collect()
}

/// Height of one legend row below the plot.
const LEGEND_ROW: f64 = 20.0;

/// The width of one character of a tick label (12.5 px, the page's CSS), in user units, on average: enough to
/// know where labels would collide.
const TICK_CHAR: f64 = 7.5;

/// The same for a legend entry (13 px): DejaVu Sans, the usual Linux fallback, is about 0.6 em a character.
const LEGEND_CHAR: f64 = 8.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log10,
    Log2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Dots,
    Line,
    LineWithDots,
    /// A shaded band: two points, (x from, y low) and (x to, y high), drawn under the data (e.g. the SNIA
    /// steady-state window's +-10% of its mean).
    Band,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    /// (colour, dash) indices when the series belongs to a result drawn with several series (its phases, its
    /// window and fit): the result's colour, a dash per kind of series. None: by position.
    pub style: Option<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Formats tick values; defaults to a compact number.
    pub format: fn(f64) -> String,
}

impl Axis {
    pub fn new(label: &str, scale: Scale) -> Self {
        Axis {
            label: label.to_string(),
            scale,
            min: None,
            max: None,
            format: compact,
        }
    }

    pub fn range(mut self, min: Option<f64>, max: Option<f64>) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    pub fn format(mut self, format: fn(f64) -> String) -> Self {
        self.format = format;
        self
    }
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// 12,345 -> "12.3K"; 0.5 -> "0.5".
/// A tick on a time axis whose values are microseconds, in the unit a reader expects at that size: `500 µs`,
/// `1 ms`, `10 ms`, `2 s` (never "1K" or "10M" microseconds).
pub fn micros(v: f64) -> String {
    let (value, unit) = if v.abs() >= 1e6 {
        (v / 1e6, "s")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "ms")
    } else if v.abs() >= 1.0 || v == 0.0 {
        (v, "µs")
    } else {
        (v * 1e3, "ns")
    };
    format!("{} {unit}", compact(value))
}

/// A tick on a time axis whose values are milliseconds: `500 µs`, `1 ms`, `2 s`.
pub fn millis(v: f64) -> String {
    micros(v * 1e3)
}

pub fn compact(v: f64) -> String {
    let a = v.abs();
    let (value, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let text = if value.fract() == 0.0 || value.abs() >= 10.0 {
        format!("{value:.0}")
    } else if value.abs() >= 0.1 || value == 0.0 {
        format!("{value:.1}")
    } else {
        // Below 0.1 (a log axis of shares: 0.01, 0.002): enough decimals for the first significant digit.
        let decimals = (-value.abs().log10()).ceil() as usize;
        format!("{value:.decimals$}")
    };
    format!("{text}{suffix}")
}

/// Bytes as binary units: 512 -> "512", 4096 -> "4K", 1 MiB -> "1M".
pub fn binary_size(v: f64) -> String {
    let v = v as u64;
    if v >= 1 << 30 && v.is_multiple_of(1 << 30) {
        format!("{}G", v >> 30)
    } else if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        format!("{}M", v >> 20)
    } else if v >= 1 << 10 && v.is_multiple_of(1 << 10) {
        format!("{}K", v >> 10)
    } else {
        v.to_string()
    }
}

/// Text for SVG markup: the XML specials escaped, and the control characters XML 1.0 forbids (a file name may
/// hold them) replaced, so a chart is also a well-formed standalone file.
fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if c < ' ' || c == '\u{fffe}' || c == '\u{ffff}' => '\u{fffd}',
            c => c,
        })
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Mapping {
    fn transform(scale: Scale, v: f64) -> f64 {
        match scale {
            Scale::Linear => v,
            Scale::Log10 => v.log10(),
            Scale::Log2 => v.log2(),
        }
    }

    fn map(&self, v: f64) -> f64 {
        let t = Self::transform(self.scale, v);
        let (lo, hi) = (
            Self::transform(self.scale, self.lo),
            Self::transform(self.scale, self.hi),
        );
        let f = if hi > lo { (t - lo) / (hi - lo) } else { 0.5 };
        self.from + f * (self.to - self.from)
    }
}

/// Data bounds of an axis: explicit limits win; log axes drop non-positive values.
fn bounds(axis: &Axis, values: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values.filter(|v| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        (lo, hi) = (1.0, 10.0);
    }
    match axis.scale {
        Scale::Linear => {
            let lo = axis.min.unwrap_or(lo.min(0.0));
            // A flat series still gets a span its magnitude can resolve (at 1e20, adding 1 changes nothing).
            let hi = axis.max.unwrap_or(if hi > lo {
                hi + 0.05 * (hi - lo)
            } else {
                lo + lo.abs().max(1.0)
            });
            (lo, hi)
        }
        Scale::Log10 => {
            let lo = axis.min.unwrap_or(10f64.powf(lo.log10().floor()));
            let hi = axis
                .max
                .unwrap_or(10f64.powf(hi.log10().ceil().max(lo.log10() + 1.0)));
            (lo, hi)
        }
        Scale::Log2 => {
            let lo = axis.min.unwrap_or(2f64.powf(lo.log2().floor()));
            let hi = axis
                .max
                .unwrap_or(2f64.powf(hi.log2().ceil().max(lo.log2() + 1.0)));
            (lo, hi)
        }
    }
}

/// Tick positions: 1-2-5 steps on linear axes, powers of ten (or two) on log axes, with 2 and 5 between the
/// powers of ten when the axis spans two decades or less (so it never shows only one or two labels).
fn ticks(scale: Scale, lo: f64, hi: f64) -> Vec<f64> {
    match scale {
        Scale::Linear => {
            let span = (hi - lo).max(1e-12);
            let raw = span / 6.0;
            let magnitude = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * magnitude)
                .find(|s| span / s <= 7.0)
                .unwrap_or(magnitude * 10.0);
            // Ticks by index, never by accumulation: at extreme magnitudes `t + step` may equal `t`.
            let first = (lo / step).ceil() * step;
            let count = ((hi + step * 1e-9 - first) / step).floor();
            if !(count.is_finite() && count >= 0.0) {
                return vec![lo, hi];
            }
            (0..=(count as usize).min(20))
                .map(|i| first + i as f64 * step)
                .map(|t| if t.abs() < step * 1e-9 { 0.0 } else { t })
                .collect()
        }
        Scale::Log10 | Scale::Log2 => {
            if !(lo > 0.0 && hi.is_finite() && hi >= lo) {
                return vec![lo, hi];
            }
            let base: f64 = if scale == Scale::Log10 { 10.0 } else { 2.0 };
            // A hair of tolerance: log10(1000) is 2.9999999999999996 in floating point.
            let (a, b) = (
                (lo.log(base) - 1e-9).ceil() as i32,
                (hi.log(base) + 1e-9).floor() as i32,
            );
            if scale == Scale::Log10 && b - a <= 2 {
                let within = |t: &f64| *t >= lo * (1.0 - 1e-9) && *t <= hi * (1.0 + 1e-9);
                return (a - 1..=b)
                    .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
                    .filter(within)
                    .collect();
            }
            let every = ((b - a) / 10 + 1).max(1);
            let decades: Vec<f64> = (a..=b)
                .filter(|e| (e - a) % every == 0)
                .map(|e| base.powi(e))
                .collect();
            // A range inside one decade (explicit limits) still gets its ends.
            if decades.is_empty() { vec![lo, hi] } else { decades }
        }
    }
}

/// A dot's radius and opacity: large and solid for a few points, smaller and see-through for thousands, so a
/// sparse series stays visible and a dense one shows its density.
fn dot_style(mark: Mark, points: usize) -> (f64, f64) {
    let density = (200.0 / points.max(1) as f64).powf(0.25);
    match mark {
        Mark::Dots => (
            (3.2 * density).clamp(1.8, 3.6),
            if points > 500 { 0.55 } else { 0.85 },
        ),
        _ => (3.0, 1.0),
    }
}

/// How a legend entry shows its series: a line (dashed as the series is), a light shade (a band), or a solid
/// block (a column).
#[derive(Clone, Copy)]
enum Swatch {
    Line,
    Shade,
    /// A filled block at this opacity (a column; lighter for a result's second and third kind of series).
    Solid(f64),
}

/// `name` cut in the middle to at most `max` characters, which keeps both a target's start and the end that tells
/// it from another.
fn cut_middle(name: &str, max: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max {
        return name.to_string();
    }
    let half = (max - 1) / 2;
    let head: String = chars[..half].iter().collect();
    let tail: String = chars[chars.len() - half..].iter().collect();
    format!("{head}…{tail}")
}

/// The longest legend entry, in characters: one row of an 800-unit chart at LEGEND_CHAR.
const MAX_LEGEND_NAME: usize = 90;

/// Where each series' legend entry goes: its x and its row, wrapping at the chart's width. Empty when there is a
/// single unnamed series.
fn legend_layout(names: &[&str], width: f64) -> Vec<(f64, usize)> {
    if names.len() <= 1 && names.first().is_none_or(|n| n.is_empty()) {
        return Vec::new();
    }
    let (start, end) = (24.0, width - 12.0);
    let (mut x, mut row) = (start, 0);
    names
        .iter()
        .map(|name| {
            let entry = 34.0 + LEGEND_CHAR * cut_middle(name, MAX_LEGEND_NAME).chars().count() as f64;
            if x > start && x + entry > end {
                x = start;
                row += 1;
            }
            let at = (x, row);
            x += entry;
            at
        })
        .collect()
}

/// An axis's ticks with their labels. Labels that would read the same (0.005 and 0.01 both as "0.01" on a
/// linear axis from 0 to 0.035) are written instead with the decimals the tick step needs.
fn tick_labels(axis: &Axis, lo: f64, hi: f64) -> Vec<(f64, String)> {
    let values = ticks(axis.scale, lo, hi);
    let labels: Vec<String> = values.iter().map(|&t| (axis.format)(t)).collect();
    let collide = labels.windows(2).any(|w| w[0] == w[1]);
    if !collide || axis.scale != Scale::Linear || values.len() < 2 {
        return values.into_iter().zip(labels).collect();
    }
    let step = values
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    values
        .into_iter()
        .map(|t| (t, format!("{t:.decimals$}")))
        .collect()
}

/// The height of a chart whose plot is `height` tall, with room below it for the legend `legend` laid out.
fn with_legend_height(height: f64, legend: &[(f64, usize)]) -> f64 {
    let legend_rows = legend.iter().map(|&(_, row)| row + 1).max().unwrap_or(0);
    height + legend_rows as f64 * LEGEND_ROW + if legend_rows > 0 { 6.0 } else { 0.0 }
}

/// A line chart's frame: its size, its margins, and where data values land on it.
struct Plot {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    /// Data x to user units; its `lo` and `hi` are the x axis's bounds.
    x: Mapping,
    /// Data y to user units; its `lo` and `hi` are the y axis's bounds.
    y: Mapping,
}

impl Plot {
    /// The frame of `chart`'s plot, `width` by `height`, with its axes bounded by the data and the axes' limits.
    fn of(chart: &Chart, width: f64, height: f64) -> Self {
        let (left, right, top, bottom) = (72.0, 20.0, 34.0, 52.0);
        let all = || chart.series.iter().flat_map(|s| s.points.iter());
        let (x_lo, x_hi) = bounds(&chart.x, all().map(|p| p.0));
        let (y_lo, y_hi) = bounds(&chart.y, all().map(|p| p.1));
        Plot {
            width,
            height,
            left,
            right,
            top,
            bottom,
            x: Mapping {
                scale: chart.x.scale,
                lo: x_lo,
                hi: x_hi,
                from: left,
                to: width - right,
            },
            y: Mapping {
                scale: chart.y.scale,
                lo: y_lo,
                hi: y_hi,
                from: height - bottom,
                to: top,
            },
        }
    }

    /// Whether a point can be placed on the axes' scales (a log axis has no place for zero or less).
    fn on_scale(&self, (px, py): (f64, f64)) -> bool {
        (self.x.scale == Scale::Linear || px > 0.0) && (self.y.scale == Scale::Linear || py > 0.0)
    }
}

/// Renders a chart as an SVG element (800 user units wide, 360 tall plus a row per line of legend, scaled by
/// CSS). `id` makes the element ids unique within a page.
pub fn render(chart: &Chart, id: usize) -> String {
    // The legend goes below the plot, never over the data: lay it out first to know how tall the chart is.
    let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
    let plot = Plot::of(chart, 800.0, 360.0);
    let (width, height, left, top) = (plot.width, plot.height, plot.left, plot.top);
    let legend = legend_layout(&names, width);
    let total_height = with_legend_height(height, &legend);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {width} {total_height}" role="img" aria-label="{title}" xmlns="http://www.w3.org/2000/svg">"#,
        title = escape(&chart.title)
    );
    let _ = write!(
        svg,
        r#"<text class="title" x="{left}" y="20">{}</text>"#,
        escape(&chart.title)
    );
    draw_x_axis(&mut svg, &chart.x, &plot);
    draw_y_axis(
        &mut svg,
        &chart.y,
        (plot.y.lo, plot.y.hi),
        &plot.y,
        (left, width - plot.right),
    );
    // Data, clipped to the plot area.
    let _ = write!(
        svg,
        r#"<clipPath id="clip{id}"><rect x="{left}" y="{top}" width="{w}" height="{h}"/></clipPath><g clip-path="url(#clip{id})">"#,
        w = width - left - plot.right,
        h = height - top - plot.bottom
    );
    let series_styles = styles(&chart.series);
    // Bands first, under every series.
    draw_bands(&mut svg, &chart.series, &series_styles, &plot);
    let mut clipped: Vec<(f64, f64, &str)> = Vec::new();
    for (i, series) in chart.series.iter().enumerate() {
        if series.mark != Mark::Band {
            clipped.extend(draw_series(&mut svg, series, series_styles[i], &plot));
        }
    }
    svg.push_str("</g>");
    draw_clipped_markers(&mut svg, &clipped, &plot.y);
    let swatches: Vec<Swatch> = chart
        .series
        .iter()
        .map(|s| {
            if s.mark == Mark::Band {
                Swatch::Shade
            } else {
                Swatch::Line
            }
        })
        .collect();
    draw_legend(&mut svg, &names, &swatches, &series_styles, &legend, height);
    svg.push_str("</svg>");
    svg
}

/// The x axis of a line chart: a grid line and a label per tick, the frame along the bottom and the axis label.
fn draw_x_axis(svg: &mut String, axis: &Axis, plot: &Plot) {
    let (width, height, left, right, top, bottom) = (
        plot.width,
        plot.height,
        plot.left,
        plot.right,
        plot.top,
        plot.bottom,
    );
    let _ = write!(svg, r#"<g class="axis x-axis">"#);
    for (t, label) in tick_labels(axis, plot.x.lo, plot.x.hi) {
        let px = plot.x.map(t);
        // A label centred on a tick near the right edge would run past it ("100 ms" at the last tick): it ends
        // at the tick instead.
        let half = label.chars().count() as f64 * TICK_CHAR / 2.0;
        let anchor = if px + half > width - 2.0 { "end" } else { "middle" };
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{yb:.1}"/><text class="tick" x="{px:.1}" y="{ty:.1}" text-anchor="{anchor}">{label}</text>"#,
            yb = height - bottom,
            ty = height - bottom + 16.0,
            label = escape(&label)
        );
    }
    let _ = write!(
        svg,
        r#"<line class="frame" x1="{left}" y1="{yb}" x2="{xr}" y2="{yb}"/><text class="label" x="{cx:.1}" y="{ly:.1}" text-anchor="middle">{}</text></g>"#,
        escape(&axis.label),
        yb = height - bottom,
        xr = width - right,
        cx = (left + width - right) / 2.0,
        ly = height - 10.0
    );
}

/// The band series (two points each: a shaded rectangle between them), drawn before the other series so they
/// lie under the data.
fn draw_bands(svg: &mut String, series: &[Series], styles: &[(&str, &str)], plot: &Plot) {
    let (x, y) = (&plot.x, &plot.y);
    for (i, series) in series.iter().enumerate() {
        if let (Mark::Band, [(x0, y0), (x1, y1)]) = (series.mark, series.points.as_slice()) {
            let (colour, _) = styles[i];
            let (ax, bx) = (x.map(x0.min(*x1)), x.map(x0.max(*x1)));
            let (ay, by) = (y.map(y1.max(*y0)), y.map(y0.min(*y1)));
            if [ax, bx, ay, by].iter().all(|v| v.is_finite()) {
                let _ = write!(
                    svg,
                    r#"<rect class="band" data-name="{}" x="{ax:.1}" y="{ay:.1}" width="{w:.1}" height="{h:.1}" fill="{colour}" fill-opacity="0.16"/>"#,
                    escape(&series.name),
                    w = (bx - ax).max(0.0),
                    h = (by - ay).max(0.0)
                );
            }
        }
    }
}

/// A series' measured points in runs: a point that was not measured (NaN) breaks the line, so the two sides are
/// never joined across it. Points a log axis cannot place are left out; empty runs are dropped.
fn measured_runs(series: &Series, plot: &Plot) -> Vec<Vec<(f64, f64)>> {
    series
        .points
        .split(|(px, py)| !(px.is_finite() && py.is_finite()))
        .map(|run| {
            run.iter()
                .copied()
                .filter(|&p| plot.on_scale(p))
                .collect::<Vec<_>>()
        })
        .filter(|run| !run.is_empty())
        .collect()
}

/// One series (not a band) as a group of polylines and dots in `colour` and `dash`. Returns the markers, in
/// user units, of its points beyond a fixed y range, which are drawn on the plot's edge instead of dropped.
fn draw_series(
    svg: &mut String,
    series: &Series,
    (colour, dash): (&'static str, &'static str),
    plot: &Plot,
) -> Vec<(f64, f64, &'static str)> {
    let (x, y) = (&plot.x, &plot.y);
    let runs = measured_runs(series, plot);
    let drawable: Vec<(f64, f64)> = runs.iter().flatten().copied().collect();
    // A point beyond a fixed y range is drawn as a marker on the plot's edge, not silently dropped.
    let mut clipped = Vec::new();
    for &(px, py) in &drawable {
        if px >= x.lo && px <= x.hi && (py > y.hi || py < y.lo) {
            let edge = if py > y.hi { y.hi } else { y.lo };
            clipped.push((x.map(px), y.map(edge), colour));
        }
    }
    let visible: Vec<(f64, f64)> = drawable.iter().map(|&(px, py)| (x.map(px), y.map(py))).collect();
    let _ = write!(
        svg,
        r#"<g class="series" data-name="{}" data-points="{}">"#,
        escape(&series.name),
        visible.len()
    );
    if matches!(series.mark, Mark::Line | Mark::LineWithDots) {
        draw_lines(svg, &runs, (colour, dash), plot);
    }
    // A line's lone measured point between gaps has no segment: it is drawn as a dot so it is not lost.
    if series.mark == Mark::Line {
        for run in runs.iter().filter(|run| run.len() == 1) {
            let (a, b) = (x.map(run[0].0), y.map(run[0].1));
            let _ = write!(
                svg,
                r#"<circle class="point" cx="{a:.1}" cy="{b:.1}" r="2.5" fill="{colour}"/>"#
            );
        }
    }
    if matches!(series.mark, Mark::Dots | Mark::LineWithDots) {
        let (r, opacity) = dot_style(series.mark, visible.len());
        for (a, b) in &visible {
            let _ = write!(
                svg,
                r#"<circle class="point" cx="{a:.1}" cy="{b:.1}" r="{r:.1}" fill="{colour}" fill-opacity="{opacity:.2}"/>"#
            );
        }
    }
    svg.push_str("</g>");
    clipped
}

/// A polyline through each run of two or more points, in `colour` and `dash`.
fn draw_lines(svg: &mut String, runs: &[Vec<(f64, f64)>], (colour, dash): (&str, &str), plot: &Plot) {
    for run in runs.iter().filter(|run| run.len() > 1) {
        let path: Vec<String> = run
            .iter()
            .map(|&(px, py)| format!("{:.1},{:.1}", plot.x.map(px), plot.y.map(py)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.8" stroke-dasharray="{dash}" points="{}"/>"#,
            path.join(" ")
        );
    }
}

/// A small triangle pointing off the plot for each point beyond the fixed y range, at its place on the edge
/// (`y` places the range's top).
fn draw_clipped_markers(svg: &mut String, clipped: &[(f64, f64, &str)], y: &Mapping) {
    for (cx, cy, colour) in clipped {
        let up = *cy <= y.map(y.hi) + 0.5;
        let (tip, base) = if up {
            (cy - 1.0, cy + 7.0)
        } else {
            (cy + 1.0, cy - 7.0)
        };
        let _ = write!(
            svg,
            r#"<path class="clipped" d="M{cx:.1},{tip:.1} L{l:.1},{base:.1} L{r:.1},{base:.1} Z" fill="{colour}"/>"#,
            l = cx - 4.0,
            r = cx + 4.0
        );
    }
}

/// The y axis: a grid line and a label per tick across the plot (`x_span`: its left and right edges), the frame
/// on the left and the axis label turned upright beside it. `map` places values between the plot's bottom and top.
fn draw_y_axis(
    svg: &mut String,
    axis: &Axis,
    (lo, hi): (f64, f64),
    map: &Mapping,
    (left, right): (f64, f64),
) {
    let (bottom, top) = (map.from, map.to);
    let _ = write!(svg, r#"<g class="axis y-axis">"#);
    for (t, label) in tick_labels(axis, lo, hi) {
        let py = map.map(t);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{left}" y1="{py:.1}" x2="{right}" y2="{py:.1}"/><text class="tick" x="{tx:.1}" y="{ty:.1}" text-anchor="end">{label}</text>"#,
            tx = left - 6.0,
            ty = py + 4.0,
            label = escape(&label)
        );
    }
    let _ = write!(
        svg,
        r#"<line class="frame" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/><text class="label" transform="translate(16 {cy:.1}) rotate(-90)" text-anchor="middle">{}</text></g>"#,
        escape(&axis.label),
        cy = (top + bottom) / 2.0
    );
}

/// The legend entries, from the top `from` (below the axis label) down, as `legend_layout` placed them.
fn draw_legend(
    svg: &mut String,
    names: &[&str],
    swatches: &[Swatch],
    styles: &[(&str, &str)],
    layout: &[(f64, usize)],
    from: f64,
) {
    for (i, &(lx, row)) in layout.iter().enumerate() {
        let (colour, dash) = styles[i];
        let ly = from + row as f64 * LEGEND_ROW;
        let swatch = match swatches[i] {
            Swatch::Shade | Swatch::Solid(_) => format!(
                r#"<rect x="{lx:.1}" y="{y:.1}" width="18" height="10" fill="{colour}" fill-opacity="{o}"/>"#,
                y = ly - 4.0,
                o = match swatches[i] {
                    Swatch::Solid(opacity) => opacity,
                    _ => 0.3,
                }
            ),
            Swatch::Line => format!(
                r#"<line x1="{lx:.1}" y1="{y:.1}" x2="{x2:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="4" stroke-dasharray="{dash}"/>"#,
                y = ly + 1.0,
                x2 = lx + 18.0
            ),
        };
        let _ = write!(
            svg,
            r#"<g class="legend">{swatch}<text x="{tx:.1}" y="{ty:.1}">{}</text></g>"#,
            escape(&cut_middle(names[i], MAX_LEGEND_NAME)),
            tx = lx + 24.0,
            ty = ly + 5.0
        );
    }
}

/// Column fill opacities in place of dashes: solid, then lighter.
const SHADES: [f64; 3] = [1.0, 0.6, 0.35];

/// One series of a column chart: its name, one value per category, and its style as [`Series::style`] (a
/// result's colour; its kind of series drawn lighter instead of dashed).
pub type Columns = (String, Vec<f64>, Option<(usize, usize)>);

/// A column chart's frame: its size, its margins, a slot per category, and where values land on its y axis.
struct ColumnPlot {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    bottom: f64,
    /// The width each category's group of columns has.
    slot: f64,
    /// Whether the category names are slanted, as they would run into each other level.
    slanted: bool,
    /// Values to user units on the linear y axis; its `lo` and `hi` are the axis's bounds.
    map: Mapping,
}

impl ColumnPlot {
    /// The frame for `categories` and `series` on the y axis `y`, with room under the axis for the names.
    fn of(y: &Axis, categories: &[String], series: &[Columns]) -> Self {
        let width = 800.0;
        let (left, right, top) = (72.0, 20.0, 34.0);
        let plot_w = width - left - right;
        let slot = plot_w / categories.len().max(1) as f64;
        let longest = categories.iter().map(|c| c.chars().count()).max().unwrap_or(0);
        // Names that would run into each other are slanted, which needs more room under the axis.
        let slanted = longest as f64 * TICK_CHAR > slot - 4.0;
        let bottom = if slanted {
            52.0 + longest as f64 * 0.65 * TICK_CHAR
        } else {
            52.0
        };
        let height = 308.0 + bottom;
        let (lo, hi) = bounds(y, series.iter().flat_map(|(_, v, _)| v.iter().copied()));
        ColumnPlot {
            width,
            height,
            left,
            right,
            bottom,
            slot,
            slanted,
            map: Mapping {
                scale: Scale::Linear,
                lo,
                hi,
                from: height - bottom,
                to: top,
            },
        }
    }
}

/// A column chart over named categories (fio's latency buckets): for each category a group of columns, one per
/// series in its colour, on a linear y axis from zero with ticks and grid, category names under the axis
/// (slanted when they would touch), the legend below. Each series has one value per category; a value that is
/// not finite is left out.
pub fn columns(title: &str, x_label: &str, y: &Axis, categories: &[String], series: &[Columns]) -> String {
    let plot = ColumnPlot::of(y, categories, series);
    let (width, left) = (plot.width, plot.left);
    let names: Vec<&str> = series.iter().map(|(n, _, _)| n.as_str()).collect();
    let legend = legend_layout(&names, width);
    let total_height = with_legend_height(plot.height, &legend);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart columns" viewBox="0 0 {width} {total_height:.1}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text class="title" x="{left}" y="20">{t}</text>"#,
        t = escape(title)
    );
    draw_y_axis(
        &mut svg,
        y,
        (plot.map.lo, plot.map.hi),
        &plot.map,
        (left, width - plot.right),
    );
    draw_category_axis(&mut svg, x_label, categories, &plot);
    let fills = column_fills(series);
    draw_columns(&mut svg, series, &fills, categories.len(), &plot);
    let swatches: Vec<Swatch> = fills.iter().map(|&(_, opacity)| Swatch::Solid(opacity)).collect();
    let legend_styles: Vec<(&str, &str)> = fills.iter().map(|&(colour, _)| (colour, "")).collect();
    draw_legend(&mut svg, &names, &swatches, &legend_styles, &legend, plot.height);
    svg.push_str("</svg>");
    svg
}

/// The x axis of a column chart: each category's name under its slot (slanted when the plot says so), the frame
/// along the bottom and the axis label `x_label`.
fn draw_category_axis(svg: &mut String, x_label: &str, categories: &[String], plot: &ColumnPlot) {
    let (width, height, left, right) = (plot.width, plot.height, plot.left, plot.right);
    let base = height - plot.bottom;
    let _ = write!(svg, r#"<g class="axis x-axis">"#);
    for (c, name) in categories.iter().enumerate() {
        let cx = left + plot.slot * (c as f64 + 0.5);
        let ty = base + 16.0;
        let placed = if plot.slanted {
            format!(r#"x="{cx:.1}" y="{ty:.1}" text-anchor="end" transform="rotate(-40 {cx:.1} {ty:.1})""#)
        } else {
            format!(r#"x="{cx:.1}" y="{ty:.1}" text-anchor="middle""#)
        };
        let _ = write!(svg, r#"<text class="tick" {placed}>{}</text>"#, escape(name));
    }
    let _ = write!(
        svg,
        r#"<line class="frame" x1="{left}" y1="{base:.1}" x2="{xr}" y2="{base:.1}"/><text class="label" x="{cx:.1}" y="{ly:.1}" text-anchor="middle">{}</text></g>"#,
        escape(x_label),
        xr = width - right,
        cx = (left + width - right) / 2.0,
        ly = height - 10.0
    );
}

/// The (colour, opacity) of each column series: its own style, or by position (colours, then lighter shades past
/// the palette).
fn column_fills(series: &[Columns]) -> Vec<(&'static str, f64)> {
    series
        .iter()
        .enumerate()
        .map(|(i, (_, _, style))| match style {
            Some((colour, kind)) => (COLOURS[colour % COLOURS.len()], SHADES[kind % SHADES.len()]),
            None => (
                COLOURS[i % COLOURS.len()],
                SHADES[(i / COLOURS.len()) % SHADES.len()],
            ),
        })
        .collect()
}

/// Each series' columns, side by side within every category's slot, in its fill (`fills`, one per series); the
/// values past the first `category_count` and those that are not finite are left out.
fn draw_columns(
    svg: &mut String,
    series: &[Columns],
    fills: &[(&str, f64)],
    category_count: usize,
    plot: &ColumnPlot,
) {
    let (left, slot, map) = (plot.left, plot.slot, &plot.map);
    let (lo, hi) = (map.lo, map.hi);
    let base = plot.height - plot.bottom;
    let group_w = slot * 0.8;
    let column_w = group_w / series.len().max(1) as f64;
    for (i, (name, values, _)) in series.iter().enumerate() {
        let (colour, opacity) = fills[i];
        let _ = write!(svg, r#"<g class="series" data-name="{}">"#, escape(name));
        for (c, &v) in values.iter().enumerate().take(category_count) {
            if !v.is_finite() {
                continue;
            }
            let top_y = map.map(v.clamp(lo, hi));
            let x = left + slot * c as f64 + (slot - group_w) / 2.0 + column_w * i as f64;
            let _ = write!(
                svg,
                r#"<rect class="column" x="{x:.1}" y="{top_y:.1}" width="{w:.1}" height="{h:.1}" fill="{colour}" fill-opacity="{opacity}"/>"#,
                w = (column_w - 1.0).max(0.5),
                h = (base - top_y).max(0.0)
            );
        }
        svg.push_str("</g>");
    }
}

/// A ranked horizontal bar chart: one bar per item, in the order given, each labelled with its name and its
/// value (formatted by `format`), on a linear axis from zero to the largest value.
pub fn bars(title: &str, axis_label: &str, items: &[(String, f64)], format: fn(f64) -> String) -> String {
    let coloured: Vec<(String, f64, usize)> = items.iter().map(|(n, v)| (n.clone(), *v, 0)).collect();
    bars_coloured(title, axis_label, &coloured, format)
}

/// [`bars`] with each bar's colour given as a series index (`(name, value, colour)`): the ranked charts give a
/// result the same colour in each of them, the refresh chart tells "before" from "after".
pub fn bars_coloured(
    title: &str,
    axis_label: &str,
    items: &[(String, f64, usize)],
    format: fn(f64) -> String,
) -> String {
    let plain: Vec<(String, f64, usize, Option<f64>)> =
        items.iter().map(|(n, v, c)| (n.clone(), *v, *c, None)).collect();
    bars_with_spread(title, axis_label, &plain, format)
}

/// [`bars_coloured`] with each bar's spread where it has one (`(name, value, colour, spread)`, the spread an
/// absolute standard error): a whisker two standard errors each side of the bar's end, and "± 2 SE" after its
/// value, so bars within each other's noise look it.
pub fn bars_with_spread(
    title: &str,
    axis_label: &str,
    items: &[(String, f64, usize, Option<f64>)],
    format: fn(f64) -> String,
) -> String {
    // The widest margin (360 units) holds 46 characters at TICK_CHAR; two spare.
    const MAX_NAME: usize = 44;
    let names: Vec<String> = items
        .iter()
        .map(|(name, _, _, _)| cut_middle(name, MAX_NAME))
        .collect();
    let values: Vec<String> = items
        .iter()
        .map(|(_, value, _, spread)| match spread {
            Some(se) => format!("{} ± {}", format(*value), format(2.0 * se)),
            None => format(*value),
        })
        .collect();
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let longest_value = values.iter().map(|v| v.chars().count()).max().unwrap_or(0);
    let (width, row) = (800.0, 24.0);
    let left = (longest as f64 * TICK_CHAR + 14.0).clamp(90.0, 360.0);
    // The value is written after its bar: the longest bar leaves room for the longest value.
    let right = (longest_value as f64 * TICK_CHAR + 16.0).clamp(60.0, 220.0);
    let top = 34.0;
    let height = top + row * items.len() as f64 + 40.0;
    let max = items
        .iter()
        .map(|i| i.1 + 2.0 * i.3.unwrap_or(0.0))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let span = width - left - right;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart bars" viewBox="0 0 {width} {height}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text class="title" x="12" y="20">{t}</text>"#,
        t = escape(title)
    );
    for (i, (((_, value, colour, spread), name), text)) in items.iter().zip(&names).zip(&values).enumerate() {
        let y = top + i as f64 * row;
        let at = |v: f64| {
            if v.is_finite() {
                (v / max * span).max(0.0)
            } else {
                0.0
            }
        };
        let w = at(*value);
        let whisker = spread.map(|se| (at(value - 2.0 * se), at(value + 2.0 * se)));
        let _ = write!(
            svg,
            r#"<g class="bar" data-name="{n}"><text class="tick" x="{lx:.1}" y="{ty:.1}" text-anchor="end">{n}</text><rect x="{left:.1}" y="{ry:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"/>"#,
            n = escape(name),
            lx = left - 6.0,
            ty = y + row * 0.7,
            ry = y + 3.0,
            h = row - 6.0,
            c = style(*colour).0,
        );
        if let Some((from, to)) = whisker {
            let _ = write!(
                svg,
                r#"<line class="spread" x1="{x1:.1}" y1="{my:.1}" x2="{x2:.1}" y2="{my:.1}" stroke="currentColor"/>"#,
                x1 = left + from,
                x2 = left + to,
                my = y + row / 2.0
            );
        }
        let _ = write!(
            svg,
            r#"<text class="tick" x="{vx:.1}" y="{ty:.1}">{v}</text></g>"#,
            ty = y + row * 0.7,
            vx = left + whisker.map_or(w, |(_, to)| to.max(w)) + 6.0,
            v = escape(text)
        );
    }
    let _ = write!(
        svg,
        r#"<line class="frame" x1="{left:.1}" y1="{top}" x2="{left:.1}" y2="{yb:.1}"/><text class="label" x="{cx:.1}" y="{ly:.1}" text-anchor="middle">{}</text></svg>"#,
        escape(axis_label),
        yb = top + row * items.len() as f64,
        cx = left + span / 2.0,
        ly = height - 12.0
    );
    svg
}

/// A heat map's lightest and darkest cell colours (RGB).
const HEAT_LIGHT: [u8; 3] = [0xee, 0xf3, 0xfb];
const HEAT_DARK: [u8; 3] = [0x1f, 0x4e, 0x96];

/// A heat map's grid: where its cells go, and the log scale they are shaded on.
struct HeatGrid {
    left: f64,
    top: f64,
    /// The height of a row and the width of a cell, in user units.
    row: f64,
    cell_w: f64,
    columns: usize,
    /// The smallest and largest positive value in the grid, the ends of the shading.
    lo: f64,
    hi: f64,
    format: fn(f64) -> String,
}

impl HeatGrid {
    /// How dark a value is drawn: 0 (lightest) to 1 (darkest) on a log scale; a flat grid is mid-tone.
    fn shade(&self, v: f64) -> f64 {
        if self.hi > self.lo {
            ((v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())).clamp(0.0, 1.0)
        } else {
            0.5
        }
    }

    /// A cell's fill, the colour of its text, and its text: shaded by its value, or blank and "–" when it has none.
    fn cell(&self, value: Option<f64>) -> (String, &'static str, String) {
        match value.filter(|v| v.is_finite() && *v > 0.0) {
            Some(v) => {
                let t = self.shade(v);
                let c: Vec<u8> = (0..3)
                    .map(|k| {
                        (HEAT_LIGHT[k] as f64 + (HEAT_DARK[k] as f64 - HEAT_LIGHT[k] as f64) * t).round()
                            as u8
                    })
                    .collect();
                (
                    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]),
                    if t > 0.55 { "#ffffff" } else { "#1d2330" },
                    (self.format)(v),
                )
            }
            None => ("#fbfcfe".to_string(), "#4a5263", "–".to_string()),
        }
    }
}

/// A heat map: one cell per (row, column), shaded from light to dark by its value on a log scale between the
/// grid's smallest and largest value, with the value written in it (formatted by `format`). A missing value is
/// left blank and marked "–".
pub fn heatmap(
    title: &str,
    rows_label: &str,
    columns_label: &str,
    rows: &[String],
    columns: &[String],
    values: &[Vec<Option<f64>>],
    format: fn(f64) -> String,
) -> String {
    let (width, row) = (800.0, 30.0);
    let (left, right, top) = (90.0, 16.0, 56.0);
    let height = top + row * rows.len() as f64 + 40.0;
    let present: Vec<f64> = values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let grid = HeatGrid {
        left,
        top,
        row,
        cell_w: (width - left - right) / columns.len().max(1) as f64,
        columns: columns.len(),
        lo: present.iter().copied().fold(f64::INFINITY, f64::min),
        hi: present.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        format,
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart heatmap" viewBox="0 0 {width} {height}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text class="title" x="12" y="20">{t}</text><text class="label" x="{cx:.1}" y="40" text-anchor="middle">{cl}</text>"#,
        t = escape(title),
        cx = left + (width - left - right) / 2.0,
        cl = escape(columns_label)
    );
    for (j, name) in columns.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<text class="tick" x="{x:.1}" y="{y:.1}" text-anchor="middle">{n}</text>"#,
            x = left + grid.cell_w * (j as f64 + 0.5),
            y = top - 4.0,
            n = escape(name)
        );
    }
    for (i, name) in rows.iter().enumerate() {
        draw_heatmap_row(&mut svg, &grid, i, name, values.get(i));
    }
    let _ = write!(
        svg,
        r#"<text class="label" x="12" y="{ly:.1}">{rl}</text></svg>"#,
        ly = height - 12.0,
        rl = escape(rows_label)
    );
    svg
}

/// Row `i` of a heat map: its name on the left, then a cell per column with its value (`values`, which may be
/// shorter than the row or missing).
fn draw_heatmap_row(
    svg: &mut String,
    grid: &HeatGrid,
    i: usize,
    name: &str,
    values: Option<&Vec<Option<f64>>>,
) {
    let (row, cell_w) = (grid.row, grid.cell_w);
    let y = grid.top + row * i as f64;
    let _ = write!(
        svg,
        r#"<text class="tick" x="{x:.1}" y="{ty:.1}" text-anchor="end">{n}</text>"#,
        x = grid.left - 8.0,
        ty = y + row * 0.62,
        n = escape(name)
    );
    for j in 0..grid.columns {
        let x = grid.left + cell_w * j as f64;
        let value = values.and_then(|r| r.get(j)).copied().flatten();
        let (fill, ink, text) = grid.cell(value);
        let _ = write!(
            svg,
            r##"<g class="cell"><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}" stroke="#ffffff"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="middle" font-size="12" fill="{ink}">{v}</text></g>"##,
            w = cell_w,
            h = row,
            tx = x + cell_w / 2.0,
            ty = y + row * 0.62,
            v = escape(&text)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_chart() -> Chart {
        Chart {
            title: "IOPS <vs> time".into(),
            x: Axis::new("seconds", Scale::Linear),
            y: Axis::new("IOPS", Scale::Log10),
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(0.0, 60_000.0), (1.0, 5_000.0), (2.0, 0.0)],
                    mark: Mark::Dots,
                    style: None,
                },
                Series {
                    name: "b".into(),
                    points: vec![(0.0, 100.0), (2.0, 200.0)],
                    mark: Mark::Line,
                    style: None,
                },
            ],
        }
    }

    #[test]
    fn svg_snapshot() {
        // A fixed input renders to fixed markup: any change to chart drawing shows up here.
        let svg = render(&sample_chart(), 0);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("IOPS &lt;vs&gt; time"), "titles are escaped");
        assert!(
            svg.contains(r#"data-name="a" data-points="2""#),
            "the zero is dropped on a log axis"
        );
        assert!(svg.contains(r#"data-name="b" data-points="2""#));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(
            svg.contains(">10K<") && svg.contains(">100<"),
            "log ticks at powers of ten"
        );
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/sample-chart.svg");
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &svg).unwrap();
        }
        let expected = std::fs::read_to_string(path).expect("snapshot exists (UPDATE_SNAPSHOTS=1 writes it)");
        assert_eq!(
            svg, expected,
            "chart markup changed; if intended, rerun with UPDATE_SNAPSHOTS=1 and review the diff"
        );
    }

    #[test]
    fn a_point_not_measured_breaks_the_line_and_a_lone_point_is_still_drawn() {
        let nan = f64::NAN;
        let chart = Chart {
            title: "gaps".into(),
            x: Axis::new("x", Scale::Linear),
            y: Axis::new("y", Scale::Linear),
            series: vec![Series {
                name: "a".into(),
                points: vec![
                    (1.0, 5.0),
                    (2.0, 6.0),
                    (3.0, nan),
                    (4.0, 7.0),
                    (5.0, nan),
                    (6.0, 8.0),
                    (7.0, 9.0),
                ],
                mark: Mark::Line,
                style: None,
            }],
        };
        let svg = render(&chart, 0);
        // Two segments (1-2 and 6-7), never one joined across x=3 or x=5, and the lone point at x=4 as a dot.
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(svg.matches("<circle class=\"point\"").count(), 1, "{svg}");
        assert!(svg.contains(r#"data-points="5""#), "{svg}");
    }

    #[test]
    fn heatmap_shades_by_log_value_and_marks_missing_cells() {
        let svg = heatmap(
            "IOPS <matrix>",
            "block size",
            "R/W mix",
            &["1m".into(), "4k".into()],
            &["100/0".into(), "0/100".into()],
            &[vec![Some(100.0), Some(1000.0)], vec![Some(10_000.0), None]],
            |v| format!("{v:.0}"),
        );
        assert!(svg.contains("IOPS &lt;matrix&gt;"), "titles are escaped");
        assert_eq!(svg.matches("<g class=\"cell\">").count(), 4);
        assert!(
            svg.contains("fill=\"#eef3fb\""),
            "the smallest value is the lightest"
        );
        assert!(svg.contains("fill=\"#1f4e96\""), "the largest is the darkest");
        // 1000 is half way between 100 and 10000 on a log scale.
        assert!(svg.contains("fill=\"#87a1c9\""), "{svg}");
        assert!(svg.contains(">–<"), "a missing cell says so");
    }

    #[test]
    fn tick_labels_never_repeat_on_a_linear_axis() {
        for (lo, hi) in [(0.0, 0.035), (0.0, 0.3), (0.0, 1e6), (-5.0, 5.0)] {
            let labels: Vec<String> = tick_labels(&Axis::new("x", Scale::Linear), lo, hi)
                .into_iter()
                .map(|(_, l)| l)
                .collect();
            assert!(labels.windows(2).all(|w| w[0] != w[1]), "{lo}..{hi}: {labels:?}");
        }
    }

    #[test]
    fn compact_numbers_keep_small_shares_apart() {
        assert_eq!(compact(12_345.0), "12K");
        assert_eq!(micros(1_000.0), "1 ms");
        assert_eq!(micros(10_000_000.0), "10 s");
        assert_eq!(micros(500.0), "500 µs");
        assert_eq!(micros(0.5), "500 ns");
        assert_eq!(millis(0.5), "500 µs");
        assert_eq!(compact(0.5), "0.5");
        assert_eq!(compact(0.01), "0.01");
        assert_eq!(compact(0.002), "0.002");
        assert_eq!(compact(0.0001), "0.0001");
        assert_eq!(compact(0.0), "0");
    }

    #[test]
    fn bars_are_ranked_and_scaled_to_the_largest() {
        let items = vec![("slow <1>".to_string(), 0.5), ("fast".to_string(), 0.25)];
        let svg = bars("tail", "share", &items, |v| format!("{:.0}%", 100.0 * v));
        assert!(svg.contains(r#"data-name="slow &lt;1&gt;""#), "names are escaped");
        assert!(
            svg.contains(r#"width="650.0""#) && svg.contains(r#"width="325.0""#),
            "{svg}"
        );
        assert!(svg.contains(">50%<") && svg.contains(">25%<"));
    }

    #[test]
    fn a_series_with_its_own_style_keeps_its_results_colour_and_dash() {
        let series = |name: &str, style| Series {
            name: name.into(),
            points: vec![(0.0, 1.0), (1.0, 2.0)],
            mark: Mark::Line,
            style,
        };
        let chart = Chart {
            title: "t".into(),
            x: Axis::new("x", Scale::Linear),
            y: Axis::new("y", Scale::Linear),
            // Drive B's second phase: B's colour (index 1), the second dash, though it is the first series.
            series: vec![series("B dirty", Some((1, 1))), series("A clean", None)],
        };
        let svg = render(&chart, 3);
        let stroke = |colour: &str, dash: &str| {
            format!("stroke=\"{colour}\" stroke-width=\"1.8\" stroke-dasharray=\"{dash}\"")
        };
        let first = &svg[svg.find("data-name=\"B dirty\"").unwrap()..];
        assert!(first.contains(&stroke(COLOURS[1], "6 3")), "{svg}");
        let second = &svg[svg.find("data-name=\"A clean\"").unwrap()..];
        assert!(
            second.contains(&stroke(COLOURS[1], "")),
            "a series without a style takes its place's colour"
        );
    }

    #[test]
    fn columns_take_their_results_colour_and_a_lighter_shade_per_kind() {
        let categories: Vec<String> = ["2 us", "4 us"].iter().map(|s| s.to_string()).collect();
        let mut series: Vec<Columns> = vec![
            ("A clean".into(), vec![50.0, 50.0], Some((0, 0))),
            ("A dirty".into(), vec![20.0, 80.0], Some((0, 1))),
        ];
        let svg = columns("h", "x", &Axis::new("%", Scale::Linear), &categories, &series);
        let dirty = &svg[svg.find("data-name=\"A dirty\"").unwrap()..];
        assert!(
            dirty.contains(&format!("fill=\"{}\" fill-opacity=\"0.6\"", COLOURS[0])),
            "{svg}"
        );
        // Its legend swatch is the same shade.
        let legend = &svg[svg.rfind("<g class=\"legend\">").unwrap()..];
        assert!(
            legend.contains("fill-opacity=\"0.6\"") && legend.contains("A dirty"),
            "{legend}"
        );
        // Past the palette, positions give lighter shades instead of repeating a colour exactly.
        series = (0..8).map(|i| (format!("s{i}"), vec![1.0, 2.0], None)).collect();
        let svg = columns("h", "x", &Axis::new("%", Scale::Linear), &categories, &series);
        let eighth = &svg[svg.find("data-name=\"s7\"").unwrap()..];
        assert!(
            eighth.contains(&format!("fill=\"{}\" fill-opacity=\"0.6\"", COLOURS[0])),
            "{svg}"
        );
    }

    #[test]
    fn text_that_xml_forbids_is_replaced() {
        assert_eq!(
            escape("a\u{1}b\u{1b}c\td<&>\""),
            "a\u{fffd}b\u{fffd}c\td&lt;&amp;&gt;&quot;"
        );
    }

    #[test]
    fn the_longest_value_fits_after_the_longest_bar() {
        let items = vec![("nvme".to_string(), 3.5e9), ("sata".to_string(), 5.5e8)];
        let svg = bars("read", "MB/s", &items, |v| format!("{:.1} MB/s", v / 1e6));
        let at = svg.find(">3500.0 MB/s<").expect("the value");
        let x: f64 = attribute_after(&svg[..at], "x=\"");
        assert!(
            x + 11.0 * TICK_CHAR <= 800.0,
            "the value ends at {}",
            x + 11.0 * TICK_CHAR
        );
    }

    #[test]
    fn legend_names_past_one_row_are_cut_in_the_middle() {
        let long = format!("cached:file:/{}/image.img?size=1g", "d".repeat(120));
        let chart = Chart {
            title: "t".into(),
            x: Axis::new("x", Scale::Linear),
            y: Axis::new("y", Scale::Linear),
            series: vec![
                Series {
                    name: long.clone(),
                    points: vec![(0.0, 1.0)],
                    mark: Mark::Line,
                    style: None,
                },
                Series {
                    name: "b".into(),
                    points: vec![(1.0, 2.0)],
                    mark: Mark::Line,
                    style: None,
                },
            ],
        };
        let svg = render(&chart, 1);
        assert!(
            !svg.contains(&format!(">{long}</text>")),
            "the legend does not write it whole"
        );
        assert!(
            svg.contains("cached:file:/ddd") && svg.contains("d/image.img?size=1g</text>"),
            "{svg}"
        );
    }

    /// The number in the last `attr` before the end of `text`.
    fn attribute_after(text: &str, attr: &str) -> f64 {
        let at = text.rfind(attr).unwrap() + attr.len();
        text[at..at + text[at..].find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn long_bar_names_widen_the_margin_and_are_cut_in_the_middle() {
        let long = format!("cached:sim:840evo-250g?size=1g ({}light.iolog)", "x".repeat(40));
        let items = vec![(long.clone(), 2.0, 1), ("short".to_string(), 1.0, 0)];
        let svg = bars_coloured("rate", "MB/s", &items, |v| format!("{v}"));
        assert!(!svg.contains(&long), "a name past 44 characters is cut");
        assert!(svg.contains(">cached:sim:840evo-250…x"), "{svg}");
        assert!(
            svg.contains("xlight.iolog)<"),
            "the end that tells names apart stays"
        );
        // 21 + 1 + 21 characters at TICK_CHAR units each, plus the gap.
        assert!(svg.contains(r#"<rect x="336.5""#), "{svg}");
        assert!(
            svg.contains(&format!(r#"fill="{}""#, COLOURS[1])),
            "each bar has its colour"
        );
    }

    #[test]
    fn extreme_and_flat_values_give_a_few_ticks_at_once() {
        for (lo, hi) in [
            (-1e20, -1e20),
            (-1e20, 5.0),
            (1e300, 1e300),
            (0.0, 0.0),
            (-f64::MAX, f64::MAX),
        ] {
            let axis = Axis::new("y", Scale::Linear);
            let (a, b) = bounds(&axis, [lo, hi].into_iter());
            let t = ticks(Scale::Linear, a, b);
            assert!(!t.is_empty() && t.len() <= 21, "{lo}..{hi}: {} ticks", t.len());
        }
    }

    #[test]
    fn narrow_log_axes_get_two_and_five_between_the_decades() {
        assert_eq!(ticks(Scale::Log10, 1.0, 10.0), vec![1.0, 2.0, 5.0, 10.0]);
        assert_eq!(ticks(Scale::Log10, 10.0, 100.0), vec![10.0, 20.0, 50.0, 100.0]);
        assert_eq!(
            ticks(Scale::Log10, 0.01, 1.0),
            vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
        );
        // Wide axes keep the decades.
        assert_eq!(ticks(Scale::Log10, 1.0, 1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
        // Degenerate limits give their ends, never nothing and never a panic.
        assert_eq!(ticks(Scale::Log2, 3.0, 3.5), vec![3.0, 3.5]);
        assert_eq!(ticks(Scale::Log10, 0.0, 10.0), vec![0.0, 10.0]);
        assert_eq!(ticks(Scale::Log10, 1.0, f64::INFINITY).len(), 2);
    }

    #[test]
    fn points_past_a_fixed_range_are_marked_on_its_edge() {
        let chart = Chart {
            title: "IOPS".into(),
            x: Axis::new("s", Scale::Linear),
            y: Axis::new("IOPS", Scale::Linear).range(Some(0.0), Some(40_000.0)),
            series: vec![Series {
                name: "a".into(),
                points: vec![(0.0, 66_000.0), (1.0, 5_000.0), (2.0, 66_000.0)],
                mark: Mark::Dots,
                style: None,
            }],
        };
        let svg = render(&chart, 1);
        assert_eq!(svg.matches(r#"class="clipped""#).count(), 2, "{svg}");
        // A few dots are drawn large; thousands small and see-through.
        assert_eq!(dot_style(Mark::Dots, 48), (3.6, 0.85));
        assert_eq!(dot_style(Mark::Dots, 20_000).0, 1.8);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            ticks(Scale::Linear, 0.0, 40_000.0),
            vec![0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0]
        );
        assert_eq!(
            ticks(Scale::Log10, 100.0, 100_000.0),
            vec![100.0, 1000.0, 10_000.0, 100_000.0]
        );
        assert_eq!(
            ticks(Scale::Log2, 512.0, 4096.0),
            vec![512.0, 1024.0, 2048.0, 4096.0]
        );
        assert_eq!(binary_size(65536.0), "64K");
        assert_eq!(compact(66_000.0), "66K");
    }
}
