//! Reading a column of a PostgreSQL row as the type this build's schema gives it. A value of
//! another type (a column altered by hand, a schema this build does not know) or an unexpected
//! NULL is [`SessionStoreError::PostgresColumn`], naming the column, its PostgreSQL type and
//! the type expected, where `Row::get` would panic. Every read of a row in this module goes
//! through [`PostgresStore::column`], the session header row's through
//! [`PostgresStore::session_row`].

use compaction_core::store_support::{OpenTurn, TurnTracker};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use crate::error::SessionStoreError;
use crate::postgres::PostgresStore;
use crate::row::{LiveRef, SessionRow};

/// What a call was doing, named only when a failure needs it.
pub(crate) type Operation<'a> = &'a (dyn Fn() -> String + Sync);

/// What a call was doing, for its error: a name already made, or a closure that makes it only
/// when a failure needs it.
pub(crate) trait Doing {
    /// The operation's name (`reading the header of session …`).
    fn describe(&self) -> String;
}

impl Doing for &str {
    fn describe(&self) -> String {
        (*self).to_owned()
    }
}

impl Doing for Operation<'_> {
    fn describe(&self) -> String {
        self()
    }
}

impl PostgresStore {
    /// Column `index` of `row` as `T`; a value `T` cannot hold is a named store error.
    pub(crate) fn column<'r, T: FromSql<'r>>(
        &self,
        row: &'r Row,
        index: usize,
        doing: impl Doing,
    ) -> Result<T, SessionStoreError> {
        read_column(&self.database, row, index, doing)
    }
}

impl PostgresStore {
    /// Reads a row selected with [`HEADER_COLUMNS`].
    pub(crate) fn session_row(
        &self,
        row: &Row,
        doing: impl Doing + Copy,
    ) -> Result<SessionRow, SessionStoreError> {
        let live_seq: Option<i64> = self.column(row, 5, doing)?;
        let live_start: Option<f64> = self.column(row, 6, doing)?;
        let live_end: Option<f64> = self.column(row, 7, doing)?;
        let live = match (live_seq, live_start, live_end) {
            (Some(seq), Some(start), Some(end)) => Some(LiveRef { seq, start, end }),
            _ => None,
        };
        Ok(SessionRow {
            pk: self.column(row, 0, doing)?,
            revision: self.column::<i64>(row, 1, doing)?.unsigned_abs(),
            tracker: TurnTracker {
                closed: self.column::<i64>(row, 2, doing)?.unsigned_abs(),
                open: OpenTurn::from_code(self.column(row, 3, doing)?),
            },
            prompt_tokens: self.column::<Option<i64>>(row, 4, doing)?.map(|t| t as u64),
            live,
        })
    }
}

/// [`PostgresStore::column`] for a store that names its database `database`.
pub(crate) fn read_column<'r, T: FromSql<'r>>(
    database: &str,
    row: &'r Row,
    index: usize,
    doing: impl Doing,
) -> Result<T, SessionStoreError> {
    row.try_get(index)
        .map_err(|source| SessionStoreError::PostgresColumn {
            database: database.to_owned(),
            operation: doing.describe(),
            column: row
                .columns()
                .get(index)
                .map_or_else(|| format!("#{index}"), |c| c.name().to_owned()),
            found: row
                .columns()
                .get(index)
                .map_or("none", |c| c.type_().name())
                .into(),
            expected: short_type_name(std::any::type_name::<T>()).into(),
            source: Box::new(source),
        })
}

/// A Rust type's name without its module paths: `Option<String>`, `i64`, `&str`.
fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or_default());
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or_default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_lose_their_module_paths() {
        assert_eq!(
            short_type_name(std::any::type_name::<Option<String>>()),
            "Option<String>"
        );
        assert_eq!(short_type_name(std::any::type_name::<i64>()), "i64");
        assert_eq!(short_type_name(std::any::type_name::<&str>()), "&str");
        assert_eq!(
            short_type_name(std::any::type_name::<Option<f64>>()),
            "Option<f64>"
        );
    }
}
