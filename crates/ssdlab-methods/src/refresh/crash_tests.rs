//! Crash tests in the style of sled's and TigerBeetle's: the real protocol runs against an in-memory file and
//! journal that crash at every durable step in turn (journal append, compaction, data write, sync, time
//! restore); then the machine "reboots", the next run settles and finishes, and the result is checked against a
//! model of the file's bytes and times. Between the crash and the next run, other programs act on the file
//! (an edit, a chmod, a rename, the inode reused): the model says what must survive. The medium also fails
//! without a crash: a write that fails (a full file system, a failing medium), and a read or a sync that fails
//! or a read that comes back short, at every one of them in turn.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::file::PathBytes;
use super::file::{Facts, FileId, Opener, PathChanges, RefreshTarget, Time, Window};
use super::journal::{Journal, JournalStore};
use super::protocol::{FileOutcome, RefreshEnv, RefreshError, SettleOutcome, checksum};
use super::select::{Found, Selection, select};
use super::session::{MeasuredTarget, SessionEvents, SessionPlan, SessionWorld, Walked, run_session};
use super::state::RefreshLog;
use ssdlab_core::schema::refresh::RefreshedFile;
use ssdlab_core::scratch::{FilledScratch, MediaRead, Scratch};

const CHUNK: u64 = 4096;
/// A second of the fake clock, in its nanosecond ticks.
const SECOND: i64 = 1_000_000_000;

/// The machine: one file, one journal, one clock, and the crash switch.
struct World {
    data: Vec<u8>,
    /// Files the session logged as rewritten whole (the refresh log's appends).
    logged_refreshed: u32,
    /// On a copy-on-write file system: its free bytes, which every write takes its length from, and what another
    /// program takes meanwhile, per write of ours.
    cow_free_bytes: Option<u64>,
    cow_taken_by_others: u64,
    ranges: Vec<(u64, u64)>,
    facts: Facts,
    birth: Time,
    journal: Vec<u8>,
    clock_ns: i64,
    /// Durable steps taken so far, and the one that crashes.
    steps: u64,
    crash_at: Option<u64>,
    crashed: bool,
    /// Another process has the file open (windows cannot open).
    open_elsewhere: bool,
    /// Every write refresh made, checked against the bytes there at that moment.
    writes_checked: u64,
    /// Disturbances during the next write: someone sets the file's times by path; someone opens the file (the
    /// lease breaks); the write takes this long.
    touch_during_write: bool,
    /// As above, but the modification time alone (the kernel reports it as a modification: no attribute event).
    mtime_only_touch: bool,
    open_during_write: bool,
    /// Someone opens the file for reading during the next write (the lease breaks to a read lease).
    read_during_write: bool,
    /// Someone sets the modification time alone by path just before the next write.
    mtime_set_before_write: bool,
    /// During the next write someone changes the mode (an attribute event, the access time unmoved); or sets
    /// both times to now, as `touch` does (an attribute event that moves the access time).
    chmod_during_write: bool,
    touch_now_during_write: bool,
    /// How the next write fails, if it does.
    write_fails: Option<WriteFailure>,
    /// The write (counted from 1 over the world's life) that lands with one byte flipped and says nothing, as a
    /// medium or a controller that corrupts silently would; and the user's bytes as they were before it, which
    /// the model then holds refresh to.
    silent_corruption_at: Option<u64>,
    truth: Option<Vec<u8>>,
    /// Reads from the medium and syncs so far, and the one of each that fails with EIO without a crash (a read
    /// fails short instead when `short_read` is set: the file seems to end halfway).
    reads: u64,
    read_fails_at: Option<u64>,
    short_read: bool,
    syncs: u64,
    sync_fails_at: Option<u64>,
    /// During the next write someone sets the modification time alone to now by path (no open, so no lease
    /// break; the kernel reports it as a modification, like the write's own).
    mtime_now_during_write: bool,
    /// During the next write someone sets both times by path, the access time to what it was and the
    /// modification time to now (an attribute event with the access time unmoved).
    both_times_atime_kept_during_write: bool,
    /// The durable step at which the first time restore happened.
    first_restore_step: Option<u64>,
    /// During the next sync someone changes a byte of the first chunk and sets the modification time back to
    /// what it was (as `rsync -t` or `touch -r` would).
    edit_and_restore_time_during_sync: bool,
    write_ns: i64,
    /// How long the next time restore is delayed (the process stalled just before it).
    stall_before_restore_ns: i64,
    /// Readers that open the file while a settle holds its lease, one per window.
    readers_during_settle: u32,
    /// The file system keeps whole seconds.
    whole_seconds: bool,
    /// Inside the window in hand: the lease was broken (for a writer or for a reader); metadata or the
    /// modification time alone was changed by path.
    lease_broken: bool,
    writer_waiting: bool,
    touched: bool,
    modified_by_path: bool,
    /// The chunk size runs use ([`CHUNK`] unless a test needs chunks large enough for the pair assertion's
    /// helper thread).
    chunk_bytes: u64,
    /// The next read-ahead hands back a buffer whose bytes are not the ones its digest was taken of (a buffer
    /// swapped or changed in memory after the read).
    read_ahead_lies: bool,
}

#[derive(Debug, Clone, Copy)]
enum WriteFailure {
    /// Nothing written, the time moved (ENOSPC on a copy-on-write file system: the time is set first).
    NoSpace,
    /// Half written, and a byte of the chunk came back different (a failing medium).
    Medium,
}

type Shared = Rc<RefCell<World>>;

fn crash_err() -> io::Error {
    io::Error::other("crashed")
}

impl World {
    fn tick(&mut self) -> Time {
        self.clock_ns += 1_000;
        (self.clock_ns / SECOND, self.clock_ns % SECOND)
    }

    /// One durable step: fails (and stays failed) when it is the one chosen to crash.
    fn step(&mut self) -> io::Result<bool> {
        if self.crashed {
            return Err(crash_err());
        }
        self.steps += 1;
        if self.crash_at == Some(self.steps) {
            self.crashed = true;
            return Ok(false);
        }
        Ok(true)
    }
}

struct MemStore(Shared);

