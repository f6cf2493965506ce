//! In-memory fakes of every port and an event factory, for tests here and in consuming
//! crates (feature `test-support`). The fakes count their calls so tests can assert that a
//! fast exit made none.
//!
//! `models` holds the decision model and summarizer fakes, `store` the in-memory store (the
//! oracle the real stores are proptested against), `telemetry` the recording spans, the
//! stepping clock and the sequential ids.

mod models;
mod store;
mod telemetry;

pub use models::{RecordingSummarizer, ScriptedDecisionModel};
pub use store::InMemoryStore;
pub use telemetry::{
    ProbeRecord, RecordingTelemetry, SequentialIds, SteppingClock, SummarizeRecord,
};

use std::sync::Mutex;

use serde_json::json;

use crate::event::{
    Actions, Content, Event, EventCompaction, FunctionCall, FunctionResponse, Part,
};
use crate::time::Timestamp;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Builds ADK-shaped events with strictly increasing timestamps (one second apart).
#[derive(Debug)]
pub struct EventFactory {
    next_ts: f64,
    next_id: u64,
}

impl Default for EventFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl EventFactory {
    /// Starts at 2023-11-14T22:13:20Z.
    pub fn new() -> Self {
        Self::starting_at(1_700_000_000.0)
    }

    /// Starts at `seconds` since the epoch (for stores that want events later than the wall
    /// clock, such as an ADK session created now).
    pub fn starting_at(seconds: f64) -> Self {
        EventFactory {
            next_ts: seconds,
            next_id: 0,
        }
    }

    /// The next timestamp, advancing the factory's clock.
    pub fn tick(&mut self) -> Timestamp {
        let ts = Timestamp::new(self.next_ts).unwrap_or(Timestamp::EPOCH);
        self.next_ts += 1.0;
        ts
    }

    fn base(&mut self, invocation: &str, author: &str) -> Event {
        self.next_id += 1;
        let ts = self.tick();
        Event::new(format!("e{}", self.next_id), invocation, author, ts)
    }

    /// A user text event.
    pub fn user(&mut self, invocation: &str, text: &str) -> Event {
        self.base(invocation, "user")
            .with_content(Content::user_text(text))
    }

    /// A coordinator text event.
    pub fn model(&mut self, invocation: &str, text: &str) -> Event {
        self.base(invocation, "coordinator")
            .with_content(Content::model_text(text))
    }

    /// A coordinator tool call.
    pub fn function_call(&mut self, invocation: &str, name: &str) -> Event {
        let part = Part {
            function_call: Some(FunctionCall {
                id: Some(format!("fc-{}", self.next_id + 1)),
                name: name.to_owned(),
                args: Some(json!({"query": "q"})),
            }),
            ..Part::default()
        };
        self.base(invocation, "coordinator").with_content(Content {
            role: Some("model".into()),
            parts: vec![part],
        })
    }

    /// A tool result.
    pub fn function_response(&mut self, invocation: &str, name: &str, result: &str) -> Event {
        let part = Part {
            function_response: Some(FunctionResponse {
                id: None,
                name: name.to_owned(),
                response: Some(json!({ "result": result })),
            }),
            ..Part::default()
        };
        self.base(invocation, "user").with_content(Content {
            role: Some("user".into()),
            parts: vec![part],
        })
    }

    /// A user query and the coordinator's answer.
    pub fn conversational_turn(
        &mut self,
        invocation: &str,
        query: &str,
        answer: &str,
    ) -> Vec<Event> {
        vec![self.user(invocation, query), self.model(invocation, answer)]
    }

    /// A research turn: query, tool call, a scoped sub-agent loop, the synthesis as a tool
    /// result, and the coordinator's answer.
    pub fn research_turn(&mut self, invocation: &str, query: &str, synthesis: &str) -> Vec<Event> {
        let scope = format!("search_pipeline:fc-{invocation}");
        vec![
            self.user(invocation, query),
            self.function_call(invocation, "search_library"),
            self.model(invocation, "ReAct: searching chunks")
                .with_scope(scope.clone()),
            self.function_response(invocation, "retrieve", "raw chunk payload")
                .with_scope(scope),
            self.function_response(invocation, "search_library", synthesis),
            self.model(invocation, &format!("Findings for: {query}")),
        ]
    }

    /// A rewind event undoing `target` and everything after it.
    pub fn rewind(&mut self, invocation: &str, target: &str) -> Event {
        let mut e = self.base(invocation, "user");
        e.actions.rewind_before_invocation_id = Some(target.to_owned());
        e
    }

    /// A compaction event covering `[start, end]`.
    pub fn compaction(
        &mut self,
        invocation: &str,
        start: Timestamp,
        end: Timestamp,
        summary: &str,
    ) -> Event {
        let mut e = self.base(invocation, "user");
        e.actions = Actions {
            compaction: Some(EventCompaction {
                start_timestamp: start,
                end_timestamp: end,
                compacted_content: Content::model_text(summary),
            }),
            ..Actions::default()
        };
        e
    }
}
