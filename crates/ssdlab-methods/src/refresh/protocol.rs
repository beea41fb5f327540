//! The refresh protocol: rewriting one file in place in short lease windows, and settling what an interrupted
//! run left behind.
//!
//! Per chunk: read it from the medium and checksum it, announce the write durably in the journal, then open a
//! *window* (the file open for writing with a write lease, so no one else has it open), check that nothing
//! changed since our last look and that the lease stands, write the same bytes back, put the original
//! modification time back at once, and close the window; then sync, re-read from the medium and compare, and
//! check that no privilege bit or capability came or went. The window holds only a write and a time restore, and
//! between windows the file is not held at all, so `exec` and `chattr` are rarely refused, a blocking opener
//! waits microseconds, and a file someone else has open is waited for rather than fought over. Because the
//! original times are back before every window closes, the modification time outside windows is always the
//! owner's: any write by anyone (including one between our read and the window) moves it, whatever the file
//! system's timestamp granularity, and a run killed outside a window leaves nothing to repair.
//!
//! **Around each write.** The last look before the write reads the inotify watch: any attribute or modification
//! event since the window opened is someone else's (a time set by path breaks no lease, and the kernel reports a
//! modification time set alone as IN_MODIFY). After the write, before the time goes back: no modification event
//! and no attribute event that moved the access time, a modification time our write can have set, the same size, no writer waiting for the lease (a writer may set
//! a time by path without waiting for its open), and less than half the lease-break time
//! (`/proc/sys/fs/lease-break-time`, 45 s by default) since the last look at the lease, so anyone who asked
//! since is still blocked in its open. Otherwise the write's time is left (the file looks changed, which it
//! was) and the file given up. A change of mode, owner or extended attributes alone (an attribute event with
//! the access time unmoved) leaves the data and its time alone: the original time goes back, and the file is
//! given up. The journal records the write's exact time (`restoring`) before the original goes back. After
//! the restore the same checks run once more; if they fail, a writer may have acted under the restored time, so
//! the modification time is set to now, the file is given up and never rewritten again (no repair). An I/O
//! error anywhere after the window opened also marks the file modified now before it is reported. Chunks are at most 16 MiB, so a write outlasts half the lease-break time only on
//! a medium slower than about 0.7 MB/s.
//!
//! **The remaining windows.** (1) Between the last lease check and the write there is only the inotify read (the
//! chunk's checksum is checked before the window opens; where the chunk cannot go to O_DIRECT as it is, the write
//! itself begins with its copy into a staging buffer); should the process be stalled there for longer than the
//! lease-break time while another process opens and writes the file, the stale chunk would land over that write (the
//! check after the write then sees the lost lease and reports the file, but cannot undo it). (2) A kill after a
//! `writing` record is durable and before its `restoring` record (while the window opens, during the write, and a
//! few system calls after it) leaves a resume to judge a moved modification time by time alone: it is taken for
//! ours, and the original put back, when the chunk holds the announced checksum and the time falls between the
//! announcement and a second after it, so a write elsewhere in the file by anyone in that second after the kill
//! would have its time replaced. After the `restoring` record a resume knows the write's exact time; a write by
//! someone else after the kill carries another time on kernels with fine-grained timestamps (Linux 6.13 and later on
//! ext4, XFS, btrfs and tmpfs; before that, one in the same clock tick shares it), and on a file system that keeps
//! whole seconds the time is left rather than trusted. A kill after the restore and before the checks that follow it
//! leaves the original time, so a writer let in by a stall of half the lease-break time just before the restore
//! would go unreported. After a power failure the restored time may not be durable (fdatasync does not commit it),
//! and a chunk torn by the power loss is reported, not repaired (no copy is kept). (3) File systems set a write's
//! time when it starts, so a time set to "now" by path while the write runs is later than ours and is seen; one set
//! within the first quarter second of the write (or in the same second, where the file system keeps whole seconds),
//! or in the microseconds between the check after the write and the restore, is taken for ours and replaced by the
//! original. A setuid/setgid bit (for a refresh not run as root) or a capability set by path between the last check
//! and the write is cleared by the kernel's write: the watch sees the attribute change and the file is given up with
//! a message that says so, but the bit is gone. (4) An opener that uses O_NONBLOCK (GNU tar) and lands inside a
//! window gets EAGAIN, and an exec that lands there gets ETXTBSY; a window is one write of at most 16 MiB, so that
//! is rare, not impossible. (5) Identity is the file system's UUID: a copy of a file system mounted with the same
//! UUID (an image clone, XFS `-o nouuid`) at the same path is taken for the original, and a pending entry is settled
//! there.

//! This module never opens files or reads the clock itself: everything goes through [`RefreshTarget`],
//! [`Opener`], [`Journal`] and [`RefreshEnv`].

use std::io;

use super::file::{
    Facts, FileId, Opener, PathBytes, PathChanges, RefreshTarget, Window, from_hex, time_ns, to_hex,
};
use super::journal::{Begin, Journal, JournalError, Unfinished, WRITE_WITHIN_NS, Writing};
use ssdlab_core::scratch::Scratch;

pub use ssdlab_core::checksum::checksum;

/// What the protocol needs from the world besides the file: time, interruption, pacing and waiting.
pub trait RefreshEnv {
    /// Wall-clock time in nanoseconds since the Unix epoch (the clock file times use): recorded in the journal.
    fn wall_ns(&self) -> i64;
    /// A monotonic clock in nanoseconds: how long a step took (a wall-clock step must not hide a stall).
    fn monotonic_ns(&self) -> u64;
    /// Whether the user asked to stop (SIGINT, SIGTERM): the file in hand is put back and left.
    fn interrupted(&self) -> bool;
    /// Called before each chunk is read: rate limiting, pausing while the device is busy.
    fn pace(&mut self, bytes: u64);
    /// Waits a little before trying a file someone else has open again.
    fn wait_ms(&mut self, ms: u64);
    /// How long the kernel lets a lease holder keep a file after someone asks for it
    /// (`/proc/sys/fs/lease-break-time`): an opener blocked on our lease gets in after this long, not before.
    fn lease_break_ns(&self) -> u64;
}