impl JournalStore for MemStore {
    fn load(&mut self) -> io::Result<Vec<u8>> {
        Ok(self.0.borrow().journal.clone())
    }
    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let mut w = self.0.borrow_mut();
        if !w.step()? {
            // Torn: half the line reached the disk.
            let half = line.len() / 2;
            w.journal.extend_from_slice(&line[..half]);
            return Err(crash_err());
        }
        w.journal.extend_from_slice(line);
        Ok(())
    }
    fn replace(&mut self, content: &[u8]) -> io::Result<()> {
        let mut w = self.0.borrow_mut();
        if !w.step()? {
            return Err(crash_err()); // the rename never happened
        }
        w.journal = content.to_vec();
        Ok(())
    }
}

struct MemFile {
    world: Shared,
    in_window: bool,
    /// A read-ahead: read at once (the earliest a real one can read, so a change after it is the protocol's to
    /// catch), handed over when taken.
    ahead: Option<(u64, u64, FilledScratch)>,
}

impl RefreshTarget for MemFile {
    fn id(&self) -> FileId {
        let w = self.world.borrow();
        FileId {
            fs: 1,
            ino: 42,
            birth: Some(w.birth),
        }
    }
    fn generation(&self) -> u64 {
        7
    }
    fn handle(&self) -> Option<Vec<u8>> {
        None
    }
    fn facts(&mut self) -> io::Result<Facts> {
        let w = self.world.borrow();
        if w.crashed {
            return Err(crash_err());
        }
        Ok(w.facts)
    }
    fn data_ranges(&mut self) -> io::Result<Vec<(u64, u64)>> {
        Ok(self.world.borrow().ranges.clone())
    }
    fn shares_extents(&mut self) -> io::Result<bool> {
        Ok(false)
    }
    fn copy_on_write(&self) -> bool {
        self.world.borrow().cow_free_bytes.is_some()
    }
    fn free_bytes(&mut self) -> io::Result<u64> {
        Ok(self.world.borrow().cow_free_bytes.unwrap_or(u64::MAX))
    }
    fn open_window(&mut self) -> io::Result<Window> {
        let w = self.world.borrow();
        if w.crashed {
            return Err(crash_err());
        }
        if w.open_elsewhere {
            return Ok(Window::Busy);
        }
        drop(w);
        let mut w = self.world.borrow_mut();
        (w.lease_broken, w.writer_waiting, w.touched, w.modified_by_path) = (false, false, false, false);
        self.in_window = true;
        Ok(Window::Open)
    }
    fn close_window(&mut self) {
        self.in_window = false;
    }
    fn lease_held(&mut self) -> io::Result<bool> {
        let mut w = self.world.borrow_mut();
        if self.in_window && std::mem::take(&mut w.mtime_set_before_write) {
            // Between the window's checks and the write: a time set by path breaks no lease.
            w.facts.mtime = (1_650_000_000, 7);
            w.facts.ctime = w.tick();
            w.modified_by_path = true;
        }
        if self.in_window && w.readers_during_settle > 0 {
            w.readers_during_settle -= 1;
            return Ok(false);
        }
        Ok(self.in_window && !w.lease_broken)
    }
    fn path_changes(&mut self) -> io::Result<PathChanges> {
        let mut w = self.world.borrow_mut();
        Ok(PathChanges {
            attributes: std::mem::take(&mut w.touched),
            modified: std::mem::take(&mut w.modified_by_path),
        })
    }
    fn writer_waiting(&mut self) -> io::Result<bool> {
        let w = self.world.borrow();
        Ok(!self.in_window || w.writer_waiting)
    }
    fn read_from_media(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<MediaRead> {
        let mut w = self.world.borrow_mut();
        if w.crashed {
            return Err(crash_err());
        }
        w.reads += 1;
        let failing = w.read_fails_at == Some(w.reads);
        if failing && !w.short_read {
            return Err(io::Error::from_raw_os_error(5));
        }
        let start = (offset as usize).min(w.data.len());
        let mut n = buf.len().min(w.data.len() - start);
        if failing {
            n /= 2;
        }
        buf[..n].copy_from_slice(&w.data[start..start + n]);
        Ok(MediaRead {
            len_bytes: n,
            sum: checksum(&buf[..n]),
        })
    }
    fn read_ahead(&mut self, offset: u64, len: u64, mut into: Scratch) -> Result<(), Scratch> {
        // The real read-ahead holds a descriptor of its own, which would keep the lease from us.
        assert!(!self.in_window, "a read-ahead started inside a window");
        // Whatever the buffer held before must not matter: the protocol gets only what is read now.
        let bytes = into.slice_mut(len as usize);
        bytes.fill(0xEE);
        let read = self.read_from_media(offset, bytes);
        if std::mem::take(&mut self.world.borrow_mut().read_ahead_lies) {
            bytes[0] ^= 1;
        }
        let filled = FilledScratch {
            buf: into,
            digest: read.as_ref().ok().map(|r| r.sum),
            read: read.map(|r| r.len_bytes),
            elapsed: std::time::Duration::ZERO,
        };
        self.ahead = Some((offset, len, filled));
        Ok(())
    }
    fn take_read_ahead(&mut self, offset: u64, len: u64) -> Option<FilledScratch> {
        let (at, n, filled) = self.ahead.take()?;
        (at == offset && n == len).then_some(filled)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        assert!(self.in_window, "refresh wrote outside a lease window");
        let mut w = self.world.borrow_mut();
        let start = offset as usize;
        // The model: refresh only ever writes the bytes that are there (the user's, once the medium corrupted
        // them behind refresh's back).
        let truth = w.truth.as_ref().unwrap_or(&w.data);
        assert_eq!(
            &truth[start..start + buf.len()],
            buf,
            "refresh overwrote other bytes at {offset}"
        );
        w.writes_checked += 1;
        let corrupts = w.silent_corruption_at == Some(w.writes_checked);
        if corrupts {
            w.truth = Some(w.data.clone());
        }
        let taken = buf.len() as u64 + w.cow_taken_by_others;
        if let Some(free) = &mut w.cow_free_bytes {
            *free = free.saturating_sub(taken);
        }
        let torn = !w.step()?;
        // As in the kernel, the write's time is set when the write starts.
        let mut t = w.tick();
        if w.whole_seconds {
            t.1 = 0;
        }
        w.facts.mtime = t;
        w.facts.ctime = t;
        w.clock_ns += w.write_ns;
        match w.write_fails.take() {
            Some(WriteFailure::NoSpace) => return Err(io::Error::other("no space left on device")),
            Some(WriteFailure::Medium) => {
                let half = buf.len() / 2;
                w.data[start..start + half].copy_from_slice(&buf[..half]);
                w.data[start] ^= 0x01;
                return Err(io::Error::other("input/output error"));
            }
            None => {}
        }
        let n = if torn { buf.len() / 2 } else { buf.len() };
        w.data[start..start + n].copy_from_slice(&buf[..n]);
        if corrupts {
            w.data[start + n / 3] ^= 0x10;
        }
        if std::mem::take(&mut w.mtime_now_during_write) {
            let now = w.tick();
            (w.facts.mtime, w.facts.ctime) = (now, now);
            w.modified_by_path = true;
        }
        if std::mem::take(&mut w.both_times_atime_kept_during_write) {
            let now = w.tick();
            (w.facts.mtime, w.facts.ctime) = (now, now);
            w.touched = true;
        }
        if std::mem::take(&mut w.touch_during_write) {
            w.facts.mtime = (1_650_000_000, 5);
            w.facts.ctime = w.tick();
            w.touched = !w.mtime_only_touch;
        }
        if std::mem::take(&mut w.chmod_during_write) {
            w.facts.mode = 0o4750;
            w.facts.ctime = w.tick();
            w.touched = true;
        }
        if std::mem::take(&mut w.touch_now_during_write) {
            let now = w.tick();
            (w.facts.atime, w.facts.mtime, w.facts.ctime) = (now, now, now);
            w.touched = true;
        }
        if std::mem::take(&mut w.open_during_write) {
            w.lease_broken = true;
            w.writer_waiting = true;
        }
        if std::mem::take(&mut w.read_during_write) {
            w.lease_broken = true;
        }
        if torn { Err(crash_err()) } else { Ok(()) }
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut w = self.world.borrow_mut();
        if !w.step()? {
            return Err(crash_err());
        }
        w.syncs += 1;
        if w.sync_fails_at == Some(w.syncs) {
            return Err(io::Error::from_raw_os_error(5));
        }
        if std::mem::take(&mut w.edit_and_restore_time_during_sync) {
            let mtime = w.facts.mtime;
            w.data[10] ^= 0xff;
            w.facts.mtime = mtime;
            w.facts.ctime = w.tick();
        }
        Ok(())
    }
    fn set_mtime(&mut self, mtime: Time) -> io::Result<()> {
        let mut w = self.world.borrow_mut();
        w.clock_ns += std::mem::take(&mut w.stall_before_restore_ns);
        if w.first_restore_step.is_none() {
            w.first_restore_step = Some(w.steps + 1);
        }
        if !w.step()? {
            return Err(crash_err());
        }
        w.facts.mtime = mtime;
        w.facts.ctime = w.tick();
        Ok(())
    }
}

struct MemOpener(Shared);

impl Opener for MemOpener {
    fn reopen(
        &mut self,
        _root: &Path,
        _path: &Path,
        id: &FileId,
        generation: u64,
        _handle: Option<&[u8]>,
    ) -> io::Result<Option<Box<dyn RefreshTarget>>> {
        let file = MemFile {
            world: self.0.clone(),
            in_window: false,
            ahead: None,
        };
        let same = file.id() == *id && generation == 7 && file.world.borrow().facts.named;
        Ok(same.then(|| Box::new(file) as Box<dyn RefreshTarget>))
    }
}

struct Env(Shared);

impl RefreshEnv for Env {
    fn wall_ns(&self) -> i64 {
        self.0.borrow().clock_ns
    }
    fn monotonic_ns(&self) -> u64 {
        self.0.borrow().clock_ns as u64
    }
    fn interrupted(&self) -> bool {
        false
    }
    fn pace(&mut self, _bytes: u64) {
        self.0.borrow_mut().clock_ns += 1_000;
    }
    fn wait_ms(&mut self, ms: u64) {
        self.0.borrow_mut().clock_ns += ms as i64 * 1_000_000;
    }
    fn lease_break_ns(&self) -> u64 {
        45 * SECOND as u64
    }
}

const ORIGINAL_ATIME: Time = (1_500_000_000, 111);
const ORIGINAL_MTIME: Time = (1_400_000_000, 222);

fn new_world(seed: u64) -> Shared {
    let mut rng = ssdlab_core::rng::Rng::new(seed);
    let len = 5 * CHUNK as usize + 1234;
    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    Rc::new(RefCell::new(World {
        data,
        logged_refreshed: 0,
        cow_free_bytes: None,
        cow_taken_by_others: 0,
        // A hole from one chunk to two: never written.
        ranges: vec![(0, CHUNK), (2 * CHUNK, len as u64 - 2 * CHUNK)],
        facts: Facts {
            size_bytes: len as u64,
            mode: 0o640,
            uid: 1000,
            gid: 1000,
            nlink: 1,
            atime: ORIGINAL_ATIME,
            mtime: ORIGINAL_MTIME,
            ctime: (1_600_000_000, 0),
            privileged: false,
            named: true,
        },
        birth: (1_400_000_000, 0),
        journal: Vec::new(),
        clock_ns: 1_700_000_000 * SECOND,
        steps: 0,
        crash_at: None,
        crashed: false,
        open_elsewhere: false,
        writes_checked: 0,
        touch_during_write: false,
        mtime_only_touch: false,
        open_during_write: false,
        read_during_write: false,
        mtime_set_before_write: false,
        chmod_during_write: false,
        touch_now_during_write: false,
        write_fails: None,
        silent_corruption_at: None,
        truth: None,
        reads: 0,
        read_fails_at: None,
        short_read: false,
        syncs: 0,
        sync_fails_at: None,
        mtime_now_during_write: false,
        both_times_atime_kept_during_write: false,
        first_restore_step: None,
        edit_and_restore_time_during_sync: false,
        write_ns: 1_000,
        stall_before_restore_ns: 0,
        readers_during_settle: 0,
        whole_seconds: false,
        lease_broken: false,
        writer_waiting: false,
        touched: false,
        modified_by_path: false,
        chunk_bytes: CHUNK,
        read_ahead_lies: false,
    }))
}

/// The in-memory world as a refresh run sees it: one file, `/r/f`, under the path `/r`.
struct MemWorld {
    env: Env,
    opener: MemOpener,
    world: Shared,
}

impl SessionWorld for MemWorld {
    fn env(&mut self) -> &mut dyn RefreshEnv {
        &mut self.env
    }
    fn settling(&mut self) -> (&mut dyn RefreshEnv, &mut dyn Opener) {
        (&mut self.env, &mut self.opener)
    }
    fn walk(&mut self) -> io::Result<Walked> {
        let w = self.world.borrow();
        if w.crashed {
            return Err(crash_err());
        }
        let found = w.facts.named.then(|| Found {
            root: PathBuf::from("/r"),
            path: PathBuf::from("/r/f"),
            id: FileId {
                fs: 1,
                ino: 42,
                birth: Some(w.birth),
            },
            size_bytes: w.facts.size_bytes,
            mtime: w.facts.mtime,
        });
        Ok(Walked {
            found: found.into_iter().collect(),
            skipped: Vec::new(),
        })
    }
    fn select(&mut self, found: Vec<Found>) -> Selection {
        select(found, None, &RefreshLog::default(), 0.0)
    }
    fn open(&mut self, _file: &Found) -> Result<Box<dyn MeasuredTarget>, String> {
        Ok(Box::new(MemFile {
            world: self.world.clone(),
            in_window: false,
            ahead: None,
        }))
    }
    fn record_refreshed(&mut self, _id: FileId, _path: &Path) -> io::Result<()> {
        // The refresh log's append is a durable step of its own.
        let mut w = self.world.borrow_mut();
        if !w.step()? {
            return Err(crash_err());
        }
        w.logged_refreshed += 1;
        Ok(())
    }
}

impl MeasuredTarget for MemFile {
    fn speeds_bytes_per_s(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
}

/// Keeps the file's outcome and record entry, as the binary prints them.
#[derive(Default)]
struct Outcomes {
    outcome: Option<FileOutcome>,
    record: Option<RefreshedFile>,
}

impl SessionEvents for Outcomes {
    fn settled(&mut self, _outcome: &Result<SettleOutcome, (PathBytes, RefreshError)>) {}
    fn selected(&mut self, _selection: &Selection, _skipped: &[(PathBuf, String)]) {}
    fn file(&mut self, _file: &Found, record: &RefreshedFile, outcome: Option<&FileOutcome>) {
        self.outcome = outcome.cloned();
        self.record = Some(record.clone());
    }
}

/// One run of `ssdlab refresh` on the file: the whole session (open the journal, settle, walk, select,
/// refresh resuming where settled, log), as the binary runs it.
fn one_run(world: &Shared) -> io::Result<Option<FileOutcome>> {
    let mut journal = Journal::open(Box::new(MemStore(world.clone()))).map_err(io::Error::other)?;
    let mut mem = MemWorld {
        env: Env(world.clone()),
        opener: MemOpener(world.clone()),
        world: world.clone(),
    };
    let mut outcomes = Outcomes::default();
    let plan = SessionPlan {
        chunk_bytes: world.borrow().chunk_bytes,
        before_bytes_per_s: Default::default(),
    };
    let report = run_session(&plan, &mut journal, &mut mem, &mut outcomes);
    if world.borrow().crashed {
        // A crash ends the process, whatever the run made of the failed step.
        return Err(crash_err());
    }
    let report = report.map_err(|e| io::Error::other(e.to_string()))?;
    assert!(
        report.analysis.files.len() <= 1,
        "one file in the world: {:?}",
        report.analysis.files
    );
    // An I/O error in the file's refresh is recorded as a failure (the run goes on to other files); here it is
    // the run's result.
    if let (None, Some(record)) = (&outcomes.outcome, &outcomes.record)
        && record.outcome == ssdlab_core::schema::refresh::RefreshOutcome::Failed
    {
        return Err(io::Error::other(record.reason.clone().unwrap_or_default()));
    }
    Ok(outcomes.outcome)
}

/// What another program does between the crash and the next run.
#[derive(Debug, Clone, Copy)]
enum Meanwhile {
    Nothing,
    /// The owner edits one byte (same size): the data is theirs now.
    Edit,
    Chmod,
    /// The file is deleted and another takes its inode number.
    InodeReused,
}

fn act(world: &Shared, meanwhile: Meanwhile) {
    let mut w = world.borrow_mut();
    // The next run comes a minute after the crash.
    w.clock_ns += 60 * SECOND;
    match meanwhile {
        Meanwhile::Nothing => {}
        Meanwhile::Edit => {
            w.data[100] ^= 0xff;
            let t = w.tick();
            w.facts.mtime = t;
            w.facts.ctime = t;
        }
        Meanwhile::Chmod => {
            w.facts.mode = 0o600;
            w.facts.ctime = w.tick();
        }
        Meanwhile::InodeReused => {
            w.birth = (1_750_000_000, 5);
            let t = w.tick();
            w.facts = Facts {
                mtime: t,
                ctime: t,
                atime: t,
                ..w.facts
            };
            w.data.iter_mut().for_each(|b| *b = 0x5a);
        }
    }
}

/// Whether refresh gave the file up, with its times restored or not as `restored` says.
fn gave_way(outcome: &Option<FileOutcome>, restored: bool) -> bool {
    matches!(outcome, Some(FileOutcome::GaveWay { times_restored, .. }) if *times_restored == restored)
}

/// After a crash: the crash switch is off; nothing the crashed run held in memory survives.
fn reboot(world: &Shared) {
    let mut w = world.borrow_mut();
    w.crashed = false;
    w.crash_at = None;
}

/// Durable steps in an uninterrupted run.
fn steps_without_a_crash(seed: u64) -> u64 {
    let world = new_world(seed);
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refreshed { .. })),
        "{outcome:?}"
    );
    let w = world.borrow();
    assert_eq!((w.facts.atime, w.facts.mtime), (ORIGINAL_ATIME, ORIGINAL_MTIME));
    w.steps
}

