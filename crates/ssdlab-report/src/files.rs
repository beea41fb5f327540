//! Each chart of a result as a standalone SVG file, for articles and slides: the markup the page draws, with the
//! charts' styles inside it, a white background, a system font and its natural size, so it looks the same in a
//! browser, an image viewer or a vector editor. The charts are taken from the rendered page itself, so there is one
//! renderer and a file never differs from what the report shows. Pure: it returns names and text; the caller
//! writes them.

use crate::CHART_CSS;

/// One chart, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartFile {
    /// `NN-title.svg`: numbered in page order, named by the chart's title.
    pub name: String,
    pub svg: String,
}

/// The file-name part of a title (escaped markup): lower case letters and digits, words joined by `-`, at most 60
/// characters; `chart` when nothing is left.
fn slug(title: &str) -> String {
    let title = title
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "chart".into()
    } else {
        out.to_string()
    }
}

/// The value of `name="..."` in an element's opening tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let needle = format!(" {name}=\"");
    let at = tag.find(&needle)? + needle.len();
    Some(&tag[at..at + tag[at..].find('"')?])
}

/// The tag in the head of every report page ssdlab writes (which program made the page). Whether a file may be
/// replaced is the output manifest's question (ssdlab-outputs), never this tag's.
pub const GENERATOR_META: &str = "<meta name=\"generator\" content=\"ssdlab\">";

/// Every chart of a rendered page, as standalone SVG files.
pub fn chart_files_of_page(page: &str) -> Vec<ChartFile> {
    let mut files = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("<svg class=\"chart") {
        let chart = &rest[at..];
        // Charts hold no nested <svg>, so the first end tag closes this one.
        let end = chart.find("</svg>").expect("a chart's SVG is closed") + "</svg>".len();
        let (element, after) = chart.split_at(end);
        rest = after;
        let open_end = element.find('>').expect("an opening tag");
        let (open, body) = element.split_at(open_end + 1);
        let view_box = attribute(open, "viewBox").unwrap_or("0 0 800 400");
        let size: Vec<&str> = view_box.split_whitespace().collect();
        let (width, height) = match size.as_slice() {
            [_, _, w, h] => (*w, *h),
            _ => ("800", "400"),
        };
        let title = attribute(open, "aria-label").unwrap_or("chart");
        // The title is escaped markup; its slug only keeps letters and digits.
        let name = format!("{:02}-{}.svg", files.len() + 1, slug(title));
        let open = open.replacen(
            "<svg ",
            &format!("<svg width=\"{width}\" height=\"{height}\" "),
            1,
        );
        let svg = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{open}<style>svg {{ font-family: system-ui, -apple-system, \"Segoe UI\", \"DejaVu Sans\", sans-serif; }}{CHART_CSS}</style><rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>{body}\n"
        );
        files.push(ChartFile { name, svg });
    }
    files
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn titles_become_short_file_names() {
        assert_eq!(
            slug("IOPS, linear scale up to 40K"),
            "iops-linear-scale-up-to-40k"
        );
        assert_eq!(
            slug("Latency CDF: operations at or below each latency"),
            "latency-cdf-operations-at-or-below-each-latency"
        );
        assert_eq!(slug("&lt;weird&gt; — title &amp; more!"), "weird-title-more");
        assert_eq!(slug("— … —"), "chart");
        assert!(slug(&"long words ".repeat(20)).len() <= 60);
    }
}
