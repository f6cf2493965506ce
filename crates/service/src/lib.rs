//! What a Rust service on tokio needs to host the compaction engine: the per-session
//! [`Lanes`] (spec section 8's sequential post-turn lifecycle), the [`SystemClock`]
//! (wall-clock time that strictly increases, and tokio timers for the engine's deadlines) and
//! [`ProcessIds`] (unique event ids without coordination).
//!
//! # The lane contract
//! A service hands the lanes a session key when a turn arrives ([`Lanes::begin`]), streams
//! the reply and closes the stream, then calls [`Turn::finish`]. Per session:
//! (a) nothing is evaluated before the stream closed; (b) `evaluate_and_compact` runs right
//! after, on its own task; (c) the next turn of the session begins when that evaluation
//! ended, or after [`LaneConfig::max_wait`] on the uncompacted context, and [`Turn::wait`]
//! says which; (d) sessions never wait for each other; (e) idle lanes are freed;
//! (f) an evaluation never outlives [`LaneConfig::evaluation_deadline`]; (g) a compaction
//! dropped as stale is evaluated once more on the new revision before the next turn is
//! released. The `lane` module documents each point.
//!
//! # Example: a service without HTTP
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use compaction_core::{Engine, EventBuilder, SessionKey, SessionStore, Settings};
//! use service::{LaneConfig, LaneWait, Lanes, ProcessIds, SystemClock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let store = Arc::new(session_store::SqliteStore::open(dir.path().join("sessions.db"))?);
//! let settings = Settings::default();
//! let effective = settings.clone().effective()?;
//! let decision = decision_client::build_decision_model(
//!     &effective, &Default::default(), |_| None)?;          // offline: no key
//! let summarizer = summarizer::build_summarizer(
//!     &effective, &Default::default(), |_| None)?;
//! let (clock, ids) = (Arc::new(SystemClock::default()), Arc::new(ProcessIds::default()));
//! let engine = Engine::builder(decision.model, summarizer.summarizer, store.clone(),
//!     clock.clone(), ids.clone()).settings(settings).build()?;
//! let lanes = Lanes::new(Arc::new(engine), LaneConfig::default().max_wait(Duration::from_secs(5)));
//!
//! let key = SessionKey::new("my-app", "user-1", "session-1");
//! let mut revision = store.create_session(&key, Default::default()).await?.revision;
//! let events = EventBuilder::new(clock.as_ref(), ids.as_ref(), "coordinator");
//! for (i, question) in ["What limits fast charging?", "Why plating?"].iter().enumerate() {
//!     let turn = lanes.begin(&key, format!("inv-{i}")).await?;   // waits for the last evaluation
//!     assert_eq!(turn.wait(), LaneWait::Immediate);
//!     let context = store.load_context(&key).await?;              // the warm, compacted context
//!     // ... stream the coordinator's reply built on `context` to the client, close the stream,
//!     // and store the turn:
//!     # let _ = context;
//!     for event in [events.user_query(&format!("inv-{i}"), question),
//!                   events.reply(&format!("inv-{i}"), "An answer.", Some(1_200))] {
//!         revision = store.append(&key, revision, event).await?;
//!     }
//!     let report = turn.finish().await?;                          // or drop the handle
//!     println!("{}", report.outcome().expect("within the deadline"));
//!     # revision = store.gate_snapshot(&key).await?.revision;
//! }
//! assert_eq!(lanes.active_lanes(), 0, "idle lanes are freed");
//! # Ok(())
//! # }
//! ```
//!
//! # What this crate must never do
//! It decides nothing about compaction (that is compaction-core's) and never blocks a runtime
//! thread.
#![warn(missing_docs, unreachable_pub)]

mod clock;
#[cfg(feature = "http")]
pub mod http;
mod ids;
mod lane;

pub use clock::SystemClock;
pub use ids::{ProcessIds, run_id};
pub use lane::{Evaluation, LaneConfig, LaneError, LaneReport, LaneWait, Lanes, Turn};
