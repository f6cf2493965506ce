//! The streaming chat-completions exchange of [`super::OpenAiCompatible`], with the recall
//! tool's round trip: a streamed tool call is answered from the store
//! ([`super::recall_tool::RecallTool`]) and the completion continues in a follow-up request
//! (at most [`MAX_CALLS_PER_TURN`] calls; the last follow-up offers no tools).

use compaction_core::RECALL_TOOL_NAME;
use compaction_core::{AdapterError, FailureKind};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::coordinator::ReplyChunk;
use super::openai::upstream;
use super::recall_tool::{MAX_CALLS_PER_TURN, RecallTool};

/// Where and how to post.
#[derive(Clone)]
pub(super) struct Endpoint {
    pub(super) http: reqwest::Client,
    pub(super) url: String,
    pub(super) model: String,
    pub(super) api_key: Option<String>,
}

impl Endpoint {
    /// The request body: `messages`, streaming with usage, and the tool when offered.
    pub(super) fn body(&self, messages: &[Value], tools: bool) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if tools {
            body["tools"] = json!([RecallTool::definition()]);
        }
        body
    }

    /// Posts `body`; a transport failure or a non-success status is an upstream error.
    pub(super) async fn post(&self, body: &Value) -> Result<reqwest::Response, AdapterError> {
        let mut call = self.http.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key);
        }
        let response = call.send().await.map_err(|e| {
            upstream(
                FailureKind::Transport,
                format!(
                    "coordinator at {} unreachable: {}",
                    self.url,
                    e.without_url()
                ),
            )
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(upstream(
                FailureKind::HttpStatus(status.as_u16()),
                format!("coordinator at {} answered HTTP {status}", self.url),
            ));
        }
        Ok(response)
    }
}

/// A tool call as it streams in, by its index.
#[derive(Debug, Default, Clone)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

/// How one response stream ended.
enum Ended {
    /// `[DONE]` with no tool call, or the receiver is gone, or an error was sent.
    Finished,
    /// `[DONE]` after these tool calls.
    Tools(Vec<PendingCall>),
}

/// Pumps `response` into `tx`, then answers its tool calls and continues with follow-up
/// requests while the model calls the tool (bounded).
pub(super) async fn pump(
    endpoint: Endpoint,
    mut messages: Vec<Value>,
    tool: Option<RecallTool>,
    mut response: reqwest::Response,
    tx: mpsc::Sender<Result<ReplyChunk, AdapterError>>,
) {
    let mut calls = 0;
    loop {
        let pending = match read(&mut response, &tx, &endpoint.url).await {
            Ended::Finished => return,
            Ended::Tools(pending) => pending,
        };
        let Some(tool) = &tool else {
            let message = format!(
                "coordinator at {} called a tool it was not offered",
                endpoint.url
            );
            let _ = tx
                .send(Err(upstream(FailureKind::InvalidReply, message)))
                .await;
            return;
        };
        let tool_calls: Vec<Value> = pending
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
        for call in pending {
            calls += 1;
            let chunk = ReplyChunk::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            if tx.send(Ok(chunk)).await.is_err() {
                return;
            }
            let result = if call.name != RECALL_TOOL_NAME {
                json!({"error": format!("no tool named {:?}", call.name)}).to_string()
            } else if calls > MAX_CALLS_PER_TURN {
                json!({"error": "recall limit reached for this turn; answer now"}).to_string()
            } else {
                tool.answer(&call.arguments).await
            };
            let chunk = ReplyChunk::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                result: result.clone(),
            };
            if tx.send(Ok(chunk)).await.is_err() {
                return;
            }
            messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
        }
        let body = endpoint.body(&messages, calls < MAX_CALLS_PER_TURN);
        response = match endpoint.post(&body).await {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
    }
}

/// Reads one response stream to `[DONE]`, sending its text and usage and collecting its
/// tool calls.
async fn read(
    response: &mut reqwest::Response,
    tx: &mpsc::Sender<Result<ReplyChunk, AdapterError>>,
    url: &str,
) -> Ended {
    let mut buffer = String::new();
    let mut calls: Vec<PendingCall> = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                let message = format!("coordinator at {url} ended its stream without [DONE]");
                let _ = tx
                    .send(Err(upstream(FailureKind::InvalidReply, message)))
                    .await;
                return Ended::Finished;
            }
            Err(e) => {
                let message = format!("coordinator stream from {url} broke: {}", e.without_url());
                let _ = tx
                    .send(Err(upstream(FailureKind::Transport, message)))
                    .await;
                return Ended::Finished;
            }
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            let Some(data) = line.trim().strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                return if calls.is_empty() {
                    Ended::Finished
                } else {
                    Ended::Tools(calls)
                };
            }
            for item in parse_chunk(data, url, &mut calls) {
                if tx.send(item).await.is_err() {
                    return Ended::Finished;
                }
            }
        }
    }
}

/// The pieces of one `data:` payload: text, usage, and tool-call fragments merged into
/// `calls` by their index.
fn parse_chunk(
    data: &str,
    url: &str,
    calls: &mut Vec<PendingCall>,
) -> Vec<Result<ReplyChunk, AdapterError>> {
    let value: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => {
            return vec![Err(upstream(
                FailureKind::InvalidReply,
                format!("coordinator at {url} sent a chunk that is not JSON: {e}"),
            ))];
        }
    };
    let mut out = Vec::new();
    if let Some(text) = value
        .pointer("/choices/0/delta/content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        out.push(Ok(ReplyChunk::Delta(text.to_owned())));
    }
    for fragment in value
        .pointer("/choices/0/delta/tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let index = fragment.get("index").and_then(Value::as_u64).unwrap_or(0);
        let index = usize::try_from(index).unwrap_or(usize::MAX).min(16);
        if calls.len() <= index {
            calls.resize(index + 1, PendingCall::default());
        }
        let call = &mut calls[index];
        let text = |pointer: &str| fragment.pointer(pointer).and_then(Value::as_str);
        if let Some(id) = text("/id") {
            call.id = id.to_owned();
        }
        if let Some(name) = text("/function/name") {
            call.name.push_str(name);
        }
        if let Some(arguments) = text("/function/arguments") {
            call.arguments.push_str(arguments);
        }
    }
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        out.push(Ok(ReplyChunk::Usage {
            prompt_tokens: n("prompt_tokens"),
            completion_tokens: n("completion_tokens"),
        }));
    }
    out
}