#[test]
fn a_crash_at_every_durable_step_changes_nothing_after_the_next_run() {
    for seed in [1u64, 2] {
        let total = steps_without_a_crash(seed);
        assert!(total > 10, "the run has durable steps to crash at ({total})");
        for meanwhile in [
            Meanwhile::Nothing,
            Meanwhile::Edit,
            Meanwhile::Chmod,
            Meanwhile::InodeReused,
        ] {
            for crash_at in 1..=total {
                let ctx = format!("seed {seed}, crash at step {crash_at} of {total}, then {meanwhile:?}");
                let world = new_world(seed);
                let original = world.borrow().data.clone();
                world.borrow_mut().crash_at = Some(crash_at);
                let first = one_run(&world);
                assert!(
                    first.is_err(),
                    "{ctx}: the run should have crashed, got {first:?}"
                );
                reboot(&world);
                act(&world, meanwhile);
                let before_next = world.borrow().facts;
                let expected_data = world.borrow().data.clone();
                let second = one_run(&world).unwrap_or_else(|e| panic!("{ctx}: the next run failed: {e}"));
                let w = world.borrow();
                assert_eq!(w.data, expected_data, "{ctx}: content changed");
                match meanwhile {
                    Meanwhile::Nothing | Meanwhile::Chmod => {
                        assert_eq!(w.data, original, "{ctx}");
                        assert!(
                            matches!(second, Some(FileOutcome::Refreshed { .. })),
                            "{ctx}: {second:?}"
                        );
                        assert_eq!(
                            (w.facts.atime, w.facts.mtime),
                            (ORIGINAL_ATIME, ORIGINAL_MTIME),
                            "{ctx}: times not restored"
                        );
                        if let Meanwhile::Chmod = meanwhile {
                            assert_eq!(w.facts.mode, 0o600, "{ctx}: the owner's chmod stays");
                        }
                    }
                    Meanwhile::Edit => {
                        // The owner's edit stands, with the owner's modification time (refreshing the edited
                        // file afresh keeps it).
                        assert_eq!(
                            w.facts.mtime, before_next.mtime,
                            "{ctx}: an old mtime over an edit"
                        );
                    }
                    Meanwhile::InodeReused => {
                        assert_eq!(w.facts.mtime, before_next.mtime, "{ctx}: old times on a new file");
                        assert_eq!(w.facts.atime, before_next.atime, "{ctx}");
                    }
                }
                // And nothing is left in the journal.
                drop(w);
                let journal = Journal::open(Box::new(MemStore(world.clone()))).unwrap();
                assert!(
                    journal.unfinished().is_empty(),
                    "{ctx}: journal left {:?}",
                    journal.unfinished()
                );
            }
        }
    }
}

