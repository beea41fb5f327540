//! Deciding whether a block device (or a file) is in use, before ssdlab writes to, discards or fills it.
//!
//! This module owns one question: what uses this device? It answers with a list of [`Finding`]s, each naming
//! one use and where it is: the device, a partition of it, or anything stacked on it at any depth (loop devices
//! at any offset, md, dm/LVM, bcache), under it, or beside it over the same bytes (another loop device over the
//! same file, by device and inode) is mounted, used as swap, held by the kernel or open exclusively by another
//! program; or the device carries a file system, volume or partition-table signature, as libblkid finds them
//! over the whole device. Identities decide, never names: device numbers, inodes, the loop driver's own account
//! of each loop device's backing, mountinfo by device number.
//!
//! A finding marked `in_use` is refused whatever the flags; the others are signs of past use the caller may let
//! `--force` override. [`uses_of_device`] and [`signature_findings`] are the gate's two questions, asked of a
//! device the caller already holds open exclusively; [`destructive_findings`] asks both of a path, for
//! `ssdlab devices` and previews, which print exactly its answer.
//!
//! It must never change anything: it never writes to a device and never opens one for writing. It reads sysfs
//! and /proc, asks loop devices for their backing (a read-only open), and probes exclusive claims with a
//! read-only exclusive open that it closes at once.

mod blkid;
mod gpt_backup;
pub mod graph;
mod mounts;
pub(crate) mod processes;
pub use processes::{reaped, spawned};

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

pub use blkid::{Signature, Usage, signatures};
use graph::{DevNum, Graph, Kind, Lower, Node, Relation};
pub use mounts::mounts_of;
use mounts::{MountEntry, list_mount_points, mount_points, overlay_of, parse_mountinfo};
pub(crate) use mounts::{mount_point_of, mount_type_of, swap_paths};

use crate::sys::LoopBacking;
use processes::{Survey, Wanted};

/// How long a use by another process is looked for again before it counts: a transient opener (udev probing a
/// device just set up or written, smartd's periodic open) goes away within it.
pub const TRANSIENT_USE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where sysfs is mounted; block devices are found under `SYS_ROOT/class/block`.
pub const SYS_ROOT: &str = "/sys";
/// Where procfs is mounted; `PROC_ROOT/self/mountinfo` and `PROC_ROOT/swaps` are read.
pub const PROC_ROOT: &str = "/proc";

/// One reason a device is in use. `Display` gives a sentence fragment such as
/// "/dev/loop3p1 is mounted at /mnt/data" or "it carries an ext4 file system (signature at byte 1080)".
///
/// "it" always means the device the caller asked about; other devices are named by their `/dev` path, and a
/// device reached through a stack says how, as a chain of kernel names where `a -> b` means `a` is stored on
/// `b` ("loop7 -> loop3", "loop5 -> disk.img <- loop3").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    /// The device is in use right now (mounted, swap, claimed by a holder or another exclusive opener): no flag
    /// overrides this. Otherwise the finding is a sign of past use (a signature, a partition table, a loop
    /// device over it that nothing uses) that `--force` may override.
    pub in_use: bool,
    /// The sign is a partition table (GPT or DOS). `op`, which keeps clear of every partition, lets `--force`
    /// override only these: a file system or volume on the whole device would lose its end.
    pub partition_table: bool,
}

impl Finding {
    fn past(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            in_use: false,
            partition_table: false,
        }
    }

    fn in_use(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            in_use: true,
            partition_table: false,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

/// Whether the caller already holds the device's exclusive claim (then a claim by anyone else is impossible)
/// or the guard should probe for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnClaim {
    HeldByCaller,
    Probe,
}

/// What uses the block device numbered `rdev` right now (its `st_rdev`): mounts, swap, holders, claims, loop
/// devices anywhere on its stack, and other processes holding it or a device over the same bytes open, mapped
/// or locked, as [`Finding`]s. Signatures are [`signature_findings`]' question. The caller that holds the
/// claim is about to write: a process use is then looked for again for up to [`TRANSIENT_USE_PATIENCE`].
pub fn uses_of_device(rdev: u64, claim: OwnClaim) -> io::Result<Vec<Finding>> {
    let probe = Probe::real();
    uses_with(&probe, split_dev(rdev), claim)
}

/// What uses the regular file at `path` (`st_dev`, `st_ino`: the caller's proof of which file that is) as a
/// disk: every loop device over it, at any depth of stacking, that is mounted, swapped on, held or claimed. A
/// loop device over it that nothing uses is no finding: the file is the user's to write. A file on an overlay
/// is judged by the layer file that holds its bytes, as loop devices' backings are.
pub fn uses_of_file(path: &Path, st_dev: u64, st_ino: u64) -> io::Result<Vec<Finding>> {
    let probe = Probe::real();
    let (st_dev, st_ino) = real_file_of(path, (st_dev, st_ino));
    file_uses_with(&probe, st_dev, st_ino)
}

