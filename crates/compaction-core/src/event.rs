//! ADK's event shape: content parts, usage, actions (compaction, rewind), isolation scope.
//!
//! Serialization writes ADK's snake_case JSON and omits absent fields; deserialization also
//! accepts the camelCase spelling ADK's Pydantic models accept. Fields this crate does not
//! model are kept in `extra` maps so a read-modify-write never drops them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::time::Timestamp;

/// The author ADK gives to events the user wrote (and to compaction events).
pub(crate) const USER_AUTHOR: &str = "user";

/// The key under the compaction event's `custom_metadata` where the engine records how
/// the compaction came about. ADK refuses unknown keys inside `actions`, so engine-private
/// data lives only here.
pub(crate) const METADATA_KEY: &str = "adaptive_compaction";

/// One event of a session's history, in Google ADK's JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique id of the event within its session.
    pub id: String,
    /// The invocation (one user turn's agent run) that produced the event.
    #[serde(alias = "invocationId")]
    pub invocation_id: String,
    /// `"user"` for user input and compaction events, otherwise the agent's name.
    pub author: String,
    /// When the event was produced, in epoch seconds.
    pub timestamp: Timestamp,
    /// The message content, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// `Some(scope)` for events of an isolated sub-pipeline (`search_pipeline:<fc_id>`); `None`
    /// for the coordinator's own dialogue.
    #[serde(
        default,
        alias = "isolationScope",
        skip_serializing_if = "Option::is_none"
    )]
    pub isolation_scope: Option<String>,
    /// True for a streamed chunk that a later event completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// Token usage the model reported for the call that produced this event.
    #[serde(
        default,
        alias = "usageMetadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage_metadata: Option<UsageMetadata>,
    /// Side effects: compaction, rewind, and whatever else ADK records.
    #[serde(default, skip_serializing_if = "Actions::is_empty")]
    pub actions: Actions,
    /// An error code when the model call failed.
    #[serde(default, alias = "errorCode", skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Every other field of ADK's event, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message: a role and its parts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Content {
    /// `"user"` or `"model"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts, in order.
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One part of a message: text, a function call or a function response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Part {
    /// Plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A tool call the model made.
    #[serde(
        default,
        alias = "functionCall",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_call: Option<FunctionCall>,
    /// The result of a tool call.
    #[serde(
        default,
        alias = "functionResponse",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_response: Option<FunctionResponse>,
    /// Other part kinds (`thought`, `inline_data`, …), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Call id, matched by the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

/// A tool result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionResponse {
    /// Call id this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Result as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
}

/// Token counts the model reported (ADK's `usage_metadata`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UsageMetadata {
    /// Tokens in the prompt of the call that produced the event.
    #[serde(
        default,
        alias = "promptTokenCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub prompt_token_count: Option<u64>,
    /// Tokens generated.
    #[serde(
        default,
        alias = "candidatesTokenCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub candidates_token_count: Option<u64>,
    /// Total tokens.
    #[serde(
        default,
        alias = "totalTokenCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_token_count: Option<u64>,
    /// Other usage fields, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The actions attached to an event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Actions {
    /// A compaction: this event replaces `[start_timestamp, end_timestamp]` with a summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<EventCompaction>,
    /// A rewind: this event and everything from the first event of the named invocation on are
    /// dropped from the history.
    #[serde(
        default,
        alias = "rewindBeforeInvocationId",
        skip_serializing_if = "Option::is_none"
    )]
    pub rewind_before_invocation_id: Option<String>,
    /// Other actions (`state_delta`, `transfer_to_agent`, …), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Actions {
    /// True when no action is set (then ADK's JSON may omit `actions`).
    pub fn is_empty(&self) -> bool {
        self.compaction.is_none()
            && self.rewind_before_invocation_id.is_none()
            && self.extra.is_empty()
    }
}

/// ADK's `EventCompaction`: a summary that stands for every event in an inclusive time range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCompaction {
    /// First covered timestamp (inclusive).
    #[serde(alias = "startTimestamp")]
    pub start_timestamp: Timestamp,
    /// Last covered timestamp (inclusive).
    #[serde(alias = "endTimestamp")]
    pub end_timestamp: Timestamp,
    /// The summary, as a `model` message.
    #[serde(alias = "compactedContent")]
    pub compacted_content: Content,
}

