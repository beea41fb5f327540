//! The server: one thread, one event loop (epoll) over the listener, every client connection and the device.
//!
//! It owns the connections' lives: accepting them (up to a limit, past which a client hears why it is
//! refused), their handshakes (a state machine fed from the loop, with a hard deadline on the whole of it), the
//! readiness the loop watches each socket for, and closing them once nothing more can happen on them, whatever
//! partial request a client left. It must never block on one client: sockets are non-blocking, the loop's cost
//! follows the sockets that are ready (epoll), not the connections open, and a client that sends slowly, sends
//! nothing or reads nothing holds up only itself. The transmission phase (requests into device work and
//! replies) is [`crate::transmission`]'s; what a connection is owed, and its sending (bytes, or ranges sent
//! from the export's page cache), is `output`'s.
//!
//! While the device has operations in flight the loop alternates a zero-timeout wait on the sockets with a
//! short reap (each turn first turns the requests that arrived into device work, so the reap sees them); while
//! it is idle the loop waits on the sockets (at most until the next handshake deadline) and
//! gives the device its idle time (a cache destages). Right after a turn that handled exactly one request, the
//! idle wait first polls for a few microseconds (`poll_after_reply`, `--poll-us`), so a client at queue depth 1
//! finds the loop awake; it never polls longer, so an idle server sleeps.

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::epoll;
use ssdlab_core::device::{Completion, Device, Io, Op};

use crate::conn::{Conn, Phase, Stream};
use crate::job::Job;
use crate::negotiation::{MAX_OPTION_BYTES, Negotiation, Outcome};
use crate::protocol::{self, ExportInfo, Request};

/// The largest payload a client that negotiated block sizes may send or ask for in one request (advertised in
/// NBD_INFO_BLOCK_SIZE); a client that did not may use the protocol's 32 MiB.
pub const MAX_PAYLOAD_BYTES: u32 = 4 << 20;
/// A write longer than this is not even skipped: the connection is closed.
pub(crate) const HARD_PAYLOAD_LIMIT: u32 = 64 << 20;
/// The whole handshake must be over within this, however the client paces its bytes.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once, by default; past it a client is told why it is refused.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections past the limit that are still accepted to be told why; past these, new ones are closed at once.
const REFUSALS_AT_ONCE: usize = 64;
/// New connections taken per turn of the loop, so a flood of them does not starve the clients already in.
const ACCEPTS_PER_TURN: usize = 64;
pub(crate) const READ_CHUNK: usize = 256 << 10;
/// What a client's Unix socket asks of the kernel for its send buffer (see `Listener::accept`).
const SEND_BUFFER_BYTES: usize = 1 << 20;
/// How long the loop waits on the sockets while the device is idle (the stop flag is checked this often).
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// How long a reap waits for the device while it has work, before the sockets are looked at again.
const REAP_WAIT_NS: u64 = 200_000;
/// How long a stopping server keeps sending replies to clients that do not read them.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(30);
const LISTENER: u64 = u64::MAX;

/// Where to listen.
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| {
                // A Unix socket's send buffer is net.core.wmem_default (208 KiB on Debian), smaller than one
                // 256 KiB read reply (nbdcopy's request): each such reply went in two sends with a wait for the
                // socket between them. Asked for 1 MiB, the kernel gives twice what net.core.wmem_max allows (416
                // KiB by Debian's default, 2 MiB where it is raised). nbdcopy of 512 MiB from the page cache: 1.16x
                // nbdkit's speed by Debian's default limit and 1.34x at 4 MiB, against 0.87-1.06x before. (TCP
                // sockets size their buffers themselves, and a size set here would stop that.)
                let _ = rustix::net::sockopt::set_socket_send_buffer_size(&s, SEND_BUFFER_BYTES);
                Stream::Unix(s)
            }),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                // Replies are small and latency matters: no Nagle.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Unix(l) => l.as_fd(),
            Listener::Tcp(l) => l.as_fd(),
        }
    }
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub export_name: String,
    pub read_only: bool,
    /// Operations the device may have in flight at once (across all clients).
    pub slots: u32,
    /// Connections open at once; past it, a client's options are refused with the reason.
    pub max_connections: usize,
    /// After a turn that answered a single request, how long the next idle wait first polls the sockets before it
    /// sleeps (zero: never; see [`effective_poll`] for where it is ignored).
    pub poll_after_reply: Duration,
}

