//! ADK's two time encodings and the revision derived from them.
//!
//! - `DatabaseSessionService` (SQLAlchemy `DateTime` on SQLite) stores naive UTC TEXT
//!   `YYYY-MM-DD HH:MM:SS.ffffff`; ADK's revision marker is that value to the microsecond.
//! - `SqliteSessionService` stores REAL epoch seconds and compares them as floats.
//!
//! Either way the [`Revision`](compaction_core::Revision) this crate hands out is the
//! session's `update_time` in whole microseconds since the epoch, rounded the way Python's
//! `datetime.fromtimestamp` rounds (half to even on the fractional microseconds).

use rusqlite::types::ValueRef;

/// Which ADK session service wrote the file: decides how time columns are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdkFlavor {
    /// `DatabaseSessionService` schema v1: TEXT `YYYY-MM-DD HH:MM:SS.ffffff` (UTC).
    Database,
    /// `SqliteSessionService`: REAL epoch seconds.
    Sqlite,
}

/// The expected form of a time column, for error messages.
pub(crate) fn expected_form(flavor: AdkFlavor) -> &'static str {
    match flavor {
        AdkFlavor::Database => "UTC text 'YYYY-MM-DD HH:MM:SS.ffffff' (or epoch seconds)",
        AdkFlavor::Sqlite => "REAL epoch seconds",
    }
}

use crate::adk_shape::MICROS_PER_SECOND;
pub(crate) use crate::adk_shape::{
    format_datetime_micros, parse_datetime_micros, seconds_to_micros,
};

/// Reads a time column as microseconds: TEXT as a UTC datetime, REAL/INTEGER as epoch
/// seconds (ADK's own `PreciseTimestamp` accepts both). `Err(shown value)` otherwise.
pub(crate) fn column_micros(value: ValueRef<'_>) -> Result<i64, String> {
    match value {
        ValueRef::Text(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            parse_datetime_micros(&text).ok_or_else(|| text.into_owned())
        }
        ValueRef::Real(x) => seconds_to_micros(x).ok_or_else(|| x.to_string()),
        ValueRef::Integer(i) => i
            .checked_mul(MICROS_PER_SECOND)
            .ok_or_else(|| i.to_string()),
        ValueRef::Null => Err("NULL".to_owned()),
        ValueRef::Blob(b) => Err(format!("a {}-byte BLOB", b.len())),
    }
}

/// Reads a time column as epoch seconds (for an event whose JSON has no `timestamp`).
pub(crate) fn column_seconds(value: ValueRef<'_>) -> Result<f64, String> {
    match value {
        ValueRef::Real(x) if x.is_finite() => Ok(x),
        ValueRef::Integer(i) => Ok(i as f64),
        other => column_micros(other).map(|us| us as f64 / 1e6),
    }
}