/// Which other processes use the regular file open as `file` right now: hold it (or a loop device over it, or a
/// partition of one) open, map it, lock it, or serve a FUSE mount out of it. A use is looked for again for up to
/// `patience` before it counts (a transient opener goes away). ssdlab and the children it started are not
/// another process. Nothing here is overridden by any flag: the caller refuses every finding.
pub fn processes_using_file(file: &File, patience: std::time::Duration) -> io::Result<Vec<Finding>> {
    let probe = Probe::real();
    let meta = file.metadata()?;
    let graph = Graph::read(probe.sys_root, probe.loop_backing, probe.dm_table)?;
    let uses = Uses::read(&probe)?;
    let mount_id = crate::sys::statx(file, c"", libc::AT_EMPTY_PATH, libc::STATX_MNT_ID)
        .ok()
        .filter(|sx| sx.stx_mask & libc::STATX_MNT_ID != 0)
        .map(|sx| sx.stx_mnt_id);
    let superblock = mount_id.and_then(|id| processes::superblock_dev(&uses.mounts, id));
    let mut wanted = Wanted::default();
    wanted.file(meta.dev(), meta.ino(), superblock, "it");
    // On an overlay, the layer file that holds the bytes is the same file to anyone who opens it directly, and
    // loop devices over it are recorded by it.
    let held = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file))).ok();
    let layer = held
        .map(|path| real_file_of(&path, (meta.dev(), meta.ino())))
        .filter(|&id| id != (meta.dev(), meta.ino()));
    if let Some((st_dev, st_ino)) = layer {
        wanted.file(st_dev, st_ino, None, "it (its layer file below the overlay)");
    }
    for (st_dev, st_ino) in std::iter::once((meta.dev(), meta.ino())).chain(layer) {
        for (dev, chain) in graph.above_file(st_dev, st_ino) {
            let Some(node) = graph.node(dev) else { continue };
            let file_name = graph.store_name(graph::Store::File { st_dev, st_ino });
            let label = format!(
                "{} ({} -> {file_name})",
                node.dev_path(),
                graph.chain_text(&chain)
            );
            wanted.device(dev, node_identity(node), &label);
        }
    }
    let (st_dev, st_ino) = (meta.dev(), meta.ino());
    let mut findings = fuse_mounts_of(&uses.mounts, (st_dev, st_ino));
    findings.extend(process_findings(probe.proc_root, &wanted, patience));
    Ok(findings)
}

/// The DOS extended partitions of this machine (containers of logical partitions), by device number.
pub fn extended_partitions() -> io::Result<Vec<DevNum>> {
    let probe = Probe::real();
    let graph = Graph::read(probe.sys_root, probe.loop_backing, probe.dm_table)?;
    Ok(graph
        .nodes()
        .filter(|n| n.is_container())
        .map(|n| n.dev)
        .collect())
}

