use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;

use super::*;

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn out<'a>(name: &'a str, kind: Kind, bytes: &'a [u8]) -> Output<'a> {
    Output { name, kind, bytes }
}

#[test]
fn a_new_file_is_created_and_ours_is_replaced_but_a_users_file_never() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(&tmp.path().join("a/b")).unwrap();
    dir.write(&[out("result.json", Kind::Result, b"one")], &[])
        .unwrap();
    assert_eq!(dir.status("result.json").unwrap(), Status::Ours(Kind::Result));
    dir.write(&[out("result.json", Kind::Result, b"two!")], &[])
        .unwrap();
    assert_eq!(read(&tmp.path().join("a/b/result.json")), b"two!");

    // A user's file under an output's name: never replaced, and nothing of the batch is written.
    std::fs::write(tmp.path().join("a/b/report.html"), b"MY PAGE").unwrap();
    let err = dir
        .write(
            &[
                out("result.json", Kind::Result, b"three"),
                out("report.html", Kind::Report, b"<html>"),
            ],
            &[],
        )
        .unwrap_err();
    assert!(matches!(err, OutputError::NotOurs { .. }), "{err}");
    assert!(err.to_string().contains("does not name it"), "{err}");
    assert_eq!(read(&tmp.path().join("a/b/report.html")), b"MY PAGE");
    assert_eq!(
        read(&tmp.path().join("a/b/result.json")),
        b"two!",
        "checked for all before any is written"
    );
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("a/b"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".ssdlab-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_edited_or_swapped_file_of_ours_becomes_the_users() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    dir.write(&[out("samples.csv", Kind::Csv, b"a,b\n1,2\n")], &[])
        .unwrap();
    // Edited in place, same length.
    std::fs::write(tmp.path().join("samples.csv"), b"a,b\n3,4\n").unwrap();
    assert!(matches!(dir.status("samples.csv").unwrap(), Status::Theirs(_)));
    assert!(dir.write(&[out("samples.csv", Kind::Csv, b"x")], &[]).is_err());
    // Replaced by another file holding our very bytes: another inode, so not ours either.
    dir.write(&[out("other.csv", Kind::Csv, b"k\n")], &[]).unwrap();
    std::fs::remove_file(tmp.path().join("other.csv")).unwrap();
    std::fs::write(tmp.path().join("other.csv"), b"k\n").unwrap();
    let kept = std::fs::File::open(tmp.path().join("other.csv")).unwrap();
    let status = dir.status("other.csv").unwrap();
    // The inode may be reused by the new file; then the bytes still match, and it is as ours as it ever was.
    assert!(
        matches!(status, Status::Theirs(_) | Status::Ours(Kind::Csv)),
        "{status:?}"
    );
    drop(kept);
    // Another kind under a name of ours is refused.
    dir.write(&[out("page.html", Kind::Report, b"<p>")], &[]).unwrap();
    let err = dir
        .write(&[out("page.html", Kind::Result, b"{}")], &[])
        .unwrap_err();
    assert!(err.to_string().contains("not a result"), "{err}");
}

#[test]
fn symbolic_links_are_never_followed_nor_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
    let err = OutputDir::open(&tmp.path().join("link")).unwrap_err();
    assert!(matches!(err, OutputError::Symlink { .. }), "{err}");
    let err = OutputDir::create(&tmp.path().join("link/new")).unwrap_err();
    assert!(matches!(err, OutputError::Symlink { .. }), "{err}");
    assert!(!real.join("new").exists(), "nothing made through the link");
    let dir = OutputDir::open(&real).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, real.join("metrics.prom")).unwrap();
    assert!(
        dir.write(&[out("metrics.prom", Kind::Prometheus, b"m 1\n")], &[])
            .is_err()
    );
    assert_eq!(read(&victim), b"precious");
    std::os::unix::fs::symlink(tmp.path(), real.join("charts")).unwrap();
    assert!(
        dir.write(&[out("charts/01.svg", Kind::Chart, b"<svg/>")], &[])
            .is_err()
    );
    assert!(!tmp.path().join("01.svg").exists());
}

