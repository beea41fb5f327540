//! The one directory walker that scan and refresh share: regular files under the paths given, on the file
//! system of each path, never through a symlink, in name order, reading directories with O_NOATIME so a walk
//! moves no access time. Hard links are reported once. Paths are bytes (names need not be UTF-8).
//!
//! It never opens a regular file and never decides what is stale; it only lists, and checks a path whose files
//! will be rewritten ([`check_write_root`]). A caller that wants only some files says which as the walk goes
//! ([`walk_keeping`]), so a walk over a million files holds only the ones kept, not a list of them all.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::pinned::{Identity, Time, identity_of_path};

/// A regular file found by the walk.
#[derive(Debug, Clone)]
pub struct Walked {
    /// The path given that led here.
    pub root: PathBuf,
    pub path: PathBuf,
    pub dev: u64,
    pub identity: Identity,
    pub size_bytes: u64,
    pub mtime: Time,
}

/// Files found, and what was passed over and why.
#[derive(Debug, Default)]
pub struct WalkOutput {
    pub files: Vec<Walked>,
    pub skipped: Vec<(PathBuf, String)>,
}

/// Why a path given to a command that rewrites the files under it is refused before anything is walked.
#[derive(Debug)]
pub enum RootRefusal {
    /// Nothing is at the path.
    Missing,
    /// A component of the path is a symbolic link; `real` is where it resolves, when it does.
    ThroughSymlink { real: Option<PathBuf> },
    /// The path is on a pseudo file system of the kernel (its name).
    PseudoFileSystem(&'static str),
    /// Its file system could not be told.
    FileSystemUnknown(io::Error),
}

/// Checks a path whose files will be rewritten, before anything under it is opened: it exists; no component is
/// a symbolic link (a trailing slash after a link included), as for every write; and it is not on a pseudo file
/// system, whose files (sysfs, procfs and their kind) are kernel state rather than data on a drive, and reading
/// some of them has effects.
pub fn check_write_root(path: &Path) -> Result<(), RootRefusal> {
    if std::fs::symlink_metadata(path).is_err() {
        return Err(RootRefusal::Missing);
    }
    if let Err(e) = crate::sys::open_no_symlinks(path, libc::O_PATH)
        && e.raw_os_error() == Some(libc::ELOOP)
    {
        return Err(RootRefusal::ThroughSymlink {
            real: std::fs::canonicalize(path).ok(),
        });
    }
    match crate::files::pseudo_file_system(path) {
        Ok(Some(kind)) => Err(RootRefusal::PseudoFileSystem(kind)),
        Ok(None) => Ok(()),
        Err(e) => Err(RootRefusal::FileSystemUnknown(e)),
    }
}

/// Lists the entries of a directory without moving its access time (O_NOATIME where we own it or are root;
/// otherwise the directory is passed over unless `allow_atime`).
fn list_dir(path: &Path, allow_atime: bool) -> io::Result<Vec<PathBuf>> {
    use rustix::fs::{Dir, Mode, OFlags, open};
    use rustix::io::Errno;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match open(path, flags | OFlags::NOATIME, Mode::empty()) {
        Err(Errno::PERM) if !allow_atime => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not ours: reading it would move its access time (--allow-atime permits that)",
            ));
        }
        Err(Errno::PERM) => open(path, flags, Mode::empty())?,
        other => other?,
    };
    let mut names = Vec::new();
    // An entry that cannot be read ends the listing, as the end of the directory does.
    for entry in Dir::new(fd)?.map_while(Result::ok) {
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." {
            names.push(path.join(OsStr::from_bytes(bytes)));
        }
    }
    names.sort();
    Ok(names)
}

/// The mount a path is on (statx's mount id, Linux 5.8), without following a final symlink; None where the kernel
/// does not say.
fn mount_id(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let sx = crate::sys::statx(
        rustix::fs::CWD,
        &c_path,
        libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_MNT_ID,
    )
    .ok()?;
    (sx.stx_mask & libc::STATX_MNT_ID != 0).then_some(sx.stx_mnt_id)
}

