//! The chat route's relay: the coordinator's reply, chunk by chunk, to the client's event
//! stream, within the service's limits (the first and the next chunk's upstream timeouts, the
//! write timeout for a reader that stops reading, the shutdown's cancel). Tool calls and their
//! results are stored as the turn's events as they pass. What the relay came to is the
//! caller's to store: a whole reply, what streamed before the client went, or a failure.

use axum::response::sse::Event as SseEvent;
use compaction_core::{EventBuilder, SessionKey};
use tokio::sync::{mpsc, watch};

use super::chat::store_tool_chunk;
use super::coordinator::{ReplyChunk, ReplyStream};
use super::listener::Limits;
use super::server::AppState;

/// How a relay ended.
pub(super) enum Relayed {
    /// The reply streamed whole; `usage` is the provider's (prompt, completion) when it sent it.
    Whole {
        /// The reply.
        text: String,
        /// The provider's token counts.
        usage: Option<(u64, u64)>,
    },
    /// The client went away (or stopped reading, or the shutdown's grace passed) mid-reply.
    ClientGone {
        /// What streamed.
        text: String,
        /// Why, for the span.
        reason: &'static str,
    },
    /// The coordinator failed, stalled, or a tool step could not be stored.
    Failed {
        /// What streamed before.
        text: String,
        /// What went wrong.
        message: String,
    },
}

/// One turn's relay.
pub(super) struct Relay<'a> {
    pub(super) state: &'a AppState,
    pub(super) events: &'a EventBuilder<'a>,
    pub(super) key: &'a SessionKey,
    pub(super) invocation: &'a str,
    pub(super) tx: &'a mpsc::Sender<SseEvent>,
    pub(super) limits: &'a Limits,
}

impl Relay<'_> {
    /// Relays `upstream` until it ends, fails or the client goes.
    pub(super) async fn run(
        &self,
        mut upstream: ReplyStream,
        cancel: &mut watch::Receiver<bool>,
    ) -> Relayed {
        let mut text = String::new();
        let mut usage = None;
        let mut first = true;
        loop {
            let wait = if first {
                self.limits.upstream_first_byte
            } else {
                self.limits.upstream_between_chunks
            };
            let item = tokio::select! {
                () = self.tx.closed() => {
                    return Relayed::ClientGone { text, reason: "the client went away mid-reply" };
                }
                () = async { let _ = cancel.wait_for(|c| *c).await; } => {
                    // The shutdown's grace period passed: what streamed is kept as partial.
                    return Relayed::ClientGone { text, reason: "the shutdown's grace period passed" };
                }
                item = tokio::time::timeout(wait, upstream.recv()) => item,
            };
            match item {
                Err(_) => {
                    let message = format!("no chunk from the coordinator within {wait:?}");
                    return Relayed::Failed { text, message };
                }
                Ok(None) => return Relayed::Whole { text, usage },
                Ok(Some(Err(e))) => {
                    return Relayed::Failed {
                        text,
                        message: e.to_string(),
                    };
                }
                Ok(Some(Ok(ReplyChunk::Delta(delta)))) => {
                    first = false;
                    text.push_str(&delta);
                    if !self
                        .send(SseEvent::default().event("delta").data(delta), cancel)
                        .await
                    {
                        return Relayed::ClientGone {
                            text,
                            reason: "the client stopped reading",
                        };
                    }
                }
                Ok(Some(Ok(ReplyChunk::Usage {
                    prompt_tokens,
                    completion_tokens,
                }))) => usage = Some((prompt_tokens, completion_tokens)),
                Ok(Some(Ok(chunk))) => {
                    first = false;
                    let stored = store_tool_chunk(
                        self.state,
                        self.events,
                        self.key,
                        self.invocation,
                        self.tx,
                        chunk,
                    )
                    .await;
                    if let Err(message) = stored {
                        return Relayed::Failed { text, message };
                    }
                }
            }
        }
    }

    /// Hands `event` to the client. A reader that stops reading fills the channel: after the
    /// write timeout the turn ends as a partial reply and the lane is freed; the shutdown's
    /// cancel ends a write that waits on such a reader too.
    async fn send(&self, event: SseEvent, cancel: &mut watch::Receiver<bool>) -> bool {
        tokio::select! {
            sent = tokio::time::timeout(self.limits.write, self.tx.send(event)) => {
                matches!(sent, Ok(Ok(())))
            }
            () = async { let _ = cancel.wait_for(|c| *c).await; } => false,
        }
    }
}
