//! The report, checked in a real browser.

use crate::*;

#[test]
fn the_report_renders_in_headless_chromium_with_axes_labels_and_points() {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("Chromium is needed for the report test (apt-get install chromium; .ci/run installs it)");
    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, op) in [(&a, "0"), (&b, "25")] {
        let out = run(&[
            "test",
            "consistency",
            "--target",
            "sim:840evo-250g?scale=1/256",
            "--runtime",
            "600s",
            "--op",
            op,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "{}",
            stderr(&out)
        );
    }
    let page = dir.path().join("both.html");
    expect_code(
        &run(&[
            "report",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ]),
        0,
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("src=") && !html.contains("<link"),
        "self-contained"
    );

    let profile = dir.path().join("profile");
    let browser = |extra: &[&str]| {
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
            ])
            .args([
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap()
    };
    let dom = browser(&["--dump-dom"]);
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8(dom.stdout).unwrap();
    let charts: Vec<&str> = dom.split("<svg class=\"chart\"").skip(1).collect();
    assert_eq!(
        charts.len(),
        7,
        "the consistency section draws five charts, and the latency CDF and tail"
    );
    let (consistency, rest) = charts.split_at(4);
    let (snia, distribution) = rest.split_at(1);
    // The SNIA view: each result's round means, its window shaded as a band, and the fitted line.
    assert_eq!(snia[0].matches("<rect class=\"band\"").count(), 2, "{}", snia[0]);
    assert!(snia[0].contains("least-squares fit") && snia[0].contains("<circle class=\"point\""));
    for chart in distribution {
        assert_eq!(
            chart.matches("<g class=\"series\"").count(),
            2,
            "both results' distributions"
        );
        assert!(chart.contains("<polyline"), "drawn as lines");
    }
    for chart in consistency {
        assert!(
            chart.contains("class=\"axis x-axis\"") && chart.contains("class=\"axis y-axis\""),
            "axes"
        );
        assert!(
            chart.contains("class=\"label\"") && chart.contains("class=\"tick\""),
            "axis labels and ticks"
        );
        assert_eq!(
            chart.matches("<g class=\"series\"").count(),
            2,
            "both results are overlaid"
        );
        assert!(chart.contains("<circle class=\"point\""), "plotted points");
    }
    assert!(dom.contains("25% OP") && dom.contains("SNIA PTS steady state"));
    let shot = dir.path().join("page.png");
    let shot_run = browser(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,2000",
    ]);
    assert!(shot_run.status.success());
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a real rendering, not a blank page"
    );
}

/// #14 defect 3: any value in a result is drawn in bounded time and memory.
#[test]
fn the_report_draws_absurd_values_at_once() {
    let dir = tempdir();
    let out_dir = dir.path().join("r");
    expect_code(
        &run(&[
            "run",
            "--target",
            "null:64m",
            "--runtime",
            "2s",
            "--out",
            out_dir.to_str().unwrap(),
        ]),
        0,
    );
    let mut result = read_result(&out_dir);
    // Every second at -1e20 IOPS: a flat series whose span the old tick generator could not step through.
    for sample in result["phases"][0]["samples"].as_array_mut().unwrap() {
        sample["iops"] = serde_json::json!(-1e20);
        sample["latency_ns_p99"] = serde_json::json!(u64::MAX);
    }
    std::fs::write(out_dir.join("result.json"), result.to_string()).unwrap();
    let started = std::time::Instant::now();
    let page = dir.path().join("page.html");
    // Under timeout(1): a hang fails the test instead of holding the suite.
    let out = Command::new("timeout")
        .args(["20", env!("CARGO_BIN_EXE_ssdlab"), "report"])
        .args([out_dir.to_str().unwrap(), "--out", page.to_str().unwrap()])
        .output()
        .unwrap();
    expect_code(&out, 0);
    assert!(started.elapsed().as_secs() < 10);
    assert!(std::fs::metadata(&page).unwrap().len() < 1 << 20);
}

