//! Per-second accounting: latency histograms, operation and byte counts, and time-weighted queue depth.
//!
//! Completions are binned by their completion time on the device clock into one-second windows from the phase
//! start. A window with no completions is still a sample (a stall shows as zero IOPS, not as a gap). Each
//! closed window keeps its sparse histogram, so percentiles of any window of seconds are exact to the
//! histogram's resolution. A final partial window shorter than half a second is folded into the one before it,
//! so a 10-second run yields 10 samples whose counts still add up to the summary's.

use ssdlab_core::device::Op;
use ssdlab_core::histogram::{Histogram, SparseHistogram};
use ssdlab_core::schema::{DirectionSample, DirectionSummary, LatencyNs, Sample, SampleLatencyNs, Summary};

const NS_PER_S: u64 = 1_000_000_000;
const DIRECTIONS: usize = 3;

#[inline]
fn direction(op: Op) -> usize {
    match op {
        Op::Read => 0,
        Op::Write | Op::Flush => 1,
        Op::Discard => 2,
    }
}

/// Seconds without a completion beyond which they are kept as one window instead of one each: an hour, far
/// longer than any stall a per-second analysis looks at, far shorter than an idle gap that would fill memory.
const IDLE_RUN_S: u64 = 3600;

/// One closed window.
#[derive(Debug, Clone, Default)]
struct Window {
    start_ns: u64,
    len_ns: u64,
    ios: [u64; DIRECTIONS],
    bytes: [u64; DIRECTIONS],
    qd_area: f64,
    histogram: SparseHistogram,
    /// The read and write histograms apart, kept only for a window in which more than one direction completed
    /// (in a window of one direction they are `histogram`), so a phase of one direction costs nothing more.
    by_direction: Option<Box<[SparseHistogram; 2]>>,
}

impl Window {
    /// The latency histogram of direction `d` (0 read, 1 write) in this window, when it completed any.
    fn direction_histogram(&self, d: usize) -> Option<&SparseHistogram> {
        if self.ios[d] == 0 {
            return None;
        }
        Some(match &self.by_direction {
            Some(apart) => &apart[d],
            None => &self.histogram,
        })
    }
}

/// Records completions of one phase and produces its samples and summary.
pub struct Accounting {
    start_ns: u64,
    /// Index of the open window.
    second: u64,
    current: [Histogram; DIRECTIONS],
    ios: [u64; DIRECTIONS],
    bytes: [u64; DIRECTIONS],
    qd_area: f64,
    totals: [Histogram; DIRECTIONS],
    total_bytes: [u64; DIRECTIONS],
    total_qd_area: f64,
    windows: Vec<Window>,
    scratch: Histogram,
    /// Whether every sample states each direction apart, whatever has completed so far (a mixed workload).
    split: bool,
    /// Under a rate limit, each operation's own time on the device (submission to completion), apart from the
    /// latency measured from its due time; None when the two are the same.
    service: Option<Histogram>,
    /// Whether a long run of seconds without a completion stays one window per second (see
    /// [`Accounting::keep_every_second`]).
    every_second: bool,
}

impl Accounting {
    pub fn new(start_ns: u64) -> Self {
        Accounting {
            start_ns,
            second: 0,
            current: Default::default(),
            ios: [0; DIRECTIONS],
            bytes: [0; DIRECTIONS],
            qd_area: 0.0,
            totals: Default::default(),
            total_bytes: [0; DIRECTIONS],
            total_qd_area: 0.0,
            windows: Vec::new(),
            scratch: Histogram::new(),
            split: false,
            service: None,
            every_second: false,
        }
    }

    /// Keeps every second its own window, however long the phase goes without a completion, so the windows of
    /// two accountings from the same start line up one to one and can be merged ([`Accounting::absorb`]). Only
    /// loops that run one phase together need it: an idle hour then costs 3,600 empty samples.
    pub fn keep_every_second(&mut self) {
        self.every_second = true;
    }

