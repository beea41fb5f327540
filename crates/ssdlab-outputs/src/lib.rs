//! ssdlab-outputs: the one rule for every file ssdlab writes (results, reports, CSVs, charts, Prometheus text,
//! locks, journals, logs, history): it is created new, or it replaces a file only when that file provably holds
//! ssdlab's own output of the same kind; and nothing is ever written through a symbolic link.
//!
//! "Provably ours" is the directory's manifest ([`manifest`]): every file ssdlab writes is listed there with its
//! kind, its inode and the checksum of its bytes, and a file is ours only while both still match. A file a user
//! edited, replaced or planted under an output's name is theirs, and is never replaced, truncated or appended to.
//!
//! [`OutputDir`] owns the rule: a directory reached without following a symlink in any component, written
//! under its lock (flock on the directory, so two ssdlab processes writing one textfile directory take turns).
//! A file is written beside its name (O_EXCL, synced), the manifest is told it may hold the new version, the new
//! file is exchanged with the old one (RENAME_EXCHANGE, so the file checked is the file replaced; a file swapped
//! in meanwhile is put back), and the manifest then forgets the old version: a reader never sees half a file, and
//! a crash at any step leaves a version the manifest accepts.
//!
//! It never removes or replaces a file that is not ours, never follows a symbolic link and never prints.
#![forbid(unsafe_code)]

mod appender;
mod manifest;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, RenameFlags, ResolveFlags};
use serde::{Deserialize, Serialize};
use ssdlab_core::checksum::checksum;

pub use appender::Appender;
pub use manifest::MANIFEST_NAME;
use manifest::{Manifest, Version};

/// What kind of output a file is: a file is replaced only by output of its own kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// result.json.
    Result,
    /// An HTML report page.
    Report,
    /// A CSV table (per-second samples, a test's tidy table).
    Csv,
    /// A chart as an SVG file.
    Chart,
    /// Prometheus text for node_exporter's textfile collector.
    Prometheus,
    /// A lock file (its holder is named by /proc/locks, not by its content).
    Lock,
    /// A journal that grows by appending and is compacted by replacing it.
    Journal,
    /// A log that grows by appending (refresh's record of rewritten files, a drive's health history).
    Log,
    /// A synthesized trace.
    Trace,
    /// A manual page.
    Manual,
    /// The DRAM cache's hot map (the blocks to warm at the next start).
    HotMap,
    /// A kind a newer ssdlab wrote, which this one does not know: never replaced by this one, but its manifest
    /// still reads.
    #[serde(other)]
    Other,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Result => "result",
            Kind::Report => "report page",
            Kind::Csv => "CSV table",
            Kind::Chart => "chart",
            Kind::Prometheus => "Prometheus text",
            Kind::Lock => "lock",
            Kind::Journal => "journal",
            Kind::Log => "log",
            Kind::Trace => "trace",
            Kind::Manual => "manual page",
            Kind::HotMap => "hot map",
            Kind::Other => "output of a newer ssdlab",
        }
    }

    /// Files that grow by appending are known by their first line; the rest by all their bytes.
    fn grows(self) -> bool {
        matches!(self, Kind::Journal | Kind::Log)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an output was not written. Nothing of anyone else's was changed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{path} is not ssdlab's own {kind} ({why}), and ssdlab never replaces or changes a file that is not its own: \
         move it away or name another place"
    )]
    NotOurs { path: PathBuf, kind: Kind, why: String },
    #[error("{path}: a component of the path is a symbolic link, which ssdlab never follows into a write")]
    Symlink { path: PathBuf },
    #[error("{path}: {what}: {cause}")]
    Io {
        path: PathBuf,
        what: &'static str,
        cause: io::Error,
    },
}

fn io_error<'p>(path: &'p Path, what: &'static str) -> impl FnOnce(io::Error) -> OutputError + 'p {
    move |cause| match cause.raw_os_error() {
        Some(code) if code == libc_eloop() => OutputError::Symlink {
            path: path.to_path_buf(),
        },
        _ => OutputError::Io {
            path: path.to_path_buf(),
            what,
            cause,
        },
    }
}

fn libc_eloop() -> i32 {
    rustix::io::Errno::LOOP.raw_os_error()
}

/// What a name in an output directory holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Absent,
    /// ssdlab's own output of this kind.
    Ours(Kind),
    /// Someone else's (or ssdlab's, changed since): why it is not ours.
    Theirs(String),
}

/// One output of a write, staged under a temporary name beside its own.
struct Staged<'n> {
    /// The subdirectory holding it (`charts/`), or None for the directory itself.
    sub: Option<File>,
    file: &'n str,
    tmp: String,
    version: Version,
    /// What installing it did; None while the staged file is still (or again) under its temporary name.
    installed: Option<Installed>,
}

