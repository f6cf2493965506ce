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
