//! The transfer-size sweep (seed 001, ATTO): sequential write then read MB/s for every power of two from
//! `from_bytes` to `to_bytes` over a test region at a fixed queue depth. Counters are 64-bit throughout (ATTO's
//! 32-bit counters overflowed on fast drives). With the queue-depth axis, random write then read at one block
//! size for every power-of-two queue depth from 1 to `max_queue_depth`: the queue-depth scaling chart.

use ssdlab_core::schema::{Analysis, Verdict};
pub use ssdlab_core::schema::{SweepAnalysis, SweepRow};
use ssdlab_core::units::BinaryBytes;
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::options::{SweepAxis, SweepOptions};

/// The transfer sizes of a sweep: powers of two from `from` to `to` (both rounded to powers of two).
pub fn sizes(from: u64, to: u64) -> Vec<u64> {
    let mut size = from.max(1).next_power_of_two();
    let mut out = Vec::new();
    while size <= to {
        out.push(size);
        size *= 2;
    }
    out
}

/// The transfer-size sweep (or, by `options.axis`, the queue-depth or mix sweep): sequential write then read
/// at every power-of-two transfer size over the test region.
pub fn sweep(mut session: Session<'_>, options: &SweepOptions) -> Result<MethodOutcome, MethodError> {
    if options.jobs > 1 {
        // The tables' depths are each job's: the device had this many times as many in flight.
        let how = if session.jobs_on_threads() {
            "each on a thread of its own"
        } else {
            "as submitters of one loop on the device"
        };
        session.notes.push(format!(
            "every point ran {} jobs side by side (--jobs), {how}, each at the queue depth shown: the device had {} \
             times as many operations in flight; figures are of all jobs together",
            options.jobs, options.jobs
        ));
    }
    match options.axis {
        SweepAxis::Qd => return queue_depth_sweep(session, options),
        SweepAxis::Mix => return mix_sweep(session, options),
        SweepAxis::Size => {}
    }
    let region = size_region(&mut session, options)?;
    // Two phases per size: the table at the end says it better than a line for each.
    session.observer.show_phase_lines(false);
    let (rows, skipped) = size_rows(&mut session, options, region)?;
    Ok(finish_size(session, options, region, rows, skipped))
}

/// The region the transfer-size sweep covers: the test size (at most the device) in whole transfers of the
/// largest size, or why the sizes given cannot run.
fn size_region(session: &mut Session<'_>, options: &SweepOptions) -> Result<u64, MethodError> {
    if options.from_bytes > options.to_bytes {
        return Err(MethodError::Invalid(format!(
            "--from {} is above --to {}: give the smaller size first",
            options.from_bytes, options.to_bytes
        )));
    }
    let info = session.device.info().clone();
    let largest = options.to_bytes.next_power_of_two().clamp(4096, 64 << 20);
    if options.test_bytes > info.capacity_bytes {
        session.note_larger_than_target(
            "--test-size",
            options.test_bytes,
            info.capacity_bytes,
            "the whole device is the test region",
        );
    }
    // A destructive test never touches more than the region it was given: a region too small for the largest
    // transfer is refused, never widened.
    let region = options.test_bytes.min(info.capacity_bytes) / largest * largest;
    if region == 0 {
        return Err(MethodError::Invalid(format!(
            "--test-size {} holds no {} transfer: give --test-size of at least {}, or a smaller --to",
            BinaryBytes(options.test_bytes),
            BinaryBytes(largest),
            BinaryBytes(largest)
        )));
    }
    Ok(region)
}

