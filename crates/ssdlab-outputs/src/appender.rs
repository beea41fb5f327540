//! A file that grows by appending (a journal, a log), kept open between appends so that a line costs a few
//! system calls rather than a reading of the manifest and two judgements of the file.
//!
//! The first append goes through [`OutputDir::append`], the whole rule: the file is created new, or appended to
//! only when the manifest proves it ours. The file is then opened and kept only if the manifest lists its inode
//! with the checksum of its first line, as read through the kept descriptor; with it are kept its inode, its
//! length when judged and its first line. Every later append checks, on the kept descriptor
//! and the name, that all three still hold (the name still leads to that inode, no one appended to or cut the
//! file, its first line is the one the manifest accepted) before it writes; a file that fails any of them is let
//! go and the append goes through the whole rule again, which says why the file is not ours.
//!
//! It never keeps a file the manifest does not vouch for, and never writes to a file whose length differs from the
//! length it had when judged plus the lines appended since.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::{Kind, OutputDir, OutputError, first_line, io_error, split_name};
use ssdlab_core::checksum::checksum;

/// Appends lines to one file of an [`OutputDir`] under ssdlab's output rule, keeping the file open between
/// appends (see the module's documentation).
#[derive(Debug)]
pub struct Appender {
    dir: OutputDir,
    name: String,
    kind: Kind,
    legacy: fn(&[u8]) -> bool,
    kept: Option<Kept>,
}

/// The file the last append wrote, judged ours, with what made it ours.
#[derive(Debug)]
struct Kept {
    file: File,
    inode: u64,
    size_bytes: u64,
    first_line: Vec<u8>,
}

impl OutputDir {
    /// An appender of `name` (of `kind`, which grows by appending) in this directory; `legacy` as for
    /// [`OutputDir::append`]. Nothing is opened or written until the first append.
    pub fn appender(
        &self,
        name: &str,
        kind: Kind,
        legacy: fn(&[u8]) -> bool,
    ) -> Result<Appender, OutputError> {
        assert!(kind.grows(), "only a file that grows by appending is appended to");
        let dir = self
            .dir
            .try_clone()
            .map_err(io_error(&self.path, "cannot hold the directory"))?;
        Ok(Appender {
            dir: OutputDir {
                path: self.path.clone(),
                dir,
            },
            name: name.to_string(),
            kind,
            legacy,
            kept: None,
        })
    }
}

impl Appender {
    /// Appends `bytes` (whole lines), synced to the medium when `sync` is set; as [`OutputDir::append`] does.
    pub fn append(&mut self, bytes: &[u8], sync: bool) -> Result<(), OutputError> {
        if let Some(kept) = self.kept.as_mut()
            && kept.still_ours(&self.dir.dir, &self.name)
        {
            let path = self.dir.path.join(&self.name);
            let written = kept.file.write_all(bytes);
            if let Err(e) = written {
                // How much of the line landed is not known: the next append judges the file whole again.
                self.kept = None;
                return Err(io_error(&path, "cannot append")(e));
            }
            kept.size_bytes += bytes.len() as u64;
            if sync && let Err(e) = kept.file.sync_data() {
                self.kept = None;
                return Err(io_error(&path, "cannot sync")(e));
            }
            return Ok(());
        }
        self.kept = None;
        self.dir.append(&self.name, self.kind, bytes, sync, self.legacy)?;
        // Keeping the file is a saving, not a promise: when it cannot be kept, the next append takes the whole
        // rule again.
        self.kept = Kept::judged(&self.dir, &self.name, self.kind);
        Ok(())
    }

    /// Lets go of the kept file: its name is about to be given to another file (a compaction replacing it).
    pub fn release(&mut self) {
        self.kept = None;
    }
}

