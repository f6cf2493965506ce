//! Events as a host appends them: the coordinator's side of a turn, stamped by the host's
//! [`Clock`] and named by its [`IdGenerator`], so that timestamps follow the port's rule
//! (strictly increasing) without the host writing ADK's JSON by hand.
//!
//! ```
//! use compaction_core::{Clock, EventBuilder, IdGenerator, Timestamp, Sleep};
//! # struct Ticks(std::sync::atomic::AtomicU64);
//! # impl Clock for Ticks {
//! #     fn now(&self) -> Timestamp {
//! #         Timestamp::new(self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) as f64).unwrap()
//! #     }
//! #     fn sleep(&self, _: std::time::Duration) -> Sleep { Box::pin(std::future::pending()) }
//! # }
//! # struct Ids(std::sync::atomic::AtomicU64);
//! # impl IdGenerator for Ids {
//! #     fn next_id(&self) -> String { format!("id{}", self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)) }
//! # }
//! # let clock = Ticks(1_800_000_000.into());
//! # let ids = Ids(0.into());
//! let events = EventBuilder::new(&clock, &ids, "coordinator");
//! let query = events.user_query("inv-1", "What limits fast charging?");
//! let reply = events.reply("inv-1", "Lithium plating at the anode.", Some(41_200));
//! assert!(query.is_user() && reply.timestamp > query.timestamp);
//! assert_eq!(reply.prompt_tokens(), Some(41_200));
//! ```

use serde_json::{Value, json};

use crate::event::{Content, Event, FunctionCall, FunctionResponse, Part, USER_AUTHOR};
use crate::ports::{Clock, IdGenerator};

/// The `error_code` of [`EventBuilder::interrupted`].
pub const INTERRUPTED_CODE: &str = "INTERRUPTED";
/// The text of [`EventBuilder::interrupted`].
pub(crate) const INTERRUPTED_TEXT: &str =
    "(no reply: this turn was interrupted before it was answered)";

/// The author of a sub-agent step that names none.
pub(crate) const PIPELINE_AUTHOR: &str = "search_pipeline_agent";

/// One turn as a host scripts it (a replayed transcript, a labelled session): what
/// [`EventBuilder::turn`] turns into the events a coordinator would have recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptedTurn {
    /// The user's query.
    pub user: String,
    /// The coordinator's tool calls, in order, each answered by its result.
    pub tools: Vec<ScriptedTool>,
    /// Sub-agent steps as `(author, text)`; an empty author is `search_pipeline_agent`. They follow the first tool call, scoped to
    /// `search_pipeline:<its call id>`, or to `search_pipeline:<invocation>` when there is no
    /// call: scoped events never reach a model.
    pub pipeline: Vec<(String, String)>,
    /// The coordinator's final answer.
    pub answer: String,
    /// A state delta the answer records (`RESEARCH_TURN_HISTORY`, say).
    pub state_delta: Option<Value>,
}

/// A tool call of a [`ScriptedTurn`] and its result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptedTool {
    /// The call id; `None` is `fc-<invocation>-<index>`.
    pub call_id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The call's arguments.
    pub args: Option<Value>,
    /// What the tool answered (a research synthesis, say).
    pub result: String,
}

/// Builds a host's events with fresh ids and timestamps.
pub struct EventBuilder<'a> {
    clock: &'a dyn Clock,
    ids: &'a dyn IdGenerator,
    coordinator: String,
}

impl std::fmt::Debug for EventBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBuilder")
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

impl<'a> EventBuilder<'a> {
    /// A builder whose replies are authored by `coordinator` (the agent's name).
    pub fn new(
        clock: &'a dyn Clock,
        ids: &'a dyn IdGenerator,
        coordinator: impl Into<String>,
    ) -> Self {
        EventBuilder {
            clock,
            ids,
            coordinator: coordinator.into(),
        }
    }

    fn event(&self, invocation: &str, author: &str) -> Event {
        Event::new(self.ids.next_id(), invocation, author, self.clock.now())
    }

    /// The user's query: it opens a turn.
    pub fn user_query(&self, invocation: &str, text: &str) -> Event {
        self.event(invocation, USER_AUTHOR)
            .with_content(Content::user_text(text))
    }

    /// The coordinator's final text reply, with the prompt tokens the model reported (what
    /// the envelope gate reads). It completes the turn.
    pub fn reply(&self, invocation: &str, text: &str, prompt_tokens: Option<u64>) -> Event {
        let event = self
            .event(invocation, &self.coordinator)
            .with_content(Content::model_text(text));
        match prompt_tokens {
            Some(tokens) => event.with_prompt_tokens(tokens),
            None => event,
        }
    }

    /// A reply cut short (the client went away mid-stream): marked partial, so it never
    /// completes the turn.
    pub fn partial_reply(&self, invocation: &str, text: &str) -> Event {
        let mut event = self.reply(invocation, text, None);
        event.partial = Some(true);
        event
    }

    /// Closes a turn whose query got no reply at all (the server stopped mid-stream): a reply
    /// saying so, with `error_code = "INTERRUPTED"`, so the history alternates and every reader
    /// (the coordinator's prompt, the summarizer) sees the question as unanswered. It never
    /// completes the turn.
    pub fn interrupted(&self, invocation: &str) -> Event {
        let mut event = self.reply(invocation, INTERRUPTED_TEXT, None);
        event.error_code = Some(INTERRUPTED_CODE.to_owned());
        event
    }

