//! The report, checked in a real browser (headless Chromium) and against the XML parser. What the report draws
//! from null and virtual-drive results, without a browser, is tested in-process in
//! `crates/ssdlab-app/tests/report_pages.rs`.

use crate::*;

#[test]
fn the_report_renders_in_headless_chromium_with_axes_labels_and_points() {
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
    let browser = |extra: &[&str]| chromium(&page, &profile, extra);
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
    // Each result's latency in fio's buckets, as `lat (usec): ...` lines read.
    assert!(
        html.contains("operations in fio&#39;s range up to")
            || html.contains("operations in fio's range up to")
    );
    // The section opens with what differs between the two (the target here), and ranks the headline figures,
    // best first: IOPS from the highest, latency from the lowest.
    let differs = &html[html
        .find("<table class=\"differs\">")
        .expect("the options that differ")..];
    let differs = &differs[..differs.find("</table>").unwrap()];
    assert!(
        differs.contains("<td>target</td>")
            && differs.contains("sim:840evo-250g?scale=1/256")
            && differs.contains("sim:enterprise-mlc-400g?scale=1/256"),
        "{differs}"
    );
    let ranked = |title: &str| -> Vec<f64> {
        let chart = &html[html.find(title).unwrap_or_else(|| panic!("no '{title}' chart"))..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        chart
            .split("<g class=\"bar\"")
            .skip(1)
            .map(|bar| {
                // The bar's value is its last text; figures read as "12345" or "81.2 us".
                let bar = &bar[..bar.find("</g>").unwrap()];
                let text = &bar[..bar.rfind("</text>").unwrap()];
                let value = &text[text.rfind('>').unwrap() + 1..];
                let (number, unit) = value.split_once(' ').unwrap_or((value, ""));
                let scale = match unit {
                    "ns" => 1e-3,
                    "ms" => 1e3,
                    "s" => 1e6,
                    _ => 1.0,
                };
                number.parse::<f64>().unwrap_or_else(|_| panic!("{value}")) * scale
            })
            .collect()
    };
    let iops = ranked("IOPS, ranked (higher is better)");
    assert_eq!(iops.len(), 2);
    assert!(iops[0] >= iops[1], "{iops:?}");
    let mean = ranked("mean latency, ranked (lower is better)");
    assert!(mean.len() == 2 && mean[0] <= mean[1], "{mean:?}");
    let (laid_out, problems) = chart_layout(&page, &dir.path().join("profile"), "");
    assert!(laid_out >= 7, "{laid_out} charts");
    assert!(problems.is_empty(), "{problems:#?}");
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

/// The numbers in `attr="..."` for every occurrence of `attr` in `text`.
fn attribute_values(text: &str, attr: &str) -> Vec<f64> {
    let needle = format!(" {attr}=\"");
    text.match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &text[at + needle.len()..];
            rest[..rest.find('"')?].parse().ok()
        })
        .collect()
}

