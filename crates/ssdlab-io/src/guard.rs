//! Deciding whether a block device is in use, before ssdlab writes to, discards or fills it.
//!
//! This module owns one question: is it unsafe to destroy the data on this block device? It answers with a
//! list of [`Finding`]s, each naming one sign of use: the device or one of its partitions is mounted, used as
//! swap, held by another block device (md, device-mapper/LVM, bcache), open exclusively by something else, or
//! it carries a filesystem, volume or partition-table signature. An empty list means no sign of use was found;
//! the caller decides what to do with the findings (refuse, unless the user also passed `--force`).
//!
//! It must never change anything: it never writes to a device and never opens one for writing. It only
//! stats paths, reads `/proc` and `/sys`, and reads the first mebibyte of the device through a read-only open.
//! The exclusive-open probe is read-only too; it claims the device only for the instant between `open` and
//! `close`, so call [`destructive_findings`] before the caller itself opens the device exclusively.
//!
//! The path is resolved like `open` would resolve it (symlinks such as `/dev/disk/by-id/...` are followed),
//! because what matters is the device a later open would reach; symlink policy belongs to the caller.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where sysfs is mounted; block devices are found under `SYS_ROOT/dev/block/MAJ:MIN`.
pub const SYS_ROOT: &str = "/sys";
/// Where procfs is mounted; `PROC_ROOT/self/mountinfo` and `PROC_ROOT/swaps` are read.
pub const PROC_ROOT: &str = "/proc";
/// How much of the device's start is read to look for signatures. Every signature checked lives well inside
/// it (the farthest, the second ZFS label's uberblocks, ends at 512 KiB).
const HEAD_LEN: u64 = 1 << 20;
/// How many mount points of one device are named before the rest are only counted.
const MAX_MOUNT_POINTS_NAMED: usize = 3;

/// One reason a device is in use. `Display` gives a sentence fragment such as
/// "/dev/loop3p1 is mounted at /mnt/data" or "it carries an ext2/3/4 filesystem signature".
///
/// "it" always means the device the caller asked about; partitions are named by their `/dev` path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    /// The device is in use right now (mounted, swap, claimed by a holder or another exclusive opener): no flag
    /// overrides this. Otherwise the finding is a sign of past use (a signature, a partition table) that
    /// `--force` may override.
    pub in_use: bool,
    /// The sign is a partition table (GPT or DOS). `op`, which keeps clear of every partition, lets `--force`
    /// override only these: a file system or volume on the whole device would lose its end.
    pub partition_table: bool,
}

impl Finding {
    fn new(what: impl Into<String>) -> Self {
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

/// Everything that makes a destructive operation on the block device at `path` unsafe. Empty means no
/// in-use sign was found. Errors only when the device cannot be inspected at all (stat or sysfs failure).
pub fn destructive_findings(path: &Path) -> io::Result<Vec<Finding>> {
    findings_with_roots(path, Path::new(SYS_ROOT), Path::new(PROC_ROOT))
}

/// [`destructive_findings`] with sysfs and procfs looked up under the given roots.
fn findings_with_roots(path: &Path, sys_root: &Path, proc_root: &Path) -> io::Result<Vec<Finding>> {
    let meta = fs::metadata(path).map_err(|e| context(e, format_args!("cannot stat {}", path.display())))?;
    if !meta.file_type().is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a block device", path.display()),
        ));
    }
    let dev = split_dev(meta.rdev());
    let probe = Probe {
        sys_root,
        proc_root,
        block_dev_of: real_block_dev_of,
        read_head: read_device_head,
    };
    inspect(path, dev, &probe)
}

