//! The PostgreSQL schema and its migrations (table `schema_version`).
//!
//! Migration `n` (1-based) takes a database from version `n - 1` to `n`. All of them run in one
//! transaction that first takes a transaction-scoped advisory lock named after the schema, so
//! that replicas starting at once migrate exactly once. A database at a version above
//! [`POSTGRES_SCHEMA_VERSION`] was written by a newer build: it is refused before anything is
//! written to it.

use crate::error::SessionStoreError;
use crate::postgres::column::Operation;
use crate::postgres::{PostgresAccess, PostgresStore};

/// Every migration, oldest first. Never edit a released entry; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions with their gate header, events with the indexed columns the queries need,
    // and the shadow decisions (the same design as the SQLite store's migrations 1-3).
    r#"
    CREATE TABLE sessions (
        pk             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        app_name       TEXT    NOT NULL,
        user_id        TEXT    NOT NULL,
        session_id     TEXT    NOT NULL,
        state          TEXT    NOT NULL,            -- JSON object (text: keys keep their order)
        revision       BIGINT  NOT NULL,            -- = number of events appended
        created_at     DOUBLE PRECISION NOT NULL,   -- epoch seconds
        updated_at     DOUBLE PRECISION NOT NULL,   -- epoch seconds
        -- The gate header: completed turns since the live compaction are
        -- closed_turns + (open_turn = 2), compaction-core's TurnTracker.
        closed_turns   BIGINT  NOT NULL DEFAULT 0,
        open_turn      BIGINT  NOT NULL DEFAULT 0,  -- 0 none, 1 open, 2 open and completed
        prompt_tokens  BIGINT,                      -- latest coordinator prompt token count
        live_seq       BIGINT,                      -- seq of the live compaction event
        live_start     DOUBLE PRECISION,
        live_end       DOUBLE PRECISION,
        UNIQUE (app_name, user_id, session_id)
    );

    CREATE TABLE events (
        session_pk     BIGINT  NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        seq            BIGINT  NOT NULL,            -- 1-based append order = revision after it
        event_id       TEXT    NOT NULL,
        invocation_id  TEXT    NOT NULL,
        ts             DOUBLE PRECISION NOT NULL,
        scope          TEXT,                        -- isolation_scope; NULL for the coordinator
        is_compaction  BOOLEAN NOT NULL,
        comp_start     DOUBLE PRECISION,
        comp_end       DOUBLE PRECISION,
        is_rewind      BOOLEAN NOT NULL,
        in_view        BOOLEAN NOT NULL,            -- in the coordinator view (rewinds applied, unscoped)
        subsumed       BOOLEAN NOT NULL DEFAULT FALSE,
        body           TEXT    NOT NULL,            -- the whole event as JSON text
        PRIMARY KEY (session_pk, seq),
        UNIQUE (session_pk, event_id)
    );

    -- The context, the live tail and the timestamp rule: coordinator events by time.
    CREATE INDEX events_view_ts ON events (session_pk, ts)
        WHERE in_view AND NOT is_compaction;

    -- Subsumption, the live compaction and the compaction history.
    CREATE INDEX events_view_compactions ON events (session_pk, comp_end, seq)
        WHERE in_view AND is_compaction;

    CREATE TABLE decisions (
        session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        seq        BIGINT NOT NULL,                 -- 1-based, in recording order
        body       TEXT   NOT NULL,
        PRIMARY KEY (session_pk, seq)
    );
    "#,
    // 2: lossless recall's index (module `recall`): each searchable event's words as a
    // `tsvector` with a GIN index, and each event's turn-start flag; built for the stored events
    // in the same transaction (`recall::backfill`).
    crate::postgres::recall::MIGRATION,
];

