//! No open turns (issue 28): a turn whose query has no reply — the process stopped mid-stream,
//! before any reply, partial or error, was stored — is closed by an `interrupted` reply, so the
//! history alternates and the coordinator's prompt and the summarizer see that question as
//! unanswered. Before each turn for its session, and at start for every session the store
//! lists as open and quiet ([`Server::close_open_turns`]).

use std::time::Duration;

use compaction_core::{
    AssembledContext, ContextEntry, Event, EventBuilder, SessionKey, StoreError, Timestamp,
};

use super::server::{AppState, Server};
use super::sessions::append_latest;

/// The session's context for a new turn, after closing a turn a crash left open.
pub(super) async fn close_open_turn(
    s: &AppState,
    key: &SessionKey,
    events: &EventBuilder<'_>,
) -> Result<AssembledContext, StoreError> {
    let context = s.store.load_context(key).await?;
    let Some(open) = open_invocation(&context) else {
        return Ok(context);
    };
    tracing::info!(%key, invocation = %open, "closing a turn left without a reply");
    append_latest(s, key, events.interrupted(&open)).await?;
    s.store.load_context(key).await
}

/// The invocation of the newest turn when it has no reply: its last event is the user's query,
/// or a tool call or result of that turn (the recall tool runs inside a turn).
fn open_invocation(context: &AssembledContext) -> Option<String> {
    match context.entries.last() {
        Some(ContextEntry::Event(last)) if is_query(last) || is_tool_step(last) => {
            Some(last.invocation_id.clone())
        }
        _ => None,
    }
}

/// A user's query: authored by the user, with text (a tool result is authored by the user too,
/// but carries a function response).
fn is_query(event: &Event) -> bool {
    event.author == "user"
        && event.actions.compaction.is_none()
        && event.content.as_ref().is_some_and(|c| {
            c.parts.iter().any(|p| p.text.is_some())
                && c.parts.iter().all(|p| p.function_response.is_none())
        })
}

/// A tool call or a tool result inside a turn (no text of its own, no error).
fn is_tool_step(event: &Event) -> bool {
    event.error_code.is_none()
        && event.content.as_ref().is_some_and(|c| {
            !c.parts.is_empty()
                && c.parts
                    .iter()
                    .all(|p| p.function_call.is_some() || p.function_response.is_some())
        })
}

/// What [`Server::close_open_turns`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenTurnSweep {
    /// The store cannot list its sessions (ADK's layouts): open turns are closed before each
    /// session's next turn only.
    Unsupported,
    /// `closed` of the `listed` sessions had a turn without a reply.
    Done {
        /// Sessions the store listed as open and quiet.
        listed: usize,
        /// Turns closed by an `interrupted` reply.
        closed: usize,
    },
}

impl Server {
    /// Closes the turns a crash left open: every session the store lists as having an open
    /// turn and no append for `quiet_for` whose newest turn has no reply gets an `interrupted`
    /// reply. Run it at start, before serving. `quiet_for` protects a turn another replica
    /// on the same store is still streaming (its reply is appended when it ends): a reply
    /// that streams for longer than `quiet_for` would be closed as interrupted.
    pub async fn close_open_turns(&self, quiet_for: Duration) -> Result<OpenTurnSweep, StoreError> {
        let s = &self.state;
        let now = s.clock.now().seconds();
        let before = Timestamp::new(now - quiet_for.as_secs_f64()).unwrap_or(s.clock.now());
        let Some(keys) = s.store.open_turns(before).await? else {
            return Ok(OpenTurnSweep::Unsupported);
        };
        let events = EventBuilder::new(
            s.clock.as_ref(),
            s.ids.as_ref(),
            s.options.coordinator_author.clone(),
        );
        let mut closed = 0;
        for key in &keys {
            let context = s.store.load_context(key).await?;
            if let Some(open) = open_invocation(&context) {
                tracing::info!(%key, invocation = %open, "closing a turn a crash left open");
                append_latest(s, key, events.interrupted(&open)).await?;
                closed += 1;
            }
        }
        Ok(OpenTurnSweep::Done {
            listed: keys.len(),
            closed,
        })
    }
}

/// The bound [`Server::close_open_turns`] is usually given: ten minutes without an append.
pub const DEFAULT_QUIET_FOR: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use compaction_core::testing::{SequentialIds, SteppingClock};
    use serde_json::json;

    use super::*;

    fn open_after(events: Vec<Event>) -> Option<String> {
        let context = AssembledContext {
            entries: events
                .into_iter()
                .map(|e| ContextEntry::Event(Box::new(e)))
                .collect(),
        };
        open_invocation(&context)
    }

    #[test]
    fn a_turn_ending_in_a_tool_step_is_open_and_one_ending_in_a_reply_is_not() {
        let (clock, ids) = (SteppingClock::starting_at(1_000), SequentialIds::default());
        let b = EventBuilder::new(&clock, &ids, "coordinator");
        let query = || b.user_query("inv-1", "Which sensors drift?");
        let call = || b.tool_call("inv-1", "fc-1", "recall_history", json!({"query": "drift"}));
        let result = || b.tool_result("inv-1", "fc-1", "recall_history", "turn 2: thermistors");
        let open = Some("inv-1".to_owned());

        assert_eq!(open_after(vec![query()]), open, "a query alone");
        assert_eq!(
            open_after(vec![query(), call()]),
            open,
            "ends in a tool call"
        );
        assert_eq!(
            open_after(vec![query(), call(), result()]),
            open,
            "ends in a tool result"
        );
        let replied = vec![
            query(),
            call(),
            result(),
            b.reply("inv-1", "Thermistors.", None),
        ];
        assert_eq!(open_after(replied), None, "answered");
        let failed = vec![query(), call(), b.error("inv-1", "UPSTREAM_ERROR", "502")];
        assert_eq!(open_after(failed), None, "an error closes the turn");
        assert_eq!(open_after(vec![query(), b.interrupted("inv-1")]), None);
        assert_eq!(open_after(Vec::new()), None, "an empty session");
    }
}
