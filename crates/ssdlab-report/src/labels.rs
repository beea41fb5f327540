//! Names for results: the label each one carries in legends, table headers and bar charts, and the options in
//! which results of one kind differ. It owns telling results apart; it never reads or renders anything.

use std::collections::{BTreeSet, HashMap, HashSet};

use ssdlab_core::schema::{Analysis, MethodAnalysis, RunResult};
use ssdlab_core::units::BinaryBytes;

use crate::consistency;

/// A short name for a result in legends and table headers: the target, plus what tells two runs of one method
/// on it apart (the over-provisioning of a consistency run, the test size of a sweep).
pub fn label(result: &RunResult) -> String {
    if let Some(label) = &result.label {
        return label.clone();
    }
    default_label(result)
}

/// The results with labels that tell them apart: a result without a given label whose default one it shares with
/// another of the same kind gets the options in which they differ (`seed=2`, `method.rw=randread`), or, when the
/// options are the same, its start time. Results of different kinds are drawn in different sections, so they may
/// share a label.
pub(crate) fn distinct_labels(results: &[RunResult]) -> Vec<RunResult> {
    let mut out = results.to_vec();
    let base: Vec<String> = out.iter().map(label).collect();
    // Twins are found by one pass over the results, and each group's options are flattened and compared once:
    // the cost grows with the results and their options, not with their square (500 results of one target took
    // 45 s when every result compared itself with all its twins).
    let mut groups: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, r) in results.iter().enumerate() {
        groups.entry((base[i].as_str(), r.kind())).or_default().push(i);
    }
    for members in groups.values().filter(|m| m.len() >= 2) {
        let options: Vec<Vec<(String, String)>> = members.iter().map(|&i| options_of(&results[i])).collect();
        let flat: Vec<HashMap<String, String>> =
            options.iter().map(|o| o.iter().cloned().collect()).collect();
        let keys = differing_keys(options);
        for (at, &i) in members.iter().enumerate() {
            if out[i].label.is_some() {
                continue;
            }
            let mine = &flat[at];
            // Keys that tell this result from a twin, the method's own first; values cut short.
            let differing: Vec<String> = keys
                .iter()
                .filter_map(|key| Some(label_part(key, mine.get(key)?)))
                .take(3)
                .collect();
            let suffix = if differing.is_empty() {
                out[i].started_at.clone()
            } else {
                differing.join(", ")
            };
            out[i].label = Some(format!("{} ({suffix})", base[i]));
        }
    }
    // Whatever still collides within a kind (the same directory twice, twins past three keys) is numbered: in
    // order, each result's later namesakes become "NAME #2", "NAME #3", ..., skipping a number whose name a result
    // of the kind already carries. The results under each name are kept in a map, so this stays linear.
    let mut by_name: HashMap<(String, &str), BTreeSet<usize>> = HashMap::new();
    for (i, r) in out.iter().enumerate() {
        by_name
            .entry((label(r), results[i].kind()))
            .or_default()
            .insert(i);
    }
    for i in 0..out.len() {
        let key = (label(&out[i]), results[i].kind());
        let later: Vec<usize> = by_name
            .get(&key)
            .map(|set| set.range(i + 1..).copied().collect())
            .unwrap_or_default();
        let mut n = 1;
        for j in later {
            // The next number whose name no result of the kind already carries.
            let renamed = loop {
                n += 1;
                let candidate = format!("{} #{n}", key.0);
                if by_name
                    .get(&(candidate.clone(), key.1))
                    .is_none_or(BTreeSet::is_empty)
                {
                    break candidate;
                }
            };
            if let Some(set) = by_name.get_mut(&key) {
                set.remove(&j);
            }
            by_name.entry((renamed.clone(), key.1)).or_default().insert(j);
            out[j].label = Some(renamed);
        }
    }
    out
}

/// One option in a label: "seed 2", "len 1 GiB", a switch as its name or its name denied ("refresh all", "no
/// refresh all"), a path by its file; a long value cut short.
fn label_part(key: &str, value: &str) -> String {
    let (name, value) = readable(key, file_name_of(value));
    match value.as_str() {
        "yes" => return name,
        "no" => return format!("no {name}"),
        _ => {}
    }
    let short: String = value.chars().take(32).collect();
    let cut = if short.len() < value.len() { "…" } else { "" };
    format!("{name} {short}{cut}")
}

/// A path named by its file (each result's options keep the whole path): `/tmp/x/light.iolog` and
/// `ssdlab-demo/traces/light.iolog` are `light.iolog`. Other values with a slash (`scale=1/64`, a target with
/// query options) stay as they are.
pub(crate) fn file_name_of(value: &str) -> &str {
    match value.rsplit_once('/') {
        Some((_, file))
            if !file.is_empty()
                && (value.starts_with('/')
                    || (file.contains('.') && !value.contains(['=', ' ', ':', '?']))) =>
        {
            file
        }
        _ => value,
    }
}