/// What putting a staged file under its name did.
#[derive(Debug, Clone, Copy)]
enum Installed {
    /// The name was free.
    New,
    /// It was exchanged with an old version of ours (this inode), now under the temporary name.
    ReplacedOurs(u64),
    /// It was exchanged with someone else's file, and putting that back failed: theirs is under the temporary
    /// name, and stays.
    Undone,
}

/// One file to write: its name in the directory (`result.json`, or one level down: `charts/01-iops.svg`), its
/// kind and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    pub name: &'a str,
    pub kind: Kind,
    pub bytes: &'a [u8],
}

/// A directory ssdlab writes into, reached without following a symbolic link in any component and held open.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    dir: File,
}

/// The directory's lock (flock on a description of its own, so two threads sharing one `OutputDir` exclude each
/// other too), held while a write checks, renames and records; released when dropped.
struct DirLock(File);

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, FlockOperation::Unlock);
    }
}

impl OutputDir {
    /// The directory at `path`, which must exist and be reached without a symlink.
    pub fn open(path: &Path) -> Result<Self, OutputError> {
        let fd = rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        )
        .map_err(|e| io_error(path, "cannot open the directory")(e.into()))?;
        Ok(OutputDir {
            path: path.to_path_buf(),
            dir: File::from(fd),
        })
    }

    /// The directory at `path`, made (with any missing parents) if it is not there, never through a symlink.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        Self::create_reporting(path).map(|(dir, _)| dir)
    }

    /// [`OutputDir::create`], and whether this call made the directory itself: its last component is a name
    /// (not `.` or `..`) that mkdir(2) created now, not one that was there (a directory another program, or a
    /// user, made is never taken for ours).
    pub fn create_reporting(path: &Path) -> Result<(Self, bool), OutputError> {
        let mut at: OwnedFd = rustix::fs::openat2(
            rustix::fs::CWD,
            if path.is_absolute() { "/" } else { "." },
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::empty(),
        )
        .map_err(|e| io_error(path, "cannot open the directory")(e.into()))?;
        let mut made_last = false;
        for component in path.components() {
            made_last = false;
            let name = match component {
                Component::Normal(name) => name,
                Component::RootDir | Component::CurDir => continue,
                Component::ParentDir => std::ffi::OsStr::new(".."),
                Component::Prefix(_) => continue,
            };
            match rustix::fs::mkdirat(&at, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => made_last = matches!(component, Component::Normal(_)),
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io_error(path, "cannot create the directory")(e.into())),
            }
            at = rustix::fs::openat2(
                &at,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::NO_SYMLINKS,
            )
            .map_err(|e| match e {
                rustix::io::Errno::NOTDIR => OutputError::Io {
                    path: path.to_path_buf(),
                    what: "a component of the path is not a directory",
                    cause: e.into(),
                },
                e => io_error(path, "cannot open the directory")(e.into()),
            })?;
        }
        // Path::components drops a trailing `.`, which still names the directory as rmdir(2) would refuse it.
        let bytes = path.as_os_str().as_encoded_bytes();
        if bytes.ends_with(b"/.") || bytes.ends_with(b"/./") {
            made_last = false;
        }
        Ok((Self::open(path)?, made_last))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> Result<DirLock, OutputError> {
        let own = rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(&self.path, "cannot open the directory")(e.into()))?;
        rustix::fs::flock(&own, FlockOperation::LockExclusive)
            .map_err(|e| io_error(&self.path, "cannot lock the directory")(e.into()))?;
        Ok(DirLock(File::from(own)))
    }

    /// The directory holding `name` (itself, or the subdirectory of a `sub/file` name) and the file's own name.
    /// `create` makes the subdirectory if it is missing.
    fn parent_of<'n>(&self, name: &'n str, create: bool) -> Result<(Option<File>, &'n str), OutputError> {
        let (sub, file) = split_name(name).ok_or_else(|| OutputError::Io {
            path: self.path.join(name),
            what: "not a name ssdlab writes",
            cause: io::ErrorKind::InvalidInput.into(),
        })?;
        let Some(sub) = sub else {
            return Ok((None, file));
        };
        if create {
            match rustix::fs::mkdirat(&self.dir, sub, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => {
                    return Err(io_error(&self.path.join(sub), "cannot create the directory")(
                        e.into(),
                    ));
                }
            }
        }
        match rustix::fs::openat2(
            &self.dir,
            sub,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH,
        ) {
            Ok(fd) => Ok((Some(File::from(fd)), file)),
            Err(rustix::io::Errno::NOENT) if !create => Ok((None, "")),
            Err(e) => Err(io_error(&self.path.join(sub), "cannot open the directory")(
                e.into(),
            )),
        }
    }

    fn manifest(&self) -> Result<Manifest, OutputError> {
        let path = self.path.join(MANIFEST_NAME);
        match read_regular(&self.dir, MANIFEST_NAME, 16 << 20) {
            Ok(None) => Ok(Manifest::new()),
            Ok(Some((bytes, _))) => Manifest::parse(&bytes).ok_or_else(|| OutputError::NotOurs {
                path,
                kind: Kind::Result,
                why: "it is not the list of outputs ssdlab keeps there".into(),
            }),
            Err(e) => Err(io_error(&path, "cannot read")(e)),
        }
    }

    fn save_manifest(&self, manifest: &Manifest) -> Result<(), OutputError> {
        let path = self.path.join(MANIFEST_NAME);
        let (tmp, _) = new_temporary(&self.dir, MANIFEST_NAME, &manifest.to_bytes())
            .map_err(io_error(&path, "cannot write"))?;
        rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, MANIFEST_NAME).map_err(|e| {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), AtFlags::empty());
            io_error(&path, "cannot replace")(e.into())
        })?;
        self.dir
            .sync_all()
            .map_err(io_error(&self.path, "cannot sync the directory"))
    }

    /// What `name` holds now, judged against the manifest.
    pub fn status(&self, name: &str) -> Result<Status, OutputError> {
        let manifest = self.manifest()?;
        self.status_in(&manifest, name)
    }

    fn status_in(&self, manifest: &Manifest, name: &str) -> Result<Status, OutputError> {
        let (sub, file) = self.parent_of(name, false)?;
        if file.is_empty() {
            return Ok(Status::Absent);
        }
        let dir = sub.as_ref().unwrap_or(&self.dir);
        match rustix::fs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => {}
            Err(rustix::io::Errno::NOENT) => return Ok(Status::Absent),
            Err(e) => return Err(io_error(&self.path.join(name), "cannot stat")(e.into())),
        }
        let Some(entry) = manifest.entry(name) else {
            return Ok(Status::Theirs(
                "ssdlab's list of what it wrote there does not name it".into(),
            ));
        };
        Ok(match judge(dir, file, entry) {
            None => Status::Ours(entry.kind),
            Some(why) => Status::Theirs(why),
        })
    }

    /// Whether `name` may be written as `kind`: it is absent, or ours of that kind. The error says why not.
    pub fn check(&self, name: &str, kind: Kind) -> Result<(), OutputError> {
        let manifest = self.manifest()?;
        self.check_in(&manifest, name, kind)
    }

    fn check_in(&self, manifest: &Manifest, name: &str, kind: Kind) -> Result<(), OutputError> {
        let not_ours = |why: String| OutputError::NotOurs {
            path: self.path.join(name),
            kind,
            why,
        };
        match self.status_in(manifest, name)? {
            Status::Absent => Ok(()),
            Status::Ours(k) if k == kind => Ok(()),
            Status::Ours(k) => Err(not_ours(format!("it is ssdlab's {k}, not a {kind}"))),
            Status::Theirs(why) => Err(not_ours(why)),
        }
    }

    /// The names the manifest lists that are still ours, with their kinds.
    pub fn ours(&self) -> Result<Vec<(String, Kind)>, OutputError> {
        let manifest = self.manifest()?;
        let mut found = Vec::new();
        for entry in &manifest.files {
            if let Status::Ours(kind) = self.status_in(&manifest, &entry.name)? {
                found.push((entry.name.clone(), kind));
            }
        }
        Ok(found)
    }

    /// Writes every output atomically and durably, each replacing only ours of its kind (checked for all before
    /// any is written). Every other file of ours there of a kind in `prune` is removed afterwards, so the
    /// directory holds this set alone (a result's charts, not an older result's).
    pub fn write(&self, outputs: &[Output<'_>], prune: &[Kind]) -> Result<(), OutputError> {
        for (k, output) in outputs.iter().enumerate() {
            if outputs[..k].iter().any(|o| o.name == output.name) {
                return Err(OutputError::Io {
                    path: self.path.join(output.name),
                    what: "named twice in one write",
                    cause: io::ErrorKind::InvalidInput.into(),
                });
            }
        }
        // The new files first, beside their names, before the lock: writing them takes the time.
        let mut staged: Vec<Staged<'_>> = Vec::new();
        for output in outputs {
            let path = self.path.join(output.name);
            let staging = self.parent_of(output.name, true).and_then(|(sub, file)| {
                let (tmp, inode) = new_temporary(sub.as_ref().unwrap_or(&self.dir), file, output.bytes)
                    .map_err(io_error(&path, "cannot write"))?;
                Ok(Staged {
                    sub,
                    file,
                    tmp,
                    version: Version::of(output.kind, inode, output.bytes),
                    installed: None,
                })
            });
            match staging {
                Ok(s) => staged.push(s),
                Err(e) => {
                    self.discard_staged(&staged);
                    return Err(e);
                }
            }
        }
        let _lock = self.lock()?;
        let result = self.install(outputs, &mut staged, prune);
        self.discard_staged(&staged);
        result
    }

    /// Removes what a write left under its temporary names, but only a file that is provably what the write put
    /// there: its own new file, never installed; or, once the write has been settled, the old version of ours it
    /// exchanged out. A file of someone else's that an undo left there stays (and was said).
    fn discard_staged(&self, staged: &[Staged<'_>]) {
        for s in staged {
            let dir = s.sub.as_ref().unwrap_or(&self.dir);
            let expected = match s.installed {
                None => Some(s.version.inode),
                Some(Installed::ReplacedOurs(old)) => Some(old),
                Some(Installed::New | Installed::Undone) => None,
            };
            let holds =
                rustix::fs::statat(dir, s.tmp.as_str(), AtFlags::SYMLINK_NOFOLLOW).map(|st| st.st_ino);
            if expected.is_some_and(|inode| holds == Ok(inode)) {
                let _ = rustix::fs::unlinkat(dir, s.tmp.as_str(), AtFlags::empty());
            }
        }
    }

    /// Under the lock: checks every name, lets the manifest accept both versions, exchanges each new file with
    /// its name (the file exchanged out judged again: it must be a version of ours as checked), then settles the
    /// manifest. When one output fails, the ones before it are put back as they were.
    fn install(
        &self,
        outputs: &[Output<'_>],
        staged: &mut [Staged<'_>],
        prune: &[Kind],
    ) -> Result<(), OutputError> {
        let mut manifest = self.manifest()?;
        for output in outputs {
            self.check_in(&manifest, output.name, output.kind)?;
        }
        // What each name may hold and still be ours, as checked: the file exchanged out is judged by it again.
        let checked = manifest.clone();
        for (output, s) in outputs.iter().zip(staged.iter()) {
            manifest.accept(output.name, output.kind, s.version);
        }
        self.save_manifest(&manifest)?;
        for k in 0..outputs.len() {
            if let Err(e) = self.install_one(&checked, &outputs[k], &mut staged[k]) {
                for s in staged[..k].iter_mut().rev() {
                    self.undo_one(s);
                }
                return Err(e);
            }
        }
        for (output, s) in outputs.iter().zip(staged.iter()) {
            manifest.settle(output.name, output.kind, s.version);
        }
        if !prune.is_empty() {
            let written: Vec<&str> = outputs.iter().map(|o| o.name).collect();
            let stale: Vec<String> = manifest
                .files
                .iter()
                .filter(|e| prune.contains(&e.kind) && !written.contains(&e.name.as_str()))
                .map(|e| e.name.clone())
                .collect();
            for name in stale {
                self.remove_if_ours(&manifest, &name)?;
                manifest.forget(&name);
            }
        }
        self.save_manifest(&manifest)
    }

    /// Puts one staged output under its name: renamed there when the name is free, else exchanged with the
    /// file there, which must then be a version of ours as `checked` (else it is exchanged back).
    fn install_one(
        &self,
        checked: &Manifest,
        output: &Output<'_>,
        s: &mut Staged<'_>,
    ) -> Result<(), OutputError> {
        let dir = s.sub.as_ref().unwrap_or(&self.dir);
        let path = self.path.join(output.name);
        let present = match rustix::fs::statat(dir, s.file, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => true,
            Err(rustix::io::Errno::NOENT) => false,
            Err(e) => return Err(io_error(&path, "cannot stat")(e.into())),
        };
        if !present {
            rustix::fs::renameat_with(dir, s.tmp.as_str(), dir, s.file, RenameFlags::NOREPLACE).map_err(
                |e| match e {
                    rustix::io::Errno::EXIST => OutputError::NotOurs {
                        path: path.clone(),
                        kind: output.kind,
                        why: "another program created it while ssdlab was writing".into(),
                    },
                    e => io_error(&path, "cannot rename into place")(e.into()),
                },
            )?;
            s.installed = Some(Installed::New);
        } else {
            rustix::fs::renameat_with(dir, s.tmp.as_str(), dir, s.file, RenameFlags::EXCHANGE)
                .map_err(|e| io_error(&path, "cannot rename into place")(e.into()))?;
            // The old file is now under the temporary name, out of anyone's reach by its name: it must be a
            // version of ours as checked (a file renamed or written over it since is someone's).
            let old = rustix::fs::statat(dir, s.tmp.as_str(), AtFlags::SYMLINK_NOFOLLOW).map(|st| st.st_ino);
            let ours = checked
                .entry(output.name)
                .is_some_and(|entry| judge(dir, s.tmp.as_str(), entry).is_none());
            match (ours, old) {
                (true, Ok(old)) => s.installed = Some(Installed::ReplacedOurs(old)),
                _ => {
                    // Back under its name; if that fails, it stays under the temporary name, never removed.
                    let back =
                        rustix::fs::renameat_with(dir, s.tmp.as_str(), dir, s.file, RenameFlags::EXCHANGE);
                    if back.is_err() {
                        s.installed = Some(Installed::Undone);
                    }
                    return Err(OutputError::NotOurs {
                        path,
                        kind: output.kind,
                        why: match back {
                            Ok(()) => "another program replaced it while ssdlab was writing".into(),
                            Err(_) => format!(
                                "another program replaced it while ssdlab was writing, and it could not be put \
                                 back: it is kept beside it as {}",
                                s.tmp
                            ),
                        },
                    });
                }
            }
        }
        let _ = dir.sync_all();
        Ok(())
    }

    /// Takes back one installed output of a write that failed later: the name gets back what it held (nothing,
    /// or the old version of ours), and the staged file goes back under its temporary name to be discarded.
    fn undo_one(&self, s: &mut Staged<'_>) {
        let dir = s.sub.as_ref().unwrap_or(&self.dir);
        // Only while the name still holds what this write put there.
        let holds_new = rustix::fs::statat(dir, s.file, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_ino == s.version.inode);
        if !holds_new {
            return;
        }
        let undone = match s.installed {
            Some(Installed::New) => {
                rustix::fs::renameat_with(dir, s.file, dir, s.tmp.as_str(), RenameFlags::NOREPLACE).is_ok()
            }
            Some(Installed::ReplacedOurs(_)) => {
                rustix::fs::renameat_with(dir, s.tmp.as_str(), dir, s.file, RenameFlags::EXCHANGE).is_ok()
            }
            _ => false,
        };
        if undone {
            s.installed = None;
            let _ = dir.sync_all();
        }
    }

    /// Removes `name` if it is ours: first moved aside under a private name (so nothing can be swapped in
    /// between), judged there, and removed, or put back when it is not a version of ours. Called with the
    /// directory's lock held.
    fn remove_if_ours(&self, manifest: &Manifest, name: &str) -> Result<bool, OutputError> {
        let Some(entry) = manifest.entry(name) else {
            return Ok(false);
        };
        let (sub, file) = self.parent_of(name, false)?;
        if file.is_empty() {
            return Ok(false);
        }
        let dir = sub.as_ref().unwrap_or(&self.dir);
        let aside = private_name(file);
        match rustix::fs::renameat_with(dir, file, dir, aside.as_str(), RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(rustix::io::Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_error(&self.path.join(name), "cannot move aside")(e.into())),
        }
        if judge(dir, aside.as_str(), entry).is_none() {
            rustix::fs::unlinkat(dir, aside.as_str(), AtFlags::empty())
                .map_err(|e| io_error(&self.path.join(name), "cannot remove")(e.into()))?;
            return Ok(true);
        }
        // Not ours: back under its name (or, if something took the name meanwhile, left aside and said).
        rustix::fs::renameat_with(dir, aside.as_str(), dir, file, RenameFlags::NOREPLACE).map_err(|e| {
            OutputError::Io {
                path: self.path.join(name),
                what: "was not ssdlab's and could not be put back; it is kept beside it under a hidden name",
                cause: e.into(),
            }
        })?;
        Ok(false)
    }

    /// Removes the directory if it holds nothing but an empty manifest (a directory made ready for a result that
    /// was never written: the command stopped before it had one). Returns whether it was removed. Anything else
    /// there (a file of anyone's, a result) keeps it; rmdir(2) itself never removes a directory that is not empty.
    pub fn remove_if_empty(&self) -> Result<bool, OutputError> {
        let _lock = self.lock()?;
        if !self.manifest()?.files.is_empty() {
            return Ok(false);
        }
        let listing = rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(&self.path, "cannot open the directory")(e.into()))?;
        let dir = rustix::fs::Dir::new(listing)
            .map_err(|e| io_error(&self.path, "cannot list the directory")(e.into()))?;
        for entry in dir {
            let entry = entry.map_err(|e| io_error(&self.path, "cannot list the directory")(e.into()))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." && name != MANIFEST_NAME.as_bytes() {
                return Ok(false);
            }
        }
        match rustix::fs::unlinkat(&self.dir, MANIFEST_NAME, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                return Err(io_error(&self.path.join(MANIFEST_NAME), "cannot remove")(
                    e.into(),
                ));
            }
        }
        Ok(std::fs::remove_dir(&self.path).is_ok())
    }

    /// Removes every file of ours there (for `--replace`: the earlier result goes whole, the user's files stay).
    pub fn remove_ours(&self) -> Result<Vec<String>, OutputError> {
        let _lock = self.lock()?;
        let mut manifest = self.manifest()?;
        let mut removed = Vec::new();
        for entry in manifest.files.clone() {
            if self.remove_if_ours(&manifest, &entry.name)? {
                removed.push(entry.name.clone());
            }
            manifest.forget(&entry.name);
        }
        self.save_manifest(&manifest)?;
        Ok(removed)
    }

    /// Appends `bytes` (whole lines) to the file `name` of `kind` (which grows by appending), synced with `sync`:
    /// created new holding them, or appended to only if it is ours. A file the manifest does not name that
    /// `legacy` accepts (an older ssdlab's, from before manifests) is taken on as ours, once.
    pub fn append(
        &self,
        name: &str,
        kind: Kind,
        bytes: &[u8],
        sync: bool,
        legacy: fn(&[u8]) -> bool,
    ) -> Result<(), OutputError> {
        assert!(kind.grows(), "only a file that grows by appending is appended to");
        let path = self.path.join(name);
        let _lock = self.lock()?;
        let mut manifest = self.manifest()?;
        let (sub, file) = self.parent_of(name, true)?;
        let dir = sub.as_ref().unwrap_or(&self.dir);
        if self.status_in(&manifest, name)? == Status::Absent {
            return self.create_new(&mut manifest, dir, name, file, kind, bytes);
        }
        let mut opened =
            self.open_judged(&mut manifest, name, kind, legacy, OFlags::WRONLY | OFlags::APPEND)?;
        let stat = rustix::fs::fstat(&opened).map_err(|e| io_error(&path, "cannot stat")(e.into()))?;
        // An empty file gets its first line now: the manifest accepts it before it is written, so a crash between
        // the two leaves a file the manifest still calls ours.
        let first = (stat.st_size == 0).then(|| Version::of(kind, stat.st_ino, bytes));
        if let Some(version) = first {
            manifest.accept(name, kind, version);
            self.save_manifest(&manifest)?;
        }
        opened
            .write_all(bytes)
            .map_err(io_error(&path, "cannot append"))?;
        // A first line is settled in the manifest: it must be on the medium before the manifest says so.
        if sync || first.is_some() {
            opened.sync_data().map_err(io_error(&path, "cannot sync"))?;
        }
        if let Some(version) = first {
            manifest.settle(name, kind, version);
            self.save_manifest(&manifest)?;
        }
        Ok(())
    }

    /// Takes on as ours of `kind` a file an older ssdlab wrote before it kept a manifest: one the manifest names
    /// no version of, whose bytes `legacy` accepts. Anything else is left as it is (a later write judges it).
    pub fn adopt(&self, name: &str, kind: Kind, legacy: fn(&[u8]) -> bool) -> Result<(), OutputError> {
        let _lock = self.lock()?;
        let mut manifest = self.manifest()?;
        if manifest.entry(name).is_some() || self.status_in(&manifest, name)? == Status::Absent {
            return Ok(());
        }
        let (sub, file) = self.parent_of(name, false)?;
        let dir = sub.as_ref().unwrap_or(&self.dir);
        let Ok(Some((bytes, inode))) = read_regular(dir, file, 256 << 20) else {
            return Ok(());
        };
        if !legacy(&bytes) {
            return Ok(());
        }
        manifest.settle(name, kind, Version::of(kind, inode, &bytes));
        self.save_manifest(&manifest)
    }

    /// Opens the lock file `name` for reading and writing: created new (holding `marker`), or opened only if it
    /// is ours (or an older ssdlab's, by `legacy`). The caller locks it; the holder is named by /proc/locks.
    pub fn open_lock(
        &self,
        name: &str,
        marker: &[u8],
        legacy: fn(&[u8]) -> bool,
    ) -> Result<File, OutputError> {
        let _lock = self.lock()?;
        let mut manifest = self.manifest()?;
        let (sub, file) = self.parent_of(name, true)?;
        let dir = sub.as_ref().unwrap_or(&self.dir);
        if self.status_in(&manifest, name)? == Status::Absent {
            self.create_new(&mut manifest, dir, name, file, Kind::Lock, marker)?;
        }
        self.open_judged(&mut manifest, name, Kind::Lock, legacy, OFlags::RDWR)
    }

    /// Creates `name` (the file `file` in `dir`) holding `bytes`: written beside, recorded in the manifest, then
    /// renamed where nothing is (never over anything). Called with the directory's lock held.
    fn create_new(
        &self,
        manifest: &mut Manifest,
        dir: &File,
        name: &str,
        file: &str,
        kind: Kind,
        bytes: &[u8],
    ) -> Result<(), OutputError> {
        let path = self.path.join(name);
        let (tmp, inode) = new_temporary(dir, file, bytes).map_err(io_error(&path, "cannot write"))?;
        manifest.settle(name, kind, Version::of(kind, inode, bytes));
        self.save_manifest(manifest)?;
        rustix::fs::renameat_with(dir, tmp.as_str(), dir, file, RenameFlags::NOREPLACE).map_err(|e| {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
            io_error(&path, "cannot create")(e.into())
        })?;
        dir.sync_all()
            .map_err(io_error(&path, "cannot sync the directory"))
    }

    /// Opens `name` with `flags` if it is ours of `kind`, taking on an older ssdlab's file `legacy` accepts (one
    /// the manifest names no version of); the descriptor opened is checked to be the file judged. Called with
    /// the directory's lock held.
    fn open_judged(
        &self,
        manifest: &mut Manifest,
        name: &str,
        kind: Kind,
        legacy: fn(&[u8]) -> bool,
        flags: OFlags,
    ) -> Result<File, OutputError> {
        let path = self.path.join(name);
        let (sub, file) = self.parent_of(name, false)?;
        let dir = sub.as_ref().unwrap_or(&self.dir);
        match self.status_in(manifest, name)? {
            Status::Ours(k) if k == kind => {}
            Status::Ours(k) => {
                return Err(OutputError::NotOurs {
                    path,
                    kind,
                    why: format!("it is ssdlab's {k}, not a {kind}"),
                });
            }
            Status::Absent => {
                return Err(OutputError::NotOurs {
                    path,
                    kind,
                    why: "it went away while ssdlab opened it".into(),
                });
            }
            Status::Theirs(why) => {
                let legacy_bytes = match manifest.entry(name) {
                    None => read_regular(dir, file, 64 << 20)
                        .ok()
                        .flatten()
                        .filter(|(b, _)| legacy(b)),
                    Some(_) => None,
                };
                let Some((bytes, inode)) = legacy_bytes else {
                    return Err(OutputError::NotOurs { path, kind, why });
                };
                manifest.settle(name, kind, Version::of(kind, inode, &bytes));
                self.save_manifest(manifest)?;
            }
        }
        let fd = rustix::fs::openat(
            dir,
            file,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| io_error(&path, "cannot open")(e.into()))?;
        let opened = File::from(fd);
        // The file opened must be the one judged: the directory's lock keeps other ssdlab processes out, not other
        // programs.
        let held = rustix::fs::fstat(&opened).map(|s| s.st_ino).ok();
        let listed = manifest
            .entry(name)
            .is_some_and(|e| e.versions.iter().any(|v| Some(v.inode) == held));
        if !listed {
            return Err(OutputError::NotOurs {
                path,
                kind,
                why: "another program replaced it while ssdlab opened it".into(),
            });
        }
        Ok(opened)
    }
}

