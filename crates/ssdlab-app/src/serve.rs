//! `serve`: a target exported over NBD until the stop request (SIGINT/SIGTERM), then destaged, flushed and
//! closed, with the session's record. The socket is bound before the target opens, so a signal sent as soon as
//! it exists finds the stop flag; the socket file is removed on every way out if it is still the one bound.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ssdlab_core::Device;
use ssdlab_core::schema::options::{RunOptions, ServeFlags as RecordedFlags};
use ssdlab_core::schema::serve::ServeAnalysis;
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_nbd::protocol::ExportInfo;
use ssdlab_nbd::{Listener, ServeOptions, effective_poll, serve};
use ssdlab_targets::DeviceVisitor;

use crate::export;
use crate::ports::{Console, Outcome, Ports};
use crate::recording::{Finished, Recording};
use crate::reporter::Reporter;
use crate::target::{TargetPlan, Use};

/// `serve`'s flags as given.
#[derive(Debug, Clone)]
pub struct ServeFlags {
    pub target: TargetPlan,
    /// A Unix socket path, or None with `listen`.
    pub socket: Option<PathBuf>,
    /// HOST:PORT, or None with `socket`.
    pub listen: Option<String>,
    pub allow_remote: bool,
    pub read_only: bool,
    pub name: String,
    pub qd: u32,
    pub max_connections: u32,
    /// Microseconds to look for the next request before sleeping (0: never).
    pub poll_us: u32,
    pub out: Option<crate::export::OutDir>,
}

/// A serve session, checked (where it listens is checked when the socket is bound).
#[derive(Debug, Clone)]
pub struct Plan {
    flags: ServeFlags,
}

impl Plan {
    pub fn new(flags: ServeFlags) -> Result<Self> {
        if let Some(dir) = &flags.out {
            export::check_out_dir(dir)?;
        }
        if flags.socket.is_some() == flags.listen.is_some() {
            bail!("--socket PATH or --listen HOST:PORT: give one of them");
        }
        Ok(Plan { flags })
    }
}

/// Serves until the stop request, then records the session.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let args = &plan.flags;
    let started = std::time::Instant::now();
    // SIGTERM must find the stop flag, not the default action, from the moment the socket exists: a client or a
    // service manager that sees the socket may signal at once, and a killed server leaves its socket behind.
    let stop = ports.stop.flag();
    let (listener, place) = listen(args)?;
    // The socket file is ours from here: removed on every way out, if it is still the one bound.
    let _socket = SocketFile(args.socket.as_ref().and_then(|path| {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some((path.clone(), meta.dev(), meta.ino()))
    }));
    let mut opened = args.target.open(
        ports.targets,
        if args.read_only { Use::Reads } else { Use::Writes },
    )?;
    // A virtual drive keeps what clients write, so a file system can live on it.
    opened.device.keep_virtual_data();
    // The session's record must have somewhere to go before a client writes anything, and only once the gate
    // has let the export through; a directory that cannot take it takes back the file target's creation or
    // extension too.
    let recording = match Recording::begin(args.out.as_ref(), None, ports.started_unix_s) {
        Ok(recording) => recording,
        Err(e) => return Err(crate::target::taken_back(opened.device, &opened.undo, e)),
    };
    opened.device.visit(ServeOn {
        args,
        console: &mut *ports.console,
        recording,
        listener,
        place,
        started,
        stop,
    })
}

/// The socket bound, by path and identity.
struct SocketFile(Option<(PathBuf, u64, u64)>);

impl Drop for SocketFile {
    fn drop(&mut self) {
        // Only the socket this server bound: a file someone put at the path meanwhile is theirs.
        if let Some((path, dev, ino)) = &self.0 {
            let _ = ssdlab_io::files::remove_socket_if_same(path, *dev, *ino);
        }
    }
}

fn listen(args: &ServeFlags) -> Result<(Listener, String)> {
    if let Some(path) = &args.socket {
        refuse_existing(path)?;
        let listener = UnixListener::bind(path).with_context(|| format!("--socket {}", path.display()))?;
        return Ok((Listener::Unix(listener), format!("unix:{}", path.display())));
    }
    let text = args
        .listen
        .as_deref()
        .expect("the plan holds --socket or --listen");
    let addr: SocketAddr = text
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("--listen {text}: write HOST:PORT, such as 127.0.0.1:10809"))?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        bail!(
            "--listen {text}: not a loopback address; NBD has no authentication or encryption here, so anyone who can reach it could read and write the export. Add --allow-remote if that is intended"
        );
    }
    let listener = TcpListener::bind(addr).with_context(|| format!("--listen {text}"))?;
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| text.to_string());
    Ok((Listener::Tcp(listener), format!("nbd://{bound}")))
}

/// A socket path is created, never taken over: an existing file is left alone.
fn refuse_existing(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(m) if m.file_type().is_socket() => bail!(
            "--socket {}: a socket already exists there (another server, or one that did not exit cleanly); remove it or choose another path",
            path.display()
        ),
        Ok(_) => bail!(
            "--socket {}: the path exists and is not a socket; choose another path",
            path.display()
        ),
    }
}

