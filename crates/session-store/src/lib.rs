//! A durable SQLite event log for chat sessions that makes the post-turn path O(1).
//!
//! [`SqliteStore`] keeps sessions (app, user, id, state, revision) and their events (the whole
//! ADK event as JSON plus the indexed columns the queries need) in one SQLite file, and
//! implements compaction-core's [`SessionStore`](compaction_core::SessionStore) port:
//!
//! - **append** ([`blocking::SqliteStore::append_event`]): one immediate transaction per event, with
//!   optimistic concurrency: the caller names the revision it read and gets
//!   [`SessionStoreError::Stale`] when another writer (thread or process) moved the session
//!   on. Revisions count appends: gap-free, +1 each.
//! - **the envelope gate's header** ([`blocking::SqliteStore::header`]): completed turns since the live
//!   compaction and the latest coordinator prompt token count (spec 7.1: unscoped events only),
//!   kept current on every append so that the fast exit reads one row. It always equals
//!   `compaction_core::gate_input` of the whole history (the `header` module says how).
//! - **the next prompt's context** ([`blocking::SqliteStore::load_context`]): the live compaction plus the
//!   events around its range, found through indexes, so its cost does not grow with the
//!   session. It always equals `compaction_core::assemble_context` of the whole history.
//!
//! A second implementation of the port, [`AdkStore`] (module [`adk`]), operates directly on a
//! Google ADK sessions database; [`detect_layout`] tells which kind a file is. The native
//! store refuses to open an ADK file ([`SessionStoreError::ForeignDatabase`]).
//!
//! With the cargo feature `postgres`, [`PostgresStore`]
//! (module [`postgres`]) implements the same port with the same design on a
//! PostgreSQL database shared by several service replicas, and
//! [`AdkPostgresStore`] operates on Google ADK's own
//! `DatabaseSessionService` tables on PostgreSQL ([`detect_postgres_layout`]
//! tells them apart).
//!
//! # Rewinds
//! A rewind event can drop (or bring back) any part of the history. Every event row carries an
//! `in_view` flag (kept by `apply_rewinds` and unscoped) and every compaction a `subsumed` flag.
//! Appending an ordinary event only appends to the view, so the flags and the header are
//! updated incrementally; appending a rewind recomputes flags and header from the whole history
//! with compaction-core's own functions, in the same transaction. Rewinds are rare user edits,
//! so only they pay a cost proportional to the session; every read stays indexed.
//!
//! # Durability
//! The journal is WAL with `synchronous = NORMAL` by default ([`Durability::Normal`]). Every
//! acknowledged append survives a process crash (the tests SIGKILL a writer mid-append and find
//! every acknowledged event, with `PRAGMA integrity_check` clean); an OS crash or power loss may
//! roll back the appends since the last WAL checkpoint but never corrupts the file.
//! [`Durability::Full`] (`synchronous = FULL`) fsyncs the WAL on every commit, so acknowledged
//! appends also survive a power loss, at the price of one fsync per append (about 10x slower
//! here; see docs/BENCHMARKS.md). Foreign keys are on; a busy timeout (default 5 s) makes
//! concurrent writers queue instead of failing.
//!
//! # Damage and reading
//! A writing open runs SQLite's `PRAGMA quick_check` before anything is written
//! ([`OpenOptions::integrity`], default [`IntegrityCheck::Quick`]): a damaged file is refused
//! with [`SessionStoreError::Damaged`] naming it, untouched. [`check_integrity`] runs the full
//! `integrity_check`. [`SqliteStore::open_read_only`] and [`AdkStore::open_read_only`] are for
//! reading commands: they never create, migrate or switch the journal of a file, refuse every
//! write, and leave no `-wal`/`-shm` files behind.
//!
//! # Schema
//! Created and migrated by the crate (`PRAGMA user_version`, see [`SCHEMA_VERSION`]). A file
//! from a newer schema is refused with [`SessionStoreError::FutureSchema`] before anything is
//! written to it.
//!
//! # Features
//! - `sqlite` (default): [`SqliteStore`], [`AdkStore`], [`blocking`], [`check_integrity`]
//!   (rusqlite with bundled SQLite).
//! - `postgres`: `PostgresStore`, `AdkPostgresStore`. With `default-features = false, features = ["postgres"]` no
//!   SQLite is linked (a host using sqlx's SQLite can depend on the crate).
//!
//! # What this crate must never do
//! It never loses or half-writes an acknowledged event, never rewrites a file it does not
//! understand, never panics on bad input (a corrupt file, a locked database or an undecodable
//! event is a typed [`SessionStoreError`] naming the file and the session/event), never runs
//! SQLite on an async runtime thread, and never decides anything about compaction: the rules
//! live in compaction-core, which this crate only mirrors in its indexes.
//!
//! # Example
//! ```
//! use compaction_core::testing::EventFactory;
//! use compaction_core::{Revision, SessionKey, assemble_context, gate_input};
//! use session_store::blocking::SqliteStore;
//!
//! let dir = tempfile::tempdir()?;
//! let store = SqliteStore::open(dir.path().join("sessions.db"))?;
//! let key = SessionKey::new("zocrates", "u1", "s1");
//! store.create_session(&key, Default::default())?;
//!
//! let mut f = EventFactory::new();
//! let mut revision = Revision(0);
//! for event in f.conversational_turn("inv1", "What is SEI growth?", "A passivation layer.") {
//!     revision = store.append_event(&key, revision, &event)?;
//! }
//! // A writer that read an older revision is refused.
//! let late = f.user("inv2", "stale write");
//! assert!(store.append_event(&key, Revision(1), &late).is_err());
//!
//! let header = store.header(&key)?;
//! let session = store.get_session(&key)?;
//! assert_eq!(header.revision, Revision(2));
//! assert_eq!(header.gate, gate_input(&session.events));
//! assert_eq!(store.load_context(&key)?, assemble_context(&session.events));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, unreachable_pub)]
// With neither backend the crate is its error type and the shared row: nothing uses the
// helpers the backends share.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

