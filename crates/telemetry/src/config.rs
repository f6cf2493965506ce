//! What the spans record: the probe's span kind and OpenInference's privacy switches.

use std::fmt;
use std::str::FromStr;

use crate::error::TelemetryError;
use crate::keys;

/// OpenInference's switch that replaces every `input.value` with `__REDACTED__`.
pub const HIDE_INPUTS_ENV: &str = "OPENINFERENCE_HIDE_INPUTS";
/// OpenInference's switch that replaces every `output.value` with `__REDACTED__`.
pub const HIDE_OUTPUTS_ENV: &str = "OPENINFERENCE_HIDE_OUTPUTS";

/// The `openinference.span.kind` of `compaction_decision_probe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeSpanKind {
    /// `EVALUATOR`, as the design spec shows it and every Phoenix release understands.
    #[default]
    Evaluator,
    /// `DECISION`, OpenInference's newer kind for decision-model calls.
    Decision,
}

impl ProbeSpanKind {
    /// The attribute value: `EVALUATOR` or `DECISION`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeSpanKind::Evaluator => keys::SPAN_KIND_EVALUATOR,
            ProbeSpanKind::Decision => keys::SPAN_KIND_DECISION,
        }
    }
}

impl fmt::Display for ProbeSpanKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProbeSpanKind {
    type Err = TelemetryError;

    /// Parses `EVALUATOR` or `DECISION`, ignoring case and surrounding blanks.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            keys::SPAN_KIND_EVALUATOR => Ok(ProbeSpanKind::Evaluator),
            keys::SPAN_KIND_DECISION => Ok(ProbeSpanKind::Decision),
            _ => Err(TelemetryError::InvalidSetting {
                setting: "probe span kind",
                value: s.to_owned(),
                expected: "EVALUATOR or DECISION",
            }),
        }
    }
}

/// What the spans record.
///
/// The default records inputs and outputs and marks the probe `EVALUATOR`.
/// [`TelemetryConfig::from_env`] honours OpenInference's `OPENINFERENCE_HIDE_INPUTS` and
/// `OPENINFERENCE_HIDE_OUTPUTS`: a hidden value becomes `__REDACTED__` and its MIME type is
/// left out, exactly as OpenInference's own instrumentations do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TelemetryConfig {
    /// The probe span's kind.
    pub probe_kind: ProbeSpanKind,
    /// Replace `input.value` with `__REDACTED__`.
    pub hide_inputs: bool,
    /// Replace `output.value` with `__REDACTED__`.
    pub hide_outputs: bool,
}

impl TelemetryConfig {
    /// Reads the privacy switches from the process environment.
    pub fn from_env() -> Result<Self, TelemetryError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// Reads the privacy switches through `lookup` (a variable name to its value), so tests
    /// and embedders need not touch the process environment. Unset means `false`; a set
    /// value must be `true` or `false` (any case), as OpenInference parses it.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, TelemetryError> {
        Ok(TelemetryConfig {
            probe_kind: ProbeSpanKind::default(),
            hide_inputs: env_flag(&lookup, HIDE_INPUTS_ENV)?,
            hide_outputs: env_flag(&lookup, HIDE_OUTPUTS_ENV)?,
        })
    }

    /// The same configuration with the probe span marked `kind`.
    pub fn with_probe_kind(mut self, kind: ProbeSpanKind) -> Self {
        self.probe_kind = kind;
        self
    }
}

fn env_flag(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<bool, TelemetryError> {
    let Some(value) = lookup(var) else {
        return Ok(false);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(TelemetryError::InvalidEnv {
            var,
            value,
            expected: "true or false",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn unset_switches_record_everything() {
        let config = TelemetryConfig::from_lookup(lookup(&[])).unwrap();
        assert_eq!(config, TelemetryConfig::default());
        assert_eq!(config.probe_kind, ProbeSpanKind::Evaluator);
    }

    #[test]
    fn switches_parse_like_openinference() {
        let config = TelemetryConfig::from_lookup(lookup(&[
            (HIDE_INPUTS_ENV, "TRUE"),
            (HIDE_OUTPUTS_ENV, " false "),
        ]))
        .unwrap();
        assert!(config.hide_inputs);
        assert!(!config.hide_outputs);
    }

    #[test]
    fn a_malformed_switch_is_an_error_naming_the_variable() {
        let error = TelemetryConfig::from_lookup(lookup(&[(HIDE_OUTPUTS_ENV, "yes")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "environment variable OPENINFERENCE_HIDE_OUTPUTS=\"yes\" is invalid: expected true or false"
        );
    }

    #[test]
    fn probe_kind_parses_both_spellings_and_rejects_others() {
        assert_eq!(
            "decision".parse::<ProbeSpanKind>().unwrap(),
            ProbeSpanKind::Decision
        );
        assert_eq!(
            " EVALUATOR".parse::<ProbeSpanKind>().unwrap(),
            ProbeSpanKind::Evaluator
        );
        let error = "LLM".parse::<ProbeSpanKind>().unwrap_err().to_string();
        assert_eq!(
            error,
            "probe span kind \"LLM\" is invalid: expected EVALUATOR or DECISION"
        );
    }
}