/// A note for a result when some processes could not be checked for open files: which ones, and either that
/// root checks them (another user's, without root) or what denies even root.
pub fn unchecked_processes_note() -> Option<String> {
    let uses = Uses::read(&Probe::real()).ok()?;
    // Wanting something no descriptor can match still reads every process's descriptors and maps.
    let mut nothing = Wanted::default();
    nothing.device((0, 0), None, "nothing");
    let unreadable = processes::survey(Path::new(PROC_ROOT), &nothing, &uses.mounts, std::process::id())
        .unchecked_note(crate::sys::running_as_root());
    let namespace = (crate::sys::pid_namespace_depth() > 1).then(|| {
        "ssdlab runs in a PID namespace of its own (a container): processes outside it cannot be checked for \
         open files or maps; /proc/locks, the mount table and, for a file, the kernel's write lease were"
            .to_string()
    });
    match (unreadable, namespace) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// Whether a loop device (or a stack on one) is over the file (`st_dev`, `st_ino`): the loop driver holds it
/// open, which a write lease sees as another opener.
pub fn loop_devices_over_file(st_dev: u64, st_ino: u64) -> bool {
    let probe = Probe::real();
    Graph::read(probe.sys_root, probe.loop_backing, probe.dm_table)
        .is_ok_and(|graph| !graph.above_file(st_dev, st_ino).is_empty())
}

/// The FUSE mounts served out of the file (`id`: device and inode): their source, as the daemon was given it,
/// is that file (fuse2fs, ntfs-3g, guestmount's image). The daemon holding it open is found as a process too;
/// this names the mount.
fn fuse_mounts_of(mounts: &[MountEntry], id: (u64, u64)) -> Vec<Finding> {
    mounts
        .iter()
        .filter(|m| m.fs_type == "fuse" || m.fs_type == "fuseblk" || m.fs_type.starts_with("fuse."))
        .filter(|m| m.source.starts_with('/'))
        .filter(|m| fs::metadata(&m.source).is_ok_and(|s| (s.dev(), s.ino()) == id))
        .map(|m| {
            Finding::in_use(format!(
                "it is mounted through FUSE at {} ({})",
                m.mount_point, m.fs_type
            ))
        })
        .collect()
}

/// Other processes' uses of `wanted` as in-use findings: a use seen is looked for again every 50 ms for up to
/// `patience`, and counts only if a survey then still finds one.
fn process_findings(proc_root: &Path, wanted: &Wanted, patience: std::time::Duration) -> Vec<Finding> {
    let start = std::time::Instant::now();
    let me = std::process::id();
    let mounts = || {
        fs::read_to_string(proc_root.join("self/mountinfo"))
            .map(|t| parse_mountinfo(&t))
            .unwrap_or_default()
    };
    let mut survey: Survey = processes::survey(proc_root, wanted, &mounts(), me);
    while !survey.uses.is_empty() && start.elapsed() < patience {
        std::thread::sleep(std::time::Duration::from_millis(50));
        survey = processes::survey(proc_root, wanted, &mounts(), me);
    }
    survey
        .uses
        .iter()
        .map(|u| Finding::in_use(u.to_string()))
        .collect()
}

/// The identity (device, inode) of a device's node under /dev, which /proc/locks and maps name.
fn node_identity(node: &Node) -> Option<(u64, u64)> {
    let path = dev_node(node)?;
    let meta = fs::metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Where the bytes of the file at `path` (whose identity is `id`) are kept: on an overlay, the file of the same
/// name in its upper directory, else in the first lower one that has it (overlays over overlays followed a few
/// levels down); on any other file system `id` itself. Also `id` when the path no longer names that file or the
/// layers cannot be reached from this mount namespace.
///
/// An overlay shows the layer file under a device number of its own, so without this a loop device over the
/// merged name and a write to the upper one (or the other way round) would not meet.
fn real_file_of(path: &Path, id: (u64, u64)) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let mut path = path.to_path_buf();
    let mut id = id;
    for _ in 0..8 {
        // An overlay has an anonymous device number (major 0), like btrfs, tmpfs and FUSE.
        if libc::major(id.0) != 0 {
            break;
        }
        let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            break;
        };
        let Ok(sx) = crate::sys::statx(
            rustix::fs::CWD,
            &c_path,
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_INO | libc::STATX_MNT_ID,
        ) else {
            break;
        };
        let here = (libc::makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino);
        if here != id || sx.stx_mask & libc::STATX_MNT_ID == 0 {
            break;
        }
        let mountinfo = fs::read_to_string(Path::new(PROC_ROOT).join("self/mountinfo")).unwrap_or_default();
        let Some((mount_point, layers)) = overlay_of(&mountinfo, sx.stx_mnt_id) else {
            break;
        };
        let Ok(inside) = path.strip_prefix(&mount_point) else {
            break;
        };
        let Some((layer_path, layer_id)) = layers.iter().find_map(|dir| {
            let candidate = Path::new(dir).join(inside);
            let meta = fs::symlink_metadata(&candidate).ok()?;
            meta.is_file().then(|| (candidate, (meta.dev(), meta.ino())))
        }) else {
            break;
        };
        (path, id) = (layer_path, layer_id);
    }
    id
}

/// Every signature libblkid finds on the device open as `file` (not O_DIRECT), as findings, and a GPT backup
/// header alone at the end, which libblkid does not look for without a protective MBR.
pub fn signature_findings(file: &File) -> io::Result<Vec<Finding>> {
    let found = signatures(file)?;
    let mut findings: Vec<Finding> = found.iter().map(signature_finding).collect();
    let size = match file.metadata()?.file_type().is_block_device() {
        true => crate::sys::block_device_size(file)?,
        false => file.metadata()?.len(),
    };
    if let Some(offset) = gpt_backup::backup_header_at(file, size)?
        && !found
            .iter()
            .any(|s| s.type_name == "gpt" && s.offset_bytes == Some(offset))
    {
        findings.push(signature_finding(&Signature {
            type_name: "gpt".into(),
            offset_bytes: Some(offset),
            usage: Usage::PartitionTable,
        }));
    }
    Ok(findings)
}

/// Everything that makes a destructive operation on the block device at `path` unsafe: [`uses_of_device`] with
/// an exclusive-claim probe, then [`signature_findings`] through a read-only open. Errors only when the device
/// cannot be inspected at all.
pub fn destructive_findings(path: &Path) -> io::Result<Vec<Finding>> {
    let meta = fs::metadata(path).map_err(|e| context(e, format_args!("cannot stat {}", path.display())))?;
    if !meta.file_type().is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a block device", path.display()),
        ));
    }
    let mut findings = uses_of_device(meta.rdev(), OwnClaim::Probe)?;
    let file = File::open(path).map_err(|e| context(e, format_args!("cannot read {}", path.display())))?;
    let same = file.metadata().is_ok_and(|m| m.rdev() == meta.rdev());
    if !same {
        return Err(io::Error::other(format!(
            "{} changed while it was inspected",
            path.display()
        )));
    }
    findings.extend(
        signature_findings(&file)
            .map_err(|e| context(e, format_args!("cannot probe {} for signatures", path.display())))?,
    );
    Ok(findings)
}