#[test]
fn every_chart_kind_renders_with_ticks_on_both_axes_and_its_legend_below_the_data() {
    let dir = tempdir();
    let sim = "sim:840evo-120g?scale=1/256";
    let trace = dir.path().join("light.iolog");
    expect_code(
        &run(&[
            "trace",
            "synth",
            "--profile",
            "light",
            "--duration",
            "5s",
            "--out",
            trace.to_str().unwrap(),
        ]),
        0,
    );
    let trace = trace.to_str().unwrap().to_string();
    // One small result of every kind that draws line/dot charts (bars and heat maps have their own tests).
    let kinds: Vec<(&str, Vec<&str>)> = vec![
        (
            "run",
            vec!["run", "--target", sim, "--rw", "randrw", "--runtime", "3s"],
        ),
        (
            "consistency",
            // The 250 GB drive's 66K plateau is past the linear chart's fixed 40K.
            vec![
                "test",
                "consistency",
                "--target",
                "sim:840evo-250g?scale=1/64",
                "--runtime",
                "360s",
            ],
        ),
        (
            "trim",
            vec![
                "test",
                "trim",
                "--target",
                sim,
                "--torture",
                "30s",
                "--measure",
                "5s",
            ],
        ),
        (
            "sweep",
            vec![
                "test",
                "sweep",
                "--target",
                sim,
                "--test-size",
                "64m",
                "--from",
                "4k",
                "--to",
                "1m",
                "--size-runtime",
                "200ms",
            ],
        ),
        (
            "sweep-qd",
            vec![
                "test",
                "sweep",
                "--target",
                sim,
                "--axis",
                "qd",
                "--max-qd",
                "8",
                "--test-size",
                "64m",
                "--size-runtime",
                "200ms",
            ],
        ),
        (
            "sweep-mix",
            vec![
                "test",
                "sweep",
                "--target",
                sim,
                "--axis",
                "mix",
                "--test-size",
                "64m",
                "--size-runtime",
                "200ms",
            ],
        ),
        (
            "latency",
            vec![
                "test",
                "latency",
                "--target",
                sim,
                "--span",
                "64m",
                "--runtime",
                "2s",
            ],
        ),
        (
            "pts",
            vec![
                "test",
                "pts",
                "--target",
                sim,
                "--test",
                "throughput",
                "--round-time",
                "200ms",
            ],
        ),
        (
            "replay",
            vec!["test", "replay", "--target", sim, "--trace", &trace],
        ),
        (
            "scan",
            vec![
                "scan",
                "--target",
                "sim:840evo-1t?scale=1/256",
                "--dataset",
                "field-report",
            ],
        ),
        (
            "fanout",
            vec!["fanout", "--fleet", "field-report", "--runtime", "2s"],
        ),
    ];
    let mut dirs = Vec::new();
    for (name, args) in &kinds {
        let out_dir = dir.path().join(name);
        let mut args = args.clone();
        args.extend(["--out", out_dir.to_str().unwrap()]);
        let out = run(&args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: {}",
            stderr(&out)
        );
        dirs.push(out_dir);
    }
    // Every chart of every result is also a standalone SVG file in its charts/, as many as its page draws, each
    // well-formed XML that opens on its own.
    let mut svg_files = Vec::new();
    for out_dir in &dirs {
        let page = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
        let drawn = page.matches("<svg class=\"chart").count();
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(out_dir.join("charts"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        files.sort();
        assert_eq!(files.len(), drawn, "{}: {files:?}", out_dir.display());
        svg_files.extend(files);
    }
    assert!(svg_files.len() >= 30, "{} chart files", svg_files.len());
    let parsed = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as ET\nfor f in sys.argv[1:]: ET.parse(f)",
        ])
        .args(&svg_files)
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let standalone = dir.path().join("standalone.png");
    let shot = chromium(
        &svg_files[0],
        &dir.path().join("profile-svg"),
        &[
            &format!("--screenshot={}", standalone.display()),
            "--window-size=800,420",
        ],
    );
    assert!(shot.status.success());
    let png = std::fs::read(&standalone).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    // Writing a result again (--replace) replaces the charts ssdlab wrote there (its manifest lists them) and
    // leaves anything else in charts/ alone: a numbered SVG of someone else's, and a copy of one of ssdlab's
    // (another file than the one it wrote) included.
    let charts = dirs[0].join("charts");
    std::fs::copy(&svg_files[0], charts.join("99-from-an-older-run.svg")).unwrap();
    std::fs::write(charts.join("01-mine.svg"), "<svg/>").unwrap();
    std::fs::write(charts.join("notes.txt"), "mine").unwrap();
    expect_code(
        &run(&[
            "run",
            "--target",
            sim,
            "--rw",
            "randrw",
            "--runtime",
            "1s",
            "--out",
            dirs[0].to_str().unwrap(),
            "--replace",
        ]),
        0,
    );
    assert!(charts.join("99-from-an-older-run.svg").exists());
    assert_eq!(std::fs::read_to_string(charts.join("notes.txt")).unwrap(), "mine");
    assert_eq!(
        std::fs::read_to_string(charts.join("01-mine.svg")).unwrap(),
        "<svg/>"
    );
    // A charts/ that is not a directory costs the charts, with a warning, never the result.
    let odd = dir.path().join("odd");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::write(odd.join("charts"), "a file").unwrap();
    // Filled: reads of a fresh virtual drive's unmapped blocks are not a trusted measurement.
    let filled = format!("{sim}&fill=100%");
    let out = run(&[
        "run",
        "--target",
        &filled,
        "--runtime",
        "1s",
        "--out",
        odd.to_str().unwrap(),
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("charts were not written"),
        "{}",
        stderr(&out)
    );
    assert!(odd.join("result.json").exists() && odd.join("report.html").exists());
    let page = dir.path().join("all.html");
    let mut args = vec!["report".to_string()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap().to_string()));
    args.extend(["--out".into(), page.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    expect_code(&run(&args), 0);
    let profile = dir.path().join("profile");
    let browse = |extra: &[&str]| chromium(&page, &profile, extra);
    let dom = browse(&["--dump-dom"]);
    assert!(dom.status.success());
    let dom = String::from_utf8(dom.stdout).unwrap();
    // The results ran on two virtual drives: the header's rows name them briefly, and each one's description is
    // said once below the table, not on every row (issue 49).
    let summary = &dom[dom.find("<table class=\"summary\"").unwrap()..];
    let summary = &summary[..summary.find("</table>").unwrap()];
    assert!(
        summary.contains(">virtual 840evo-120g<") && summary.contains(">virtual 840evo-250g<"),
        "{summary}"
    );
    assert!(!summary.contains("TurboWrite"), "{summary}");
    let devices = &dom[dom.find("<dl class=\"devices\">").unwrap()..];
    let devices = &devices[..devices.find("</dl>").unwrap()];
    assert_eq!(devices.matches("TurboWrite").count(), 2, "{devices}");
    // Every section opens with what was done and what to look for, before its first table or chart (issue 49).
    let sections: Vec<&str> = dom.split("<section class=\"kind-").skip(1).collect();
    assert!(sections.len() >= 8, "{} sections", sections.len());
    for section in &sections {
        let story = section.find("<p class=\"story\">").unwrap_or(usize::MAX);
        let first = [section.find("<table"), section.find("<svg")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(usize::MAX);
        assert!(
            story < first && section[story..].len() > 100,
            "{}",
            &section[..200.min(section.len())]
        );
    }
    let charts: Vec<&str> = dom
        .split("<svg class=\"chart\"")
        .skip(1)
        .map(|c| &c[..c.find("</svg>").unwrap()])
        .collect();
    assert!(charts.len() >= 25, "{} charts", charts.len());
    // Every chart kind the page holds (by title), with its ticks and legend checked.
    let mut titles = Vec::new();
    for chart in &charts {
        let title_at = chart.find("class=\"title\"").unwrap();
        let title = &chart[title_at..];
        let title = &title[title.find('>').unwrap() + 1..title.find('<').unwrap()];
        titles.push(title.to_string());
        let axis = |class: &str| {
            let at = chart
                .find(&format!("class=\"axis {class}\""))
                .unwrap_or_else(|| panic!("{title}: no {class}"));
            let group = &chart[at..];
            group[..group.find("</g>").unwrap()]
                .matches("class=\"tick\"")
                .count()
        };
        assert!(axis("x-axis") >= 2, "{title}: fewer than two x ticks");
        assert!(axis("y-axis") >= 2, "{title}: fewer than two y ticks");
        // The plot is 34..308 (user units); data drawn inside it, the legend below the axis label.
        let plot_bottom = 308.0;
        for (at, _) in chart.match_indices("<g class=\"legend\">") {
            let legend = &chart[at..];
            let legend = &legend[..legend.find("</g>").unwrap()];
            for y in attribute_values(legend, "y")
                .into_iter()
                .chain(attribute_values(legend, "y1"))
            {
                assert!(
                    y > plot_bottom + 40.0,
                    "{title}: a legend entry at y {y} is over the plot"
                );
            }
        }
        let data_ys: Vec<f64> = attribute_values(chart, "cy");
        assert!(
            data_ys.iter().all(|&y| y <= plot_bottom + 0.5),
            "{title}: a point below the plot"
        );
    }
    for kind in [
        "IOPS over the whole run",
        "SNIA PTS steady state",
        "Sequential 128 KiB writes",
        "Sequential throughput by transfer size",
        "IOPS by queue depth",
        "latency by queue depth",
        "by share of reads",
        "Mean latency per second",
        "Steady-state convergence",
        "Data moved per second",
        "Latency CDF",
        "Latency tail",
    ] {
        assert!(
            titles.iter().any(|t| t.contains(kind)),
            "no chart titled '{kind}' in {titles:?}"
        );
    }
    // A point clipped by a fixed range is marked: the 840 EVO's 66K plateau is past the linear chart's 40K.
    let linear = charts
        .iter()
        .find(|c| c.contains("IOPS, linear scale up to 40K"))
        .expect("the linear consistency chart");
    assert!(linear.contains("class=\"clipped\""), "no clipped-point marker");
    // The latency histogram: a column chart with a y axis of ticks and a name under every bucket.
    let histogram = dom
        .split("<svg class=\"chart columns\"")
        .nth(1)
        .map(|c| &c[..c.find("</svg>").unwrap()])
        .expect("a latency histogram");
    assert!(histogram.contains("Latency histogram"));
    let y_axis = &histogram[histogram.find("class=\"axis y-axis\"").unwrap()..];
    assert!(
        y_axis[..y_axis.find("</g>").unwrap()]
            .matches("class=\"tick\"")
            .count()
            >= 2
    );
    let x_axis = &histogram[histogram.find("class=\"axis x-axis\"").unwrap()..];
    let buckets = x_axis[..x_axis.find("</g>").unwrap()]
        .matches("class=\"tick\"")
        .count();
    assert!(buckets >= 2, "{buckets} bucket names");
    assert!(histogram.matches("class=\"column\"").count() >= buckets);
    // Laid out by the browser with its real fonts: no legend entry over another or over the data, no text cut
    // off; and the check is shown to catch both on a chart built to break them.
    let (laid_out, problems) = chart_layout(&page, &profile, KNOWN_BAD_CHART);
    assert!(laid_out > charts.len(), "{laid_out} charts measured");
    let (caught, real): (Vec<String>, Vec<String>) =
        problems.into_iter().partition(|p| p.starts_with("known bad: "));
    assert!(real.is_empty(), "{real:#?}");
    for expected in [
        "legend entry 0 covers data",
        "legend entries 0 and 1 overlap",
        "text 'cut' is cut off",
        "text 'slanted past the bottom' is cut off",
        "tick 'tiny' is drawn at",
    ] {
        assert!(
            caught.iter().any(|p| p.contains(expected)),
            "{expected}: {caught:?}"
        );
    }
    // And as it prints: every table within the paper's width, no column lost (issue 49).
    let (printed, problems) = print_layout(&page, &profile);
    assert_eq!(printed, laid_out - 1, "every chart but the known-bad one");
    assert!(problems.is_empty(), "{problems:#?}");
    // And the page as a browser draws it.
    let shot = dir.path().join("all.png");
    let shot_run = browse(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,6000",
    ]);
    assert!(shot_run.status.success());
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 100_000,
        "a real rendering: {} bytes",
        png.len()
    );
}

/// fio-plot users read a mixed workload a direction at a time: `run --rw randrw` keeps each direction's rate and
/// latency per second in result.json and samples.csv, and the page tables and draws them apart.
#[test]
fn a_mixed_run_keeps_each_direction_per_second_in_its_csv_and_page() {
    let dir = tempdir();
    let out_dir = dir.path().join("mixed");
    expect_code(
        &run(&[
            "run",
            "--target",
            "sim:840evo-120g?scale=1/256",
            "--rw",
            "randrw",
            "--mix",
            "70",
            "--qd",
            "1",
            "--runtime",
            "3s",
            "--out",
            out_dir.to_str().unwrap(),
        ]),
        0,
    );
    let csv = std::fs::read_to_string(out_dir.join("samples.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name} in {header:?}"))
    };
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{csv}");
    for row in &rows {
        let (read, write) = (row[column("read_iops")], row[column("write_iops")]);
        assert!(read > 0.0 && write > 0.0, "{csv}");
        // The split adds up to the combined figure, and a 70% mix reads more than it writes.
        assert!((read + write - row[column("iops")]).abs() < 1.0, "{csv}");
        assert!(read > 1.5 * write, "{csv}");
        let bytes = row[column("read_bytes_per_s")] + row[column("write_bytes_per_s")];
        assert!((bytes - row[column("bytes_per_s")]).abs() < 1.0, "{csv}");
        // At QD1 the fresh virtual drive answers a read of a block never written at once and a write after
        // its firmware's work: the directions' means differ severalfold, and the combined mean lies between.
        let (r, w) = (
            row[column("read_latency_ns_mean")],
            row[column("write_latency_ns_mean")],
        );
        assert!(r > 0.0 && w > 2.0 * r, "{csv}");
        let mean = row[column("latency_ns_mean")];
        assert!(r < mean && mean < w, "{csv}");
        let (r99, w99) = (
            row[column("read_latency_ns_p99")],
            row[column("write_latency_ns_p99")],
        );
        assert!(row[column("latency_ns_max")] >= r99.max(w99), "{csv}");
    }
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("result.json")).unwrap()).unwrap();
    let sample = &result["phases"][0]["samples"][0];
    assert!(
        sample["read"]["latency_ns"]["p99"].as_u64().unwrap() > 0,
        "{sample}"
    );
    assert!(sample["write"]["bytes_per_s"].as_f64().unwrap() > 0.0, "{sample}");
    let page = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    for row in ["1/256 read</td>", "1/256 write</td>", "1/256 total</td>"] {
        assert!(page.contains(row), "no row {row} in the page");
    }
    // A run of one direction keeps the combined figures only: its CSV's direction cells are empty.
    let single = dir.path().join("single");
    expect_code(
        &run(&[
            "run",
            "--target",
            "null",
            "--runtime",
            "1s",
            "--out",
            single.to_str().unwrap(),
        ]),
        0,
    );
    let csv = std::fs::read_to_string(single.join("samples.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().ends_with(",,,,,,,,,,,,"), "{csv}");
}
