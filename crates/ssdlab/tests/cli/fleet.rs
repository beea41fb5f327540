//! The fleet story (docs/fleet.md) run on the real tools from Debian: the alert rules under `promtool`, the
//! systemd units under `systemd-analyze`, the Ansible play applied into a scratch root, and a real
//! node_exporter serving ssdlab's .prom files to a real Prometheus that loads the rules and fires an alert.
//! Every daemon is stopped by PID when its guard drops, even when a test fails.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::*;

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist")
}

/// Runs a tool, returning (success, stdout and stderr together).
fn tool_in(dir: &Path, name: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(name)
        .args(args)
        .current_dir(dir)
        .env("ANSIBLE_NOCOLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("{name} runs (scripts/test.sh installs it): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_alert_rules_load_and_pass_their_unit_tests_and_a_broken_rule_fails_them() {
    let rules = dist().join("prometheus");
    let (ok, text) = tool_in(&rules, "promtool", &["check", "rules", "ssdlab.rules.yml"]);
    assert!(ok && text.contains("7 rules found"), "{text}");
    let (ok, text) = tool_in(&rules, "promtool", &["test", "rules", "ssdlab.rules.test.yml"]);
    assert!(ok && text.contains("SUCCESS"), "{text}");
    // The tests can fail: a rule that fires on a warning instead of a failure, one that forgot its `for:`, and a
    // wear rule that compares the rated life left instead of what is used.
    let original = std::fs::read_to_string(rules.join("ssdlab.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(rules.join("ssdlab.rules.test.yml")).unwrap();
    for (what, broken) in [
        (
            "fires on WARN",
            original.replace("ssdlab_health_verdict == 2", "ssdlab_health_verdict >= 1"),
        ),
        ("no wait", original.replacen("for: 10m", "for: 0s", 1)),
        (
            "wear rule reads what remains as what is used",
            original.replace(
                "(1 - ssdlab_rated_life_remaining_ratio) >= ssdlab_wear_warn_threshold_ratio",
                "ssdlab_rated_life_remaining_ratio >= ssdlab_wear_warn_threshold_ratio",
            ),
        ),
    ] {
        assert_ne!(broken, original, "{what}: the mutation must change the rules");
        let dir = tempdir();
        std::fs::write(dir.path().join("ssdlab.rules.yml"), broken).unwrap();
        std::fs::write(dir.path().join("ssdlab.rules.test.yml"), &tests).unwrap();
        let (ok, text) = tool_in(
            dir.path(),
            "promtool",
            &["test", "rules", "ssdlab.rules.test.yml"],
        );
        assert!(!ok, "the rule tests pass a broken rule ({what}): {text}");
    }
}

#[test]
fn the_units_verify_and_their_timers_schedules_parse() {
    let units = dist().join("systemd");
    let names = [
        "ssdlab-health.service",
        "ssdlab-health.timer",
        "ssdlab-scan.service",
        "ssdlab-scan.timer",
    ];
    let paths: Vec<String> = names.iter().map(|n| format!("./{n}")).collect();
    let mut args = vec!["verify"];
    args.extend(paths.iter().map(String::as_str));
    let (ok, text) = tool_in(&units, "systemd-analyze", &args);
    assert!(ok && text.trim().is_empty(), "systemd-analyze verify: {text}");
    for timer in ["ssdlab-health.timer", "ssdlab-scan.timer"] {
        let unit = std::fs::read_to_string(units.join(timer)).unwrap();
        let schedule = unit
            .lines()
            .find_map(|l| l.strip_prefix("OnCalendar="))
            .unwrap_or_else(|| panic!("{timer} has no OnCalendar"));
        let (ok, text) = tool_in(&units, "systemd-analyze", &["calendar", schedule]);
        assert!(ok && text.contains("Next elapse"), "{timer}: {text}");
    }
    // The check can fail: a misspelt key and a missing program are reported.
    let dir = tempdir();
    let broken = std::fs::read_to_string(units.join("ssdlab-health.service"))
        .unwrap()
        .replace("Nice=10", "Nyce=10");
    std::fs::write(dir.path().join("ssdlab-health.service"), broken).unwrap();
    let (_, text) = tool_in(
        dir.path(),
        "systemd-analyze",
        &["verify", "./ssdlab-health.service"],
    );
    assert!(
        text.contains("Nyce"),
        "systemd-analyze missed a misspelt key: {text}"
    );
}

#[test]
fn the_ansible_play_installs_into_a_scratch_root_and_changes_nothing_the_second_time() {
    let play = dist().join("ansible/ssdlab.yml");
    let play = play.to_str().unwrap();
    let (ok, text) = tool_in(
        Path::new("/"),
        "ansible-playbook",
        &["--syntax-check", "-i", "localhost,", play],
    );
    assert!(ok, "{text}");
    // The play that gathers a fan-out's results from every host (docs/fleet.md).
    let gather = dist().join("ansible/fanout.yml");
    let (ok, text) = tool_in(
        Path::new("/"),
        "ansible-playbook",
        &["--syntax-check", "-i", "localhost,", gather.to_str().unwrap()],
    );
    assert!(ok, "{text}");
    let root = tempdir();
    let vars = serde_json::json!({
        "ssdlab_hosts": "localhost",
        "ssdlab_root": root.path(),
        "ssdlab_binary": env!("CARGO_BIN_EXE_ssdlab"),
        "ssdlab_scan_paths": "/srv/a /srv/b",
        "ssdlab_textfile_dir": "/var/lib/node-textfiles",
    })
    .to_string();
    let apply = |extra: &[&str]| {
        let mut args = vec!["-c", "local", "-i", "localhost,", "-e", vars.as_str()];
        args.extend(extra);
        args.push(play);
        tool_in(Path::new("/"), "ansible-playbook", &args)
    };
    let (ok, text) = apply(&[]);
    assert!(ok && text.contains("failed=0"), "{text}");
    let mode = |rel: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(root.path().join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}\n{text}"))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("usr/local/bin/ssdlab"), 0o755);
    for unit in [
        "ssdlab-health.service",
        "ssdlab-health.timer",
        "ssdlab-scan.service",
        "ssdlab-scan.timer",
    ] {
        assert_eq!(mode(&format!("etc/systemd/system/{unit}")), 0o644);
        assert_eq!(
            std::fs::read(root.path().join("etc/systemd/system").join(unit)).unwrap(),
            std::fs::read(dist().join("systemd").join(unit)).unwrap(),
            "{unit} installed as shipped"
        );
    }
    let default = std::fs::read_to_string(root.path().join("etc/default/ssdlab")).unwrap();
    assert!(
        default.contains("SSDLAB_SCAN_PATHS=/srv/a /srv/b\n")
            && default.contains("SSDLAB_TEXTFILE_DIR=/var/lib/node-textfiles\n"),
        "{default}"
    );
    assert!(root.path().join("var/lib/node-textfiles").is_dir());
    // Applied again in check mode, it would change nothing; changing the scan paths would change one file.
    let (ok, text) = apply(&["--check", "--diff"]);
    assert!(ok && text.contains("changed=0"), "{text}");
    std::fs::write(
        root.path().join("etc/default/ssdlab"),
        "SSDLAB_SCAN_PATHS=/elsewhere\n",
    )
    .unwrap();
    let (ok, text) = apply(&["--check", "--diff"]);
    assert!(
        ok && text.contains("changed=1") && text.contains("+SSDLAB_SCAN_PATHS=/srv/a /srv/b"),
        "{text}"
    );
}

fn spawn(program: &str, args: &[String]) -> Killed {
    Killed(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} starts (scripts/test.sh installs it): {e}")),
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET over HTTP/1.0; the body, or None while the server is not up.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// Polls `f` until it returns Some, for at most `limit`.
fn within<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn prometheus_scrapes_ssdlabs_textfiles_through_node_exporter_and_the_failing_drive_alert_fires() {
    let dir = tempdir();
    let textfiles = dir.path().join("textfiles");
    std::fs::create_dir(&textfiles).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ssdlab-health/tests/fixtures");
    let failing = fixtures.join("real/nvme-samsung-pm1725a-3.2t-failed.json");
    let healthy = fixtures.join("ata-samsung-840evo-1t.json");
    let health_prom = textfiles.join("ssdlab-health.prom");
    let out = run(&[
        "health",
        "--from",
        failing.to_str().unwrap(),
        "--from",
        healthy.to_str().unwrap(),
        "--history",
        dir.path().join("history").to_str().unwrap(),
        "--prom",
        health_prom.to_str().unwrap(),
    ]);
    assert!(health_prom.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let scan_prom = textfiles.join("ssdlab-scan.prom");
    let out = run(&[
        "scan",
        "--device",
        "sim:840evo-250g?scale=1/256",
        "--prom",
        scan_prom.to_str().unwrap(),
    ]);
    assert!(scan_prom.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    // A fan-out over a drive with fresh data and one with data seven months old.
    let (fresh, old) = (
        "sim:840evo-1t?scale=1/1024&fill=100%&age=1mo",
        "sim:840evo-1t?scale=1/1024&fill=100%&age=7mo",
    );
    let fanout_prom = textfiles.join("ssdlab-fanout.prom");
    let out = run(&[
        "fanout",
        "--target",
        fresh,
        "--target",
        old,
        "--runtime",
        "2s",
        "--prom",
        fanout_prom.to_str().unwrap(),
    ]);
    assert!(fanout_prom.exists(), "{}", String::from_utf8_lossy(&out.stderr));

    let exporter_port = free_port();
    let _exporter = spawn(
        "prometheus-node-exporter",
        &[
            format!("--web.listen-address=127.0.0.1:{exporter_port}"),
            "--collector.disable-defaults".into(),
            "--collector.textfile".into(),
            format!("--collector.textfile.directory={}", textfiles.display()),
        ],
    );
    let metrics = within(
        Duration::from_secs(30),
        "node_exporter serves the textfiles",
        || http_get(exporter_port, "/metrics").filter(|m| m.contains("ssdlab_health_verdict")),
    );
    // node_exporter read both files without complaint (a malformed one sets its error gauge to 1).
    assert!(metrics.contains("node_textfile_scrape_error 0"), "{metrics}");
    assert!(metrics.contains("ssdlab_region_scan_read_bytes_per_second"));
    assert!(metrics.contains("ssdlab_fanout_read_duration_seconds_bucket"));

    // The shipped rules load as they are; a copy with every `for:` cut to a second shows firing within the test.
    let rules = std::fs::read_to_string(dist().join("prometheus/ssdlab.rules.yml")).unwrap();
    std::fs::write(dir.path().join("shipped.rules.yml"), &rules).unwrap();
    let quick: String = rules
        .replace("name: ssdlab\n", "name: ssdlab-quick\n")
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("for: ") {
                format!("{}for: 1s", &l[..l.len() - l.trim_start().len()])
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("quick.rules.yml"), quick).unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\n\
         scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n",
        dir.path().join("shipped.rules.yml").display(),
        dir.path().join("quick.rules.yml").display()
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let prometheus_port = free_port();
    let _prometheus = spawn(
        "prometheus",
        &[
            format!("--config.file={}", dir.path().join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()),
            format!("--web.listen-address=127.0.0.1:{prometheus_port}"),
        ],
    );
    within(Duration::from_secs(60), "Prometheus loads the rules", || {
        http_get(prometheus_port, "/api/v1/rules").filter(|r| r.contains("ssdlab-quick"))
    });

    // The metrics are queryable through the HTTP API, with the drive's labels.
    let verdicts = within(Duration::from_secs(60), "the verdicts are scraped", || {
        http_get(prometheus_port, "/api/v1/query?query=ssdlab_health_verdict")
            .filter(|r| r.matches("\"__name__\"").count() == 2)
    });
    let verdicts: serde_json::Value = serde_json::from_str(&verdicts).unwrap();
    let failing_series = verdicts["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["value"][1] == "2")
        .unwrap_or_else(|| panic!("no failing verdict in {verdicts}"));
    assert_eq!(failing_series["metric"]["model"], "SAMSUNG MZWLL3T2HAJQ-00005");

    // PromQL ranks the drives by p99 from the exported buckets: the old drive first.
    let query =
        "/api/v1/query?query=topk(1,histogram_quantile(0.99,ssdlab_fanout_read_duration_seconds_bucket))";
    let ranked = within(
        Duration::from_secs(60),
        "PromQL ranks the fan-out's drives",
        || {
            http_get(
                prometheus_port,
                &query.replace(',', "%2C").replace('(', "%28").replace(')', "%29"),
            )
            .filter(|r| r.contains("\"result\":[{"))
        },
    );
    let ranked: serde_json::Value = serde_json::from_str(&ranked).unwrap();
    let slowest = &ranked["data"]["result"][0];
    assert_eq!(slowest["metric"]["target"], old, "{ranked}");
    let p99_s: f64 = slowest["value"][1].as_str().unwrap().parse().unwrap();
    println!("PromQL's p99 of the slowest drive: {p99_s} s");

    // The failing drive's alert fires (from the quick copy), on that drive and not the healthy one.
    let alerts = within(Duration::from_secs(60), "SsdlabDriveFailing fires", || {
        let body = http_get(prometheus_port, "/api/v1/alerts")?;
        let parsed: serde_json::Value = serde_json::from_str(&body).ok()?;
        let firing: Vec<serde_json::Value> = parsed["data"]["alerts"]
            .as_array()?
            .iter()
            .filter(|a| a["labels"]["alertname"] == "SsdlabDriveFailing" && a["state"] == "firing")
            .cloned()
            .collect();
        (!firing.is_empty()).then_some(firing)
    });
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let alert = &alerts[0];
    assert_eq!(alert["labels"]["severity"], "critical");
    assert_eq!(alert["labels"]["device"], failing.to_str().unwrap());
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("SAMSUNG MZWLL3T2HAJQ-00005") && summary.contains("is failing"),
        "{summary}"
    );
    // The shipped rules were evaluated too, without error, and keep their waits.
    let rules_loaded = within(Duration::from_secs(60), "the shipped rules are evaluated", || {
        http_get(prometheus_port, "/api/v1/rules")
            .filter(|r| r.contains("ssdlab-quick") && !r.contains("\"health\":\"unknown\""))
    });
    let rules_loaded: serde_json::Value = serde_json::from_str(&rules_loaded).unwrap();
    let groups = rules_loaded["data"]["groups"].as_array().unwrap();
    let shipped = groups
        .iter()
        .find(|g| g["name"] == "ssdlab")
        .expect("the shipped group");
    assert_eq!(shipped["rules"].as_array().unwrap().len(), 7, "{shipped}");
    assert!(
        shipped["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["health"] == "ok" && r["duration"].as_f64().unwrap() >= 600.0),
        "every shipped alert evaluates without error and waits at least ten minutes: {shipped}"
    );

    // For the record (the closing note quotes it).
    println!("firing alert as Prometheus's API returned it: {alert}");
}

/// No cluster here: the DaemonSet is parsed (PyYAML, which ansible-core brings) and its promises checked.
#[test]
fn the_daemonset_parses_and_writes_where_node_exporter_reads() {
    const CHECK: &str = r#"
import sys, yaml
(d,) = list(yaml.safe_load_all(open(sys.argv[1])))
pod = d["spec"]["template"]["spec"]
c = pod["containers"][0]
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
print(d["kind"], c["securityContext"]["privileged"], paths[[k for k, v in mounts.items() if v == "/textfile"][0]],
      "--prom /textfile/" in c["args"][0], "--history /state/" in c["args"][0])
"#;
    let manifest = dist().join("kubernetes/daemonset.yaml");
    let (ok, text) = tool_in(
        Path::new("/"),
        "/usr/bin/python3",
        &["-c", CHECK, manifest.to_str().unwrap()],
    );
    assert!(ok, "{text}");
    assert_eq!(
        text.trim(),
        "DaemonSet True /var/lib/prometheus/node-exporter True True"
    );
}
