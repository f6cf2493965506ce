//! The spec's eight configuration keys (section 10), their defaults, validation and the
//! min_turns clamp (section 3.1).

use serde::{Deserialize, Serialize};

/// Key: master toggle.
pub(crate) const KEY_ENABLE: &str = "enable_adaptive_compaction";
/// Key: summarizer model slug.
pub(crate) const KEY_SUMMARIZER_MODEL: &str = "compaction_summarizer_model";
/// Key: K, the completed turns retained verbatim.
pub(crate) const KEY_RETENTION_TURNS: &str = "adaptive_compaction_retention_turns";
/// Key: completed turns required before the envelope opens.
pub(crate) const KEY_MIN_TURNS: &str = "adaptive_compaction_min_turns";
/// Key: coordinator prompt tokens required before probing.
pub(crate) const KEY_TOKEN_FLOOR: &str = "adaptive_compaction_token_floor";
/// Key: coordinator prompt tokens that force compaction without probing.
pub(crate) const KEY_TOKEN_CEILING: &str = "adaptive_compaction_token_ceiling";
/// Key: the probability threshold τ.
pub(crate) const KEY_THRESHOLD: &str = "adaptive_compaction_threshold";
/// Key: decision model slug.
pub(crate) const KEY_DECISION_MODEL: &str = "adaptive_compaction_decision_model";

/// Key (an extension, not one of the spec's eight): shadow mode, a boolean, default `false`.
/// When true the engine probes and records every decision but never compacts
/// ([`crate::EngineBuilder::shadow`]).
pub const KEY_SHADOW: &str = "adaptive_compaction_shadow";

/// Keys of ours beside the spec's eight that share its prefix: a settings file may hold them
/// and they are no misspelling.
pub const EXTENSION_KEYS: [&str; 1] = [KEY_SHADOW];

/// Reads [`KEY_SHADOW`] from a settings object: absent is `false`; anything but a boolean is an
/// error naming the key and the expected form.
pub fn shadow_from(
    raw: &serde_json::Map<String, serde_json::Value>,
) -> Result<bool, SettingsError> {
    match raw.get(KEY_SHADOW) {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(other) => Err(SettingsError::NotABoolean {
            key: KEY_SHADOW,
            found: other.to_string(),
        }),
    }
}

/// The eight keys in the order of the spec's section 10.
pub const KEYS: [&str; 8] = [
    KEY_ENABLE,
    KEY_SUMMARIZER_MODEL,
    KEY_RETENTION_TURNS,
    KEY_MIN_TURNS,
    KEY_TOKEN_FLOOR,
    KEY_TOKEN_CEILING,
    KEY_THRESHOLD,
    KEY_DECISION_MODEL,
];

/// What a person reads beside each key (a settings form's hint): the form and range that
/// [`Settings::effective`] and the min_turns clamp enforce, in words; `""` for an unknown key.
pub fn key_hint(key: &str) -> &'static str {
    match key {
        KEY_ENABLE => "true or false: the master toggle",
        KEY_SUMMARIZER_MODEL => "a non-empty model slug: writes the rolling summary",
        KEY_RETENTION_TURNS => "an integer ≥ 0: completed turns kept verbatim (K)",
        KEY_MIN_TURNS => "an integer > K (a smaller one is clamped to K + 1, with a warning)",
        KEY_TOKEN_FLOOR => "an integer ≥ 0, at most the ceiling: below it, no probe",
        KEY_TOKEN_CEILING => "an integer ≥ the floor: at or above it, compaction is forced",
        KEY_THRESHOLD => "a number in [0.0, 1.0] (τ): compress when p ≥ τ",
        KEY_DECISION_MODEL => "a non-empty model slug: answers the probe",
        _ => "",
    }
}

/// The settings as a user wrote them. Counts are signed so that a negative value written in a
/// file reaches [`Settings::effective`] and is reported by key, rather than failing opaquely.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Master toggle (default `true`).
    pub enable_adaptive_compaction: bool,
    /// Summarizer model slug (default `openrouter/nvidia/nemotron-3.5-lightning:free`).
    pub compaction_summarizer_model: String,
    /// K (default 2).
    pub adaptive_compaction_retention_turns: i64,
    /// Minimum completed turns (default 4), clamped to at least K + 1.
    pub adaptive_compaction_min_turns: i64,
    /// Token floor (default 30,000).
    pub adaptive_compaction_token_floor: i64,
    /// Token ceiling, the hard backstop (default 100,000).
    pub adaptive_compaction_token_ceiling: i64,
    /// τ (default 0.75).
    pub adaptive_compaction_threshold: f64,
    /// Decision model slug (default `inception/mercury-decide`).
    pub adaptive_compaction_decision_model: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enable_adaptive_compaction: true,
            compaction_summarizer_model: "openrouter/nvidia/nemotron-3.5-lightning:free".to_owned(),
            adaptive_compaction_retention_turns: 2,
            adaptive_compaction_min_turns: 4,
            adaptive_compaction_token_floor: 30_000,
            adaptive_compaction_token_ceiling: 100_000,
            adaptive_compaction_threshold: 0.75,
            adaptive_compaction_decision_model: "inception/mercury-decide".to_owned(),
        }
    }
}

