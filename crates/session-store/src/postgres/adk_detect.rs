//! What a PostgreSQL database holds (the native store, Google ADK's `DatabaseSessionService`
//! tables, or neither), found without writing, and [`open_existing_postgres`], which detects
//! and opens an existing database over one pool, classifying it once.

use deadpool_postgres::Object;

use crate::error::SessionStoreError;
use crate::postgres::adk::AdkPostgresStore;
use crate::postgres::{PostgresAccess, PostgresOptions, PostgresStore};

type Operation<'a> = &'a (dyn Fn() -> String + Sync);

/// What a PostgreSQL database holds, as [`detect_postgres_layout`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostgresLayout {
    /// Neither this crate's store nor ADK's tables: a native store may be created.
    Empty,
    /// This crate's native store ([`PostgresStore`]) in its schema.
    Native,
    /// Google ADK's `DatabaseSessionService` schema v1 ([`AdkPostgresStore`]).
    AdkDatabase,
}

impl PostgresLayout {
    /// A short human name, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            PostgresLayout::Empty => "no session store",
            PostgresLayout::Native => "native adaptive-compaction session store",
            PostgresLayout::AdkDatabase => {
                "Google ADK DatabaseSessionService database (schema v1) on PostgreSQL"
            }
        }
    }
}

/// Detects, without writing (every transaction is read-only), what the database at `url`
/// holds: the native store in `native_schema` (it wins when both are there), ADK's tables in
/// `adk_schema` (ADK itself uses [`ADK_DEFAULT_SCHEMA`](crate::postgres::ADK_DEFAULT_SCHEMA)), or neither. ADK's legacy v0 layout
/// is [`SessionStoreError::AdkLegacySchema`] (ADK's `adk migrate session` converts it); ADK
/// tables of another version or shape are [`SessionStoreError::NotAdkDatabase`].
pub async fn detect_postgres_layout(
    url: &str,
    native_schema: &str,
    adk_schema: &str,
) -> Result<PostgresLayout, SessionStoreError> {
    let probe = PostgresStore::pool(
        url,
        &PostgresOptions::default()
            .schema(adk_schema)
            .access(PostgresAccess::ReadOnly)
            .max_connections(1),
    )?;
    let op = || "detecting the layout of the database".to_owned();
    let client = probe.client(&op).await?;
    let result = classify(&probe, &client, Some(native_schema), adk_schema).await;
    probe.release(client, &result);
    result
}

/// `(table, column, data type)` of ADK's tables in one schema.
struct AdkColumns(Vec<(String, String, String)>);

impl AdkColumns {
    /// The columns of ADK's tables in `adk_schema`.
    async fn read(
        probe: &PostgresStore,
        client: &Object,
        adk_schema: &str,
        op: Operation<'_>,
    ) -> Result<Self, SessionStoreError> {
        client
            .query(
                "SELECT table_name::text, column_name::text, data_type::text \
                 FROM information_schema.columns WHERE table_schema = $1 \
                 AND table_name IN ('adk_internal_metadata', 'sessions', 'events')",
                &[&adk_schema],
            )
            .await
            .map_err(probe.pg(op))?
            .iter()
            .map(|r| {
                let text = |i| probe.column::<String>(r, i, op);
                Ok((text(0)?, text(1)?, text(2)?))
            })
            .collect::<Result<_, _>>()
            .map(AdkColumns)
    }

