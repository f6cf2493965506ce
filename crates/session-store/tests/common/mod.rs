//! Shared test helpers: a store in a temp dir and a generator of histories.
#![allow(dead_code, unreachable_pub)]

use compaction_core::testing::EventFactory;
use compaction_core::{Event, SessionKey, Timestamp};
use proptest::prelude::*;
use session_store::blocking::SqliteStore;
use session_store::{Durability, OpenOptions};
use tempfile::TempDir;

pub mod adk;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod recall;

/// A store in a fresh temp dir (kept alive by the returned guard).
pub fn temp_store(durability: Durability) -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open_with(
        dir.path().join("sessions.db"),
        OpenOptions::default().durability(durability),
    )
    .expect("open store");
    (dir, store)
}

/// The key every test session uses.
pub fn key() -> SessionKey {
    SessionKey::new("zocrates", "user-1", "session-1")
}

/// How a generated turn goes.
#[derive(Debug, Clone, Copy)]
pub enum TurnKind {
    Conversational,
    Research,
    Errored,
    ToolsOnly,
    PartialOnly,
    TrailingPartial,
    QuestionOnly,
    ReopenedByToolCall,
    /// A final answer, then actions-only events (a callback's state delta, `end_of_agent`).
    TrailingActionsOnly,
    /// The model's thoughts, never an answer.
    ThoughtsOnly,
    /// A query that is an attachment alone (a PDF), answered.
    AttachmentQuery,
}

/// One step of a generated history.
#[derive(Debug, Clone)]
pub enum Op {
    Turn {
        kind: TurnKind,
        tokens: Option<u64>,
    },
    Greeting,
    ScopedSpike(u64),
    PartialChunk,
    /// An unscoped event whose timestamp repeats an earlier event's (`back` from the end).
    Late {
        back: usize,
    },
    /// A compaction over the timestamps of two earlier events.
    Compaction {
        a: usize,
        b: usize,
        scoped: bool,
    },
    /// A rolling consolidation: from the first event to an earlier event (`back` from the end).
    Rolling {
        back: usize,
    },
    /// A rewind to the invocation of an earlier event, or to an unknown one.
    Rewind {
        back: Option<usize>,
        scoped: bool,
    },
}

pub fn turn_kind() -> impl Strategy<Value = TurnKind> {
    prop_oneof![
        3 => Just(TurnKind::Conversational),
        3 => Just(TurnKind::Research),
        1 => Just(TurnKind::Errored),
        1 => Just(TurnKind::ToolsOnly),
        1 => Just(TurnKind::PartialOnly),
        1 => Just(TurnKind::TrailingPartial),
        1 => Just(TurnKind::QuestionOnly),
        1 => Just(TurnKind::ReopenedByToolCall),
        1 => Just(TurnKind::TrailingActionsOnly),
        1 => Just(TurnKind::ThoughtsOnly),
        1 => Just(TurnKind::AttachmentQuery),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (turn_kind(), proptest::option::of(1_000u64..200_000))
            .prop_map(|(kind, tokens)| Op::Turn { kind, tokens }),
        1 => Just(Op::Greeting),
        1 => (100_000u64..900_000).prop_map(Op::ScopedSpike),
        1 => Just(Op::PartialChunk),
        1 => (0usize..40).prop_map(|back| Op::Late { back }),
        2 => (0usize..60, 0usize..60, proptest::bool::weighted(0.15))
            .prop_map(|(a, b, scoped)| Op::Compaction { a, b, scoped }),
        3 => (0usize..12).prop_map(|back| Op::Rolling { back }),
        1 => (proptest::option::weighted(0.85, 0usize..40), proptest::bool::weighted(0.15))
            .prop_map(|(back, scoped)| Op::Rewind { back, scoped }),
    ]
}

/// A history of up to `max_ops` steps.
pub fn history(max_ops: usize) -> impl Strategy<Value = Vec<Event>> {
    proptest::collection::vec(op(), 0..max_ops).prop_map(|ops| build(&ops))
}

fn earlier(events: &[Event], back: usize) -> Option<&Event> {
    events
        .len()
        .checked_sub(1 + back % events.len().max(1))
        .map(|i| &events[i])
}