impl EventCompaction {
    /// True when `[start, end]` of `self` contains that of `other`.
    pub fn contains_range_of(&self, other: &EventCompaction) -> bool {
        self.start_timestamp <= other.start_timestamp && other.end_timestamp <= self.end_timestamp
    }

    /// True when `ts` lies in the inclusive covered range.
    pub fn covers(&self, ts: Timestamp) -> bool {
        self.start_timestamp <= ts && ts <= self.end_timestamp
    }

    /// The summary text (all text parts, joined by newlines).
    pub fn summary_text(&self) -> String {
        self.compacted_content.text()
    }
}

impl Content {
    /// A `model` message with one text part.
    pub fn model_text(text: impl Into<String>) -> Self {
        Content {
            role: Some("model".to_owned()),
            parts: vec![Part::text(text)],
        }
    }

    /// A `user` message with one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Content {
            role: Some(USER_AUTHOR.to_owned()),
            parts: vec![Part::text(text)],
        }
    }

    /// The text parts joined by newlines (empty when there are none). A model's thought parts
    /// are its reasoning, not its message, and are left out.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.message_texts().collect();
        texts.join("\n")
    }

    /// True when some non-thought part carries non-empty text.
    pub fn has_text(&self) -> bool {
        self.message_texts().any(|t| !t.trim().is_empty())
    }

    fn message_texts(&self) -> impl Iterator<Item = &str> {
        self.parts
            .iter()
            .filter(|p| !p.is_thought())
            .filter_map(|p| p.text.as_deref())
    }

    /// True when some part is a function call or a function response.
    pub fn has_function_parts(&self) -> bool {
        self.parts
            .iter()
            .any(|p| p.function_call.is_some() || p.function_response.is_some())
    }
}

impl Part {
    /// The MIME type of an attachment part (`inline_data` or `file_data`), or
    /// `application/octet-stream` when the part names none; `None` for other parts.
    pub fn attachment_type(&self) -> Option<&str> {
        ["inline_data", "inlineData", "file_data", "fileData"]
            .iter()
            .find_map(|k| self.extra.get(*k))
            .map(|data| {
                ["mime_type", "mimeType"]
                    .iter()
                    .find_map(|k| data.get(*k).and_then(Value::as_str))
                    .unwrap_or("application/octet-stream")
            })
    }

    /// True for a model's thought (reasoning) part: Gemini's `thought: true`.
    pub fn is_thought(&self) -> bool {
        self.extra.get("thought").and_then(Value::as_bool) == Some(true)
    }

    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }
}

impl Event {
    /// A bare event with no content, usage or actions.
    pub fn new(
        id: impl Into<String>,
        invocation_id: impl Into<String>,
        author: impl Into<String>,
        timestamp: Timestamp,
    ) -> Self {
        Event {
            id: id.into(),
            invocation_id: invocation_id.into(),
            author: author.into(),
            timestamp,
            content: None,
            isolation_scope: None,
            partial: None,
            usage_metadata: None,
            actions: Actions::default(),
            error_code: None,
            extra: Map::new(),
        }
    }

    /// Sets the content (builder style).
    pub fn with_content(mut self, content: Content) -> Self {
        self.content = Some(content);
        self
    }

    /// Sets the isolation scope (builder style).
    pub fn with_scope(mut self, scope: impl Into<String>) -> Self {
        self.isolation_scope = Some(scope.into());
        self
    }

    /// Sets the reported prompt token count (builder style).
    pub fn with_prompt_tokens(mut self, tokens: u64) -> Self {
        self.usage_metadata
            .get_or_insert_with(UsageMetadata::default)
            .prompt_token_count = Some(tokens);
        self
    }

    /// True when the event belongs to the coordinator's own dialogue (no isolation scope).
    pub fn is_unscoped(&self) -> bool {
        self.isolation_scope.is_none()
    }