/// Given the first bytes of a device, one finding per well-known signature found in them.
///
/// A short buffer is fine: signatures that would lie past its end are simply not found.
pub fn signature_findings(head: &[u8]) -> Vec<Finding> {
    let mut names: Vec<&str> = Vec::new();

    // The ext2/3/4 superblock starts at 1024 and keeps its magic at offset 0x38 of it.
    if u16_le_at(head, 1080) == Some(0xEF53) {
        names.push("an ext2/3/4 filesystem signature");
    }
    if has(head, 0, b"XFSB") {
        names.push("an XFS filesystem signature");
    }
    // The btrfs primary superblock is at 64 KiB, its magic 0x40 bytes into it.
    if has(head, 65600, b"_BHRfS_M") {
        names.push("a btrfs filesystem signature");
    }
    if let Some(name) = swap_signature(head) {
        names.push(name);
    }
    if has(head, 0, b"LUKS\xba\xbe") {
        names.push("a LUKS encrypted volume header");
    }
    // The LVM2 label may sit in any of the first four sectors.
    if (0..4).any(|k| has(head, 512 * k, b"LABELONE") && has(head, 512 * k + 24, b"LVM2 001")) {
        names.push("an LVM2 physical volume label");
    }
    // md superblocks v1.1 and v1.2 live at the start; v0.90 and v1.0 live at the end of the device, which is
    // not read here (an assembled array of those still shows up as a holder).
    if u32_le_at(head, 4096) == Some(0xa92b_4efc) || u32_le_at(head, 0) == Some(0xa92b_4efc) {
        names.push("a Linux md RAID superblock");
    }
    let gpt = has(head, 512, b"EFI PART") || has(head, 4096, b"EFI PART");
    if gpt {
        names.push("a GPT partition table");
    }
    // FAT, NTFS and exFAT boot sectors end in 55 AA like an MBR, and their boot code overlaps the MBR's
    // partition entries, so they are recognised first and then no DOS partition table is reported.
    let fat = [b"FAT12   ", b"FAT16   ", b"FAT     "]
        .iter()
        .any(|m| has(head, 54, *m))
        || has(head, 82, b"FAT32   ");
    if fat {
        names.push("a vfat filesystem signature");
    }
    let ntfs = has(head, 3, b"NTFS    ");
    if ntfs {
        names.push("an NTFS filesystem signature");
    }
    let exfat = has(head, 3, b"EXFAT   ");
    if exfat {
        names.push("an exFAT filesystem signature");
    }
    // A GPT disk also carries a protective MBR; the GPT finding already says it is partitioned.
    if !(gpt || fat || ntfs || exfat) && has_dos_partition_table(head) {
        names.push("a DOS (MBR) partition table");
    }
    if has_zfs_uberblock(head) {
        names.push("a ZFS pool label");
    }
    // bcache's superblock is at 4 KiB and holds this fixed UUID as its magic, 24 bytes in.
    const BCACHE_MAGIC: [u8; 16] = [
        0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
    ];
    if has(head, 4096 + 24, &BCACHE_MAGIC) {
        names.push("a bcache superblock");
    }
    // The first ISO 9660 volume descriptor is at sector 16 (of 2048 bytes), its identifier one byte in.
    if has(head, 32769, b"CD001") {
        names.push("an ISO 9660 filesystem signature");
    }
    if has(head, 0, b"hsqs") {
        names.push("a squashfs filesystem signature");
    }
    if u32_le_at(head, 1024) == Some(0xF2F5_2010) {
        names.push("an F2FS filesystem signature");
    }

    names
        .into_iter()
        .map(|name| Finding {
            partition_table: name.ends_with("partition table"),
            ..Finding::new(format!("it carries {name}"))
        })
        .collect()
}

/// The (major, minor, mount point) of every line of `mountinfo` whose device (field 3) is one of `devs`.
/// Mount points come back unescaped (`\040` becomes a space, and so on).
pub fn mounts_of(mountinfo: &str, devs: &[(u32, u32)]) -> Vec<(u32, u32, String)> {
    parse_mountinfo(mountinfo)
        .into_iter()
        .filter(|m| devs.contains(&m.dev))
        .map(|m| (m.dev.0, m.dev.1, m.mount_point))
        .collect()
}

/// The operating-system facts [`inspect`] needs, replaceable so tests can fake a sysfs and procfs tree.
struct Probe<'a> {
    sys_root: &'a Path,
    proc_root: &'a Path,
    /// The (major, minor) of the block device a path names, or `None` if it is not one (or cannot be
    /// stat'ed). Used for the paths listed in /proc/swaps and for mount sources.
    block_dev_of: fn(&Path) -> Option<(u32, u32)>,
    /// Reads the start of the device.
    read_head: fn(&Path) -> io::Result<Head>,
}

/// The start of a device, and whether the kernel refused to let us open it exclusively.
struct Head {
    bytes: Vec<u8>,
    busy: bool,
}

/// The device itself or one of its partitions.
struct Member {
    /// How findings name it: "it" for the device itself, its `/dev` path for a partition.
    label: String,
    dev: (u32, u32),
    sysdir: PathBuf,
}

