//! The decision probe as the engine runs it: one call with its span and deadline, the
//! verdict against τ (fail-open), and shadow mode's recorded decision.

use super::Engine;
use super::compact::{deadline_passed, within};
use crate::failure::{Failure, FailureKind};
use crate::gate::GateInput;
use crate::outcome::{ContinueReason, Outcome};
use crate::ports::{DecisionRecord, ProbeEnd, ProbeStart};
use crate::probe::{Probability, ProbeRequest, Verdict, verdict};
use crate::scrub::scrub;
use crate::session::Session;
use crate::state::DecisionState;

impl Engine {
    /// Runs the probe; `Ok(p)` means COMPRESS.
    pub(super) async fn probe(
        &self,
        state: Option<DecisionState>,
        input: GateInput,
    ) -> Result<Probability, ContinueReason> {
        let asked = self.ask(state, input).await;
        match asked.result {
            Ok(p) if verdict(p, self.settings.threshold) == Verdict::Compress => Ok(p),
            Ok(p) => Err(ContinueReason::BelowThreshold {
                probability: p,
                threshold: self.settings.threshold,
            }),
            Err(failure) => {
                if failure.kind() != FailureKind::NothingToShow {
                    tracing::warn!(
                        kind = failure.kind().label(),
                        failure = %scrub(failure.message()),
                        "compaction probe failed; continuing (fail-open)"
                    );
                }
                Err(ContinueReason::ProbeFailed { failure })
            }
        }
    }

    /// Asks the decision model once (with its span and deadline) and validates p.
    async fn ask(&self, state: Option<DecisionState>, input: GateInput) -> Asked {
        // The gate counted completed turns, but the session read after it shows none (it
        // changed in between): there is nothing to ask about, so no call is made.
        let Some(state) = state else {
            return Asked {
                request: None,
                answer: None,
                result: Err(Failure::new(
                    FailureKind::NothingToShow,
                    "no completed turn to show the decision model: the session changed \
                     between the gate and the read; no call made",
                )),
            };
        };
        let request = ProbeRequest::new(self.settings.decision_model.clone(), state);
        let info = self.decision.info();
        let span = self.telemetry.start_probe(&ProbeStart {
            model: &info,
            request: &request,
            threshold: self.settings.threshold,
            completed_turns: input.completed_turns_since_compaction,
            prompt_tokens: input.coordinator_prompt_tokens.unwrap_or(0),
        });
        let answer = match within(
            self.clock.sleep(self.probe_deadline),
            self.decision.decide(&request),
        )
        .await
        {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(e)) => Err(Failure::from_adapter("decision model failed", e)),
            None => Err(deadline_passed("decision model", self.probe_deadline)),
        };
        let result = match &answer {
            Ok(a) => Probability::new(a.probability)
                .map_err(|e| Failure::new(FailureKind::InvalidProbability, e.to_string())),
            Err(f) => Err(f.clone()),
        };
        let probability = result.as_ref().ok().copied();
        span.finish(&ProbeEnd {
            probability,
            verdict: probability.map_or(Verdict::Continue, |p| verdict(p, self.settings.threshold)),
            answer: answer.as_ref().ok(),
            failure: result.as_ref().err(),
        });
        Asked {
            request: Some(request),
            answer: answer.ok(),
            result,
        }
    }

    /// Shadow mode: probes as a real evaluation would (also at the backstop), records the
    /// decision through the store and compacts nothing.
    pub(super) async fn shadow(
        &self,
        session: &Session,
        state: Option<DecisionState>,
        forced: bool,
        input: GateInput,
    ) -> Outcome {
        let asked = self.ask(state, input).await;
        let probability = asked.result.as_ref().ok().copied();
        let record = DecisionRecord {
            recorded_at: self.clock.now(),
            revision: session.revision,
            // Shadow mode never compacts, so the completed turns since the live compaction
            // are turn N (since the session's start, unless it was compacted before).
            turn: input.completed_turns_since_compaction,
            completed_turns_since_compaction: input.completed_turns_since_compaction,
            coordinator_prompt_tokens: input.coordinator_prompt_tokens,
            backstop: forced,
            threshold: self.settings.threshold,
            probability: probability.map(Probability::value),
            verdict: probability.map(|p| match verdict(p, self.settings.threshold) {
                Verdict::Compress => "COMPRESS".to_owned(),
                Verdict::Continue => "CONTINUE".to_owned(),
            }),
            model: self.decision.info().model,
            served_model: asked.answer.and_then(|a| a.served_model),
            state_hash: asked
                .request
                .as_ref()
                .map(|r| state_hash(&r.state))
                .unwrap_or_default(),
            failure: asked.result.as_ref().err().cloned(),
        };
        let stored = match self
            .store
            .record_decision(&session.key, record.clone())
            .await
        {
            Ok(()) => None,
            Err(e) => {
                let failure = Failure::from_store(e);
                tracing::warn!(
                    kind = failure.kind().label(),
                    failure = %scrub(failure.message()),
                    "shadow decision not recorded (fail-open)"
                );
                Some(failure)
            }
        };
        Outcome::Shadowed {
            decision: Box::new(record),
            not_recorded: stored,
        }
    }
}

/// One probe's request, answer and validated p.
struct Asked {
    request: Option<ProbeRequest>,
    answer: Option<crate::ports::DecisionAnswer>,
    result: Result<Probability, Failure>,
}

/// A stable hash of the decision state as sent (FNV-1a 64 over its JSON), in hex: shadow
/// records name the exact state without storing it.
pub(crate) fn state_hash(state: &crate::state::DecisionState) -> String {
    let json = serde_json::to_string(state).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in json.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}