    /// Adds another accounting of the same phase (another job's, started at the same instant on the same clock,
    /// both keeping every second): every window, the open one and the totals add exactly, so the merged samples,
    /// percentiles and summary are those one accounting of all the completions would have drawn.
    pub fn absorb(&mut self, mut other: Accounting) {
        assert_eq!(self.start_ns, other.start_ns, "merged accountings start together");
        assert!(
            self.every_second && other.every_second,
            "merged accountings keep every second"
        );
        let second = self.second.max(other.second);
        let at = self.start_ns + second * NS_PER_S;
        self.advance_to(at);
        other.advance_to(at);
        assert_eq!(
            self.windows.len(),
            other.windows.len(),
            "windows line up one to one"
        );
        for (mine, theirs) in self.windows.iter_mut().zip(other.windows) {
            assert_eq!((mine.start_ns, mine.len_ns), (theirs.start_ns, theirs.len_ns));
            let apart = |w: &Window| -> [Histogram; 2] {
                std::array::from_fn(|d| {
                    let mut h = Histogram::new();
                    if let Some(s) = w.direction_histogram(d) {
                        h.merge_sparse(s);
                    }
                    h
                })
            };
            let (mut a, b) = (apart(mine), apart(&theirs));
            let mut all = Histogram::new();
            all.merge_sparse(&mine.histogram);
            all.merge_sparse(&theirs.histogram);
            for d in 0..DIRECTIONS {
                mine.ios[d] += theirs.ios[d];
                mine.bytes[d] += theirs.bytes[d];
            }
            mine.qd_area += theirs.qd_area;
            mine.histogram = all.to_sparse();
            let directions_completed = mine.ios.iter().filter(|&&n| n > 0).count();
            mine.by_direction = (directions_completed > 1).then(|| {
                a[0].merge(&b[0]);
                a[1].merge(&b[1]);
                Box::new([a[0].to_sparse(), a[1].to_sparse()])
            });
        }
        for d in 0..DIRECTIONS {
            self.current[d].merge(&other.current[d]);
            self.ios[d] += other.ios[d];
            self.bytes[d] += other.bytes[d];
            self.totals[d].merge(&other.totals[d]);
            self.total_bytes[d] += other.total_bytes[d];
        }
        self.qd_area += other.qd_area;
        self.total_qd_area += other.total_qd_area;
        self.split |= other.split;
        match (&mut self.service, other.service) {
            (Some(mine), Some(theirs)) => mine.merge(&theirs),
            (None, theirs) => self.service = theirs,
            (Some(_), None) => {}
        }
    }

    /// Has every sample state each direction apart from the first one, for a workload that mixes reads and
    /// writes: a second streamed before the first write completed then says it wrote nothing, as result.json
    /// will, instead of leaving the split out.
    pub fn split_directions(&mut self) {
        self.split = true;
    }

    /// Keeps each operation's time on the device apart from its latency, for a phase whose latency is measured
    /// from when operations were due (a rate limit), so the summary can tell waiting to issue from the device.
    pub fn track_service_time(&mut self) {
        self.service.get_or_insert_with(Histogram::new);
    }

    /// Records one completed operation. Its time on the device (submit to completion) adds to the queue-depth
    /// integral of the window it completed in, so the mean queue depth is exact over the phase and close per
    /// second (an operation longer than a second lends all its time to its completion's window).
    #[inline]
    pub fn record(&mut self, op: Op, bytes: u64, latency_ns: u64, submitted_ns: u64, completed_ns: u64) {
        self.advance_to(completed_ns);
        let busy = completed_ns.saturating_sub(submitted_ns) as f64;
        self.qd_area += busy;
        self.total_qd_area += busy;
        if let Some(service) = &mut self.service {
            service.record(completed_ns.saturating_sub(submitted_ns));
        }
        let d = direction(op);
        self.current[d].record(latency_ns);
        self.ios[d] += 1;
        self.bytes[d] += bytes;
    }

    /// Closes every window that ends at or before `t_ns`. A run of more than [`IDLE_RUN_S`] seconds without a
    /// completion is one window (a sample whose `seconds` says how long), so an idle gap of any length in a
    /// replayed trace or on a virtual clock costs one sample, not one per second.
    #[inline]
    fn advance_to(&mut self, t_ns: u64) {
        let second = t_ns.saturating_sub(self.start_ns) / NS_PER_S;
        if self.second < second {
            self.close_window(NS_PER_S);
        }
        let empty = second.saturating_sub(self.second);
        if empty > IDLE_RUN_S && !self.every_second {
            self.close_window(empty.saturating_mul(NS_PER_S));
        }
        while self.second < second {
            self.close_window(NS_PER_S);
        }
    }

