//! Which other processes use a file or a block device right now, the way `fuser` and `lsof` see it: a process
//! that holds it open (/proc/PID/fd), maps it (/proc/PID/maps) or holds a lock on it (/proc/locks).
//!
//! This module owns that one survey and nothing else. A virtual machine (QEMU opens images without O_EXCL and
//! takes OFD locks), a FUSE daemon serving a file system out of an image, `qemu-nbd` exporting a loop device:
//! none of them shows in the mount table or claims a device exclusively, and each is found here by the
//! identities of what it holds, never by its name. Files are matched by device and inode (both the number
//! `stat` gives and the superblock's, which /proc/locks, maps and fdinfo use and which differs on btrfs), block
//! devices by their device number, whatever node they were opened through.
//!
//! It never changes anything and never opens what a process holds: it reads /proc and stats the descriptors'
//! magic links. ssdlab itself and the children it started (smartctl, nvme-cli) are not "another process". What
//! it cannot read (another user's /proc/PID/fd without root) it lists as unchecked, for the caller to say.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::Mutex;

use super::graph::DevNum;
use super::mounts::MountEntry;

/// The processes ssdlab itself started and has not reaped (smartctl, nvme-cli through the tools port): they are
/// not "another process". A process that merely has ssdlab's process id as its parent is not one of them: a
/// wrapper that starts a daemon and then execs ssdlab hands that daemon to ssdlab as a child.
static SPAWNED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Records a child ssdlab started, until [`reaped`].
pub fn spawned(pid: u32) {
    SPAWNED.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

/// Forgets a child ssdlab started, once it has been waited for.
pub fn reaped(pid: u32) {
    SPAWNED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&p| p != pid);
}

fn ours(pid: u32, me: u32) -> bool {
    pid == me || SPAWNED.lock().unwrap_or_else(|p| p.into_inner()).contains(&pid)
}

/// What to look for, each with the words a finding uses for it ("it", "/dev/loop3 (loop3 -> disk.img)").
#[derive(Debug, Default, Clone)]
pub struct Wanted {
    entries: Vec<(Key, String)>,
    /// Inode keys that name more than one file: on btrfs the superblock's device is every subvolume's, and
    /// inode numbers are per subvolume, so a match there is confirmed by `stat`'s identity, kept here.
    ambiguous: Vec<(Key, (u64, u64))>,
    /// Some file's superblock device was not known (its `stat` device stood in), so fdinfo's ids alone cannot
    /// rule a descriptor out: each one is stat'ed.
    inexact: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// A file by `stat`'s (st_dev, st_ino).
    Stat(u64, u64),
    /// A file or device node by its superblock's device and its inode, as /proc/locks, maps and fdinfo give them.
    Inode(DevNum, u64),
    /// A block device by number, through whatever node it was opened.
    Device(DevNum),
}

impl Wanted {
    /// A regular file: `stat`'s identity, and the superblock's device its mount shows (`superblock_dev`).
    pub fn file(&mut self, st_dev: u64, st_ino: u64, superblock_dev: Option<DevNum>, label: &str) {
        self.entries.push((Key::Stat(st_dev, st_ino), label.to_string()));
        self.inexact |= superblock_dev.is_none();
        let own = (libc::major(st_dev), libc::minor(st_dev));
        let sb = superblock_dev.unwrap_or(own);
        self.entries.push((Key::Inode(sb, st_ino), label.to_string()));
        if sb != own {
            self.ambiguous.push((Key::Inode(sb, st_ino), (st_dev, st_ino)));
        }
    }

    /// The `stat` identity an inode key's match must be confirmed by, when the key names more than one file.
    fn confirm(&self, key: Key) -> Option<(u64, u64)> {
        self.ambiguous.iter().find(|(k, _)| *k == key).map(|(_, id)| *id)
    }