/// Runs every transfer size over `region` (write, then read) until the session stops: the rows measured, and
/// the sizes skipped with why.
fn size_rows(
    session: &mut Session<'_>,
    options: &SweepOptions,
    region: u64,
) -> Result<(Vec<SweepRow>, Vec<String>), MethodError> {
    let logical_block_bytes = session.device.info().logical_block_bytes;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for size in sizes(options.from_bytes, options.to_bytes) {
        if size < logical_block_bytes as u64 {
            skipped.push(format!(
                "{size} B: below the logical block size ({logical_block_bytes} B)"
            ));
            continue;
        }
        if size > region || size > 64 << 20 {
            skipped.push(format!(
                "{size} B: larger than the {region}-byte test region or 64 MiB"
            ));
            continue;
        }
        let base = point_workload(session, size, options.queue_depth, region / size * size, options);
        let Some(row) = write_then_read(
            session,
            (&base, options.jobs),
            (RwMode::Write, &format!("write-{}", size_name(size))),
            (RwMode::Read, &format!("read-{}", size_name(size))),
            None,
        )?
        else {
            if session.phases.last().is_some_and(|p| !p.complete) {
                skipped.push(format!(
                    "{size} B: cut short, not measured as a point (its phases are in the result, marked \
                     incomplete)"
                ));
            }
            break;
        };
        if row.partial {
            skipped.push(format!(
                "{size} B: cut short by the interrupt; its row is marked partial (figures over the part that ran)"
            ));
        }
        rows.push(row);
        if session.stopped {
            break;
        }
    }
    Ok((rows, skipped))
}

/// Ends a transfer-size sweep: its analysis, and a verdict that fails only when it was interrupted before every
/// size ran.
fn finish_size(
    session: Session<'_>,
    options: &SweepOptions,
    region_bytes: u64,
    rows: Vec<SweepRow>,
    skipped: Vec<String>,
) -> MethodOutcome {
    let mut reasons = Vec::new();
    if session.stopped {
        reasons.push(format!(
            "{} before every transfer size ran",
            session.stop_reason()
        ));
    }
    let analysis = SweepAnalysis {
        axis: SweepAxis::Size,
        region_bytes,
        queue_depth: options.queue_depth,
        jobs: options.jobs,
        rows,
        skipped,
    };
    let verdict = Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    session.finish(Analysis::Sweep, Some(analysis), verdict)
}

/// The workload of one sweep point: `block` bytes at queue depth `depth` over the first `region` bytes, stopping
/// after one pass or the per-point runtime.
fn point_workload(
    session: &Session<'_>,
    block: u64,
    depth: u32,
    region: u64,
    options: &SweepOptions,
) -> Workload {
    Workload {
        block_bytes: block,
        queue_depth: depth,
        span: Span {
            offset_bytes: 0,
            len_bytes: region,
        },
        stop: StopAt {
            passes: Some(1),
            runtime_ns: Some(options.size_runtime_ns),
            bytes: None,
        },
        ..session.workload_base()
    }
}

/// One point of a sweep: the write phase, then the read phase, on the same workload run as `jobs` copies side by
/// side; None when the session stopped before both ran to their end.
fn write_then_read(
    session: &mut Session<'_>,
    (base, jobs): (&Workload, u32),
    (write_rw, write_name): (RwMode, &str),
    (read_rw, read_name): (RwMode, &str),
    queue_depth: Option<u32>,
) -> Result<Option<SweepRow>, MethodError> {
    let write = session.phase_jobs(
        write_name,
        &Workload {
            rw: write_rw,
            ..base.clone()
        },
        jobs,
    )?;
    let read = session.phase_jobs(
        read_name,
        &Workload {
            rw: read_rw,
            ..base.clone()
        },
        jobs,
    )?;
    let (Some(write), Some(read)) = (write, read) else {
        return Ok(None);
    };
    let complete = session.phases[write].complete && session.phases[read].complete;
    let (w, r) = (&session.phases[write].summary, &session.phases[read].summary);
    // A point an interrupt cut short after both its directions moved data is kept, marked partial: its
    // figures are over the part that ran. One a failed operation cut short, or whose read never moved a byte,
    // was not measured: it is left out, never drawn as zero. Its phases stay in the result, marked incomplete.
    let partial = !complete && session.failure.is_none() && w.bytes > 0 && r.bytes > 0;
    if !complete && !partial {
        return Ok(None);
    }
    Ok(Some(SweepRow {
        partial,
        ..row(
            (base.block_bytes, queue_depth, None),
            (w.bytes, w.bytes_per_s, w.iops),
            (r.bytes, r.bytes_per_s, r.iops),
        )
    }))
}

