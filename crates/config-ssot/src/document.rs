//! The file's content, with no I/O: parsing bytes into a [`ConfigFile`], backfilling missing
//! keys, checking types key by key, merging edited settings back without disturbing other keys,
//! and rendering the bytes written to disk.
//!
//! The expected type of each key is read off `Settings::default()` serialized to JSON, so the
//! settings rules stay in compaction-core, stated once.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use compaction_core::{EXTENSION_KEYS, KEYS};
use compaction_core::{EffectiveSettings, Settings};
use serde_json::{Map, Value};

use crate::ConfigError;

/// The JSON form a spec key must have, derived from its default value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Float,
    Str,
}

impl Kind {
    fn of_default(value: &Value) -> Kind {
        match value {
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_f64() => Kind::Float,
            Value::Number(_) => Kind::Int,
            _ => Kind::Str,
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Kind::Bool => "a boolean (true or false)",
            Kind::Int => "an integer",
            Kind::Float => "a number",
            Kind::Str => "a string",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match self {
            Kind::Bool => value.is_boolean(),
            Kind::Int => whole_number(value).is_some(),
            Kind::Float => value.is_number(),
            Kind::Str => value.is_string(),
        }
    }

    /// Whether two values of this kind mean the same setting (so `1` and `1.0` are the same τ,
    /// and `4` and `4.0` the same min_turns).
    fn same(self, a: &Value, b: &Value) -> bool {
        match self {
            Kind::Float => a.as_f64().is_some() && a.as_f64() == b.as_f64(),
            Kind::Int => whole_number(a).is_some() && whole_number(a) == whole_number(b),
            _ => a == b,
        }
    }

    /// Parses text a person typed, e.g. `compaction config set KEY VALUE`.
    fn parse_text(self, text: &str) -> Option<Value> {
        match self {
            Kind::Bool => match text.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            Kind::Int => text.trim().parse::<i64>().ok().map(Value::from),
            Kind::Float => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            Kind::Str => Some(Value::String(text.to_owned())),
        }
    }
}

/// An integer setting's value: an integer, or a float with no fractional part (Python's
/// `json.dump` writes `4.0` for a float 4, and the spec reads it with `int(...)`), within i64.
fn whole_number(value: &Value) -> Option<i64> {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53: every whole f64 below is exact
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= LIMIT)
            .map(|f| f as i64)
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(n) if n.is_u64() && n.as_i64().is_none() => "an integer beyond 2^63",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Renders a value for an error message, shortened to a readable length.
fn shown(value: &Value) -> String {
    const MAX: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        text
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}... ({} bytes)", text.len())
    }
}

/// The spec keys with their default JSON values, in the spec's order.
fn defaults() -> Map<String, Value> {
    DEFAULTS.clone()
}

static DEFAULTS: LazyLock<Map<String, Value>> = LazyLock::new(|| {
    // `Settings` is a plain struct of bools, finite numbers and strings: it always serializes
    // to an object (compaction-core's `defaults_match_the_spec` test pins the key order).
    match serde_json::to_value(Settings::default()) {
        Ok(Value::Object(map)) => map,
        other => unreachable!("Settings::default() serialized to {other:?}"),
    }
});

fn kind_of(key: &str) -> Option<(&'static str, Kind)> {
    let key = KEYS.iter().find(|k| **k == key)?;
    DEFAULTS.get(*key).map(|v| (*key, Kind::of_default(v)))
}

/// A content hash of the bytes on disk, used by the watcher to notice changes.
pub(crate) fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Where a [`ConfigFile`]'s values came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// Read from disk as it was (no write).
    Read,
    /// Read from disk; missing keys were backfilled and written.
    Backfilled,
    /// Read from disk by [`crate::ConfigStore::read`]; missing keys took their defaults in
    /// memory only (a read never writes).
    ReadWithDefaults,
    /// The file did not exist and was created with the defaults.
    Created,
    /// Written by an update.
    Updated,
    /// Not from disk this time: the last good settings, kept because the file is bad.
    LastGood,
    /// Not from disk: the spec's defaults, because the file is bad and nothing was good before.
    Defaults,
}

/// The settings file's whole content, validated: the spec's eight settings plus every other
/// key the file holds (adapter endpoints, keys the desktop app writes), in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    path: PathBuf,
    map: Map<String, Value>,
    settings: Settings,
    effective: EffectiveSettings,
    backfilled: Vec<&'static str>,
    origin: Origin,
    content_hash: u64,
}

