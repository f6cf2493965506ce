//! `POST /v1/sessions/{app}/{user}/{id}/chat`: one turn of the reference service (spec
//! section 8), in its steps: the message is read ([`chat_message`]); the turn begins
//! ([`begin`]: its `coordinator_turn` span, the session's lane, a turn a crash left open closed,
//! the prompt assembled, the query stored); the reply streams to the client
//! ([`super::relay`]) and is stored ([`Pump::run`]); then the lane evaluates the closed turn.
//! Answered as server-sent events: `delta`, `tool`, then `done` or `error`.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use compaction_core::{EventBuilder, SessionKey, Timestamp};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument as _;

use super::api::{ApiError, ApiResult, json_object, route_key, string_field};
use super::coordinator::{CoordinatorRequest, RecallTool, ReplyChunk, ReplyStream};
use super::llm_span::LlmSpan;
use super::relay::{Relay, Relayed};
use super::server::AppState;
use super::sessions::append_latest;
use crate::lane::{LaneError, Turn as LaneTurn};

const CHAT_FORM: &str = r#"{"message": "<text>"}"#;

/// The chat route.
pub(super) async fn chat(
    State(s): State<Arc<AppState>>,
    Path((app, user, id)): Path<(String, String, String)>,
    body: Body,
) -> ApiResult<Response> {
    let message = chat_message(&s, body).await?;
    let key = route_key(app, user, id)?;
    s.store.gate_snapshot(&key).await.map_err(ApiError::store)?;
    let invocation = s.ids.next_id();
    let span = turn_span(&s, &key, &invocation, &message);
    let begun = begin(&s, &key, &invocation, &message, &span).await?;
    let upstream = tokio::time::timeout(
        s.options.limits.upstream_first_byte,
        s.coordinator
            .stream(&begun.request)
            .instrument(span.clone()),
    )
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "no answer from the coordinator within {:?}",
            s.options.limits.upstream_first_byte
        )
        .into())
    });
    let llm = LlmSpan::start(
        &span,
        &s.coordinator.info(),
        &begun.request,
        (s.options.hide_inputs, s.options.hide_outputs),
    );
    let (tx, rx) = mpsc::channel::<SseEvent>(32);
    let (closed_tx, closed_rx) = oneshot::channel();
    let pump = Pump {
        state: s.clone(),
        key,
        invocation,
        begun,
        llm,
        tx,
        closed: closed_rx,
    };
    tokio::spawn(pump.run(upstream).instrument(span));
    let stream = ClosingStream {
        inner: ReceiverStream::new(rx),
        on_end: Some(closed_tx),
    };
    Ok(Sse::new(stream).into_response())
}

/// The request body's `message`: a non-empty string within the size limit, and nothing else.
async fn chat_message(s: &AppState, body: Body) -> ApiResult<String> {
    let limit = s.options.max_message_bytes;
    // The envelope around the message may add a little: the message itself is checked below.
    let body = json_object(s, body, limit.saturating_add(64 * 1024), CHAT_FORM).await?;
    let message = match string_field(&body, "message", CHAT_FORM)? {
        Some(m) if m.len() > limit => {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "field `message` is {} bytes, over the limit of {limit} bytes",
                    m.len()
                ),
            ));
        }
        Some(m) if m.trim().is_empty() => {
            return Err(ApiError::bad_request(format!(
                "field `message` must not be empty: expected {CHAT_FORM}"
            )));
        }
        Some(m) => m.to_owned(),
        None => {
            return Err(ApiError::bad_request(format!(
                "missing field `message`: expected {CHAT_FORM}"
            )));
        }
    };
    if let Some(other) = body.keys().find(|k| *k != "message") {
        return Err(ApiError::bad_request(format!(
            "unknown field `{other}`: expected {CHAT_FORM}"
        )));
    }
    Ok(message)
}

/// The turn's root span. Phoenix treats `session.id` as unique in the whole instance: the
/// key's three parts, so that two users' (or apps') sessions of the same id stay two sessions.
fn turn_span(s: &AppState, key: &SessionKey, invocation: &str, message: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "coordinator_turn",
        otel.name = "coordinator_turn",
        openinference.span.kind = "CHAIN",
        session.id = %key,
        compaction.session_id = %key.session_id,
        user.id = %key.user_id,
        compaction.app = %key.app_name,
        invocation.id = %invocation,
        input.value = tracing::field::Empty,
        input.mime_type = tracing::field::Empty,
        output.value = tracing::field::Empty,
        output.mime_type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    if s.options.hide_inputs {
        span.record("input.value", REDACTED);
    } else {
        span.record("input.value", compaction_core::scrub(message).as_ref());
        span.record("input.mime_type", "text/plain");
    }
    span
}

/// A turn that has begun: its place in the session's lane and its prompt.
struct Begun {
    turn: LaneTurn,
    request: CoordinatorRequest,
}

