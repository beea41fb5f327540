//! Helpers every room shares: running the binary, reading its output, and loop devices and mounts that are
//! released when dropped, even when a test fails.

use crate::*;
pub(crate) fn ssdlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ssdlab"))
}

/// Runs ssdlab with `args`, returning the output.
pub(crate) fn run(args: &[&str]) -> Output {
    ssdlab()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("ssdlab starts")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts an exit code, showing stderr when it differs.
pub(crate) fn expect_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status; stderr:\n{}",
        stderr(out)
    );
}

/// Every stdout line as JSON (which also proves stdout holds nothing else).
pub(crate) fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8 stdout")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

pub(crate) fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))
}

pub(crate) fn summary(events: &[Value]) -> &Value {
    &event(events, "summary")["data"]["summary"]
}

/// A one-line error that names `flag`, with exit code 2.
pub(crate) fn expect_usage_error(out: &Output, flag: &str) {
    expect_code(out, 2);
    let text = stderr(out);
    assert!(text.contains(flag), "error should name {flag}: {text}");
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ssdlab-test-")
        .tempdir()
        .expect("temp dir")
}

pub(crate) fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// A loop device in use whose backing file cannot be identified (made over an overlay that is then unmounted)
/// makes the gate refuse every block device while it lasts, rightly: it may be that device. The tests that make
/// one hold [`unidentifiable_loops`] alone; every [`LoopDevice`] holds it shared, so the two never meet. (Shared
/// holders never wait for a waiting one alone, so a test may hold several loop devices.)
static LOOPS: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));
static LOOPS_CHANGED: std::sync::Condvar = std::sync::Condvar::new();

/// Held by a test while a loop device with an unidentifiable backing exists.
pub(crate) struct Alone;

pub(crate) fn unidentifiable_loops() -> Alone {
    let mut state = LOOPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while state.0 > 0 || state.1 {
        state = LOOPS_CHANGED
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    state.1 = true;
    Alone
}

impl Drop for Alone {
    fn drop(&mut self) {
        LOOPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1 = false;
        LOOPS_CHANGED.notify_all();
    }
}

/// Held by every [`LoopDevice`] for its life.
pub(crate) struct Shared;

fn shared_loops() -> Shared {
    let mut state = LOOPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while state.1 {
        state = LOOPS_CHANGED
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    state.0 += 1;
    Shared
}

impl Drop for Shared {
    fn drop(&mut self) {
        LOOPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 -= 1;
        LOOPS_CHANGED.notify_all();
    }
}

/// A loop device over a sparse image; detached and deleted on drop, even when a test fails.
pub(crate) struct LoopDevice {
    pub(crate) path: String,
    pub(crate) image: PathBuf,
    pub(crate) _dir: tempfile::TempDir,
    /// Released after the device is detached (fields drop after `drop`).
    _shared: Shared,
}

impl LoopDevice {
    pub(crate) fn new(size: u64) -> Self {
        Self::with_sector_size(size, 512)
    }

    pub(crate) fn with_sector_size(size: u64, sector: u32) -> Self {
        assert!(
            is_root(),
            "loop-device tests need root (CI runs as root); run the suite with sudo"
        );
        let shared = shared_loops();
        let dir = tempdir();
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image).unwrap().set_len(size).unwrap();
        let sector = sector.to_string();
        let path = sh(
            "losetup",
            &["-f", "--show", "--sector-size", &sector, image.to_str().unwrap()],
        );
        LoopDevice {
            path,
            image,
            _dir: dir,
            _shared: shared,
        }
    }

    /// Blocks allocated in the backing image (it starts sparse, so this shows what was written or discarded).
    pub(crate) fn image_blocks(&self) -> u64 {
        std::fs::metadata(&self.image).unwrap().blocks()
    }
}

/// Unmounts `target` (a mount point, or a device's latest mount) for a test's cleanup, which must not leave a
/// mount behind: one still busy (a process of a test running beside this one can hold a file in it for a
/// moment) is tried again for up to 5 s, then detached lazily (`umount -l`), so its loop device is freed once
/// the last user goes rather than staying attached for good (a btrfs on /dev/loop0 stayed mounted so once).
/// Quiet when nothing is mounted there.
pub(crate) fn unmount(target: impl AsRef<std::ffi::OsStr>) {
    let target = target.as_ref();
    for _ in 0..50 {
        match Command::new("umount").arg(target).output() {
            Ok(out) if out.status.success() => return,
            Ok(out) if String::from_utf8_lossy(&out.stderr).contains("busy") => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            _ => return,
        }
    }
    let _ = Command::new("umount").arg("-l").arg(target).output();
}

/// A child process (a server, a daemon, a busy loop) killed and reaped on drop, even when the test fails.
pub(crate) struct Killed(pub(crate) std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A mount point unmounted on drop (through [`unmount`]), even when the test fails.
pub(crate) struct Unmount(pub(crate) PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        unmount(&self.0);
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        unmount(&self.path);
        let _ = Command::new("losetup").args(["-d", &self.path]).output();
    }
}

/// A mount point that is unmounted on drop.
pub(crate) struct Mounted {
    pub(crate) dir: tempfile::TempDir,
}

/// An ext4 that stops writing to its disk once synced: mkfs.ext4's default leaves the inode tables and the journal
/// to the kernel's lazy-init thread, which zeroes them in the background for seconds after the mount. A test that
/// checks a mounted disk's bytes for writes of ssdlab's needs a file system that writes nothing of its own.
pub(crate) fn mkfs_ext4_settled(device: &str) {
    sh(
        "mkfs.ext4",
        &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device],
    );
}