/// Whether `bytes` are lines an older ssdlab wrote to a file that grows (a journal, a log, a history) before it
/// kept a manifest: every line but a torn last one is one of its records (`record` says which lines are), and
/// the last one at least starts as a record does (`start`). Each kind passes its own record type, so a file of
/// the user's that merely holds JSON is never taken on.
pub fn older_lines(bytes: &[u8], record: impl Fn(&[u8]) -> bool, start: &[u8]) -> bool {
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let Some((last, whole)) = lines.split_last() else {
        return true;
    };
    whole.iter().filter(|l| !l.is_empty()).all(|l| record(l)) && (last.is_empty() || last.starts_with(start))
}

/// The process holding a flock on `file`, as /proc/locks names it (by the file's inode, and its device where
/// the kernel's number is the one `stat` gives), or None when none is found.
pub fn lock_holder(file: &File) -> Option<u32> {
    let stat = rustix::fs::fstat(file).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = format!(
        "{:02x}:{:02x}:",
        rustix::fs::major(stat.st_dev),
        rustix::fs::minor(stat.st_dev)
    );
    let candidates: Vec<(bool, u32)> = locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(1) != Some(&"FLOCK") {
                return None;
            }
            let (pid, id) = (fields.get(4)?, fields.get(5)?);
            let ino = id.rsplit(':').next()?.parse::<u64>().ok()?;
            (ino == stat.st_ino).then(|| Some((id.starts_with(&dev), pid.parse().ok()?)))?
        })
        .collect();
    candidates
        .iter()
        .find(|(same_dev, _)| *same_dev)
        .or(candidates.first())
        .map(|(_, pid)| *pid)
}

