//! Event time: ADK's epoch seconds as `f64`, made totally ordered.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Seconds since the Unix epoch, as Google ADK stores an event's `timestamp`.
///
/// The value is always finite, so timestamps order totally and can be used as keys.
/// Construct one with [`Timestamp::new`]; deserialization rejects NaN and infinities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timestamp(f64);

/// A timestamp was not a finite number.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("timestamp must be finite epoch seconds, got {0}")]
pub struct InvalidTimestamp(pub f64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0.0);

    /// Wraps epoch seconds, refusing NaN and infinities.
    pub fn new(seconds: f64) -> Result<Self, InvalidTimestamp> {
        if seconds.is_finite() {
            // Normalise -0.0 so that equality and ordering agree.
            Ok(Timestamp(seconds + 0.0))
        } else {
            Err(InvalidTimestamp(seconds))
        }
    }

    /// The epoch seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }
}

impl Eq for Timestamp {}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::hash::Hash for Timestamp {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl Timestamp {
    /// The timestamp as UTC, ISO 8601 with milliseconds (`2026-12-02T21:48:45.833Z`); out of
    /// the calendar's range (before 1970 or after 9999), the epoch seconds as stored.
    pub fn to_utc_string(self) -> String {
        let millis = (self.0 * 1000.0).round();
        if !(0.0..=253_402_300_799_999.0).contains(&millis) {
            return self.to_string();
        }
        let millis = millis as i64;
        let (days, ms_of_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
        let (year, month, day) = civil_from_days(days);
        let (h, m, s, ms) = (
            ms_of_day / 3_600_000,
            ms_of_day / 60_000 % 60,
            ms_of_day / 1000 % 60,
            ms_of_day % 1000,
        );
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day): Howard Hinnant's
/// `civil_from_days`, the one copy in the workspace.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl TryFrom<f64> for Timestamp {
    type Error = InvalidTimestamp;
    fn try_from(seconds: f64) -> Result<Self, Self::Error> {
        Timestamp::new(seconds)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Timestamp::new(seconds).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_strings_follow_the_calendar_and_fall_back_to_seconds_out_of_range() {
        let utc = |s: f64| Timestamp::new(s).expect("valid").to_utc_string();
        assert_eq!(utc(1_764_712_125.833), "2025-12-02T21:48:45.833Z");
        assert_eq!(utc(951_782_400.0), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(-1.5), "-1.5");
    }

    #[test]
    fn rejects_nan_and_infinity() {
        assert!(Timestamp::new(f64::NAN).is_err());
        assert!(Timestamp::new(f64::INFINITY).is_err());
        assert!(serde_json::from_str::<Timestamp>("1e400").is_err());
    }

    #[test]
    fn orders_totally_and_normalises_negative_zero() {
        let a = Timestamp::new(-0.0).unwrap();
        let b = Timestamp::new(0.0).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.cmp(&b), Ordering::Equal);
        assert!(Timestamp::new(1.5).unwrap() > b);
    }
}