/// The operating-system facts the guard reads, replaceable so tests can fake a sysfs and procfs tree.
struct Probe<'a> {
    sys_root: &'a Path,
    proc_root: &'a Path,
    /// The (major, minor) of the block device a path names, or `None` if it is not one (or cannot be
    /// stat'ed). Used for the paths listed in /proc/swaps and for mount sources.
    block_dev_of: fn(&Path) -> Option<DevNum>,
    /// The loop driver's account of a loop device's backing.
    loop_backing: &'a dyn Fn(&Node) -> Option<LoopBacking>,
    /// The device mapper's table of a dm device.
    dm_table: &'a dyn Fn(&Node) -> Option<Vec<crate::dm::DmTarget>>,
    /// Whether something else holds the device open exclusively (a read-only O_EXCL open fails with EBUSY).
    claimed: &'a dyn Fn(&Node) -> Claim,
}

impl Probe<'static> {
    fn real() -> Self {
        Probe {
            sys_root: Path::new(SYS_ROOT),
            proc_root: Path::new(PROC_ROOT),
            block_dev_of: real_block_dev_of,
            loop_backing: &real_loop_backing,
            dm_table: &real_dm_table,
            claimed: &real_claimed,
        }
    }
}

/// What an exclusive-open probe says of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Free,
    /// Another program or kernel subsystem holds it open exclusively.
    Claimed,
    /// The probe could not be made (why not): nothing vouches that the device is free.
    CannotTell(&'static str),
}

/// The finding for a device the probe did not find free: `claimed` says what holding it means here, `label`
/// names the device and `how` its chain.
fn claim_finding(claim: Claim, label: &str, claimed: &str, how: &str) -> Option<Finding> {
    match claim {
        Claim::Free => None,
        Claim::Claimed => Some(Finding::in_use(format!("{label} {claimed}{how}"))),
        Claim::CannotTell(why) => Some(Finding::in_use(format!(
            "{label} cannot be checked for another exclusive opener ({why}), so it may be in use{how}"
        ))),
    }
}

/// The mount table, swap devices and swap files, read once per question.
struct Uses {
    mounts: Vec<MountEntry>,
    swaps: Vec<DevNum>,
    /// Active swap files, by (device, inode).
    swap_files: Vec<(u64, u64)>,
}

impl Uses {
    fn read(probe: &Probe<'_>) -> io::Result<Uses> {
        // A missing mountinfo means procfs is not there, and then nothing can be vouched for.
        let mountinfo_path = probe.proc_root.join("self/mountinfo");
        let mountinfo = fs::read_to_string(&mountinfo_path)
            .map_err(|e| context(e, format_args!("cannot read {}", mountinfo_path.display())))?;
        // A kernel built without swap support has no /proc/swaps, and then nothing can be swapped on.
        let swaps_path = probe.proc_root.join("swaps");
        let swaps = match fs::read_to_string(&swaps_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(context(e, format_args!("cannot read {}", swaps_path.display()))),
        };
        let paths = swap_paths(&swaps);
        Ok(Uses {
            mounts: parse_mountinfo(&mountinfo),
            swaps: paths
                .iter()
                .filter_map(|p| (probe.block_dev_of)(Path::new(p)))
                .collect(),
            swap_files: paths
                .iter()
                .filter_map(|p| fs::metadata(p).ok())
                .filter(|m| m.is_file())
                .map(|m| (m.dev(), m.ino()))
                .collect(),
        })
    }

    /// "is mounted at /a, /b" and "is in use as swap" for one device.
    fn of(&self, dev: DevNum, block_dev_of: fn(&Path) -> Option<DevNum>) -> Vec<String> {
        let mut found = Vec::new();
        let points = mount_points(&self.mounts, &[dev], block_dev_of);
        if !points.is_empty() {
            found.push(format!("is mounted at {}", list_mount_points(&points)));
        }
        if self.swaps.contains(&dev) {
            found.push("is in use as swap".to_string());
        }
        found
    }
}

/// [`uses_of_device`] over the facts `probe` gives.
fn uses_with(probe: &Probe<'_>, target: DevNum, claim: OwnClaim) -> io::Result<Vec<Finding>> {
    let graph = Graph::read(probe.sys_root, probe.loop_backing, probe.dm_table)?;
    let uses = Uses::read(probe)?;
    let Some(target_node) = graph.node(target) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "block device {}:{} is not in sysfs ({}/class/block): cannot inspect it",
                target.0,
                target.1,
                probe.sys_root.display()
            ),
        ));
    };
    let related = related_in_order(&graph, target);
    let stack = Stack {
        graph: &graph,
        uses: &uses,
        probe,
        used_devs: related
            .iter()
            .filter(|(n, _)| !uses.of(n.dev, probe.block_dev_of).is_empty())
            .map(|(n, _)| n.dev)
            .collect(),
    };
    let mut findings: Vec<Finding> = related
        .iter()
        .flat_map(|(node, relation)| stack.findings_of(node, relation))
        .collect();
    findings.extend(stack.swap_file_findings(target));
    findings.extend(stack.unknown_findings(&related));
    let patience = match claim {
        OwnClaim::HeldByCaller => TRANSIENT_USE_PATIENCE,
        OwnClaim::Probe => std::time::Duration::ZERO,
    };
    findings.extend(process_findings(
        probe.proc_root,
        &wanted_of(&graph, &related, target),
        patience,
    ));
    // The kernel refuses an exclusive open of a device that is mounted, held or claimed by another exclusive
    // opener, also from another mount namespace. Mounts and holders are already named above; this catches users
    // that leave no other trace here, such as a ZFS pool, a virtual machine or a mount in a container.
    // Only a claim seen counts here: a probe that cannot be made (no permission) says nothing about the device
    // itself, which a destructive command claims for itself anyway.
    if claim == OwnClaim::Probe
        && !findings.iter().any(|f| f.in_use)
        && (probe.claimed)(target_node) == Claim::Claimed
    {
        findings.push(Finding::in_use(
            "it is open exclusively by another program or kernel subsystem (for example a ZFS pool, a virtual \
             machine, a multi-device file system or a mount in another namespace)",
        ));
    }
    Ok(findings)
}