#[test]
fn pruning_removes_only_stale_files_of_ours_of_the_kinds_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    dir.write(
        &[
            out("charts/01-a.svg", Kind::Chart, b"<svg>a</svg>"),
            out("charts/02-b.svg", Kind::Chart, b"<svg>b</svg>"),
            out("health.prom", Kind::Prometheus, b"h 1\n"),
        ],
        &[],
    )
    .unwrap();
    std::fs::write(tmp.path().join("charts/mine.svg"), b"<svg>mine</svg>").unwrap();
    dir.write(
        &[out("charts/01-a.svg", Kind::Chart, b"<svg>A</svg>")],
        &[Kind::Chart],
    )
    .unwrap();
    assert!(
        !tmp.path().join("charts/02-b.svg").exists(),
        "a stale chart of ours goes"
    );
    assert_eq!(
        read(&tmp.path().join("charts/mine.svg")),
        b"<svg>mine</svg>",
        "the user's stays"
    );
    assert!(tmp.path().join("health.prom").exists(), "another kind stays");
    let removed = dir.remove_ours().unwrap();
    assert_eq!(
        removed,
        vec!["health.prom".to_string(), "charts/01-a.svg".to_string()]
    );
    assert!(tmp.path().join("charts/mine.svg").exists());
}

#[test]
fn appends_go_only_to_a_file_of_ours_and_an_older_ssdlabs_is_taken_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    fn json_lines(b: &[u8]) -> bool {
        b.split(|&c| c == b'\n')
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with(b"{"))
    }
    dir.append("log.jsonl", Kind::Log, b"{\"a\":1}\n", true, json_lines)
        .unwrap();
    dir.append("log.jsonl", Kind::Log, b"{\"a\":2}\n", false, json_lines)
        .unwrap();
    assert_eq!(read(&tmp.path().join("log.jsonl")), b"{\"a\":1}\n{\"a\":2}\n");
    // Compacted to nothing, then appended to again: still ours.
    dir.write(&[out("log.jsonl", Kind::Log, b"")], &[]).unwrap();
    dir.append("log.jsonl", Kind::Log, b"{\"a\":3}\n", true, json_lines)
        .unwrap();
    assert_eq!(dir.status("log.jsonl").unwrap(), Status::Ours(Kind::Log));
    // A user's file is never appended to, even in our format, once the manifest names another version.
    std::fs::remove_file(tmp.path().join("log.jsonl")).unwrap();
    std::fs::write(tmp.path().join("log.jsonl"), b"{\"mine\":1}\n").unwrap();
    let kept = std::fs::File::open(tmp.path().join("log.jsonl")).unwrap();
    let outcome = dir.append("log.jsonl", Kind::Log, b"{\"a\":4}\n", true, json_lines);
    drop(kept);
    if outcome.is_ok() {
        // Only the reuse of the very inode and first line could make it ours; then nothing of theirs was lost.
        panic!("appended to a user's file");
    }
    assert_eq!(read(&tmp.path().join("log.jsonl")), b"{\"mine\":1}\n");
    // A directory from before manifests: the older file in our format is taken on; anything else is refused.
    let old = tempfile::tempdir().unwrap();
    std::fs::write(old.path().join("refreshed.jsonl"), b"{\"old\":1}\n").unwrap();
    std::fs::write(old.path().join("notes.jsonl"), b"my notes\n").unwrap();
    let dir = OutputDir::open(old.path()).unwrap();
    dir.append("refreshed.jsonl", Kind::Log, b"{\"new\":1}\n", true, json_lines)
        .unwrap();
    assert_eq!(
        read(&old.path().join("refreshed.jsonl")),
        b"{\"old\":1}\n{\"new\":1}\n"
    );
    assert!(
        dir.append("notes.jsonl", Kind::Log, b"{}\n", true, json_lines)
            .is_err()
    );
    assert_eq!(read(&old.path().join("notes.jsonl")), b"my notes\n");
}