impl Kept {
    /// Opens `name` (in the directory itself, not below it) and keeps it only if the file opened is ours of
    /// `kind` by the manifest itself (its inode listed, with the checksum of the first line read through the
    /// descriptor) and the name still leads to it.
    fn judged(dir: &OutputDir, name: &str, kind: Kind) -> Option<Kept> {
        let (None, file_name) = split_name(name)? else {
            return None;
        };
        let fd = rustix::fs::openat(
            &dir.dir,
            file_name,
            OFlags::RDWR | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let file = File::from(fd);
        let stat = rustix::fs::fstat(&file).ok()?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return None;
        }
        let first = read_first_line(&file)?;
        // The descriptor's own file judged as the rule judges a name: one of the manifest's versions of `name`
        // has its inode and its first line (a growing file's versions are known by their first line).
        let manifest = dir.manifest().ok()?;
        let entry = manifest.entry(name)?;
        let sum = checksum(&first);
        let listed = entry.kind == kind
            && entry
                .versions
                .iter()
                .any(|v| v.inode == stat.st_ino && v.checksum == sum);
        let named = rustix::fs::statat(&dir.dir, file_name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if !listed || named.st_ino != stat.st_ino {
            return None;
        }
        Some(Kept {
            inode: stat.st_ino,
            size_bytes: stat.st_size as u64,
            first_line: first,
            file,
        })
    }

    /// Whether the file is still the one judged ours: the name leads to it, its length is what our last line
    /// left, and its first line is unchanged.
    fn still_ours(&self, dir: &File, name: &str) -> bool {
        let named = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
        let held = rustix::fs::fstat(&self.file);
        let (Ok(named), Ok(held)) = (named, held) else {
            return false;
        };
        if named.st_ino != self.inode
            || held.st_ino != self.inode
            || held.st_size as u64 != self.size_bytes
            || rustix::fs::FileType::from_raw_mode(named.st_mode) != rustix::fs::FileType::RegularFile
        {
            return false;
        }
        let mut head = vec![0u8; self.first_line.len()];
        self.file.read_exact_at(&mut head, 0).is_ok() && head == self.first_line
    }
}

/// The first line of the open file (with its newline), at most 64 KiB, read from its start.
pub(crate) fn read_first_line(file: &File) -> Option<Vec<u8>> {
    let mut head = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        let got = file.read_at(&mut head[filled..], filled as u64).ok()?;
        filled += got;
        if got == 0 || head[..filled].contains(&b'\n') || filled >= 64 << 10 {
            break;
        }
        if filled == head.len() {
            head.resize((head.len() * 2).min(64 << 10), 0);
        }
    }
    Some(first_line(&head[..filled]).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    fn json_lines(b: &[u8]) -> bool {
        b.split(|&c| c == b'\n')
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with(b"{"))
    }

    fn read(path: &std::path::Path) -> Vec<u8> {
        std::fs::read(path).unwrap()
    }

    #[test]
    fn the_file_is_kept_between_appends_and_let_go_when_it_is_no_longer_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = OutputDir::create(tmp.path()).unwrap();
        let path = tmp.path().join("j.jsonl");
        let mut appender = dir.appender("j.jsonl", Kind::Journal, json_lines).unwrap();
        appender.append(b"{\"a\":1}\n", true).unwrap();
        assert!(appender.kept.is_some(), "the first append's file is kept");
        appender.append(b"{\"a\":2}\n", false).unwrap();
        assert!(appender.kept.is_some());
        assert_eq!(read(&path), b"{\"a\":1}\n{\"a\":2}\n");
        assert_eq!(dir.status("j.jsonl").unwrap(), Status::Ours(Kind::Journal));

        // Another program appends: the kept length no longer holds, and the append takes the whole rule again
        // (for a file that grows, the manifest vouches for its first line, so it is still ours).
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"b\":1}\n")
            .unwrap();
        appender.append(b"{\"a\":3}\n", true).unwrap();
        assert_eq!(read(&path), b"{\"a\":1}\n{\"a\":2}\n{\"b\":1}\n{\"a\":3}\n");
        // Judged again, the file is kept with its new length: the next line goes by the kept descriptor.
        let kept = appender.kept.as_ref().expect("kept again");
        assert_eq!(kept.size_bytes, read(&path).len() as u64);

        // The first line rewritten in place, same length: not ours, nothing appended, and not kept.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"z\":9}\n")
            .unwrap();
        let before = read(&path);
        assert!(appender.append(b"{\"a\":4}\n", true).is_err());
        assert!(appender.kept.is_none());
        assert_eq!(read(&path), before);
    }

    #[test]
    fn a_file_put_under_the_name_while_kept_is_never_appended_to() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = OutputDir::create(tmp.path()).unwrap();
        let path = tmp.path().join("j.jsonl");
        let mut appender = dir.appender("j.jsonl", Kind::Journal, json_lines).unwrap();
        appender.append(b"{\"a\":1}\n", true).unwrap();
        // A user's file renamed over ours, with the same first line: the kept descriptor still leads to our
        // (now unnamed) file, and the name to theirs.
        let theirs = tmp.path().join("theirs");
        std::fs::write(&theirs, b"{\"a\":1}\n").unwrap();
        std::fs::rename(&theirs, &path).unwrap();
        assert!(appender.append(b"{\"a\":2}\n", true).is_err());
        assert_eq!(read(&path), b"{\"a\":1}\n");
        // A symbolic link planted under the name is not followed either.
        std::fs::remove_file(&path).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"{\"a\":1}\n").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(appender.append(b"{\"a\":3}\n", true).is_err());
        assert_eq!(read(&victim), b"{\"a\":1}\n");
        // Released before a compaction replaces it, then kept again after the next append.
        std::fs::remove_file(&path).unwrap();
        appender.release();
        appender.append(b"{\"c\":1}\n", true).unwrap();
        assert!(appender.kept.is_some());
        assert_eq!(read(&path), b"{\"c\":1}\n");
    }
}