/// Every device related to `target`: the device itself, its own partitions, then stacks on it, devices beside
/// it and devices under it, each group in name order.
fn related_in_order(graph: &Graph, target: DevNum) -> Vec<(&Node, Relation)> {
    let mut related: Vec<(&Node, Relation)> = graph
        .nodes()
        .filter_map(|n| Some((n, graph.relation(target, n.dev)?)))
        .collect();
    related.sort_by_key(|(n, r)| {
        let rank = match r {
            Relation::Itself => 0,
            Relation::Above { chain } if chain.len() == 2 && n.kind == Kind::Partition => 1,
            Relation::Above { .. } => 2,
            Relation::Beside { .. } => 3,
            Relation::Below { .. } => 4,
        };
        (rank, n.name.clone())
    });
    related
}

/// The device graph around a target with the uses found on it: what each related device says about the target.
struct Stack<'a> {
    graph: &'a Graph,
    uses: &'a Uses,
    probe: &'a Probe<'a>,
    /// The related devices that are mounted, swapped on or otherwise used.
    used_devs: Vec<DevNum>,
}

impl Stack<'_> {
    /// The partitions of `dev`.
    fn partitions_of(&self, dev: DevNum) -> impl Iterator<Item = &Node> {
        self.graph.nodes().filter(move |p| {
            p.kind == Kind::Partition
                && matches!(p.lower, Some(Lower::Range { store: graph::Store::Device(d), .. }) if d == dev)
        })
    }

    /// What one related device says: its own uses, and by its relation, a holder over the target, a device over
    /// the same bytes in use (or as a sign of past use), or an exclusive claim.
    fn findings_of(&self, node: &Node, relation: &Relation) -> Vec<Finding> {
        let graph = self.graph;
        let (label, how) = describe(graph, node, relation);
        let used = self.uses.of(node.dev, self.probe.block_dev_of);
        let mut findings: Vec<Finding> = used
            .iter()
            .map(|what| Finding::in_use(format!("{label} {what}{how}")))
            .collect();
        let claimed_finding = || self.claimed_finding(node, relation, &used, (&label, &how));
        match relation {
            Relation::Above { .. } if node.is_holder() => {
                findings.push(Finding::in_use(format!(
                    "{label}, {}, is active over it{how}",
                    kind_text(&node.kind)
                )));
            }
            // A device over the same bytes that md, dm or bcache hold (a logical partition that is an LVM
            // physical volume, beside its extended partition): they are using those bytes.
            Relation::Beside { .. } if graph.holders_of(node.dev).next().is_some() && used.is_empty() => {
                let holders: Vec<String> = graph.holders_of(node.dev).map(|h| h.dev_path()).collect();
                findings.push(Finding::in_use(format!(
                    "{label} is held by {}{how}",
                    holders.join(", ")
                )));
            }
            // Another mapping of the same bytes (an alias by table, a thin pool's own device beside its thin
            // volumes): in use when it is used (its mounts are named above, what stands on it is beside the
            // target too, a claim or a process is asked), else a sign `--force` may override.
            Relation::Beside { .. } if node.is_holder() => {
                if let Some(finding) = claimed_finding() {
                    findings.push(finding);
                } else if used.is_empty() {
                    findings.push(Finding::past(format!(
                        "{label}, {}, maps the same bytes{how}",
                        kind_text(&node.kind)
                    )));
                }
            }
            Relation::Above { .. } | Relation::Beside { .. } if matches!(node.kind, Kind::Loop(_)) => {
                if let Some(finding) = claimed_finding() {
                    findings.push(finding);
                } else if used.is_empty() {
                    findings.push(Finding::past(format!(
                        "{label} is a loop device over {}{how}",
                        if matches!(relation, Relation::Above { .. }) {
                            "it"
                        } else {
                            "the same bytes"
                        }
                    )));
                }
            }
            Relation::Beside { .. } => findings.extend(claimed_finding()),
            Relation::Below { .. } if self.partitions_of(node.dev).next().is_none() => {
                findings.extend(claimed_finding());
            }
            _ => {}
        }
        findings
    }

    /// Whether something else holds the device open exclusively (a mount in another namespace, a virtual
    /// machine). Not asked of a device already found mounted or swapped on, nor of one whose partition is (its
    /// claim is theirs, already named); not of a disk under the target that has partitions, whose claim may be
    /// a partition's that the target does not reach; and not of a device under the target that md, dm or
    /// bcache hold: the kernel holder claims it (the target itself, or a device beside it whose bytes the graph
    /// relates by their tables), and while it holds it nothing else can.
    fn claimed_finding(
        &self,
        node: &Node,
        relation: &Relation,
        used: &[String],
        (label, how): (&str, &str),
    ) -> Option<Finding> {
        let held_below =
            matches!(relation, Relation::Below { .. }) && self.graph.holders_of(node.dev).next().is_some();
        let claimed = if used.is_empty()
            && !held_below
            && !self
                .partitions_of(node.dev)
                .any(|p| self.used_devs.contains(&p.dev))
        {
            (self.probe.claimed)(node)
        } else {
            Claim::Free
        };
        claim_finding(
            claimed,
            label,
            "is open exclusively by another program or kernel subsystem, such as a mount in another namespace \
             or a virtual machine",
            how,
        )
    }

    /// A loop device over an active swap file (at any depth): writing it writes the swap area.
    fn swap_file_findings(&self, target: DevNum) -> Vec<Finding> {
        let graph = self.graph;
        graph
            .files_below(target)
            .into_iter()
            .filter(|(identity, _)| self.uses.swap_files.contains(identity))
            .map(|(identity, chain)| {
                Finding::in_use(format!(
                    "it is stored on an active swap file ({} -> {})",
                    graph.chain_text(&chain),
                    graph.store_name(graph::Store::File {
                        st_dev: identity.0,
                        st_ino: identity.1
                    })
                ))
            })
            .collect()
    }

    /// Loop devices whose backing cannot be identified, and stacks deeper than the graph follows, might be over
    /// this device: refused if one is in use.
    fn unknown_findings(&self, related: &[(&Node, Relation)]) -> Vec<Finding> {
        let (graph, uses, probe) = (self.graph, self.uses, self.probe);
        let mut findings = Vec::new();
        for node in graph.nodes() {
            let in_use =
                || !uses.of(node.dev, probe.block_dev_of).is_empty() || (probe.claimed)(node) != Claim::Free;
            findings.extend(unknown_backing_finding(node, in_use, "this device"));
            if !related.iter().any(|(r, _)| r.dev == node.dev) {
                findings.extend(cut_off_finding(graph, node, in_use, "this device"));
            }
        }
        findings
    }
}