/// The largest extent a copy-on-write file system keeps whole while parts of it are rewritten (btrfs's largest
/// data extent).
const COW_EXTENT_BYTES: u64 = 128 << 20;
/// Room always left free on a copy-on-write file system (its own metadata needs space to commit).
const COW_MARGIN_BYTES: u64 = 32 << 20;
/// How long another process may keep a file open before refresh gives it up for this run.
pub const PATIENCE_MS: u64 = 10_000;
/// How often a chunk may lose its lease to other openers before refresh gives the file up for this run.
const MAX_LEASE_LOSSES: u32 = 100;
const RETRY_MS: u64 = 20;
/// Files modified more recently than this are not rewritten: a few ticks of the kernel's coarse clock (10 ms
/// at HZ=100), or two seconds where the file system keeps whole seconds (the time has no fraction).
const YOUNGEST_NS: i128 = 100_000_000;
const YOUNGEST_WHOLE_SECOND_NS: i128 = 2_000_000_000;
/// Slack for clocks: file times come from the kernel's coarse clock, which can trail the wall clock by a tick.
const CLOCK_SLACK_NS: i128 = 50_000_000;
/// How long after our clock reading a write's own time may be set: the call's duration, up to this much (a
/// process preempted on its way into the call).
const WRITE_START_NS: i64 = 200_000_000;

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    Refreshed {
        bytes: u64,
        chunks: u64,
        resumed_from_chunk: u64,
    },
    /// Nothing was written: the reason says why.
    Refused { reason: String },
    /// Someone else opened or changed the file; what was done stays (same bytes), the times are put back unless
    /// the data itself changed.
    GaveWay {
        reason: String,
        chunks_done: u64,
        /// The bytes of those chunks, rewritten and verified before it gave way.
        rewritten_bytes: u64,
        times_restored: bool,
    },
    /// A chunk read back differently after rewriting (a failing medium); its bytes were written once more.
    VerifyFailed { offset: u64, times_restored: bool },
    /// Writing a chunk failed (a full file system, a quota) but the chunk reads back as it was: the content
    /// is unchanged, and the times are put back unless someone else acted meanwhile.
    WriteFailed {
        offset: u64,
        error: String,
        /// The chunks before it, rewritten and verified.
        rewritten_bytes: u64,
        times_restored: bool,
    },
    /// Stopped by the user between chunks; the times are put back.
    Interrupted {
        chunks_done: u64,
        rewritten_bytes: u64,
        times_restored: bool,
    },
}

/// What settling an interrupted run's entry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettleOutcome {
    /// The content was ours: the original times are back. A run with the same chunk size resumes at `resume_from`.
    Restored {
        path: PathBytes,
        id: FileId,
        chunk_bytes: u64,
        resume_from: u64,
    },
    /// Someone else changed the data since: its times are left as they are, the entry dropped.
    ChangedByOthers { path: PathBytes },
    /// The interrupted write's time cannot be told from another write's (a file system that keeps whole
    /// seconds): it is left, so the file looks modified, and the entry dropped.
    LeftAsWritten { path: PathBytes },
    /// The file is gone, or its name now belongs to another file: nothing of ours to restore.
    Gone { path: PathBytes },
    /// Someone has the file open for longer than we wait: the entry stays for the next run.
    Busy { path: PathBytes },
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// Chunks within the data ranges, in order: a pure function of the ranges and the chunk size, so a resumed run
/// walks the same list.
fn chunk_list(ranges: &[(u64, u64)], size_bytes: u64, chunk_bytes: u64) -> Vec<(u64, u64)> {
    let mut chunks = Vec::new();
    for &(start, len) in ranges {
        let end = (start + len).min(size_bytes);
        let mut offset = start;
        while offset < end {
            let piece = chunk_bytes.min(end - offset);
            chunks.push((offset, piece));
            offset += piece;
        }
    }
    chunks
}

/// Opens a window, waiting up to [`PATIENCE_MS`] while someone else has the file open.
fn open_window_patiently(target: &mut dyn RefreshTarget, env: &mut dyn RefreshEnv) -> io::Result<Window> {
    let mut waited = 0;
    loop {
        match target.open_window()? {
            Window::Open => return Ok(Window::Open),
            Window::Busy if waited >= PATIENCE_MS || env.interrupted() => return Ok(Window::Busy),
            Window::Busy => {
                env.wait_ms(RETRY_MS);
                waited += RETRY_MS;
            }
        }
    }
}

/// Ends a file's journal entry when giving it up. Nothing needs restoring: every window puts the original times
/// back before it closes, so between windows the file carries its owner's times (or the times of someone else's
/// later change, which stand). Returns whether the file's times are its original ones.
fn give_up(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    id: FileId,
    ours: &Facts,
) -> Result<bool, RefreshError> {
    target.close_window();
    let now = target.facts()?;
    journal.end(id)?;
    Ok(!now.data_changed_since(ours))
}

/// One chunk in hand: read from the medium, checksummed, to be written back where it came from.
struct Chunk<'a> {
    index: u64,
    offset: u64,
    data: &'a [u8],
    sum: u64,
}

/// What stays the same for every window of one file.
struct FileInHand {
    id: FileId,
    /// The modification time every window puts back.
    original_mtime: super::file::Time,
    /// How often a chunk lost its lease to other openers so far.
    lease_losses: u32,
}

/// How writing a chunk in a window ended.
#[derive(Debug)]
enum WindowWrite {
    /// Written, the original modification time back, the write closed in the journal: the file as the
    /// window left it.
    Written(Facts),
    /// Nothing was written: the file is given up for this reason.
    Refused(String),
    /// The write failed, but the chunk reads back as it was: the time was judged as after any write (put back
    /// unless someone else acted meanwhile) and the write closed in the journal.
    WriteFailed(io::Error),
    /// Written, but someone else acted while we wrote, so the modification time is left as the write set it
    /// (the file looks changed, which it was) and the file given up.
    Disturbed(String),
}

