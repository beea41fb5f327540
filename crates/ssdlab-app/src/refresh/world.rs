//! The real world as the refresh session sees it: the io layer's pinned files as `RefreshTarget`s (timing the
//! first reads and the verification re-reads), journalled files found again by name, the wall clock, the stop
//! request, the rate limit and the busy-device pause, the walk beneath the paths and the refresh log. The
//! sequencing is `ssdlab_methods::refresh::session`'s; this only adapts.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ssdlab_core::scratch::{FilledScratch, MediaRead, Scratch};
use ssdlab_io::pinned::{FileFacts, Identity, PinnedFile, reopen_pinned};
use ssdlab_methods::refresh::file::PathChanges;
use ssdlab_methods::refresh::pace::{BusyProbe, TokenBucket, pause_while_busy};
use ssdlab_methods::refresh::protocol::ChunkBuffers;
use ssdlab_methods::refresh::select::{Found, Selection, select};
use ssdlab_methods::refresh::session::{MeasuredTarget, SessionWorld, Walked};
use ssdlab_methods::refresh::state::RefreshLogWriter;
use ssdlab_methods::refresh::{Facts, FileId, Opener, RefreshEnv, RefreshLog, RefreshTarget, Window};

use crate::ports::Clock;

fn file_id(identity: Identity) -> FileId {
    FileId {
        fs: identity.fs,
        ino: identity.ino,
        birth: identity.birth,
    }
}

fn facts(f: FileFacts) -> Facts {
    Facts {
        size_bytes: f.size_bytes,
        mode: f.mode,
        uid: f.uid,
        gid: f.gid,
        nlink: f.nlink,
        atime: f.atime,
        mtime: f.mtime,
        ctime: f.ctime,
        privileged: f.privileged,
        named: f.named,
    }
}

/// The io layer's pinned file seen through the protocol's trait, timing first reads (the data as it was) and
/// verification re-reads (the data rewritten): before/after speeds from refresh's own reads, no extra pass.
pub(super) struct Target {
    inner: PinnedFile,
    pending_verify: std::collections::HashSet<u64>,
    before: (Duration, u64),
    after: (Duration, u64),
}

impl Target {
    fn new(inner: PinnedFile) -> Self {
        Target {
            inner,
            pending_verify: Default::default(),
            before: Default::default(),
            after: Default::default(),
        }
    }

    fn mb_s((time, bytes): (Duration, u64)) -> Option<f64> {
        (bytes > 0 && !time.is_zero()).then(|| bytes as f64 / time.as_secs_f64() / 1e6)
    }
}