/// All checks on the device `path`, whose device number is `dev`.
fn inspect(path: &Path, dev: (u32, u32), probe: &Probe<'_>) -> io::Result<Vec<Finding>> {
    let sysdir = probe
        .sys_root
        .join("dev/block")
        .join(format!("{}:{}", dev.0, dev.1));
    let members = members(&sysdir, dev)?;
    let mut findings = Vec::new();

    // Mounts. A missing mountinfo means procfs is not there, and then nothing can be vouched for.
    let mountinfo_path = probe.proc_root.join("self/mountinfo");
    let mountinfo = fs::read_to_string(&mountinfo_path)
        .map_err(|e| context(e, format_args!("cannot read {}", mountinfo_path.display())))?;
    let entries = parse_mountinfo(&mountinfo);
    for member in &members {
        let points = mount_points(&entries, &[member.dev], probe.block_dev_of);
        if !points.is_empty() {
            findings.push(Finding::in_use(format!(
                "{} is mounted at {}",
                member.label,
                list_mount_points(&points)
            )));
        }
    }
    // Another loop device over the same backing file reaches the same bytes at some offset: mounted through it,
    // the file system is in use just the same.
    for sibling in loop_siblings(probe.sys_root, &sysdir, dev)? {
        let devs: Vec<(u32, u32)> = self::members(&sibling.sysdir, sibling.dev)?
            .iter()
            .map(|m| m.dev)
            .collect();
        let points = mount_points(&entries, &devs, probe.block_dev_of);
        if !points.is_empty() {
            findings.push(Finding::in_use(format!(
                "{}, a loop device over the same file, is mounted at {}",
                sibling.label,
                list_mount_points(&points)
            )));
        }
    }

    // Swap. A kernel built without swap support has no /proc/swaps, and then nothing can be swapped on.
    let swaps_path = probe.proc_root.join("swaps");
    let swaps = match fs::read_to_string(&swaps_path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(context(e, format_args!("cannot read {}", swaps_path.display()))),
    };
    let swap_devs: Vec<(u32, u32)> = swap_paths(&swaps)
        .iter()
        .filter_map(|p| (probe.block_dev_of)(Path::new(p)))
        .collect();
    for member in &members {
        if swap_devs.contains(&member.dev) {
            findings.push(Finding::in_use(format!("{} is in use as swap", member.label)));
        }
    }

    // Holders: a device that another block device is built on (md, dm/LVM, bcache) lists it here.
    for (i, member) in members.iter().enumerate() {
        let holders = holders_of(&member.sysdir)?;
        if holders.is_empty() {
            continue;
        }
        // A dm or md device as the target is fine by itself; it is only a stack member when something holds
        // it, and then saying what it is helps the user find the stack.
        let label = match (i, stacked_kind(&member.sysdir)) {
            (0, Some(kind)) => format!("{}, {kind},", member.label),
            _ => member.label.clone(),
        };
        let names: Vec<String> = holders
            .iter()
            .map(|h| describe_holder(&member.sysdir, h))
            .collect();
        let mut kinds: Vec<&str> = Vec::new();
        for kind in holders.iter().map(|h| holder_kind(h)) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        let article = if kinds[0].starts_with("md") { "an" } else { "a" };
        findings.push(Finding::in_use(format!(
            "{label} is held by {}, part of {article} {} stack",
            names.join(", "),
            kinds.join(" and ")
        )));
    }
    let used_by_kernel = !findings.is_empty();

    // Signatures, and the exclusive-open probe. Failing to read the device means it cannot be vouched for.
    let head =
        (probe.read_head)(path).map_err(|e| context(e, format_args!("cannot read {}", path.display())))?;
    // The kernel refuses an exclusive open of a device that is mounted, held or claimed by another exclusive
    // opener. Mounts and holders are already named above; otherwise this catches users that leave no other
    // trace, such as a ZFS pool, a virtual machine or the second device of a multi-device btrfs.
    if head.busy && !used_by_kernel {
        findings.push(Finding::in_use(
            "it is open exclusively by another program or kernel subsystem (for example a ZFS pool, a \
             virtual machine or a multi-device filesystem)",
        ));
    }
    findings.extend(signature_findings(&head.bytes));
    Ok(findings)
}

/// The device itself, then its partitions in partition-number order.
fn members(sysdir: &Path, dev: (u32, u32)) -> io::Result<Vec<Member>> {
    let sys_err = |e: io::Error| context(e, format_args!("cannot inspect {} in sysfs", sysdir.display()));
    let mut partitions: Vec<(u32, Member)> = Vec::new();
    for entry in fs::read_dir(sysdir).map_err(sys_err)? {
        let entry = entry.map_err(sys_err)?;
        // Partitions are real subdirectories; symlinks such as `subsystem` and `device` lead elsewhere.
        if !entry.file_type().map_err(sys_err)?.is_dir() {
            continue;
        }
        let partdir = entry.path();
        let Ok(number) = fs::read_to_string(partdir.join("partition")) else {
            continue;
        };
        let dev_text = match fs::read_to_string(partdir.join("dev")) {
            Ok(text) => text,
            // The partition went away while we looked (a partition table being re-read); it is no user.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(context(
                    e,
                    format_args!("cannot read {}", partdir.join("dev").display()),
                ));
            }
        };
        let part_dev = parse_dev(&dev_text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} does not hold MAJ:MIN: {:?}",
                    partdir.join("dev").display(),
                    dev_text.trim()
                ),
            )
        })?;
        // sysfs spells a '/' in a device name as '!' (cciss!c0d0p1 is /dev/cciss/c0d0p1).
        let name = entry.file_name().to_string_lossy().replace('!', "/");
        let member = Member {
            label: format!("/dev/{name}"),
            dev: part_dev,
            sysdir: partdir,
        };
        partitions.push((number.trim().parse().unwrap_or(u32::MAX), member));
    }
    partitions.sort_by(|a, b| (a.0, &a.1.label).cmp(&(b.0, &b.1.label)));

    let mut members = vec![Member {
        label: "it".to_string(),
        dev,
        sysdir: sysdir.to_path_buf(),
    }];
    members.extend(partitions.into_iter().map(|(_, m)| m));
    Ok(members)
}

/// Other loop devices whose backing file is the one behind the loop device at `sysdir` (none when it is not a
/// loop device). They are named by their `/dev` path and found under `sys_root/block`.
fn loop_siblings(sys_root: &Path, sysdir: &Path, dev: (u32, u32)) -> io::Result<Vec<Member>> {
    let Some(backing) = read_trimmed(&sysdir.join("loop/backing_file")) else {
        return Ok(Vec::new());
    };
    let block = sys_root.join("block");
    let Ok(entries) = fs::read_dir(&block) else {
        return Ok(Vec::new());
    };
    let mut siblings = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(sibling_dev) = read_trimmed(&dir.join("dev")).and_then(|t| parse_dev(&t)) else {
            continue;
        };
        if sibling_dev == dev || read_trimmed(&dir.join("loop/backing_file")).as_deref() != Some(&backing) {
            continue;
        }
        siblings.push(Member {
            label: format!("/dev/{name}"),
            dev: sibling_dev,
            sysdir: dir,
        });
    }
    siblings.sort_by(|a, b| a.label.cmp(&b.label));
    Ok(siblings)
}