impl Version {
    /// The version of `bytes` written as `kind` under `inode`: its length and checksum, or for a file that grows,
    /// the checksum of its first line alone.
    fn of(kind: Kind, inode: u64, bytes: &[u8]) -> Version {
        Version {
            inode,
            bytes: (!kind.grows()).then_some(bytes.len() as u64),
            checksum: if kind.grows() {
                checksum(first_line(bytes))
            } else {
                checksum(bytes)
            },
        }
    }
}

/// Whether the file `file` in `dir` is a version of ours `entry` accepts: None when it is, else why not.
fn judge(dir: &File, file: &str, entry: &manifest::Entry) -> Option<String> {
    let stat = match rustix::fs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(e) => return Some(format!("it cannot be examined: {e}")),
    };
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Some("it is not a regular file".into());
    }
    // Several versions may share the inode (a growing file's first line recorded before it is written): any
    // that matches makes it ours.
    let versions: Vec<&Version> = entry.versions.iter().filter(|v| v.inode == stat.st_ino).collect();
    if versions.is_empty() {
        return Some("it is another file than the one ssdlab wrote there".into());
    }
    let sized: Vec<&&Version> = versions
        .iter()
        .filter(|v| v.bytes.is_none_or(|b| b == stat.st_size as u64))
        .collect();
    if sized.is_empty() {
        return Some("it was changed since ssdlab wrote it: its length differs".into());
    }
    let sum = if entry.kind.grows() {
        first_line_checksum(dir, file)
    } else {
        read_regular(dir, file, u64::MAX)
            .ok()
            .flatten()
            .map(|(bytes, _)| checksum(&bytes))
    };
    if !sized.iter().any(|v| sum == Some(v.checksum)) {
        return Some("it was changed since ssdlab wrote it".into());
    }
    None
}