impl RefreshTarget for Target {
    fn id(&self) -> FileId {
        file_id(self.inner.identity())
    }
    fn generation(&self) -> u64 {
        self.inner.generation()
    }
    fn handle(&self) -> Option<Vec<u8>> {
        self.inner.handle()
    }
    fn facts(&mut self) -> io::Result<Facts> {
        self.inner.facts().map(facts)
    }
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        self.inner.data_ranges()
    }
    fn shares_extents(&mut self) -> io::Result<bool> {
        self.inner.shares_extents()
    }
    fn copy_on_write(&self) -> bool {
        self.inner.copy_on_write()
    }
    fn free_bytes(&mut self) -> io::Result<u64> {
        self.inner.free_bytes()
    }
    fn open_window(&mut self) -> io::Result<Window> {
        Ok(if self.inner.open_window()? {
            Window::Open
        } else {
            Window::Busy
        })
    }
    fn close_window(&mut self) {
        self.inner.close_window()
    }
    fn lease_held(&mut self) -> io::Result<bool> {
        Ok(self.inner.lease_held())
    }
    fn other_users(&mut self) -> Vec<String> {
        self.inner.other_users()
    }
    fn path_changes(&mut self) -> io::Result<PathChanges> {
        let changes = self.inner.path_changes()?;
        Ok(PathChanges {
            attributes: changes.attributes,
            modified: changes.modified,
        })
    }
    fn writer_waiting(&mut self) -> io::Result<bool> {
        Ok(self.inner.writer_waiting())
    }
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<MediaRead> {
        let read = self.inner.read_from_media(offset, buf)?;
        let which = if self.pending_verify.remove(&offset) {
            &mut self.after
        } else {
            &mut self.before
        };
        // The medium's own time for the read (an in-line one: a read-ahead's is counted when it is taken).
        which.0 += self.inner.last_read_time();
        which.1 += read.len_bytes as u64;
        Ok(read)
    }
    fn read_ahead(&mut self, offset: u64, len: u64, into: Scratch) -> Result<(), Scratch> {
        self.inner.read_ahead(offset, len as usize, into)
    }
    fn take_read_ahead(&mut self, offset: u64, len: u64) -> Option<FilledScratch> {
        let filled = self.inner.take_read_ahead(offset, len as usize)?;
        // A chunk's first read: the medium's time on the helper's thread, not our wait for it.
        if let Ok(n) = filled.read {
            self.before.0 += filled.elapsed;
            self.before.1 += n as u64;
        }
        Some(filled)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.pending_verify.insert(offset);
        self.inner.write_at(offset, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn set_mtime(&mut self, mtime: (i64, i64)) -> io::Result<()> {
        self.inner.set_mtime(mtime)
    }
}

impl MeasuredTarget for Target {
    fn speeds_bytes_per_s(&self) -> (Option<f64>, Option<f64>) {
        (
            Target::mb_s(self.before).map(|mb| mb * 1e6),
            Target::mb_s(self.after).map(|mb| mb * 1e6),
        )
    }
}

/// Finds journalled files again by name, checking they are still the same inode.
pub(super) struct PathOpener;

impl Opener for PathOpener {
    fn reopen(
        &mut self,
        root: &Path,
        path: &Path,
        id: &FileId,
        generation: u64,
        handle: Option<&[u8]>,
    ) -> io::Result<Option<Box<dyn RefreshTarget>>> {
        let identity = Identity::journalled(id.fs, id.ino, id.birth);
        Ok(reopen_pinned(root, path, identity, handle)?
            .filter(|p| p.generation() == generation)
            .map(|p| Box::new(Target::new(p)) as Box<dyn RefreshTarget>))
    }
}

struct DeviceBusy(u64);

impl BusyProbe for DeviceBusy {
    fn in_flight(&mut self) -> Option<u64> {
        ssdlab_io::sys::block_in_flight(self.0)
    }
}

/// The real world: wall clock, the stop request, the rate limit and the busy-device pause.
pub(super) struct Env<'a> {
    pub(super) started: Instant,
    pub(super) bucket: TokenBucket,
    pub(super) st_dev: u64,
    pub(super) paused: Duration,
    pub(super) lease_break: Duration,
    pub(super) stop: &'a AtomicBool,
}

impl RefreshEnv for Env<'_> {
    fn wall_ns(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }
    fn monotonic_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    fn pace(&mut self, bytes: u64) {
        std::thread::sleep(self.bucket.take(bytes, self.started.elapsed()));
        self.paused += pause_while_busy(&mut DeviceBusy(self.st_dev), &mut std::thread::sleep);
    }
    fn wait_ms(&mut self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    fn lease_break_ns(&self) -> u64 {
        self.lease_break.as_nanos() as u64
    }
}

/// The real file system and clock as the session's world: the walk beneath the paths given, selection by the
/// refresh log's data age, pinned files under leases, and the log of what was rewritten.
pub(super) struct RealWorld<'a> {
    pub(super) paths: &'a [PathBuf],
    /// The state directory itself is never refreshed (its journal is being written).
    pub(super) exclude: Vec<(u64, u64)>,
    pub(super) log: RefreshLog,
    pub(super) log_writer: RefreshLogWriter,
    pub(super) older_than_s: Option<f64>,
    /// Each walked file's device, for the busy-device pause.
    pub(super) devices: HashMap<FileId, u64>,
    /// Files the walk let go as younger than --older-than (selection counts them with its own).
    pub(super) younger_in_walk: usize,
    pub(super) env: Env<'a>,
    pub(super) clock: &'a dyn Clock,
    pub(super) opener: PathOpener,
}

