//! A thread per job (`run_threaded`): jobs merged into one phase, a failure in one job stopping the others, a
//! stop during the ramp, and a job whose device cannot be made leaving no thread waiting at the start line.
//! The jobs' devices here are memory devices with clocks of their own, each starting at zero, so "one clock" is
//! the windows' common origin.

use ssdlab_core::device::{DeviceError, DeviceResult, JobDevice, JobRun, Op};
use ssdlab_core::units::Rate;
use ssdlab_engine::runner::{Observer, Quiet};
use ssdlab_engine::{Pattern, RwMode, Span, StopAt, Workload, run_threaded};
use ssdlab_testdev::{Fault, FaultDevice, MemDevice, Rule};

const MIB: u64 = 1 << 20;

/// QD1 random reads at 1000 IOPS per job for `runtime_s` of virtual time.
fn paced(runtime_s: u64) -> Workload {
    Workload {
        rw: RwMode::RandRead,
        mix_read_percent: 100,
        pattern: Pattern::Random { random_map: true },
        block_bytes: 4096,
        queue_depth: 1,
        span: Span {
            offset_bytes: 0,
            len_bytes: MIB,
        },
        stop: StopAt {
            runtime_ns: Some(runtime_s * 1_000_000_000),
            ..StopAt::default()
        },
        rate: Some(Rate::Iops(1000.0)),
        seed: 3,
        verify: false,
    }
}

/// A job's device: a memory device, with a fault rule or none, or one that cannot be made, or one of a given
/// service time.
enum Job {
    Mem(Option<Rule>),
    Unmakeable,
    Taking(u64),
}

impl JobDevice for Job {
    fn with_device<R: JobRun>(self, run: R) -> DeviceResult<R::Output> {
        match self {
            Job::Mem(rule) => {
                let mut device = FaultDevice::new(MemDevice::new(MIB, 10_000), 1);
                if let Some(rule) = rule {
                    device = device.rule(rule);
                }
                Ok(run.on(device))
            }
            Job::Unmakeable => Err(DeviceError::Invalid("this job's device cannot be made".into())),
            Job::Taking(service_ns) => Ok(run.on(MemDevice::new(MIB, service_ns))),
        }
    }
}

/// Records the seconds shown live and the samples of the record.
#[derive(Default)]
struct Watch {
    live: Vec<u64>,
    samples: usize,
}

impl Observer for Watch {
    fn live(&mut self, sample: &ssdlab_core::schema::Sample) {
        self.live.push(sample.ios);
    }
    fn sample(&mut self, _sample: &ssdlab_core::schema::Sample) {
        self.samples += 1;
    }
}

#[test]
fn jobs_merge_into_one_phase_whose_seconds_add_up() {
    let jobs = vec![Job::Mem(None), Job::Mem(None), Job::Mem(None)];
    let mut watch = Watch::default();
    let out = run_threaded(jobs, &paced(5), 0, &mut watch).unwrap();
    // Seconds were shown live as every job closed them (all but the last two: the newest closed one may still take
    // a short tail, and the last is closed only with the phase), the three jobs' added up; the record's samples
    // came once, merged.
    assert_eq!(watch.live.len(), 3, "{:?}", watch.live);
    assert!(
        watch.live.iter().all(|&ios| (2_990..=3_010).contains(&ios)),
        "{:?}",
        watch.live
    );
    assert_eq!(watch.samples, 5);
    assert!(out.complete);
    // Three schedules of 1000 a second for 5 s, each met (10 us per read).
    assert!(
        (14_997..=15_003).contains(&out.summary.ios),
        "{} ios",
        out.summary.ios
    );
    assert_eq!(out.samples.len(), 5);
    let sampled: u64 = out.samples.iter().map(|s| s.ios).sum();
    assert_eq!(sampled, out.summary.ios);
    for s in &out.samples {
        assert!((2_990..=3_010).contains(&s.ios), "{} ios in a second", s.ios);
    }
    assert_eq!(out.summary.latency_ns.max, 10_000);
}

#[test]
fn a_failure_in_one_job_stops_the_others() {
    // Alone, each job would issue 100,000 reads; job 0's 11th fails.
    let failing = Rule::new(Fault::eio()).on(&[Op::Read]).after(10).once();
    let jobs = vec![Job::Mem(Some(failing)), Job::Mem(None), Job::Mem(None)];
    let out = run_threaded(jobs, &paced(100), 0, &mut Quiet).unwrap();
    assert!(!out.complete);
    let failure = out.io_failure.expect("the failure is named");
    assert_eq!(failure.op, Op::Read);
    assert!(
        out.summary.ios < 100_000,
        "the others stopped at the failure: {} ios in all",
        out.summary.ios
    );
}

#[test]
fn a_stop_during_the_ramp_ends_every_job_with_nothing_measured() {
    struct StopAtOnce;
    impl Observer for StopAtOnce {
        fn stop_requested(&self) -> bool {
            true
        }
    }
    let jobs = vec![Job::Mem(None), Job::Mem(None)];
    // A ramp of 1000 s of virtual time (a million reads a job) that the stop cuts short.
    let out = run_threaded(jobs, &paced(5), 1_000_000_000_000, &mut StopAtOnce).unwrap();
    assert!(!out.complete);
    assert_eq!(out.summary.ios, 0);
    assert!(out.io_failure.is_none());
}

#[test]
fn a_job_whose_device_cannot_be_made_fails_the_phase_and_none_runs() {
    let jobs = vec![Job::Mem(None), Job::Unmakeable, Job::Mem(None)];
    let err = run_threaded(jobs, &paced(100), 0, &mut Quiet).unwrap_err();
    assert!(err.to_string().contains("cannot be made"), "{err}");
}

/// A job that ends early (its pass done in a fraction of a second) does not freeze the live view: the other
/// job's seconds are still shown as they close.
#[test]
fn the_live_view_goes_on_when_a_job_has_ended() {
    let one_pass = Workload {
        rate: None,
        stop: StopAt {
            passes: Some(1),
            ..StopAt::default()
        },
        ..paced(1)
    };
    // 256 reads: 2.6 ms on the fast device, 5.1 s on the slow one.
    let jobs = vec![Job::Taking(10_000), Job::Taking(20_000_000)];
    let mut watch = Watch::default();
    let out = run_threaded(jobs, &one_pass, 0, &mut watch).unwrap();
    assert_eq!(out.summary.ios, 512);
    assert!(watch.live.len() >= 3, "{:?}", watch.live);
}