    /// A block device, and the inode of its node under /dev where there is one (locks and maps name the node).
    pub fn device(&mut self, dev: DevNum, node: Option<(u64, u64)>, label: &str) {
        self.entries.push((Key::Device(dev), label.to_string()));
        if let Some((st_dev, st_ino)) = node {
            let sb = (libc::major(st_dev), libc::minor(st_dev));
            self.entries.push((Key::Inode(sb, st_ino), label.to_string()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn label(&self, key: Key) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, l)| l.as_str())
    }

    /// Whether a descriptor fdinfo has identified (and that matched nothing) must still be stat'ed.
    fn must_stat_identified(&self) -> bool {
        self.inexact || self.entries.iter().any(|(k, _)| matches!(k, Key::Device(_)))
    }

    fn wants_stat(&self, st_dev: u64, st_ino: u64, rdev: Option<DevNum>) -> Option<&str> {
        self.label(Key::Stat(st_dev, st_ino))
            .or_else(|| rdev.and_then(|d| self.label(Key::Device(d))))
    }
}

/// One use of a wanted object by another process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessUse {
    /// None for an open-file-description lock, which the kernel does not tie to a process in /proc/locks.
    pub pid: Option<u32>,
    pub command: String,
    /// "has it open for writing", "holds an OFD write lock on /dev/loop3 (...)", ...
    pub what: String,
    /// The object's label, as [`Wanted`] has it.
    object: String,
    /// An open descriptor that holds a lock on the object (fdinfo's "lock:" lines).
    locked: bool,
}

impl std::fmt::Display for ProcessUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "process {pid} ({}) {}", self.command, self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

/// What a survey found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Survey {
    pub uses: Vec<ProcessUse>,
    /// Processes whose descriptors and maps could not be read (another user's, without root): (pid, command).
    pub unchecked: Vec<(u32, String)>,
}

impl Survey {
    /// "3 processes of other users (1234 sshd, ...) could not be checked for open files: run as root to check
    /// them", or None. As root (`as_root`) the cause is not permissions, and root is not the advice: a process
    /// root cannot read is in another PID namespace or behind a security module.
    pub fn unchecked_note(&self, as_root: bool) -> Option<String> {
        if self.unchecked.is_empty() {
            return None;
        }
        let named: Vec<String> = self
            .unchecked
            .iter()
            .take(5)
            .map(|(pid, command)| format!("{pid} {command}"))
            .collect();
        let more = self.unchecked.len().saturating_sub(named.len());
        let (count, plural) = (
            self.unchecked.len(),
            if self.unchecked.len() == 1 { "" } else { "es" },
        );
        let more = if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        };
        let named = named.join(", ");
        Some(if as_root {
            format!(
                "{count} process{plural} ({named}{more}) could not be checked for open files or maps even as root \
                 (a security module such as Yama or SELinux, or another PID namespace, denies it); /proc/locks and \
                 the mount table were checked"
            )
        } else {
            format!(
                "{count} process{plural} of other users ({named}{more}) could not be checked for open files or maps \
                 (no permission); /proc/locks and the mount table were checked: run as root to check every process"
            )
        })
    }
}

/// Surveys every process under `proc_root` for the `wanted` objects. `mounts` (this namespace's mount table)
/// turns the mount id fdinfo gives into the superblock's device; `me` is ssdlab's own process id, whose
/// descriptors and children are not counted.
pub(crate) fn survey(proc_root: &Path, wanted: &Wanted, mounts: &[MountEntry], me: u32) -> Survey {
    let mut survey = Survey::default();
    if wanted.is_empty() {
        return survey;
    }
    let by_mount: HashMap<u64, &MountEntry> = mounts.iter().map(|m| (m.mount_id, m)).collect();
    let looking = Looking {
        wanted,
        by_mount: &by_mount,
    };
    let Ok(entries) = fs::read_dir(proc_root) else {
        return survey;
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    // The objects ssdlab itself (or a child) holds locked: an OFD lock on one of them, which /proc/locks does
    // not tie to a process, may be ssdlab's own.
    let mut locked_by_us: Vec<String> = Vec::new();
    for pid in pids {
        let dir = proc_root.join(pid.to_string());
        // Kernel threads hold no descriptors and map no files (and without root their /proc is unreadable).
        if is_kernel_thread(&dir) {
            continue;
        }
        if ours(pid, me) {
            locked_by_us.extend(looking.locked_objects(&dir));
            continue;
        }
        looking.survey_process(&mut survey, pid, &dir);
    }
    if let Ok(locks) = fs::read_to_string(proc_root.join("locks")) {
        add_lock_uses(&mut survey, proc_root, (&locks, wanted), me, &locked_by_us);
    }
    survey
}

/// What a survey looks for, and how a descriptor's mount id leads to its superblock's device.
struct Looking<'a> {
    wanted: &'a Wanted,
    by_mount: &'a HashMap<u64, &'a MountEntry>,
}