    /// The data type of `table.name`, when there is such a column.
    fn column(&self, table: &str, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(t, c, _)| t == table && c == name)
            .map(|(_, _, ty)| ty.as_str())
    }

    fn has_table(&self, table: &str) -> bool {
        self.0.iter().any(|(t, _, _)| t == table)
    }

    /// What a schema without `adk_internal_metadata` is: empty, ADK's legacy v0 layout, or
    /// tables of the same names that are not ADK's.
    fn without_metadata(
        &self,
        probe: &PostgresStore,
        adk_schema: &str,
    ) -> Result<PostgresLayout, SessionStoreError> {
        if !(self.has_table("sessions") && self.has_table("events")) {
            return Ok(PostgresLayout::Empty);
        }
        if self.column("events", "actions").is_some()
            && self.column("events", "event_data").is_none()
        {
            return Err(SessionStoreError::AdkLegacySchema { path: probe.path() });
        }
        Err(not_adk(
            probe,
            format!(
                "schema {adk_schema} holds tables sessions and events but no adk_internal_metadata"
            ),
        ))
    }

    /// Refuses columns whose types are not those ADK's `DatabaseSessionService` creates on
    /// PostgreSQL (the ones this store reads and writes as such).
    fn check_types(&self, probe: &PostgresStore) -> Result<(), SessionStoreError> {
        for (table, name, wanted) in [
            ("sessions", "update_time", "timestamp without time zone"),
            ("sessions", "state", "jsonb"),
            ("events", "timestamp", "timestamp without time zone"),
            ("events", "event_data", "jsonb"),
        ] {
            match self.column(table, name) {
                Some(ty) if ty == wanted => {}
                found => {
                    return Err(not_adk(
                        probe,
                        format!(
                            "{table}.{name} is {}, expected {wanted} as ADK's \
                             DatabaseSessionService creates it on PostgreSQL",
                            found.unwrap_or("missing")
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn not_adk(probe: &PostgresStore, detail: String) -> SessionStoreError {
    SessionStoreError::NotAdkDatabase {
        path: probe.path(),
        detail,
    }
}

/// True when `native_schema` holds this crate's native store.
async fn holds_native(
    probe: &PostgresStore,
    client: &Object,
    native_schema: &str,
    op: Operation<'_>,
) -> Result<bool, SessionStoreError> {
    let native = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
             WHERE table_schema = $1 AND table_name = 'schema_version')",
            &[&native_schema],
        )
        .await
        .map_err(probe.pg(op))?;
    probe.column(&native, 0, op)
}

/// Refuses an `adk_internal_metadata` that does not say schema version 1.
async fn check_version(
    probe: &PostgresStore,
    client: &Object,
    op: Operation<'_>,
) -> Result<(), SessionStoreError> {
    let version: Option<String> = client
        .query_opt(
            "SELECT value::text FROM adk_internal_metadata WHERE key = 'schema_version'",
            &[],
        )
        .await
        .map_err(probe.pg(op))?
        .map(|r| probe.column(&r, 0, op))
        .transpose()?;
    match version.as_deref() {
        Some("1") => Ok(()),
        Some("0") => Err(SessionStoreError::AdkLegacySchema { path: probe.path() }),
        other => Err(not_adk(
            probe,
            format!(
                "adk_internal_metadata says schema_version {other:?}; this build reads version 1"
            ),
        )),
    }
}

/// Classifies the database: the native store in `native_schema` (when given) first, then ADK's
/// tables in `adk_schema`.
pub(crate) async fn classify(
    probe: &PostgresStore,
    client: &Object,
    native_schema: Option<&str>,
    adk_schema: &str,
) -> Result<PostgresLayout, SessionStoreError> {
    let op = || "detecting the layout of the database".to_owned();
    let op: Operation<'_> = &op;
    if let Some(native_schema) = native_schema
        && holds_native(probe, client, native_schema, op).await?
    {
        return Ok(PostgresLayout::Native);
    }
    let columns = AdkColumns::read(probe, client, adk_schema, op).await?;
    if !columns.has_table("adk_internal_metadata") {
        return columns.without_metadata(probe, adk_schema);
    }
    check_version(probe, client, op).await?;
    columns.check_types(probe)?;
    Ok(PostgresLayout::AdkDatabase)
}

/// An existing PostgreSQL session database, opened as what it holds.
#[derive(Debug)]
#[non_exhaustive]
pub enum ExistingPostgres {
    /// This crate's native store.
    Native(PostgresStore),
    /// Google ADK's `DatabaseSessionService` tables.
    Adk(AdkPostgresStore),
}

/// Opens the existing session database at `url`: ADK's tables in `adk_schema` (ADK itself uses
/// [`ADK_DEFAULT_SCHEMA`](crate::postgres::ADK_DEFAULT_SCHEMA)) over the pool that detected them (the layout is classified once, on
/// the connection the store then uses), or the native store with `native` (its schema wins
/// when both are there; `native.access` also applies to ADK's tables). A database with
/// neither is [`SessionStoreError::PostgresNoStore`], naming the tables looked for; nothing is
/// written or created.
pub async fn open_existing_postgres(
    url: &str,
    native: PostgresOptions,
    adk_schema: &str,
) -> Result<ExistingPostgres, SessionStoreError> {
    let adk = native.clone().schema(adk_schema);
    let pool = PostgresStore::pool(url, &adk)?;
    let op = || "detecting the layout of the database".to_owned();
    let client = pool.client(&op).await?;
    let result = classify(&pool, &client, Some(&native.schema), adk_schema).await;
    pool.release(client, &result);
    match result? {
        PostgresLayout::AdkDatabase => Ok(ExistingPostgres::Adk(AdkPostgresStore::over(pool))),
        PostgresLayout::Native => {
            let access = match native.access {
                PostgresAccess::Create => PostgresAccess::Existing,
                access => access,
            };
            PostgresStore::connect_with(url, native.access(access))
                .await
                .map(ExistingPostgres::Native)
        }
        PostgresLayout::Empty => Err(SessionStoreError::PostgresNoStore {
            database: PostgresStore::pool(url, &native)?.database().to_owned(),
            detail: format!(
                "no session store in this database: looked for the native store (table \
                 {native}.schema_version) and for Google ADK's DatabaseSessionService tables \
                 ({adk_schema}.adk_internal_metadata, {adk_schema}.sessions, \
                 {adk_schema}.events); `compaction replay --db` or `compaction serve --db` \
                 creates a native store",
                native = native.schema
            ),
        }),
    }
}