#[test]
fn rapid_style_comparison_shows_cache_ratios_and_sweeps_side_by_side() {
    let dir = tempdir();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let drive = "sim:840evo-250g?scale=1/64";
    let cached = format!("cached:{drive}&size=64m");
    for (target, name) in [(drive, "lat-plain"), (cached.as_str(), "lat-cached")] {
        let o = run(&[
            "test",
            "latency",
            "--target",
            target,
            "--span",
            "1g",
            "--runtime",
            "3s",
            "--out",
            &out(name),
        ]);
        expect_code(&o, 0);
    }
    for (size, name) in [("64m", "sweep-64m"), ("16m", "sweep-16m")] {
        let o = run(&[
            "test",
            "sweep",
            "--target",
            drive,
            "--test-size",
            size,
            "--from",
            "4k",
            "--to",
            "64k",
            "--out",
            &out(name),
        ]);
        expect_code(&o, 0);
    }
    let page = out("compare.html");
    let o = run(&[
        "report",
        &out("lat-plain"),
        &out("lat-cached"),
        &out("sweep-64m"),
        &out("sweep-16m"),
        "--out",
        &page,
    ]);
    expect_code(&o, 0);
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
}

#[test]
fn two_runs_on_one_target_get_labels_that_tell_them_apart() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, seed) in [(&a, "1"), (&b, "2")] {
        let run_out = run(&[
            "run",
            "--target",
            "null:16m",
            "--runtime",
            "100ms",
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
        ]);
        expect_code(&run_out, 0);
    }
    let page = dir.path().join("page.html");
    let (a, b, page_s) = (a.to_str().unwrap(), b.to_str().unwrap(), page.to_str().unwrap());
    expect_code(&run(&["report", a, b, "--out", page_s]), 0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("null:16m (workload.seed=1)") && html.contains("null:16m (workload.seed=2)"),
        "{html}"
    );
    expect_code(
        &run(&[
            "report", a, b, "--label", "before", "--label", "after", "--out", page_s,
        ]),
        0,
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<th>before</th>") && html.contains("<th>after</th>"));
    expect_usage_error(
        &run(&["report", a, b, "--label", "one", "--out", page_s]),
        "--label",
    );
}

#[test]
fn a_baseline_sets_every_result_against_it_in_percent() {
    let dir = tempdir();
    let mut dirs = Vec::new();
    // The same QD1 latency test on a slower and a faster virtual drive.
    for (name, target) in [
        ("evo", "sim:840evo-250g?scale=1/256"),
        ("mlc", "sim:enterprise-mlc-400g?scale=1/256"),
    ] {
        let out_dir = dir.path().join(name);
        let out = run(&[
            "test",
            "latency",
            "--target",
            target,
            "--span",
            "64m",
            "--runtime",
            "2s",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        expect_code(&out, 0);
        dirs.push(out_dir);
    }
    let page = dir.path().join("vs.html");
    let out = run(&[
        "report",
        dirs[1].to_str().unwrap(),
        "--baseline",
        dirs[0].to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("(2 results)"), "the baseline is drawn too");
    let html = std::fs::read_to_string(&page).unwrap();
    let table = &html[html.find("Against the baseline").expect("the comparison table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("(baseline)"));
    for figure in ["IOPS", "mean latency", "p99 latency", "maximum latency"] {
        assert!(table.contains(figure), "{figure}");
    }
    // Each figure's change is in percent and marked better or worse.
    let changes = table.matches("%)</td>").count();
    assert_eq!(changes, 4, "{table}");
    assert!(table.contains("class=\"better\"") || table.contains("class=\"worse\""));
    // A baseline among the results is not drawn twice; a missing one is named by its flag.
    let out = run(&[
        "report",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "--baseline",
        dirs[0].to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("(2 results)"));
    let missing = dir.path().join("absent");
    let out = run(&[
        "report",
        dirs[0].to_str().unwrap(),
        "--baseline",
        missing.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    expect_usage_error(&out, "--baseline");
}