/// The names in `sysdir/holders`, sorted.
fn holders_of(sysdir: &Path) -> io::Result<Vec<String>> {
    let dir = sysdir.join("holders");
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(context(e, format_args!("cannot read {}", dir.display()))),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| context(e, format_args!("cannot read {}", dir.display())))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// A holder's kernel name, with its device-mapper name when it has one ("dm-0 (vg0-data)").
fn describe_holder(sysdir: &Path, holder: &str) -> String {
    match read_trimmed(&sysdir.join("holders").join(holder).join("dm/name")) {
        Some(dm_name) => format!("{holder} ({dm_name})"),
        None => holder.to_string(),
    }
}

/// What kind of stack a holder's name says it belongs to.
fn holder_kind(holder: &str) -> &'static str {
    if holder.starts_with("dm-") {
        "device-mapper/LVM"
    } else if holder.starts_with("md") {
        "md RAID"
    } else if holder.starts_with("bcache") {
        "bcache"
    } else {
        "block-device"
    }
}

/// "a device-mapper device (vg0-root)" or "an md RAID device (raid1)" when `sysdir` is one, else `None`.
fn stacked_kind(sysdir: &Path) -> Option<String> {
    if sysdir.join("dm").is_dir() {
        return Some(match read_trimmed(&sysdir.join("dm/name")) {
            Some(name) => format!("a device-mapper device ({name})"),
            None => "a device-mapper device".to_string(),
        });
    }
    if sysdir.join("md").is_dir() {
        return Some(match read_trimmed(&sysdir.join("md/level")) {
            Some(level) => format!("an md RAID device ({level})"),
            None => "an md RAID device".to_string(),
        });
    }
    None
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// One line of /proc/self/mountinfo, the parts the guard uses.
struct MountEntry {
    mount_id: u64,
    dev: (u32, u32),
    mount_point: String,
    source: String,
}

/// Parses mountinfo, skipping lines it does not understand.
///
/// Fields: mount ID, parent ID, MAJ:MIN, root, mount point, options, optional fields..., "-", filesystem
/// type, mount source, superblock options. Spaces inside fields are escaped as octal, so splitting on ' ' is
/// exact.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_id = fields.first()?.parse().ok()?;
            let dev = parse_dev(fields.get(2)?)?;
            let mount_point = unescape_octal(fields.get(4)?);
            let separator = 6 + fields.get(6..)?.iter().position(|f| *f == "-")?;
            let source = fields
                .get(separator + 2)
                .map(|s| unescape_octal(s))
                .unwrap_or_default();
            Some(MountEntry {
                mount_id,
                dev,
                mount_point,
                source,
            })
        })
        .collect()
}

/// Where the mount with this id (statx's `stx_mnt_id`) is mounted, from mountinfo's text.
pub(crate) fn mount_point_of(mountinfo: &str, mount_id: u64) -> Option<String> {
    parse_mountinfo(mountinfo)
        .into_iter()
        .find(|e| e.mount_id == mount_id)
        .map(|e| e.mount_point)
}

/// Whether a mount is of the device `dev`.
///
/// Usually field 3 is the device number. A btrfs mount shows an anonymous device number (major 0) instead,
/// so for those the mount source is stat'ed when it is a path under /dev.
fn mount_is_on(entry: &MountEntry, dev: (u32, u32), block_dev_of: fn(&Path) -> Option<(u32, u32)>) -> bool {
    if entry.dev == dev {
        return true;
    }
    entry.dev.0 == 0
        && entry.source.starts_with("/dev/")
        && block_dev_of(Path::new(&entry.source)) == Some(dev)
}

/// Where any of `devs` is mounted, each mount point once.
fn mount_points<'a>(
    entries: &'a [MountEntry],
    devs: &[(u32, u32)],
    block_dev_of: fn(&Path) -> Option<(u32, u32)>,
) -> Vec<&'a str> {
    let mut points: Vec<&str> = Vec::new();
    for entry in entries {
        if devs.iter().any(|&dev| mount_is_on(entry, dev, block_dev_of))
            && !points.contains(&entry.mount_point.as_str())
        {
            points.push(&entry.mount_point);
        }
    }
    points
}

/// "/a", "/a, /b" or "/a, /b, /c and 2 more places".
fn list_mount_points(points: &[&str]) -> String {
    let named = points[..points.len().min(MAX_MOUNT_POINTS_NAMED)].join(", ");
    match points.len().saturating_sub(MAX_MOUNT_POINTS_NAMED) {
        0 => named,
        1 => format!("{named} and 1 more place"),
        more => format!("{named} and {more} more places"),
    }
}

/// The paths listed in /proc/swaps (after its header line), unescaped.
pub(crate) fn swap_paths(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(unescape_octal)
        .collect()
}

/// "MAJ:MIN" (with surrounding whitespace, as sysfs `dev` files have) to numbers.
fn parse_dev(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Undoes the kernel's `\ooo` octal escaping of mount points and swap paths (`\040` is a space).
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // A match on the escape, then the byte: octal digits that overflow a byte are left as they are.
        let escaped = match bytes.get(i + 1..i + 4) {
            Some(digits) if bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)) => {
                u8::try_from(digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'))).ok()
            }
            _ => None,
        };
        if let Some(byte) = escaped {
            out.push(byte);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits a `dev_t` into (major, minor).
fn split_dev(rdev: u64) -> (u32, u32) {
    (libc::major(rdev), libc::minor(rdev))
}

/// The real [`Probe::block_dev_of`]: stat, following symlinks (as /dev/mapper names are).
fn real_block_dev_of(path: &Path) -> Option<(u32, u32)> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type().is_block_device().then(|| split_dev(meta.rdev()))
}