    fn close_window(&mut self, len_ns: u64) {
        self.scratch.clear();
        for d in 0..DIRECTIONS {
            self.scratch.merge(&self.current[d]);
            self.totals[d].merge(&self.current[d]);
            self.total_bytes[d] += self.bytes[d];
        }
        let directions_completed = self.ios.iter().filter(|&&n| n > 0).count();
        let by_direction = (directions_completed > 1)
            .then(|| Box::new([self.current[0].to_sparse(), self.current[1].to_sparse()]));
        for d in 0..DIRECTIONS {
            self.current[d].clear();
        }
        self.windows.push(Window {
            start_ns: self.start_ns + self.second * NS_PER_S,
            len_ns,
            ios: self.ios,
            bytes: self.bytes,
            qd_area: self.qd_area,
            histogram: self.scratch.to_sparse(),
            by_direction,
        });
        self.ios = [0; DIRECTIONS];
        self.bytes = [0; DIRECTIONS];
        self.qd_area = 0.0;
        self.second += (len_ns / NS_PER_S).max(1);
    }

    /// Samples closed so far (for streaming), starting at `from`.
    pub fn samples_since(&self, from: usize) -> impl Iterator<Item = Sample> + '_ {
        let mixed = self.mixed();
        self.windows[from.min(self.windows.len())..]
            .iter()
            .map(move |w| self.sample_of(w, mixed))
    }

    pub fn windows_closed(&self) -> usize {
        self.windows.len()
    }

    /// Whether the phase has both read and written so far: then every sample states each direction apart.
    fn mixed(&self) -> bool {
        self.split || (0..2).all(|d| self.totals[d].count() > 0 || self.ios[d] > 0)
    }

    fn sample_of(&self, w: &Window, mixed: bool) -> Sample {
        let seconds = w.len_ns as f64 / 1e9;
        let ios: u64 = w.ios.iter().sum();
        let bytes: u64 = w.bytes.iter().sum();
        let direction = |d: usize| {
            mixed.then(|| DirectionSample {
                ios: w.ios[d],
                bytes: w.bytes[d],
                iops: w.ios[d] as f64 / seconds,
                bytes_per_s: w.bytes[d] as f64 / seconds,
                latency_ns: w.direction_histogram(d).map(|h| SampleLatencyNs {
                    mean: h.mean(),
                    p50: h.percentile(50.0),
                    p99: h.percentile(99.0),
                    max: h.max_ns,
                }),
            })
        };
        Sample {
            read: direction(0),
            write: direction(1),
            t_s: (w.start_ns - self.start_ns + w.len_ns) as f64 / 1e9,
            seconds,
            ios,
            bytes,
            iops: ios as f64 / seconds,
            bytes_per_s: bytes as f64 / seconds,
            read_ios: w.ios[0],
            write_ios: w.ios[1],
            latency_ns_mean: w.histogram.mean(),
            latency_ns_p50: w.histogram.percentile(50.0),
            latency_ns_p99: w.histogram.percentile(99.0),
            latency_ns_max: w.histogram.max_ns,
            qd_mean: w.qd_area / w.len_ns.max(1) as f64,
        }
    }

    /// Closes the final window at `end_ns` and returns every sample, every window's histogram and the summary.
    /// A tail shorter than half a second is folded into the last whole second, and so is any tail of a phase
    /// limited to `runtime_ns`, when it starts at or after that limit: it holds only the operations in flight at
    /// the stop, and a 2000-second run has 2000 samples however long they take to drain. CPU fields of the
    /// summary are left for the caller, who measures them around the run.
    pub fn finish(mut self, end_ns: u64, runtime_ns: Option<u64>) -> Finished {
        // Books opened at a shared instant (the ramp's end) may close before it, when the phase ended inside
        // its ramp: nothing was measured, over no time.
        let end_ns = end_ns.max(self.start_ns);
        self.advance_to(end_ns);
        let tail_ns = end_ns.saturating_sub(self.start_ns + self.second * NS_PER_S);
        let has_tail = tail_ns > 0 || self.ios.iter().any(|&n| n > 0);
        let draining = runtime_ns.is_some_and(|r| self.second * NS_PER_S >= r);
        if has_tail {
            self.close_window(tail_ns.max(1));
            if (tail_ns < NS_PER_S / 2 || draining) && self.windows.len() >= 2 {
                let tail = self.windows.pop().expect("just pushed");
                let last = self.windows.last_mut().expect("two windows");
                let merged = |a: &SparseHistogram, b: &SparseHistogram| {
                    let mut m = Histogram::new();
                    m.merge_sparse(a);
                    m.merge_sparse(b);
                    m.to_sparse()
                };
                let apart = |w: &Window| -> [SparseHistogram; 2] {
                    std::array::from_fn(|d| w.direction_histogram(d).cloned().unwrap_or_default())
                };
                let directions_completed = (0..DIRECTIONS).filter(|&d| last.ios[d] + tail.ios[d] > 0).count();
                if directions_completed > 1 {
                    let (a, b) = (apart(last), apart(&tail));
                    last.by_direction = Some(Box::new([merged(&a[0], &b[0]), merged(&a[1], &b[1])]));
                }
                last.histogram = merged(&last.histogram, &tail.histogram);
                last.len_ns += tail.len_ns;
                last.qd_area += tail.qd_area;
                for d in 0..DIRECTIONS {
                    last.ios[d] += tail.ios[d];
                    last.bytes[d] += tail.bytes[d];
                }
            }
        }
        let seconds = end_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let mixed = self.mixed();
        let samples: Vec<Sample> = self.windows.iter().map(|w| self.sample_of(w, mixed)).collect();
        let mut all = Histogram::new();
        for h in &self.totals {
            all.merge(h);
        }
        let direction_summary = |d: usize| {
            let h = &self.totals[d];
            (h.count() > 0).then(|| DirectionSummary {
                ios: h.count(),
                bytes: self.total_bytes[d],
                iops: h.count() as f64 / seconds.max(1e-9),
                bytes_per_s: self.total_bytes[d] as f64 / seconds.max(1e-9),
                latency_ns: LatencyNs::from_histogram(h),
            })
        };
        let bytes: u64 = self.total_bytes.iter().sum();
        let summary = Summary {
            ios: all.count(),
            bytes,
            seconds,
            iops: all.count() as f64 / seconds.max(1e-9),
            bytes_per_s: bytes as f64 / seconds.max(1e-9),
            latency_ns: LatencyNs::from_histogram(&all),
            qd_mean: self.total_qd_area / (seconds * 1e9).max(1.0),
            read: direction_summary(0),
            write: direction_summary(1),
            discard: direction_summary(2),
            latency_histogram: Some(all.to_sparse()),
            device_latency_ns: self
                .service
                .as_ref()
                .filter(|h| h.count() > 0)
                .map(LatencyNs::from_histogram),
            ..Summary::default()
        };
        Finished {
            samples,
            histograms: self.windows.into_iter().map(|w| w.histogram).collect(),
            summary,
        }
    }
}