/// What other processes may not hold open, mapped or locked (a virtual machine, qemu-nbd, a FUSE daemon on a
/// partition): the target, what stands on it and what shares its bytes (an alias a virtual machine has open, a
/// partition of it), what it is stored on unless the target's own stack holds that (multipathd keeps every path
/// open; a reader of a PV under an LV reads, it does not write), and the image file below a loop device. None of
/// them claims anything exclusively; a caller about to write looks again before a use counts. Holders stacked on
/// the target are in use by rule already.
fn wanted_of(graph: &Graph, related: &[(&Node, Relation)], target: DevNum) -> Wanted {
    let mut wanted = Wanted::default();
    for (node, relation) in related {
        let skip = match relation {
            Relation::Itself | Relation::Beside { .. } => false,
            Relation::Above { .. } => node.is_holder(),
            Relation::Below { .. } => node.is_holder() || graph.holders_of(node.dev).next().is_some(),
        };
        if skip {
            continue;
        }
        let (label, how) = describe(graph, node, relation);
        wanted.device(node.dev, node_identity(node), &format!("{label}{how}"));
    }
    for ((st_dev, st_ino), chain) in graph.files_below(target) {
        let name = graph.store_name(graph::Store::File { st_dev, st_ino });
        wanted.file(
            st_dev,
            st_ino,
            None,
            &format!("{name}, the file it is stored on ({})", graph.chain_text(&chain)),
        );
    }
    // A loop device's file as the loop driver opened it (an overlay's), which is what other programs open.
    for (node, relation) in related {
        if let (Relation::Itself | Relation::Below { .. }, Some((st_dev, st_ino))) =
            (relation, node.opened_as)
        {
            let name = match &node.kind {
                Kind::Loop(path) => path.clone(),
                _ => node.name.clone(),
            };
            wanted.file(
                st_dev,
                st_ino,
                None,
                &format!("{name}, the file {} is stored on", node.dev_path()),
            );
        }
    }
    wanted
}