/// Walks `roots`; `exclude` lists (dev, ino) of directories never to enter (the state directory).
pub fn walk(roots: &[PathBuf], exclude: &[(u64, u64)], allow_atime: bool) -> io::Result<WalkOutput> {
    walk_keeping(roots, exclude, allow_atime, |_| true)
}

/// [`walk`], keeping only the files `keep` accepts as they are found: the others are never held, so the walk's
/// memory is that of the files kept, of the directories (each is entered once) and of the files with several
/// links, whatever the tree holds. A file is still reported once: `keep` sees its first path only.
pub fn walk_keeping(
    roots: &[PathBuf],
    exclude: &[(u64, u64)],
    allow_atime: bool,
    keep: impl FnMut(&Walked) -> bool,
) -> io::Result<WalkOutput> {
    let mut walker = Walker {
        exclude,
        allow_atime,
        keep,
        out: WalkOutput::default(),
        seen: HashSet::new(),
        dirs_entered: HashSet::new(),
        // Files given as roots: a directory given too may hold them, in either order.
        file_roots: roots
            .iter()
            .filter_map(|r| std::fs::symlink_metadata(r).ok())
            .filter(|m| m.file_type().is_file())
            .map(|m| (m.dev(), m.ino()))
            .collect(),
    };
    for root in roots {
        walker.root(root)?;
    }
    Ok(walker.out)
}

/// One walk's state across its roots.
struct Walker<'a, K> {
    exclude: &'a [(u64, u64)],
    allow_atime: bool,
    keep: K,
    out: WalkOutput,
    /// Files met that may be met again (several links, or given as a root).
    seen: HashSet<(u64, u64)>,
    dirs_entered: HashSet<(u64, u64)>,
    file_roots: HashSet<(u64, u64)>,
}

/// Where one root's walk is.
struct RootWalk<'r> {
    root: &'r Path,
    dev: u64,
    mount: Option<u64>,
    stack: Vec<PathBuf>,
    /// Mount points inside the tree on the same file system (bind mounts of part of it), walked after the rest
    /// of the root: a directory reached both ways is then met first where it is (a path refresh can open beneath
    /// the root without crossing a mount), and through the bind mount only when its source is outside.
    mounted_inside: Vec<PathBuf>,
    /// The rest of the root is walked and the mount points put off are being entered.
    draining: bool,
}