    /// True for a streamed chunk.
    pub fn is_partial(&self) -> bool {
        self.partial == Some(true)
    }

    /// True when the user wrote this event.
    pub fn is_user(&self) -> bool {
        self.author == USER_AUTHOR
    }

    /// The compaction this event carries, if any.
    pub fn compaction(&self) -> Option<&EventCompaction> {
        self.actions.compaction.as_ref()
    }

    /// The text of the event's content (empty when there is none).
    pub fn text(&self) -> String {
        self.content.as_ref().map(Content::text).unwrap_or_default()
    }

    /// True when the event has non-empty text content.
    pub fn has_text(&self) -> bool {
        self.content.as_ref().is_some_and(Content::has_text)
    }

    /// The MIME types of the event's attachment parts (see [`Part::attachment_type`]).
    pub fn attachment_types(&self) -> impl Iterator<Item = &str> {
        self.content
            .iter()
            .flat_map(|c| &c.parts)
            .filter_map(Part::attachment_type)
    }

    /// True when the event has content with at least one part (text, a thought, a tool call or
    /// result, anything): false for actions-only events such as a callback's state delta.
    pub fn has_parts(&self) -> bool {
        self.content.as_ref().is_some_and(|c| !c.parts.is_empty())
    }

    /// The prompt token count the event reports, if any.
    pub fn prompt_tokens(&self) -> Option<u64> {
        self.usage_metadata.as_ref()?.prompt_token_count
    }
}

