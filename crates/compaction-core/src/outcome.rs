//! What one evaluation did, as a host matches on it and shows it: [`Outcome`], the
//! [`ContinueReason`] behind a kept context and the [`Compaction`] a compression wrote, with
//! their labels, details and JSON form. The flow that produces them is [`crate::engine`].

use std::fmt;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::event::Event;
use crate::failure::Failure;
use crate::gate::FastExitReason;
use crate::ports::DecisionRecord;
use crate::probe::Probability;
use crate::session::Revision;
use crate::time::Timestamp;

/// Why the engine kept the raw context after the gate opened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContinueReason {
    /// p < τ.
    BelowThreshold {
        /// p.
        probability: Probability,
        /// τ.
        threshold: f64,
    },
    /// The probe failed (timeout, error, invalid p): fail-open.
    ProbeFailed {
        /// What went wrong.
        failure: Failure,
    },
    /// The first retained turn does not start strictly after the slice's end: a compaction
    /// covering `[start, slice_end]` would hide it, so none is made (see [`crate::Clock`]).
    TimestampsNotIncreasing {
        /// The slice's last timestamp (t_{N-K}).
        slice_end: Timestamp,
        /// The first retained event's timestamp.
        retained_start: Timestamp,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
}

/// A compaction the engine appended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Compaction {
    /// The appended event.
    pub event: Event,
    /// The session's revision after the append.
    pub revision: Revision,
    /// Turns folded by this compaction (new turns only, completed or not).
    pub slice_turns: usize,
    /// p, when the decision model was asked.
    pub probability: Option<Probability>,
}

/// The result of one post-turn evaluation.
///
/// `Display` gives the words a person reads (`probe CONTINUE: p < τ = 0.75`); `Serialize`
/// gives the same facts for machines (`{"outcome": "continue", "gate": "probe", …}`).
#[derive(Debug, Clone, PartialEq)]
#[must_use]
#[non_exhaustive]
pub enum Outcome {
    /// The gate was not met: no call, no span.
    FastExit(FastExitReason),
    /// The probe said CONTINUE, or failed.
    Continue(ContinueReason),
    /// The probe said COMPRESS and the summary was appended.
    Compressed(Compaction),
    /// The hard backstop forced compaction and the summary was appended.
    Forced(Compaction),
    /// Another writer moved the session on: the compaction was dropped, nothing written.
    StaleDropped {
        /// What the store said.
        failure: Failure,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
    /// The summarizer failed: nothing written.
    SummarizerFailed {
        /// What went wrong.
        failure: Failure,
        /// True when the backstop forced the attempt.
        forced: bool,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
    /// The gate opened but there was no new completed turn outside the retained ones.
    NothingToCompact,
    /// The store could not be read or written: nothing written.
    StoreFailed {
        /// What went wrong.
        failure: Failure,
    },
    /// Shadow mode: the gate opened, the decision model was asked and its decision recorded;
    /// nothing was compacted.
    Shadowed {
        /// The decision as recorded.
        decision: Box<DecisionRecord>,
        /// Why the record could not be stored, when it could not (fail-open).
        not_recorded: Option<Failure>,
    },
}

impl Outcome {
    /// A short label: `fast-exit`, `continue`, `compressed`, `forced`, `stale-dropped`,
    /// `summarizer-failed`, `nothing-to-compact`, `store-failed`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) => "fast-exit",
            Outcome::Continue(_) => "continue",
            Outcome::Compressed(_) => "compressed",
            Outcome::Forced(_) => "forced",
            Outcome::StaleDropped { .. } => "stale-dropped",
            Outcome::SummarizerFailed { .. } => "summarizer-failed",
            Outcome::NothingToCompact => "nothing-to-compact",
            Outcome::StoreFailed { .. } => "store-failed",
            Outcome::Shadowed { .. } => "shadowed",
        }
    }

    /// p, when the decision model answered.
    pub fn probability(&self) -> Option<Probability> {
        match self {
            Outcome::Continue(ContinueReason::BelowThreshold { probability, .. }) => {
                Some(*probability)
            }
            Outcome::Continue(ContinueReason::TimestampsNotIncreasing { probability, .. }) => {
                *probability
            }
            Outcome::Compressed(c) | Outcome::Forced(c) => c.probability,
            Outcome::StaleDropped { probability, .. }
            | Outcome::SummarizerFailed { probability, .. } => *probability,
            Outcome::Shadowed { decision, .. } => {
                decision.probability.and_then(|p| Probability::new(p).ok())
            }
            _ => None,
        }
    }