/// The real [`Probe::read_head`]: reads up to [`HEAD_LEN`] bytes through a read-only open.
///
/// It first tries a read-only exclusive open (O_EXCL without O_CREAT), which on a block device fails with
/// EBUSY when the kernel or another program has claimed it; it then falls back to a plain read-only open,
/// which always works on a claimed device. A claim can outlive its holder by a few milliseconds (the kernel
/// releases io_uring's registered files and udev's probes asynchronously), so EBUSY is retried briefly before
/// it counts as a finding.
fn read_device_head(path: &Path) -> io::Result<Head> {
    const ATTEMPTS: u32 = 10;
    let mut attempt = 0;
    let (file, busy) = loop {
        attempt += 1;
        match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(path)
        {
            Ok(file) => break (file, false),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt < ATTEMPTS => {
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break (File::open(path)?, true),
            Err(e) => return Err(e),
        }
    };
    let mut bytes = Vec::new();
    file.take(HEAD_LEN).read_to_end(&mut bytes)?;
    Ok(Head { bytes, busy })
}

/// Adds what was being done to an error, keeping its kind.
fn context(e: io::Error, what: fmt::Arguments<'_>) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn has(head: &[u8], offset: usize, magic: &[u8]) -> bool {
    head.get(offset..offset + magic.len()) == Some(magic)
}

fn u16_le_at(head: &[u8], offset: usize) -> Option<u16> {
    Some(u16::from_le_bytes(head.get(offset..offset + 2)?.try_into().ok()?))
}

fn u32_le_at(head: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_le_bytes(head.get(offset..offset + 4)?.try_into().ok()?))
}

fn u64_le_at(head: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(head.get(offset..offset + 8)?.try_into().ok()?))
}

/// A Linux swap area (or a hibernation image written over one) keeps its signature in the last 10 bytes of
/// its first page. The page size is that of the machine that made it, so every common size is tried.
fn swap_signature(head: &[u8]) -> Option<&'static str> {
    for page in [4096, 8192, 16384, 32768, 65536] {
        let at = page - 10;
        if has(head, at, b"SWAPSPACE2") || has(head, at, b"SWAP-SPACE") {
            return Some("a Linux swap signature");
        }
        if [&b"S1SUSPEND"[..], b"S2SUSPEND", b"ULSUSPEND"]
            .iter()
            .any(|m| has(head, at, m))
        {
            return Some("a Linux swap signature holding a hibernation image");
        }
    }
    None
}

/// An MBR: the 55 AA boot signature, four entries whose boot flags are all 0x00 or 0x80 (boot code that
/// merely ends in 55 AA rarely passes that) and at least one entry with a partition type.
fn has_dos_partition_table(head: &[u8]) -> bool {
    if !has(head, 510, &[0x55, 0xAA]) {
        return false;
    }
    let Some(table) = head.get(446..510) else {
        return false;
    };
    let mut entries = table.chunks_exact(16);
    entries.clone().all(|e| e[0] == 0x00 || e[0] == 0x80) && entries.any(|e| e[4] != 0)
}