/// Announces the chunk, opens a window, checks that nothing changed since `ours` and that the lease stands,
/// writes, checks again, puts the original modification time back and closes the window. Nothing slow happens
/// between the last check and the write (the announcement is made before the window opens), and after the write
/// the time goes back only if no one can have acted meanwhile: the lease still stands, or was asked for so
/// recently that the asker is still blocked in its open (it gets in only after the lease-break time), and no
/// one changed the metadata by path.
fn write_in_window(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    file: &mut FileInHand,
    chunk: &Chunk<'_>,
    ours: &Facts,
) -> Result<WindowWrite, RefreshError> {
    let id = file.id;
    // Pair assertion, first half: the bytes to be written are the bytes read from this offset, whose checksum
    // (taken by the read-ahead's thread as it read them, or here after an in-line read) the announcement
    // records; a buffer lent, handed back or swapped wrongly fails here. Summed on another thread while the
    // first announcement is made durable (over ext4 on a loop device in memory, 0.17 ms and 0.3 ms of a 4 MiB
    // chunk's 1.6 ms, one after the other until they overlapped), and checked before any window opens, so no
    // lease is held while 4 MiB are summed. An assertion that fails after the announcement leaves the file as
    // it was: the chunk still holds the announced bytes and the original time, which a resume reads as nothing
    // done. The announcement's age counts from before it was made, as the loop's own announcements do.
    target.close_window();
    let mut announced_at = Some(env.monotonic_ns());
    let (summed, announced) = sum_while(chunk.data, || announce(journal, env, id, chunk, ours));
    assert_eq!(summed, chunk.sum, "refresh would write bytes it did not read");
    announced?;
    loop {
        if announced_at.is_none_or(|t| stale(t, env)) {
            target.close_window();
            announced_at = Some(env.monotonic_ns());
            announce(journal, env, id, chunk, ours)?;
        }
        match open_for_write(target, journal, env, id)? {
            WindowOpen::Open => {}
            WindowOpen::Refused(reason) => return Ok(WindowWrite::Refused(reason)),
            // They are gone: announce again (the wait made the announcement stale) and re-check.
            WindowOpen::AfterWait => {
                announced_at = None;
                continue;
            }
        }
        let now = target.facts()?;
        let checked_at = match check_window(target, journal, env, file, ours, &now)? {
            WindowCheck::Clear { checked_at } => checked_at,
            WindowCheck::Refused(reason) => return Ok(WindowWrite::Refused(reason)),
            WindowCheck::LeaseLost => {
                announced_at = None;
                continue;
            }
        };
        if announced_at.is_some_and(|t| stale(t, env)) {
            continue;
        }
        // The last look before the write: any change by path since the window opened is someone else's (a time
        // set alone shows only as a modification).
        let before_write = target.path_changes()?;
        if before_write.attributes || before_write.modified {
            journal.withdraw(id)?;
            return Ok(WindowWrite::Refused(
                "another process changed its times or attributes".into(),
            ));
        }
        let outcome = write_and_restore(target, journal, env, file, chunk, &now, checked_at);
        if outcome.is_err() {
            // The write may have landed and moved the time, and what the time is now is not known: the file is
            // marked modified now (never left with a time a resume could take for the write's and put the
            // original back over), and the write closed in the journal, before the error goes up.
            let now = env.wall_ns();
            let _ = target.set_mtime(split_ns(now));
            let _ = journal.done(id, chunk.index);
        }
        target.close_window();
        return outcome;
    }
}

/// Below this a chunk is summed in line: a thread's start would cost more than the sum.
const SUM_ASIDE_MIN_BYTES: usize = 256 << 10;

/// The checksum of `data`, taken on a helper thread while `work` runs on this one, and what `work` returned
/// (the sum is taken in line for a small `data`, or if no thread can be had).
fn sum_while<T>(data: &[u8], work: impl FnOnce() -> T) -> (u64, T) {
    if data.len() < SUM_ASIDE_MIN_BYTES {
        return (checksum(data), work());
    }
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("refresh-sum".into())
            .spawn_scoped(s, || checksum(data))
        {
            Ok(summing) => {
                let done = work();
                let sum = summing
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (sum, done)
            }
            Err(_) => (checksum(data), work()),
        }
    })
}

/// Whether an announcement made at `announced_at` (monotonic ns) is too old for its write to start now: past
/// half of [`WRITE_WITHIN_NS`], it is made again.
fn stale(announced_at: u64, env: &dyn RefreshEnv) -> bool {
    env.monotonic_ns().saturating_sub(announced_at) > (WRITE_WITHIN_NS / 2) as u64
}

/// Announces the chunk's write durably in the journal (a `writing` record): where, how long, its checksum, the
/// file as `ours` left it, and the wall-clock time now.
fn announce(
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    id: FileId,
    chunk: &Chunk<'_>,
    ours: &Facts,
) -> Result<(), RefreshError> {
    journal.writing(Writing {
        id,
        index: chunk.index,
        offset: chunk.offset,
        len: chunk.data.len() as u64,
        sum: chunk.sum,
        before: ours.stamp(),
        wall_ns: env.wall_ns(),
    })?;
    Ok(())
}

/// How opening a window for a write ended.
enum WindowOpen {
    /// The window is open.
    Open,
    /// Someone else had the file open and has let it go: the announcement (withdrawn) is made again.
    AfterWait,
    /// No window: the file is given up for this reason (the announcement withdrawn).
    Refused(String),
}

/// Opens a window for the announced write; while someone else has the file open the announcement is withdrawn
/// and they are waited for, up to [`PATIENCE_MS`].
fn open_for_write(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    id: FileId,
) -> Result<WindowOpen, RefreshError> {
    match target.open_window() {
        Ok(Window::Open) => Ok(WindowOpen::Open),
        Ok(Window::Busy) => {
            journal.withdraw(id)?;
            if open_window_patiently(target, env)? == Window::Busy {
                let users = target.other_users();
                return Ok(WindowOpen::Refused(if users.is_empty() {
                    "open in another process for longer than refresh waits".into()
                } else {
                    format!(
                        "open in another process for longer than refresh waits: {}",
                        users.join("; ")
                    )
                }));
            }
            Ok(WindowOpen::AfterWait)
        }
        // Write access or the lease refused now (chmod a-w, chattr +i, leases switched off): give way.
        Err(e) => {
            journal.withdraw(id)?;
            Ok(WindowOpen::Refused(format!(
                "it can no longer be opened for writing ({e})"
            )))
        }
    }
}