impl Looking<'_> {
    /// The wanted objects a process (ssdlab itself or its child) holds open and locked.
    fn locked_objects(&self, dir: &Path) -> Vec<String> {
        fs::read_dir(dir.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(
                |fd| match open_use(dir, &fd.path(), &fd.file_name(), self.wanted, self.by_mount) {
                    Ok(Some((object, _, true))) => Some(object),
                    _ => None,
                },
            )
            .collect()
    }

    /// Adds what one process holds open or mapped; a process whose descriptors or maps may not be read is
    /// listed as unchecked.
    fn survey_process(&self, survey: &mut Survey, pid: u32, dir: &Path) {
        let command = fs::read_to_string(dir.join("comm"))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|_| "?".into());
        let mut readable = true;
        // The leader's table, and each thread's where the leader has exited (its table is then empty, while the
        // threads still hold theirs).
        let mut tables = vec![dir.to_path_buf()];
        if leader_exited(dir) {
            tables.extend(
                fs::read_dir(dir.join("task"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|t| t.path())
                    .filter(|t| t.file_name().and_then(|n| n.to_str()) != Some(&pid.to_string())),
            );
        }
        for table in &tables {
            readable &= self.add_open_uses(survey, (pid, &command), table);
        }
        // The maps too: a leader that exited has none, its threads have the process's.
        let maps_of = tables.last().cloned().unwrap_or_else(|| dir.to_path_buf());
        match fs::read_to_string(maps_of.join("maps")) {
            Ok(maps) => {
                for label in mapped(&maps, self.wanted) {
                    let what = format!("has {label} mapped into its memory");
                    if !survey.uses.iter().any(|u| u.pid == Some(pid) && u.what == what) {
                        survey.uses.push(ProcessUse {
                            pid: Some(pid),
                            command: command.clone(),
                            what,
                            object: label.to_string(),
                            locked: false,
                        });
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => readable = false,
            Err(_) => {}
        }
        if !readable {
            survey.unchecked.push((pid, command));
        }
    }

    /// Adds the wanted objects one descriptor table holds open; false when some of it may not be read.
    fn add_open_uses(&self, survey: &mut Survey, (pid, command): (u32, &str), table: &Path) -> bool {
        let fds = match fs::read_dir(table.join("fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return false,
            // A process that ended meanwhile uses nothing.
            Err(_) => return true,
        };
        let mut readable = true;
        for fd in fds.flatten() {
            match open_use(table, &fd.path(), &fd.file_name(), self.wanted, self.by_mount) {
                Ok(Some((object, what, locked)))
                    if !survey.uses.iter().any(|u| u.pid == Some(pid) && u.what == what) =>
                {
                    survey.uses.push(ProcessUse {
                        pid: Some(pid),
                        command: command.to_string(),
                        what,
                        object,
                        locked,
                    });
                }
                Ok(_) => {}
                // A descriptor whose target may not be read (a process that is not dumpable, without
                // CAP_SYS_PTRACE): that process was not checked.
                Err(()) => readable = false,
            }
        }
        readable
    }
}

/// Adds the locks /proc/locks shows on wanted objects, but not ssdlab's own, nor a lock whose holder was
/// already named.
fn add_lock_uses(
    survey: &mut Survey,
    proc_root: &Path,
    (locks, wanted): (&str, &Wanted),
    me: u32,
    locked_by_us: &[String],
) {
    for (pid, object, what) in locked(locks, wanted) {
        let excluded = pid.is_some_and(|p| ours(p, me));
        if excluded {
            continue;
        }
        let command = pid
            .and_then(|p| fs::read_to_string(proc_root.join(p.to_string()).join("comm")).ok())
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|| "?".into());
        // A lock whose holder was already named adds nothing new to say: the same lock, or an OFD lock on an
        // object a process holds open and locked (its fdinfo lists the lock).
        let named =
            survey.uses.iter().any(|u| {
                (u.pid == pid && u.what == what) || (pid.is_none() && u.object == object && u.locked)
            }) || (pid.is_none() && locked_by_us.iter().any(|o| o == object));
        if !named {
            survey.uses.push(ProcessUse {
                pid,
                command,
                what,
                object: object.to_string(),
                locked: true,
            });
        }
    }
}

/// The fields of `stat` after the command's parenthesis (which may itself hold spaces and parentheses): state,
/// parent, ...
fn stat_fields(dir: &Path) -> Option<Vec<String>> {
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// Whether the thread group's leader has exited while other threads run on (state Z with threads left): its
/// /proc/PID/fd is then empty.
fn leader_exited(dir: &Path) -> bool {
    stat_fields(dir).is_some_and(|f| f.first().map(String::as_str) == Some("Z"))
        && fs::read_dir(dir.join("task")).is_ok_and(|tasks| tasks.count() > 1)
}

/// Whether the process whose /proc directory is `dir` is a kernel thread (PF_KTHREAD in `stat`'s flags, field 9).
fn is_kernel_thread(dir: &Path) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = fs::read_to_string(dir.join("stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    stat[close + 1..]
        .split_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// What one open descriptor says of a wanted object: its label, "has it open for writing", and whether the
/// descriptor holds a lock on it; None when it holds nothing wanted.
/// `Err` when the descriptor's target may not be read (permission): the process cannot be checked.
fn open_use(
    dir: &Path,
    link: &Path,
    fd: &std::ffi::OsStr,
    wanted: &Wanted,
    by_mount: &HashMap<u64, &MountEntry>,
) -> Result<Option<(String, String, bool)>, ()> {
    // Sockets, pipes and anonymous inodes ("socket:[123]") name no file.
    let target = match fs::read_link(link) {
        Ok(target) => target,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(()),
        // Closed meanwhile.
        Err(_) => return Ok(None),
    };
    if !target.as_os_str().as_encoded_bytes().starts_with(b"/") {
        return Ok(None);
    }
    let info = fs::read_to_string(dir.join("fdinfo").join(fd)).unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let flags = field("flags").and_then(|f| u32::from_str_radix(f, 8).ok());
    let mode = match flags {
        Some(f) if f & libc::O_PATH as u32 != 0 => "open by path (O_PATH: it can reopen it at any time)",
        Some(f) if f & libc::O_ACCMODE as u32 == libc::O_WRONLY as u32 => "open for writing",
        Some(f) if f & libc::O_ACCMODE as u32 == libc::O_RDWR as u32 => "open for reading and writing",
        Some(_) => "open for reading",
        None => "open",
    };
    let mount = field("mnt_id")
        .and_then(|m| m.parse::<u64>().ok())
        .and_then(|m| by_mount.get(&m));
    let ino = field("ino").and_then(|i| i.parse::<u64>().ok());
    // fdinfo lists the locks this descriptor holds ("lock:" lines): an OFD lock, which /proc/locks does not tie
    // to a process, is named here with its holder.
    let locked = info.lines().any(|l| l.starts_with("lock:"));
    let mode = if locked {
        format!("{mode}, and locked")
    } else {
        mode.to_string()
    };
    // The superblock's device and the inode, from fdinfo alone: no call reaches the file's file system (but for
    // an inode number another subvolume may share, confirmed by stat).
    if let (Some(mount), Some(ino)) = (mount, ino)
        && let Some(label) = wanted.label(Key::Inode(mount.dev, ino))
    {
        let confirmed = match wanted.confirm(Key::Inode(mount.dev, ino)) {
            None => true,
            Some(id) => fs::metadata(link).is_ok_and(|m| (m.dev(), m.ino()) == id),
        };
        if confirmed {
            return Ok(Some((label.to_string(), format!("has {label} {mode}"), locked)));
        }
    }
    // A descriptor on a FUSE or network file system is not stat'ed: a stat there waits on its daemon or server
    // (fdinfo above already answered for its files), and no block device node is opened through one.
    let remote = mount.is_some_and(|m| {
        m.fs_type.starts_with("fuse")
            || ["nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "sshfs"].contains(&m.fs_type.as_str())
    });
    let known = mount.is_some() && ino.is_some();
    if remote || (known && !wanted.must_stat_identified()) {
        return Ok(None);
    }
    let meta = match fs::metadata(link) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(()),
        Err(_) => return Ok(None),
    };
    let rdev = meta
        .file_type()
        .is_block_device()
        .then(|| (libc::major(meta.rdev()), libc::minor(meta.rdev())));
    Ok(wanted
        .wants_stat(meta.dev(), meta.ino(), rdev)
        .map(|label| (label.to_string(), format!("has {label} {mode}"), locked)))
}

/// The labels of wanted objects mapped in a maps text (its device field is the superblock's, in hex).
fn mapped<'a>(maps: &str, wanted: &'a Wanted) -> Vec<&'a str> {
    let mut found: Vec<&str> = Vec::new();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(dev), Some(ino)) = (fields.nth(3), fields.next()) else {
            continue;
        };
        let Ok(ino) = ino.parse::<u64>() else { continue };
        if ino == 0 {
            continue;
        }
        let Some(dev) = hex_dev(dev) else { continue };
        let Some(label) = wanted.label(Key::Inode(dev, ino)) else {
            continue;
        };
        // An inode number another subvolume may share: the mapped path, stat'ed, must be the file.
        if let Some(id) = wanted.confirm(Key::Inode(dev, ino)) {
            let path: Vec<&str> = fields.collect();
            let same =
                !path.is_empty() && fs::metadata(path.join(" ")).is_ok_and(|m| (m.dev(), m.ino()) == id);
            if !same {
                continue;
            }
        }
        if !found.contains(&label) {
            found.push(label);
        }
    }
    found
}

/// The locks of /proc/locks on wanted objects: (holder's pid where the kernel names one, what it holds).
///
/// Lines read `1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (major and minor in hex, the inode in decimal);
/// an OFD lock's pid is -1, and a line after `->` is a waiter, which holds nothing.
fn locked<'a>(locks: &str, wanted: &'a Wanted) -> Vec<(Option<u32>, &'a str, String)> {
    let mut found = Vec::new();
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&"->") || fields.len() < 6 {
            continue;
        }
        let (class, access, pid, id) = (fields[1], fields[3], fields[4], fields[5]);
        let mut parts = id.rsplitn(2, ':');
        let (Some(ino), Some(dev)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(ino), Some(dev)) = (ino.parse::<u64>(), hex_dev(dev)) else {
            continue;
        };
        let Some(label) = wanted.label(Key::Inode(dev, ino)) else {
            continue;
        };
        // /proc/locks names no path to confirm by: say so where the number may be another subvolume's file.
        let maybe = if wanted.confirm(Key::Inode(dev, ino)).is_some() {
            " (by its inode number on this btrfs file system; it may be another subvolume's file)"
        } else {
            ""
        };
        let kind = match class {
            "OFDLCK" => "an open-file-description",
            "POSIX" => "a POSIX",
            "FLOCK" => "a flock",
            "LEASE" | "DELEG" => "a lease (or delegation)",
            _ => "a",
        };
        let access = access.to_ascii_lowercase();
        match pid.parse::<i64>() {
            Ok(p) if p > 0 => found.push((
                Some(p as u32),
                label,
                format!("holds {kind} {access} lock on {label}{maybe}"),
            )),
            _ => found.push((
                None,
                label,
                format!(
                    "another program holds {kind} {access} lock on {label}{maybe} (the kernel does not say which)"
                ),
            )),
        }
    }
    found
}

