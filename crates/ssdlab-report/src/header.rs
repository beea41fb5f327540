//! The page's header and each section's. The page says what ran where: a field list for a lone result, one row
//! per result when there are several (so thirteen results still fit the page). A section comparing several
//! results opens with the options in which they differ, one row per option and a column per result, so every
//! table and chart below it is read knowing what was varied; every result's full options are one click away.
//! It renders from `RunResult` only and never chooses labels (`labels.rs` does).

use std::fmt::Write;

use ssdlab_core::schema::RunResult;
use ssdlab_core::units::BinaryBytes;

use crate::escape;
use crate::labels::{differing_options, label, options_of, readable};

/// One field of the header: how to describe a result.
type HeaderField = fn(&RunResult) -> String;

/// At most this many differing options are listed above a section; the rest are in each result's options.
const MAX_DIFFERING_ROWS: usize = 16;

fn fields() -> [(&'static str, HeaderField); 8] {
    [
        ("test", |r| r.kind().to_string()),
        ("device", device),
        ("capacity", |r| {
            format!(
                "{} ({} bytes)",
                BinaryBytes(r.target.capacity_bytes),
                r.target.capacity_bytes
            )
        }),
        ("I/O", io_path),
        ("host", |r| {
            format!("{} {} ({} CPUs)", r.host.hostname, r.host.kernel, r.host.cpus)
        }),
        ("ssdlab", |r| r.ssdlab_version.clone()),
        ("started", |r| r.started_at.clone()),
        ("verdict", verdict),
    ]
}

/// The device as its result describes it: the model and, where known, its serial, firmware and write cache.
fn device(r: &RunResult) -> String {
    match crate::text::drive_facts_line(&r.target.drive) {
        Some(facts) => format!("{} ({facts})", r.target.model),
        None => r.target.model.clone(),
    }
}

/// How the I/O was done: the backend and whether it bypassed the page cache.
fn io_path(r: &RunResult) -> String {
    let cache = if r.target.direct_io {
        "O_DIRECT"
    } else {
        "buffered"
    };
    format!("{}, {cache}", r.target.backend)
}

fn verdict(r: &RunResult) -> String {
    let incomplete = if r.complete { "" } else { " (incomplete)" };
    if r.verdict.passed && r.verdict.reasons.is_empty() {
        format!("passed{incomplete}")
    } else if r.verdict.passed {
        // What a passing result says of itself (a health check's drive count and any warnings).
        format!("passed: {}{incomplete}", r.verdict.reasons.join("; "))
    } else if r.verdict.finding {
        format!("finding: {}{incomplete}", r.verdict.reasons.join("; "))
    } else if r.verdict.unknown {
        format!("unknown: {}{incomplete}", r.verdict.reasons.join("; "))
    } else {
        format!("failed: {}{incomplete}", r.verdict.reasons.join("; "))
    }
}

fn cell(name: &str, r: &RunResult, text: &str) -> String {
    let class = match (name, r.verdict.passed) {
        ("verdict", true) => " class=\"verdict pass\"",
        // A finding is what the method exists to find (stale files, a straggler): amber, not failure's red.
        ("verdict", false) if r.verdict.finding => " class=\"verdict warn\"",
        // Nothing read to judge: grey, neither a pass nor a failure.
        ("verdict", false) if r.verdict.unknown => " class=\"verdict unknown\"",
        ("verdict", false) => " class=\"verdict fail\"",
        ("device", _) => " class=\"device\"",
        // An ISO time stamp reads as one: never broken across lines in a narrow column.
        ("started", _) => " class=\"time\"",
        _ => "",
    };
    format!("<td{class}>{}</td>", escape(text))
}

fn options_details(r: &RunResult) -> String {
    format!(
        "<details><summary>Options of {}</summary><pre>{}</pre></details>",
        escape(&label(r)),
        escape(&serde_json::to_string_pretty(&r.options).unwrap_or_default())
    )
}

/// The page's header: what ran where.
pub(crate) fn page_header(results: &[RunResult]) -> String {
    let fields = fields();
    let mut t = String::new();
    if results.is_empty() {
        return t;
    }
    if let [one] = results {
        t.push_str("<table class=\"header\">");
        for (name, value) in fields {
            let _ = write!(t, "<tr><td>{name}</td>{}</tr>", cell(name, one, &value(one)));
        }
        t.push_str("</table>");
        t.push_str(&options_details(one));
        return t;
    }
    // Fields every result shares (the host, the version) are said once above the table.
    let shared = |name: &str| {
        let (_, value) = fields.iter().find(|(n, _)| *n == name).expect("a header field");
        let first = value(&results[0]);
        results.iter().all(|r| value(r) == first).then_some(first)
    };
    let once: Vec<(&str, String)> = ["device", "host", "ssdlab"]
        .into_iter()
        .filter_map(|name| shared(name).map(|v| (name, v)))
        .collect();
    if !once.is_empty() {
        let said: Vec<String> = once.iter().map(|(n, v)| format!("{n}: {v}")).collect();
        let _ = write!(t, "<p class=\"meta\">{}</p>", escape(&said.join("; ")));
    }
    // The capacity without its byte count: the table is an index, and the lone-result header has the bytes. How
    // the I/O was done is said above each section instead, where it is read.
    let columns: Vec<(&str, HeaderField)> = fields
        .into_iter()
        .filter(|(name, _)| *name != "I/O" && !once.iter().any(|(n, _)| n == name))
        .map(|(name, value)| match name {
            "capacity" => (
                name,
                (|r| BinaryBytes(r.target.capacity_bytes).to_string()) as HeaderField,
            ),
            _ => (name, value),
        })
        .collect();
    // Several devices: each row names its device briefly, and each device's whole description is said once
    // below the table (the demo's thirteen results on three virtual drives would repeat it thirteen times).
    // Rows in the order the page tells its sections (the story's), results of a kind as given.
    let mut ordered: Vec<&RunResult> = results.iter().collect();
    ordered.sort_by_key(|r| crate::story_place(r.kind()).0);
    let devices = DeviceNames::of(&ordered);
    t.push_str("<div class=\"wide\"><table class=\"summary\"><tr><th>result</th>");
    for (name, _) in &columns {
        let _ = write!(t, "<th>{name}</th>");
    }
    t.push_str("</tr>");
    for r in ordered {
        let _ = write!(t, "<tr><td>{}</td>", escape(&label(r)));
        for (name, value) in &columns {
            let text = match *name {
                "device" => devices.short(r),
                _ => value(r),
            };
            t.push_str(&cell(name, r, &text));
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    if columns.iter().any(|(name, _)| *name == "device") {
        t.push_str(&devices.described());
    }
    t
}

/// The devices of a page of several results, each described once: a row names its device by the description's
/// first words ("virtual 840evo-120g"), numbered where two devices would read alike.
struct DeviceNames {
    /// Each distinct description in the order results first name it, with its short name.
    distinct: Vec<(String, String)>,
}

impl DeviceNames {
    fn of(results: &[&RunResult]) -> Self {
        let mut descriptions: Vec<String> = Vec::new();
        for r in results {
            let d = device(r);
            if !descriptions.contains(&d) {
                descriptions.push(d);
            }
        }
        let brief = |d: &str| -> String {
            let end = [d.find(" ("), d.find(", ")]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(d.len());
            shorten(&d[..end])
        };
        // Devices that read alike are numbered among themselves (#1, #2), in the order results name them.
        let distinct = descriptions
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let alike = descriptions.iter().filter(|o| brief(o) == brief(d)).count() > 1;
                let nth = descriptions[..=i].iter().filter(|o| brief(o) == brief(d)).count();
                let name = if alike {
                    format!("{} #{nth}", brief(d))
                } else {
                    brief(d)
                };
                (d.clone(), name)
            })
            .collect();
        DeviceNames { distinct }
    }

    fn short(&self, r: &RunResult) -> String {
        let d = device(r);
        self.distinct
            .iter()
            .find(|(full, _)| *full == d)
            .map_or(d, |(_, name)| name.clone())
    }

    /// Each device's whole description, under the short name its rows use (a device whose name says all there
    /// is, such as "a fan-out over 25 drives", is not listed).
    fn described(&self) -> String {
        if self.distinct.iter().all(|(full, name)| full == name) {
            return String::new();
        }
        let mut t = String::from("<dl class=\"devices\">");
        for (full, name) in self.distinct.iter().filter(|(full, name)| full != name) {
            let _ = write!(t, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(full));
        }
        t.push_str("</dl>");
        t
    }
}

/// A value short enough for a table cell: a long absolute path keeps its end (the file's name), anything else
/// its start.
fn shorten(value: &str) -> String {
    const MAX: usize = 48;
    let chars: Vec<char> = value.chars().collect();
    if chars.len() <= MAX {
        value.to_string()
    } else if value.starts_with('/') {
        format!("…{}", chars[chars.len() - (MAX - 1)..].iter().collect::<String>())
    } else {
        format!("{}…", chars[..MAX - 1].iter().collect::<String>())
    }
}

/// The header of a section holding `group`: for several results, the options in which they differ (the target
/// first when the targets differ) and each result's full options; for a lone result on a page of several, its
/// options.
pub(crate) fn section_header(group: &[&RunResult], page_results: usize) -> String {
    let mut t = String::new();
    let io = io_path;
    let same_io = group.iter().all(|r| io(r) == io(group[0]));
    if page_results > 1 && same_io {
        let _ = write!(t, "<p class=\"meta\">I/O: {}</p>", escape(&io(group[0])));
    }
    if group.len() > 1 {
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        if group.iter().any(|r| r.target.target != group[0].target.target) {
            rows.push((
                "target".into(),
                group.iter().map(|r| r.target.target.clone()).collect(),
            ));
        }
        if !same_io {
            rows.push(("I/O".into(), group.iter().map(|r| io(r)).collect()));
        }
        let options: Vec<Vec<(String, String)>> = group.iter().map(|r| options_of(r)).collect();
        for key in differing_options(group) {
            let values = options
                .iter()
                .map(|o| {
                    o.iter().find(|(k, _)| *k == key).map_or_else(
                        || "–".to_string(),
                        |(_, v)| shorten(&readable(&key, crate::labels::file_name_of(v)).1),
                    )
                })
                .collect();
            rows.push((readable(&key, "").0, values));
        }
        if rows.is_empty() {
            t.push_str("<p class=\"meta\">These results share every option.</p>");
        } else {
            t.push_str("<div class=\"wide\"><table class=\"differs\"><tr><th>options that differ</th>");
            for r in group {
                let _ = write!(t, "<th>{}</th>", escape(&label(r)));
            }
            t.push_str("</tr>");
            let more = rows.len().saturating_sub(MAX_DIFFERING_ROWS);
            for (key, values) in rows.into_iter().take(MAX_DIFFERING_ROWS) {
                let _ = write!(t, "<tr><td>{}</td>", escape(&key));
                for v in values {
                    let _ = write!(t, "<td>{}</td>", escape(&v));
                }
                t.push_str("</tr>");
            }
            t.push_str("</table></div>");
            if more > 0 {
                let _ = write!(
                    t,
                    "<p class=\"meta\">and {more} more options that differ, in each result's options below.</p>"
                );
            }
        }
    }
    if page_results > 1 {
        for r in group {
            t.push_str(&options_details(r));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::shorten;

    #[test]
    fn long_values_keep_the_part_that_names_them() {
        assert_eq!(shorten("randwrite"), "randwrite");
        let path = format!("/tmp/{}/traces/light.iolog", "x".repeat(60));
        let short = shorten(&path);
        assert!(
            short.starts_with('…') && short.ends_with("/traces/light.iolog"),
            "{short}"
        );
        assert_eq!(short.chars().count(), 48);
        let text = "y".repeat(60);
        assert!(shorten(&text).ends_with('…'));
    }
}