/// An option as a reader writes it: its name without the record's path and unit suffix, and its value in that
/// unit. The names carry their units as suffixes (`runtime_ns`, `span_bytes`, `op_percent`), so the value is
/// formatted by them: `method.runtime_ns` 5000000000 is "runtime 5.00 s", `method.trace` /tmp/light.iolog stays
/// "trace /tmp/light.iolog".
pub(crate) fn readable(key: &str, value: &str) -> (String, String) {
    use ssdlab_core::units::{DecimalRate, Nanos};
    let name = key.rsplit('.').next().unwrap_or(key);
    let number = value.parse::<f64>().ok().filter(|v| v.is_finite());
    // The unit suffix is never part of the name a reader sees, whatever the value ("runtime", not "runtime ns").
    const SUFFIXES: [&str; 5] = ["_bytes_per_s", "_ns", "_bytes", "_percent", "_s"];
    let suffix = SUFFIXES
        .into_iter()
        .find(|s| name.ends_with(s) && name.len() > s.len());
    let base = suffix
        .map_or(name, |s| &name[..name.len() - s.len()])
        .replace('_', " ");
    let shown = match (number, suffix) {
        (Some(v), Some("_bytes_per_s")) => DecimalRate(v).to_string(),
        (Some(v), Some("_ns")) => Nanos(v).to_string(),
        (Some(v), Some("_bytes")) if v >= 0.0 => BinaryBytes(v as u64).to_string(),
        (Some(v), Some("_percent")) => format!("{v}%"),
        (Some(v), Some("_s")) => format!("{v} s"),
        _ if value == "true" => "yes".to_string(),
        _ if value == "false" => "no".to_string(),
        _ => value.to_string(),
    };
    (base, shown)
}

/// A result's options as (dotted path, value as text), the target's own keys left out.
pub(crate) fn options_of(result: &RunResult) -> Vec<(String, String)> {
    flatten_options(&serde_json::to_value(&result.options).unwrap_or_default())
}

/// The option keys whose values are not the same in every result of `group` (missing counts as a value), the
/// method's and the workload's own first, then in the order the options list them.
pub(crate) fn differing_options(group: &[&RunResult]) -> Vec<String> {
    differing_keys(group.iter().map(|r| options_of(r)).collect())
}

/// The keys whose values are not the same in every one of `flat` (missing counts as a value), in the order they
/// are first met, the method's and the workload's own first. One pass per result over hashed options.
fn differing_keys(flat: Vec<Vec<(String, String)>>) -> Vec<String> {
    let maps: Vec<HashMap<&str, &str>> = flat
        .iter()
        .map(|o| o.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
        .collect();
    let mut order: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for options in &flat {
        for (key, _) in options {
            if seen.insert(key.as_str()) {
                order.push(key.as_str());
            }
        }
    }
    let first = maps.first();
    let mut keys: Vec<String> = order
        .into_iter()
        .filter(|key| {
            let reference = first.and_then(|m| m.get(key));
            maps.iter().skip(1).any(|m| m.get(key) != reference)
        })
        .map(str::to_string)
        .collect();
    keys.sort_by_key(|key| !key.starts_with("method.") && !key.starts_with("workload."));
    keys
}

/// Every leaf of an options object as (dotted path, value as text), the target's own keys left out (the label
/// names the target already).
fn flatten_options(value: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    let path = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    walk(&path, v, out);
                }
            }
            serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out.retain(|(key, _)| key != "target" && !key.starts_with("target."));
    out
}

/// The label a result gets from itself alone.
fn default_label(result: &RunResult) -> String {
    let op = consistency::analysis(result)
        .map(|a| a.op_percent)
        .filter(|&op| op > 0);
    if let Some(op) = op {
        return format!("{} ({op}% OP)", result.target.target);
    }
    if let Analysis::Sweep(MethodAnalysis {
        measured: Some(a), ..
    }) = &result.analysis
    {
        return format!("{} ({} test)", result.target.target, BinaryBytes(a.region_bytes));
    }
    result.target.target.clone()
}

/// The target under a `cached:` prefix and the cache's own keys (`cached:sim:x?size=1g&scale=1/4` names
/// `sim:x?scale=1/4`), or None for a target without a cache.
pub(crate) fn uncached_target(target: &str) -> Option<String> {
    match ssdlab_core::target::TargetSpec::parse(target).ok()? {
        ssdlab_core::target::TargetSpec::Cached { inner_target, .. } => Some(inner_target),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{distinct_labels, readable};
    use ssdlab_core::schema::RunResult;

    #[test]
    fn options_read_as_a_reader_writes_them_by_their_unit_suffixes() {
        let r = |k: &str, v: &str| {
            let (name, value) = readable(k, v);
            format!("{name} {value}")
        };
        assert_eq!(r("method.options.runtime_ns", "5000000000"), "runtime 5.00 s");
        assert_eq!(r("method.trace", "light.iolog"), "trace light.iolog");
        assert_eq!(r("workload.span.len_bytes", "1073741824"), "len 1 GiB");
        assert_eq!(r("method.op_percent", "25"), "op 25%");
        assert_eq!(r("workload.seed", "2"), "seed 2");
        assert_eq!(r("method.rate_bytes_per_s", "200000000"), "rate 200 MB/s");
        // Names drop their unit whatever the value, and switches read as yes or no.
        assert_eq!(readable("method.runtime_ns", "").0, "runtime");
        assert_eq!(r("refresh_all", "false"), "refresh all no");
    }

    /// A result of the run kind from the schema's own fixture, with `label`.
    fn labelled(label: &str) -> RunResult {
        let text = include_str!("../../ssdlab-core/tests/fixtures/ssdlab1/run.json");
        let mut r = RunResult::from_json(text).expect("the fixture reads as a result");
        r.label = Some(label.to_string());
        r
    }

    #[test]
    fn colliding_labels_are_numbered_until_every_one_is_distinct() {
        for given in [["x", "x", "x #2"], ["x #2", "x", "x"], ["x", "x", "x"]] {
            let results: Vec<RunResult> = given.iter().map(|l| labelled(l)).collect();
            let names: Vec<String> = distinct_labels(&results).iter().map(super::label).collect();
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{given:?} gave {names:?}");
        }
        // A number already taken is skipped, not doubled ("x #2 #2").
        let results: Vec<RunResult> = ["x", "x", "x #2"].iter().map(|l| labelled(l)).collect();
        let names: Vec<String> = distinct_labels(&results).iter().map(super::label).collect();
        assert_eq!(names, ["x", "x #3", "x #2"]);
    }
}