/// What the first checks in an open window found.
enum WindowCheck {
    /// Nothing changed and the lease stands, as last seen at `checked_at` (monotonic ns).
    Clear { checked_at: u64 },
    /// The lease was asked for: the announcement is withdrawn and the window closed, to come back for the chunk.
    LeaseLost,
    /// The file is given up for this reason (the announcement withdrawn).
    Refused(String),
}

/// The checks in a window just opened, where the file is `now`: it is as `ours` left it, its extents are not
/// shared, and the lease stands. A lease asked for lets the asker in (counted in `file`; one who keeps asking is
/// given way to).
fn check_window(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    file: &mut FileInHand,
    ours: &Facts,
    now: &Facts,
) -> Result<WindowCheck, RefreshError> {
    let id = file.id;
    if !now.same_as(ours) {
        journal.withdraw(id)?;
        return Ok(WindowCheck::Refused(describe_change(ours, now)));
    }
    if target.copy_on_write() && target.shares_extents()? {
        journal.withdraw(id)?;
        return Ok(WindowCheck::Refused(
            "its extents became shared (a snapshot or reflink)".into(),
        ));
    }
    // Anyone who asks for the file after this look is blocked in its open for the lease-break time.
    let checked_at = env.monotonic_ns();
    if !target.lease_held()? {
        // Someone asked for the file: withdraw the announcement (durably, so a kill now cannot make a
        // resume take their write for ours), let them in, and come back for this chunk. Someone who keeps
        // asking is given way to, as one who keeps the file open is.
        journal.withdraw(id)?;
        target.close_window();
        file.lease_losses += 1;
        if file.lease_losses > MAX_LEASE_LOSSES || env.interrupted() {
            return Ok(WindowCheck::Refused("other processes keep opening it".into()));
        }
        env.wait_ms(RETRY_MS);
        return Ok(WindowCheck::LeaseLost);
    }
    Ok(WindowCheck::Clear { checked_at })
}

fn split_ns(ns: i64) -> super::file::Time {
    (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000))
}

/// Writes the chunk inside the window and decides what the modification time becomes, with every check of
/// the module doc: the original goes back only if no one can have acted meanwhile, and the journal says so
/// (`restoring`, with the write's own time) before it does. Ends with the write's `done` record, which comes
/// before anything else when the write's time is left, so a kill cannot make a resume put the original back.
/// `at_window` is the file as the window's first check saw it.
fn write_and_restore(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    file: &FileInHand,
    chunk: &Chunk<'_>,
    at_window: &Facts,
    checked_at: u64,
) -> Result<WindowWrite, RefreshError> {
    let (id, original_mtime) = (file.id, file.original_mtime);
    let wall_before = env.wall_ns();
    let write_error = target.write_at(chunk.offset, chunk.data).err();
    let wall_after = env.wall_ns();
    if let Some(error) = write_error.as_ref() {
        // A write that failed (ENOSPC on a full copy-on-write file system, EDQUOT) may still have moved the time
        // (file systems update it before allocating) and may have landed in part (the same bytes). If the chunk
        // reads back as it was, the time is judged as after any write; otherwise the caller marks the file
        // modified.
        let mut back = vec![0u8; chunk.data.len()];
        let intact = target
            .read_from_media(chunk.offset, &mut back)
            .is_ok_and(|read| read.len_bytes == back.len() && read.sum == chunk.sum);
        if !intact {
            return Err(io::Error::new(error.kind(), error.to_string()).into());
        }
    }
    // Our write's own modification event cannot be told from a modification time set alone during the write
    // (that one is judged by its value below); attribute events during the write are someone else's.
    let during_write = target.path_changes()?;
    // Until half the lease-break time after our last look at the lease, anyone who asked for the file since
    // is still blocked in its open. Past that, someone may be in and have written.
    let late =
        |env: &dyn RefreshEnv| env.monotonic_ns().saturating_sub(checked_at) >= env.lease_break_ns() / 2;
    // A time set by path during the write (which breaks no lease) shows as a modification time our write
    // cannot have set, or as a modification event (the modification time set alone), or as an attribute
    // event with a moved access time (both times set, as touch does); someone waiting to write may set one at
    // any moment without waiting for its open. An attribute event with the access time where it was is a
    // change of mode, owner or extended attributes, which leaves the data and its time alone.
    let written = target.facts()?;
    let after_write = target.path_changes()?;
    let after_write = PathChanges {
        attributes: during_write.attributes || after_write.attributes,
        modified: after_write.modified,
    };
    // File systems set the time at the start of a write (before the data moves), so a time later than the
    // start is someone else's, set by path while we wrote: the window our time may fall in is the moment of
    // the call, widened by how long the call took up to a quarter second (a process preempted on its way
    // into the call is not taken for a disturbed one).
    let write_started_by = wall_before + (wall_after - wall_before).clamp(0, WRITE_START_NS);
    let times_touched = after_write.modified
        || (after_write.attributes && written.atime != at_window.atime)
        || !set_between(written.mtime, wall_before, write_started_by)
        || written.size_bytes != at_window.size_bytes;
    let left = if times_touched {
        Some(
            "another process changed its times or size while refresh wrote; they are left as they are".into(),
        )
    } else if target.writer_waiting()? {
        Some(
            "another process asked to write it while refresh wrote; its times are left as the write set them"
                .into(),
        )
    } else if late(env) {
        Some(format!(
            "the write took {:.1} s, longer than half the lease-break time, so another process may have written meanwhile; its times are left as they are: check its content",
            env.monotonic_ns().saturating_sub(checked_at) as f64 / 1e9
        ))
    } else {
        None
    };
    if let Some(reason) = left {
        journal.done(id, chunk.index)?;
        return Ok(match write_error {
            Some(error) => WindowWrite::WriteFailed(error),
            None => WindowWrite::Disturbed(reason),
        });
    }
    // The original modification time goes back at once, inside the window: a later write by anyone moves it
    // again. The journal first records the time our write set, so a resume after a kill here recognises it
    // exactly rather than by a window of time.
    journal.restoring(id, chunk.index, written.mtime)?;
    target.set_mtime(original_mtime)?;
    // Check once more after the restore: a stall before it may have let a writer in (its change would now sit
    // under the original time), and a time set by path just before it was overwritten by it. Then the file
    // must look changed: its modification time becomes now, and nothing is rewritten.
    let restored = target.facts()?;
    let disturbance = if restored.mtime != original_mtime {
        Some("another process set its modification time right after refresh wrote; theirs stands".into())
    } else if target.path_changes()?.attributes || target.writer_waiting()? || late(env) {
        target.set_mtime(split_ns(env.wall_ns()))?;
        Some("another process may have acted while refresh put the time back; the file is marked modified now: check its content".into())
    } else if after_write.attributes {
        Some("another process changed its mode, owner or extended attributes while refresh wrote; its modification time is put back (a setuid/setgid bit or file capability set at that very moment would have been cleared by the write: check them)".into())
    } else {
        None
    };
    journal.done(id, chunk.index)?;
    Ok(match (write_error, disturbance) {
        (Some(error), _) => WindowWrite::WriteFailed(error),
        (None, Some(reason)) => WindowWrite::Disturbed(reason),
        (None, None) => WindowWrite::Written(restored),
    })
}