impl ConfigFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The spec's settings as written in the file (after backfill).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The validated settings the engine runs on (min_turns clamp applied; a clamp warning,
    /// if any, is in [`EffectiveSettings::clamp_warning`] for the caller to log).
    pub fn effective(&self) -> &EffectiveSettings {
        &self.effective
    }

    /// The whole JSON object in file order, spec keys and others alike: what adapter
    /// factories read their endpoint keys (`decision_adapter`, `summarizer_base_url`, ...) from.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.map
    }

    /// The keys that are not spec settings, in file order.
    pub fn extra(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.map
            .iter()
            .filter(|(k, _)| !KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// Extra keys that look like a misspelled spec setting (they share its
    /// `adaptive_compaction_` / `compaction_` / `enable_` prefix but are none of the eight),
    /// each with the spec key it most resembles. The file is still valid — the desktop app may
    /// keep keys of its own — but the setting the user meant is at its default, which a caller
    /// should say.
    pub fn unknown_setting_keys(&self) -> Vec<(&str, &'static str)> {
        const PREFIXES: [&str; 3] = ["adaptive_compaction_", "compaction_", "enable_adaptive"];
        self.extra()
            .map(|(key, _)| key)
            .filter(|key| PREFIXES.iter().any(|p| key.starts_with(p)))
            .filter(|key| !EXTENSION_KEYS.contains(key))
            .map(|key| {
                let closest = KEYS
                    .iter()
                    .copied()
                    .min_by_key(|spec| edit_distance(key, spec))
                    .unwrap_or(KEYS[0]);
                (key, closest)
            })
            .collect()
    }

    /// One non-spec key's value.
    pub fn get_extra(&self, key: &str) -> Option<&Value> {
        if KEYS.contains(&key) {
            None
        } else {
            self.map.get(key)
        }
    }

    /// The spec keys that were missing and were backfilled with defaults by this load.
    pub fn backfilled(&self) -> &[&'static str] {
        &self.backfilled
    }

    /// Where these values came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The bytes this crate writes for this content: pretty JSON, two-space indent (as Python's
    /// `json.dump(indent=2)`), non-ASCII kept as UTF-8, one trailing newline.
    pub fn render(&self) -> Vec<u8> {
        render(&self.map)
    }

    pub(crate) fn content_hash(&self) -> u64 {
        self.content_hash
    }

    pub(crate) fn set_content_hash(&mut self, hash: u64) {
        self.content_hash = hash;
    }

    pub(crate) fn with_origin(mut self, origin: Origin) -> ConfigFile {
        self.origin = origin;
        self
    }

    /// The spec's defaults, not read from or written to any file.
    pub fn defaults(path: &Path) -> ConfigFile {
        let map = defaults();
        let bytes = render(&map);
        let settings = Settings::default();
        let effective = settings
            .effective()
            .expect("the spec's defaults satisfy compaction-core's settings rules");
        ConfigFile {
            path: path.to_owned(),
            map,
            settings,
            effective,
            backfilled: Vec::new(),
            origin: Origin::Defaults,
            content_hash: content_hash(&bytes),
        }
    }
}

/// The bytes written to disk for a map. Deterministic, so a file this crate wrote reads back
/// and re-renders byte-identically.
pub(crate) fn render(map: &Map<String, Value>) -> Vec<u8> {
    // Serializing a map of JSON values cannot fail: keys are strings and a `Value` holds only
    // finite numbers.
    let mut out = serde_json::to_vec_pretty(map).expect("a JSON map always serializes");
    out.push(b'\n');
    out
}

/// Parses the file's bytes: JSON syntax, a top-level object, each spec key's type, then
/// compaction-core's rules. Missing spec keys are appended with their defaults in spec order
/// and listed in `backfilled`.
pub(crate) fn parse(path: &Path, bytes: &[u8], origin: Origin) -> Result<ConfigFile, ConfigError> {
    let value: Value = crate::strict_json::reject_duplicate_keys(bytes)
        .and_then(|()| serde_json::from_slice(bytes))
        .map_err(|e| {
            // serde_json's message ends with its own " at line L column C"; the error says it once.
            let full = e.to_string();
            let position = format!(" at line {} column {}", e.line(), e.column());
            let mut message = full.strip_suffix(&position).unwrap_or(&full).to_owned();
            if bytes.starts_with(b"\xEF\xBB\xBF") {
                message.push_str(
                    " (the file starts with a UTF-8 byte order mark; save it as UTF-8 without BOM)",
                );
            }
            ConfigError::Syntax {
                path: path.to_owned(),
                line: e.line(),
                column: e.column(),
                message,
            }
        })?;
    let Value::Object(map) = value else {
        return Err(ConfigError::NotAnObject {
            path: path.to_owned(),
            found: json_type(&value),
        });
    };
    let mut file = from_map(path, map)?;
    file.content_hash = content_hash(bytes);
    file.origin = if file.backfilled.is_empty() {
        origin
    } else {
        Origin::Backfilled
    };
    Ok(file)
}

/// Type-checks, backfills and validates a map (origin and hash are set by the caller).
pub(crate) fn from_map(
    path: &Path,
    mut map: Map<String, Value>,
) -> Result<ConfigFile, ConfigError> {
    let mut backfilled = Vec::new();
    let mut spec = Map::new();
    for (key, default) in defaults() {
        let Some((key, kind)) = kind_of(&key) else {
            continue;
        };
        match map.get(key) {
            Some(value) if kind.accepts(value) => {
                // A whole float read for an integer key (`4.0`) is read as the integer; the
                // file keeps what it says.
                let value = match (kind, whole_number(value)) {
                    (Kind::Int, Some(n)) => Value::from(n),
                    _ => value.clone(),
                };
                spec.insert(key.to_owned(), value);
            }
            Some(value) => {
                return Err(ConfigError::WrongType {
                    path: path.to_owned(),
                    key,
                    value: shown(value),
                    found: json_type(value),
                    expected: kind.expected(),
                });
            }
            None => {
                backfilled.push(key);
                map.insert(key.to_owned(), default.clone());
                spec.insert(key.to_owned(), default);
            }
        }
    }
    // Every key now has its type, so this cannot fail; the mapping keeps it total anyway.
    let settings: Settings =
        serde_json::from_value(Value::Object(spec)).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            line: 0,
            column: 0,
            message: e.to_string(),
        })?;
    let effective = settings
        .effective()
        .map_err(|source| ConfigError::Invalid {
            path: path.to_owned(),
            source,
        })?;
    Ok(ConfigFile {
        path: path.to_owned(),
        map,
        settings,
        effective,
        backfilled,
        origin: Origin::Read,
        content_hash: 0,
    })
}

