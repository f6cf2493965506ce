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
        let part = Part {
            function_call: Some(FunctionCall {
                id: Some(call_id.to_owned()),
                name: name.to_owned(),
                args: Some(args),
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
}
