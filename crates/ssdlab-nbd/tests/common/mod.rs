//! What the in-process server tests share: a client with the tests' habits, and a server on the test thread
//! over an abstract Unix socket that stops when the clients are done (or panic).
#![allow(dead_code)]

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ssdlab_core::device::Device;
use ssdlab_nbd::server::ServeError;
use ssdlab_nbd::{Listener, ServeOptions, ServeStats, serve};

/// The crate's client with the test's habits: a hang guard, and a panic for a broken connection.
pub struct Client {
    inner: ssdlab_nbd::client::Client,
    pub size: u64,
}

/// A reply: the NBD error (0 for success) and, for a successful read, its data.
pub type Reply = ssdlab_nbd::client::Reply;

impl Client {
    pub fn connect(addr: &SocketAddr) -> Client {
        // A hang guard only: every reply here comes in milliseconds.
        Client::connect_waiting(addr, Duration::from_secs(60))
    }

    /// Connected, with `patience` for each reply before the test fails.
    pub fn connect_waiting(addr: &SocketAddr, patience: Duration) -> Client {
        let stream = UnixStream::connect_addr(addr).expect("the server listens");
        stream.set_read_timeout(Some(patience)).unwrap();
        let inner = ssdlab_nbd::client::Client::handshake(stream).expect("the handshake");
        Client {
            size: inner.size_bytes(),
            inner,
        }
    }

    pub fn send(&mut self, command: u16, flags: u16, offset: u64, length: u32, payload: &[u8]) -> u64 {
        self.inner.send(command, flags, offset, length, payload).unwrap()
    }

    pub fn reply(&mut self, cookie: u64, read_len: usize) -> Reply {
        self.inner.reply(cookie, read_len).unwrap()
    }

    pub fn read(&mut self, offset: u64, len: u64) -> Reply {
        self.inner.read(offset, len as u32).unwrap()
    }

    pub fn write(&mut self, offset: u64, data: &[u8], flags: u16) -> u32 {
        self.inner.write(offset, data, flags).unwrap()
    }

    pub fn flush(&mut self) -> u32 {
        self.inner.flush().unwrap()
    }

    pub fn disconnect(self) {
        self.inner.disconnect().unwrap();
    }
}

/// Sets the stop flag when dropped, so a client that panics still lets the server return.
pub struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Serves `device` on a fresh abstract socket while `clients` runs on its own thread, then stops the server;
/// returns what `serve` returned. A client's panic is the test's.
pub fn with_server<D: Device>(
    device: &mut D,
    clients: impl FnOnce(&SocketAddr) + Send,
) -> Result<ServeStats, ServeError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "ssdlab-nbd-faults-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let stop = AtomicBool::new(false);
    let options = ServeOptions {
        export_name: "faulty".into(),
        read_only: false,
        slots: 4,
        max_connections: 8,
        poll_after_reply: std::time::Duration::from_micros(15),
    };
    std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            let _stop = StopOnDrop(&stop);
            clients(&addr);
        });
        let served = serve(device, Listener::Unix(listener), &options, &stop, |_| {});
        if let Err(panic) = client.join() {
            std::panic::resume_unwind(panic);
        }
        served
    })
}