/// The protocol's three chunk buffers, kept across files so each is allocated once per run.
#[derive(Debug, Default)]
pub struct ChunkBuffers {
    /// The chunk being refreshed: what was read, and what is written.
    pub current: Scratch,
    /// Its re-read after the write.
    pub check: Scratch,
    /// Lent to the next chunk's read-ahead, and back as that chunk's `current` (the one it replaces is lent next).
    pub ahead: Scratch,
}

/// Refreshes one file in chunks of at most `chunk_bytes` (a multiple of the direct-I/O alignment) that never
/// leave its data ranges, starting at chunk `resume_from` (0, or where a settled run left off with the same
/// chunk size). The file must have no unfinished journal entry (settle first).
#[allow(clippy::too_many_arguments)]
pub fn refresh_file(
    target: &mut dyn RefreshTarget,
    root: &std::path::Path,
    path: &std::path::Path,
    journal: &mut Journal,
    chunk_bytes: u64,
    resume_from: u64,
    env: &mut dyn RefreshEnv,
    buffers: &mut ChunkBuffers,
) -> Result<FileOutcome, RefreshError> {
    let id = target.id();
    assert!(
        journal.entry(&id).is_none(),
        "a file is refreshed only after its old entry is settled"
    );
    assert!(chunk_bytes > 0);
    let first = target.facts()?;
    if let Some(reason) = refusal(target, env, &first)? {
        return Ok(FileOutcome::Refused { reason });
    }
    let chunks = chunk_list(&target.data_ranges()?, first.size_bytes, chunk_bytes);
    let resume_from = if (resume_from as usize) < chunks.len() {
        resume_from
    } else {
        0
    };
    journal.begin(begin_record(target, id, (root, path), &first, chunk_bytes))?;
    // Only the modification time is put back: our reads use O_NOATIME and move no access time, and access
    // times moved by other readers meanwhile are theirs to keep.
    let file = FileInHand {
        id,
        original_mtime: first.mtime,
        lease_losses: 0,
    };
    let mut run = FileRun {
        target,
        journal,
        env,
        file,
        // The file as our last window left it: its original times, our last change time. Anything else is
        // someone else's doing, and because the modification time is always the original one between windows,
        // any write by anyone moves it, however coarse the file system's clock.
        ours: first,
        chunks: &chunks,
        refreshed_bytes: 0,
        index: resume_from as usize,
        paced: false,
    };
    while run.index < chunks.len() {
        if let Some(outcome) = run.refresh_chunk(buffers)? {
            return Ok(outcome);
        }
    }
    run.target.close_window();
    run.journal.end(id)?;
    Ok(FileOutcome::Refreshed {
        bytes: run.refreshed_bytes,
        chunks: chunks.len() as u64,
        resumed_from_chunk: resume_from,
    })
}

/// Why a file is not rewritten at all, judged from its first facts before anything is journalled: None when it
/// may be.
fn refusal(
    target: &mut dyn RefreshTarget,
    env: &dyn RefreshEnv,
    first: &Facts,
) -> Result<Option<String>, RefreshError> {
    if first.privileged {
        return Ok(Some(
            "setuid, setgid or file capabilities (a write would clear them)".into(),
        ));
    }
    if target.shares_extents()? {
        return Ok(Some(
            "shares extents with another file (reflink or snapshot); rewriting would unshare them".into(),
        ));
    }
    // A file written in the last moments could be written again within the same tick of the timestamp clock
    // (a second on ext3, vfat and small-inode ext4, a jiffy elsewhere) without its modification time moving:
    // such a write would be invisible to our checks. Its data is fresh anyway.
    let age_ns = env.wall_ns() as i128 - time_ns(first.mtime);
    let youngest_ns = if first.mtime.1 == 0 {
        YOUNGEST_WHOLE_SECOND_NS
    } else {
        YOUNGEST_NS
    };
    if age_ns < youngest_ns {
        return Ok(Some(
            "modified a moment ago (or in the future); its data is fresh".into(),
        ));
    }
    Ok(None)
}

/// The journal's `begin` record for the file `id` about to be refreshed: where it is (the root given and its
/// path), how it is chunked, and the facts `first` that settling compares with and puts back.
fn begin_record(
    target: &dyn RefreshTarget,
    id: FileId,
    (root, path): (&std::path::Path, &std::path::Path),
    first: &Facts,
    chunk_bytes: u64,
) -> Begin {
    Begin {
        id,
        generation: target.generation(),
        root: PathBytes(root.to_path_buf()),
        path: PathBytes(path.to_path_buf()),
        size_bytes: first.size_bytes,
        mode: first.mode,
        uid: first.uid,
        gid: first.gid,
        atime: first.atime,
        mtime: first.mtime,
        stamp: first.stamp(),
        chunk_bytes,
        handle_hex: target.handle().as_deref().map(to_hex),
    }
}