impl Mounted {
    pub(crate) fn new(device: &str) -> Self {
        let dir = tempdir();
        sh("mount", &[device, dir.path().to_str().unwrap()]);
        Mounted { dir }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        unmount(self.dir.path());
    }
}

pub(crate) fn file_target(path: &Path, size: Option<&str>) -> String {
    match size {
        Some(size) => format!("file:{}:{size}", path.display()),
        None => format!("file:{}", path.display()),
    }
}

/// Headless Chromium opening `page` with a profile in `profile`, plus `extra` flags (`--dump-dom`,
/// `--screenshot=FILE`); panics with the way to install it when there is none.
pub(crate) fn chromium(page: &Path, profile: &Path, extra: &[&str]) -> Output {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect(
            "Chromium is needed for the report tests (apt-get install chromium; scripts/test.sh installs it)",
        );
    Command::new(browser)
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
}

/// A chart that breaks every layout rule: a legend entry drawn over a data point, another over that entry, a
/// label past the chart's left edge, a slanted one past its bottom and a tick too small to read. Added to a page, it shows that the layout
/// check catches what it looks for.
pub(crate) const KNOWN_BAD_CHART: &str = r#"<svg class="chart" viewBox="0 0 800 400" xmlns="http://www.w3.org/2000/svg"><text class="title" x="12" y="20">known bad</text><g class="series"><circle cx="100" cy="100" r="3"/></g><g class="legend"><text x="90" y="104">over the data</text></g><g class="legend"><text x="95" y="106">over the entry</text></g><text x="-60" y="200">cut</text><text x="700" y="420" transform="rotate(-40 700 420)">slanted past the bottom</text><text class="tick" x="400" y="200" style="font-size:3px">tiny</text></svg>"#;

/// How headless Chromium lays out a report page's charts: the number of charts and the problems
/// `layout.js` found (legend entries overlapping each other or the data, text past a chart's edge). The check
/// runs on a copy of the page with the script and `extra_markup` (say, a known-bad chart) added; the report
/// itself has no scripts.
pub(crate) fn chart_layout(page: &Path, profile: &Path, extra_markup: &str) -> (usize, Vec<String>) {
    layout_check(page, profile, extra_markup, false)
}

/// [`chart_layout`] as the page prints: its print styles applied on screen in a window as wide as an A4 page's
/// printable width at 96 px an inch (718 px), where headless Chromium cannot be asked for print media otherwise.
pub(crate) fn print_layout(page: &Path, profile: &Path) -> (usize, Vec<String>) {
    layout_check(page, profile, "", true)
}