/// What a finished phase's accounting yields.
#[derive(Debug, Clone)]
pub struct Finished {
    pub samples: Vec<Sample>,
    /// One sparse histogram per sample, for exact percentiles over any window.
    pub histograms: Vec<SparseHistogram>,
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_S;

    #[test]
    fn windows_count_and_fold_the_tail() {
        let mut acc = Accounting::new(100);
        for i in 0..10u64 {
            // Two completions per second, the second with a larger latency.
            acc.record(Op::Write, 4096, 1000, 100 + i * S, 100 + i * S + 1);
            acc.record(Op::Write, 4096, 3000, 100 + i * S, 100 + i * S + S / 2);
        }
        acc.record(Op::Read, 4096, 500, 100 + 10 * S, 100 + 10 * S + 10);
        let done = acc.finish(100 + 10 * S + 20, None);
        assert_eq!(
            done.samples.len(),
            10,
            "the 20 ns tail folds into the tenth second"
        );
        assert_eq!(done.samples.iter().map(|s| s.ios).sum::<u64>(), 21);
        assert_eq!(done.summary.ios, 21);
        assert_eq!(done.summary.bytes, 21 * 4096);
        assert_eq!(done.samples[9].ios, 3);
        assert_eq!(done.samples[9].read_ios, 1);
        assert_eq!(done.samples[0].latency_ns_max, 3000);
        assert_eq!(done.summary.read.as_ref().unwrap().ios, 1);
        assert_eq!(done.summary.write.as_ref().unwrap().ios, 20);
    }

