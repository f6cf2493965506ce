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

mod detect;
mod schema;
mod store;

pub(crate) use detect::foreign_schema;
pub use detect::{Layout, detect_layout};
pub use schema::AdkFlavor;
pub use store::AdkStore;
