//! Every input bounded and no result lost (issue #28): closed output channels, hostile sizes and files, each a
//! test that failed before its fix.

use crate::*;

/// Runs ssdlab with stderr going to a pipe whose reader is already gone, and returns the exit code.
fn with_stderr_closed(args: &[&str]) -> Option<i32> {
    let mut child = ssdlab()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    child.wait().unwrap().code()
}

/// #28 defect 1: a closed stderr never costs a result: result.json is written and the exit code is the one the
/// command has with stderr open.
#[test]
fn a_closed_stderr_never_costs_a_result() {
    let dir = tempdir();
    let cases: Vec<(Vec<String>, i32)> = vec![
        (
            vec!["run", "--target", "null", "--runtime", "1s"]
                .into_iter()
                .map(String::from)
                .collect(),
            0,
        ),
        (
            vec![
                "test",
                "trim",
                "--target",
                "sim:840evo-250g?scale=1/256",
                "--torture",
                "5s",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            1,
        ),
        (
            // The field report's fleet after every drive's data is rewritten: no drive or cohort makes the
            // query slow, exit 0 (before it, its old cohort is a finding).
            vec![
                "fanout",
                "--fleet",
                "field-report",
                "--refresh-all",
                "--runtime",
                "2s",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            0,
        ),
    ];
    for (i, (args, _)) in cases.iter().enumerate() {
        let open_dir = dir.path().join(format!("open{i}"));
        let closed_dir = dir.path().join(format!("closed{i}"));
        let mut open_args: Vec<&str> = args.iter().map(String::as_str).collect();
        open_args.extend(["--out", open_dir.to_str().unwrap()]);
        let open = run(&open_args);
        let mut closed_args: Vec<&str> = args.iter().map(String::as_str).collect();
        closed_args.extend(["--out", closed_dir.to_str().unwrap()]);
        let code = with_stderr_closed(&closed_args);
        assert_eq!(
            code,
            open.status.code(),
            "{args:?}: the same exit code as with stderr open"
        );
        assert!(
            closed_dir.join("result.json").is_file(),
            "{args:?}: the result was written"
        );
    }
    // The codes themselves, so the comparison above is not between two crashes.
    for (args, code) in &cases {
        let out_dir = dir.path().join("again");
        let _ = std::fs::remove_dir_all(&out_dir);
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["--out", out_dir.to_str().unwrap()]);
        assert_eq!(run(&a).status.code(), Some(*code), "{args:?}");
    }
}
