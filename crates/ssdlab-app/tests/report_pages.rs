//! `report` in-process over results of null and virtual-drive runs: absurd values drawn at once, RAPID-style
//! cache ratios and sweeps side by side, labels that tell runs apart, a directory of results, and baselines. The
//! checks in a real browser stay with the binary's tests (they need Chromium).

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use ssdlab_app::methodology::MethodPlan;
use ssdlab_app::methodology::options::{self, LatencyFlags, SweepFlags};
use ssdlab_app::ports::Outcome;
use ssdlab_app::report::Plan;
use ssdlab_app::run::RunFlags;

/// `report RESULTS... --out PAGE [--label ...] [--baseline B]`, in-process.
fn report(results: &[&Path], page: &Path, label: &[&str], baseline: Option<&Path>) -> Plan {
    Plan {
        results: results.iter().map(|p| p.to_path_buf()).collect(),
        out: page.to_path_buf(),
        label: label.iter().map(|l| l.to_string()).collect(),
        baseline: baseline.map(Path::to_path_buf),
    }
}

fn drawn(plan: &Plan) -> Ran {
    let ran = ran(|ports| ssdlab_app::report::run(plan, ports));
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    ran
}

fn refused(plan: &Plan) -> String {
    refusal(|ports| ssdlab_app::report::run(plan, ports))
}

/// A `run` of `runtime` on `target` with `seed` into `out_dir`, passed.
fn run_into(target: &str, runtime: &str, seed: u64, out_dir: &Path) {
    let ran = run_command(
        target,
        RunFlags {
            runtime_ns: Some(ns(runtime)),
            seed,
            ..run_defaults()
        },
        Some(out_dir),
    );
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
}

/// `test latency --span SPAN --runtime RUNTIME` on `target` into `out_dir`, passed.
fn latency_into(target: &str, span: &str, runtime: &str, out_dir: &Path) {
    let method = MethodPlan::Latency(
        options::latency(LatencyFlags {
            span_bytes: bytes(span),
            runtime_ns: ns(runtime),
            ..latency_defaults()
        })
        .unwrap(),
    );
    let ran = test_command(target, method, Some(out_dir));
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
}

/// The table of the page that follows `heading`.
fn table_after<'a>(html: &'a str, heading: &str) -> &'a str {
    let table = &html[html.find(heading).unwrap_or_else(|| panic!("no {heading}"))..];
    &table[..table.find("</table>").unwrap()]
}

/// #14 defect 3: any value in a result is drawn in bounded time and memory.
#[test]
fn the_report_draws_absurd_values_at_once() {
    let dir = tempdir();
    let out_dir = dir.path().join("r");
    run_into("null:64m", "2s", 1, &out_dir);
    let mut result = read_result(&out_dir);
    // Every second at -1e20 IOPS: a flat series whose span the old tick generator could not step through.
    for sample in result["phases"][0]["samples"].as_array_mut().unwrap() {
        sample["iops"] = serde_json::json!(-1e20);
        sample["latency_ns_p99"] = serde_json::json!(u64::MAX);
    }
    std::fs::write(out_dir.join("result.json"), result.to_string()).unwrap();
    let started = std::time::Instant::now();
    let page = dir.path().join("page.html");
    // On a thread of its own, waited for 20 s: a hang fails the test instead of holding the suite.
    let (sent, received) = std::sync::mpsc::channel();
    let plan = report(&[&out_dir], &page, &[], None);
    std::thread::spawn(move || {
        let outcome = common::ran(|ports| ssdlab_app::report::run(&plan, ports)).outcome;
        sent.send(outcome).unwrap();
    });
    let outcome = received
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the report is drawn within 20 s");
    assert_eq!(outcome, Outcome::Passed);
    assert!(started.elapsed().as_secs() < 10);
    assert!(std::fs::metadata(&page).unwrap().len() < 1 << 20);
}