impl<K: FnMut(&Walked) -> bool> Walker<'_, K> {
    fn root(&mut self, root: &Path) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(root)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display())))?;
        if meta.file_type().is_symlink() {
            self.out
                .skipped
                .push((root.to_path_buf(), "a symbolic link (never followed)".into()));
            return Ok(());
        }
        let mut at = RootWalk {
            root,
            dev: meta.dev(),
            mount: mount_id(root),
            stack: vec![root.to_path_buf()],
            mounted_inside: Vec::new(),
            draining: false,
        };
        loop {
            let Some(path) = at.stack.pop().or_else(|| {
                at.draining = true;
                let deferred = std::mem::take(&mut at.mounted_inside);
                at.stack.extend(deferred.into_iter().rev());
                at.stack.pop()
            }) else {
                return Ok(());
            };
            self.visit(path, &mut at);
        }
    }

    fn visit(&mut self, path: PathBuf, at: &mut RootWalk<'_>) {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                self.out.skipped.push((path, format!("cannot stat: {e}")));
                return;
            }
        };
        let kind = meta.file_type();
        let id = (meta.dev(), meta.ino());
        if kind.is_symlink() {
            self.out
                .skipped
                .push((path, "a symbolic link (never followed)".into()));
        } else if meta.dev() != at.dev {
            self.out.skipped.push((path, "on another file system".into()));
        } else if kind.is_dir() {
            self.directory(path, id, at);
        } else if !kind.is_file() {
            self.out.skipped.push((path, "not a regular file".into()));
        } else if !self.seen.contains(&id) {
            // (Another link of a file already met, or a file given as a root met again, is reported once.)
            self.file(path, &meta, at.root);
        }
    }

    fn directory(&mut self, path: PathBuf, id: (u64, u64), at: &mut RootWalk<'_>) {
        if self.exclude.contains(&id) {
            self.out
                .skipped
                .push((path, "ssdlab's own state directory".into()));
            return;
        }
        // Every mount point met before the rest of the root is walked is put off (two bind mounts of one directory
        // included); once their turn comes they are entered like any directory, each once.
        if !at.draining && at.mount.is_some() && mount_id(&path) != at.mount {
            at.mounted_inside.push(path);
            return;
        }
        // A directory met again (roots that overlap, a path given twice, a bind mount inside the tree) is walked
        // once, so its files are reported once.
        if !self.dirs_entered.insert(id) {
            return;
        }
        match list_dir(&path, self.allow_atime) {
            Ok(entries) => at.stack.extend(entries.into_iter().rev()),
            Err(e) => self.out.skipped.push((path, format!("cannot list: {e}"))),
        }
    }

    fn file(&mut self, path: PathBuf, meta: &std::fs::Metadata, root: &Path) {
        let identity = match identity_of_path(&path) {
            Ok(id) => id,
            Err(e) => {
                self.out.skipped.push((path, format!("cannot stat: {e}")));
                return;
            }
        };
        let id = (meta.dev(), meta.ino());
        let file = Walked {
            root: root.to_path_buf(),
            dev: meta.dev(),
            identity,
            size_bytes: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            path,
        };
        if meta.nlink() > 1 || self.file_roots.contains(&id) {
            // A file of one link is met once, each directory being walked once; one with other links, or one
            // given as a root, may be met again and is remembered.
            self.seen.insert(id);
        }
        if (self.keep)(&file) {
            self.out.files.push(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_utf8_are_walked_and_symlinks_skipped() {
        let dir = std::env::temp_dir().join(format!("ssdlab-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let odd = dir.join(OsStr::from_bytes(b"caf\xe9"));
        std::fs::write(&odd, b"x").unwrap();
        std::fs::write(dir.join("sub/a"), b"y").unwrap();
        std::os::unix::fs::symlink("sub/a", dir.join("link")).unwrap();
        let out = walk(std::slice::from_ref(&dir), &[], false).unwrap();
        let names: Vec<_> = out.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(names, vec![odd, dir.join("sub/a")]);
        assert_eq!(out.skipped.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_walk_keeps_only_what_its_caller_keeps_and_hard_links_once() {
        let dir = std::env::temp_dir().join(format!("ssdlab-walk-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("big"), vec![1u8; 8192]).unwrap();
        std::fs::write(dir.join("small"), b"x").unwrap();
        std::fs::write(dir.join("sub/big2"), vec![2u8; 8192]).unwrap();
        std::fs::hard_link(dir.join("big"), dir.join("sub/big-link")).unwrap();
        let mut asked = Vec::new();
        let out = walk_keeping(std::slice::from_ref(&dir), &[], false, |f| {
            asked.push(f.path.clone());
            f.size_bytes >= 4096
        })
        .unwrap();
        let names: Vec<_> = out.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(names, vec![dir.join("big"), dir.join("sub/big2")]);
        assert_eq!(asked.len(), 3, "the second link is not asked about: {asked:?}");
        // Roots that overlap, a directory given twice and a file given as a root are each walked once.
        let roots = vec![dir.join("sub"), dir.clone(), dir.join("sub"), dir.join("small")];
        let out = walk(&roots, &[], false).unwrap();
        let mut names: Vec<_> = out.files.iter().map(|f| f.path.clone()).collect();
        names.sort();
        // The first path met is the one reported: "sub" is walked first, so the link stands for "big".
        assert_eq!(
            names,
            vec![dir.join("small"), dir.join("sub/big-link"), dir.join("sub/big2")],
            "{names:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