/// Turns the steps into events.
pub fn build(ops: &[Op]) -> Vec<Event> {
    let mut f = EventFactory::new();
    let mut events: Vec<Event> = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let inv = format!("inv{n}");
        match *op {
            Op::Turn { kind, tokens } => {
                let mut turn = match kind {
                    TurnKind::Conversational => f.conversational_turn(&inv, "question", "answer"),
                    TurnKind::Research => f.research_turn(&inv, "research question", "synthesis"),
                    TurnKind::Errored => {
                        let mut err = f.model(&inv, "");
                        err.content = None;
                        err.error_code = Some("RESOURCE_EXHAUSTED".into());
                        vec![f.user(&inv, "question"), err]
                    }
                    TurnKind::ToolsOnly => vec![
                        f.user(&inv, "question"),
                        f.function_call(&inv, "search_library"),
                        f.function_response(&inv, "search_library", "results"),
                    ],
                    TurnKind::PartialOnly => {
                        let mut chunk = f.model(&inv, "half an answer");
                        chunk.partial = Some(true);
                        vec![f.user(&inv, "question"), chunk]
                    }
                    TurnKind::TrailingPartial => {
                        let mut t = f.conversational_turn(&inv, "question", "final");
                        let mut chunk = f.model(&inv, "fin");
                        chunk.partial = Some(true);
                        t.push(chunk);
                        t
                    }
                    TurnKind::QuestionOnly => vec![f.user(&inv, "question")],
                    TurnKind::ReopenedByToolCall => {
                        let mut t = f.conversational_turn(&inv, "question", "first answer");
                        t.push(f.function_call(&inv, "search_library"));
                        t
                    }
                    TurnKind::TrailingActionsOnly => {
                        let mut t = f.conversational_turn(&inv, "question", "final");
                        let mut delta = f.model(&inv, "");
                        delta.content = None;
                        delta
                            .actions
                            .extra
                            .insert("state_delta".into(), serde_json::json!({"k": 1}));
                        t.push(delta);
                        t
                    }
                    TurnKind::ThoughtsOnly => {
                        let mut thought = f.model(&inv, "reasoning");
                        if let Some(content) = thought.content.as_mut() {
                            content.parts[0]
                                .extra
                                .insert("thought".into(), serde_json::json!(true));
                        }
                        vec![f.user(&inv, "question"), thought]
                    }
                    TurnKind::AttachmentQuery => {
                        let mut pdf = f.user(&inv, "");
                        if let Some(content) = pdf.content.as_mut() {
                            content.parts[0].text = None;
                            content.parts[0].extra.insert(
                                "file_data".into(),
                                serde_json::json!({"mime_type": "application/pdf", "file_uri": "f"}),
                            );
                        }
                        vec![pdf, f.model(&inv, "answer")]
                    }
                };
                if let (Some(tokens), Some(last)) =
                    (tokens, turn.iter_mut().rev().find(|e| e.is_unscoped()))
                {
                    *last = last.clone().with_prompt_tokens(tokens);
                }
                events.extend(turn);
            }
            Op::Greeting => events.push(f.model(&inv, "Hello, what shall we research?")),
            Op::ScopedSpike(tokens) => events.push(
                f.model(&inv, "sub-agent step")
                    .with_scope("search_pipeline:spike")
                    .with_prompt_tokens(tokens),
            ),
            Op::PartialChunk => {
                let mut chunk = f.model(&inv, "streaming");
                chunk.partial = Some(true);
                events.push(chunk);
            }
            Op::Late { back } => {
                let ts = earlier(&events, back).map(|e| e.timestamp);
                let mut e = f.model(&inv, "late event");
                if let Some(ts) = ts {
                    e.timestamp = ts;
                }
                events.push(e);
            }
            Op::Compaction { a, b, scoped } => {
                let (Some(x), Some(y)) = (earlier(&events, a), earlier(&events, b)) else {
                    continue;
                };
                let (s, e) = (x.timestamp.min(y.timestamp), x.timestamp.max(y.timestamp));
                let mut c = f.compaction(&inv, s, e, "a summary");
                if scoped {
                    c = c.with_scope("search_pipeline:odd");
                }
                events.push(c);
            }
            Op::Rolling { back } => {
                let (Some(first), Some(last)) = (events.first(), earlier(&events, back)) else {
                    continue;
                };
                let (s, e) = (first.timestamp, last.timestamp.max(first.timestamp));
                events.push(f.compaction(&inv, s, e, "a rolling summary"));
            }
            Op::Rewind { back, scoped } => {
                let target = back.and_then(|b| earlier(&events, b)).map_or_else(
                    || "no-such-invocation".to_owned(),
                    |e| e.invocation_id.clone(),
                );
                let mut r = f.rewind(&inv, &target);
                if scoped {
                    r = r.with_scope("search_pipeline:odd");
                }
                events.push(r);
            }
        }
    }
    events
}

/// A timestamp from whole seconds.
pub fn ts(seconds: f64) -> Timestamp {
    Timestamp::new(seconds).expect("finite")
}
