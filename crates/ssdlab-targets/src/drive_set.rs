//! Drive sets: the drives of a fan-out read by one thread through one io_uring (`ssdlab_io::many`), each a
//! sibling of a device the gate opened for reading (a duplicate of its descriptor, never a reopen by path). Only
//! devices opened with io_uring take part; the caller reads any other on a thread of its own. It never opens a path and never writes.

use ssdlab_core::device::{DeviceError, DeviceResult, DriveSet};
use ssdlab_io::Sibling;
use ssdlab_io::many::ManyReads;

use crate::AnyDevice;

impl AnyDevice {
    /// A sibling of this device for a drive set, or None when it cannot be one: only a device read through
    /// io_uring (so a ring works in this process, and `--engine psync` is kept), and not a file whose length ends
    /// inside its last logical block.
    pub fn set_sibling(&self) -> DeviceResult<Option<Sibling>> {
        let duplicate = |e| DeviceError::os("duplicating a drive's descriptor for its reading thread", e);
        let sibling = match self {
            AnyDevice::Uring(d) => d.sibling().map_err(duplicate)?,
            AnyDevice::Psync(_)
            | AnyDevice::Null(_)
            | AnyDevice::Sim(_)
            | AnyDevice::Cached(_)
            | AnyDevice::Dyn(_) => return Ok(None),
        };
        Ok(sibling.backing.tail.is_none().then_some(sibling))
    }
}

/// The set of `siblings`, read `block_bytes` at a time, made on the calling thread (its ring serves only it).
pub fn drive_set(siblings: Vec<Sibling>, block_bytes: usize) -> DeviceResult<Box<dyn DriveSet>> {
    Ok(Box::new(ManyReads::new(siblings, block_bytes).map_err(|e| {
        DeviceError::os("setting up the io_uring that reads a share of the drives", e)
    })?))
}
