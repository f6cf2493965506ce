//! The lane's contract with real parts: the async SQLite store in a temp dir, the engine, the
//! system clock; models are compaction-core's scripted decision model and a summarizer that
//! answers only when the test releases it. Time is tokio's paused clock where it matters.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use compaction_core::testing::ScriptedDecisionModel;
use compaction_core::{
    AdapterError, Engine, EventBuilder, ModelInfo, Outcome, SessionKey, SessionStore, Settings,
    Summarizer, Summary, SummaryRequest, async_trait,
};
use service::{LaneConfig, LaneError, LaneWait, Lanes, ProcessIds, SystemClock};
use session_store::SqliteStore;
use tokio::sync::{Semaphore, mpsc};

/// Answers once the test adds a permit; tells the test when a call starts.
struct GatedSummarizer {
    started: mpsc::UnboundedSender<usize>,
    release: Arc<Semaphore>,
    calls: AtomicUsize,
}

#[async_trait]
impl Summarizer for GatedSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "gated")
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.started.send(n);
        self.release.acquire().await?.forget();
        Ok(Summary::new(format!(
            "Summary {n} of {} turns.",
            request.turns.len()
        )))
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    clock: Arc<SystemClock>,
    ids: Arc<ProcessIds>,
    lanes: Lanes,
    summarizer: Arc<GatedSummarizer>,
    started: mpsc::UnboundedReceiver<usize>,
    release: Arc<Semaphore>,
}

fn settings() -> Settings {
    Settings {
        adaptive_compaction_min_turns: 3,
        adaptive_compaction_retention_turns: 2,
        adaptive_compaction_token_floor: 1_000,
        ..Settings::default()
    }
}

fn rig(config: LaneConfig) -> Rig {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(SqliteStore::open(dir.path().join("sessions.db")).expect("store"));
    let (tx, started) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let summarizer = Arc::new(GatedSummarizer {
        started: tx,
        release: release.clone(),
        calls: AtomicUsize::new(0),
    });
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer.clone(),
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings())
    .summarize_deadline(Duration::from_secs(3_600))
    .build()
    .expect("engine");
    Rig {
        _dir: dir,
        store,
        clock,
        ids,
        lanes: Lanes::new(Arc::new(engine), config),
        summarizer,
        started,
        release,
    }
}

impl Rig {
    async fn session(&self, id: &str) -> SessionKey {
        let key = SessionKey::new("app", "user", id);
        self.store
            .create_session(&key, Default::default())
            .await
            .expect("create");
        key
    }

    /// Stores one completed turn (what the service does while the reply streams).
    async fn store_turn(&self, key: &SessionKey, n: usize) {
        let events = EventBuilder::new(self.clock.as_ref(), self.ids.as_ref(), "coordinator");
        let invocation = format!("inv-{n}");
        for event in [
            events.user_query(&invocation, &format!("Question {n}?")),
            events.reply(&invocation, &format!("Answer {n}."), Some(5_000)),
        ] {
            let revision = self
                .store
                .gate_snapshot(key)
                .await
                .expect("snapshot")
                .revision;
            self.store
                .append(key, revision, event)
                .await
                .expect("append");
        }
    }

    /// Runs turn `n` through the lane and returns its report.
    async fn turn(&self, key: &SessionKey, n: usize) -> Arc<service::LaneReport> {
        let turn = self
            .lanes
            .begin(key, format!("inv-{n}"))
            .await
            .expect("begin");
        self.store_turn(key, n).await;
        turn.finish().await.expect("report")
    }

    async fn has_summary(&self, key: &SessionKey) -> bool {
        self.store
            .load_context(key)
            .await
            .expect("context")
            .summary()
            .is_some()
    }
}

fn long() -> LaneConfig {
    LaneConfig::default()
        .max_wait(Duration::from_secs(10))
        .evaluation_deadline(Duration::from_secs(600))
}

/// (a)+(b)+(c): nothing is evaluated before `finish`; the evaluation starts right after; the
/// next turn waits for it and then sees the compacted context.
#[tokio::test(start_paused = true)]
async fn evaluation_follows_the_stream_and_the_next_turn_waits_for_it() {
    let mut rig = rig(long());
    let key = rig.session("s").await;
    for n in 1..=2 {
        let report = rig.turn(&key, n).await;
        assert_eq!(report.outcome().map(Outcome::label), Some("fast-exit"));
    }
    let turn = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    rig.store_turn(&key, 3).await;
    // The turn is stored and complete, but its stream has not closed: no evaluation yet.
    assert_eq!(rig.summarizer.calls.load(Ordering::SeqCst), 0);
    let evaluation = turn.finish();
    assert_eq!(
        rig.started.recv().await,
        Some(1),
        "the summarizer was called"
    );

    let lanes = rig.lanes.clone();
    let k = key.clone();
    let next = tokio::spawn(async move { lanes.begin(&k, "inv-4").await });
    // A second of (paused) time passes with the summarizer held: the next turn still waits.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !next.is_finished(),
        "turn 4 began while turn 3's evaluation ran"
    );
    assert!(!rig.has_summary(&key).await);

    rig.release.add_permits(1);
    let next = next.await.expect("join").expect("begin");
    match next.wait() {
        LaneWait::Waited(d) => assert!(d >= Duration::from_secs(1), "{d:?}"),
        other => panic!("expected a wait, got {other:?}"),
    }
    assert!(
        rig.has_summary(&key).await,
        "turn 4 starts on the compacted context"
    );
    let report = evaluation.await.expect("report");
    assert_eq!(report.outcome().map(Outcome::label), Some("compressed"));
    assert_eq!(report.wait, LaneWait::Immediate);
    drop(next);
}

