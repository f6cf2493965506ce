//! What a Rust service on tokio needs to host the compaction engine: the [`SystemClock`]
//! (wall-clock time that strictly increases, and tokio timers for the engine's deadlines)
//! and [`ProcessIds`] (unique event ids without coordination).
//!
//! # What this crate must never do
//! It decides nothing about compaction (that is compaction-core's) and never blocks a runtime
//! thread.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use compaction_core::Clock;
//! use service::SystemClock;
//!
//! let clock = SystemClock::default();
//! let (a, b) = (clock.now(), clock.now());
//! assert!(b > a, "readings strictly increase, however coarse the system clock");
//! ```
#![warn(missing_docs, unreachable_pub)]

mod clock;
mod ids;

pub use clock::SystemClock;
pub use ids::{ProcessIds, run_id};