struct ServeOn<'a> {
    args: &'a ServeFlags,
    console: &'a mut dyn Console,
    recording: Recording<'a>,
    listener: Listener,
    place: String,
    /// When the command began: the session's duration counts from here (opening a virtual drive takes time too).
    started: std::time::Instant,
    /// Set by SIGINT/SIGTERM; installed before the socket was bound.
    stop: &'a std::sync::atomic::AtomicBool,
}

/// The flags as result.json records them: what the server did, not only what was asked (on one CPU it never
/// polls).
fn recorded(args: &ServeFlags) -> RunOptions {
    RunOptions::Serve(RecordedFlags {
        target: args.target.recorded(),
        socket: args.socket.clone(),
        listen: args.listen.clone(),
        allow_remote: args.allow_remote,
        read_only: args.read_only,
        name: args.name.clone(),
        qd: args.qd,
        max_connections: Some(args.max_connections),
        poll_us: Some(
            effective_poll(std::time::Duration::from_micros(u64::from(args.poll_us))).as_micros() as u32,
        ),
    })
}

impl DeviceVisitor for ServeOn<'_> {
    type Output = Result<Outcome>;

    fn visit<D: Device>(self, mut device: D) -> Result<Outcome> {
        let stop = self.stop;
        let console = self.console;
        let options = ServeOptions {
            export_name: self.args.name.clone(),
            read_only: self.args.read_only,
            slots: self.args.qd,
            max_connections: self.args.max_connections as usize,
            poll_after_reply: std::time::Duration::from_micros(u64::from(self.args.poll_us)),
        };
        let target = self.args.target.target.clone();
        let place = self.place;
        let started = self.started;
        let mut exported = (String::new(), 0u64);
        let stats = serve(&mut device, self.listener, &options, stop, |export: &ExportInfo| {
            exported = (export.name.clone(), export.size_bytes);
            console.say(&format!(
                "serving   {target} as NBD export '{}' ({} bytes, {}-byte blocks, {}) on {place}; Ctrl-C or SIGTERM to stop",
                export.name,
                export.size_bytes,
                export.min_block_bytes,
                if options.read_only { "read-only" } else { "read-write, flush and FUA honoured" }
            ));
        })
        .context("serving")?;
        let cache = device.cache_stats();
        for line in ssdlab_report::text::served_lines(&stats, cache.as_ref()) {
            console.say(&line);
        }
        let args = self.args;
        let analysis = ServeAnalysis {
            export_name: exported.0,
            export_size_bytes: exported.1,
            listen: place.clone(),
            read_only: args.read_only,
            duration_s: started.elapsed().as_secs_f64(),
            stats,
            cache,
        };
        let options = recorded(args);
        let verdict = session_verdict(&analysis.stats);
        // A clean session says nothing more; one the device failed says so as the record does.
        if !verdict.passed {
            for line in ssdlab_report::text::verdict_lines(&verdict) {
                console.alarm(&line);
            }
        }
        // A stop request is how a session ends, not an interruption of it.
        self.recording.finish(
            &mut Reporter::new(console),
            Finished::new(device.info().clone(), options, Analysis::Serve(analysis), verdict)
                .ends_on_a_stop(),
        )
    }
}

/// Serving is not a test: a client's bad request is answered and counted, and the session still served. A
/// request the device failed is another matter: a client was told its write or read did not happen, so the
/// session is a finding that names the count, never a quiet pass (its clients may hold less than they sent). So
/// is a read cut short after its header (the exported file could not give the bytes it promised).
fn session_verdict(stats: &ssdlab_core::schema::serve::ServeStats) -> Verdict {
    let device_errors = stats.device_errors.unwrap_or(0);
    let cut_short = stats.reads_cut_short.unwrap_or(0);
    let taken =
        stats.reads + stats.writes + stats.flushes + stats.trims + stats.write_zeroes + stats.block_status;
    let mut reasons = Vec::new();
    if device_errors > 0 {
        reasons.push(format!(
            "the device failed {device_errors} of the {taken} requests clients sent; each was answered with an error, so a client's data may not all be on the export"
        ));
    }
    if cut_short > 0 {
        let said = stats
            .first_cut_short_error
            .as_deref()
            .map_or(" (was it truncated or failing?)".into(), |e| {
                format!(" (the first: {e})")
            });
        reasons.push(format!(
            "{cut_short} reads were cut short after their reply's header: the exported file could not give their bytes{said}, so those clients lost their connections"
        ));
    }
    Verdict {
        finding: !reasons.is_empty(),
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    }
}

#[cfg(test)]
mod tests {
    use super::session_verdict;
    use ssdlab_core::schema::serve::ServeStats;

    #[test]
    fn a_read_cut_short_fails_the_session_and_says_what_the_file_said() {
        let served = ServeStats {
            reads: 10,
            device_errors: Some(0),
            reads_cut_short: Some(0),
            ..ServeStats::default()
        };
        assert!(session_verdict(&served).passed);
        let cut = ServeStats {
            reads_cut_short: Some(3),
            first_cut_short_error: Some("Input/output error (os error 5)".into()),
            ..served
        };
        let verdict = session_verdict(&cut);
        assert!(!verdict.passed && verdict.finding);
        assert_eq!(verdict.reasons.len(), 1);
        assert!(
            verdict.reasons[0].starts_with("3 reads were cut short"),
            "{:?}",
            verdict.reasons
        );
        assert!(verdict.reasons[0].contains("(the first: Input/output error (os error 5))"));
    }
}