#[test]
fn an_opener_is_waited_for_and_then_given_way_with_times_restored() {
    // Crash at each step in turn; where the crash leaves a write's time to put back (between a data write and
    // the time restore after it) and someone holds the file open through the next run, the entry must stay.
    let mut kept = 0;
    for crash_at in 1..=steps_without_a_crash(3) {
        let world = new_world(3);
        world.borrow_mut().crash_at = Some(crash_at);
        assert!(one_run(&world).is_err());
        reboot(&world);
        world.borrow_mut().open_elsewhere = true;
        let busy = one_run(&world).unwrap();
        let pending = Journal::open(Box::new(MemStore(world.clone())))
            .unwrap()
            .unfinished()
            .len();
        if busy.is_some() {
            // Nothing needed putting back: the file was given way to, its times as they were.
            assert!(gave_way(&busy, true), "{busy:?}");
            assert_eq!(pending, 0);
            continue;
        }
        kept += 1;
        assert_eq!(pending, 1, "a busy file stays for a later run");
        world.borrow_mut().open_elsewhere = false;
        let outcome = one_run(&world).unwrap();
        assert!(
            matches!(outcome, Some(FileOutcome::Refreshed { .. })),
            "{outcome:?}"
        );
        let w = world.borrow();
        assert_eq!((w.facts.atime, w.facts.mtime), (ORIGINAL_ATIME, ORIGINAL_MTIME));
    }
    assert!(kept > 0, "some crash points leave a time to put back");
}