/// Writes `settings` back into `map`: a spec key whose meaning is unchanged keeps its exact
/// JSON value (so `1` stays `1`), a changed one is replaced in place, other keys are untouched.
pub(crate) fn merge_settings(map: &mut Map<String, Value>, settings: &Settings) {
    let Ok(Value::Object(new)) = serde_json::to_value(settings) else {
        return;
    };
    for (key, value) in new {
        let Some((_, kind)) = kind_of(&key) else {
            continue;
        };
        let unchanged = map.get(&key).is_some_and(|old| kind.same(old, &value));
        if !unchanged {
            map.insert(key, value);
        }
    }
}

/// Sets one spec key, keeping the old JSON value if it means the same (so `1` stays `1` when
/// `1.0` is set).
pub(crate) fn set_spec_value(map: &mut Map<String, Value>, key: &'static str, value: Value) {
    let unchanged = kind_of(key)
        .zip(map.get(key))
        .is_some_and(|((_, kind), old)| kind.same(old, &value));
    if !unchanged {
        map.insert(key.to_owned(), value);
    }
}

/// Parses the text for one spec key, as typed by a person.
pub(crate) fn value_from_text(key: &str, text: &str) -> Result<(&'static str, Value), ConfigError> {
    let Some((key, kind)) = kind_of(key) else {
        return Err(ConfigError::UnknownKey {
            key: key.to_owned(),
            known: KEYS.join(", "),
        });
    };
    kind.parse_text(text)
        .map(|v| (key, v))
        .ok_or_else(|| ConfigError::BadValue {
            key,
            value: text.to_owned(),
            expected: match kind {
                Kind::Float => "a finite number, e.g. 0.75",
                other => other.expected(),
            },
        })
}