    /// The coordinator failed this turn (`error_code`, for example `UPSTREAM_ERROR`): an
    /// errored turn never counts as completed.
    pub fn error(&self, invocation: &str, error_code: &str, message: &str) -> Event {
        let mut event = self.event(invocation, &self.coordinator);
        event.error_code = Some(error_code.to_owned());
        event.extra.insert(
            "error_message".to_owned(),
            Value::String(message.to_owned()),
        );
        event
    }

    /// The coordinator calls tool `name` (call id `call_id`) with `args`.
    pub fn tool_call(&self, invocation: &str, call_id: &str, name: &str, args: Value) -> Event {
        self.call(invocation, call_id, name, Some(args))
    }

    fn call(&self, invocation: &str, call_id: &str, name: &str, args: Option<Value>) -> Event {
        let part = Part {
            function_call: Some(FunctionCall {
                id: Some(call_id.to_owned()),
                name: name.to_owned(),
                args,
            }),
            ..Part::default()
        };
        self.event(invocation, &self.coordinator)
            .with_content(Content {
                role: Some("model".to_owned()),
                parts: vec![part],
            })
    }

    /// Tool `name` answers call `call_id` with `result` (a research synthesis, say).
    pub fn tool_result(&self, invocation: &str, call_id: &str, name: &str, result: &str) -> Event {
        let part = Part {
            function_response: Some(FunctionResponse {
                id: Some(call_id.to_owned()),
                name: name.to_owned(),
                response: Some(json!({ "result": result })),
            }),
            ..Part::default()
        };
        self.event(invocation, USER_AUTHOR).with_content(Content {
            role: Some("user".to_owned()),
            parts: vec![part],
        })
    }

    /// Every event of a scripted turn, in the order a coordinator records them: the query; each
    /// tool call, followed (the first one) by the scoped sub-agent steps, then its result; the
    /// answer, carrying the turn's state delta.
    pub fn turn(&self, invocation: &str, turn: &ScriptedTurn) -> Vec<Event> {
        let mut events = vec![self.user_query(invocation, &turn.user)];
        let step = |scope: &str, (author, text): &(String, String)| {
            let author = if author.is_empty() {
                PIPELINE_AUTHOR
            } else {
                author
            };
            self.event(invocation, author)
                .with_content(Content::model_text(text))
                .with_scope(format!("search_pipeline:{scope}"))
        };
        for (i, tool) in turn.tools.iter().enumerate() {
            let call_id = match &tool.call_id {
                Some(id) => id.clone(),
                None => format!("fc-{invocation}-{i}"),
            };
            events.push(self.call(invocation, &call_id, &tool.name, tool.args.clone()));
            if i == 0 {
                events.extend(turn.pipeline.iter().map(|s| step(&call_id, s)));
            }
            events.push(self.tool_result(invocation, &call_id, &tool.name, &tool.result));
        }
        if turn.tools.is_empty() {
            events.extend(turn.pipeline.iter().map(|s| step(invocation, s)));
        }
        let mut answer = self.reply(invocation, &turn.answer, None);
        if let Some(delta) = &turn.state_delta {
            answer
                .actions
                .extra
                .insert("state_delta".to_owned(), delta.clone());
        }
        events.push(answer);
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{SequentialIds, SteppingClock};

    fn script(tools: usize) -> ScriptedTurn {
        ScriptedTurn {
            user: "Which sensors drift in the cold?".into(),
            tools: (0..tools)
                .map(|i| ScriptedTool {
                    call_id: (i == 1).then(|| "given-id".to_owned()),
                    name: format!("tool{i}"),
                    args: Some(json!({ "q": i })),
                    result: format!("result {i}"),
                })
                .collect(),
            pipeline: vec![
                (String::new(), "step one".into()),
                ("ranker".into(), "step two".into()),
            ],
            answer: "Thermistors drift below -20 C.".into(),
            state_delta: Some(json!({ "k": 1 })),
        }
    }

    #[test]
    fn a_scripted_turn_records_calls_results_and_scoped_steps_in_order() {
        let (clock, ids) = (SteppingClock::starting_at(100), SequentialIds::default());
        let events = EventBuilder::new(&clock, &ids, "coord").turn("inv", &script(2));
        let shape: Vec<(String, Option<String>)> = events
            .iter()
            .map(|e| (e.author.clone(), e.isolation_scope.clone()))
            .collect();
        let scoped = |a: &str| (a.to_owned(), Some("search_pipeline:fc-inv-0".to_owned()));
        let plain = |a: &str| (a.to_owned(), None);
        assert_eq!(
            shape,
            [
                plain("user"),
                plain("coord"),
                scoped(PIPELINE_AUTHOR),
                scoped("ranker"),
                plain("user"),
                plain("coord"),
                plain("user"),
                plain("coord"),
            ]
        );
        let call = |i: usize| events[i].content.as_ref().unwrap().parts[0].clone();
        assert_eq!(
            call(5).function_call.unwrap().id.as_deref(),
            Some("given-id")
        );
        assert_eq!(
            call(6).function_response.unwrap().id.as_deref(),
            Some("given-id")
        );
        let answer = events.last().unwrap();
        assert_eq!(answer.actions.extra["state_delta"], json!({ "k": 1 }));
        assert!(events.windows(2).all(|w| w[0].timestamp < w[1].timestamp));
    }

    #[test]
    fn without_a_tool_call_the_steps_are_scoped_to_the_invocation() {
        let (clock, ids) = (SteppingClock::starting_at(100), SequentialIds::default());
        let events = EventBuilder::new(&clock, &ids, "coord").turn("inv", &script(0));
        let scopes: Vec<Option<&str>> = events
            .iter()
            .map(|e| e.isolation_scope.as_deref())
            .collect();
        let step = Some("search_pipeline:inv");
        assert_eq!(scopes, [None, step, step, None]);
    }
}
