//! The purges the kernel offers on a block device (secure discard, discard, zero-out), behind ssdlab-methods'
//! `Purger`, with the drive's own purges (sanitize, secure erase) handed to [`FirmwarePurger`]. The device was
//! opened through the safety gate before this is built; this only issues the ioctls over the whole device.

use std::fs::File;
use std::path::Path;

use ssdlab_core::DeviceInfo;
use ssdlab_methods::erase::{EraseMethod, PurgeFailure, Purger};

use crate::firmware_purge::FirmwarePurger;

/// A block-device ioctl over a byte range.
type RangeIoctl = fn(&File, u64, u64) -> std::io::Result<()>;

pub struct KernelPurger {
    file: File,
    capacity_bytes: u64,
    discard_supported: bool,
    /// The drive's own purges, which it delegates.
    firmware: FirmwarePurger,
}

impl KernelPurger {
    /// Opens `path` again for the ioctls (the gate's descriptor is exclusive and inside the device). It must be
    /// the same device the gate checked: `gated_rdev` is its device number, taken before the gate opened it,
    /// and the size must match.
    pub fn open(path: &Path, info: &DeviceInfo, gated_rdev: u64) -> std::io::Result<Self> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(ssdlab_io::sys::O_NOFOLLOW)
            .open(path)?;
        let same = file.metadata()?.rdev() == gated_rdev
            && ssdlab_io::sys::block_device_size(&file)? == info.capacity_bytes;
        if !same {
            return Err(std::io::Error::other(
                "the device node changed between the safety check and the purge; nothing was erased",
            ));
        }
        Ok(KernelPurger {
            file,
            capacity_bytes: info.capacity_bytes,
            discard_supported: info.discard_supported,
            firmware: FirmwarePurger::new(path, gated_rdev),
        })
    }
}

impl Purger for KernelPurger {
    fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
        match method {
            EraseMethod::Sanitize | EraseMethod::SecureErase => self.firmware.offers(method),
            EraseMethod::SecDiscard | EraseMethod::Discard if !self.discard_supported => {
                Err("the device does not support discard".into())
            }
            _ => Ok(()),
        }
    }

    fn purge(&mut self, method: EraseMethod) -> Result<String, PurgeFailure> {
        let (call, name): (RangeIoctl, &str) = match method {
            EraseMethod::Sanitize | EraseMethod::SecureErase => return self.firmware.purge(method),
            EraseMethod::SecDiscard => (ssdlab_io::sys::block_secure_discard, "BLKSECDISCARD"),
            EraseMethod::Discard => (ssdlab_io::sys::block_discard, "BLKDISCARD"),
            EraseMethod::Zero => (ssdlab_io::sys::block_zero_out, "BLKZEROOUT"),
        };
        call(&self.file, 0, self.capacity_bytes)
            .and_then(|()| self.file.sync_all())
            .map(|()| format!("{name} over all {} bytes", self.capacity_bytes))
            .map_err(|e| format!("{name}: {e}").into())
    }
}
