//! JSON with every object's keys distinct. `serde_json` keeps the last of two equal keys
//! silently; a settings file (or a transcript line, which the cli checks with the same
//! function) that names a key twice is a typo to report, not a value to pick.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Checks that no JSON object in `bytes` (at any depth) names a key twice. The error is
/// serde_json's, so it carries the line and column just after the second occurrence, and its
/// message names the key: ``duplicate key "k" (each key may appear once per object)``.
/// Malformed JSON is reported the same way as by `serde_json::from_slice`.
///
/// ```
/// assert!(config_ssot::reject_duplicate_keys(br#"{"a": {"b": 1}, "c": 2}"#).is_ok());
/// let err = config_ssot::reject_duplicate_keys(b"{\"a\": 1,\n \"a\": 2}").unwrap_err();
/// assert_eq!(err.line(), 2);
/// assert!(err.to_string().contains("duplicate key \"a\""));
/// ```
pub fn reject_duplicate_keys(bytes: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Distinct>(bytes).map(|_| ())
}

/// A JSON value walked only to check its objects' keys.
struct Distinct;

impl<'de> Deserialize<'de> for Distinct {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DistinctVisitor)
    }
}

struct DistinctVisitor;

impl<'de> Visitor<'de> for DistinctVisitor {
    type Value = Distinct;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_str<E>(self, _: &str) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_unit<E>(self) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_none<E>(self) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Distinct, A::Error> {
        while seq.next_element::<Distinct>()?.is_some() {}
        Ok(Distinct)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Distinct, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?} (each key may appear once per object)"
                )));
            }
            map.next_value::<Distinct>()?;
        }
        Ok(Distinct)
    }
}