/// Takes the session's lane (409 while another turn of it runs, 503 while stopping), closes a
/// turn a crash left open, assembles the prompt and stores the query.
async fn begin(
    s: &AppState,
    key: &SessionKey,
    invocation: &str,
    message: &str,
    span: &tracing::Span,
) -> ApiResult<Begun> {
    let turn = s
        .lanes
        .begin(key, invocation.to_owned())
        .instrument(span.clone())
        .await
        .map_err(|e| match e {
            LaneError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            LaneError::TurnInProgress(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            other => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
        })?;
    let events = EventBuilder::new(
        s.clock.as_ref(),
        s.ids.as_ref(),
        s.options.coordinator_author.clone(),
    );
    let context = super::open_turns::close_open_turn(s, key, &events)
        .await
        .map_err(ApiError::store)?;
    let request = CoordinatorRequest::assemble(&context, message)
        .with_recall(RecallTool::new(s.store.clone(), key.clone()));
    append_latest(s, key, events.user_query(invocation, message))
        .await
        .map_err(ApiError::store)?;
    Ok(Begun { turn, request })
}

/// The rest of a turn, after the response's headers went out: relay, store, evaluate.
struct Pump {
    state: Arc<AppState>,
    key: SessionKey,
    invocation: String,
    begun: Begun,
    llm: LlmSpan,
    tx: mpsc::Sender<SseEvent>,
    closed: oneshot::Receiver<()>,
}

impl Pump {
    async fn run(self, upstream: Result<ReplyStream, compaction_core::AdapterError>) {
        let Pump {
            state,
            key,
            invocation,
            begun,
            llm,
            tx,
            closed,
        } = self;
        let author = state.options.coordinator_author.clone();
        let events = EventBuilder::new(state.clock.as_ref(), state.ids.as_ref(), author);
        let relayed = match upstream {
            Ok(stream) => {
                let relay = Relay {
                    state: &state,
                    events: &events,
                    key: &key,
                    invocation: &invocation,
                    tx: &tx,
                    limits: &state.options.limits,
                };
                relay.run(stream, &mut state.cancel.subscribe()).await
            }
            Err(e) => Relayed::Failed {
                text: String::new(),
                message: e.to_string(),
            },
        };
        let (text, usage) = match relayed {
            Relayed::Whole { text, usage } => (text, usage),
            Relayed::ClientGone { text, reason } => {
                llm.failed(&text, reason);
                client_gone(&state, &events, &key, &invocation, &text).await;
                return;
            }
            Relayed::Failed { text, message } => {
                llm.failed(&text, &message);
                upstream_failed(&state, &events, &key, &invocation, &tx, &message).await;
                return;
            }
        };
        let estimated = (
            begun.request.estimated_prompt_tokens(),
            compaction_core::TokenEstimator::estimate(&compaction_core::CharsPerToken, &text)
                as u64,
        );
        llm.answered(&text, usage, estimated);
        drop(llm);
        let (prompt_tokens, completion_tokens) = usage.unwrap_or(estimated);
        let reply = events.reply(&invocation, &text, Some(prompt_tokens));
        if let Err(e) = append_latest(&state, &key, reply).await {
            reply_not_stored(&state, &events, &key, &invocation, &tx, &e.to_string()).await;
            return;
        }
        record_reply(&state, &tracing::Span::current(), &text);
        let turn = begun.turn;
        let done = json!({
            "turn": turn_number(&state, &key).await,
            "invocation_id": invocation,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "lane_wait": turn.wait().label(),
            "lane_waited_ms": turn.wait().duration().as_secs_f64() * 1e3,
        });
        let _ = tx
            .send(SseEvent::default().event("done").data(done.to_string()))
            .await;
        drop(tx);
        // The body ends once the last event was handed to the connection; a client gone
        // after `done` leaves a complete, stored turn, which is evaluated all the same.
        let _ = closed.await;
        if let Ok(report) = turn.finish().await {
            let mut reports = state.reports.lock().unwrap_or_else(|e| e.into_inner());
            reports.push_back(report);
            while reports.len() > state.options.reports_kept {
                reports.pop_front();
            }
        }
    }
}

/// The reply could not be stored: the turn must not stay open, so an error event closes it
/// when the store takes one, and the client gets an `error` event.
async fn reply_not_stored(
    state: &AppState,
    events: &EventBuilder<'_>,
    key: &SessionKey,
    invocation: &str,
    tx: &mpsc::Sender<SseEvent>,
    cause: &str,
) {
    let message = format!("the reply could not be stored: {cause}");
    tracing::warn!(%key, "{message}");
    let closing = events.error(invocation, "REPLY_NOT_STORED", &message);
    if let Err(e) = append_latest(state, key, closing).await {
        tracing::warn!(%key, "the turn could not be closed either: {e}");
    }
    let _ = tx
        .send(
            SseEvent::default()
                .event("error")
                .data(error_data(&message)),
        )
        .await;
}

fn error_data(message: &str) -> String {
    json!({ "message": message }).to_string()
}

/// The coordinator failed: the turn is stored as errored (never completed), the client gets
/// an `error` event, and nothing is evaluated.
async fn upstream_failed(
    state: &AppState,
    events: &EventBuilder<'_>,
    key: &SessionKey,
    invocation: &str,
    tx: &mpsc::Sender<SseEvent>,
    message: &str,
) {
    tracing::warn!(%key, "coordinator failed: {message}");
    let span = tracing::Span::current();
    span.record("otel.status_code", "ERROR");
    span.record(
        "otel.status_description",
        compaction_core::scrub(&format!("coordinator failed: {message}")).as_ref(),
    );
    let event = events.error(invocation, "UPSTREAM_ERROR", message);
    let stored = append_latest(state, key, event).await.is_ok();
    let data = json!({ "message": format!("coordinator failed: {message}"), "stored": stored });
    let _ = tx
        .send(SseEvent::default().event("error").data(data.to_string()))
        .await;
}

/// What a hidden input or output shows (OpenInference's convention).
const REDACTED: &str = "__REDACTED__";

/// The turn span's `output.value` (the reply, scrubbed, or redacted) and status OK.
fn record_reply(state: &AppState, span: &tracing::Span, text: &str) {
    if state.options.hide_outputs {
        span.record("output.value", REDACTED);
    } else {
        span.record("output.value", compaction_core::scrub(text).as_ref());
        span.record("output.mime_type", "text/plain");
    }
    span.record("otel.status_code", "OK");
}

/// The client went away mid-stream: what was streamed is stored as a partial reply.
async fn client_gone(
    state: &AppState,
    events: &EventBuilder<'_>,
    key: &SessionKey,
    invocation: &str,
    text: &str,
) {
    tracing::info!(%key, "client disconnected mid-stream; storing the partial reply");
    if let Err(e) = append_latest(state, key, events.partial_reply(invocation, text)).await {
        tracing::warn!(%key, "the partial reply could not be stored: {e}");
    }
}

/// A recall tool call or its result: stored as the turn's function call or function
/// response event, and shown to the client as a `tool` event.
pub(super) async fn store_tool_chunk(
    state: &AppState,
    events: &EventBuilder<'_>,
    key: &SessionKey,
    invocation: &str,
    tx: &mpsc::Sender<SseEvent>,
    chunk: ReplyChunk,
) -> Result<(), String> {
    let (event, data) = match chunk {
        ReplyChunk::ToolCall {
            id,
            name,
            arguments,
        } => {
            let args = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
            let data = json!({"kind": "call", "name": name, "arguments": args});
            (events.tool_call(invocation, &id, &name, args), data)
        }
        ReplyChunk::ToolResult { id, name, result } => {
            let event = events.tool_result(invocation, &id, &name, &result);
            (
                event,
                json!({"kind": "result", "name": name, "result": result}),
            )
        }
        ReplyChunk::Delta(_) | ReplyChunk::Usage { .. } => return Ok(()),
    };
    append_latest(state, key, event)
        .await
        .map_err(|e| format!("the tool call could not be stored: {e}"))?;
    let _ = tx
        .send(SseEvent::default().event("tool").data(data.to_string()))
        .await;
    Ok(())
}

/// The turn's number as lossless recall numbers turns (`compaction_core::store_support::scan`: the n-th
/// turn start of the coordinator view, an unanswered or failed turn included), so the `done`
/// event, the history and recall hits name a turn alike.
async fn turn_number(state: &AppState, key: &SessionKey) -> Option<usize> {
    // Every turn start so far (whatever their stamps: another writer's clock may run ahead):
    // the turn that just ended is the newest, since the lane keeps the session's other turns
    // out. An indexed count where the store keeps one; else a scan.
    let now = Timestamp::new(f64::MAX).ok()?;
    match state.store.turns_before(key, now).await {
        Ok(Some(n)) => Some(n),
        Ok(None) => {
            let session = state.store.load(key).await.ok()?;
            Some(compaction_core::store_support::scan::turns_before(
                &session.events,
                now,
            ))
        }
        Err(_) => None,
    }
}

/// An SSE body that reports when it ended (the last event was handed to the connection);
/// dropped before that, it reports nothing (the client went away).
struct ClosingStream {
    inner: ReceiverStream<SseEvent>,
    on_end: Option<oneshot::Sender<()>>,
}

impl Stream for ClosingStream {
    type Item = Result<SseEvent, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(None) => {
                if let Some(end) = self.on_end.take() {
                    let _ = end.send(());
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
