//! The purges the kernel offers on a block device (secure discard, discard, zero-out), behind ssdlab-methods'
//! `Purger`, with the drive's own purges (sanitize, secure erase) handed to [`FirmwarePurger`]. The device was
//! opened through the safety gate before this is built; this only issues the ioctls over the whole device.

use std::fs::File;
use std::path::Path;

use ssdlab_core::DeviceInfo;
use ssdlab_methods::erase::{EraseMethod, PurgeFailure, Purger};

use crate::ports::{Clock, Console, Tools};

use super::firmware::FirmwarePurger;

/// A block-device ioctl over a byte range.
type RangeIoctl = fn(&File, u64, u64) -> std::io::Result<()>;

pub struct KernelPurger<'p> {
    file: File,
    capacity_bytes: u64,
    discard_supported: bool,
    /// The drive's own purges, which it delegates.
    firmware: FirmwarePurger<'p>,
}

impl<'p> KernelPurger<'p> {
    /// Purges through `file`, a duplicate of the descriptor the safety gate judged and claimed (never a second
    /// open by path); the drive's own purges name the device by `path`, checked against its number.
    pub fn new(
        file: File,
        path: &Path,
        info: &DeviceInfo,
        tools: &'p dyn Tools,
        clock: &'p dyn Clock,
        console: Option<&'p mut dyn Console>,
    ) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let gated_rdev = file.metadata()?.rdev();
        check_size_unchanged(&file, info)?;
        Ok(KernelPurger {
            file,
            capacity_bytes: info.capacity_bytes,
            discard_supported: info.discard_supported,
            firmware: FirmwarePurger::new(path, gated_rdev, tools, clock, console),
        })
    }
}

/// Refuses a device whose size is no longer the one the safety gate judged.
pub fn check_size_unchanged(file: &File, info: &DeviceInfo) -> std::io::Result<()> {
    if ssdlab_io::sys::block_device_size(file)? != info.capacity_bytes {
        return Err(std::io::Error::other(
            "the device's size changed after the safety check; nothing was erased",
        ));
    }
    Ok(())
}

impl Purger for KernelPurger<'_> {
    fn offers(&mut self, method: EraseMethod) -> Result<(), String> {
        match method {
            EraseMethod::Sanitize | EraseMethod::SecureErase => self.firmware.offers(method),
            EraseMethod::SecDiscard | EraseMethod::Discard if !self.discard_supported => {
                Err("the device does not support discard".into())
            }
            _ => Ok(()),
        }
    }

    fn notices(&mut self, method: EraseMethod) -> Vec<String> {
        match method {
            EraseMethod::Sanitize | EraseMethod::SecureErase => self.firmware.notices(method),
            _ => Vec::new(),
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