/// ZFS keeps labels L0 at 0 and L1 at 256 KiB; each ends in a 128 KiB ring of uberblocks (1 KiB apart at
/// the smallest) starting with the magic 0x00bab10c in the pool's byte order.
fn has_zfs_uberblock(head: &[u8]) -> bool {
    const UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
    [128 * 1024, (256 + 128) * 1024].into_iter().any(|ring| {
        (0..128).any(|k| {
            u64_le_at(head, ring + k * 1024)
                .is_some_and(|v| v == UBERBLOCK_MAGIC || v == UBERBLOCK_MAGIC.swap_bytes())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn whats(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.what.as_str()).collect()
    }

    fn put(buf: &mut [u8], offset: usize, bytes: &[u8]) {
        buf[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    fn single(buf: &[u8]) -> String {
        let found = signature_findings(buf);
        assert_eq!(found.len(), 1, "expected one finding, got {found:?}");
        found[0].to_string()
    }

    #[test]
    fn zero_and_empty_buffers_have_no_signature() {
        assert!(signature_findings(&vec![0u8; HEAD_LEN as usize]).is_empty());
        assert!(signature_findings(&[]).is_empty());
        // A buffer shorter than a signature's offset must not panic.
        assert!(signature_findings(&[0xFF; 100]).is_empty());
    }

    #[test]
    fn each_signature_is_detected() {
        let cases: &[(usize, &[u8], &str)] = &[
            (1080, &[0x53, 0xEF], "it carries an ext2/3/4 filesystem signature"),
            (0, b"XFSB", "it carries an XFS filesystem signature"),
            (65600, b"_BHRfS_M", "it carries a btrfs filesystem signature"),
            (4086, b"SWAPSPACE2", "it carries a Linux swap signature"),
            (4086, b"SWAP-SPACE", "it carries a Linux swap signature"),
            (65526, b"SWAPSPACE2", "it carries a Linux swap signature"),
            (
                4086,
                b"S1SUSPEND",
                "it carries a Linux swap signature holding a hibernation image",
            ),
            (0, b"LUKS\xba\xbe", "it carries a LUKS encrypted volume header"),
            (
                4096,
                &[0xfc, 0x4e, 0x2b, 0xa9],
                "it carries a Linux md RAID superblock",
            ),
            (
                0,
                &[0xfc, 0x4e, 0x2b, 0xa9],
                "it carries a Linux md RAID superblock",
            ),
            (512, b"EFI PART", "it carries a GPT partition table"),
            (4096, b"EFI PART", "it carries a GPT partition table"),
            (3, b"NTFS    ", "it carries an NTFS filesystem signature"),
            (3, b"EXFAT   ", "it carries an exFAT filesystem signature"),
            (32769, b"CD001", "it carries an ISO 9660 filesystem signature"),
            (0, b"hsqs", "it carries a squashfs filesystem signature"),
            (
                1024,
                &[0x10, 0x20, 0xF5, 0xF2],
                "it carries an F2FS filesystem signature",
            ),
            (
                128 * 1024,
                &[0x0c, 0xb1, 0xba, 0, 0, 0, 0, 0],
                "it carries a ZFS pool label",
            ),
            (
                128 * 1024 + 5 * 1024,
                &[0, 0, 0, 0, 0, 0xba, 0xb1, 0x0c],
                "it carries a ZFS pool label",
            ),
            (
                4096 + 24,
                &[
                    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d,
                    0x81,
                ],
                "it carries a bcache superblock",
            ),
        ];
        for (offset, magic, expected) in cases {
            let mut buf = vec![0u8; HEAD_LEN as usize];
            put(&mut buf, *offset, magic);
            assert_eq!(single(&buf), *expected, "magic {magic:?} at {offset}");
        }
    }

    #[test]
    fn lvm_label_in_any_of_the_first_four_sectors() {
        for k in 0..4 {
            let mut buf = vec![0u8; 4096];
            put(&mut buf, 512 * k, b"LABELONE");
            put(&mut buf, 512 * k + 24, b"LVM2 001");
            assert_eq!(single(&buf), "it carries an LVM2 physical volume label");
        }
        // LABELONE alone is some other label format.
        let mut buf = vec![0u8; 4096];
        put(&mut buf, 512, b"LABELONE");
        assert!(signature_findings(&buf).is_empty());
    }

    /// A sector with 55 AA at 510 and the given bytes as the first partition entry.
    fn mbr(first_entry: [u8; 16]) -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        put(&mut buf, 446, &first_entry);
        put(&mut buf, 510, &[0x55, 0xAA]);
        buf
    }

    #[test]
    fn dos_partition_table_needs_a_valid_non_empty_entry() {
        let mut entry = [0u8; 16];
        entry[0] = 0x80;
        entry[4] = 0x83;
        assert_eq!(single(&mbr(entry)), "it carries a DOS (MBR) partition table");
        // 55 AA with four empty entries is no partition table.
        assert!(signature_findings(&mbr([0u8; 16])).is_empty());
        // Boot code where the entries would be: its "boot flags" are not 0x00 or 0x80.
        entry[0] = 0x31;
        assert!(signature_findings(&mbr(entry)).is_empty());
    }

    #[test]
    fn gpt_protective_mbr_is_reported_once_as_gpt() {
        let mut entry = [0u8; 16];
        entry[4] = 0xEE;
        let mut buf = mbr(entry);
        put(&mut buf, 512, b"EFI PART");
        assert_eq!(single(&buf), "it carries a GPT partition table");
    }

    #[test]
    fn fat_boot_sector_is_vfat_not_a_partition_table() {
        // Boot code bytes that happen to look like a valid, non-empty partition entry.
        let mut entry = [0u8; 16];
        entry[4] = 0x0E;
        for (offset, label) in [(54, b"FAT12   "), (54, b"FAT16   "), (82, b"FAT32   ")] {
            let mut buf = mbr(entry);
            put(&mut buf, 0, &[0xEB, 0x3C, 0x90]);
            put(&mut buf, offset, label);
            assert_eq!(single(&buf), "it carries a vfat filesystem signature");
        }
    }

    #[test]
    fn several_signatures_are_all_reported() {
        let mut buf = vec![0u8; HEAD_LEN as usize];
        put(&mut buf, 0, b"LUKS\xba\xbe");
        put(&mut buf, 32769, b"CD001");
        assert_eq!(signature_findings(&buf).len(), 2);
    }

    const MOUNTINFO: &str = "\
22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw
36 22 7:3 / /mnt/my\\040data rw,relatime shared:12 master:3 - ext4 /dev/loop3 rw
37 22 259:1 /sub /srv/tab\\011and\\134back rw - xfs /dev/loop3p1 rw
38 22 0:44 / /mnt/pool rw,relatime - btrfs /dev/loop3p2 rw,space_cache=v2
garbage line
39 22 0:45 / /proc rw - proc proc rw
";

    #[test]
    fn mountinfo_is_parsed_and_unescaped() {
        assert_eq!(
            mounts_of(MOUNTINFO, &[(7, 3)]),
            vec![(7, 3, "/mnt/my data".to_string())]
        );
        assert_eq!(
            mounts_of(MOUNTINFO, &[(259, 1), (8, 2)]),
            vec![
                (8, 2, "/".to_string()),
                (259, 1, "/srv/tab\tand\\back".to_string())
            ]
        );
        assert!(mounts_of(MOUNTINFO, &[(7, 4)]).is_empty());
        assert_eq!(mount_point_of(MOUNTINFO, 36).as_deref(), Some("/mnt/my data"));
        assert_eq!(mount_point_of(MOUNTINFO, 99), None);
        let entries = parse_mountinfo(MOUNTINFO);
        assert_eq!(entries.len(), 5);
        assert_eq!(entries[1].source, "/dev/loop3");
        assert_eq!(entries[3].source, "/dev/loop3p2");
    }

    #[test]
    fn unescape_leaves_odd_backslashes_alone() {
        assert_eq!(unescape_octal("a\\040b"), "a b");
        assert_eq!(unescape_octal("a\\0"), "a\\0");
        assert_eq!(unescape_octal("a\\999"), "a\\999");
        assert_eq!(unescape_octal("a\\777"), "a\\777");
        assert_eq!(unescape_octal("\\"), "\\");
    }

    #[test]
    fn swap_paths_skip_the_header() {
        let swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                     /dev/sda3                               partition\t8388604\t\t0\t\t-2\n\
                     /swap\\040file                            file\t\t1024\t\t0\t\t-3\n";
        assert_eq!(
            swap_paths(swaps),
            vec!["/dev/sda3".to_string(), "/swap file".to_string()]
        );
    }

    #[test]
    fn mount_points_beyond_three_are_counted() {
        assert_eq!(list_mount_points(&["/a"]), "/a");
        assert_eq!(
            list_mount_points(&["/a", "/b", "/c", "/d"]),
            "/a, /b, /c and 1 more place"
        );
        assert_eq!(
            list_mount_points(&["/a", "/b", "/c", "/d", "/e"]),
            "/a, /b, /c and 2 more places"
        );
    }

    /// A fake sysfs + procfs tree in a fresh temporary directory, removed on drop.
    struct Tree {
        root: PathBuf,
    }

    impl Tree {
        fn new(name: &str) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let root = std::env::temp_dir().join(format!("ssdlab-guard-{}-{name}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(root.join("proc/self")).unwrap();
            fs::write(
                root.join("proc/self/mountinfo"),
                "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n",
            )
            .unwrap();
            fs::write(root.join("proc/swaps"), "Filename Type Size Used Priority\n").unwrap();
            let tree = Self { root };
            // The device under test: loop3, 7:3.
            tree.dir("sys/dev/block/7:3/holders");
            tree
        }

        fn dir(&self, rel: &str) -> PathBuf {
            let path = self.root.join(rel);
            fs::create_dir_all(&path).unwrap();
            path
        }

        fn file(&self, rel: &str, text: &str) {
            let path = self.root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }

        fn partition(&self, name: &str, number: u32, dev: &str) {
            let dir = format!("sys/dev/block/7:3/{name}");
            self.file(&format!("{dir}/partition"), &format!("{number}\n"));
            self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
            self.dir(&format!("{dir}/holders"));
        }

        /// Runs the checks on fake device 7:3, whose contents are `head`.
        fn inspect(&self, head: &[u8], read_head: fn(&Path) -> io::Result<Head>) -> io::Result<Vec<Finding>> {
            let image = self.root.join("device.img");
            fs::write(&image, head).unwrap();
            let probe = Probe {
                sys_root: &self.root.join("sys"),
                proc_root: &self.root.join("proc"),
                block_dev_of: fake_block_dev_of,
                read_head,
            };
            inspect(&image, (7, 3), &probe)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    /// Pretends /dev/loop3p2 and /dev/zram0 are block devices; nothing else is.
    fn fake_block_dev_of(path: &Path) -> Option<(u32, u32)> {
        match path.to_str()? {
            "/dev/loop3p2" => Some((259, 1)),
            "/dev/zram0" => Some((252, 0)),
            _ => None,
        }
    }

    fn plain_read(path: &Path) -> io::Result<Head> {
        Ok(Head {
            bytes: fs::read(path)?,
            busy: false,
        })
    }

    fn busy_read(path: &Path) -> io::Result<Head> {
        Ok(Head {
            bytes: fs::read(path)?,
            busy: true,
        })
    }

    #[test]
    fn idle_device_has_no_findings() {
        let tree = Tree::new("idle");
        tree.partition("loop3p1", 1, "259:0");
        assert_eq!(tree.inspect(&[0u8; 8192], plain_read).unwrap(), vec![]);
    }

    #[test]
    fn missing_sysfs_entry_is_an_error() {
        let tree = Tree::new("nosys");
        fs::remove_dir_all(tree.root.join("sys")).unwrap();
        let err = tree.inspect(&[], plain_read).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("sysfs"), "{err}");
    }

    #[test]
    fn missing_mountinfo_is_an_error_but_missing_swaps_is_not() {
        let tree = Tree::new("noproc");
        fs::remove_file(tree.root.join("proc/swaps")).unwrap();
        assert_eq!(tree.inspect(&[], plain_read).unwrap(), vec![]);
        fs::remove_file(tree.root.join("proc/self/mountinfo")).unwrap();
        assert!(tree.inspect(&[], plain_read).is_err());
    }

    #[test]
    fn mounted_partition_is_found_with_its_mount_point() {
        let tree = Tree::new("mounted");
        tree.partition("loop3p1", 1, "259:0");
        tree.partition("loop3p2", 2, "259:1");
        tree.file(
            "proc/self/mountinfo",
            "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n\
             36 22 259:0 / /mnt/my\\040data rw,relatime shared:12 - ext4 /dev/loop3p1 rw\n\
             37 22 259:0 / /var/bind rw,relatime shared:12 - ext4 /dev/loop3p1 rw\n\
             38 22 0:51 / /mnt/btr rw,relatime - btrfs /dev/loop3p2 rw\n",
        );
        let found = tree.inspect(&[], plain_read).unwrap();
        assert_eq!(
            whats(&found),
            vec![
                "/dev/loop3p1 is mounted at /mnt/my data, /var/bind",
                "/dev/loop3p2 is mounted at /mnt/btr",
            ]
        );
    }

    #[test]
    fn mounted_whole_device_is_it() {
        let tree = Tree::new("whole");
        tree.file(
            "proc/self/mountinfo",
            "36 22 7:3 / /mnt rw - ext4 /dev/loop3 rw\n",
        );
        let mut head = vec![0u8; 2048];
        put(&mut head, 1080, &[0x53, 0xEF]);
        let found = tree.inspect(&head, plain_read).unwrap();
        assert_eq!(
            whats(&found),
            vec![
                "it is mounted at /mnt",
                "it carries an ext2/3/4 filesystem signature"
            ]
        );
    }

    #[test]
    fn a_loop_device_over_the_same_mounted_file_is_in_use_and_a_signature_is_not() {
        let tree = Tree::new("siblings");
        tree.file("sys/dev/block/7:3/loop/backing_file", "/images/disk.img\n");
        for (name, dev, backing) in [
            ("loop3", "7:3", "/images/disk.img"),
            ("loop5", "7:5", "/images/disk.img"),
            ("loop6", "7:6", "/images/other.img"),
        ] {
            tree.file(&format!("sys/block/{name}/dev"), &format!("{dev}\n"));
            tree.file(
                &format!("sys/block/{name}/loop/backing_file"),
                &format!("{backing}\n"),
            );
        }
        tree.file(
            "proc/self/mountinfo",
            "36 22 7:5 / /mnt/offset rw - ext4 /dev/loop5 rw\n40 22 7:6 / /mnt/other rw - ext4 /dev/loop6 rw\n",
        );
        let mut head = vec![0u8; 2048];
        put(&mut head, 1080, &[0x53, 0xEF]);
        let found = tree.inspect(&head, plain_read).unwrap();
        assert_eq!(
            whats(&found),
            vec![
                "/dev/loop5, a loop device over the same file, is mounted at /mnt/offset",
                "it carries an ext2/3/4 filesystem signature"
            ]
        );
        assert_eq!(
            found.iter().map(|f| f.in_use).collect::<Vec<_>>(),
            vec![true, false]
        );
    }

    #[test]
    fn holders_are_named_with_their_stack() {
        let tree = Tree::new("holders");
        tree.partition("loop3p2", 2, "259:1");
        tree.partition("loop3p1", 1, "259:0");
        tree.file("sys/dev/block/7:3/loop3p2/holders/dm-0/dm/name", "vg0-data\n");
        tree.dir("sys/dev/block/7:3/loop3p1/holders/md127");
        let found = tree.inspect(&[], plain_read).unwrap();
        assert_eq!(
            whats(&found),
            vec![
                "/dev/loop3p1 is held by md127, part of an md RAID stack",
                "/dev/loop3p2 is held by dm-0 (vg0-data), part of a device-mapper/LVM stack",
            ]
        );
    }

    #[test]
    fn dm_device_is_only_a_finding_when_held() {
        let tree = Tree::new("dm");
        tree.file("sys/dev/block/7:3/dm/name", "vg0-root\n");
        assert_eq!(tree.inspect(&[], plain_read).unwrap(), vec![]);
        tree.dir("sys/dev/block/7:3/holders/dm-4");
        tree.dir("sys/dev/block/7:3/holders/bcache0");
        let found = tree.inspect(&[], plain_read).unwrap();
        assert_eq!(
            whats(&found),
            vec![
                "it, a device-mapper device (vg0-root), is held by bcache0, dm-4, part of a bcache and \
             device-mapper/LVM stack"
            ]
        );
    }

    #[test]
    fn swap_partition_is_found() {
        let tree = Tree::new("swap");
        tree.partition("loop3p1", 1, "259:0");
        tree.partition("loop3p2", 2, "259:1");
        tree.file(
            "proc/swaps",
            "Filename\tType\tSize\tUsed\tPriority\n\
             /dev/zram0                              partition\t1024\t0\t100\n\
             /dev/loop3p2                            partition\t1024\t0\t-2\n\
             /swap\\040file                          file\t1024\t0\t-3\n",
        );
        let found = tree.inspect(&[], plain_read).unwrap();
        assert_eq!(whats(&found), vec!["/dev/loop3p2 is in use as swap"]);
    }

    #[test]
    fn busy_is_reported_only_when_nothing_else_explains_it() {
        let tree = Tree::new("busy");
        let found = tree.inspect(&[], busy_read).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].what.starts_with("it is open exclusively"), "{found:?}");
        tree.file(
            "proc/self/mountinfo",
            "36 22 7:3 / /mnt rw - ext4 /dev/loop3 rw\n",
        );
        assert_eq!(
            whats(&tree.inspect(&[], busy_read).unwrap()),
            vec!["it is mounted at /mnt"]
        );
    }

    #[test]
    fn non_block_device_is_refused_as_input() {
        let err = destructive_findings(Path::new("/proc/self/mountinfo")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(destructive_findings(Path::new("/nonexistent/ssdlab-guard")).is_err());
    }
}