/// Levenshtein distance over chars (keys are short; quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/cfg/zocrates_config.json")
    }

    #[test]
    fn whole_floats_read_as_integers_and_huge_integers_are_named() {
        let f = parse(
            p(),
            br#"{"adaptive_compaction_min_turns": 6.0, "adaptive_compaction_token_floor": 3e4}"#,
            Origin::Read,
        )
        .unwrap();
        assert_eq!(f.settings().adaptive_compaction_min_turns, 6);
        assert_eq!(f.settings().adaptive_compaction_token_floor, 30_000);
        // Read back and merged, the file keeps its own spelling: nothing to rewrite.
        let mut map = f.raw().clone();
        merge_settings(&mut map, f.settings());
        assert_eq!(map["adaptive_compaction_min_turns"], serde_json::json!(6.0));
        let err = parse(
            p(),
            br#"{"adaptive_compaction_min_turns": 6.5}"#,
            Origin::Read,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("a fractional number"), "{err}");
        let err = parse(
            p(),
            br#"{"adaptive_compaction_min_turns": 18446744073709551615}"#,
            Origin::Read,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("an integer beyond 2^63"), "{err}");
    }

    #[test]
    fn misspelled_setting_keys_are_named_with_the_key_they_resemble() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        let text = br#"{"adaptive_compaction_treshold": 0.9, "compaction_sumarizer_model": "m",
            "desktop_theme": "dark", "decision_adapter": "offline"}"#;
        let file = parse(p(), text, Origin::Read).unwrap();
        assert_eq!(
            file.unknown_setting_keys(),
            [
                (
                    "adaptive_compaction_treshold",
                    "adaptive_compaction_threshold"
                ),
                ("compaction_sumarizer_model", "compaction_summarizer_model"),
            ]
        );
    }

    #[test]
    fn defaults_render_as_the_spec_section_10_example() {
        let text = String::from_utf8(ConfigFile::defaults(p()).render()).unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn missing_keys_are_appended_in_spec_order_after_existing_ones() {
        let f = parse(
            p(),
            br#"{"zz": 1, "adaptive_compaction_threshold": 0.5}"#,
            Origin::Read,
        )
        .unwrap();
        let keys: Vec<&str> = f.raw().keys().map(String::as_str).collect();
        let mut expected = vec!["zz", "adaptive_compaction_threshold"];
        expected.extend(
            KEYS.iter()
                .filter(|k| **k != "adaptive_compaction_threshold"),
        );
        assert_eq!(keys, expected);
        assert_eq!(f.backfilled().len(), 7);
        assert_eq!(f.origin(), Origin::Backfilled);
        assert_eq!(f.settings().adaptive_compaction_threshold, 0.5);
        assert_eq!(f.extra().collect::<Vec<_>>(), vec![("zz", &Value::from(1))]);
    }

    #[test]
    fn an_integer_threshold_is_a_number_and_keeps_its_spelling() {
        let text = String::from_utf8(ConfigFile::defaults(p()).render())
            .unwrap()
            .replace("0.75", "1");
        let f = parse(p(), text.as_bytes(), Origin::Read).unwrap();
        assert_eq!(f.effective().threshold, 1.0);
        let mut map = f.raw().clone();
        merge_settings(&mut map, f.settings());
        assert_eq!(render(&map), text.as_bytes());
    }

    fn err(text: &str) -> String {
        parse(p(), text.as_bytes(), Origin::Read)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn error_messages_name_file_key_value_and_expected_type() {
        let cases = [
            (
                "truncated",
                r#"{"enable_adaptive_compaction": tr"#.to_owned(),
            ),
            ("not_an_object", "[1, 2]".to_owned()),
            (
                "null",
                r#"{"adaptive_compaction_min_turns": null}"#.to_owned(),
            ),
            (
                "string_for_int",
                r#"{"adaptive_compaction_retention_turns": "two"}"#.to_owned(),
            ),
            (
                "float_for_int",
                r#"{"adaptive_compaction_token_floor": 3.5}"#.to_owned(),
            ),
            (
                "int_for_bool",
                r#"{"enable_adaptive_compaction": 1}"#.to_owned(),
            ),
            (
                "long_value",
                format!(
                    r#"{{"adaptive_compaction_decision_model": [{}]}}"#,
                    "1,".repeat(100) + "1"
                ),
            ),
            (
                "rule",
                r#"{"adaptive_compaction_threshold": 1.5}"#.to_owned(),
            ),
            ("bom", "\u{feff}{}".to_owned()),
            (
                "floor_above_ceiling",
                r#"{"adaptive_compaction_token_floor": 5, "adaptive_compaction_token_ceiling": 4}"#
                    .to_owned(),
            ),
        ];
        let rendered: Vec<String> = cases
            .iter()
            .map(|(name, text)| format!("{name}: {}", err(text)))
            .collect();
        insta::assert_snapshot!(rendered.join("\n"));
    }

    #[test]
    fn typed_text_parses_to_the_key_type_or_says_what_was_expected() {
        assert_eq!(
            value_from_text("adaptive_compaction_min_turns", " 7 ")
                .unwrap()
                .1,
            Value::from(7)
        );
        assert_eq!(
            value_from_text("enable_adaptive_compaction", "false")
                .unwrap()
                .1,
            Value::Bool(false)
        );
        assert_eq!(
            value_from_text("compaction_summarizer_model", "a/b")
                .unwrap()
                .1,
            Value::from("a/b")
        );
        let msgs: Vec<String> = [
            ("adaptive_compaction_min_turns", "four"),
            ("adaptive_compaction_threshold", "NaN"),
            ("enable_adaptive_compaction", "yes"),
            ("adaptive_compaction_treshold", "0.5"),
        ]
        .iter()
        .map(|(k, v)| value_from_text(k, v).unwrap_err().to_string())
        .collect();
        insta::assert_snapshot!(msgs.join("\n"));
    }
}