#[test]
fn the_model_catches_a_refresher_that_writes_stale_bytes() {
    // The oracle itself: a write of bytes that are not there must be caught.
    let world = new_world(4);
    let mut file = MemFile {
        world: world.clone(),
        in_window: true,
        ahead: None,
    };
    let mut stale = vec![0u8; 16];
    file.read_from_media(0, &mut stale).unwrap();
    world.borrow_mut().data[3] ^= 1;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.write_at(0, &stale)));
    assert!(caught.is_err(), "the model must reject a stale write");
}

/// The pair assertion's first half, on a chunk large enough to be summed beside its announcement: a buffer that
/// no longer holds what was read stops the run after the announcement is durable, before any window, and the
/// next run reads that as nothing done and refreshes the file as it was.
#[test]
fn a_buffer_that_is_not_what_was_read_stops_the_run_before_its_write_and_the_next_run_settles_it() {
    let chunk = 256 << 10;
    let world = new_world(12);
    {
        let mut w = world.borrow_mut();
        let mut rng = ssdlab_core::rng::Rng::new(12);
        w.data = (0..3 * chunk + 1234).map(|_| rng.next_u64() as u8).collect();
        let len = w.data.len() as u64;
        (w.ranges, w.facts.size_bytes, w.chunk_bytes) = (vec![(0, len)], len, chunk);
        // The second chunk comes from a read-ahead (the first is read in line).
        w.read_ahead_lies = true;
    }
    let original = world.borrow().data.clone();
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one_run(&world)));
    let message = stopped.expect_err("the assertion stops the run");
    let message = message
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(
        message.contains("refresh would write bytes it did not read"),
        "{message}"
    );
    {
        let w = world.borrow();
        let last = w.journal.split(|&b| b == b'\n').rfind(|l| !l.is_empty()).unwrap();
        let last = String::from_utf8_lossy(last);
        assert!(
            last.contains("\"writing\"") && last.contains("\"index\":1"),
            "the second chunk's write was announced before the assertion stopped it: {last}"
        );
        assert_eq!(w.data, original);
        assert_eq!((w.facts.atime, w.facts.mtime), (ORIGINAL_ATIME, ORIGINAL_MTIME));
    }
    reboot(&world);
    act(&world, Meanwhile::Nothing);
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refreshed { .. })),
        "{outcome:?}"
    );
    let w = world.borrow();
    assert_eq!(w.data, original);
    assert_eq!((w.facts.atime, w.facts.mtime), (ORIGINAL_ATIME, ORIGINAL_MTIME));
}

