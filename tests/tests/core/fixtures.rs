//! Shared builders: sessions of conversational turns, and an engine over fakes.

use std::sync::Arc;

use compaction_core::testing::{
    EventFactory, InMemoryStore, RecordingSummarizer, RecordingTelemetry, ScriptedDecisionModel,
    SequentialIds, SteppingClock,
};
use compaction_core::{Engine, Event, Session, SessionKey, Settings};

/// The key every fixture session uses.
pub(crate) fn key() -> SessionKey {
    SessionKey::new("zocrates", "researcher", "s1")
}

/// Appends `n` completed conversational turns (`q{i}` / `a{i}`), the last answer reporting
/// `tokens` coordinator prompt tokens.
pub(crate) fn add_turns(
    f: &mut EventFactory,
    events: &mut Vec<Event>,
    from: usize,
    n: usize,
    tokens: u64,
) {
    for i in from..from + n {
        let mut turn =
            f.conversational_turn(&format!("inv{i}"), &format!("q{i}"), &format!("a{i}"));
        turn[1] = turn[1].clone().with_prompt_tokens(tokens);
        events.extend(turn);
    }
}

/// A session of `n` completed turns whose coordinator reports `tokens` prompt tokens.
pub(crate) fn session_with_turns(n: usize, tokens: u64) -> (EventFactory, Session) {
    let mut f = EventFactory::new();
    let mut session = Session::new(key());
    add_turns(&mut f, &mut session.events, 1, n, tokens);
    (f, session)
}

/// An engine over fakes, with handles to inspect them.
pub(crate) struct Harness {
    pub(crate) engine: Engine,
    pub(crate) decision: Arc<ScriptedDecisionModel>,
    pub(crate) summarizer: Arc<RecordingSummarizer>,
    pub(crate) store: Arc<InMemoryStore>,
    pub(crate) telemetry: Arc<RecordingTelemetry>,
}

impl Harness {
    pub(crate) fn new(
        settings: Settings,
        decision: ScriptedDecisionModel,
        summarizer: RecordingSummarizer,
    ) -> Harness {
        let decision = Arc::new(decision);
        let summarizer = Arc::new(summarizer);
        let store = Arc::new(InMemoryStore::new());
        let telemetry = Arc::new(RecordingTelemetry::new());
        let engine = Engine::builder(
            decision.clone(),
            summarizer.clone(),
            store.clone(),
            Arc::new(SteppingClock::starting_at(1_800_000_000)),
            Arc::new(SequentialIds::default()),
        )
        .settings(settings)
        .telemetry(telemetry.clone())
        .build()
        .expect("valid settings");
        Harness {
            engine,
            decision,
            summarizer,
            store,
            telemetry,
        }
    }

    /// Defaults with a decision model that always answers `p`.
    pub(crate) fn answering(p: f64) -> Harness {
        Harness::new(
            Settings::default(),
            ScriptedDecisionModel::constant(p),
            RecordingSummarizer::new(),
        )
    }

    /// Stores `session` and runs one evaluation.
    pub(crate) async fn evaluate(&self, session: Session) -> compaction_core::Outcome {
        self.store.insert(session);
        self.engine.evaluate_and_compact(&key()).await
    }

    /// The stored session.
    pub(crate) fn stored(&self) -> Session {
        self.store.get(&key()).expect("session stored")
    }
}