/// "fd:01" (hex major:minor, as maps and /proc/locks write it) to numbers.
fn hex_dev(text: &str) -> Option<DevNum> {
    let (major, minor) = text.split_once(':')?;
    Some((
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    ))
}

/// The superblock's device of the mount `mount_id` (statx's `stx_mnt_id`), from the mount table.
pub(crate) fn superblock_dev(mounts: &[MountEntry], mount_id: u64) -> Option<DevNum> {
    mounts.iter().find(|m| m.mount_id == mount_id).map(|m| m.dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mounts_text(dev: DevNum) -> String {
        format!(
            "24 1 {}:{} / /data rw - ext4 /dev/sda1 rw\n30 1 0:50 / /fuse rw - fuse.sshfs host: rw\n",
            dev.0, dev.1
        )
    }

    /// A fake /proc: process 100 (ssdlab itself), 200 its child, 300 and 400 others, 500 unreadable.
    struct FakeProc {
        dir: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> Self {
            FakeProc {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn process(&self, pid: u32, parent: u32, comm: &str) -> std::path::PathBuf {
            let dir = self.dir.path().join(pid.to_string());
            fs::create_dir_all(dir.join("fd")).unwrap();
            fs::create_dir_all(dir.join("fdinfo")).unwrap();
            fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
            fs::write(dir.join("stat"), format!("{pid} ({comm}) S {parent} 1 1 0\n")).unwrap();
            fs::write(dir.join("maps"), "").unwrap();
            dir
        }

        fn open(&self, pid: u32, fd: u32, target: &Path, flags: &str, mnt_ino: Option<(u64, u64)>) {
            let dir = self.dir.path().join(pid.to_string());
            symlink(target, dir.join("fd").join(fd.to_string())).unwrap();
            let mut info = format!("pos:\t0\nflags:\t{flags}\n");
            if let Some((mnt, ino)) = mnt_ino {
                info.push_str(&format!("mnt_id:\t{mnt}\nino:\t{ino}\n"));
            }
            fs::write(dir.join("fdinfo").join(fd.to_string()), info).unwrap();
        }
    }

    #[test]
    fn openers_mappers_and_lockers_are_named_and_ssdlab_and_its_children_are_not() {
        let files = tempfile::tempdir().unwrap();
        let image = files.path().join("disk.img");
        let other = files.path().join("other.img");
        fs::write(&image, b"x").unwrap();
        fs::write(&other, b"y").unwrap();
        let meta = fs::metadata(&image).unwrap();
        // The file's own device is its superblock's here (not btrfs): matches need no confirming stat.
        let sb = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let hex = format!("{:02x}:{:02x}", sb.0, sb.1);
        let mut wanted = Wanted::default();
        wanted.file(meta.dev(), meta.ino(), Some(sb), "it");
        let proc = FakeProc::new();
        proc.process(100, 1, "ssdlab");
        proc.process(200, 100, "smartctl");
        spawned(200);
        // A daemon a wrapper started before it exec'ed ssdlab: ssdlab's child by its parent id, not ssdlab's own.
        proc.process(250, 100, "daemon");
        proc.process(300, 1, "qemu-nbd");
        proc.process(400, 1, "fuse2fs");
        proc.process(600, 1, "vim");
        // ssdlab and its child hold the image: not counted.
        proc.open(100, 3, &image, "0100002", None);
        proc.open(200, 3, &image, "0100000", None);
        proc.open(250, 3, &image, "0100000", None);
        // qemu-nbd: found by stat (no fdinfo ids); fuse2fs: found by fdinfo's mount id and inode alone.
        proc.open(300, 7, &image, "0100002", None);
        proc.open(
            400,
            4,
            Path::new("/nonexistent/renamed"),
            "0100000",
            Some((24, meta.ino())),
        );
        proc.open(600, 5, &other, "0100002", None);
        fs::write(
            proc.dir.path().join("600/maps"),
            format!("7f00-7f10 r--s 00000000 {hex} {} /data/disk.img\n", meta.ino()),
        )
        .unwrap();
        fs::write(
            proc.dir.path().join("locks"),
            format!(
                "1: OFDLCK ADVISORY  READ  -1 {hex}:{ino} 100 101\n2: POSIX  ADVISORY  WRITE 100 {hex}:{ino} 0 EOF\n\
                 3: -> FLOCK  ADVISORY  WRITE 600 {hex}:{ino} 0 EOF\n4: FLOCK  ADVISORY  WRITE 600 {hex}:99999 0 EOF\n",
                ino = meta.ino()
            ),
        )
        .unwrap();
        let mounts = super::super::mounts::parse_mountinfo(&mounts_text(sb));
        let found = survey(proc.dir.path(), &wanted, &mounts, 100);
        reaped(200);
        let text: Vec<String> = found.uses.iter().map(|u| u.to_string()).collect();
        assert_eq!(
            text,
            [
                "process 250 (daemon) has it open for reading",
                "process 300 (qemu-nbd) has it open for reading and writing",
                "process 400 (fuse2fs) has it open for reading",
                "process 600 (vim) has it mapped into its memory",
                "another program holds an open-file-description read lock on it (the kernel does not say which)",
            ]
        );
        assert!(found.unchecked.is_empty());
    }

    /// On btrfs the superblock's device is every subvolume's and inode numbers are per subvolume: a descriptor
    /// fdinfo places at the same (device, inode) is the file only if `stat` says so.
    #[test]
    fn an_inode_number_another_subvolume_shares_is_confirmed_by_stat() {
        let files = tempfile::tempdir().unwrap();
        let image = files.path().join("disk.img");
        let other = files.path().join("other.img");
        fs::write(&image, b"x").unwrap();
        fs::write(&other, b"y").unwrap();
        let meta = fs::metadata(&image).unwrap();
        let sb = (90u32, 1u32);
        let mut wanted = Wanted::default();
        wanted.file(meta.dev(), meta.ino(), Some(sb), "it");
        let proc = FakeProc::new();
        proc.process(300, 1, "reader");
        proc.process(400, 1, "holder");
        // Same superblock and inode number, another subvolume's file: not it.
        proc.open(300, 3, &other, "0100000", Some((24, meta.ino())));
        proc.open(400, 3, &image, "0100000", Some((24, meta.ino())));
        let mounts = super::super::mounts::parse_mountinfo(&mounts_text(sb));
        let found = survey(proc.dir.path(), &wanted, &mounts, 1);
        let text: Vec<String> = found.uses.iter().map(|u| u.to_string()).collect();
        assert_eq!(text, ["process 400 (holder) has it open for reading"]);
    }

    #[test]
    fn a_block_device_is_found_through_any_node_and_unreadable_processes_are_listed() {
        let proc = FakeProc::new();
        proc.process(300, 1, "qemu-system-x86");
        // /dev/null stands in for a device node: it is a character device, so it must not match a block device
        // of the same number.
        proc.open(300, 9, Path::new("/dev/null"), "0100002", None);
        let null = fs::metadata("/dev/null").unwrap();
        let mut wanted = Wanted::default();
        wanted.device((libc::major(null.rdev()), libc::minor(null.rdev())), None, "it");
        let found = survey(proc.dir.path(), &wanted, &[], 1);
        assert!(
            found.uses.is_empty(),
            "a character device is not a block device: {found:?}"
        );
        let note = Survey {
            uses: vec![],
            unchecked: vec![(5, "sshd".into()), (6, "cron".into())],
        }
        .unchecked_note(false)
        .unwrap();
        assert!(
            note.starts_with("2 processes of other users (5 sshd, 6 cron)")
                && note.ends_with("run as root to check every process"),
            "{note}"
        );
        let as_root = Survey {
            uses: vec![],
            unchecked: vec![(1, "process_api".into())],
        }
        .unchecked_note(true)
        .unwrap();
        assert!(
            as_root.starts_with("1 process (1 process_api) could not be checked")
                && !as_root.contains("run as root"),
            "{as_root}"
        );
    }

    #[test]
    fn hex_devices_and_parents_parse() {
        assert_eq!(hex_dev("fd:01"), Some((253, 1)));
        assert_eq!(hex_dev("103:0a"), Some((259, 10)));
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("stat"), "42 (a) b (c)) S 7 42 42 0\n").unwrap();
        assert_eq!(stat_fields(dir.path()).unwrap()[1], "7");
    }
}
