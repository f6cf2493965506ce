//! The system clock, made strictly increasing (compaction-core's `Clock` contract).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use compaction_core::{Clock, Sleep, Timestamp};

/// The smallest step between two readings: 1 ms, so that events appended in one burst (a
/// replay) keep their order at ADK's microsecond resolution and in any float formatting.
const MIN_STEP_MICROS: u64 = 1_000;

/// Wall-clock time that strictly increases: each reading is the system time, or 1 ms after
/// the previous reading when the system clock is coarse, stands still or steps back. Its
/// `sleep` is tokio's timer, so it must be used inside a tokio runtime.
#[derive(Debug, Default)]
pub struct SystemClock {
    last_micros: AtomicU64,
}

impl SystemClock {
    /// The next reading after `wall` microseconds, given the previous reading.
    fn advance(&self, wall: u64) -> u64 {
        let mut prev = self.last_micros.load(Ordering::SeqCst);
        loop {
            let next = wall.max(prev + MIN_STEP_MICROS);
            match self
                .last_micros
                .compare_exchange(prev, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return next,
                Err(actual) => prev = actual,
            }
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
        let micros = self.advance(wall);
        Timestamp::new(micros as f64 / 1e6).unwrap_or(Timestamp::EPOCH)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A system clock that stands still or steps back still gives increasing readings.
    #[test]
    fn readings_increase_when_the_wall_clock_does_not() {
        let clock = SystemClock::default();
        let first = clock.advance(5_000_000);
        let same = clock.advance(5_000_000);
        let back = clock.advance(4_000_000);
        assert!(first < same && same < back, "{first} {same} {back}");
    }

    #[test]
    fn readings_from_many_threads_are_distinct() {
        let clock = std::sync::Arc::new(SystemClock::default());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let clock = clock.clone();
                std::thread::spawn(move || (0..500).map(|_| clock.now()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<Timestamp> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_is_a_tokio_timer() {
        let clock = SystemClock::default();
        let before = tokio::time::Instant::now();
        clock.sleep(Duration::from_secs(10)).await;
        assert!(before.elapsed() >= Duration::from_secs(10));
    }
}
