//! Google ADK's own sessions database as a [`SessionStore`](compaction_core::SessionStore).
//!
//! An ADK app keeps its sessions in SQLite through `DatabaseSessionService`
//! (`sqlite+aiosqlite:///…`, schema v1) or `SqliteSessionService` (`adk web`'s
//! `.adk/session.db`). [`detect_layout`] tells the layouts apart (and this crate's native
//! store, and ADK's legacy v0 layout, which is refused naming `adk migrate session`);
//! [`AdkStore`](crate::AdkStore) loads sessions and appends compaction events in the exact shape ADK honours
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
//!   on append; [`AdkStore::create_session`](crate::blocking::AdkStore::create_session) writes them. `SqliteSessionService` neither
//!   writes nor needs them.
//! - **Order and time.** Events load by `timestamp`, ties broken by `id`
//!   (`DatabaseSessionService`) or insertion order (`SqliteSessionService`); the JSON
//!   `timestamp` wins over the column.
//!
//! # Cost
//! An ADK file has no gate header and no index on compactions: the gate snapshot and the live
//! tail are functions of every row's outline (content skipped unread), and only the tail's rows
//! are read whole. A read outlines only the rows appended since the session's checkpoint
//! (`outline`, by rowid; `crate::adk_outline` says what is carried and why it is exact), kept
//! in memory and in the state directory (`crate::state_dir`), so a run's cost follows the new
//! rows, not the session. The answer is kept with the session's revision
//! (`crate::tail_memo`), so the gate, the live tail and the scope warning of one evaluation
//! read once. The whole-file check runs on the interval the state directory records
//! (`crate::integrity::verify_recorded`); between checks SQLite checks every page a run touches.
//!
//! # ADK's own summaries
//! ADK's prompt builder keeps *every* non-subsumed compaction: its own sliding-window
//! compactions of turns 1–4 and 3–6 are both rendered. The live tail read here therefore holds
//! every rendered summary and the uncovered events from the earliest one's start
//! (`compaction_core::rolling_tail_positions`), and the engine's plan folds them all into one
//! summary whose range starts at the earliest start, so that afterwards ADK renders one.
//! `compaction_core::adk_prompt_context` is ADK's rendering, for `compaction inspect`.
//! [`AdkStore::scoped_user_messages`](crate::blocking::AdkStore::scoped_user_messages) finds user messages ADK's Runner filed inside a pipeline
//! scope that no `finish_task` closed.

mod detect;
mod outline;
mod read;
mod schema;
pub(crate) mod store;
mod write;

pub(crate) use detect::foreign_schema;
pub use detect::{Layout, detect_layout};
pub use schema::AdkFlavor;