/// A setting's value breaks a rule. Every variant names the key and the value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A token count (floor or ceiling) was negative.
    #[error("{key} must be a non-negative integer, got {value}")]
    Negative {
        /// The key.
        key: &'static str,
        /// The value found.
        value: i64,
    },
    /// τ was NaN or outside [0, 1].
    #[error("{key} must be a number in [0.0, 1.0], got {value}")]
    ThresholdOutOfRange {
        /// The key.
        key: &'static str,
        /// The value found.
        value: f64,
    },
    /// The floor was above the ceiling.
    #[error(
        "{floor_key} ({floor}) must not exceed {ceiling_key} ({ceiling})",
        floor_key = KEY_TOKEN_FLOOR,
        ceiling_key = KEY_TOKEN_CEILING
    )]
    FloorAboveCeiling {
        /// The floor found.
        floor: i64,
        /// The ceiling found.
        ceiling: i64,
    },
    /// A model slug was empty.
    #[error("{key} must be a non-empty model slug")]
    EmptyModel {
        /// The key.
        key: &'static str,
    },
    /// A boolean key held something else.
    #[error("{key} must be true or false, got {found}")]
    NotABoolean {
        /// The key.
        key: &'static str,
        /// The value found, as JSON.
        found: String,
    },
}

impl SettingsError {
    /// The key whose value broke the rule (for [`SettingsError::FloorAboveCeiling`], the
    /// floor's): where a preferences UI shows the error.
    pub fn key(&self) -> &'static str {
        match self {
            SettingsError::Negative { key, .. }
            | SettingsError::ThresholdOutOfRange { key, .. }
            | SettingsError::EmptyModel { key }
            | SettingsError::NotABoolean { key, .. } => key,
            SettingsError::FloorAboveCeiling { .. } => KEY_TOKEN_FLOOR,
        }
    }
}

/// The spec 3.1 disambiguation fired: K was negative (`effective_k = max(0, K)`), or
/// min_turns was not above K (`effective_min_turns = K + 1`). The caller should log this as a
/// warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClampWarning {
    /// The configured min_turns.
    pub configured_min_turns: i64,
    /// The configured K.
    pub configured_retention_turns: i64,
    /// The effective K, `max(0, configured K)`.
    pub retention_turns: u64,
    /// The effective min_turns: the configured one, or K + 1 when that was not above K.
    pub effective_min_turns: u64,
}

impl ClampWarning {
    /// True when min_turns was clamped to K + 1.
    pub fn min_turns_clamped(&self) -> bool {
        i128::from(self.configured_min_turns) <= i128::from(self.retention_turns)
    }

    /// True when a negative K was raised to 0.
    pub fn retention_clamped(&self) -> bool {
        self.configured_retention_turns < 0
    }
}

impl std::fmt::Display for ClampWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.retention_clamped() {
            write!(
                f,
                "{KEY_RETENTION_TURNS} ({}) is negative. Disambiguating by using retention_turns 0.",
                self.configured_retention_turns
            )?;
            if self.min_turns_clamped() {
                f.write_str(" ")?;
            }
        }
        if self.min_turns_clamped() {
            write!(
                f,
                "{KEY_MIN_TURNS} ({}) must be strictly greater than retention_turns ({}). \
                 Disambiguating by clamping effective_min_turns to {}.",
                self.configured_min_turns, self.retention_turns, self.effective_min_turns
            )?;
        }
        Ok(())
    }
}

/// Validated settings with the clamp applied: what the engine runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveSettings {
    /// Master toggle.
    pub enabled: bool,
    /// Effective K.
    pub retention_turns: usize,
    /// Effective min_turns, always > K.
    pub min_turns: usize,
    /// Token floor.
    pub token_floor: u64,
    /// Token ceiling.
    pub token_ceiling: u64,
    /// τ in [0, 1].
    pub threshold: f64,
    /// Decision model slug.
    pub decision_model: String,
    /// Summarizer model slug.
    pub summarizer_model: String,
    /// Set when the clamp fired.
    pub clamp_warning: Option<ClampWarning>,
}

fn non_negative(key: &'static str, value: i64) -> Result<u64, SettingsError> {
    u64::try_from(value).map_err(|_| SettingsError::Negative { key, value })
}