/// (c): the wait is bounded; the turn proceeds uncompacted and says so; its own evaluation
/// queues behind the running one and runs after it.
#[tokio::test(start_paused = true)]
async fn the_wait_is_bounded_and_the_late_evaluation_queues() {
    let mut rig = rig(long().max_wait(Duration::from_secs(2)));
    let mut reports = rig.lanes.subscribe();
    let key = rig.session("s").await;
    for n in 1..=2 {
        let _ = rig.turn(&key, n).await;
    }
    let _ = reports.recv().await;
    let _ = reports.recv().await;
    let turn = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    rig.store_turn(&key, 3).await;
    let third = turn.finish();
    assert_eq!(rig.started.recv().await, Some(1));

    let turn = rig.lanes.begin(&key, "inv-4").await.expect("begin");
    assert_eq!(turn.wait(), LaneWait::TimedOut(Duration::from_secs(2)));
    assert!(
        !rig.has_summary(&key).await,
        "turn 4 runs on the uncompacted context"
    );
    rig.store_turn(&key, 4).await;
    let fourth = turn.finish();

    rig.release.add_permits(1);
    // Turn 3's compaction was appended while turn 4 was stored: it is stale, and the lane
    // evaluates again on the new revision (a second summarizer call).
    assert_eq!(rig.started.recv().await, Some(2));
    rig.release.add_permits(1);
    let first = third.await.expect("report");
    assert_eq!(first.wait, LaneWait::Immediate);
    let labels: Vec<_> = first.outcomes.iter().map(Outcome::label).collect();
    assert_eq!(labels, ["stale-dropped", "compressed"]);
    let second = fourth.await.expect("report");
    assert_eq!(second.turn_id, "inv-4");
    assert_eq!(second.wait, LaneWait::TimedOut(Duration::from_secs(2)));
    assert_eq!(second.outcome().map(Outcome::label), Some("fast-exit"));
    let order: Vec<String> = [reports.recv().await, reports.recv().await]
        .into_iter()
        .map(|r| r.expect("report").turn_id.clone())
        .collect();
    assert_eq!(
        order,
        ["inv-3", "inv-4"],
        "turn 4's evaluation ran after turn 3's"
    );
    assert!(rig.has_summary(&key).await);
}

/// (g): an external write during summarization drops the compaction as stale; the lane
/// evaluates once more on the new revision before the next turn begins.
#[tokio::test(start_paused = true)]
async fn a_stale_drop_is_evaluated_again_before_the_next_turn() {
    let mut rig = rig(long());
    let key = rig.session("s").await;
    for n in 1..=2 {
        let _ = rig.turn(&key, n).await;
    }
    let turn = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    rig.store_turn(&key, 3).await;
    let evaluation = turn.finish();
    assert_eq!(rig.started.recv().await, Some(1));
    // An external REST writer moves the session on while the summary is being written.
    let events = EventBuilder::new(rig.clock.as_ref(), rig.ids.as_ref(), "coordinator");
    let revision = rig
        .store
        .gate_snapshot(&key)
        .await
        .expect("snapshot")
        .revision;
    rig.store
        .append(
            &key,
            revision,
            events.user_query("ext", "a note from a script"),
        )
        .await
        .expect("external write");
    rig.release.add_permits(1);
    assert_eq!(rig.started.recv().await, Some(2), "re-evaluated");
    rig.release.add_permits(1);
    let report = evaluation.await.expect("report");
    let labels: Vec<_> = report.outcomes.iter().map(Outcome::label).collect();
    assert_eq!(labels, ["stale-dropped", "compressed"]);
    assert!(report.re_evaluated());
    let next = rig.lanes.begin(&key, "inv-4").await.expect("begin");
    assert_eq!(next.wait(), LaneWait::Immediate);
    assert!(rig.has_summary(&key).await);
    let history = rig.store.compaction_history(&key).await.expect("history");
    assert_eq!(history.len(), 1, "the stale summary was never written");
}