#[test]
fn a_lock_file_is_created_new_or_opened_only_if_ours() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    fn pid_only(b: &[u8]) -> bool {
        !b.is_empty() && b.len() <= 24 && b.iter().all(|c| c.is_ascii_digit() || *c == b'\n')
    }
    let mut lock = dir.open_lock("lock", b"ssdlab lock\n", pid_only).unwrap();
    let mut text = String::new();
    lock.read_to_string(&mut text).unwrap();
    assert_eq!(text, "ssdlab lock\n");
    drop(dir.open_lock("lock", b"ssdlab lock\n", pid_only).unwrap());
    // A user's file named lock is never truncated or written.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("lock"), b"my shopping list").unwrap();
    let dir = OutputDir::open(other.path()).unwrap();
    assert!(dir.open_lock("lock", b"ssdlab lock\n", pid_only).is_err());
    assert_eq!(read(&other.path().join("lock")), b"my shopping list");
    // An older ssdlab's lock (its holder's process id) is taken on as it is.
    std::fs::write(other.path().join("old-lock"), b"4242\n").unwrap();
    drop(dir.open_lock("old-lock", b"ssdlab lock\n", pid_only).unwrap());
    assert_eq!(read(&other.path().join("old-lock")), b"4242\n");
}

#[test]
fn a_planted_manifest_refuses_every_write_and_two_writers_take_turns() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join(MANIFEST_NAME), b"not ours").unwrap();
    let dir = OutputDir::open(tmp.path()).unwrap();
    assert!(
        dir.write(&[out("a.prom", Kind::Prometheus, b"a 1\n")], &[])
            .is_err()
    );
    assert_eq!(read(&tmp.path().join(MANIFEST_NAME)), b"not ours");

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().to_path_buf();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let dir = OutputDir::open(&path).unwrap();
                for round in 0..20 {
                    let name = format!("w{w}.prom");
                    let body = format!("round {round}\n");
                    dir.write(&[out(&name, Kind::Prometheus, body.as_bytes())], &[])
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let dir = OutputDir::open(&path).unwrap();
    let ours = dir.ours().unwrap();
    assert_eq!(ours.len(), 4, "every writer's file is listed: {ours:?}");
}

/// A crash between the steps of an append to an empty file (its first line accepted, then written, then settled)
/// leaves a file the manifest still calls ours: it lists both versions of the one inode.
#[test]
fn a_crash_after_the_first_line_is_written_but_not_settled_leaves_it_ours() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    dir.write(&[out("j.jsonl", Kind::Journal, b"")], &[]).unwrap();
    let line = b"{\"step\":1}\n";
    let inode = std::fs::metadata(tmp.path().join("j.jsonl")).unwrap().ino();
    let mut manifest = dir.manifest().unwrap();
    manifest.accept(
        "j.jsonl",
        Kind::Journal,
        Version {
            inode,
            bytes: None,
            checksum: checksum(first_line(line)),
        },
    );
    dir.save_manifest(&manifest).unwrap();
    // The append reached the file; the process died before the manifest was settled.
    std::fs::OpenOptions::new()
        .append(true)
        .open(tmp.path().join("j.jsonl"))
        .unwrap()
        .write_all(line)
        .unwrap();
    assert_eq!(dir.status("j.jsonl").unwrap(), Status::Ours(Kind::Journal));
    dir.append("j.jsonl", Kind::Journal, b"{\"step\":2}\n", true, |b| {
        older_lines(b, |l| l.starts_with(b"{\"step\""), b"{")
    })
    .unwrap();
}