#[test]
fn a_time_set_by_someone_else_during_the_write_is_not_overwritten() {
    let world = new_world(5);
    world.borrow_mut().touch_during_write = true;
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
    assert_ne!(
        world.borrow().facts.mtime,
        ORIGINAL_MTIME,
        "the original time was put back over someone else's touch"
    );
}

#[test]
fn a_modification_time_alone_set_during_the_write_is_not_overwritten_either() {
    let world = new_world(5);
    {
        let mut w = world.borrow_mut();
        w.touch_during_write = true;
        w.mtime_only_touch = true;
    }
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
    assert_eq!(world.borrow().facts.mtime, (1_650_000_000, 5), "their time stays");
}

#[test]
fn a_lease_broken_during_a_long_write_leaves_the_write_time_and_a_short_one_does_not() {
    // Broken during a write that took longer than half the lease-break time: the opener may be in by now.
    let world = new_world(6);
    {
        let mut w = world.borrow_mut();
        w.open_during_write = true;
        w.write_ns = 30 * SECOND;
    }
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
    // Broken for a reader during a quick write: the reader is still blocked in its open and will change
    // nothing, so the time goes back.
    let world = new_world(6);
    world.borrow_mut().read_during_write = true;
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refreshed { .. })),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().facts.mtime, ORIGINAL_MTIME);
    // Broken for a writer, however quick the write: a writer may set a time by path without waiting for its
    // open (touch does), so the write's time is left.
    let world = new_world(6);
    world.borrow_mut().open_during_write = true;
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
}

/// Crashes the run between its first data write and the time restore after it.
fn crash_before_the_first_time_restore(world: &Shared) {
    // Steps: journal appends (begin, writing), then the write, then the time restore.
    for crash_at in 1.. {
        let probe = new_world(7);
        {
            let mut p = probe.borrow_mut();
            p.whole_seconds = world.borrow().whole_seconds;
            p.clock_ns = world.borrow().clock_ns;
            p.crash_at = Some(crash_at);
        }
        let _ = one_run(&probe);
        if probe.borrow().facts.mtime != ORIGINAL_MTIME {
            world.borrow_mut().crash_at = Some(crash_at);
            assert!(one_run(world).is_err());
            reboot(world);
            assert_ne!(
                world.borrow().facts.mtime,
                ORIGINAL_MTIME,
                "left the write's time"
            );
            return;
        }
    }
}

#[test]
fn a_reader_during_settle_is_waited_out_not_taken_for_a_writer() {
    let world = new_world(7);
    crash_before_the_first_time_restore(&world);
    world.borrow_mut().readers_during_settle = 3;
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refreshed { .. })),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().facts.mtime, ORIGINAL_MTIME);
}

#[test]
fn a_whole_second_file_system_still_settles() {
    let world = new_world(7);
    {
        let mut w = world.borrow_mut();
        w.whole_seconds = true;
        // Mid-second, so the write's whole-second time falls before the announcement.
        w.clock_ns += SECOND / 2;
    }
    crash_before_the_first_time_restore(&world);
    assert_eq!(world.borrow().facts.mtime.1, 0);
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refreshed { .. })),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().facts.mtime, ORIGINAL_MTIME);
}

#[test]
fn a_file_written_a_moment_ago_is_left_alone() {
    let world = new_world(8);
    {
        let mut w = world.borrow_mut();
        let now = w.clock_ns;
        w.facts.mtime = (now / SECOND, 0);
    }
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refused { .. })),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().writes_checked, 0);
}

#[test]
fn a_modification_time_set_alone_before_the_write_is_seen_and_kept() {
    let world = new_world(9);
    world.borrow_mut().mtime_set_before_write = true;
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::GaveWay { .. })),
        "{outcome:?}"
    );
    assert_eq!(
        world.borrow().facts.mtime,
        (1_650_000_000, 7),
        "their time stands"
    );
    assert_eq!(world.borrow().writes_checked, 0, "nothing was written after it");
}

#[test]
fn a_stall_before_the_time_restore_marks_the_file_modified_and_never_repairs() {
    // The restore comes later than half the lease-break time after the last look at the lease: a writer
    // may be in, so the file must look changed.
    let world = new_world(10);
    {
        let mut w = world.borrow_mut();
        w.write_ns = 10 * SECOND;
        w.stall_before_restore_ns = 20 * SECOND;
    }
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
    let w = world.borrow();
    assert_ne!(
        w.facts.mtime, ORIGINAL_MTIME,
        "never the original time after a possible foreign write"
    );
    assert_eq!(w.writes_checked, 1, "no repair write");
}

#[test]
fn a_stall_before_the_settle_restores_marks_the_file_modified() {
    let world = new_world(7);
    crash_before_the_first_time_restore(&world);
    // The settling run stalls just before it puts the time back: a writer may be in by then.
    world.borrow_mut().stall_before_restore_ns = 30 * SECOND;
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::Refused { .. })),
        "a file just marked modified is fresh: {outcome:?}"
    );
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
}