/// (f): a hung summarizer cannot keep the lane past the evaluation deadline.
#[tokio::test(start_paused = true)]
async fn an_evaluation_never_outlives_its_deadline() {
    let mut rig = rig(long()
        .max_wait(Duration::from_secs(60))
        .evaluation_deadline(Duration::from_secs(5)));
    let key = rig.session("s").await;
    for n in 1..=2 {
        let _ = rig.turn(&key, n).await;
    }
    let turn = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    rig.store_turn(&key, 3).await;
    let evaluation = turn.finish();
    assert_eq!(rig.started.recv().await, Some(1));
    // Never released.
    let next = rig.lanes.begin(&key, "inv-4").await.expect("begin");
    assert_eq!(next.wait(), LaneWait::Waited(Duration::from_secs(5)));
    let report = evaluation.await.expect("report");
    assert_eq!(report.deadline_passed, Some(Duration::from_secs(5)));
    assert!(report.outcome().is_none());
    let json = serde_json::to_value(&*report).expect("json");
    assert_eq!(json["deadline_passed_ms"], 5000.0);
    assert!(json["outcome"].is_null());
}

/// (d): a session whose evaluation is held never delays another session.
#[tokio::test(start_paused = true)]
async fn sessions_never_wait_for_each_other() {
    let mut rig = rig(long());
    let a = rig.session("a").await;
    let b = rig.session("b").await;
    for n in 1..=2 {
        let _ = rig.turn(&a, n).await;
    }
    let turn = rig.lanes.begin(&a, "a-3").await.expect("begin");
    rig.store_turn(&a, 3).await;
    let held = turn.finish();
    assert_eq!(rig.started.recv().await, Some(1));
    for n in 1..=3 {
        let turn = rig.lanes.begin(&b, format!("b-{n}")).await.expect("begin");
        // B may wait for its own previous (fast) evaluation, never for A's held one: no
        // (paused) time passes, where waiting on A would last the whole 10 s bound.
        assert_eq!(turn.wait().duration(), Duration::ZERO, "{:?}", turn.wait());
        rig.store_turn(&b, n).await;
        drop(turn.finish());
    }
    assert_eq!(rig.lanes.active_lanes(), 2);
    rig.release.add_permits(2);
    let _ = held.await.expect("report");
    let _ = rig.lanes.begin(&b, "b-4").await.expect("begin");
}

/// (e): lanes live while a turn or evaluation does, then they are freed.
#[tokio::test(start_paused = true)]
async fn idle_lanes_are_freed() {
    let rig = rig(long());
    let mut keys = Vec::new();
    for i in 0..50 {
        keys.push(rig.session(&format!("s{i}")).await);
    }
    let turn = rig.lanes.begin(&keys[0], "t").await.expect("begin");
    assert_eq!(rig.lanes.active_lanes(), 1);
    drop(turn);
    assert_eq!(
        rig.lanes.active_lanes(),
        0,
        "an abandoned turn frees its lane"
    );
    for key in &keys {
        let report = rig.turn(key, 1).await;
        assert_eq!(report.outcome().map(Outcome::label), Some("fast-exit"));
    }
    assert_eq!(rig.lanes.active_lanes(), 0);
}

/// Shutdown refuses new turns and waits (boundedly) for running evaluations.
#[tokio::test(start_paused = true)]
async fn shutdown_refuses_new_turns_and_drains() {
    let mut rig = rig(long());
    let key = rig.session("s").await;
    for n in 1..=2 {
        let _ = rig.turn(&key, n).await;
    }
    let turn = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    rig.store_turn(&key, 3).await;
    let evaluation = turn.finish();
    assert_eq!(rig.started.recv().await, Some(1));
    assert!(
        !rig.lanes.shutdown(Duration::from_secs(1)).await,
        "still running"
    );
    assert_eq!(
        rig.lanes.begin(&key, "inv-4").await.err(),
        Some(LaneError::ShuttingDown)
    );
    rig.release.add_permits(1);
    assert!(rig.lanes.shutdown(Duration::from_secs(1)).await);
    let report = evaluation.await.expect("report");
    assert_eq!(report.outcome().map(Outcome::label), Some("compressed"));
}

/// A turn whose session still has a turn running (its reply streaming) waits at most
/// `max_turn_wait`, then is refused with `TurnInProgress`; once the running turn ended, the
/// next one begins at once.
#[tokio::test(start_paused = true)]
async fn a_turn_waits_boundedly_for_a_running_turn_of_its_session() {
    let rig = rig(long().max_turn_wait(Duration::from_secs(3)));
    let key = rig.session("s").await;
    let streaming = rig.lanes.begin(&key, "inv-1").await.expect("begin");
    let started = tokio::time::Instant::now();
    match rig.lanes.begin(&key, "inv-2").await {
        Err(LaneError::TurnInProgress(bound)) => {
            assert_eq!(bound, Duration::from_secs(3));
            assert_eq!(started.elapsed(), Duration::from_secs(3));
        }
        Err(other) => panic!("expected TurnInProgress, got {other}"),
        Ok(_) => panic!("a second turn began while the first was running"),
    }
    drop(streaming);
    let next = rig.lanes.begin(&key, "inv-3").await.expect("begin");
    assert_eq!(next.wait(), LaneWait::Immediate);
}
