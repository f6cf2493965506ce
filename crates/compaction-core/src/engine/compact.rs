//! The compression step: the rolling-consolidation summary (with its span and deadline), the
//! compaction event and its engine-owned metadata, and the append with the revision read.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::Engine;
use crate::failure::{Failure, FailureKind};
use crate::outcome::{Compaction, Outcome};
use crate::plan::CompactionPlan;
use crate::ports::{
    StoreError, SummarizeEnd, SummarizeSpan, SummarizeStart, Summary, SummaryRequest,
};
use crate::probe::Probability;
use crate::scrub::scrub;
use crate::session::Session;

impl Engine {
    /// The session's turn number of the plan's first turn, when the store can count the
    /// turns before it; a store failure only costs the summary its turn pointers.
    async fn first_turn(&self, session: &Session, plan: &CompactionPlan) -> Option<usize> {
        let first = plan.slice.first()?;
        match self.store.turns_before(&session.key, first.timestamp).await {
            Ok(count) => count.map(|n| n + 1),
            Err(e) => {
                tracing::debug!(failure = %scrub(&e.to_string()), "turn numbers unknown");
                None
            }
        }
    }

    /// Summarizes the plan's slice, then appends the compaction event against the revision
    /// read; every failure becomes the outcome that says so (fail-open).
    pub(super) async fn compact(
        &self,
        session: &Session,
        plan: &CompactionPlan,
        forced: bool,
        probability: Option<Probability>,
    ) -> Outcome {
        let (summary, span) = match self.summarize(session, plan, forced).await {
            Ok(done) => done,
            Err((span, failure)) => return summarizer_failed(span, failure, forced, probability),
        };
        let metadata = compaction_metadata(plan, &summary, forced, probability);
        let event = plan.compaction_event(
            &summary.text,
            self.ids.next_id(),
            self.ids.next_id(),
            self.clock.now(),
            metadata,
        );
        let appended = self
            .store
            .append(&session.key, session.revision, event.clone())
            .await;
        match appended {
            Ok(revision) => {
                span.finish(&SummarizeEnd {
                    summary: Some(&summary),
                    failure: None,
                });
                let compaction = Compaction {
                    event,
                    revision,
                    slice_turns: plan.slice_turn_count(),
                    probability,
                };
                if forced {
                    Outcome::Forced(compaction)
                } else {
                    Outcome::Compressed(compaction)
                }
            }
            Err(e) => {
                let stale = matches!(e, StoreError::Stale { .. });
                let failure = Failure::from_store(e);
                span.finish(&SummarizeEnd {
                    summary: Some(&summary),
                    failure: Some(&failure),
                });
                append_failed(failure, stale, probability)
            }
        }
    }

    /// The rolling-consolidation call with its span and deadline: a non-empty summary and the
    /// open span, or the span and why there is no summary.
    async fn summarize(
        &self,
        session: &Session,
        plan: &CompactionPlan,
        forced: bool,
    ) -> Result<(Summary, Box<dyn SummarizeSpan>), (Box<dyn SummarizeSpan>, Failure)> {
        let request = SummaryRequest::new(
            self.settings.summarizer_model.clone(),
            plan.summarizer_prompt(),
            plan.previous.as_ref().map(|p| p.summary.clone()),
            plan.new_turns_text(),
            plan.turns.clone(),
        )
        .with_first_turn(self.first_turn(session, plan).await);
        let info = self.summarizer.info();
        let span = self.telemetry.start_summarize(&SummarizeStart {
            model: &info,
            request: &request,
            range: (plan.start_timestamp, plan.end_timestamp),
            slice_turns: plan.slice_turn_count(),
            retained_turns: plan.retained_turns,
            forced,
        });
        let answer = within(
            self.clock.sleep(self.summarize_deadline),
            self.summarizer.summarize(&request),
        )
        .await;
        match answer {
            Some(Ok(s)) if !s.text.trim().is_empty() => Ok((s, span)),
            Some(Ok(_)) => Err((
                span,
                Failure::new(
                    FailureKind::RejectedSummary,
                    "summarizer returned an empty summary",
                ),
            )),
            Some(Err(e)) => Err((span, Failure::from_adapter("summarizer failed", e))),
            None => Err((span, deadline_passed("summarizer", self.summarize_deadline))),
        }
    }
}

fn summarizer_failed(
    span: Box<dyn SummarizeSpan>,
    failure: Failure,
    forced: bool,
    probability: Option<Probability>,
) -> Outcome {
    tracing::warn!(
        kind = failure.kind().label(),
        failure = %scrub(failure.message()),
        "compaction summarizer failed; nothing written (fail-open)"
    );
    span.finish(&SummarizeEnd {
        summary: None,
        failure: Some(&failure),
    });
    Outcome::SummarizerFailed {
        failure,
        forced,
        probability,
    }
}

/// The compaction event's engine-owned metadata: how it was decided, what it folded, what it
/// consolidates, and the summarizer's receipt.
fn compaction_metadata(
    plan: &CompactionPlan,
    summary: &Summary,
    forced: bool,
    probability: Option<Probability>,
) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("forced".into(), Value::Bool(forced));
    metadata.insert("slice_turns".into(), json!(plan.slice_turn_count()));
    metadata.insert("retained_turns".into(), json!(plan.retained_turns));
    if let Some(p) = probability {
        metadata.insert("probability".into(), json!(p.value()));
    }
    if let Some(previous) = &plan.previous {
        metadata.insert("consolidates".into(), json!(previous.event_id));
    }
    if let Some(receipt) = &summary.receipt {
        metadata.insert(crate::receipt::RECEIPT_KEY.into(), receipt.to_value());
    }
    metadata
}

/// A refused append: dropped when the session moved on (another writer won), else a store
/// failure.
fn append_failed(failure: Failure, stale: bool, probability: Option<Probability>) -> Outcome {
    if stale {
        tracing::info!(
            failure = %scrub(failure.message()),
            "compaction dropped: session moved on"
        );
        Outcome::StaleDropped {
            failure,
            probability,
        }
    } else {
        store_failed(failure)
    }
}

pub(super) fn store_failure(error: StoreError) -> Outcome {
    store_failed(Failure::from_store(error))
}

fn store_failed(failure: Failure) -> Outcome {
    tracing::warn!(
        kind = failure.kind().label(),
        failure = %scrub(failure.message()),
        "compaction store failed; nothing written (fail-open)"
    );
    Outcome::StoreFailed { failure }
}

pub(super) fn deadline_passed(what: &str, deadline: Duration) -> Failure {
    Failure::new(
        FailureKind::Timeout,
        format!(
            "{what} did not answer within the engine's deadline of {} ms",
            deadline.as_millis()
        ),
    )
}

/// Runs `call` until it completes or `deadline` does, whichever is first; `None` when the
/// deadline came first (the call is then dropped, so a hung adapter is cancelled).
pub(super) async fn within<T>(
    deadline: crate::ports::Sleep,
    call: impl Future<Output = T>,
) -> Option<T> {
    let mut call = pin!(call);
    let mut deadline = deadline;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(value) = call.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}