#[test]
fn a_chmod_during_the_write_gets_the_original_time_back_and_a_touch_does_not() {
    // A mode change alone leaves the data and its time alone: the original goes back, the file is given up
    // with a word about bits a write clears.
    let world = new_world(11);
    world.borrow_mut().chmod_during_write = true;
    let outcome = one_run(&world).unwrap();
    match &outcome {
        Some(FileOutcome::GaveWay {
            times_restored: true,
            reason,
            ..
        }) => assert!(reason.contains("setuid"), "{reason}"),
        _ => panic!("{outcome:?}"),
    }
    let w = world.borrow();
    assert_eq!((w.facts.mtime, w.facts.mode), (ORIGINAL_MTIME, 0o4750));
    drop(w);
    // Both times set to now during the write (touch): the time cannot be told from the write's own, and
    // must not be replaced by the original.
    let world = new_world(11);
    world.borrow_mut().touch_now_during_write = true;
    let outcome = one_run(&world).unwrap();
    assert!(gave_way(&outcome, false), "{outcome:?}");
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
}

#[test]
fn a_write_error_on_a_medium_marks_the_file_modified_and_one_that_left_the_chunk_puts_the_time_back() {
    // A failing medium: the chunk no longer reads back as it was, so the file is marked modified now and
    // the write closed in the journal (the next run does not take the time for its own).
    let world = new_world(12);
    world.borrow_mut().write_fails = Some(WriteFailure::Medium);
    let started = world.borrow().clock_ns;
    assert!(one_run(&world).is_err(), "the error is reported");
    let mtime = world.borrow().facts.mtime;
    assert!(
        super::file::time_ns(mtime) >= started as i128,
        "the file is marked modified now, not left with {mtime:?}"
    );
    world.borrow_mut().clock_ns += 60 * SECOND;
    let _ = one_run(&world).unwrap();
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
    // A full file system: nothing was written but the time moved; the chunk reads back as it was, so the
    // original time goes back and the file is reported, not marked modified.
    let world = new_world(12);
    world.borrow_mut().write_fails = Some(WriteFailure::NoSpace);
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(
            outcome,
            Some(FileOutcome::WriteFailed {
                times_restored: true,
                ..
            })
        ),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().facts.mtime, ORIGINAL_MTIME);
    let journal = Journal::open(Box::new(MemStore(world.clone()))).unwrap();
    assert!(journal.unfinished().is_empty());
}

#[test]
fn a_time_set_to_now_by_path_during_a_long_write_is_not_taken_for_the_writes_own() {
    // The modification time alone (reported as a modification, as the write's own is) or both times with
    // the access time kept (reported as an attribute change, as a chmod is): either way the time is later
    // than the write's start, so it is someone else's and stays.
    for both in [false, true] {
        let world = new_world(15);
        {
            let mut w = world.borrow_mut();
            w.write_ns = SECOND;
            if both {
                w.both_times_atime_kept_during_write = true;
            } else {
                w.mtime_now_during_write = true;
            }
        }
        let outcome = one_run(&world).unwrap();
        assert!(gave_way(&outcome, false), "both times {both}: {outcome:?}");
        assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME, "both times {both}");
    }
}

#[test]
fn a_kill_before_a_whole_second_restore_never_puts_the_time_over_a_write_in_that_second() {
    // On a file system that keeps whole seconds, the write's recorded time is shared by any other write in
    // the same second: after a kill right before the restore, the next run must leave the time.
    let world = new_world(16);
    world.borrow_mut().whole_seconds = true;
    let _ = one_run(&world).unwrap();
    let restore_step = world.borrow().first_restore_step.expect("a restore happened");
    let world = new_world(16);
    {
        let mut w = world.borrow_mut();
        w.whole_seconds = true;
        w.crash_at = Some(restore_step);
    }
    assert!(one_run(&world).is_err());
    reboot(&world);
    {
        // Someone writes elsewhere in the file in the same second.
        let mut w = world.borrow_mut();
        let mtime = w.facts.mtime;
        assert_eq!(mtime.1, 0, "the write's time is whole seconds");
        w.data[CHUNK as usize * 3] ^= 0xff;
        w.facts.ctime = w.tick();
        w.facts.mtime = mtime;
    }
    let _ = one_run(&world).unwrap();
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
}

#[test]
fn a_kill_after_the_file_is_marked_modified_is_not_undone_by_the_next_run() {
    // The stall before the restore makes the run mark the file modified now; a kill right after (before the
    // write's done record) must not let the next run take that time for the write's and restore the original.
    let stalled = |world: &Shared| world.borrow_mut().stall_before_restore_ns = 30 * SECOND;
    let world = new_world(13);
    stalled(&world);
    let _ = one_run(&world).unwrap();
    assert_ne!(world.borrow().facts.mtime, ORIGINAL_MTIME);
    let total = world.borrow().steps;
    for crash_at in 1..=total {
        let world = new_world(13);
        stalled(&world);
        world.borrow_mut().crash_at = Some(crash_at);
        if one_run(&world).is_ok() {
            continue;
        }
        reboot(&world);
        let marked = world.borrow().facts.mtime != ORIGINAL_MTIME
            && world.borrow().facts.mtime != world.borrow().facts.ctime;
        let _ = one_run(&world).unwrap();
        if marked {
            assert_ne!(
                world.borrow().facts.mtime,
                ORIGINAL_MTIME,
                "crash at {crash_at} of {total}: a time marked modified was taken for the write's"
            );
        }
    }
}

#[test]
fn a_change_between_the_window_and_the_verify_is_seen_even_with_the_time_put_back() {
    // Someone edits the chunk just written and sets the time back while refresh syncs: the verify read sees
    // other bytes, and the change time shows the file is not as the window left it, so nothing is rewritten
    // over the edit (the model panics on a stale write).
    let world = new_world(14);
    world.borrow_mut().edit_and_restore_time_during_sync = true;
    let original = world.borrow().data[10];
    let outcome = one_run(&world).unwrap();
    assert!(
        matches!(outcome, Some(FileOutcome::VerifyFailed { offset: 0, .. })),
        "{outcome:?}"
    );
    assert_eq!(world.borrow().data[10], original ^ 0xff, "their edit stands");
}

