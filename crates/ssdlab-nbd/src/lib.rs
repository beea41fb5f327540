//! ssdlab-nbd: an NBD server that exports any [`ssdlab_core::device::Device`]: a drive, a file, the virtual
//! SSD or the DRAM cache over any of them, so real clients (nbdcopy, qemu-io, fio's nbd engine, nbdfuse and a
//! file system on top) can use it.
//!
//! [`protocol`] is the wire format (handshake, requests, replies); [`server`] is the event loop that turns
//! requests into device operations; [`status`] answers block-status queries. The crate opens no files and decides nothing about safety: the binary
//! opens the target through ssdlab-targets (with its destructive-safety gate) and hands over a listener.
#![forbid(unsafe_code)]

pub mod protocol;
pub mod server;
pub mod status;

pub use server::{Listener, ServeOptions, ServeStats, serve};