fn layout_check(page: &Path, profile: &Path, extra_markup: &str, print: bool) -> (usize, Vec<String>) {
    let html = std::fs::read_to_string(page).expect("the report page");
    let html = if print {
        assert!(html.contains("@media print"), "the page has print styles");
        html.replace("@media print", "@media all")
    } else {
        html
    };
    let checked = page.with_extension("layout.html");
    let script = include_str!("layout.js");
    let html = html.replacen(
        "</body>",
        &format!("{extra_markup}<script>{script}</script></body>"),
        1,
    );
    std::fs::write(&checked, html).unwrap();
    let out = chromium(
        &checked,
        profile,
        &[
            "--dump-dom",
            "--virtual-time-budget=10000",
            if print {
                "--window-size=718,4000"
            } else {
                "--window-size=1280,4000"
            },
        ],
    );
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .rfind("<pre id=\"layout-check\">")
        .expect("the layout check ran (is JavaScript enabled in headless Chromium?)");
    let text = &dom[at + "<pre id=\"layout-check\">".len()..];
    let text = &text[..text.find("</pre>").unwrap()];
    let text = text
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    let found: Value = serde_json::from_str(&text).expect("the layout check's JSON");
    let problems = found["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (found["charts"].as_u64().unwrap() as usize, problems)
}

/// Checks JSON files against a JSON Schema with Debian's python3-jsonschema; returns the errors found.
pub(crate) fn schema_errors(schema: &std::path::Path, files: &[std::path::PathBuf]) -> String {
    const CHECK: &str = r#"
import json, sys
import jsonschema
validator = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
def leaves(e):
    # Under the kinds' oneOf, the leaves name the fields that broke each alternative.
    if not e.context:
        yield e
    for c in e.context:
        yield from leaves(c)
for path in sys.argv[2:]:
    for top in validator.iter_errors(json.load(open(path))):
        for e in leaves(top):
            print(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}")
"#;
    let out = Command::new("/usr/bin/python3")
        .args(["-c", CHECK])
        .arg(schema)
        .args(files)
        .output()
        .expect("Debian's python3 (scripts/test.sh installs python3-jsonschema)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The published JSON Schema of result.json.
pub(crate) fn result_schema() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/result.schema.json")
}

/// Writes a GPT with partitions given as sfdisk lines onto the device.
pub(crate) fn partition(disk: &LoopDevice, script: &str) {
    let mut child = Command::new("sfdisk")
        .args(["-q", "--no-reread", &disk.path])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sfdisk (fdisk package) starts");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sfdisk: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `ssdlab serve --target TARGET --socket SOCKET EXTRA...` and waits until the socket exists (the server
/// bound it; it may still be a moment from listening). Panics if it does not within 20 s, or exits first.
pub(crate) fn serve_at(target: &str, socket: &Path, extra: &[&str]) -> std::process::Child {
    let mut child = ssdlab()
        .args(["serve", "--target", target, "--socket"])
        .arg(socket)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ssdlab serve starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() {
        assert!(std::time::Instant::now() < deadline, "the server never listened");
        assert!(child.try_wait().unwrap().is_none(), "the server exited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The file appears at bind(2), before listen(2) and before the target is opened and claimed: wait for the
    // greeting, which the server sends only once its target is open. A test that touched the target meanwhile
    // (opened the image, tried a mount) would race the server's own checks.
    let mut first = loop {
        match std::os::unix::net::UnixStream::connect(socket) {
            Ok(stream) => break stream,
            Err(_) => {
                assert!(std::time::Instant::now() < deadline, "the server never listened");
                assert!(child.try_wait().unwrap().is_none(), "the server exited");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    first
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut greeting = [0u8; 8];
    std::io::Read::read_exact(&mut first, &mut greeting).expect("the server greets once its target is open");
    assert_eq!(&greeting, b"NBDMAGIC", "an NBD server greets with NBDMAGIC");
    child
}
