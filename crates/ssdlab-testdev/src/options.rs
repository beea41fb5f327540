//! What a [`crate::MemDevice`] is and how it behaves: its description, what it keeps, how long operations
//! take and when reads take their data. Plain data with defaults; the device reads it once when it is made.

/// How long an operation takes at the device. Operations are served in parallel: each completes its service
/// time after it was submitted, whatever else is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Every operation takes exactly this long: runs are exact, and completions come back in submission order.
    Fixed { ns: u64 },
    /// `min_ns` plus a uniform share of `spread_ns`, drawn from the device's seed; one operation in
    /// `tail_one_in` takes `tail_factor` times that (a read stuck behind garbage collection), so completions
    /// come back out of order and much happens while a slow one is in flight.
    Random {
        min_ns: u64,
        spread_ns: u64,
        tail_one_in: u64,
        tail_factor: u64,
    },
}

/// When a read takes its data from the device's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadsAt {
    /// When it completes: it sees every write that completed before it.
    Completion,
    /// When it arrives: it may miss writes that land while it is in flight, as a device may serve it at once.
    Arrival,
    /// Either, one or the other by an even chance from the device's seed.
    Either,
}

/// Reads that take far longer than anything else, taking their data on arrival: the device a stale-admission
/// race needs (the blocks such a read covers can be written, destaged and evicted before it completes), and a
/// way to script which operation completes last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowReads {
    /// Only reads longer than this may be slow.
    pub longer_than_bytes: u64,
    /// One such read in this many is slow (from the device's seed); 1: every one.
    pub one_in: u64,
    /// A slow read takes `min_ns` plus a uniform share of `spread_ns`.
    pub min_ns: u64,
    pub spread_ns: u64,
    /// At most one slow read at the device at a time.
    pub one_at_a_time: bool,
}

/// Everything a [`crate::MemDevice`] is made from. Fields are public: change what a test needs with struct
/// update syntax over [`MemOptions::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemOptions {
    /// The target and model name the device reports.
    pub name: String,
    pub capacity_bytes: u64,
    /// Also its physical block and its buffers' alignment.
    pub logical_block_bytes: u32,
    /// A longer read or write is refused, as a device with that limit would.
    pub max_transfer_bytes: u64,
    pub discard: bool,
    /// False: nothing is stored and reads return zeroes, so a device of a terabyte costs nothing (a device that
    /// only counts what reaches it).
    pub keep_data: bool,
    /// A volatile write cache: a completed write is visible at once but durable only once a FLUSH submitted
    /// after it completed has completed; [`crate::MemDevice::crash`] loses the rest.
    pub volatile_cache: bool,
    pub service: Service,
    pub reads_at: ReadsAt,
    pub slow_reads: Option<SlowReads>,
    /// The seed of every random choice the device makes (service times, when reads take their data).
    pub seed: u64,
}

impl MemOptions {
    /// A device of `capacity_bytes` that stores its data, with 512-byte blocks, no transfer limit, discard,
    /// no volatile cache, 1 µs per operation and reads that see every write completed before them.
    pub fn new(capacity_bytes: u64) -> Self {
        MemOptions {
            name: "mem".into(),
            capacity_bytes,
            logical_block_bytes: 512,
            max_transfer_bytes: u64::MAX,
            discard: true,
            keep_data: true,
            volatile_cache: false,
            service: Service::Fixed { ns: 1000 },
            reads_at: ReadsAt::Completion,
            slow_reads: None,
            seed: 1,
        }
    }
}
