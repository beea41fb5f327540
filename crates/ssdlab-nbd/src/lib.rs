//! ssdlab-nbd: an NBD server that exports any [`ssdlab_core::device::Device`]: a drive, a file, the virtual
//! SSD or the DRAM cache over any of them, so real clients (nbdcopy, qemu-io, fio's nbd engine, nbdfuse and a
//! file system on top) can use it.
//!
//! [`protocol`] is the wire format (requests, replies, the numbers); [`negotiation`] is the handshake as a
//! state machine without I/O; [`server`] is the event loop (epoll) over the listener, the connections
//! (`conn`) and the device; `transmission` turns requests into device work (`job`: chunks,
//! read-modify-write of partial blocks, FUA) and answers them, into a connection's `output` (bytes, and ranges
//! of a page-cache export's file sent with sendfile); [`status`] answers block-status queries;
//! [`client`] is a minimal blocking client for tests that drive a server in-process. The
//! crate opens no files and decides nothing about safety: the app's serve command opens the target through its
//! target port (ssdlab-targets, with the destructive-safety gate) and hands over a listener.
#![forbid(unsafe_code)]

pub mod client;
mod conn;
mod job;
pub mod negotiation;
mod output;
pub mod protocol;
pub mod server;
pub mod status;
mod transmission;

pub use server::{Listener, ServeOptions, ServeStats, effective_poll, serve};