/// A sweep point from its (transfer size, queue depth, read share) and each direction's (bytes, bytes per
/// second, IOPS).
fn row(
    (transfer_bytes, queue_depth, read_percent): (u64, Option<u32>, Option<u32>),
    (write_bytes, write_bytes_per_s, write_iops): (u64, f64, f64),
    (read_bytes, read_bytes_per_s, read_iops): (u64, f64, f64),
) -> SweepRow {
    SweepRow {
        transfer_bytes,
        queue_depth,
        read_percent,
        partial: false,
        write_bytes,
        write_bytes_per_s,
        write_iops,
        read_bytes,
        read_bytes_per_s,
        read_iops,
    }
}

/// Writes the whole region once, sequentially, before a random sweep: random reads of never-written blocks
/// would cost a drive nothing (unmapped) and flatter the read side.
fn fill_region(session: &mut Session<'_>, block: u64, region: u64) -> Result<(), MethodError> {
    let transfer = if region.is_multiple_of(128 << 10) {
        128 << 10
    } else {
        block
    };
    let fill = Workload {
        rw: RwMode::Write,
        pattern: Pattern::Sequential,
        block_bytes: transfer,
        queue_depth: 32,
        span: Span {
            offset_bytes: 0,
            len_bytes: region,
        },
        stop: StopAt {
            passes: Some(1),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    session.phase("fill", &fill)?;
    Ok(())
}

/// The block size a random sweep runs at and the region it covers, or why it cannot run.
fn random_region(session: &Session<'_>, options: &SweepOptions) -> Result<(u64, u64), MethodError> {
    let info = session.device.info();
    let block = options.block_bytes;
    if block < info.logical_block_bytes as u64 || !block.is_multiple_of(info.logical_block_bytes as u64) {
        return Err(MethodError::Invalid(format!(
            "--bs {}: a multiple of the device's {}-byte logical block",
            BinaryBytes(block),
            info.logical_block_bytes
        )));
    }
    let region = options.test_bytes.min(info.capacity_bytes) / block * block;
    if region == 0 {
        return Err(MethodError::Invalid(format!(
            "--test-size {} holds no {} block: give a larger --test-size or a smaller --bs",
            BinaryBytes(options.test_bytes),
            BinaryBytes(block)
        )));
    }
    Ok((block, region))
}

/// The read/write-mix axis: random I/O of `block_bytes` at `queue_depth`, reads from 0% to 100% of operations in
/// steps of 10, each point one mixed run (for `size_runtime_ns` or one pass over the region) whose reads and writes
/// are counted apart.
fn mix_sweep(mut session: Session<'_>, options: &SweepOptions) -> Result<MethodOutcome, MethodError> {
    let (block, region) = random_region(&session, options)?;
    fill_region(&mut session, block, region)?;
    let mut rows = Vec::new();
    session.observer.show_phase_lines(false);
    for read_percent in (0..=100u32).step_by(10) {
        let workload = Workload {
            rw: RwMode::RandRw,
            mix_read_percent: read_percent as u8,
            pattern: Pattern::Random { random_map: false },
            ..point_workload(&session, block, options.queue_depth, region, options)
        };
        let Some(index) = session.phase_jobs(&format!("mix-rw{read_percent}"), &workload, options.jobs)?
        else {
            break;
        };
        // A mix an interrupt cut short after it moved data is kept, marked partial; one a failed operation cut
        // short is left out, as a size or depth point is (its phase stays, marked incomplete).
        let complete = session.phases[index].complete;
        let partial = !complete && session.failure.is_none() && session.phases[index].summary.bytes > 0;
        if !complete && !partial {
            break;
        }
        let s = &session.phases[index].summary;
        let (r, w) = (
            s.read.clone().unwrap_or_default(),
            s.write.clone().unwrap_or_default(),
        );
        // Each direction's share of the one run: IOPS and bytes per second over the whole run.
        rows.push(SweepRow {
            partial,
            ..row(
                (block, Some(options.queue_depth), Some(read_percent)),
                (w.bytes, w.bytes_per_s, w.iops),
                (r.bytes, r.bytes_per_s, r.iops),
            )
        });
        if partial {
            break;
        }
        if session.stopped {
            break;
        }
    }
    Ok(finish_random(
        session,
        SweepAxis::Mix,
        region,
        (options.queue_depth, options.jobs),
        rows,
    ))
}

/// Ends a random sweep (queue depth or mix): its analysis, and a verdict that fails only when it was
/// interrupted before every point ran.
fn finish_random(
    session: Session<'_>,
    axis: SweepAxis,
    region_bytes: u64,
    (queue_depth, jobs): (u32, u32),
    rows: Vec<SweepRow>,
) -> MethodOutcome {
    let mut reasons = Vec::new();
    if session.stopped {
        reasons.push(format!(
            "{} before every {} ran",
            session.stop_reason(),
            if axis == SweepAxis::Mix {
                "mix"
            } else {
                "queue depth"
            }
        ));
    }
    let analysis = SweepAnalysis {
        axis,
        region_bytes,
        queue_depth,
        jobs,
        rows,
        skipped: Vec::new(),
    };
    let verdict = Verdict {
        finding: false,
        passed: reasons.is_empty(),
        reasons,
        unknown: false,
    };
    session.finish(Analysis::Sweep, Some(analysis), verdict)
}

/// The queue-depth axis: random write then random read of `block_bytes` at QD 1, 2, 4, ... up to
/// `max_queue_depth`, each for `size_runtime_ns` or one pass over the region.
fn queue_depth_sweep(mut session: Session<'_>, options: &SweepOptions) -> Result<MethodOutcome, MethodError> {
    let (block, region) = random_region(&session, options)?;
    fill_region(&mut session, block, region)?;
    let mut rows = Vec::new();
    session.observer.show_phase_lines(false);
    let mut depth = 1u32;
    while depth <= options.max_queue_depth {
        let base = Workload {
            pattern: Pattern::Random { random_map: false },
            ..point_workload(&session, block, depth, region, options)
        };
        let Some(row) = write_then_read(
            &mut session,
            (&base, options.jobs),
            (RwMode::RandWrite, &format!("randwrite-qd{depth}")),
            (RwMode::RandRead, &format!("randread-qd{depth}")),
            Some(depth),
        )?
        else {
            break;
        };
        rows.push(row);
        if session.stopped {
            break;
        }
        depth *= 2;
    }
    Ok(finish_random(
        session,
        SweepAxis::Qd,
        region,
        (options.max_queue_depth, options.jobs),
        rows,
    ))
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Sweep;

crate::method::method_of_options!(Sweep, SweepOptions, sweep);

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_are_powers_of_two() {
        assert_eq!(super::sizes(512, 4096), vec![512, 1024, 2048, 4096]);
        assert_eq!(super::sizes(512, 64 << 20).len(), 18);
        assert_eq!(super::sizes(3000, 5000), vec![4096]);
    }
}

/// A transfer size as a phase name: `512`, `4k`, `64k`, `1m`, `64m` (the sizes are powers of two).
fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{}m", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{}k", b >> 10),
        b => b.to_string(),
    }
}

#[cfg(test)]
mod size_name_tests {
    #[test]
    fn phase_names_read_like_the_flags() {
        assert_eq!(super::size_name(512), "512");
        assert_eq!(super::size_name(4096), "4k");
        assert_eq!(super::size_name(64 << 20), "64m");
    }
}
