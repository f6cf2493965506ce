//! The per-session lane: spec section 8's sequential post-turn lifecycle, for any tokio service.
//!
//! A service calls [`Lanes::begin`] with a session key when a turn arrives, streams the reply
//! and closes the stream, then calls [`Turn::finish`]. Per session the lane guarantees:
//!
//! - **(a) stream first.** Nothing is evaluated before [`Turn::finish`], which the service
//!   calls once the reply stream was delivered and closed.
//! - **(b) right after.** [`Turn::finish`] starts the post-turn `evaluate_and_compact` at once,
//!   on its own task, and returns; the caller is never blocked by it.
//! - **(c) the next turn waits, boundedly.** [`Lanes::begin`] for the same session returns when
//!   the previous turn's evaluation ended, or after [`LaneConfig::max_wait`]; then the turn
//!   proceeds on the uncompacted context and [`Turn::wait`] (and its [`LaneReport::wait`]) says
//!   [`LaneWait::TimedOut`]. Turns of one session are also sequential among themselves: a
//!   turn waits at most [`LaneConfig::max_turn_wait`] for a running one (its reply still
//!   streaming), then is refused with [`LaneError::TurnInProgress`].
//! - **(d) sessions are independent.** Each session has its own lane; nothing is shared but a
//!   short map lookup.
//! - **(e) idle lanes are freed.** A lane lives while a turn or an evaluation of its session
//!   does; then it is removed, so memory follows the sessions in flight, not the sessions
//!   ever seen ([`Lanes::active_lanes`]).
//! - **(f) deadlines hold.** One evaluation (including its stale re-run) never runs longer
//!   than [`LaneConfig::evaluation_deadline`], whatever an adapter or the store does: when it
//!   passes, the evaluation is cancelled and the report says so.
//! - **(g) a stale drop is retried once.** When the engine drops a compaction as stale (an
//!   external writer moved the session on), the lane evaluates once more on the new revision
//!   before the next turn is released (still bounded by the same wait).
//!
//! Every evaluation ends in a [`LaneReport`], returned by the [`Evaluation`] handle and
//! broadcast to [`Lanes::subscribe`]rs.
//!
//! [`Lanes::shutdown`] refuses new turns and waits (boundedly) for running turns and
//! evaluations.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use compaction_core::{
    DEFAULT_PROBE_DEADLINE, DEFAULT_SUMMARIZE_DEADLINE, Engine, Outcome, SessionKey,
};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use tokio::sync::{OwnedMutexGuard, broadcast, mpsc};
use tokio::time::Instant;

/// How long the next turn waits and how long one evaluation may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaneConfig {
    /// The longest a turn waits for the previous turn's evaluation (default 10 s, the
    /// spec's "by the time the user finishes typing").
    pub max_wait: Duration,
    /// The longest a turn waits for the previous turn of its session to end (its reply still
    /// streaming): after it, [`Lanes::begin`] answers [`LaneError::TurnInProgress`]
    /// (default 120 s).
    pub max_turn_wait: Duration,
    /// The longest one evaluation runs, stale re-run included (default: the engine's probe
    /// and summarize deadlines plus 10 s for the store).
    pub evaluation_deadline: Duration,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            max_wait: Duration::from_secs(10),
            max_turn_wait: Duration::from_secs(120),
            evaluation_deadline: DEFAULT_PROBE_DEADLINE
                + DEFAULT_SUMMARIZE_DEADLINE
                + Duration::from_secs(10),
        }
    }
}

impl LaneConfig {
    /// Sets [`LaneConfig::max_wait`].
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// Sets [`LaneConfig::max_turn_wait`].
    pub fn max_turn_wait(mut self, wait: Duration) -> Self {
        self.max_turn_wait = wait;
        self
    }

    /// Sets [`LaneConfig::evaluation_deadline`].
    pub fn evaluation_deadline(mut self, deadline: Duration) -> Self {
        self.evaluation_deadline = deadline;
        self
    }
}

/// How a turn's start related to the previous evaluation of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaneWait {
    /// No evaluation was running: the turn started at once.
    Immediate,
    /// The turn waited this long for the previous evaluation to end; it runs on the
    /// context that evaluation left.
    Waited(Duration),
    /// The previous evaluation was still running after [`LaneConfig::max_wait`]: the turn
    /// proceeds on the uncompacted context.
    TimedOut(Duration),
}

