//! `ssdlab quick`: the one-screen answer people get from CrystalDiskMark and KDiskMark. Their default set is
//! SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1 and RND4K Q1T1, each read and written, each repeated (5 times of 5 s
//! over a 1 GiB test area). The span is written once first, as those tools write their test file, so reads find
//! data rather than unmapped blocks a drive answers without touching NAND. Every repeat is kept: the spread
//! across repeats says how far one number can be trusted.
//!
//! Generic over [`ssdlab_core::Device`]. It never prints; it says one line per case through the observer.

use ssdlab_core::schema::quick::{QuickAnalysis, QuickCase};
use ssdlab_core::schema::{Analysis, Verdict};
use ssdlab_engine::workload::{Pattern, RwMode, Span, StopAt, Workload};

use crate::session::{MethodError, MethodOutcome, Session};

pub use ssdlab_core::schema::quick::{QuickOptions, QuickProfile};

/// One case of a set: (name, sequential, block bytes, queue depth, threads).
type Case = (&'static str, bool, u64, u32, u32);

/// CrystalDiskMark's and KDiskMark's default set.
const DEFAULT_CASES: [Case; 4] = [
    ("SEQ1M Q8T1", true, 1 << 20, 8, 1),
    ("SEQ1M Q1T1", true, 1 << 20, 1, 1),
    ("RND4K Q32T1", false, 4 << 10, 32, 1),
    ("RND4K Q1T1", false, 4 << 10, 1, 1),
];

/// CrystalDiskMark's "NVMe SSD" set: a drive with many queues is rated with many submitters.
const NVME_CASES: [Case; 4] = [
    ("SEQ1M Q8T1", true, 1 << 20, 8, 1),
    ("SEQ128K Q32T1", true, 128 << 10, 32, 1),
    ("RND4K Q32T16", false, 4 << 10, 32, 16),
    ("RND4K Q1T1", false, 4 << 10, 1, 1),
];

/// CrystalDiskMark runs its T as threads, and so does quick on a real device; on the virtual SSD and a cache they
/// are submitters of one loop (in virtual time, where a host's threads would change nothing): said with it.
fn note_threads(session: &mut Session<'_>, set: &[Case]) {
    if let Some(&(name, .., threads)) = set.iter().find(|c| c.4 > 1) {
        let how = if session.jobs_on_threads() {
            format!(
                "on {threads} threads, each with its own io_uring (as CrystalDiskMark runs {threads} threads)"
            )
        } else {
            format!(
                "as {threads} submitters of one loop on the device (CrystalDiskMark runs {threads} threads; this \
                 device's jobs share its one state and clock)"
            )
        };
        session.notes.push(format!("{name} ran its {threads} jobs {how}"));
    }
}

/// The cases of `profile`.
fn case_set(profile: QuickProfile) -> &'static [Case; 4] {
    match profile {
        QuickProfile::Default => &DEFAULT_CASES,
        QuickProfile::Nvme => &NVME_CASES,
    }
}

/// The case's phase name for a repeat: "seq1m-q8t1-read-3".
fn phase_name(case: &str, read: bool, repeat: u32) -> String {
    format!(
        "{}-{}-{repeat}",
        case.to_lowercase().replace(' ', "-"),
        if read { "read" } else { "write" }
    )
}