/// One file being refreshed, chunk by chunk: the ports, what stays the same for every window, the file as our
/// last window left it, and how far the run got.
struct FileRun<'a> {
    target: &'a mut dyn RefreshTarget,
    journal: &'a mut Journal,
    env: &'a mut dyn RefreshEnv,
    file: FileInHand,
    /// The file as our last window left it.
    ours: Facts,
    chunks: &'a [(u64, u64)],
    /// Bytes of the chunks rewritten and verified so far.
    refreshed_bytes: u64,
    /// The chunk in hand.
    index: usize,
    /// Whether the chunk at `index` was paced already, before its read-ahead started.
    paced: bool,
}

impl FileRun<'_> {
    /// Refreshes the chunk at `index` (read, written back in a window, synced, re-read and compared) and moves
    /// on to the next: None, or how the file ended when it cannot go on.
    fn refresh_chunk(&mut self, buffers: &mut ChunkBuffers) -> Result<Option<FileOutcome>, RefreshError> {
        let (offset, len) = self.chunks[self.index];
        let want = len as usize;
        if self.env.interrupted() {
            let times_restored = give_up(self.target, self.journal, self.file.id, &self.ours)?;
            return Ok(Some(FileOutcome::Interrupted {
                chunks_done: self.index as u64,
                rewritten_bytes: self.refreshed_bytes,
                times_restored,
            }));
        }
        if let Some(reason) = self.no_room_for(len)? {
            return self.give_way(reason).map(Some);
        }
        if !std::mem::take(&mut self.paced) {
            self.env.pace(len);
        }
        let (got, sum) = self.read_chunk(buffers, offset, len)?;
        if got != want {
            return self.give_way("it became shorter while being read").map(Some);
        }
        let data = &*buffers.current.slice_mut(want);
        let chunk = Chunk {
            index: self.index as u64,
            offset,
            data,
            sum,
        };
        if let Some(outcome) = self.write_chunk(&chunk)? {
            return Ok(Some(outcome));
        }
        // The window is closed: the next chunk's read may start now and run beside the sync and verification.
        // It is paced first, while none of our I/O is in flight, so the busy-device pause sees only others'.
        if let Some(&(next_offset, next_len)) = self.chunks.get(self.index + 1) {
            self.env.pace(next_len);
            self.paced = true;
            if let Err(back) =
                self.target
                    .read_ahead(next_offset, next_len, std::mem::take(&mut buffers.ahead))
            {
                buffers.ahead = back;
            }
        }
        if let Some(outcome) = self.verify_chunk(&mut buffers.check, &chunk)? {
            return Ok(Some(outcome));
        }
        self.refreshed_bytes += len;
        self.index += 1;
        Ok(None)
    }

    /// Gives the file up for `reason` after the chunks done so far: the journal entry ended, the times judged.
    fn give_way(&mut self, reason: impl Into<String>) -> Result<FileOutcome, RefreshError> {
        let times_restored = give_up(self.target, self.journal, self.file.id, &self.ours)?;
        Ok(FileOutcome::GaveWay {
            reason: reason.into(),
            chunks_done: self.index as u64,
            rewritten_bytes: self.refreshed_bytes,
            times_restored,
        })
    }

    /// On a copy-on-write file system, why there is no room to rewrite the chunk of `len` bytes in hand (None
    /// when there is, or the file system rewrites in place).
    fn no_room_for(&mut self, len: u64) -> Result<Option<String>, RefreshError> {
        // A copy-on-write file system writes every rewritten chunk to new space before it frees the old, and
        // frees an old extent only once all of it is rewritten (and the transaction commits): stop while there
        // is room rather than fill it.
        if self.target.copy_on_write() {
            let free = self.target.free_bytes()?;
            let remaining: u64 = self.chunks[self.index..].iter().map(|&(_, l)| l).sum();
            let needed = len + remaining.min(COW_EXTENT_BYTES) + COW_MARGIN_BYTES;
            if free < needed {
                return Ok(Some(format!(
                    "its copy-on-write file system has {free} bytes free, and rewriting the next chunk needs \
                     {needed} ({len} for the chunk's new copy, {} for old extents that stay allocated until \
                     rewritten whole, {COW_MARGIN_BYTES} to spare); free some space and run again",
                    remaining.min(COW_EXTENT_BYTES)
                )));
            }
        }
        Ok(None)
    }

    /// Reads the chunk of `len` bytes at `offset` into `buffers.current`: the bytes read, and their checksum
    /// when the read-ahead's thread took it.
    fn read_chunk(
        &mut self,
        buffers: &mut ChunkBuffers,
        offset: u64,
        len: u64,
    ) -> Result<(usize, u64), RefreshError> {
        // Read and announce before the window opens, so the window itself is short (a write and a time restore):
        // an exec or a blocking open that meets it waits or fails for that long only. A change by anyone between
        // this read and the window moves the file's modification time away from the original, which the window's
        // first check sees. The read is the read-ahead's if one ran: its buffer becomes this chunk's, with the
        // checksum taken on its thread, and the buffer it replaces is lent to the next read-ahead. Its failure is
        // this read's failure (not retried in line: a medium error would only be met twice).
        Ok(match self.target.take_read_ahead(offset, len) {
            Some(filled) => {
                buffers.ahead = std::mem::replace(&mut buffers.current, filled.buf);
                let got = filled.read?;
                let sum = filled.digest.expect("a read that did not fail has its digest");
                (got, sum)
            }
            None => {
                let read = self
                    .target
                    .read_from_media(offset, buffers.current.slice_mut(len as usize))?;
                (read.len_bytes, read.sum)
            }
        })
    }

    /// Writes `chunk` back through a window, with every check, against the file as our last window left it.
    fn write_window(&mut self, chunk: &Chunk<'_>) -> Result<WindowWrite, RefreshError> {
        write_in_window(
            self.target,
            self.journal,
            self.env,
            &mut self.file,
            chunk,
            &self.ours,
        )
    }

    /// Writes `chunk` back in a window and takes the file as the window left it for `ours`: None, or how the
    /// file ended when the write was refused, disturbed or failed.
    fn write_chunk(&mut self, chunk: &Chunk<'_>) -> Result<Option<FileOutcome>, RefreshError> {
        let left = match self.write_window(chunk)? {
            WindowWrite::Written(left) => left,
            WindowWrite::Refused(reason) | WindowWrite::Disturbed(reason) => {
                return self.give_way(reason).map(Some);
            }
            WindowWrite::WriteFailed(error) => {
                let times_restored = give_up(self.target, self.journal, self.file.id, &self.ours)?;
                return Ok(Some(FileOutcome::WriteFailed {
                    offset: chunk.offset,
                    error: error.to_string(),
                    rewritten_bytes: self.refreshed_bytes,
                    times_restored,
                }));
            }
        };
        // The file as our window left it, change time included: any change by anyone from here on (a write, a
        // chmod, a time set by path, even one that restores our time) shows against it.
        self.ours = left;
        Ok(None)
    }

    /// Syncs, re-reads the chunk into `check` and compares it with the checksum taken at the read, and checks
    /// that no one changed the file meanwhile: None, or how the file ended.
    fn verify_chunk(
        &mut self,
        check: &mut Scratch,
        chunk: &Chunk<'_>,
    ) -> Result<Option<FileOutcome>, RefreshError> {
        let (offset, want) = (chunk.offset, chunk.data.len());
        self.target.sync()?;
        let reread = self.target.read_from_media(offset, check.slice_mut(want))?;
        let after = self.target.facts()?;
        // Pair assertion, second half: what is on the medium now is what was read before the write, judged against
        // the checksum taken at the read (and journalled), not against the buffer, so bytes that changed in memory
        // between the read and the write are caught too. The target sums what it read as it read it.
        if reread.len_bytes != want || reread.sum != chunk.sum {
            // Put the bytes back once more, through a window with every check of the first write: only if the
            // file is still exactly as our window left it.
            if after.same_as(&self.ours)
                && let WindowWrite::Written(_) = self.write_window(chunk)?
            {
                self.target.sync()?;
            }
            let times_restored = give_up(self.target, self.journal, self.file.id, &self.ours)?;
            return Ok(Some(FileOutcome::VerifyFailed {
                offset,
                times_restored,
            }));
        }
        if after.privileged != self.ours.privileged {
            return self
                .give_way("a setuid/setgid bit or file capability came or went during the write")
                .map(Some);
        }
        if !after.same_as(&self.ours) {
            return self.give_way(describe_change(&self.ours, &after)).map(Some);
        }
        Ok(None)
    }
}