/// A file put under a name of ours after ssdlab judged it (a rename over it) is never removed: the name's file
/// is moved aside, judged there, and put back when it is not a version of ours.
#[test]
fn a_file_swapped_in_after_the_check_is_put_back_not_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    dir.write(&[out("old.csv", Kind::Csv, b"a\n")], &[]).unwrap();
    let judged = dir.manifest().unwrap();
    // Someone renames their own file over ssdlab's after the manifest was read.
    std::fs::write(tmp.path().join("theirs"), b"precious\n").unwrap();
    std::fs::rename(tmp.path().join("theirs"), tmp.path().join("old.csv")).unwrap();
    let _lock = dir.lock().unwrap();
    assert!(!dir.remove_if_ours(&judged, "old.csv").unwrap());
    assert_eq!(read(&tmp.path().join("old.csv")), b"precious\n");
    let hidden: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("aside"))
        .collect();
    assert!(hidden.is_empty(), "put back, nothing left aside");
}

/// A manifest a newer ssdlab wrote, naming a kind this one does not know, still reads: its other files stay
/// ssdlab's, and the unknown one is never replaced by this version.
#[test]
fn a_manifest_with_a_newer_kind_still_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutputDir::create(tmp.path()).unwrap();
    dir.write(
        &[out("a.csv", Kind::Csv, b"x\n"), out("b.csv", Kind::Csv, b"y\n")],
        &[],
    )
    .unwrap();
    let text = std::fs::read_to_string(tmp.path().join(MANIFEST_NAME)).unwrap();
    let newer = text.replacen("\"csv\"", "\"flame-graph\"", 1);
    std::fs::write(tmp.path().join(MANIFEST_NAME), newer).unwrap();
    let statuses = [dir.status("a.csv").unwrap(), dir.status("b.csv").unwrap()];
    assert!(statuses.contains(&Status::Ours(Kind::Other)), "{statuses:?}");
    assert!(statuses.contains(&Status::Ours(Kind::Csv)), "{statuses:?}");
    let other = if statuses[0] == Status::Ours(Kind::Other) {
        "a.csv"
    } else {
        "b.csv"
    };
    assert!(dir.write(&[out(other, Kind::Csv, b"z\n")], &[]).is_err());
}

/// A directory made ready for a result that never came goes again, but only while it holds nothing but an empty
/// manifest: a result, or a file of anyone's, keeps it.
#[test]
fn an_unused_directory_is_removed_and_one_with_anything_in_it_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("unused");
    let dir = OutputDir::create(&path).unwrap();
    dir.write(&[], &[]).unwrap();
    assert!(path.join(MANIFEST_NAME).is_file());
    assert!(dir.remove_if_empty().unwrap());
    assert!(!path.exists());

    let path = tmp.path().join("with-a-users-file");
    let dir = OutputDir::create(&path).unwrap();
    dir.write(&[], &[]).unwrap();
    std::fs::write(path.join("notes.txt"), b"mine").unwrap();
    assert!(!dir.remove_if_empty().unwrap());
    assert_eq!(read(&path.join("notes.txt")), b"mine");
    assert!(path.join(MANIFEST_NAME).is_file());

    let path = tmp.path().join("with-a-result");
    let dir = OutputDir::create(&path).unwrap();
    dir.write(&[out("result.json", Kind::Result, b"{}")], &[])
        .unwrap();
    assert!(!dir.remove_if_empty().unwrap());
    assert!(path.join("result.json").is_file());
}

/// Only a directory this call made is reported as made: one that was there, reached through `..`, is not.
#[test]
fn create_reports_only_a_directory_it_made_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, made) = OutputDir::create_reporting(&tmp.path().join("new")).unwrap();
    assert!(made);
    let (_, made) = OutputDir::create_reporting(&tmp.path().join("new")).unwrap();
    assert!(!made, "it was there the second time");
    std::fs::create_dir(tmp.path().join("users")).unwrap();
    let (_, made) = OutputDir::create_reporting(&tmp.path().join("x/../users")).unwrap();
    assert!(!made, "the user's directory, reached through a new one and '..'");
    let (_, made) = OutputDir::create_reporting(&tmp.path().join("fresh/.")).unwrap();
    assert!(!made, "a path ending in '.' names no directory of its own making");
}
