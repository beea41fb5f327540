//! Where a block device sits, from sysfs: a whole disk or a partition, the partitions a whole disk holds (start
//! and length in bytes), and what kind of drive answers for it (an NVMe namespace, an ATA disk through libata,
//! or something with no drive firmware to ask, such as a loop or device-mapper device).
//!
//! It only reads sysfs and stats paths; it never opens a device. `over-provisioning` uses the partitions to keep
//! the discarded tail clear of every partition, and `erase` uses the drive kind to decide which firmware purge
//! could apply.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::guard::SYS_ROOT;

/// sysfs counts partition starts and sizes in 512-byte sectors, whatever the device's logical block.
const SYSFS_SECTOR_BYTES: u64 = 512;

/// One partition of a whole disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionExtent {
    /// The kernel's name, e.g. `sda2`, `nvme0n1p1`, `loop3p1`.
    pub name: String,
    pub start_bytes: u64,
    pub len_bytes: u64,
}

/// What kind of drive answers for a block device: which firmware, if any, could purge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriveKind {
    /// An NVMe namespace (`namespace`, the block device) with its namespace id, and what a controller-wide
    /// command would reach: the controllers that serve it (more than one with multipath or a dual-port drive),
    /// each controller's transport (`pcie`, `tcp`, `rdma`, `fc`, `loop`), and the other namespaces beside it.
    Nvme {
        namespace: PathBuf,
        nsid: Option<u32>,
        controllers: Vec<NvmeController>,
        other_namespaces: Vec<String>,
    },
    /// A disk on a libata port (SATA or PATA: its sysfs path runs through `ataN` and not through USB), which ATA
    /// commands reach directly.
    Ata,
    /// A SCSI or USB-bridged disk that is not plainly ATA: a firmware erase would need the bridge's pass-through.
    OtherScsi { vendor: String },
    /// No drive firmware: a loop, device-mapper, md, zram or other virtual device.
    Virtual,
}

/// The sysfs directory of the block device at `path` (`/sys/dev/block/MAJ:MIN`, resolved).
fn sysdir_of(path: &Path) -> io::Result<PathBuf> {
    let meta = fs::metadata(path)?;
    if !meta.file_type().is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a block device", path.display()),
        ));
    }
    let rdev = meta.rdev();
    let link =
        Path::new(SYS_ROOT)
            .join("dev/block")
            .join(format!("{}:{}", libc::major(rdev), libc::minor(rdev)));
    fs::canonicalize(&link)
}

pub(crate) fn read_u64(path: &Path) -> io::Result<u64> {
    let text = fs::read_to_string(path)?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} does not hold a number: {:?}", path.display(), text.trim()),
        )
    })
}

/// Whether the block device at `path` is a partition (rather than a whole disk).
pub fn is_partition(path: &Path) -> io::Result<bool> {
    Ok(sysdir_of(path)?.join("partition").exists())
}