/// The few fields of an event's JSON that decide which events a live tail and the gate's
/// prompt-token figure need: its timestamp, author, isolation scope, prompt tokens,
/// compaction range and rewind target. Everything else — content above all — is skipped unread, so a store
/// can outline a long history cheaply, run [`crate::live_tail_positions`] on the outlines
/// and parse only those rows whole. It accepts the same spellings as [`Event`].
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct EventOutline {
    /// The JSON's timestamp, when it has one.
    #[serde(default)]
    pub timestamp: Option<Timestamp>,
    #[serde(default)]
    author: Option<String>,
    #[serde(default, alias = "isolationScope")]
    isolation_scope: Option<String>,
    #[serde(default, alias = "usageMetadata")]
    usage_metadata: Option<UsageOutline>,
    #[serde(default)]
    actions: Option<ActionsOutline>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
struct UsageOutline {
    #[serde(default, alias = "promptTokenCount")]
    prompt_token_count: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
struct ActionsOutline {
    #[serde(default)]
    compaction: Option<CompactionOutline>,
    #[serde(default, alias = "rewindBeforeInvocationId")]
    rewind_before_invocation_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct CompactionOutline {
    #[serde(alias = "startTimestamp")]
    start_timestamp: Timestamp,
    #[serde(alias = "endTimestamp")]
    end_timestamp: Timestamp,
}

impl EventOutline {
    /// A stand-in [`Event`] carrying only the outlined fields (no content; a compaction's
    /// summary is empty), with the row's `id`, `invocation_id` and `timestamp`.
    /// The live-tail positions and the coordinator prompt tokens of stand-ins equal those of
    /// the whole events.
    pub fn into_event(
        self,
        id: impl Into<String>,
        invocation_id: impl Into<String>,
        timestamp: Timestamp,
    ) -> Event {
        let mut event = Event::new(
            id,
            invocation_id,
            self.author.unwrap_or_default(),
            timestamp,
        );
        event.isolation_scope = self.isolation_scope;
        event.usage_metadata =
            self.usage_metadata
                .and_then(|u| u.prompt_token_count)
                .map(|tokens| UsageMetadata {
                    prompt_token_count: Some(tokens),
                    ..UsageMetadata::default()
                });
        if let Some(actions) = self.actions {
            event.actions.rewind_before_invocation_id = actions.rewind_before_invocation_id;
            event.actions.compaction = actions.compaction.map(|c| EventCompaction {
                start_timestamp: c.start_timestamp,
                end_timestamp: c.end_timestamp,
                compacted_content: Content::default(),
            });
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outline_keeps_what_the_live_tail_and_the_gate_read_in_either_spelling() {
        let snake = r#"{"id":"e1","invocation_id":"i1","author":"user","timestamp":5.5,
            "content":{"role":"user","parts":[{"text":"long text"}]},
            "isolation_scope":"search_pipeline:f1","usage_metadata":{"prompt_token_count":7},
            "actions":{"rewind_before_invocation_id":"i0","compaction":{"start_timestamp":1.0,
            "end_timestamp":2.0,"compacted_content":{"role":"model","parts":[{"text":"s"}]}}}}"#;
        let camel = r#"{"id":"e1","invocationId":"i1","author":"user","timestamp":5.5,
            "isolationScope":"search_pipeline:f1","usageMetadata":{"promptTokenCount":7},
            "actions":{"rewindBeforeInvocationId":"i0","compaction":{"startTimestamp":1.0,
            "endTimestamp":2.0,"compactedContent":{"role":"model","parts":[{"text":"s"}]}}}}"#;
        for json in [snake, camel] {
            let event: Event = serde_json::from_str(json).unwrap();
            let outline: EventOutline = serde_json::from_str(json).unwrap();
            assert_eq!(outline.timestamp, Some(event.timestamp));
            let stand_in = outline.into_event("e1", "i1", event.timestamp);
            assert_eq!(stand_in.isolation_scope, event.isolation_scope);
            assert_eq!(stand_in.prompt_tokens(), Some(7));
            assert_eq!(
                stand_in.actions.rewind_before_invocation_id,
                event.actions.rewind_before_invocation_id
            );
            let (a, b) = (stand_in.compaction().unwrap(), event.compaction().unwrap());
            assert_eq!(
                (a.start_timestamp, a.end_timestamp),
                (b.start_timestamp, b.end_timestamp)
            );
            assert!(stand_in.content.is_none());
        }
        let bare: EventOutline = serde_json::from_str(r#"{"id":"x","actions":null}"#).unwrap();
        assert_eq!(bare, EventOutline::default());
    }

    #[test]
    fn thought_parts_are_not_message_text() {
        let json = r#"{"role":"model","parts":[{"text":"reasoning...","thought":true},
            {"text":"The answer."}]}"#;
        let content: Content = serde_json::from_str(json).unwrap();
        assert!(content.parts[0].is_thought() && !content.parts[1].is_thought());
        assert_eq!(content.text(), "The answer.");
        let only_thoughts: Content =
            serde_json::from_str(r#"{"parts":[{"text":"hmm","thought":true}]}"#).unwrap();
        assert!(!only_thoughts.has_text());
        assert_eq!(only_thoughts.text(), "");
    }

    #[test]
    fn accepts_camel_case_and_writes_snake_case() {
        let json = r#"{"id":"e1","invocationId":"inv","author":"user","timestamp":12.5,
            "content":{"role":"user","parts":[{"text":"hi"},{"functionCall":{"name":"f","args":{}}}]},
            "usageMetadata":{"promptTokenCount":7},
            "actions":{"rewindBeforeInvocationId":"x","stateDelta":{}},
            "branch":"b"}"#;
        let event: Event = serde_json::from_str(json).unwrap();
        assert_eq!(event.invocation_id, "inv");
        assert_eq!(event.prompt_tokens(), Some(7));
        assert_eq!(
            event.actions.rewind_before_invocation_id.as_deref(),
            Some("x")
        );
        assert!(event.actions.extra.contains_key("stateDelta"));
        assert_eq!(event.extra.get("branch"), Some(&Value::from("b")));
        let out = serde_json::to_value(&event).unwrap();
        assert_eq!(out["invocation_id"], "inv");
        assert_eq!(out["usage_metadata"]["prompt_token_count"], 7);
        assert!(out["content"]["parts"][1]["function_call"].is_object());
        let back: Event = serde_json::from_value(out).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn refuses_a_nan_timestamp_in_a_compaction() {
        let json = r#"{"id":"c","invocation_id":"i","author":"user","timestamp":1,
            "actions":{"compaction":{"start_timestamp":"nan","end_timestamp":2,"compacted_content":{"parts":[]}}}}"#;
        assert!(serde_json::from_str::<Event>(json).is_err());
    }
}