/// The schema version this build writes.
pub const POSTGRES_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Checks that the store is there, writing nothing: its `schema_version` table exists and
/// holds a version this build reads (for [`PostgresAccess::ReadOnly`], exactly this build's).
pub(crate) async fn require_store(
    store: &PostgresStore,
    schema: &str,
    access: PostgresAccess,
) -> Result<(), SessionStoreError> {
    let op = || "checking the store's schema".to_owned();
    let client = store.client(&op).await?;
    let result = async {
        let table = format!("{schema}.schema_version");
        let exists = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await
            .map_err(store.pg(&op))?;
        let found: i64 = if store.column(&exists, 0, &op as Operation<'_>)? {
            client
                .query_opt(&format!("SELECT version FROM {table}"), &[])
                .await
                .map_err(store.pg(&op))?
                .map_or(Ok(0), |row| store.column(&row, 0, &op as Operation<'_>))?
        } else {
            0
        };
        let creates = "`compaction replay --db` or `compaction serve --db` creates one";
        if found == 0 {
            return Err(SessionStoreError::PostgresNoStore {
                database: store.database.clone(),
                detail: format!(
                    "no session store in this database: looked for the native store's tables \
                     ({schema}.schema_version, {schema}.sessions, {schema}.events) and Google ADK's \
                     DatabaseSessionService tables (sessions, events, app_states, user_states) \
                     and found neither; {creates}"
                ),
            });
        }
        if found > POSTGRES_SCHEMA_VERSION {
            return Err(SessionStoreError::FutureSchema {
                path: store.path(),
                found,
                supported: POSTGRES_SCHEMA_VERSION,
            });
        }
        if found < POSTGRES_SCHEMA_VERSION && access == PostgresAccess::ReadOnly {
            return Err(SessionStoreError::PostgresNoStore {
                database: store.database.clone(),
                detail: format!(
                    "the session store is at schema version {found}, this build reads {POSTGRES_SCHEMA_VERSION}; a read-only command does not migrate it (`compaction evaluate` or `compaction serve` does)"
                ),
            });
        }
        Ok(())
    }
    .await;
    store.release(client, &result);
    result
}

/// Creates the schema if needed and brings it to [`POSTGRES_SCHEMA_VERSION`]; returns how many
/// migrations were applied. `schema` was validated as a plain identifier.
pub(crate) async fn migrate(
    store: &PostgresStore,
    schema: &str,
) -> Result<usize, SessionStoreError> {
    let op = || "migrating the schema".to_owned();
    let mut client = store.client(&op).await?;
    let result = migrate_on(store, &mut client, schema, &op).await;
    store.release(client, &result);
    result
}

async fn migrate_on(
    store: &PostgresStore,
    client: &mut deadpool_postgres::Object,
    schema: &str,
    op: &(dyn Fn() -> String + Sync),
) -> Result<usize, SessionStoreError> {
    let tx = client.transaction().await.map_err(store.pg(op))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("compaction session store schema {schema}")],
    )
    .await
    .map_err(store.pg(op))?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema}; \
         CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);"
    ))
    .await
    .map_err(store.pg(op))?;
    let found: i64 = tx
        .query_opt("SELECT version FROM schema_version", &[])
        .await
        .map_err(store.pg(op))?
        .map_or(Ok(0), |row| store.column(&row, 0, op))?;
    if found > POSTGRES_SCHEMA_VERSION {
        return Err(SessionStoreError::FutureSchema {
            path: store.path(),
            found,
            supported: POSTGRES_SCHEMA_VERSION,
        });
    }
    let start = usize::try_from(found).unwrap_or(0);
    for sql in &MIGRATIONS[start..] {
        tx.batch_execute(sql).await.map_err(store.pg(op))?;
    }
    if found > 0 && found < crate::postgres::recall::RECALL_VERSION {
        crate::postgres::recall::backfill(store, &tx, op).await?;
    }
    if start < MIGRATIONS.len() {
        tx.execute("DELETE FROM schema_version", &[])
            .await
            .map_err(store.pg(op))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&POSTGRES_SCHEMA_VERSION],
        )
        .await
        .map_err(store.pg(op))?;
    }
    tx.commit().await.map_err(store.pg(op))?;
    Ok(MIGRATIONS.len() - start)
}
