//! Unique ids for the events a host appends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::IdGenerator;

/// Unique ids: this process's [`run_id`] and a counter.
#[derive(Debug)]
pub struct ProcessIds {
    prefix: String,
    counter: AtomicU64,
}

/// An id for this run: the wall clock in nanoseconds and the process id, in hex. Two runs
/// share one only if the same process id starts within the same nanosecond.
pub fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("{nanos:x}-{:x}", std::process::id())
}

impl Default for ProcessIds {
    fn default() -> Self {
        ProcessIds {
            prefix: run_id(),
            counter: AtomicU64::new(0),
        }
    }
}

impl IdGenerator for ProcessIds {
    fn next_id(&self) -> String {
        format!(
            "{}-{}",
            self.prefix,
            self.counter.fetch_add(1, Ordering::SeqCst)
        )
    }
}