/// The partitions of the whole disk at `path`, in start order (none for a disk without a partition table).
pub fn partitions_of(path: &Path) -> io::Result<Vec<PartitionExtent>> {
    let sysdir = sysdir_of(path)?;
    let mut partitions = Vec::new();
    for entry in fs::read_dir(&sysdir)? {
        let entry = entry?;
        let dir = entry.path();
        if !entry.file_type()?.is_dir() || !dir.join("partition").exists() {
            continue;
        }
        let (start, size) = match (read_u64(&dir.join("start")), read_u64(&dir.join("size"))) {
            (Ok(start), Ok(size)) => (start, size),
            // The partition went away while we looked (a table being re-read): it holds nothing now.
            (Err(e), _) | (_, Err(e)) if e.kind() == io::ErrorKind::NotFound => continue,
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        partitions.push(PartitionExtent {
            name: entry.file_name().to_string_lossy().replace('!', "/"),
            start_bytes: start.saturating_mul(SYSFS_SECTOR_BYTES),
            len_bytes: size.saturating_mul(SYSFS_SECTOR_BYTES),
        });
    }
    partitions.sort_by_key(|p| p.start_bytes);
    Ok(partitions)
}

/// What kind of drive answers for the block device at `path`.
pub fn drive_kind(path: &Path) -> io::Result<DriveKind> {
    kind_of(&sysdir_of(path)?, Path::new(SYS_ROOT))
}

/// [`drive_kind`] of the device whose (resolved) sysfs directory is `sysdir`, sysfs being at `sys_root`.
fn kind_of(sysdir: &Path, sys_root: &Path) -> io::Result<DriveKind> {
    let name = sysdir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // An NVMe namespace's sysfs directory sits beside its siblings: under its controller's (…/nvme/nvme0/nvme0n1)
    // or, with native multipath, under the subsystem's (…/nvme-subsys0/nvme0n1).
    if let Some((instance, _)) = nvme_namespace_name(&name) {
        // The parent is the controller's directory (nvme0), or the subsystem's (nvme-subsys0) with native
        // multipath, which lists its controllers beside the namespaces.
        let parent = sysdir.parent().map(Path::to_path_buf).unwrap_or_default();
        let parent_name = parent
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut others = Vec::new();
        let mut controllers = Vec::new();
        for entry in fs::read_dir(&parent)? {
            let other = entry?.file_name().to_string_lossy().into_owned();
            if other != name && nvme_namespace_name(&other).is_some_and(|(i, _)| i == instance) {
                others.push(other);
            } else if is_nvme_controller_name(&other) {
                controllers.push(other);
            }
        }
        if is_nvme_controller_name(&parent_name) {
            controllers = vec![parent_name];
        }
        others.sort();
        controllers.sort();
        let controllers = controllers
            .into_iter()
            .map(|c| NvmeController {
                transport: fs::read_to_string(sys_root.join("class/nvme").join(&c).join("transport"))
                    .map(|t| t.trim().to_string())
                    .unwrap_or_default(),
                device: Path::new("/dev").join(c),
            })
            .collect();
        return Ok(DriveKind::Nvme {
            namespace: Path::new("/dev").join(&name),
            nsid: read_u64(&sysdir.join("nsid"))
                .ok()
                .and_then(|n| u32::try_from(n).ok()),
            controllers,
            other_namespaces: others,
        });
    }
    let on_libata_port = sysdir.components().any(|c| {
        c.as_os_str()
            .to_str()
            .and_then(|c| c.strip_prefix("ata"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) && !sysdir.to_string_lossy().contains("/usb");
    match fs::read_to_string(sysdir.join("device/vendor")) {
        Ok(vendor) if vendor.trim() == "ATA" && on_libata_port => Ok(DriveKind::Ata),
        Ok(vendor) => Ok(DriveKind::OtherScsi {
            vendor: vendor.trim().to_string(),
        }),
        Err(_) => Ok(DriveKind::Virtual),
    }
}

/// An NVMe controller: its character device and transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmeController {
    /// `/dev/nvme0`.
    pub device: PathBuf,
    /// As sysfs says: `pcie`, `tcp`, `rdma`, `fc`, `loop` (empty if unknown).
    pub transport: String,
}

/// `nvme0`, `nvme12`: a controller's name.
fn is_nvme_controller_name(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `(controller, namespace)` numbers of an NVMe namespace's name, `nvme0n1` -> (0, 1); None for anything else
/// (a partition `nvme0n1p1`, a multipath path `nvme0c0n1`, a controller `nvme0`).
fn nvme_namespace_name(name: &str) -> Option<(u32, u32)> {
    let (controller, namespace) = name.strip_prefix("nvme")?.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(controller) || !digits(namespace) {
        return None;
    }
    Some((controller.parse().ok()?, namespace.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes `files` (path relative to `root`, content) and their directories.
    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (path, content) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
    }

    #[test]
    fn a_local_nvme_namespace_and_its_siblings() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        tree(
            r,
            &[
                ("devices/pci/nvme/nvme0/nvme0n1/nsid", "1\n"),
                ("devices/pci/nvme/nvme0/nvme0n2/nsid", "2\n"),
                ("devices/pci/nvme/nvme0/nvme0n1/nvme0n1p1/partition", "1\n"),
                ("devices/pci/nvme/nvme0/nvme0c0n1/nsid", "1\n"),
                ("class/nvme/nvme0/transport", "pcie\n"),
            ],
        );
        let kind = kind_of(&r.join("devices/pci/nvme/nvme0/nvme0n1"), r).unwrap();
        assert_eq!(
            kind,
            DriveKind::Nvme {
                namespace: "/dev/nvme0n1".into(),
                nsid: Some(1),
                controllers: vec![NvmeController {
                    device: "/dev/nvme0".into(),
                    transport: "pcie".into(),
                }],
                other_namespaces: vec!["nvme0n2".into()],
            }
        );
    }

    #[test]
    fn a_multipath_subsystem_lists_every_controller() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        tree(
            r,
            &[
                ("devices/virtual/nvme-subsystem/nvme-subsys3/nvme3n1/nsid", "7\n"),
                ("devices/virtual/nvme-subsystem/nvme-subsys3/nvme3/x", ""),
                ("devices/virtual/nvme-subsystem/nvme-subsys3/nvme4/x", ""),
                ("class/nvme/nvme3/transport", "tcp\n"),
                ("class/nvme/nvme4/transport", "tcp\n"),
            ],
        );
        let DriveKind::Nvme {
            nsid,
            controllers,
            other_namespaces,
            ..
        } = kind_of(&r.join("devices/virtual/nvme-subsystem/nvme-subsys3/nvme3n1"), r).unwrap()
        else {
            panic!("not NVMe");
        };
        assert_eq!(nsid, Some(7));
        let names: Vec<_> = controllers
            .iter()
            .map(|c| (c.device.clone(), c.transport.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (PathBuf::from("/dev/nvme3"), "tcp"),
                (PathBuf::from("/dev/nvme4"), "tcp")
            ]
        );
        assert!(other_namespaces.is_empty());
    }

    #[test]
    fn ata_needs_a_libata_port() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        tree(
            r,
            &[
                (
                    "devices/pci/ata1/host0/target0:0:0/0:0:0:0/block/sda/device/vendor",
                    "ATA     \n",
                ),
                (
                    "devices/pci/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb/device/vendor",
                    "ATA\n",
                ),
                (
                    "devices/pci/host0/port-0:0/end_device-0:0/target0:0:0/0:0:0:0/block/sdc/device/vendor",
                    "ATA\n",
                ),
                (
                    "devices/pci/usb2/2-2/host7/target7:0:0/7:0:0:0/block/sdd/device/vendor",
                    "Samsung \n",
                ),
                ("devices/virtual/block/loop0/size", "0\n"),
            ],
        );
        let kind = |p: &str| kind_of(&r.join(p), r).unwrap();
        assert_eq!(
            kind("devices/pci/ata1/host0/target0:0:0/0:0:0:0/block/sda"),
            DriveKind::Ata
        );
        // A USB bridge and a SAS HBA translate ATA (SAT) and say "ATA" too: not on a libata port.
        for bridged in [
            "devices/pci/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb",
            "devices/pci/host0/port-0:0/end_device-0:0/target0:0:0/0:0:0:0/block/sdc",
        ] {
            assert_eq!(
                kind(bridged),
                DriveKind::OtherScsi { vendor: "ATA".into() },
                "{bridged}"
            );
        }
        assert!(matches!(
            kind("devices/pci/usb2/2-2/host7/target7:0:0/7:0:0:0/block/sdd"),
            DriveKind::OtherScsi { .. }
        ));
        assert_eq!(kind("devices/virtual/block/loop0"), DriveKind::Virtual);
    }

    #[test]
    fn nvme_names() {
        assert_eq!(nvme_namespace_name("nvme0n1"), Some((0, 1)));
        assert_eq!(nvme_namespace_name("nvme12n3"), Some((12, 3)));
        for not in ["nvme0n1p1", "nvme0c0n1", "nvme0", "nvme-subsys0", "sda", "nvmen1"] {
            assert_eq!(nvme_namespace_name(not), None, "{not}");
        }
    }
}