#[test]
fn rapid_style_comparison_shows_cache_ratios_and_sweeps_side_by_side() {
    let dir = tempdir();
    let out = |name: &str| dir.path().join(name);
    let drive = "sim:840evo-250g?scale=1/64";
    let cached = format!("cached:{drive}&size=64m");
    for (target, name) in [(drive, "lat-plain"), (cached.as_str(), "lat-cached")] {
        latency_into(target, "1g", "3s", &out(name));
    }
    for (size, name) in [("64m", "sweep-64m"), ("16m", "sweep-16m")] {
        let method = MethodPlan::Sweep(
            options::sweep(SweepFlags {
                test_bytes: bytes(size),
                from_bytes: bytes("4k"),
                to_bytes: bytes("64k"),
                ..sweep_defaults()
            })
            .unwrap(),
        );
        let ran = test_command(drive, method, Some(&out(name)));
        assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    }
    let page = out("compare.html");
    let results = ["lat-plain", "lat-cached", "sweep-64m", "sweep-16m"].map(out);
    let results: Vec<&Path> = results.iter().map(PathBuf::as_path).collect();
    drawn(&report(&results, &page, &[], None));
    let html = std::fs::read_to_string(&page).unwrap();
    // The cached run against the same drive without it, as ratios (RAPID's table).
    let ratio_row = format!("<td>cached:sim:840evo-250g?scale=1/64&amp;size=64m / {drive}</td>");
    assert!(html.contains(&ratio_row), "no ratio row in the latency table");
    // Two sweeps of one drive: told apart by their test size, in one table under both names.
    assert!(
        html.contains(&format!("{drive} (64 MiB test)")) && html.contains(&format!("{drive} (16 MiB test)"))
    );
    assert!(
        html.contains(r#"<th colspan="2">"#),
        "no side-by-side sweep table"
    );
    // These sweeps read the drive itself: no word of a cache serving them.
    assert!(!html.contains("was served by the DRAM cache"), "{html}");
    // A sweep whose region fits the cache is served by it alone, and its page says so rather than leave identical
    // read and write columns unexplained (issue 49).
    let method = MethodPlan::Sweep(
        options::sweep(SweepFlags {
            test_bytes: bytes("16m"),
            from_bytes: bytes("4k"),
            to_bytes: bytes("64k"),
            ..sweep_defaults()
        })
        .unwrap(),
    );
    let all_cached = format!("cached:{drive}&size=64m&seq-cutoff=1g");
    let ran = test_command(&all_cached, method, Some(&out("sweep-cached")));
    assert_eq!(ran.outcome, Outcome::Passed, "{}", ran.text());
    let html = std::fs::read_to_string(out("sweep-cached").join("report.html")).unwrap();
    assert!(html.contains("was served by the DRAM cache"), "{html}");
}

#[test]
fn two_runs_on_one_target_get_labels_that_tell_them_apart() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, seed) in [(&a, 1), (&b, 2)] {
        run_into("null:16m", "100ms", seed, out);
    }
    let page = dir.path().join("page.html");
    drawn(&report(&[&a, &b], &page, &[], None));
    let html = std::fs::read_to_string(&page).unwrap();
    // The option as a reader writes it, not the record's path (issue 49): "seed 1", not "workload.seed=1".
    assert!(
        html.contains("null:16m (seed 1)") && html.contains("null:16m (seed 2)"),
        "{html}"
    );
    assert!(!html.contains("workload.seed"), "{html}");
    // The same result given twice still reads as two: the second is numbered.
    drawn(&report(&[&a, &b, &a], &page, &[], None));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("null:16m (seed 1) #2"), "{html}");
    assert!(!html.contains("null:16m (seed 2) #2"), "{html}");
    drawn(&report(&[&a, &b], &page, &["before", "after"], None));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<th>before</th>") && html.contains("<th>after</th>"));
    assert_one_line_naming(&refused(&report(&[&a, &b], &page, &["one"], None)), "--label");
}