/// Says what someone else changed, for the report.
fn describe_change(before: &Facts, now: &Facts) -> String {
    let mut what = Vec::new();
    if now.size_bytes != before.size_bytes {
        what.push("size");
    }
    if now.mtime != before.mtime {
        what.push("data (modification time)");
    }
    if now.mode != before.mode {
        what.push("mode");
    }
    if (now.uid, now.gid) != (before.uid, before.gid) {
        what.push("owner");
    }
    if now.nlink != before.nlink {
        what.push("links");
    }
    if !now.named {
        what.push("name (renamed or removed)");
    }
    if now.privileged != before.privileged {
        what.push("setuid/setgid or capabilities");
    }
    if what.is_empty() {
        what.push("metadata (change time: attributes or extended attributes)");
    }
    format!("another process changed its {}", what.join(", "))
}

/// Settles one unfinished entry of an interrupted run: restores the original times where the content is ours,
/// reports and drops the entry where it is not.
pub fn settle_entry(
    entry: &Unfinished,
    opener: &mut dyn Opener,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
) -> Result<SettleOutcome, RefreshError> {
    let begin = &entry.begin;
    let path = begin.path.clone();
    let handle = begin.handle_hex.as_deref().and_then(from_hex);
    let Some(mut target) = opener.reopen(
        &begin.root.0,
        &begin.path.0,
        &begin.id,
        begin.generation,
        handle.as_deref(),
    )?
    else {
        journal.end(begin.id)?;
        return Ok(SettleOutcome::Gone { path });
    };
    let target = target.as_mut();
    let now = target.facts()?;
    let resume_from = entry.last.map_or(entry.chunks_done, |w| w.index);
    let restored = SettleOutcome::Restored {
        path: path.clone(),
        id: begin.id,
        chunk_bytes: begin.chunk_bytes,
        resume_from,
    };
    // Between windows the file carries its original times, so a file still showing them (same size) was left
    // as it should be, whatever was in flight.
    if now.size_bytes == begin.size_bytes && now.mtime == begin.mtime {
        journal.end(begin.id)?;
        return Ok(restored);
    }
    let Some(w) = entry.last else {
        // No write was in flight: the change is someone else's.
        journal.end(begin.id)?;
        return Ok(SettleOutcome::ChangedByOthers { path });
    };
    match judge_write(target, entry, &now, &w)? {
        Judged::Ours => {}
        Judged::LeftAsWritten => {
            journal.end(begin.id)?;
            return Ok(SettleOutcome::LeftAsWritten { path });
        }
        Judged::NotOurs => {
            journal.end(begin.id)?;
            return Ok(SettleOutcome::ChangedByOthers { path });
        }
    }
    Ok(match put_back_under_lease(target, journal, env, begin, now)? {
        PutBack::Restored => restored,
        PutBack::ChangedByOthers => SettleOutcome::ChangedByOthers { path },
        PutBack::Busy => SettleOutcome::Busy { path },
    })
}

/// Whose the modification time is that the write in flight at the kill left.
enum Judged {
    /// Our write's: the original time is to go back.
    Ours,
    /// Someone else's, or the chunk no longer holds what we wrote.
    NotOurs,
    /// It cannot be told from another write's on a file system that keeps whole seconds: it is left.
    LeftAsWritten,
}

