//! Labelled research sessions (`data/research-sessions/`, format in its README) and
//! the decision state the engine sends after each of their turns.
//!
//! Each turn is turned into events the way `compaction replay` does (the user's query, the
//! coordinator's tool call, the sub-agents' steps scoped to `search_pipeline:<call id>`, the
//! tool result, the final answer carrying `RESEARCH_TURN_HISTORY` in its state delta when the
//! turn has a findings summary), and the decision state after turn N is compaction-core's own
//! extraction from the coordinator view of turns 1..N with nothing compacted: exactly what the
//! engine probes with when its gate is open and no summary exists yet. A test in
//! `tests/sessions.rs` runs the real engine over a session and checks that the states it sends
//! are these.

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use compaction_core::{
    Clock, DecisionState, Event, EventBuilder, IdGenerator, ScriptedTool, ScriptedTurn, Sleep,
    Timestamp, TokenEstimator, coordinator_view,
};
use compaction_core::{RESEARCH_TURN_HISTORY, extract_decision_state_from_view};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The name of the coordinator agent in the built events (as in `compaction replay`).
const COORDINATOR: &str = "coordinator";

/// One labelled research session.
#[derive(Debug, Clone, Deserialize)]
pub struct ResearchSession {
    /// The session's name (file stem when the file gives none).
    #[serde(default)]
    pub session: String,
    /// Its turns, in order.
    pub turns: Vec<SessionTurn>,
    /// The summary evaluation's line checks (`cargo xtask eval-summary`).
    #[serde(default)]
    pub checks: SessionChecks,
}

/// A session's `checks`: what `cargo xtask eval-summary` verifies beyond each turn's facts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SessionChecks {
    /// Lines that state a retracted claim.
    #[serde(default)]
    pub superseded_lines: Vec<SupersededLine>,
}

/// A summary line that restates a retracted claim: it holds every one of `all_of` and none of
/// `unless_any` (the corrected value).
#[derive(Debug, Clone, Deserialize)]
pub struct SupersededLine {
    /// Words the line holds.
    pub all_of: Vec<String>,
    /// Words that make it a correct line after all.
    #[serde(default)]
    pub unless_any: Vec<String>,
}

/// One turn of a labelled session (the fields the decision state reads, and the labels).
#[derive(Debug, Clone, Deserialize)]
pub struct SessionTurn {
    /// 1-based turn number.
    pub n: usize,
    /// `research` or `conversational`.
    #[serde(default)]
    pub kind: String,
    /// The user's query.
    pub user: String,
    /// The coordinator's final answer.
    pub assistant: String,
    /// A research turn's concise findings.
    #[serde(default)]
    pub findings_summary: Option<String>,
    /// The research tool's full synthesis.
    #[serde(default)]
    pub synthesis: Option<String>,
    /// The coordinator's tool call.
    #[serde(default)]
    pub tool_call: Option<ToolCall>,
    /// The sub-agents' raw steps.
    #[serde(default)]
    pub scoped_events: Vec<ScopedEvent>,
    /// The coordinator's prompt tokens after the turn, uncompacted.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// The labels.
    pub expect: Expect,
    /// Facts a summary of this turn must keep.
    #[serde(default)]
    pub facts: Vec<String>,
    /// Notes on the claims a later turn retracts (which turn corrects them).
    #[serde(default)]
    pub superseded: Vec<String>,
    /// Facts a rejected dispute left standing.
    #[serde(default)]
    pub disputed_but_stands: Vec<String>,
}

/// A tool call of a session turn.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCall {
    /// Tool name.
    pub name: String,
    /// Call id.
    #[serde(default)]
    pub id: Option<String>,
    /// Arguments.
    #[serde(default)]
    pub args: Option<Value>,
}

/// A sub-agent step.
#[derive(Debug, Clone, Deserialize)]
pub struct ScopedEvent {
    /// The sub-agent.
    #[serde(default)]
    pub author: String,
    /// Its text.
    pub text: String,
}

/// A turn's labels.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Expect {
    /// The first turn of a new topic or a return to an earlier one: compaction warranted.
    pub pivot: bool,
    /// A turn of an unresolved dispute or correction.
    #[serde(default)]
    pub clarification_loop: bool,
    /// The user wraps the topic up.
    #[serde(default)]
    pub closes_topic: bool,
}

/// A session file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not a labelled session.
    #[error(
        "{path}: not a labelled research session ({reason}); expected {{\"session\", \"turns\": [{{\"n\", \"user\", \"assistant\", \"expect\": {{\"pivot\": bool}}, …}}]}} (see research-sessions/README.md)"
    )]
    Parse {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// A directory holds no `.json` session.
    #[error("{path}: holds no .json session file")]
    Empty {
        /// The directory.
        path: String,
    },
}

