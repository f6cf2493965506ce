//! Google ADK's own sessions database as a [`SessionStore`](compaction_core::SessionStore).
//!
//! An ADK app keeps its sessions in SQLite through `DatabaseSessionService`
//! (`sqlite+aiosqlite:///…`, schema v1) or `SqliteSessionService` (`adk web`'s
//! `.adk/session.db`). [`detect_layout`] tells the layouts apart (and this crate's native
//! store, and ADK's legacy v0 layout, which is refused naming `adk migrate session`);
//! [`AdkStore`] loads sessions and appends compaction events in the exact shape ADK honours
//! (author `user`, a fresh invocation id, no content, `actions.compaction`, engine data only in
//! `custom_metadata`), with ADK's optimistic-concurrency revision (`sessions.update_time`)
//! checked and bumped in the same `BEGIN IMMEDIATE` transaction.
//!
//! Facts were read from google-adk 2.13.0 and are checked against it by
//! `cargo xtask adk-interop`, which drives real ADK services around the `compaction` binary.
//!
//! # ADK's rules this module follows (google-adk 2.13.0)
//! - **Stale detection.** `DatabaseSessionService` compares the exact stored `update_time`
//!   (to the microsecond) with the marker it read; `SqliteSessionService` raises
//!   `StaleSessionError` only when the stored REAL is *greater* than the one it read. So an
//!   append here sets `update_time` to the event's timestamp and refuses an event that is not
//!   strictly later than the stored `update_time` (a compaction is stamped "now").
//! - **Event shape.** `Event` ignores unknown top-level keys (they would be silently lost);
//!   `EventActions` and `EventCompaction` forbid them (the whole session would fail to load).
//!   Appends with an unknown `actions` key, a non-empty `state_delta` (ADK would merge it into
//!   the state; this store does not) or a partial event are refused.
//! - **State rows.** `DatabaseSessionService` requires the `app_states` / `user_states` rows
//!   on append; [`AdkStore::create_session`] writes them. `SqliteSessionService` neither
//!   writes nor needs them.
//! - **Order and time.** Events load by `timestamp`, ties broken by `id`
//!   (`DatabaseSessionService`) or insertion order (`SqliteSessionService`); the JSON
//!   `timestamp` wins over the column.
//!
//! # Cost
//! An ADK file has no gate header, so the port's `gate_snapshot` and `load_live_tail` use the
//! default (load the whole session), as ADK itself does on every turn.
//!
//! # Known difference
//! ADK's prompt builder keeps *every* non-subsumed compaction (two partially overlapping
//! summaries both survive); compaction-core keeps one live summary. They agree on the rolling
//! consolidations the engine writes, where each summary contains the previous one.

mod detect;
mod schema;
pub(crate) mod store;

pub(crate) use detect::foreign_schema;
pub use detect::{Layout, detect_layout};
pub use schema::AdkFlavor;