#[test]
fn a_directory_of_results_is_redrawn_and_what_is_not_a_result_is_skipped_with_a_note() {
    // Laid out as the demo leaves its --out: result directories side by side with a traces/ folder.
    let dir = tempdir();
    let demo = dir.path().join("demo");
    for (name, seed) in [("01-run", 1), ("02-run", 2)] {
        run_into("null:16m", "100ms", seed, &demo.join(name));
    }
    std::fs::create_dir_all(demo.join("traces")).unwrap();
    std::fs::write(demo.join("traces/t.iolog"), "fio version 2 iolog\n").unwrap();
    let page = dir.path().join("page.html");
    let err = drawn(&report(&[&demo], &page, &[], None)).text();
    assert!(
        err.contains("(2 results)") && err.contains("traces: not a result"),
        "{err}"
    );
    // The shell's demo/*/ names traces/ too: skipped, the others drawn.
    let globbed = ["01-run", "02-run", "traces"].map(|n| demo.join(n));
    let globbed: Vec<&Path> = globbed.iter().map(PathBuf::as_path).collect();
    let err = drawn(&report(&globbed, &page, &[], None)).text();
    assert!(err.contains("(2 results)"), "{err}");
    // A label names one result directory; a directory of them has no one result to name.
    assert_one_line_naming(&refused(&report(&[&demo], &page, &["x"], None)), "--label");
    // Nothing that is a result: the error says what to give.
    assert_one_line_naming(
        &refused(&report(&[&demo.join("traces")], &page, &[], None)),
        "no result found",
    );
}

/// #33 point 5: a change inside the figures' measured spread is "within noise", not better; a baseline of another
/// kind is refused, not silently compared with nothing.
#[test]
fn a_baseline_says_within_noise_and_refuses_another_kind() {
    let dir = tempdir();
    let mut dirs = Vec::new();
    // The same random reads on one virtual drive, two seeds: the same figures to within their per-second spread.
    for seed in [1, 2] {
        let out_dir = dir.path().join(format!("seed{seed}"));
        run_into("sim:840evo-250g?scale=1/256&fill=100%", "5s", seed, &out_dir);
        dirs.push(out_dir);
    }
    let page = dir.path().join("vs.html");
    let (a, b) = (dirs[0].as_path(), dirs[1].as_path());
    drawn(&report(&[b], &page, &[], Some(a)));
    let html = std::fs::read_to_string(&page).unwrap();
    let table = table_after(&html, "Against the baseline");
    assert!(table.contains("within noise"), "{table}");
    assert!(
        !table.contains("class=\"better\"") && !table.contains("class=\"worse\""),
        "{table}"
    );
    // A latency result as the baseline of run results.
    let other = dir.path().join("latency");
    latency_into("sim:840evo-250g?scale=1/256", "64m", "1s", &other);
    assert_one_line_naming(&refused(&report(&[a, b], &page, &[], Some(&other))), "--baseline");
}

/// Issue 49 item 8: a page of several kinds tells them in the story's order (the drive measured, the reviews'
/// methods, the field report's stale data and fan-out, the trace benches, health last), not alphabetically, and
/// opens with a table of contents linking each section. Drawn from every kind an earlier ssdlab wrote
/// (ssdlab-core's fixtures).
#[test]
fn a_page_of_many_kinds_tells_them_in_the_storys_order_with_contents() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ssdlab-core/tests/fixtures/ssdlab1");
    let dir = tempdir();
    let mut inputs = vec![];
    for kind in [
        "health",
        "replay",
        "trim",
        "consistency",
        "sweep",
        "scan",
        "fanout",
        "pts",
        "run",
    ] {
        let d = dir.path().join(kind);
        std::fs::create_dir(&d).unwrap();
        std::fs::copy(fixtures.join(format!("{kind}.json")), d.join("result.json")).unwrap();
        inputs.push(d);
    }
    let page = dir.path().join("page.html");
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    drawn(&report(&inputs, &page, &[], None));
    let html = std::fs::read_to_string(&page).unwrap();
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("{needle} not on the page"))
    };
    let order = [
        "run",
        "consistency",
        "trim",
        "sweep",
        "pts",
        "scan",
        "fanout",
        "replay",
        "health",
    ]
    .map(|kind| at(&format!("<section class=\"kind-{kind}\" id=\"kind-{kind}\">")));
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "sections out of the story's order: {order:?}"
    );
    let toc = at("<nav class=\"toc\">");
    assert!(toc < order[0], "the contents come first");
    assert!(
        html.contains("<li><a href=\"#kind-trim\">"),
        "each section is linked"
    );
    // Time stamps are never broken across lines (a class the style keeps on one line).
    assert!(html.contains("<td class=\"time\">2026-"), "the started column");
    assert!(html.contains("td.time{white-space:nowrap}"));
}