impl LaneWait {
    /// `immediate`, `waited` or `timed-out`.
    pub fn label(&self) -> &'static str {
        match self {
            LaneWait::Immediate => "immediate",
            LaneWait::Waited(_) => "waited",
            LaneWait::TimedOut(_) => "timed-out",
        }
    }

    /// How long the turn waited.
    pub fn duration(&self) -> Duration {
        match self {
            LaneWait::Immediate => Duration::ZERO,
            LaneWait::Waited(d) | LaneWait::TimedOut(d) => *d,
        }
    }
}

/// What one post-turn evaluation of a lane did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LaneReport {
    /// The session.
    pub key: SessionKey,
    /// The service's id for the turn (its invocation id, say).
    pub turn_id: String,
    /// How that turn started.
    pub wait: LaneWait,
    /// The engine's outcomes in order: one, or two when the first was
    /// [`Outcome::StaleDropped`] and the lane evaluated again on the new revision.
    pub outcomes: Vec<Outcome>,
    /// Set when [`LaneConfig::evaluation_deadline`] passed: the evaluation was cancelled.
    pub deadline_passed: Option<Duration>,
    /// How long the evaluation waited for an earlier one of its session (only after a
    /// [`LaneWait::TimedOut`] turn).
    pub queued: Duration,
    /// How long the evaluation ran.
    pub elapsed: Duration,
}

impl LaneReport {
    /// The last outcome, when the evaluation ended before its deadline.
    pub fn outcome(&self) -> Option<&Outcome> {
        if self.deadline_passed.is_some() {
            None
        } else {
            self.outcomes.last()
        }
    }

    /// True when a stale drop was evaluated once more.
    pub fn re_evaluated(&self) -> bool {
        self.outcomes.len() > 1
    }
}

impl Serialize for LaneReport {
    /// `session`, `turn_id`, `wait` (label), `waited_ms`, `outcome` (the last outcome or
    /// null), `outcomes` (all of them), `deadline_passed_ms` (or null), `queued_ms`,
    /// `elapsed_ms`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut s = serializer.serialize_struct("LaneReport", 9)?;
        s.serialize_field("session", &self.key.to_string())?;
        s.serialize_field("turn_id", &self.turn_id)?;
        s.serialize_field("wait", self.wait.label())?;
        s.serialize_field("waited_ms", &ms(self.wait.duration()))?;
        s.serialize_field("outcome", &self.outcome())?;
        s.serialize_field("outcomes", &self.outcomes)?;
        s.serialize_field("deadline_passed_ms", &self.deadline_passed.map(ms))?;
        s.serialize_field("queued_ms", &ms(self.queued))?;
        s.serialize_field("elapsed_ms", &ms(self.elapsed))?;
        s.end()
    }
}

/// Why a turn could not begin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaneError {
    /// [`Lanes::shutdown`] was called: no new turns.
    #[error("the service is shutting down: no new turns")]
    ShuttingDown,
    /// The previous turn of the session was still running (its reply streaming) after
    /// [`LaneConfig::max_turn_wait`]: this turn did not begin.
    #[error("a turn of this session is still running after {0:?}: send the next one when it ended")]
    TurnInProgress(Duration),
    /// The runtime shut down before the evaluation ended: nothing is known of it.
    #[error("the evaluation was cancelled with its runtime")]
    Cancelled,
}

/// The lanes of every session a service serves. Cheap to clone (shared).
#[derive(Clone)]
pub struct Lanes {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("config", &self.shared.config)
            .field("active_lanes", &self.active_lanes())
            .finish_non_exhaustive()
    }
}