impl Settings {
    /// Validates every key and applies spec 3.1's disambiguation: `effective_k = max(0, K)`
    /// and `effective_min_turns = K + 1` when min_turns <= K (a negative min_turns included),
    /// with a [`ClampWarning`] when either fired.
    pub fn effective(&self) -> Result<EffectiveSettings, SettingsError> {
        // Spec 3.1: `effective_k = max(0, K)`; any min_turns <= K (negative ones included) is
        // clamped to K + 1 below.
        let configured_k = self.adaptive_compaction_retention_turns;
        let configured_min = self.adaptive_compaction_min_turns;
        let k = u64::try_from(configured_k).unwrap_or(0);
        let floor = non_negative(KEY_TOKEN_FLOOR, self.adaptive_compaction_token_floor)?;
        let ceiling = non_negative(KEY_TOKEN_CEILING, self.adaptive_compaction_token_ceiling)?;
        let tau = self.adaptive_compaction_threshold;
        if !(0.0..=1.0).contains(&tau) {
            return Err(SettingsError::ThresholdOutOfRange {
                key: KEY_THRESHOLD,
                value: tau,
            });
        }
        if floor > ceiling {
            return Err(SettingsError::FloorAboveCeiling {
                floor: self.adaptive_compaction_token_floor,
                ceiling: self.adaptive_compaction_token_ceiling,
            });
        }
        for (key, value) in [
            (KEY_DECISION_MODEL, &self.adaptive_compaction_decision_model),
            (KEY_SUMMARIZER_MODEL, &self.compaction_summarizer_model),
        ] {
            if value.trim().is_empty() {
                return Err(SettingsError::EmptyModel { key });
            }
        }
        let min_turns = match u64::try_from(configured_min) {
            Ok(min) if min > k => min,
            _ => k.saturating_add(1),
        };
        let warning = ClampWarning {
            configured_min_turns: configured_min,
            configured_retention_turns: configured_k,
            retention_turns: k,
            effective_min_turns: min_turns,
        };
        let clamp_warning =
            (warning.min_turns_clamped() || warning.retention_clamped()).then_some(warning);
        Ok(EffectiveSettings {
            enabled: self.enable_adaptive_compaction,
            retention_turns: usize::try_from(k).unwrap_or(usize::MAX),
            min_turns: usize::try_from(min_turns).unwrap_or(usize::MAX),
            token_floor: floor,
            token_ceiling: ceiling,
            threshold: tau,
            decision_model: self.adaptive_compaction_decision_model.clone(),
            summarizer_model: self.compaction_summarizer_model.clone(),
            clamp_warning,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec() {
        let e = Settings::default().effective().unwrap();
        assert_eq!((e.retention_turns, e.min_turns), (2, 4));
        assert_eq!((e.token_floor, e.token_ceiling), (30_000, 100_000));
        assert_eq!(e.threshold, 0.75);
        assert!(e.clamp_warning.is_none());
        let json = serde_json::to_value(Settings::default()).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, KEYS);
    }

    /// Spec 3.1's `effective_k = max(0, K)`: a negative K is 0, said in the warning, and a
    /// negative min_turns goes through the K + 1 clamp like any min_turns <= K.
    #[test]
    fn negative_counts_are_disambiguated_with_a_warning() {
        let e = Settings {
            adaptive_compaction_retention_turns: -2,
            ..Settings::default()
        }
        .effective()
        .unwrap();
        assert_eq!((e.retention_turns, e.min_turns), (0, 4));
        assert_eq!(
            e.clamp_warning.unwrap().to_string(),
            "adaptive_compaction_retention_turns (-2) is negative. Disambiguating by using \
             retention_turns 0."
        );
        let e = Settings {
            adaptive_compaction_retention_turns: -1,
            adaptive_compaction_min_turns: -3,
            ..Settings::default()
        }
        .effective()
        .unwrap();
        assert_eq!((e.retention_turns, e.min_turns), (0, 1));
        assert_eq!(
            e.clamp_warning.unwrap().to_string(),
            "adaptive_compaction_retention_turns (-1) is negative. Disambiguating by using \
             retention_turns 0. adaptive_compaction_min_turns (-3) must be strictly greater than \
             retention_turns (0). Disambiguating by clamping effective_min_turns to 1."
        );
    }

    #[test]
    fn invalid_values_name_the_key_and_value() {
        let mut s = Settings {
            adaptive_compaction_threshold: f64::NAN,
            ..Settings::default()
        };
        let err = s.effective().unwrap_err().to_string();
        assert!(err.contains(KEY_THRESHOLD) && err.contains("NaN"), "{err}");
        s.adaptive_compaction_threshold = 1.5;
        assert!(s.effective().unwrap_err().to_string().contains("1.5"));
        s = Settings {
            adaptive_compaction_token_floor: -1,
            ..Settings::default()
        };
        let err = s.effective().unwrap_err().to_string();
        assert!(err.contains(KEY_TOKEN_FLOOR) && err.contains("-1"), "{err}");
        s = Settings {
            adaptive_compaction_token_floor: 200_000,
            ..Settings::default()
        };
        let err = s.effective().unwrap_err();
        assert_eq!(err.key(), KEY_TOKEN_FLOOR);
        let err = err.to_string();
        assert!(
            err.contains("200000") && err.contains(KEY_TOKEN_CEILING),
            "{err}"
        );
        s = Settings {
            adaptive_compaction_threshold: 2.0,
            ..Settings::default()
        };
        assert_eq!(s.effective().unwrap_err().key(), KEY_THRESHOLD);
        s = Settings {
            adaptive_compaction_decision_model: " ".into(),
            ..Settings::default()
        };
        assert_eq!(s.effective().unwrap_err().key(), KEY_DECISION_MODEL);
    }
}