/// Parses one session file's text; `origin` names it in errors and gives the name when the
/// file has none.
pub fn parse_session(text: &str, origin: &str) -> Result<ResearchSession, SessionError> {
    let mut session: ResearchSession =
        serde_json::from_str(text).map_err(|e| SessionError::Parse {
            path: origin.to_owned(),
            reason: e.to_string(),
        })?;
    if session.turns.is_empty() {
        return Err(SessionError::Parse {
            path: origin.to_owned(),
            reason: "\"turns\" is empty".to_owned(),
        });
    }
    if let Some((i, _)) = session.turns.iter().enumerate().find(|(i, t)| t.n != i + 1) {
        return Err(SessionError::Parse {
            path: origin.to_owned(),
            reason: format!("turns[{i}].n must be {}", i + 1),
        });
    }
    if session.session.is_empty() {
        session.session = Path::new(origin)
            .file_stem()
            .map_or_else(|| origin.to_owned(), |s| s.to_string_lossy().into_owned());
    }
    Ok(session)
}

/// Reads every `.json` file of `dir` (sorted by name) as a session.
pub fn load_sessions(dir: &Path) -> Result<Vec<ResearchSession>, SessionError> {
    let read_err = |path: &Path, source| SessionError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_err(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(SessionError::Empty {
            path: dir.display().to_string(),
        });
    }
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(|e| read_err(path, e))?;
            parse_session(&text, &path.display().to_string())
        })
        .collect()
}

/// The decision state after one turn, with its labels.
#[derive(Debug, Clone)]
pub struct TurnCase {
    /// The session's name.
    pub session: String,
    /// The turn (1-based).
    pub turn: usize,
    /// The turn's labels.
    pub expect: Expect,
    /// What the engine sends after the turn.
    pub state: DecisionState,
}

/// The events of every turn of `session`, built as `compaction replay` builds them, one
/// second apart.
pub fn session_events(session: &ResearchSession) -> Vec<Event> {
    events_and_turn_ends(session).0
}

/// The events of [`session_events`] and, for each turn, the number of events up to and
/// including its answer.
pub fn events_and_turn_ends(session: &ResearchSession) -> (Vec<Event>, Vec<usize>) {
    let script = ScriptClock::default();
    let builder = EventBuilder::new(&script, &script, COORDINATOR);
    let mut events = Vec::new();
    let mut ends = Vec::with_capacity(session.turns.len());
    let mut research: Vec<Value> = Vec::new();
    for turn in &session.turns {
        let invocation = format!("inv-{:04}", turn.n);
        let state_delta = turn.findings_summary.as_ref().map(|findings| {
            research.push(json!({
                "invocation_id": invocation,
                "conclude_output": { "findings_summary": findings },
            }));
            json!({ RESEARCH_TURN_HISTORY: research })
        });
        let tools = turn.tool_call.iter().map(|call| ScriptedTool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
            result: turn.synthesis.clone().unwrap_or_default(),
        });
        let script = ScriptedTurn {
            user: turn.user.clone(),
            tools: tools.collect(),
            pipeline: (turn.scoped_events.iter())
                .map(|step| (step.author.clone(), step.text.clone()))
                .collect(),
            answer: turn.assistant.clone(),
            state_delta,
        };
        events.extend(builder.turn(&invocation, &script));
        ends.push(events.len());
    }
    (events, ends)
}

/// The clock and ids of built sessions: one second apart from 1,700,000,000, ids `ev-1`, …
/// (Not the core's `testing::SteppingClock`: the cli builds `eval` for `compaction tune`, and
/// compaction-core's `test-support` must not reach the binary.)
#[derive(Debug, Default)]
struct ScriptClock {
    ticks: AtomicU64,
    ids: AtomicU64,
}

impl Clock for ScriptClock {
    fn now(&self) -> Timestamp {
        let tick = self.ticks.fetch_add(1, Ordering::Relaxed);
        Timestamp::new(1_700_000_000.0 + tick as f64).unwrap_or(Timestamp::EPOCH)
    }

    fn sleep(&self, _: std::time::Duration) -> Sleep {
        Box::pin(std::future::ready(()))
    }
}

impl IdGenerator for ScriptClock {
    fn next_id(&self) -> String {
        format!("ev-{}", self.ids.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// The session state after the first `turns` turns: `RESEARCH_TURN_HISTORY` with every
/// research turn's findings so far (nothing is compacted, so none is dropped).
pub fn session_state(session: &ResearchSession, turns: usize) -> Map<String, Value> {
    let history: Vec<Value> = session.turns[..turns]
        .iter()
        .filter_map(|t| {
            t.findings_summary.as_ref().map(|f| {
                json!({
                    "invocation_id": format!("inv-{:04}", t.n),
                    "conclude_output": { "findings_summary": f },
                })
            })
        })
        .collect();
    let mut state = Map::new();
    state.insert(RESEARCH_TURN_HISTORY.to_owned(), Value::Array(history));
    state
}

/// The decision state after every turn of `session` (gate open, nothing compacted), with
/// the turn's labels.
pub fn turn_cases(
    session: &ResearchSession,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> Vec<TurnCase> {
    let (events, ends) = events_and_turn_ends(session);
    let mut out = Vec::with_capacity(session.turns.len());
    for (i, (turn, &end)) in session.turns.iter().zip(&ends).enumerate() {
        let view = coordinator_view(&events[..end]);
        let state = session_state(session, i + 1);
        if let Some(state) =
            extract_decision_state_from_view(&view, None, &state, estimator, budget_tokens)
        {
            out.push(TurnCase {
                session: session.session.clone(),
                turn: turn.n,
                expect: turn.expect,
                state,
            });
        }
    }
    out
}