/// [`uses_of_file`] over the facts `probe` gives.
fn file_uses_with(probe: &Probe<'_>, st_dev: u64, st_ino: u64) -> io::Result<Vec<Finding>> {
    let graph = Graph::read(probe.sys_root, probe.loop_backing, probe.dm_table)?;
    let uses = Uses::read(probe)?;
    let mut findings = Vec::new();
    if uses.swap_files.contains(&(st_dev, st_ino)) {
        findings.push(Finding::in_use("it is an active swap file (swapon)"));
    }
    for (dev, chain) in graph.above_file(st_dev, st_ino) {
        let Some(node) = graph.node(dev) else { continue };
        let file_name = graph.store_name(graph::Store::File { st_dev, st_ino });
        let how = format!(" ({} -> {file_name})", graph.chain_text(&chain));
        for what in uses.of(dev, probe.block_dev_of) {
            findings.push(Finding::in_use(format!("{} {what}{how}", node.dev_path())));
        }
        if node.is_holder() {
            findings.push(Finding::in_use(format!(
                "{}, {}, is active over it{how}",
                node.dev_path(),
                kind_text(&node.kind)
            )));
        } else if matches!(node.kind, Kind::Loop(_)) {
            findings.extend(claim_finding(
                (probe.claimed)(node),
                &node.dev_path(),
                "is open exclusively by another program or kernel subsystem",
                &how,
            ));
        }
    }
    // A loop device whose backing cannot be identified (deleted, renamed, in another mount namespace, or no
    // device node to ask the loop driver) may be over this file: in use, it refuses the write.
    for node in graph.nodes() {
        let in_use =
            || !uses.of(node.dev, probe.block_dev_of).is_empty() || (probe.claimed)(node) != Claim::Free;
        findings.extend(unknown_backing_finding(node, in_use, "this file"));
        findings.extend(cut_off_finding(&graph, node, in_use, "this file"));
    }
    Ok(findings)
}

/// A loop device in use whose backing file cannot be identified (deleted, renamed, in another mount namespace,
/// or no device node to ask the loop driver): it may be `what` (the target).
fn unknown_backing_finding(node: &Node, in_use: impl Fn() -> bool, what: &str) -> Option<Finding> {
    let Some(Lower::Unknown(backing)) = &node.lower else {
        return None;
    };
    (matches!(node.kind, Kind::Loop(_)) && in_use()).then(|| {
        Finding::in_use(format!(
            "{} is in use and its backing file ({backing}) cannot be identified, so it may be {what}",
            node.dev_path()
        ))
    })
}

/// A device in use whose stack goes deeper than the graph follows: what lies at its bottom is not known, so
/// it may be `what` (the target).
fn cut_off_finding(graph: &Graph, node: &Node, in_use: impl Fn() -> bool, what: &str) -> Option<Finding> {
    (graph.cut_off(node.dev) && in_use()).then(|| {
        Finding::in_use(format!(
            "{} is in use and stacked more than {} devices deep; what it is stored on cannot be followed to the \
             bottom, so it may be {what}",
            node.dev_path(),
            graph::MAX_DEPTH
        ))
    })
}

/// How a finding names a related device, and the chain that relates it (empty for the device itself and its
/// own partitions).
fn describe(graph: &Graph, node: &Node, relation: &Relation) -> (String, String) {
    match relation {
        Relation::Itself => ("it".to_string(), String::new()),
        Relation::Above { chain } if chain.len() == 2 && node.kind == Kind::Partition => {
            (node.dev_path(), String::new())
        }
        Relation::Above { chain } | Relation::Below { chain } => {
            (node.dev_path(), format!(" ({})", graph.chain_text(chain)))
        }
        Relation::Beside {
            store,
            device_chain,
            target_chain,
        } => {
            let down: Vec<String> = device_chain.iter().map(|d| graph.name(*d)).collect();
            let mut up: Vec<String> = target_chain.iter().map(|d| graph.name(*d)).collect();
            up.reverse();
            (
                node.dev_path(),
                format!(
                    " ({} -> {} <- {})",
                    down.join(" -> "),
                    graph.store_name(*store),
                    up.join(" <- ")
                ),
            )
        }
    }
}

fn kind_text(kind: &Kind) -> String {
    match kind {
        Kind::DeviceMapper(Some(name)) => format!("a device-mapper/LVM device ({name})"),
        Kind::DeviceMapper(None) => "a device-mapper/LVM device".to_string(),
        Kind::Md(Some(level)) => format!("an md RAID device ({level})"),
        Kind::Md(None) => "an md RAID device".to_string(),
        Kind::Loop(_) => "a loop device".to_string(),
        Kind::Stacked => "a stacked block device".to_string(),
        Kind::Disk | Kind::Partition => "a block device".to_string(),
    }
}

/// A libblkid signature as a finding: what it is, by libblkid's own name (as blkid and wipefs print it), and
/// where its magic is.
fn signature_finding(s: &Signature) -> Finding {
    let kind = match s.usage {
        Usage::Filesystem => "a file system",
        Usage::Raid => "a RAID or volume-manager member signature",
        Usage::Crypto => "an encrypted volume header",
        Usage::PartitionTable => "a partition table",
        Usage::Other => "a signature",
    };
    let place = match s.offset_bytes {
        Some(offset) => format!(" (at byte {offset})"),
        None => String::new(),
    };
    Finding {
        partition_table: s.usage == Usage::PartitionTable,
        ..Finding::past(format!("it carries {kind}: {}{place}", s.type_name))
    }
}

/// Splits a `dev_t` into (major, minor).
fn split_dev(rdev: u64) -> DevNum {
    (libc::major(rdev), libc::minor(rdev))
}

/// The real [`Probe::block_dev_of`]: stat, following symlinks (as /dev/mapper names are).
fn real_block_dev_of(path: &Path) -> Option<DevNum> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type().is_block_device().then(|| split_dev(meta.rdev()))
}