#[test]
fn a_full_copy_on_write_file_system_stops_the_file_cleanly_before_it_runs_out() {
    let remaining: u64 = new_world(3).borrow().ranges.iter().map(|r| r.1).sum();
    let margin = 32 << 20;
    // Too little room for the whole file's new copy from the start: nothing is written.
    let world = new_world(3);
    let before = world.borrow().data.clone();
    world.borrow_mut().cow_free_bytes = Some(margin + remaining + CHUNK - 1);
    let outcome = one_run(&world).unwrap();
    match &outcome {
        Some(FileOutcome::GaveWay {
            reason,
            chunks_done: 0,
            rewritten_bytes: 0,
            times_restored: true,
        }) => assert!(reason.contains("copy-on-write file system has"), "{reason}"),
        _ => panic!("{outcome:?}"),
    }
    assert_eq!(world.borrow().writes_checked, 0);
    // Room at first, but another program takes a chunk's worth per chunk rewritten: three chunks go, then
    // refresh stops with room to spare, its times put back and the content as it was.
    let world = new_world(3);
    {
        let mut w = world.borrow_mut();
        w.cow_free_bytes = Some(margin + remaining + 3 * CHUNK);
        w.cow_taken_by_others = CHUNK;
    }
    let outcome = one_run(&world).unwrap();
    match &outcome {
        Some(FileOutcome::GaveWay {
            chunks_done,
            rewritten_bytes,
            times_restored: true,
            ..
        }) => assert_eq!((*chunks_done, *rewritten_bytes), (3, 3 * CHUNK)),
        _ => panic!("{outcome:?}"),
    }
    let w = world.borrow();
    assert_eq!(w.data, before);
    assert_eq!(w.facts.mtime, ORIGINAL_MTIME);
    assert!(w.cow_free_bytes.unwrap() >= margin, "the margin is kept");
}

#[test]
fn a_read_or_a_sync_that_fails_changes_nothing_and_the_next_run_finishes() {
    // Every read from the medium in a run (the chunks' reads before their windows, the verify reads after the
    // syncs) failing with EIO or coming back short, and every sync failing, each in its own run: the content
    // never changes, the run says so (an error or a file not refreshed), and the next run (the medium well
    // again) settles and finishes with the original times and an empty journal.
    let seed = 5;
    let clean = new_world(seed);
    one_run(&clean).unwrap();
    let (reads, syncs) = (clean.borrow().reads, clean.borrow().syncs);
    assert!(reads >= 8 && syncs >= 4, "{reads} reads, {syncs} syncs");
    let faults = (1..=reads)
        .flat_map(|at| [(Some(at), false, None), (Some(at), true, None)])
        .chain((1..=syncs).map(|at| (None, false, Some(at))));
    for (read_fails_at, short_read, sync_fails_at) in faults {
        let ctx = format!("read {read_fails_at:?} (short: {short_read}), sync {sync_fails_at:?}");
        let world = new_world(seed);
        let original = world.borrow().data.clone();
        {
            let mut w = world.borrow_mut();
            (w.read_fails_at, w.short_read, w.sync_fails_at) = (read_fails_at, short_read, sync_fails_at);
        }
        let first = one_run(&world);
        assert!(
            !matches!(first, Ok(Some(FileOutcome::Refreshed { .. }))),
            "{ctx}: a failed read or sync went unnoticed: {first:?}"
        );
        assert_eq!(world.borrow().data, original, "{ctx}: content changed");
        {
            let mut w = world.borrow_mut();
            (w.read_fails_at, w.sync_fails_at) = (None, None);
            w.clock_ns += 60 * SECOND;
        }
        let second = one_run(&world).unwrap_or_else(|e| panic!("{ctx}: the next run failed: {e}"));
        let w = world.borrow();
        assert_eq!(w.data, original, "{ctx}: content changed");
        assert!(
            matches!(second, Some(FileOutcome::Refreshed { .. })),
            "{ctx}: {second:?}"
        );
        assert_eq!(
            (w.facts.atime, w.facts.mtime),
            (ORIGINAL_ATIME, ORIGINAL_MTIME),
            "{ctx}: times not restored"
        );
        drop(w);
        let journal = Journal::open(Box::new(MemStore(world.clone()))).unwrap();
        assert!(
            journal.unfinished().is_empty(),
            "{ctx}: {:?}",
            journal.unfinished()
        );
    }
}

#[test]
fn a_write_the_medium_corrupts_silently_is_caught_by_the_re_read_and_put_back() {
    // Each write of a clean run in turn lands with one byte flipped and reports success. The verification
    // re-read must see it: the file is not reported refreshed, the user's bytes are put back through a window,
    // and the next run (the medium well again) refreshes it with the original times and an empty journal.
    let seed = 7;
    let clean = new_world(seed);
    one_run(&clean).unwrap();
    let writes = clean.borrow().writes_checked;
    assert!(writes >= 4, "{writes} writes");
    for at in 1..=writes {
        let world = new_world(seed);
        let original = world.borrow().data.clone();
        world.borrow_mut().silent_corruption_at = Some(at);
        let first = one_run(&world);
        assert!(
            matches!(first, Ok(Some(FileOutcome::VerifyFailed { .. }))),
            "write {at}: a silently corrupted write went unnoticed: {first:?}"
        );
        assert_eq!(
            world.borrow().data,
            original,
            "write {at}: the user's bytes were not put back"
        );
        world.borrow_mut().clock_ns += 60 * SECOND;
        let second = one_run(&world).unwrap_or_else(|e| panic!("write {at}: the next run failed: {e}"));
        assert!(
            matches!(second, Some(FileOutcome::Refreshed { .. })),
            "write {at}: {second:?}"
        );
        let w = world.borrow();
        assert_eq!(w.data, original, "write {at}: content changed");
        assert_eq!(
            (w.facts.atime, w.facts.mtime),
            (ORIGINAL_ATIME, ORIGINAL_MTIME),
            "write {at}: times not restored"
        );
        drop(w);
        let journal = Journal::open(Box::new(MemStore(world.clone()))).unwrap();
        assert!(
            journal.unfinished().is_empty(),
            "write {at}: {:?}",
            journal.unfinished()
        );
    }
}
