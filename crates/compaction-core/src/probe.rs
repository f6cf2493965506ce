//! The decision-model rubric probe (spec section 5): request, probability and verdict.

use serde::Serialize;

use crate::state::DecisionState;

/// The id of the probe's only question.
pub const QUESTION_ID: &str = "compaction_warranted";
/// The question's type: a calibrated probability.
pub(crate) const QUESTION_TYPE: &str = "noul";

/// The rubric, word for word from the spec's section 5.
pub const RUBRIC: &str = "Task: Decide whether `earlier_discussion` should be compacted into a concise summary to preserve context space for upcoming turns.\n\nRubric:\n- CLOSED-UNIT: Did `earlier_discussion` conclude a complete sub-topic or sub-analysis?\n- PROGRESS/PIVOT: In the latter part of `earlier_discussion` or in `latest_turn`, has the user pivoted to a different research topic or advanced to a new phase?\n- NOT STUCK: Is the conversation free from an unresolved clarification or correction loop?\n\nDecision Rule:\n- Compaction is WARRANTED if and only if ALL criteria are satisfied: earlier turns form a resolved unit, the conversation is advancing to new ground, and there is no active confusion or clarification loop.\n- Compaction is NOT WARRANTED if the user is still actively drilling down, clarifying, or troubleshooting the exact same point, or if the conversation is mid-thought.\n\nDetermine if compacting `earlier_discussion` is warranted.";

/// A probe request in the Decisions API ("System One") shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeRequest {
    /// Decision model slug.
    pub model: String,
    /// The decision state.
    pub state: DecisionState,
    /// The questions: exactly `compaction_warranted`.
    pub questions: Questions,
}

/// The probe's questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Questions {
    /// The only question.
    pub compaction_warranted: Question,
}

/// One `noul` question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Question {
    /// Always `"noul"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The rubric.
    pub instructions: String,
}

impl ProbeRequest {
    /// The spec's probe for `state`.
    pub fn new(model: impl Into<String>, state: DecisionState) -> Self {
        ProbeRequest {
            model: model.into(),
            state,
            questions: Questions {
                compaction_warranted: Question {
                    kind: QUESTION_TYPE.to_owned(),
                    instructions: RUBRIC.to_owned(),
                },
            },
        }
    }
}

/// A probability in [0, 1], never NaN.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Probability(f64);

/// A model returned something that is not a probability.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("probability must be a number in [0, 1], got {0}")]
pub struct InvalidProbability(pub f64);

impl Probability {
    /// Validates `p`.
    pub fn new(p: f64) -> Result<Self, InvalidProbability> {
        if (0.0..=1.0).contains(&p) {
            Ok(Probability(p))
        } else {
            Err(InvalidProbability(p))
        }
    }

    /// The value.
    pub fn value(self) -> f64 {
        self.0
    }
}

impl std::fmt::Display for Probability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}", self.0)
    }
}

/// The probe's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Compact now.
    Compress,
    /// Keep the raw context.
    Continue,
}

impl Verdict {
    /// `"COMPRESS"` or `"CONTINUE"`, as spans and logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Compress => "COMPRESS",
            Verdict::Continue => "CONTINUE",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// p ≥ τ → COMPRESS, else CONTINUE (spec 5.1).
pub fn verdict(p: Probability, threshold: f64) -> Verdict {
    if p.value() >= threshold {
        Verdict::Compress
    } else {
        Verdict::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_inclusive_and_invalid_p_is_refused() {
        assert_eq!(
            verdict(Probability::new(0.75).unwrap(), 0.75),
            Verdict::Compress
        );
        assert_eq!(
            verdict(Probability::new(0.7499).unwrap(), 0.75),
            Verdict::Continue
        );
        for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
            assert!(Probability::new(bad).is_err());
        }
    }
}
