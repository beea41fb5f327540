//! How fast refresh goes: a token bucket of bytes (`--rate`) and the pause while other I/O is in flight on the
//! file's device. Pure decisions; the caller sleeps and reads the device's counters.

use std::time::Duration;

/// A token bucket of bytes: how long to wait before `bytes` more fit the rate.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_bytes_per_s: Option<f64>,
    spent_bytes: f64,
}

impl TokenBucket {
    pub fn new(rate_bytes_per_s: Option<f64>) -> Self {
        TokenBucket {
            rate_bytes_per_s,
            spent_bytes: 0.0,
        }
    }

    /// Spends `bytes` at `elapsed` since the bucket was made; returns how long to wait first.
    pub fn take(&mut self, bytes: u64, elapsed: Duration) -> Duration {
        let Some(rate) = self.rate_bytes_per_s else {
            return Duration::ZERO;
        };
        self.spent_bytes += bytes as f64;
        Duration::from_secs_f64(self.spent_bytes / rate).saturating_sub(elapsed)
    }
}

/// Whether other I/O is in flight on a device (requests the block layer counts). Refresh asks only while none
/// of its own is in flight (before a chunk's read, or its read-ahead), so whatever it reports is someone else's.
pub trait BusyProbe {
    /// Requests in flight, or `None` when the device does not say (a virtual file system).
    fn in_flight(&mut self) -> Option<u64>;
}

/// How long refresh waits at most for a busy device before each chunk, so a busy system still progresses.
pub const MAX_BUSY_PAUSE: Duration = Duration::from_secs(5);
pub const BUSY_POLL: Duration = Duration::from_millis(20);

/// Waits while the device is busy, at most [`MAX_BUSY_PAUSE`]; `sleep` does the waiting. Returns the time waited.
pub fn pause_while_busy(probe: &mut dyn BusyProbe, sleep: &mut dyn FnMut(Duration)) -> Duration {
    let mut waited = Duration::ZERO;
    while waited < MAX_BUSY_PAUSE && probe.in_flight().is_some_and(|n| n > 0) {
        sleep(BUSY_POLL);
        waited += BUSY_POLL;
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_holds_the_rate() {
        let mut bucket = TokenBucket::new(Some(100e6));
        assert_eq!(
            bucket.take(50_000_000, Duration::ZERO),
            Duration::from_millis(500)
        );
        assert_eq!(
            bucket.take(50_000_000, Duration::from_millis(900)),
            Duration::from_millis(100)
        );
        assert_eq!(
            TokenBucket::new(None).take(1 << 40, Duration::ZERO),
            Duration::ZERO
        );
    }

    #[test]
    fn a_busy_device_is_waited_for_but_not_forever() {
        struct Busy(u32);
        impl BusyProbe for Busy {
            fn in_flight(&mut self) -> Option<u64> {
                self.0 = self.0.saturating_sub(1);
                Some(self.0 as u64)
            }
        }
        let mut slept = Duration::ZERO;
        assert_eq!(pause_while_busy(&mut Busy(4), &mut |d| slept += d), BUSY_POLL * 3);
        assert_eq!(
            pause_while_busy(&mut Busy(u32::MAX), &mut |d| slept += d),
            MAX_BUSY_PAUSE
        );
    }
}
