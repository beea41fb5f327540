//! The device mapper's own account of a mapping: a dm device's table (DM_TABLE_STATUS through
//! /dev/mapper/control), and which bytes of which lower devices its linear and crypt targets map. The safety
//! gate relates dm devices by it: two mappings of the same bytes (an alias made with `dmsetup create --table
//! "$(dmsetup table vg-lv)"`) share bytes, two logical volumes of one physical volume do not.
//!
//! It only asks the kernel (a read-only query); it never creates, changes or removes a mapping.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// One target line of a dm table: `length` bytes of the dm device from `start`, of kind `kind` (linear, crypt,
/// striped, thin, ...), with its parameters as the kernel prints them (devices as MAJ:MIN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmTarget {
    pub start_bytes: u64,
    pub len_bytes: u64,
    pub kind: String,
    pub params: String,
}

impl DmTarget {
    /// Where a linear or crypt target keeps its bytes: the lower device and the byte offset on it. None for
    /// the other kinds, whose place on their devices is not a single range (striped, thin, snapshot, raid,
    /// cache, mirror, ...).
    pub fn lower_range(&self) -> Option<((u32, u32), u64)> {
        let fields: Vec<&str> = self.params.split_whitespace().collect();
        let (device, offset) = match self.kind.as_str() {
            // linear: <dev> <offset>
            "linear" => (fields.first()?, fields.get(1)?),
            // crypt: <cipher> <key> <iv_offset> <dev> <offset> [<#opt_params> <opt_params>]
            "crypt" => (fields.get(3)?, fields.get(4)?),
            _ => return None,
        };
        let (major, minor) = device.split_once(':')?;
        let sectors: u64 = offset.parse().ok()?;
        Some((
            (major.parse().ok()?, minor.parse().ok()?),
            sectors.checked_mul(512)?,
        ))
    }
}

/// `struct dm_ioctl` of <linux/dm-ioctl.h> (version 4).
#[repr(C)]
struct DmIoctl {
    version: [u32; 3],
    data_size: u32,
    data_start: u32,
    target_count: u32,
    open_count: i32,
    flags: u32,
    event_nr: u32,
    padding: u32,
    dev: u64,
    name: [u8; 128],
    uuid: [u8; 129],
    data: [u8; 7],
}

/// `struct dm_target_spec`: what precedes each target's parameter string in the reply.
#[repr(C)]
struct DmTargetSpec {
    sector_start: u64,
    length: u64,
    status: i32,
    next: u32,
    target_type: [u8; 16],
}

const DM_TABLE_STATUS: libc::c_ulong = 0xC138_FD0C;
const DM_STATUS_TABLE_FLAG: u32 = 1 << 4;
const DM_BUFFER_FULL_FLAG: u32 = 1 << 8;

/// The table of the dm device numbered `dev` (major, minor). Needs /dev/mapper/control (root).
pub fn table(dev: (u32, u32)) -> io::Result<Vec<DmTarget>> {
    let control = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/mapper/control")?;
    let mut size = 16 << 10;
    loop {
        match table_with(&control, dev, size)? {
            Some(targets) => return Ok(targets),
            None if size < 16 << 20 => size *= 4,
            None => return Err(io::Error::other("the dm table does not fit 16 MiB")),
        }
    }
}