/// The poll after a reply the server really does when `requested` is asked for: none where this process may
/// run on one CPU only, since a poll there would hold off the very client it waits for if that client runs on
/// the same CPU.
pub fn effective_poll(requested: Duration) -> Duration {
    if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        requested
    } else {
        Duration::ZERO
    }
}

/// What the server did, for the closing summary (the type is the result schema's).
pub use ssdlab_core::schema::serve::ServeStats;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{what}: {cause}")]
    Io { what: &'static str, cause: io::Error },
    #[error("the device failed: {0}")]
    Device(#[from] ssdlab_core::device::DeviceError),
}

fn io_error(what: &'static str) -> impl FnOnce(io::Error) -> ServeError {
    move |cause| ServeError::Io { what, cause }
}

/// A request's work at the device, on the slot it holds.
pub(crate) struct Pending {
    pub conn: usize,
    /// The connection's generation: its slot in the table may be reused once it is closed.
    pub generation: u32,
    pub request: Request,
    pub job: Job,
    /// Bytes it counts in its connection's backlog.
    pub owed: usize,
    /// Waiting for an overlapping write to finish before its first operation (see `transmission`).
    pub deferred: bool,
    /// The length of its operation at the device now (a read or write that moves fewer bytes failed).
    pub op_len: u64,
}

pub(crate) struct Server<'a, D: Device> {
    pub device: &'a mut D,
    pub export: ExportInfo,
    pub read_only: bool,
    /// The device's block: the unit of its operations and of block status.
    pub device_block: u64,
    /// The largest device operation: a slot's buffer.
    pub chunk: u64,
    /// A duplicate of the descriptor whose page cache the device's reads are ([`Device::page_cache`]): a read's
    /// reply then sends its bytes from there (see `output`) rather than copying them out of the slot.
    pub page_cache: Option<OwnedFd>,
    max_connections: usize,
    /// See [`ServeOptions::poll_after_reply`]; zero on a single CPU.
    poll_after_reply: Duration,
    /// The last turn handled exactly one request (a client at queue depth 1): the next idle wait polls first.
    poll_next: bool,
    epoll: OwnedFd,
    pub conns: Vec<Option<Conn>>,
    pub generations: Vec<u32>,
    free_conns: Vec<usize>,
    open: usize,
    pub jobs: Vec<Option<Pending>>,
    pub free_slots: Vec<u32>,
    /// Write jobs waiting for an overlapping write whose edges are read and written back, in arrival order.
    pub deferred: VecDeque<u32>,
    /// Write jobs held (at the device or deferred) whose edges are read and written back.
    pub partial_writes: usize,
    /// Connections with a request waiting for a device slot, in the order they asked.
    pub waiting_for_slot: VecDeque<(usize, u32)>,
    /// Handshake deadlines in accept order (every handshake gets the same time, so they expire in order).
    deadlines: VecDeque<(Instant, usize, u32)>,
    /// Connections to look at once this turn's events are handled.
    touched: Vec<usize>,
    listening: bool,
    pub stats: ServeStats,
    /// Shutting down: no new request is taken.
    pub stopping: bool,
    /// Reused for every socket read (allocating and zeroing it per request cost more than the request).
    read_chunk: Vec<u8>,
    events: Vec<epoll::Event>,
    completions: Vec<Completion>,
}