    #[test]
    fn a_mixed_phase_states_each_direction_of_every_second() {
        let mut acc = Accounting::new(0);
        // Second 0: reads at 100 us, writes at 20 us. Second 1: writes only (the reads stalled).
        for i in 0..7u64 {
            acc.record(Op::Read, 4096, 100_000, i * 1000, i * 1000 + 100_000);
        }
        for i in 0..3u64 {
            acc.record(Op::Write, 8192, 20_000, i * 1000, i * 1000 + 20_000);
        }
        acc.record(Op::Write, 8192, 30_000, S + 10, S + 30_010);
        // A 0.1 s tail with one read folds into second 1, which then has both directions.
        acc.record(Op::Read, 4096, 200_000, 2 * S, 2 * S + 50);
        let done = acc.finish(2 * S + S / 10, None);
        assert_eq!(done.samples.len(), 2);
        let first = &done.samples[0];
        let (r, w) = (first.read.as_ref().unwrap(), first.write.as_ref().unwrap());
        assert_eq!((r.ios, r.bytes, w.ios, w.bytes), (7, 7 * 4096, 3, 3 * 8192));
        assert_eq!(r.latency_ns.unwrap().max, 100_000);
        assert_eq!(w.latency_ns.unwrap().max, 20_000);
        assert!(first.latency_ns_max >= 100_000 && first.latency_ns_p50 > 20_000);
        let second = &done.samples[1];
        let (r, w) = (second.read.as_ref().unwrap(), second.write.as_ref().unwrap());
        assert_eq!((r.ios, w.ios), (1, 1), "the folded tail keeps its read apart");
        assert_eq!(r.latency_ns.unwrap().max, 200_000);
        assert_eq!(w.latency_ns.unwrap().max, 30_000);

        // A second in which one direction completed nothing states no latency for it, not zero.
        let mut acc = Accounting::new(0);
        acc.record(Op::Read, 4096, 1_000, 0, 1_000);
        acc.record(Op::Write, 4096, 1_000, 0, 1_000);
        acc.record(Op::Write, 4096, 5_000, S, S + 5_000);
        let done = acc.finish(2 * S, None);
        let r = done.samples[1].read.as_ref().unwrap();
        assert_eq!((r.ios, r.latency_ns), (0, None));
        assert_eq!(
            done.samples[1].write.as_ref().unwrap().latency_ns.unwrap().max,
            5_000
        );

        // A mixed workload streams the split from its first second, before any write completed.
        let mut acc = Accounting::new(0);
        acc.split_directions();
        acc.record(Op::Read, 4096, 1_000, 0, 1_000);
        acc.record(Op::Read, 4096, 1_000, S, S + 1_000);
        let streamed: Vec<Sample> = acc.samples_since(0).collect();
        let w = streamed[0].write.as_ref().expect("the split is streamed");
        assert_eq!((w.ios, w.latency_ns), (0, None));

        // A phase of one direction keeps the combined figures only.
        let mut acc = Accounting::new(0);
        acc.record(Op::Read, 4096, 1_000, 0, 1_000);
        let done = acc.finish(S, None);
        assert!(done.samples[0].read.is_none() && done.samples[0].write.is_none());
    }

    #[test]
    fn a_long_drain_after_the_runtime_folds_into_the_last_second() {
        let run = |runtime_ns| {
            let mut acc = Accounting::new(0);
            for i in 0..3u64 {
                acc.record(Op::Write, 4096, 1000, i * S, i * S + 10);
            }
            // Issued before the 3-second stop, completed 0.8 s after it (a garbage-collection stall).
            acc.record(Op::Write, 4096, S, 3 * S - 10, 3 * S + 8 * S / 10);
            acc.finish(3 * S + 8 * S / 10, runtime_ns)
        };
        let limited = run(Some(3 * S));
        assert_eq!(limited.samples.len(), 3, "a 3-second run has three samples");
        assert_eq!(limited.samples[2].ios, 2);
        assert_eq!(limited.summary.ios, 4);
        assert_eq!(
            run(None).samples.len(),
            4,
            "without a runtime the 0.8 s tail is a window of its own"
        );
    }

    #[test]
    fn an_idle_gap_of_any_length_is_one_sample() {
        let mut a = Accounting::new(0);
        a.record(Op::Read, 4096, 1_000, 0, 1_000);
        // The next completion ten million seconds later (a replayed trace's idle gap, in virtual time).
        let later = 10_000_000 * NS_PER_S + 500_000_000;
        a.record(Op::Read, 4096, 1_000, later - 1_000, later);
        let f = a.finish(later + 600_000_000, None);
        let seconds: Vec<f64> = f.samples.iter().map(|s| s.seconds).collect();
        assert_eq!(seconds, vec![1.0, 9_999_999.0, 1.1]);
        assert_eq!(f.samples[1].ios, 0);
        assert_eq!(f.samples.iter().map(|s| s.ios).sum::<u64>(), 2);
        assert_eq!(f.samples[2].t_s, 10_000_001.1);
        // An hour's stall or less is still one zero sample per second.
        let mut a = Accounting::new(0);
        a.record(Op::Read, 4096, 1_000, 0, 1_000);
        a.record(Op::Read, 4096, 1_000, 0, 3_600 * NS_PER_S + 1);
        assert_eq!(a.finish(3_601 * NS_PER_S, None).samples.len(), 3_601);
    }