/// The device node of `node` under /dev, if it is there and is that device.
fn dev_node(node: &Node) -> Option<std::path::PathBuf> {
    let path = Path::new("/dev").join(&node.name);
    let meta = fs::metadata(&path).ok()?;
    (meta.file_type().is_block_device() && split_dev(meta.rdev()) == node.dev).then_some(path)
}

/// The real [`Probe::loop_backing`]: the loop driver's LOOP_GET_STATUS64 through a read-only open of the loop
/// device; else, where the node is missing, the backing file as sysfs names it, stat'ed.
fn real_loop_backing(node: &Node) -> Option<LoopBacking> {
    if let Some(path) = dev_node(node)
        && let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
        && file.metadata().is_ok_and(|m| split_dev(m.rdev()) == node.dev)
        && let Ok(backing) = crate::sys::loop_backing(&file)
    {
        return on_its_layer(node, backing);
    }
    let Kind::Loop(backing) = &node.kind else {
        return None;
    };
    // A deleted backing file can no longer be named; a path that now names something else would mislead.
    if backing.ends_with("(deleted)") {
        return None;
    }
    let meta = fs::metadata(backing).ok()?;
    let offset = fs::read_to_string(
        Path::new(SYS_ROOT)
            .join("class/block")
            .join(&node.name)
            .join("loop/offset"),
    )
    .ok()
    .and_then(|t| t.trim().parse().ok())
    .unwrap_or(0);
    on_its_layer(
        node,
        LoopBacking {
            st_dev: meta.dev(),
            st_ino: meta.ino(),
            st_rdev: if meta.file_type().is_block_device() {
                meta.rdev()
            } else {
                0
            },
            offset_bytes: offset,
            sizelimit_bytes: 0,
            opened_as: None,
        },
    )
}

/// A loop device's backing file named by the file that holds its bytes ([`real_file_of`]): sysfs names the
/// file the loop device opened, and the path is trusted only while it is still that file.
///
/// A file on a file system with an anonymous device number (major 0: overlay, tmpfs, btrfs, FUSE) is known
/// only through its path: an overlay shows its layer file under a device number of its own, so the loop
/// device's (device, inode) would never meet the layer file that holds the bytes. When that path no longer
/// names the file (an overlay unmounted lazily, a mount in another namespace) or an overlay's layers cannot
/// be found, the backing cannot be identified (None: unknown, which counts as in use when the loop device is).
fn on_its_layer(node: &Node, backing: LoopBacking) -> Option<LoopBacking> {
    let Kind::Loop(name) = &node.kind else {
        return Some(backing);
    };
    let id = (backing.st_dev, backing.st_ino);
    if backing.st_rdev != 0 || libc::major(backing.st_dev) != 0 {
        // A block device, or a file on a file system of a device: its identity is its own.
        return Some(backing);
    }
    let named = fs::metadata(name).is_ok_and(|m| (m.dev(), m.ino()) == id);
    if !named {
        return None;
    }
    let (st_dev, st_ino) = real_file_of(Path::new(name), id);
    if (st_dev, st_ino) == id && on_overlay(Path::new(name)) {
        // An overlay whose layer file could not be found from here.
        return None;
    }
    Some(LoopBacking {
        st_dev,
        st_ino,
        opened_as: ((st_dev, st_ino) != id).then_some(id),
        ..backing
    })
}

/// Whether `path` is on an overlay mount (statx's mount id, mountinfo's type).
fn on_overlay(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let Ok(sx) = crate::sys::statx(rustix::fs::CWD, &c_path, 0, libc::STATX_MNT_ID) else {
        return false;
    };
    let mountinfo = fs::read_to_string(Path::new(PROC_ROOT).join("self/mountinfo")).unwrap_or_default();
    sx.stx_mask & libc::STATX_MNT_ID != 0
        && mount_type_of(&mountinfo, sx.stx_mnt_id).as_deref() == Some("overlay")
}

/// The real [`Probe::dm_table`]: DM_TABLE_STATUS (root only; without it a dm device is related by its slaves).
fn real_dm_table(node: &Node) -> Option<Vec<crate::dm::DmTarget>> {
    crate::dm::table(node.dev).ok()
}

/// The real [`Probe::claimed`]: a read-only exclusive open (O_EXCL without O_CREAT), which on a block device
/// fails with EBUSY when the kernel or another program has claimed it. A claim can outlive its holder by a few
/// milliseconds (the kernel releases io_uring's registered files and udev's probes asynchronously), so EBUSY is
/// retried briefly before it counts.
fn real_claimed(node: &Node) -> Claim {
    const ATTEMPTS: u32 = 10;
    let Some(path) = dev_node(node) else {
        return Claim::CannotTell("it has no device node under /dev to ask");
    };
    for attempt in 1..=ATTEMPTS {
        match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
        {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if attempt < ATTEMPTS {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                return Claim::CannotTell("no permission to open it; run as root to check");
            }
            _ => return Claim::Free,
        }
    }
    Claim::Claimed
}

/// Adds what was being done to an error, keeping its kind.
pub(crate) fn context(e: io::Error, what: fmt::Arguments<'_>) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests;