/// Serves `device` on `listener` until `stop` is set, then finishes what is in flight, flushes the device
/// and returns. `on_ready` is called once the server is accepting.
pub fn serve<D: Device>(
    device: &mut D,
    listener: Listener,
    options: &ServeOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(&ExportInfo),
) -> Result<ServeStats, ServeError> {
    if options.slots == 0 || options.max_connections == 0 {
        return Err(ServeError::Io {
            what: "serving",
            cause: io::Error::new(
                ErrorKind::InvalidInput,
                "the server needs at least one slot and one connection",
            ),
        });
    }
    let info = device.info().clone();
    let block = u64::from(info.logical_block_bytes);
    let max_payload = MAX_PAYLOAD_BYTES.min(u32::try_from(info.max_transfer_bytes).unwrap_or(u32::MAX));
    let chunk = u64::from(max_payload) / block * block;
    device.prepare(options.slots, max_payload as usize)?;
    let page_cache = device
        .page_cache()
        .filter(|fd| sendfile_works(*fd))
        .map(|fd| fd.try_clone_to_owned())
        .transpose()
        .map_err(io_error("duplicating the export's file descriptor"))?;
    let mut server = Server {
        page_cache,
        export: export_info(&info, options, max_payload),
        device,
        read_only: options.read_only,
        device_block: block,
        chunk,
        max_connections: options.max_connections,
        poll_after_reply: effective_poll(options.poll_after_reply),
        poll_next: false,
        epoll: epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| ServeError::Io {
            what: "epoll",
            cause: e.into(),
        })?,
        conns: Vec::new(),
        generations: Vec::new(),
        free_conns: Vec::new(),
        open: 0,
        jobs: (0..options.slots).map(|_| None).collect(),
        free_slots: (0..options.slots).rev().collect(),
        deferred: VecDeque::new(),
        partial_writes: 0,
        waiting_for_slot: VecDeque::new(),
        deadlines: VecDeque::new(),
        touched: Vec::new(),
        listening: false,
        stats: ServeStats {
            device_errors: Some(0),
            reads_cut_short: Some(0),
            ..ServeStats::default()
        },
        stopping: false,
        read_chunk: vec![0; READ_CHUNK],
        events: Vec::with_capacity(256),
        completions: Vec::new(),
    };
    listener.set_nonblocking().map_err(io_error("listening"))?;
    server.listen(&listener, true)?;
    on_ready(&server.export);
    server.run(&listener, stop)?;
    server.shut_down(&listener)?;
    Ok(server.stats)
}

/// Whether sendfile can take bytes from `file` to a socket: a file system without splice support refuses it,
/// and its reads are then copied as before rather than each cut short after its header.
fn sendfile_works(file: BorrowedFd<'_>) -> bool {
    let Ok((to, _from)) = std::os::unix::net::UnixStream::pair() else {
        return false;
    };
    rustix::fs::sendfile(&to, file, Some(&mut 0), 1).is_ok()
}

/// What the export looks like: the device's exact size (a last block it ends inside is still served), and the
/// transmission flags of what the device can do.
fn export_info(
    info: &ssdlab_core::device::DeviceInfo,
    options: &ServeOptions,
    max_payload: u32,
) -> ExportInfo {
    // One device behind every connection: a FLUSH on any of them covers the writes completed on all of them,
    // which is what CAN_MULTI_CONN promises.
    let mut flags = protocol::TFLAG_HAS_FLAGS
        | protocol::TFLAG_SEND_FLUSH
        | protocol::TFLAG_SEND_FUA
        | protocol::TFLAG_SEND_CACHE
        | protocol::TFLAG_CAN_MULTI_CONN;
    if options.read_only {
        flags |= protocol::TFLAG_READ_ONLY;
    } else {
        flags |= protocol::TFLAG_SEND_WRITE_ZEROES;
        if info.discard_supported {
            flags |= protocol::TFLAG_SEND_TRIM;
        }
    }
    if info.rotational {
        flags |= protocol::TFLAG_ROTATIONAL;
    }
    // The exact size: a last block the capacity ends inside is addressed whole by the jobs, and the device
    // reads zeroes past the capacity and never writes there (`DeviceInfo::capacity_bytes`), as nbdkit's file
    // plugin exports a file of any length.
    ExportInfo {
        name: options.export_name.clone(),
        size_bytes: info.capacity_bytes,
        transmission_flags: flags,
        // A client that honours the minimum block (qemu's does, and clamps the size down to a multiple of it)
        // could not reach the bytes of a partial last block: such an export takes any alignment, as nbdkit's
        // file plugin does, and the jobs read and write the edges of a block back.
        min_block_bytes: if info
            .capacity_bytes
            .is_multiple_of(u64::from(info.logical_block_bytes))
        {
            info.logical_block_bytes
        } else {
            1
        },
        preferred_block_bytes: info.physical_block_bytes.max(4096),
        max_payload_bytes: max_payload,
    }
}