    #[test]
    fn stalls_are_zero_samples_not_gaps() {
        let mut acc = Accounting::new(0);
        acc.record(Op::Read, 512, 10, 0, 10);
        acc.record(Op::Read, 512, 10, 3 * S, 3 * S + 10);
        let done = acc.finish(4 * S, None);
        let ios: Vec<u64> = done.samples.iter().map(|s| s.ios).collect();
        assert_eq!(ios, [1, 0, 0, 1]);
    }

    #[test]
    fn queue_depth_is_time_weighted() {
        let mut acc = Accounting::new(0);
        // Four operations each in flight for the second half of the first second.
        for _ in 0..4 {
            acc.record(Op::Read, 512, S / 2, S / 2, S - 1);
        }
        let done = acc.finish(S, None);
        assert!(
            (done.samples[0].qd_mean - 2.0).abs() < 1e-6,
            "{}",
            done.samples[0].qd_mean
        );
        assert!((done.summary.qd_mean - 2.0).abs() < 1e-6);
    }

    /// Jobs' accountings merged are the accounting of all their completions: every sample, histogram and the
    /// summary, for a mixed workload with an idle gap and a short tail (the model is one accounting fed
    /// everything in completion order).
    #[test]
    fn merged_jobs_account_exactly_as_one_accounting_of_every_completion() {
        for seed in 1..=20u64 {
            let mut rng = ssdlab_core::rng::Rng::new(seed);
            let jobs = 1 + rng.below(4) as usize;
            let end = 3 * S + rng.below(2 * S);
            let mut events = Vec::new();
            for job in 0..jobs {
                let mut t = 100 + rng.below(1_000);
                while t < end {
                    // An idle second and a half in the middle of every third job.
                    if job % 3 == 2 && (S..S + S / 2).contains(&t) {
                        t += S;
                    }
                    let latency = 1_000 + rng.below(400_000);
                    let op = [Op::Read, Op::Write, Op::Discard][rng.below(3) as usize];
                    let bytes = 512 * (1 + rng.below(16));
                    events.push((job, op, bytes, latency, t.saturating_sub(latency / 2), t));
                    t += 1 + rng.below(20_000_000);
                }
            }
            let mut each: Vec<Accounting> = (0..jobs)
                .map(|_| {
                    let mut a = Accounting::new(100);
                    a.keep_every_second();
                    a
                })
                .collect();
            let mut all = Accounting::new(100);
            all.keep_every_second();
            for &(job, op, bytes, latency, submitted, completed) in &events {
                each[job].record(op, bytes, latency, submitted, completed);
            }
            events.sort_by_key(|e| e.5);
            for &(_, op, bytes, latency, submitted, completed) in &events {
                all.record(op, bytes, latency, submitted, completed);
            }
            let mut merged = each.remove(0);
            for other in each {
                merged.absorb(other);
            }
            let (mut got, mut want) = (merged.finish(end, None), all.finish(end, None));
            assert_eq!(got.samples.len(), want.samples.len(), "seed {seed}");
            for (g, w) in got.samples.iter_mut().zip(&mut want.samples) {
                // The queue-depth integral adds in another order: equal to rounding.
                assert!(
                    (g.qd_mean - w.qd_mean).abs() <= 1e-9 * w.qd_mean.max(1.0),
                    "seed {seed}"
                );
                g.qd_mean = w.qd_mean;
            }
            assert_eq!(got.samples, want.samples, "seed {seed}");
            assert_eq!(got.histograms, want.histograms, "seed {seed}");
            assert!(
                (got.summary.qd_mean - want.summary.qd_mean).abs() <= 1e-9 * want.summary.qd_mean.max(1.0)
            );
            got.summary.qd_mean = want.summary.qd_mean;
            assert_eq!(got.summary, want.summary, "seed {seed}");
        }
    }
}