/// Runs the set: the test area written once, then every case read and written, each repeated, one line said per
/// case.
pub fn quick(mut session: Session<'_>, options: &QuickOptions) -> Result<MethodOutcome, MethodError> {
    if options.repeats == 0 {
        return Err(MethodError::Invalid(
            "--repeats 0: run each case at least once".into(),
        ));
    }
    let span = test_area(&mut session, options)?;
    session.observer.show_phase_lines(false);
    // The test area written once, as the tools write their test file: reads of never-written blocks would measure
    // the drive's answer for unmapped space, not its NAND. A target that keeps nothing (null) needs no filling.
    let prepared = session.device.info().kind != ssdlab_core::device::TargetKind::Null;
    if prepared {
        prepare(&mut session, span)?;
    }
    let mut cases = Vec::new();
    let set = case_set(options.profile);
    note_threads(&mut session, set);
    'cases: for (case_index, &(name, sequential, block_bytes, queue_depth, threads)) in set.iter().enumerate()
    {
        for read in [true, false] {
            let case = QuickCase {
                name: name.into(),
                read,
                sequential,
                block_bytes,
                queue_depth,
                threads,
                bytes_per_s: Vec::new(),
                iops: Vec::new(),
                latency_ns_mean: 0.0,
                latency_ns_p99: 0,
                latency_ns_mean_by_repeat: Vec::new(),
                latency_ns_p99_by_repeat: Vec::new(),
            };
            let Some(case) = run_case(&mut session, options, span, case_index, case)? else {
                break 'cases;
            };
            let width = set.iter().map(|c| c.0.len()).max().unwrap_or(0).max(11) + 1;
            session.observer.say(&format!(
                "{:<width$}{:<6} {}",
                name,
                if read { "read" } else { "write" },
                case_figures(&case)
            ));
            cases.push(case);
        }
    }
    let mut reasons = Vec::new();
    if !session.device.info().direct_io {
        // The page cache answered, not the drive: CrystalDiskMark's figures of a cached file are memory speed.
        reasons.push(
            "not trustworthy: the target is read and written through the page cache (file:...?cache=page, or a \
             file system without O_DIRECT such as tmpfs), so these figures are the host's memory, not the drive's; \
             use a file on the drive's own file system or the block device"
                .into(),
        );
    }
    if session.stopped {
        reasons.push(format!(
            "{} after {} of {} cases",
            session.stop_reason(),
            cases.len(),
            2 * set.len()
        ));
    }
    let analysis = (!cases.is_empty()).then(|| QuickAnalysis {
        span_bytes: span.len_bytes,
        repeats: options.repeats,
        runtime_s: options.runtime_ns as f64 / 1e9,
        prepared,
        cases,
    });
    let verdict = Verdict {
        finding: false,
        passed: reasons.is_empty() && analysis.is_some(),
        reasons: if analysis.is_none() && reasons.is_empty() {
            vec!["no case completed".into()]
        } else {
            reasons
        },
        unknown: false,
    };
    Ok(session.finish(Analysis::Quick, analysis, verdict))
}

/// The test area: the first `--size` bytes of the device (all of it when smaller, said in a note) in whole
/// MiB, or why the device is too small.
fn test_area(session: &mut Session<'_>, options: &QuickOptions) -> Result<Span, MethodError> {
    let whole = session.whole_device(1 << 20);
    if whole.len_bytes == 0 {
        return Err(MethodError::Invalid(format!(
            "{}: smaller than one 1 MiB block; quick needs at least that",
            session.device.info().target
        )));
    }
    let span = Span {
        offset_bytes: 0,
        len_bytes: options.span_bytes.min(whole.len_bytes) / (1 << 20) * (1 << 20),
    };
    if options.span_bytes > whole.len_bytes {
        session.note_larger_than_target(
            "--size",
            options.span_bytes,
            whole.len_bytes,
            "the cases address all of it",
        );
    }
    Ok(span)
}

/// Writes the test area once, sequentially in 1 MiB blocks at QD8 (the phase "prepare").
fn prepare(session: &mut Session<'_>, span: Span) -> Result<(), MethodError> {
    let fill = Workload {
        rw: RwMode::Write,
        pattern: Pattern::Sequential,
        block_bytes: 1 << 20,
        queue_depth: 8,
        span,
        stop: StopAt {
            passes: Some(1),
            ..StopAt::default()
        },
        ..session.workload_base()
    };
    session.phase("prepare", &fill)?;
    Ok(())
}

/// Runs every repeat of one case (the `case_index`th of its set, in the direction `case.read`) over `span`
/// and fills in `case`'s figures: None when the session stopped or a repeat did not complete.
fn run_case(
    session: &mut Session<'_>,
    options: &QuickOptions,
    span: Span,
    case_index: usize,
    mut case: QuickCase,
) -> Result<Option<QuickCase>, MethodError> {
    let (read, sequential) = (case.read, case.sequential);
    let mut latency_sum_ns = 0.0;
    let mut ops = 0u64;
    for repeat in 1..=options.repeats {
        let workload = Workload {
            rw: match (read, sequential) {
                (true, true) => RwMode::Read,
                (false, true) => RwMode::Write,
                (true, false) => RwMode::RandRead,
                (false, false) => RwMode::RandWrite,
            },
            pattern: if sequential {
                Pattern::Sequential
            } else {
                Pattern::Random { random_map: false }
            },
            block_bytes: case.block_bytes,
            queue_depth: case.queue_depth,
            span,
            stop: StopAt {
                runtime_ns: Some(options.runtime_ns),
                ..StopAt::default()
            },
            // Each case, direction and repeat draws its own offsets.
            seed: ssdlab_core::rng::splitmix64(
                session.seed ^ ((case_index as u64) << 16 | u64::from(repeat) << 8 | read as u64),
            ),
            ..session.workload_base()
        };
        let Some(i) = session.phase_jobs(&phase_name(&case.name, read, repeat), &workload, case.threads)?
        else {
            return Ok(None);
        };
        let phase = &mut session.phases[i];
        if !phase.complete {
            return Ok(None);
        }
        let s = &phase.summary;
        case.bytes_per_s.push(s.bytes_per_s);
        case.iops.push(s.iops);
        let n = s.ios;
        latency_sum_ns += s.latency_ns.mean * n as f64;
        ops += n;
        case.latency_ns_p99 = case.latency_ns_p99.max(s.latency_ns.p99);
        case.latency_ns_mean_by_repeat.push(s.latency_ns.mean);
        case.latency_ns_p99_by_repeat.push(s.latency_ns.p99);
        // Forty phases: the per-second samples stay only in the figures above.
        phase.samples.clear();
    }
    case.latency_ns_mean = if ops > 0 { latency_sum_ns / ops as f64 } else { 0.0 };
    Ok(Some(case))
}