impl<D: Device> Server<'_, D> {
    fn run(&mut self, listener: &Listener, stop: &AtomicBool) -> Result<(), ServeError> {
        while !stop.load(Ordering::Relaxed) {
            self.turn(Some(listener))?;
        }
        Ok(())
    }

    /// One turn of the loop: wait for sockets (or not, while the device works), handle what is ready, expire
    /// handshakes, reap the device, hand freed slots on, and settle every connection that changed.
    fn turn(&mut self, listener: Option<&Listener>) -> Result<(), ServeError> {
        let busy = self.device.in_flight() > 0;
        let timeout = if busy {
            Duration::ZERO
        } else {
            let next_deadline = self
                .deadlines
                .front()
                .map(|d| d.0.saturating_duration_since(Instant::now()) + Duration::from_millis(1));
            next_deadline.map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT))
        };
        let requests_before = self.requests();
        let ready = if !busy && self.poll_next {
            self.poll_then_wait(timeout)?
        } else {
            self.wait(timeout)?
        };
        for k in 0..ready {
            let event = self.events[k];
            let token = event.data.u64();
            if token == LISTENER {
                if let Some(l) = listener {
                    self.accept(l);
                }
                continue;
            }
            let (i, generation) = ((token & 0xffff_ffff) as usize, (token >> 32) as u32);
            if self.generations.get(i) != Some(&generation) {
                continue;
            }
            self.socket_ready(i, event.flags);
        }
        self.expire_handshakes();
        // Requests that just arrived become device work here, so the reap below already sees them: at QD1 the
        // reply then leaves on this turn, not after one more wait on the sockets (and a read from the page cache
        // is done inside its submission).
        self.settle(listener);
        if self.device.in_flight() > 0 {
            self.reap(REAP_WAIT_NS)?;
        }
        self.hand_out_slots();
        self.settle(listener);
        if !busy && ready == 0 && self.device.in_flight() == 0 {
            // Nothing to do: a chance for the device's background work (a cache destages).
            self.device.idle();
        }
        // Only a turn of one request looks like a client waiting for each reply before it sends the next; a turn
        // of many (queue depth 32) has its next batch on the way anyway, and polling for it only takes the CPU
        // from the client and the kernel's writeback (-4% at QD32 page-cache writes when every turn polled).
        self.poll_next = !self.poll_after_reply.is_zero() && self.requests() - requests_before == 1;
        Ok(())
    }

    /// Requests answered so far, of every kind.
    fn requests(&self) -> u64 {
        let s = &self.stats;
        s.reads + s.writes + s.flushes + s.trims + s.write_zeroes + s.block_status
    }

    /// Polls the sockets without sleeping for up to `poll_after_reply`, then waits as [`Server::wait`] does. A
    /// client at queue depth 1 sends its next request a few microseconds after our reply; catching it awake saves
    /// the sleep and the wake-up (4 KiB page-cache writes over a Unix socket on a 2-core VM: about 36K requests
    /// a second without the poll, 46K with 15 us of it).
    fn poll_then_wait(&mut self, timeout: Duration) -> Result<usize, ServeError> {
        let until = Instant::now() + self.poll_after_reply;
        loop {
            let ready = self.wait(Duration::ZERO)?;
            if ready > 0 {
                return Ok(ready);
            }
            if Instant::now() >= until {
                return self.wait(timeout);
            }
            std::hint::spin_loop();
        }
    }

    /// Waits for ready sockets; returns how many events are in `self.events`.
    fn wait(&mut self, timeout: Duration) -> Result<usize, ServeError> {
        self.events.clear();
        let timeout = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut self.events),
            Some(&timeout),
        ) {
            Ok(_) => Ok(self.events.len()),
            Err(rustix::io::Errno::INTR) => Ok(0),
            Err(e) => Err(ServeError::Io {
                what: "epoll_wait",
                cause: e.into(),
            }),
        }
    }

    fn listen(&mut self, listener: &Listener, on: bool) -> Result<(), ServeError> {
        if on == self.listening {
            return Ok(());
        }
        let result = if on {
            epoll::add(
                &self.epoll,
                listener.fd(),
                epoll::EventData::new_u64(LISTENER),
                epoll::EventFlags::IN,
            )
        } else {
            epoll::delete(&self.epoll, listener.fd())
        };
        result.map_err(|e| ServeError::Io {
            what: "watching the listener",
            cause: e.into(),
        })?;
        self.listening = on;
        Ok(())
    }

    fn accept(&mut self, listener: &Listener) {
        for _ in 0..ACCEPTS_PER_TURN {
            let stream = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
                    // Out of descriptors: stop listening until a connection closes (the listener would stay
                    // ready and the loop would spin on it).
                    let _ = self.listen(listener, false);
                    return;
                }
                // The client gave up before it was accepted, or similar: the next one may be fine.
                Err(_) => continue,
            };
            self.stats.connections += 1;
            if self.open >= self.max_connections + REFUSALS_AT_ONCE || stream.set_nonblocking().is_err() {
                // No room even to say why.
                self.stats.connections_refused += 1;
                continue;
            }
            let refusal = (self.open >= self.max_connections).then(|| {
                self.stats.connections_refused += 1;
                format!(
                    "ssdlab serve: too many connections (the limit is {}); try again later",
                    self.max_connections
                )
            });
            let mut greeting = Vec::new();
            let negotiation = Negotiation::start(&mut greeting, refusal);
            let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
            let conn = Conn::new(stream, Phase::Negotiating(Box::new(negotiation)), greeting);
            let i = match self.free_conns.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.generations.push(0);
                    self.conns.len() - 1
                }
            };
            let token = u64::from(self.generations[i]) << 32 | i as u64;
            // Watched for both from the start: the greeting goes out at once and the client answers it.
            let registered = epoll::add(
                &self.epoll,
                conn.stream.fd(),
                epoll::EventData::new_u64(token),
                epoll::EventFlags::IN | epoll::EventFlags::OUT,
            );
            if registered.is_err() {
                self.free_conns.push(i);
                continue;
            }
            self.conns[i] = Some(conn);
            // The greeting fits any socket buffer: it goes now, not a turn later.
            self.conns[i]
                .as_mut()
                .expect("just set")
                .write_out(self.page_cache.as_ref());
            self.open += 1;
            self.deadlines.push_back((deadline, i, self.generations[i]));
            self.touch(i);
        }
    }

    fn socket_ready(&mut self, i: usize, flags: epoll::EventFlags) {
        let max_request = self.max_input(i);
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        if flags.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP) {
            // The peer is gone both ways: nothing more can be sent, and what it sent before is all there will
            // be (its complete requests are still carried out). The socket is then no longer watched: a hang-up
            // is reported on every turn.
            conn.hang_up();
            conn.read_rest(&mut self.read_chunk, max_request + READ_CHUNK);
        } else {
            if flags.contains(epoll::EventFlags::OUT) {
                conn.write_out(self.page_cache.as_ref());
            }
            if flags.contains(epoll::EventFlags::IN) {
                conn.read_in(&mut self.read_chunk, max_request);
            }
        }
        self.touch(i);
    }

    /// The most input a connection may need buffered: an option during the handshake, the largest request of
    /// what it negotiated during transmission.
    fn max_input(&self, i: usize) -> usize {
        match self.conns[i].as_ref().map(|c| &c.phase) {
            Some(Phase::Transmission(n)) => self.limits(n).1 as usize,
            _ => 16 + MAX_OPTION_BYTES as usize,
        }
    }

    pub(crate) fn touch(&mut self, i: usize) {
        if let Some(conn) = self.conns[i].as_mut()
            && !conn.touched
        {
            conn.touched = true;
            self.touched.push(i);
        }
    }

    /// Ends every handshake past its deadline.
    fn expire_handshakes(&mut self) {
        let now = Instant::now();
        while let Some(&(deadline, i, generation)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            if self.generations[i] != generation {
                continue;
            }
            if let Some(conn) = self.conns[i].as_mut()
                && matches!(conn.phase, Phase::Negotiating(..))
            {
                self.stats.handshakes_failed += 1;
                conn.kill();
                self.touch(i);
            }
        }
    }

    /// Runs the handshake on what a negotiating connection has sent.
    fn negotiate(&mut self, i: usize) {
        let Some(conn) = self.conns[i].as_mut() else {
            return;
        };
        let Phase::Negotiating(negotiation) = &mut conn.phase else {
            return;
        };
        if conn.dead {
            return;
        }
        match negotiation.advance(&self.export, &conn.inbuf, conn.out.bytes()) {
            Ok((used, outcome)) => {
                conn.consume(used);
                match outcome {
                    Outcome::Pending => {
                        if conn.read_closed {
                            // The client hung up in the middle.
                            self.stats.handshakes_failed += 1;
                            conn.kill();
                        }
                    }
                    Outcome::Transmission(negotiated) => conn.phase = Phase::Transmission(negotiated),
                    Outcome::Close => {
                        // Its last reply goes out, then the connection closes.
                        conn.read_closed = true;
                        conn.inbuf = Vec::new();
                    }
                }
            }
            Err(_) => {
                self.stats.handshakes_failed += 1;
                conn.kill();
            }
        }
        conn.write_out(self.page_cache.as_ref());
    }

    /// Gives freed device slots to the connections that waited for one, in the order they asked.
    fn hand_out_slots(&mut self) {
        while !self.free_slots.is_empty() {
            let Some((i, generation)) = self.waiting_for_slot.pop_front() else {
                return;
            };
            if self.generations[i] == generation
                && let Some(conn) = self.conns[i].as_mut()
            {
                conn.waiting_for_slot = false;
                self.parse(i);
                self.touch(i);
            }
        }
    }

    /// Looks at every connection that changed this turn: runs its handshake or takes its requests, watches its
    /// socket for what it now needs, and closes it once nothing more can happen on it.
    fn settle(&mut self, listener: Option<&Listener>) {
        while let Some(i) = self.touched.pop() {
            if let Some(conn) = self.conns[i].as_mut() {
                conn.touched = false;
                // Replies gathered over the turn leave here, in one send per connection (at queue depth 32 a turn's
                // replies took a system call each before), and before the next request is judged: unsent, they
                // would count against the connection's backlog. Nothing is sent after the judging (replies made
                // while parsing are sent by their callers): a send there could empty a backlog that had just held a
                // request back, leaving the socket watched for nothing and the request untaken.
                if conn.pending_output() > 0 {
                    conn.write_out(self.page_cache.as_ref());
                }
            }
            if matches!(
                self.conns[i].as_ref().map(|c| &c.phase),
                Some(Phase::Negotiating(..))
            ) {
                self.negotiate(i);
            }
            if matches!(
                self.conns[i].as_ref().map(|c| &c.phase),
                Some(Phase::Transmission(_))
            ) {
                self.parse(i);
            }
            let complete = self.complete_request_waiting(i);
            let max_input = self.max_input(i);
            let Some(conn) = self.conns[i].as_mut() else {
                continue;
            };
            if conn.finished(complete) {
                self.close(i, listener);
                continue;
            }
            // A socket that can neither bring input nor take output is not watched at all: the peer's hang-up
            // would be reported on every turn while its requests finish.
            let silent = conn.dead || (conn.gone && conn.read_closed);
            let want =
                (!silent).then(|| (conn.wants_input(max_input, READ_CHUNK), conn.pending_output() > 0));
            if want != conn.watching && conn.watching.is_some() {
                let result = match want {
                    None => epoll::delete(&self.epoll, conn.stream.fd()),
                    Some((input, output)) => {
                        let mut flags = epoll::EventFlags::empty();
                        if input {
                            flags |= epoll::EventFlags::IN;
                        }
                        if output {
                            flags |= epoll::EventFlags::OUT;
                        }
                        let token = u64::from(self.generations[i]) << 32 | i as u64;
                        epoll::modify(
                            &self.epoll,
                            conn.stream.fd(),
                            epoll::EventData::new_u64(token),
                            flags,
                        )
                    }
                };
                conn.watching = want;
                if result.is_err() && want.is_some() {
                    let _ = epoll::delete(&self.epoll, conn.stream.fd());
                    conn.watching = None;
                    conn.kill();
                }
            }
        }
    }

    fn close(&mut self, i: usize, listener: Option<&Listener>) {
        let conn = self.conns[i].take().expect("an open connection closes");
        if let Some((error, replies, bytes)) = &conn.cut_short {
            // Read replies whose bytes the exported file could not give after their headers went: counted as
            // answered when they were taken, they were not. The first connection to close with one keeps its
            // error, which says why (the file ended, or which error it gave).
            *self.stats.reads_cut_short.get_or_insert(0) += replies;
            self.stats
                .first_cut_short_error
                .get_or_insert_with(|| error.to_string());
            self.stats.bytes_read = self
                .stats
                .bytes_read
                .checked_sub(*bytes)
                .expect("a reply cut short was counted in bytes_read when it was answered");
        }
        if conn.watching.is_some() {
            let _ = epoll::delete(&self.epoll, conn.stream.fd());
        }
        drop(conn);
        self.generations[i] = self.generations[i].wrapping_add(1);
        self.free_conns.push(i);
        self.open = self.open.checked_sub(1).expect("open connections are counted");
        if let Some(l) = listener
            && !self.stopping
        {
            // A descriptor is free again.
            let _ = self.listen(l, true);
        }
    }

    pub(crate) fn reap(&mut self, wait_ns: u64) -> Result<(), ServeError> {
        let deadline = self.device.now_ns() + wait_ns;
        let mut out = std::mem::take(&mut self.completions);
        out.clear();
        self.device.reap(1, Some(deadline), &mut out)?;
        for c in out.drain(..) {
            self.completed(c);
        }
        self.completions = out;
        Ok(())
    }

    /// Stops taking connections and requests, finishes what is in flight and delivers its replies (for a while,
    /// to clients that read them), then flushes the device (a cache destages everything first).
    fn shut_down(&mut self, listener: &Listener) -> Result<(), ServeError> {
        self.stopping = true;
        self.listen(listener, false)?;
        for i in 0..self.conns.len() {
            if let Some(conn) = self.conns[i].as_mut() {
                if matches!(conn.phase, Phase::Negotiating(..)) {
                    conn.kill();
                } else {
                    conn.read_closed = true;
                }
                self.touch(i);
            }
        }
        let until = Instant::now() + SHUTDOWN_DRAIN;
        while self.jobs.iter().any(Option::is_some) || (self.open > 0 && Instant::now() < until) {
            self.turn(None)?;
        }
        self.conns.clear();
        let slot = self
            .free_slots
            .pop()
            .expect("every slot is free when nothing is in flight");
        self.device.submit(&[Io {
            op: Op::Flush,
            offset: 0,
            len: 0,
            slot,
            tag: 0,
        }])?;
        let mut out = Vec::new();
        while self.device.in_flight() > 0 {
            self.device.reap(1, None, &mut out)?;
        }
        self.free_slots.push(slot);
        match out.iter().find(|c| c.slot == slot) {
            Some(c) if c.result < 0 => Err(ServeError::Io {
                what: "the final flush",
                cause: io::Error::from_raw_os_error((-c.result) as i32),
            }),
            Some(_) => Ok(()),
            None => unreachable!("the final flush completed"),
        }
    }
}