/// `name` as (subdirectory, file): one level down at most, no `..`, no empty or hidden-dot components.
fn split_name(name: &str) -> Option<(Option<&str>, &str)> {
    let parts: Vec<&str> = name.split('/').collect();
    let fine = |p: &&str| !p.is_empty() && *p != "." && *p != "..";
    match parts.as_slice() {
        [file] if fine(file) => Some((None, file)),
        [sub, file] if fine(sub) && fine(file) => Some((Some(sub), file)),
        _ => None,
    }
}

/// A name beside `file` that nobody can have planted for it.
fn private_name(file: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        ".ssdlab-aside.{}-{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        file.chars().take(40).collect::<String>()
    )
}

/// Writes `bytes` to a new file beside `name` in `dir` (O_EXCL, an unpredictable name, synced) and returns its
/// name and inode.
fn new_temporary(dir: &File, name: &str, bytes: &[u8]) -> io::Result<(String, u64)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // At most 40 characters of the name: a name near the 255-byte limit must leave room for the rest.
    let tmp = format!(
        ".{}.{}-{nanos:x}-{}.ssdlab-tmp",
        name.chars().take(40).collect::<String>(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let fd = rustix::fs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut file = File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    let inode = rustix::fs::fstat(&file)?.st_ino;
    Ok((tmp, inode))
}

/// The bytes of the regular file `name` in `dir` (never a symlink's target, never a FIFO's wait) and its inode;
/// None when there is none. At most `max_bytes`.
fn read_regular(dir: impl AsFd, name: &str, max_bytes: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    // Sized from the start: a manifest or journal read in growing pieces costs a dozen reads.
    let mut bytes = Vec::with_capacity((stat.st_size as u64).min(max_bytes).min(1 << 20) as usize + 1);
    File::from(fd).take(max_bytes).read_to_end(&mut bytes)?;
    Ok(Some((bytes, stat.st_ino)))
}

/// The first line of `bytes` (with its newline), at most 64 KiB.
fn first_line(bytes: &[u8]) -> &[u8] {
    let head = &bytes[..bytes.len().min(64 << 10)];
    match head.iter().position(|&b| b == b'\n') {
        Some(at) => &head[..=at],
        None => head,
    }
}

fn first_line_checksum(dir: &File, name: &str) -> Option<u64> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    appender::read_first_line(&File::from(fd)).map(|line| checksum(&line))
}

#[cfg(test)]
mod tests;