impl<'a> RealWorld<'a> {
    /// The world of a refresh of `paths` from now: the state directory kept out of it, the rate as
    /// planned, the wall clock and the stop flag the command was given.
    pub(super) fn new(
        paths: &'a [PathBuf],
        state_dir: &std::path::Path,
        older_than_s: Option<f64>,
        bytes_per_s: Option<f64>,
        clock: &'a dyn Clock,
        stop: &'a AtomicBool,
    ) -> Self {
        use std::os::unix::fs::MetadataExt;
        let exclude: Vec<(u64, u64)> = std::fs::metadata(state_dir)
            .map(|m| vec![(m.dev(), m.ino())])
            .unwrap_or_default();
        RealWorld {
            paths,
            exclude,
            log: RefreshLog::load(state_dir),
            log_writer: RefreshLogWriter::new(state_dir),
            older_than_s,
            devices: HashMap::new(),
            younger_in_walk: 0,
            env: Env {
                started: Instant::now(),
                bucket: TokenBucket::new(bytes_per_s),
                st_dev: 0,
                paused: Duration::ZERO,
                lease_break: ssdlab_io::sys::lease_break_time(),
                stop,
            },
            clock,
            opener: PathOpener,
        }
    }
}

impl SessionWorld for RealWorld<'_> {
    fn env(&mut self) -> &mut dyn RefreshEnv {
        &mut self.env
    }
    fn settling(&mut self) -> (&mut dyn RefreshEnv, &mut dyn Opener) {
        (&mut self.env, &mut self.opener)
    }
    fn walk(&mut self) -> io::Result<Walked> {
        // Files selection would pass over (empty, or younger than --older-than) are counted and let go as the
        // walk meets them, so a tree of a million young files is never held as a list.
        let now_unix_s = self.clock.unix_now_s();
        let (log, older_than_s) = (&self.log, self.older_than_s);
        let mut younger = 0;
        let walked = ssdlab_io::walk::walk_keeping(self.paths, &self.exclude, true, |w| {
            if w.size_bytes == 0 {
                return false;
            }
            let id = file_id(w.identity);
            let age_s = log.data_age_s(&id, w.mtime, id.birth, now_unix_s);
            let young = older_than_s.is_some_and(|limit| age_s < limit);
            younger += usize::from(young);
            !young
        })?;
        self.younger_in_walk = younger;
        self.devices = HashMap::with_capacity(walked.files.len());
        let mut found = Vec::with_capacity(walked.files.len());
        for w in walked.files {
            let id = file_id(w.identity);
            self.devices.insert(id, w.dev);
            found.push(Found {
                root: w.root,
                path: w.path,
                id,
                size_bytes: w.size_bytes,
                mtime: w.mtime,
            });
        }
        Ok(Walked {
            found,
            skipped: walked
                .skipped
                .into_iter()
                .map(|(path, reason)| (path, reason.to_string()))
                .collect(),
        })
    }
    fn select(&mut self, found: Vec<Found>) -> Selection {
        let mut selection = select(found, self.older_than_s, &self.log, self.clock.unix_now_s());
        selection.younger += self.younger_in_walk;
        selection
    }
    fn open(&mut self, file: &Found) -> Result<Box<dyn MeasuredTarget>, String> {
        let pinned = PinnedFile::open(&file.root, &file.path)
            .and_then(|mut p| p.probe_window().map(|()| p))
            .map_err(|refusal| refusal.to_string())?;
        self.env.st_dev = self.devices.get(&file.id).copied().unwrap_or(0);
        Ok(Box::new(Target::new(pinned)))
    }
    fn record_refreshed(&mut self, id: FileId, path: &Path) -> io::Result<()> {
        self.log_writer.record(id, path, self.clock.unix_now_s())
    }
    /// Buffers backed by huge pages where the kernel gives them, each chunk starting where one does: every chunk
    /// is read, written and re-read with O_DIRECT, which pins each page of the buffer per transfer. Chunks
    /// smaller than a huge page get ordinary buffers, grown as they are used (a huge page each would cost 2 MiB
    /// of memory to save little).
    fn chunk_buffers(&mut self, chunk_bytes: u64) -> ChunkBuffers {
        let huge = ssdlab_io::sys::HUGE_PAGE_BYTES;
        if chunk_bytes < huge as u64 {
            return ChunkBuffers::default();
        }
        let scratch =
            || Scratch::from_bytes(ssdlab_io::sys::huge_page_bytes(chunk_bytes as usize + huge), huge);
        ChunkBuffers {
            current: scratch(),
            check: scratch(),
            ahead: scratch(),
        }
    }
}