/// "3.51 GB/s ±0.4%" for a sequential case; "58.2 MB/s 14.2K IOPS ±1.2%" for a random one.
pub fn case_figures(case: &QuickCase) -> String {
    use ssdlab_core::units::{Count, DecimalRate};
    let spread = if case.bytes_per_s.len() > 1 {
        format!(" ±{:.1}%", 100.0 * case.relative_spread())
    } else {
        String::new()
    };
    if case.sequential {
        format!("{}{spread}", DecimalRate(case.mean_bytes_per_s()))
    } else {
        format!(
            "{} {} IOPS{spread}",
            DecimalRate(case.mean_bytes_per_s()),
            Count(case.mean_iops())
        )
    }
}

/// The method, for the one list ([`crate::method::MethodPlan`]).
pub struct Quick;

// The disk-mark tools remove their test file; `--keep` keeps it.
crate::method::method_of_options!(Quick, QuickOptions, quick, removes_test_file: |o: &QuickOptions| !o.keep);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MethodObserver;
    use ssdlab_core::device::Op;
    use ssdlab_core::schema::PhaseResult;
    use ssdlab_engine::Observer;
    use ssdlab_testdev::MemDevice;

    struct Watch(Vec<String>, Vec<String>);
    impl Observer for Watch {}
    impl MethodObserver for Watch {
        fn begin_phase(&mut self, name: &str) {
            self.0.push(name.to_string());
        }
        fn end_phase(&mut self, _phase: &PhaseResult) {}
        fn say(&mut self, line: &str) {
            self.1.push(line.to_string());
        }
    }

    #[test]
    fn the_set_runs_in_the_tools_order_after_one_fill_and_keeps_every_repeat() {
        let mut device = MemDevice::new(64 << 20, 100_000);
        let mut watch = Watch(Vec::new(), Vec::new());
        let options = QuickOptions {
            repeats: 3,
            runtime_ns: 20_000_000,
            span_bytes: 16 << 20,
            keep: false,
            profile: QuickProfile::Default,
        };
        let outcome = quick(Session::new(&mut device, &mut watch, 1), &options).unwrap();
        assert!(outcome.verdict.passed, "{:?}", outcome.verdict);
        let Analysis::Quick(m) = &outcome.analysis else {
            panic!("a quick analysis")
        };
        let a = m.measured.as_ref().unwrap();
        assert_eq!(a.cases.len(), 8);
        let names: Vec<(&str, bool)> = a.cases.iter().map(|c| (c.name.as_str(), c.read)).collect();
        assert_eq!(names[0], ("SEQ1M Q8T1", true));
        assert_eq!(names[1], ("SEQ1M Q8T1", false));
        assert_eq!(names[7], ("RND4K Q1T1", false));
        assert!(
            a.cases
                .iter()
                .all(|c| c.bytes_per_s.len() == 3 && c.iops.len() == 3)
        );
        // The fill first: 1 MiB writes over exactly the span, before any read.
        assert_eq!(watch.0[0], "prepare");
        assert_eq!(watch.0[1], "seq1m-q8t1-read-1");
        assert_eq!(watch.0.len(), 1 + 8 * 3);
        let first_read = device
            .log()
            .iter()
            .position(|(op, _, _)| *op == Op::Read)
            .unwrap();
        let fill = &device.log()[..first_read];
        assert!(fill.iter().all(|&(op, _, len)| op == Op::Write && len == 1 << 20));
        assert_eq!(fill.iter().map(|(_, _, len)| len).sum::<u64>(), 16 << 20);
        // Nothing beyond the span; one line per case said.
        assert!(
            device
                .log()
                .iter()
                .all(|&(_, offset, len)| offset + len <= 16 << 20)
        );
        assert_eq!(watch.1.len(), 8);
        // QD32 of 100 us operations: 320K IOPS, the same each repeat, so no spread.
        let q32 = &a.cases[4];
        assert!(
            (q32.mean_iops() - 320_000.0).abs() < 3_200.0,
            "{}",
            q32.mean_iops()
        );
        assert!(q32.relative_spread() < 0.01);
        assert!(
            watch.1[4].starts_with("RND4K Q32T1 read ") && watch.1[4].contains("320K IOPS"),
            "{}",
            watch.1[4]
        );
    }

    /// The NVMe set once, 20 ms a case, over 16 MiB.
    fn nvme_options() -> QuickOptions {
        QuickOptions {
            repeats: 1,
            runtime_ns: 20_000_000,
            span_bytes: 16 << 20,
            keep: false,
            profile: QuickProfile::Nvme,
        }
    }

    #[test]
    fn the_nvme_set_runs_sixteen_submitters_of_thirty_two() {
        let mut device = MemDevice::new(64 << 20, 100_000);
        let mut watch = Watch(Vec::new(), Vec::new());
        let options = nvme_options();
        let outcome = quick(Session::new(&mut device, &mut watch, 1), &options).unwrap();
        let Analysis::Quick(m) = &outcome.analysis else {
            panic!("a quick analysis")
        };
        let a = m.measured.as_ref().unwrap();
        let names: Vec<&str> = a.cases.iter().step_by(2).map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16", "RND4K Q1T1"]
        );
        let t16 = &a.cases[4];
        assert_eq!((t16.queue_depth, t16.threads), (32, 16));
        // 16 x 32 operations of 100 us in flight: 5.12M IOPS, where one thread of 32 makes 320K.
        assert!(
            (t16.mean_iops() - 5_120_000.0).abs() < 60_000.0,
            "{}",
            t16.mean_iops()
        );
        assert_eq!(a.cases[2].block_bytes, 128 << 10);
    }

    /// With job threads (a real target's siblings), the T16 case's jobs go to them and every other case runs on the
    /// session's device; the note says which way the jobs ran.
    #[test]
    fn a_session_with_job_threads_gives_only_the_many_job_case_to_them() {
        struct Threads {
            device: std::cell::RefCell<MemDevice>,
            asked: std::cell::RefCell<Vec<u32>>,
        }
        impl crate::session::JobThreads for Threads {
            fn run(
                &self,
                workload: &Workload,
                jobs: u32,
                observer: &mut dyn Observer,
            ) -> Result<ssdlab_engine::PhaseOutcome, ssdlab_core::device::DeviceError> {
                self.asked.borrow_mut().push(jobs);
                ssdlab_engine::run_jobs_ramped(&mut *self.device.borrow_mut(), workload, jobs, 0, observer)
            }
        }
        let threads = Threads {
            device: std::cell::RefCell::new(MemDevice::new(64 << 20, 100_000)),
            asked: std::cell::RefCell::new(Vec::new()),
        };
        let mut device = MemDevice::new(64 << 20, 100_000);
        let mut watch = Watch(Vec::new(), Vec::new());
        let options = nvme_options();
        let session = Session::new(&mut device, &mut watch, 1).with_job_threads(Some(&threads));
        let outcome = quick(session, &options).unwrap();
        assert_eq!(
            *threads.asked.borrow(),
            [16, 16],
            "the T16 read and write, and nothing else"
        );
        let Analysis::Quick(m) = &outcome.analysis else {
            panic!("a quick analysis")
        };
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("RND4K Q32T16 ran its 16 jobs on 16 threads")),
            "{:?}",
            m.notes
        );
        // Without them, the same set says its jobs were submitters of one loop.
        let mut watch = Watch(Vec::new(), Vec::new());
        let outcome = quick(Session::new(&mut device, &mut watch, 1), &options).unwrap();
        let Analysis::Quick(m) = &outcome.analysis else {
            panic!("a quick analysis")
        };
        assert!(
            m.notes.iter().any(|n| n.contains("as 16 submitters of one loop")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn no_repeats_is_refused_before_any_io() {
        let mut device = MemDevice::new(64 << 20, 100_000);
        let mut watch = Watch(Vec::new(), Vec::new());
        let options = QuickOptions {
            repeats: 0,
            ..QuickOptions::default()
        };
        let err = quick(Session::new(&mut device, &mut watch, 1), &options).unwrap_err();
        assert!(err.to_string().contains("--repeats"));
        assert!(device.log().is_empty());
    }
}