#[cfg(feature = "sqlite")]
pub mod adk;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod adk_append;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod adk_outline;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod adk_shape;
#[cfg(feature = "sqlite")]
mod append;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod append_plan;
#[cfg(feature = "sqlite")]
mod context;
#[cfg(feature = "sqlite")]
mod decisions;
mod error;
mod header;
#[cfg(feature = "sqlite")]
mod integrity;
#[cfg(feature = "sqlite")]
mod open_turns;
#[cfg(feature = "sqlite")]
mod options;
#[cfg(feature = "sqlite")]
mod port;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
mod recall;
#[cfg(feature = "sqlite")]
mod recall_index;
mod row;
#[cfg(feature = "sqlite")]
mod schema;
#[cfg(feature = "sqlite")]
mod stamp;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod state_dir;
#[cfg(feature = "sqlite")]
mod store;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod tail_memo;

#[cfg(feature = "sqlite")]
pub use adk::{AdkFlavor, Layout, detect_layout};
pub use error::SessionStoreError;
#[cfg(feature = "sqlite")]
pub use integrity::{IntegrityCheck, MAX_REPORTED, check_integrity};
#[cfg(feature = "sqlite")]
pub use options::{Durability, OpenOptions};
#[cfg(feature = "sqlite")]
pub use port::{AdkStore, SqliteStore};
#[cfg(feature = "postgres")]
pub use postgres::{
    AdkPostgresStore, PostgresAccess, PostgresLayout, PostgresOptions, PostgresStore,
    detect_postgres_layout,
};
pub use row::SessionHeader;
#[cfg(feature = "sqlite")]
pub use schema::SCHEMA_VERSION;

/// The synchronous stores, for code that is not on an async runtime (tools, tests, the
/// blocking pool itself). Their calls block on SQLite: never call them from an async task;
/// use the async [`crate::SqliteStore`] / [`crate::AdkStore`] (compaction-core's
/// `SessionStore` port) there, which run these same calls on tokio's blocking pool.
#[cfg(feature = "sqlite")]
pub mod blocking {
    pub use crate::adk::store::AdkStore;
    pub use crate::store::SqliteStore;
}