    /// The appended compaction, if any.
    pub fn compaction(&self) -> Option<&Compaction> {
        match self {
            Outcome::Compressed(c) | Outcome::Forced(c) => Some(c),
            _ => None,
        }
    }

    /// The failure, when the outcome is one (fail-open).
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Outcome::Continue(ContinueReason::ProbeFailed { failure })
            | Outcome::StaleDropped { failure, .. }
            | Outcome::SummarizerFailed { failure, .. }
            | Outcome::StoreFailed { failure } => Some(failure),
            Outcome::Shadowed {
                decision,
                not_recorded,
            } => decision.failure.as_ref().or(not_recorded.as_ref()),
            _ => None,
        }
    }

    /// Which way the gate went: `exit`, `probe`, `backstop`, or `-` when the store failed
    /// before it could answer.
    pub fn gate_label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) => "exit",
            Outcome::Forced(_) | Outcome::SummarizerFailed { forced: true, .. } => "backstop",
            Outcome::Shadowed { decision, .. } if decision.backstop => "backstop",
            Outcome::StoreFailed { .. } => "-",
            _ => "probe",
        }
    }

    /// The verdict: `COMPRESS`, `CONTINUE`, or `-` on a fast exit or a store failure.
    pub fn verdict_label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) | Outcome::StoreFailed { .. } => "-",
            Outcome::Continue(_) => "CONTINUE",
            Outcome::Shadowed { decision, .. } => match decision.verdict.as_deref() {
                Some("COMPRESS") => "COMPRESS",
                Some(_) => "CONTINUE",
                None => "-",
            },
            _ => "COMPRESS",
        }
    }

    /// Why, in a person's words: the fast-exit reason, the failure, or what was folded.
    pub fn detail(&self) -> String {
        match self {
            Outcome::FastExit(reason) => reason.to_string(),
            Outcome::Continue(ContinueReason::BelowThreshold { threshold, .. }) => {
                format!("p < τ = {threshold}")
            }
            Outcome::Continue(ContinueReason::ProbeFailed { failure }) => {
                format!("fail-open: {failure}")
            }
            Outcome::Continue(ContinueReason::TimestampsNotIncreasing {
                slice_end,
                retained_start,
                ..
            }) => format!(
                "no compaction: the first retained turn starts at {retained_start}, not after \
                 the slice's end {slice_end} (timestamps must strictly increase)"
            ),
            Outcome::Compressed(c) | Outcome::Forced(c) => {
                format!("folded {} turns into the rolling summary", c.slice_turns)
            }
            Outcome::StaleDropped { failure, .. } => format!("dropped: {failure}"),
            Outcome::SummarizerFailed { failure, .. } => format!("nothing written: {failure}"),
            Outcome::NothingToCompact => "nothing new to fold".to_owned(),
            Outcome::StoreFailed { failure } => format!("store failed: {failure}"),
            Outcome::Shadowed {
                decision,
                not_recorded,
            } => {
                let what = match (&decision.probability, &decision.failure) {
                    (Some(p), _) => format!("shadow: p = {p:.2}, τ = {}", decision.threshold),
                    (None, Some(f)) => format!("shadow: the probe failed: {f}"),
                    (None, None) => "shadow: no probability".to_owned(),
                };
                match not_recorded {
                    None => format!("{what}; recorded, nothing compacted"),
                    Some(f) => format!("{what}; NOT recorded ({f}), nothing compacted"),
                }
            }
        }
    }
}

impl fmt::Display for Outcome {
    /// `gate VERDICT: detail`, for example `probe CONTINUE: p < τ = 0.75`; without a verdict
    /// (a fast exit, a store failure) `gate: detail`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.verdict_label() {
            "-" => write!(f, "{}: {}", self.gate_label(), self.detail()),
            verdict => write!(f, "{} {verdict}: {}", self.gate_label(), self.detail()),
        }
    }
}

impl Serialize for Outcome {
    /// `outcome` (the [`Outcome::label`]), `gate`, `verdict`, `probability` (or null),
    /// `failure` (kind, status, message; or null), `compaction_event_id` and `slice_turns`
    /// (or null) and `detail`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Outcome", 8)?;
        s.serialize_field("outcome", self.label())?;
        s.serialize_field("gate", self.gate_label())?;
        s.serialize_field("verdict", self.verdict_label())?;
        s.serialize_field("probability", &self.probability().map(Probability::value))?;
        s.serialize_field("failure", &self.failure())?;
        s.serialize_field(
            "compaction_event_id",
            &self.compaction().map(|c| c.event.id.as_str()),
        )?;
        s.serialize_field("slice_turns", &self.compaction().map(|c| c.slice_turns))?;
        s.serialize_field("detail", &self.detail())?;
        s.end()
    }
}