/// One DM_TABLE_STATUS with a reply buffer of `size` bytes; None when the table did not fit.
fn table_with(control: &File, dev: (u32, u32), size: usize) -> io::Result<Option<Vec<DmTarget>>> {
    let header = std::mem::size_of::<DmIoctl>();
    assert!(size > header, "the buffer holds the header");
    // u64 words, so the header and the target specs (which hold u64s) are aligned as the kernel writes them.
    let mut buffer = vec![0u64; size.div_ceil(8)];
    let bytes = buffer.len() * 8;
    {
        // SAFETY: the buffer is at least `header` bytes, 8-byte aligned and zeroed; DmIoctl is plain old data
        // (integers and byte arrays), so any bytes are a valid value and writing its fields is sound.
        let io = unsafe { &mut *(buffer.as_mut_ptr().cast::<DmIoctl>()) };
        io.version = [4, 0, 0];
        io.data_size = bytes as u32;
        io.data_start = header as u32;
        io.flags = DM_STATUS_TABLE_FLAG;
        io.dev = libc::makedev(dev.0, dev.1);
    }
    // SAFETY: DM_TABLE_STATUS reads the header and writes at most `data_size` bytes (the buffer's length) into
    // the buffer, which lives for the call.
    let rc = unsafe { libc::ioctl(control.as_raw_fd(), DM_TABLE_STATUS, buffer.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; the kernel has written the header.
    let io = unsafe { &*(buffer.as_ptr().cast::<DmIoctl>()) };
    if io.flags & DM_BUFFER_FULL_FLAG != 0 {
        return Ok(None);
    }
    let (start, count) = (io.data_start as usize, io.target_count as usize);
    // SAFETY: the buffer is `bytes` long and initialized (zeroed, then written by the kernel); u8 has no
    // alignment or validity requirement.
    let raw = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), bytes) };
    let spec_size = std::mem::size_of::<DmTargetSpec>();
    let mut targets = Vec::with_capacity(count);
    let mut at = start;
    for _ in 0..count {
        let spec_bytes = raw
            .get(at..at + spec_size)
            .ok_or_else(|| io::Error::other("a dm table reply that ends inside a target"))?;
        let mut spec_copy = [0u8; 40];
        spec_copy.copy_from_slice(spec_bytes);
        let u64_at = |o: usize| u64::from_ne_bytes(spec_copy[o..o + 8].try_into().expect("8 bytes"));
        let next = u32::from_ne_bytes(spec_copy[20..24].try_into().expect("4 bytes")) as usize;
        let kind_end = spec_copy[24..40].iter().position(|&b| b == 0).unwrap_or(16);
        let params_bytes = &raw[at + spec_size..];
        let params_end = params_bytes
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(params_bytes.len());
        let kind = String::from_utf8_lossy(&spec_copy[24..24 + kind_end]).into_owned();
        let mut params = String::from_utf8_lossy(&params_bytes[..params_end]).into_owned();
        if kind == "crypt" {
            // A plain dm-crypt table carries its master key in hex: never kept (only the device and offset are
            // of use here).
            let mut fields: Vec<&str> = params.split_whitespace().collect();
            if fields.len() > 1 {
                fields[1] = "-";
            }
            params = fields.join(" ");
        }
        targets.push(DmTarget {
            start_bytes: u64_at(0).saturating_mul(512),
            len_bytes: u64_at(8).saturating_mul(512),
            kind,
            params,
        });
        // `next` counts from the start of the data area.
        if next == 0 {
            break;
        }
        at = start + next;
    }
    // The reply may hold a plain dm-crypt key: the buffer is cleared before it is freed.
    buffer.fill(0);
    Ok(Some(targets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_have_the_kernels_sizes() {
        assert_eq!(std::mem::size_of::<DmIoctl>(), 312);
        assert_eq!(std::mem::size_of::<DmTargetSpec>(), 40);
        assert_eq!(
            DM_TABLE_STATUS & 0x3fff_0000,
            312 << 16,
            "the size encoded in the request"
        );
    }

    #[test]
    fn linear_and_crypt_targets_name_their_range_and_others_none() {
        let target = |kind: &str, params: &str| DmTarget {
            start_bytes: 0,
            len_bytes: 1 << 20,
            kind: kind.into(),
            params: params.into(),
        };
        assert_eq!(
            target("linear", "8:16 2048").lower_range(),
            Some(((8, 16), 1 << 20))
        );
        assert_eq!(
            target(
                "crypt",
                "aes-xts-plain64 :64:logon:cryptsetup:x 0 259:3 32768 1 allow_discards"
            )
            .lower_range(),
            Some(((259, 3), 16 << 20))
        );
        assert_eq!(target("striped", "2 128 8:16 0 8:32 0").lower_range(), None);
        assert_eq!(target("thin", "253:2 1").lower_range(), None);
        assert_eq!(target("linear", "garbage").lower_range(), None);
    }
}
