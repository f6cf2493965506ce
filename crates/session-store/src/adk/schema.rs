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

const MICROS_PER_SECOND: i64 = 1_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// Epoch seconds to whole microseconds, as `datetime.fromtimestamp` rounds them
/// (truncate to the second, then round the fraction half to even). `None` when not finite or
/// out of range.
pub(crate) fn seconds_to_micros(seconds: f64) -> Option<i64> {
    if !seconds.is_finite() || seconds.abs() > 1e13 {
        return None;
    }
    let whole = seconds.trunc();
    let frac = ((seconds - whole) * 1e6).round_ties_even();
    // `whole` is within ±1e13, so the casts are exact.
    Some(whole as i64 * MICROS_PER_SECOND + frac as i64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn number(s: &str, min: i64, max: i64) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = s.parse().ok()?;
    (min..=max).contains(&n).then_some(n)
}

/// Parses SQLAlchemy's SQLite `DateTime` text (`YYYY-MM-DD HH:MM:SS[.ffffff]`, also with a `T`)
/// as UTC, to microseconds since the epoch.
pub(crate) fn parse_datetime_micros(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = text.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-');
    let year = number(d.next()?, 1, 9999)?;
    let month = number(d.next()?, 1, 12)?;
    let day = number(d.next()?, 1, 31)?;
    let (hms, frac) = match time.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (time, None),
    };
    let mut t = hms.splitn(3, ':');
    let hour = number(t.next()?, 0, 23)?;
    let minute = number(t.next()?, 0, 59)?;
    let second = number(t.next()?, 0, 59)?;
    let micros = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 6 => {
            number(f, 0, 999_999)? * 10_i64.pow(6 - f.len() as u32)
        }
        Some(_) => return None,
    };
    let days = days_from_civil(year, month, day);
    Some((days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND + micros)
}

/// Formats microseconds since the epoch the way SQLAlchemy stores a naive UTC `DateTime` on
/// SQLite: `YYYY-MM-DD HH:MM:SS.ffffff`.
pub(crate) fn format_datetime_micros(micros: i64) -> String {
    let secs = micros.div_euclid(MICROS_PER_SECOND);
    let frac = micros.rem_euclid(MICROS_PER_SECOND);
    let days = secs.div_euclid(SECONDS_PER_DAY);
    let sod = secs.rem_euclid(SECONDS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{frac:06}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_sqlalchemy_text() {
        // 2026-12-02 18:31:43.753972 UTC, as ADK 2.13 wrote it.
        let micros = parse_datetime_micros("2026-12-02 18:31:43.753972").unwrap();
        assert_eq!(micros, 1_796_236_303_753_972);
        assert_eq!(format_datetime_micros(micros), "2026-12-02 18:31:43.753972");
        assert_eq!(
            parse_datetime_micros("2026-12-02T18:31:43"),
            Some(1_796_236_303_000_000)
        );
        assert_eq!(
            parse_datetime_micros("2026-12-02 18:31:43.5"),
            Some(1_796_236_303_500_000)
        );
        assert_eq!(format_datetime_micros(0), "1970-01-01 00:00:00.000000");
        for bad in [
            "",
            "yesterday",
            "2026-13-01 00:00:00",
            "2026-01-01 00:00:00.1234567",
            "2026-01-01",
        ] {
            assert_eq!(parse_datetime_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn rounds_like_python_fromtimestamp() {
        assert_eq!(
            seconds_to_micros(1_796_236_303.753_972),
            Some(1_796_236_303_753_972)
        );
        assert_eq!(seconds_to_micros(0.000_000_5), Some(0));
        assert_eq!(seconds_to_micros(0.000_001_5), Some(2));
        assert_eq!(seconds_to_micros(f64::NAN), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn text_round_trips(micros in 0_i64..253_402_300_799_999_999) {
            proptest::prop_assert_eq!(parse_datetime_micros(&format_datetime_micros(micros)), Some(micros));
        }
    }
}