/// Judges the write `w` that was in flight at the kill, with the file as it is now (`now`) and the chunk on the
/// medium, without a lease (a reader is not disturbed).
fn judge_write(
    target: &mut dyn RefreshTarget,
    entry: &Unfinished,
    now: &Facts,
    w: &Writing,
) -> Result<Judged, RefreshError> {
    // The kill came between a write and the time restore after it: the modification time is that write's. It
    // is ours if the chunk holds what we wrote and the time is the one the `restoring` record names, or, when
    // the kill came before that record (within a few system calls of the write), falls where our write put it.
    // The chunk is read and judged without a lease (a reader is not disturbed), then the lease is taken only to
    // check that nothing moved since and to put the time back.
    let mut chunk = vec![0u8; w.len as usize];
    let our_time = match entry.restoring {
        // On a file system that keeps whole seconds another write in the same second after the kill carries
        // the same time, so even the recorded time cannot tell ours from theirs: the time is left (the file
        // looks modified). The kill had to land between the record and the restore, a few microseconds.
        Some(written) if written.1 == 0 && now.mtime == written => return Ok(Judged::LeftAsWritten),
        Some(written) => now.mtime == written,
        None => written_when_announced(now.mtime, w),
    };
    let ours = now.size_bytes == w.before.size_bytes
        && our_time
        && target
            .read_from_media(w.offset, &mut chunk)
            .map(|read| read.len_bytes == chunk.len() && read.sum == w.sum)?;
    Ok(if ours { Judged::Ours } else { Judged::NotOurs })
}

/// How putting the original modification time back under a lease ended.
enum PutBack {
    /// The original time is back and the entry ended.
    Restored,
    /// Someone wrote (or may have) meanwhile: their time stands, or the file is marked modified now; the entry
    /// ended.
    ChangedByOthers,
    /// Someone keeps the file open: the entry stays for the next run.
    Busy,
}

/// Takes the lease only to check that nothing moved since the file was `judged` ours and to put `begin`'s
/// modification time back, waiting out readers and metadata changes (up to [`MAX_LEASE_LOSSES`] times).
fn put_back_under_lease(
    target: &mut dyn RefreshTarget,
    journal: &mut Journal,
    env: &mut dyn RefreshEnv,
    begin: &Begin,
    judged: Facts,
) -> Result<PutBack, RefreshError> {
    let mut judged = judged;
    for _ in 0..MAX_LEASE_LOSSES {
        if open_window_patiently(target, env)? == Window::Busy {
            return Ok(PutBack::Busy);
        }
        let under_lease = target.facts()?;
        if under_lease.data_changed_since(&judged) {
            // Someone wrote while we waited for the window: the time is theirs now.
            target.close_window();
            journal.end(begin.id)?;
            return Ok(PutBack::ChangedByOthers);
        }
        let changes = target.path_changes()?;
        let checked_at = env.monotonic_ns();
        if !under_lease.same_as(&judged) || changes.attributes || changes.modified || !target.lease_held()? {
            // A reader came, or someone changed the metadata only: not a reason to leave our time there. Let
            // them be and look again.
            target.close_window();
            judged = under_lease;
            env.wait_ms(RETRY_MS);
            continue;
        }
        target.set_mtime(begin.mtime)?;
        // As after a write: if a writer may have come in before the restore, or someone set a time by path
        // just before it, the file must look changed, not carry the original time.
        let late = env.monotonic_ns().saturating_sub(checked_at) >= env.lease_break_ns() / 2;
        let disturbed = target.facts()?.mtime != begin.mtime
            || target.path_changes()?.attributes
            || target.writer_waiting()?
            || late;
        if disturbed {
            let now = env.wall_ns();
            target.set_mtime(split_ns(now))?;
        }
        target.close_window();
        journal.end(begin.id)?;
        return Ok(if disturbed {
            PutBack::ChangedByOthers
        } else {
            PutBack::Restored
        });
    }
    Ok(PutBack::Busy)
}

/// Whether a modification time can have been set by the clock between `from_ns` and `to_ns` (less a tick of the
/// kernel's coarse clock; on a file system that keeps whole seconds, from the start of that second).
fn set_between(mtime: super::file::Time, from_ns: i64, to_ns: i64) -> bool {
    let mtime_ns = time_ns(mtime);
    let mut earliest = from_ns as i128 - CLOCK_SLACK_NS;
    if mtime.1 == 0 {
        earliest = earliest.div_euclid(1_000_000_000) * 1_000_000_000;
    }
    mtime_ns >= earliest && mtime_ns <= to_ns as i128 + CLOCK_SLACK_NS
}

/// Whether a modification time can be the one the announced write set: from the announcement (less a tick of
/// the kernel's coarse clock; on a file system that keeps whole seconds, the start of that second) to the latest
/// moment the write could have started.
fn written_when_announced(mtime: super::file::Time, w: &Writing) -> bool {
    // A time with no fraction comes from a file system that keeps whole seconds (a whole-second time on a finer
    // one is a one-in-a-billion chance, and costs only a wider window).
    set_between(mtime, w.wall_ns, w.wall_ns + WRITE_WITHIN_NS)
}

/// Settles every unfinished entry, whatever this run was asked to select.
pub fn settle_all(
    journal: &mut Journal,
    opener: &mut dyn Opener,
    env: &mut dyn RefreshEnv,
) -> Vec<Result<SettleOutcome, (PathBytes, RefreshError)>> {
    let mut outcomes = Vec::new();
    for entry in journal.unfinished() {
        let path = entry.begin.path.clone();
        outcomes.push(settle_entry(&entry, opener, journal, env).map_err(|e| (path, e)));
    }
    if outcomes.iter().all(|o| o.is_ok()) {
        // Keep the journal short; failures leave their entries (and the records) for the next run.
        let _ = journal.compact();
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_sees_every_byte() {
        let mut data = vec![7u8; 4099];
        let base = checksum(&data);
        for i in [0, 8, 4095, 4098] {
            data[i] ^= 1;
            assert_ne!(checksum(&data), base, "byte {i}");
            data[i] ^= 1;
        }
        assert_ne!(checksum(&data[..4098]), base);
    }
}