struct Shared {
    /// Replaced whole by [`Lanes::set_engine`]; each evaluation takes the one current when it
    /// starts.
    engine: std::sync::RwLock<Arc<Engine>>,
    config: LaneConfig,
    lanes: Mutex<HashMap<SessionKey, Weak<Lane>>>,
    reports: broadcast::Sender<Arc<LaneReport>>,
    /// Cloned by every turn and evaluation; taken by shutdown (no new turns).
    open: Mutex<Option<mpsc::Sender<()>>>,
    /// Ends when every clone of `open` is dropped.
    drained: tokio::sync::Mutex<mpsc::Receiver<()>>,
    /// Turns waiting now for their session's previous evaluation.
    waiting: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn engine(&self) -> Arc<Engine> {
        self.engine
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// One session's lane: turns one at a time, evaluations one at a time.
#[derive(Default)]
struct Lane {
    turn: Arc<tokio::sync::Mutex<()>>,
    evaluation: Arc<tokio::sync::Mutex<()>>,
}

/// A counted reference to a lane: the last one dropped frees the lane.
struct LaneRef {
    lane: Option<Arc<Lane>>,
    key: SessionKey,
    shared: Arc<Shared>,
}

impl Drop for LaneRef {
    fn drop(&mut self) {
        drop(self.lane.take());
        let mut lanes = self.shared.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if lanes
            .get(&self.key)
            .is_some_and(|weak| weak.strong_count() == 0)
        {
            lanes.remove(&self.key);
        }
    }
}

/// Counts a waiting turn while it lives (also when its future is dropped mid-wait).
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

type Acquire = Pin<Box<dyn Future<Output = OwnedMutexGuard<()>> + Send>>;

/// The turn's place in its session's evaluation order.
enum Slot {
    /// No evaluation runs: the slot is this turn's.
    Held(OwnedMutexGuard<()>),
    /// The previous evaluation outlived the wait: this turn's evaluation is queued behind it
    /// (tokio's mutex is FIFO, and the acquisition was enqueued before the turn began).
    Queued(Acquire),
}

impl Lanes {
    /// Lanes that evaluate with `engine`.
    pub fn new(engine: Arc<Engine>, config: LaneConfig) -> Self {
        let (reports, _) = broadcast::channel(1024);
        let (open, drained) = mpsc::channel(1);
        Lanes {
            shared: Arc::new(Shared {
                engine: std::sync::RwLock::new(engine),
                config,
                lanes: Mutex::new(HashMap::new()),
                reports,
                open: Mutex::new(Some(open)),
                drained: tokio::sync::Mutex::new(drained),
                waiting: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> LaneConfig {
        self.shared.config
    }

    /// The engine the next evaluation runs with.
    pub fn engine(&self) -> Arc<Engine> {
        self.shared.engine()
    }

    /// Makes every evaluation that starts from now on run with `engine` (for example the same
    /// engine on new settings, [`Engine::with_settings`]); running evaluations finish on the
    /// engine they started with.
    pub fn set_engine(&self, engine: Arc<Engine>) {
        *self
            .shared
            .engine
            .write()
            .unwrap_or_else(|e| e.into_inner()) = engine;
    }

    /// Every evaluation's report, as it ends (a lagging receiver loses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LaneReport>> {
        self.shared.reports.subscribe()
    }

    /// Lanes alive now: sessions with a turn or an evaluation in flight.
    pub fn active_lanes(&self) -> usize {
        self.shared
            .lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Turns waiting now for their session's previous evaluation.
    pub fn waiting_turns(&self) -> usize {
        self.shared
            .waiting
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn lane(&self, key: &SessionKey) -> LaneRef {
        let mut lanes = self.shared.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let lane = match lanes.get(key).and_then(Weak::upgrade) {
            Some(lane) => lane,
            None => {
                let lane = Arc::new(Lane::default());
                lanes.insert(key.clone(), Arc::downgrade(&lane));
                lane
            }
        };
        LaneRef {
            lane: Some(lane),
            key: key.clone(),
            shared: self.shared.clone(),
        }
    }

    /// Begins a turn of session `key` (`turn_id` names it in the report): waits for the
    /// session's running turn, then for its running evaluation, at most
    /// [`LaneConfig::max_wait`] for the latter. Call [`Turn::finish`] once the reply stream
    /// was delivered and closed.
    pub async fn begin(
        &self,
        key: &SessionKey,
        turn_id: impl Into<String>,
    ) -> Result<Turn, LaneError> {
        let open = self
            .shared
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(LaneError::ShuttingDown)?;
        let lane = self.lane(key);
        let (turn_lock, evaluation_lock) = {
            let l = lane.lane.as_ref().expect("held until drop");
            (l.turn.clone(), l.evaluation.clone())
        };
        let max_turn_wait = self.shared.config.max_turn_wait;
        let turn_guard = tokio::time::timeout(max_turn_wait, turn_lock.lock_owned())
            .await
            .map_err(|_| LaneError::TurnInProgress(max_turn_wait))?;
        let (slot, wait) = match evaluation_lock.clone().try_lock_owned() {
            Ok(guard) => (Slot::Held(guard), LaneWait::Immediate),
            Err(_) => {
                let started = Instant::now();
                let mut acquire: Acquire = Box::pin(evaluation_lock.lock_owned());
                let waiting = Waiting::new(&self.shared.waiting);
                let waited = tokio::time::timeout(self.shared.config.max_wait, &mut acquire).await;
                drop(waiting);
                match waited {
                    Ok(guard) => (Slot::Held(guard), LaneWait::Waited(started.elapsed())),
                    Err(_) => (Slot::Queued(acquire), LaneWait::TimedOut(started.elapsed())),
                }
            }
        };
        Ok(Turn {
            lane,
            turn_id: turn_id.into(),
            _turn_guard: turn_guard,
            slot,
            wait,
            open,
        })
    }

    /// Refuses new turns, then waits at most `bound` for running turns and evaluations to
    /// end; true when they all did.
    pub async fn shutdown(&self, bound: Duration) -> bool {
        drop(
            self.shared
                .open
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let mut drained = self.shared.drained.lock().await;
        tokio::time::timeout(bound, drained.recv()).await.is_ok()
    }
}

/// A turn in progress: holds its session's lane until [`Turn::finish`] (or until dropped:
/// an abandoned or errored turn is not evaluated).
#[must_use = "call finish() after the reply stream closed, or the turn is not evaluated"]
pub struct Turn {
    lane: LaneRef,
    turn_id: String,
    _turn_guard: OwnedMutexGuard<()>,
    slot: Slot,
    wait: LaneWait,
    open: mpsc::Sender<()>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("session", &self.lane.key)
            .field("turn_id", &self.turn_id)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Turn {
    /// How this turn started: at once, after waiting for the previous evaluation, or on the
    /// uncompacted context after [`LaneConfig::max_wait`].
    pub fn wait(&self) -> LaneWait {
        self.wait
    }

    /// The session.
    pub fn key(&self) -> &SessionKey {
        &self.lane.key
    }

    /// The reply stream was delivered and closed: runs the post-turn evaluation now on its own
    /// task (inside the caller's current `tracing` span, so the engine's probe and summarize
    /// spans nest under the turn) and releases the session to its next turn (which waits for
    /// this evaluation).
    pub fn finish(self) -> Evaluation {
        let Turn {
            lane,
            turn_id,
            _turn_guard,
            slot,
            wait,
            open,
        } = self;
        let shared = lane.shared.clone();
        // The caller's span (a service's per-turn span) parents the engine's spans.
        let span = tracing::Span::current();
        let handle = tokio::spawn(tracing::Instrument::instrument(
            async move {
                let queued_since = Instant::now();
                let _slot = match slot {
                    Slot::Held(guard) => guard,
                    Slot::Queued(acquire) => acquire.await,
                };
                let queued = queued_since.elapsed();
                let started = Instant::now();
                let deadline = shared.config.evaluation_deadline;
                let mut outcomes = Vec::new();
                let engine = shared.engine();
                let ran = tokio::time::timeout(deadline, async {
                    let first = engine.evaluate_and_compact(&lane.key).await;
                    let stale = matches!(first, Outcome::StaleDropped { .. });
                    outcomes.push(first);
                    if stale {
                        outcomes.push(engine.evaluate_and_compact(&lane.key).await);
                    }
                })
                .await;
                let report = Arc::new(LaneReport {
                    key: lane.key.clone(),
                    turn_id,
                    wait,
                    outcomes,
                    deadline_passed: ran.is_err().then_some(deadline),
                    queued,
                    elapsed: started.elapsed(),
                });
                // No subscriber is not an error.
                let _ = shared.reports.send(report.clone());
                drop(lane);
                drop(open);
                report
            },
            span,
        ));
        // The evaluation holds its slot (or its place in the queue): the next turn may begin.
        drop(_turn_guard);
        Evaluation { handle }
    }
}

/// A running post-turn evaluation; await it for its report, or drop it (it keeps running).
#[derive(Debug)]
pub struct Evaluation {
    handle: tokio::task::JoinHandle<Arc<LaneReport>>,
}

impl Future for Evaluation {
    type Output = Result<Arc<LaneReport>, LaneError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.handle)
            .poll(cx)
            .map(|joined| match joined {
                Ok(report) => Ok(report),
                // The evaluation task panicked: a bug in an adapter, passed on to the awaiter.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(LaneError::Cancelled),
            })
    }
}
