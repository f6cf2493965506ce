//! The append's rules, with no database driver: what appending one event does to the session
//! row (the gate header), to the view and subsumption flags, and to the session state. The
//! SQLite store (`append.rs`) and the PostgreSQL store (`postgres/append.rs`) execute this one
//! plan in their transaction, statement for statement; they own only how rows are read and
//! written.
//!
//! The plan, after the revision check and the insert:
//! 1. an unscoped event whose timestamp does not follow the latest in-view one is refused
//!    ([`AppendPlan::check_timestamp`]);
//! 2. [`AppendPlan::header_step`] applies what the event alone changes (the prompt token count,
//!    the turn tracker) and says what is left: nothing, the view's compactions to read for
//!    [`on_compaction`], or the whole history to read for [`recompute`] (a rewind);
//! 3. [`AppendPlan::persisted_state`] is the part of ADK's `state_delta` to merge into the
//!    stored state ([`merge_state`]).

use std::path::PathBuf;

use compaction_core::store_support::timestamp_may_follow;
use compaction_core::store_support::{CompactionRange, subsumption_on_append};
use compaction_core::{Event, EventCompaction, SessionKey, Timestamp};
use serde_json::{Map, Value};

use crate::error::SessionStoreError;
use crate::header::Recomputed;
use crate::row::{LiveRef, SessionRow};

/// ADK's state-delta action keys (snake_case and the camelCase alias).
const STATE_DELTA_KEYS: [&str; 2] = ["state_delta", "stateDelta"];

/// State keys ADK never persists.
const TEMP_PREFIX: &str = "temp:";

/// One event's append at sequence number `seq`.
pub(crate) struct AppendPlan<'e> {
    event: &'e Event,
    /// The event's position in the session (the new revision).
    pub(crate) seq: i64,
    /// Whether the event joins the coordinator view (unscoped and not a rewind).
    pub(crate) in_view: bool,
}

/// What the append must still do after [`AppendPlan::header_step`].
pub(crate) enum NextStep<'e> {
    /// Nothing: the session row is up to date.
    Done,
    /// A compaction joined the view: read the view's other non-subsumed compactions and apply
    /// [`on_compaction`].
    Compaction(&'e EventCompaction),
    /// A rewind: read the whole history and apply [`recompute`].
    Recompute,
}

/// What [`on_compaction`] leaves to write.
pub(crate) struct CompactionStep {
    /// The compactions (by seq) the new one subsumes: flag them `subsumed`.
    pub(crate) newly_subsumed: Vec<i64>,
    /// The flags drifted from what the core derives: recompute the header ([`recompute`]).
    pub(crate) drifted: bool,
}

impl<'e> AppendPlan<'e> {
    /// The plan for appending `event` at revision `seq`.
    pub(crate) fn new(event: &'e Event, seq: i64) -> Self {
        let is_rewind = event.actions.rewind_before_invocation_id.is_some();
        AppendPlan {
            event,
            seq,
            in_view: !is_rewind && event.is_unscoped(),
        }
    }

    /// Refuses an event whose timestamp does not follow `latest`, the latest in-view
    /// non-compaction event's (compaction-core's `timestamp_may_follow`). Checked after the
    /// insert so that a duplicate is named as one; the caller's transaction is dropped, so
    /// nothing is written either way.
    pub(crate) fn check_timestamp(
        &self,
        latest: Option<f64>,
        key: &SessionKey,
        path: impl FnOnce() -> PathBuf,
    ) -> Result<(), SessionStoreError> {
        let latest = latest.and_then(|s| Timestamp::new(s).ok());
        if timestamp_may_follow(latest, self.event) {
            return Ok(());
        }
        Err(SessionStoreError::NonIncreasingTimestamp {
            path: path(),
            key: Box::new(key.clone()),
            event_id: self.event.id.clone(),
            latest: latest.unwrap_or(Timestamp::EPOCH),
            offered: self.event.timestamp,
        })
    }

    /// Applies to `row` what the event alone changes (an in-view event's prompt token count
    /// and turn), and says what is left to do.
    pub(crate) fn header_step(&self, row: &mut SessionRow) -> NextStep<'e> {
        if self.event.actions.rewind_before_invocation_id.is_some() {
            return NextStep::Recompute;
        }
        if !self.in_view {
            return NextStep::Done;
        }
        if let Some(tokens) = self.event.prompt_tokens() {
            row.prompt_tokens = Some(tokens);
        }
        match self.event.compaction() {
            Some(compaction) => NextStep::Compaction(compaction),
            None => {
                row.tracker.observe(self.event);
                NextStep::Done
            }
        }
    }

    /// The entries of the event's `state_delta` action that are persisted (keys prefixed
    /// `temp:` are not); `None` when there are none.
    pub(crate) fn persisted_state(&self) -> Option<Vec<(&'e String, &'e Value)>> {
        let persisted: Vec<(&String, &Value)> = STATE_DELTA_KEYS
            .iter()
            .find_map(|k| self.event.actions.extra.get(*k))
            .and_then(Value::as_object)?
            .iter()
            .filter(|(k, _)| !k.starts_with(TEMP_PREFIX))
            .collect();
        (!persisted.is_empty()).then_some(persisted)
    }
}

/// A compaction `compaction` joined the view at `seq`, beside `others`, the view's
/// non-subsumed compactions (read through the view-compactions index; with rolling
/// consolidation there is one): subsumption, the live compaction and the turn count as
/// compaction-core decides them ([`subsumption_on_append`]). The live compaction is either the
/// new one (the count restarts) or unchanged; anything else means the flags drifted.
pub(crate) fn on_compaction(
    row: &mut SessionRow,
    seq: i64,
    compaction: &EventCompaction,
    others: &[CompactionRange],
) -> CompactionStep {
    let new = CompactionRange {
        position: seq,
        start: compaction.start_timestamp,
        end: compaction.end_timestamp,
    };
    let appended = subsumption_on_append(others, new);
    let live = appended.live.map(|l| LiveRef {
        seq: l.position,
        start: l.start.seconds(),
        end: l.end.seconds(),
    });
    let drifted = match live {
        Some(live) if live.seq == seq => {
            row.live = Some(live);
            row.tracker.reset();
            false
        }
        Some(live) => row.live.is_none_or(|old| old.seq != live.seq),
        None => true,
    };
    CompactionStep {
        newly_subsumed: appended.newly_subsumed,
        drifted,
    }
}

/// A stored event's flags: `(seq, in_view, subsumed)`.
pub(crate) type StoredFlags = (i64, bool, bool);

/// The slow path (after a rewind): every view and subsumption flag and the header from the
/// whole history `events` (append order, with their stored flags `stored`), with
/// compaction-core's own functions. Updates `row`; returns the flags that changed.
pub(crate) fn recompute(
    row: &mut SessionRow,
    events: &[Event],
    stored: &[StoredFlags],
) -> Vec<StoredFlags> {
    let fresh = Recomputed::from_history(events);
    let changed = stored
        .iter()
        .enumerate()
        .map(|(i, &(seq, _, _))| (seq, fresh.in_view[i], fresh.subsumed[i]))
        .zip(stored)
        .filter(|(fresh, stored)| fresh != *stored)
        .map(|(fresh, _)| fresh)
        .collect();
    row.tracker = fresh.tracker;
    row.prompt_tokens = fresh.prompt_tokens;
    row.live = fresh.live.and_then(|i| {
        let c = events[i].compaction()?;
        Some(LiveRef {
            seq: stored[i].0,
            start: c.start_timestamp.seconds(),
            end: c.end_timestamp.seconds(),
        })
    });
    changed
}

/// Merges the `persisted` state entries into `state`.
pub(crate) fn merge_state(state: &mut Map<String, Value>, persisted: &[(&String, &Value)]) {
    for (k, v) in persisted {
        state.insert((*k).clone(), (*v).clone());
    }
}

#[cfg(test)]
mod tests {
    use compaction_core::store_support::TurnTracker;
    use serde_json::json;

    use super::*;

    fn row() -> SessionRow {
        SessionRow {
            pk: 1,
            revision: 0,
            tracker: TurnTracker::default(),
            prompt_tokens: None,
            live: None,
        }
    }

    fn event(value: Value) -> Event {
        serde_json::from_value(value).expect("an invented event")
    }

    #[test]
    fn only_persisted_state_keys_are_merged() {
        let e = event(json!({
            "id": "e1", "invocation_id": "i1", "author": "user", "timestamp": 10.0,
            "actions": {"state_delta": {"topic": "tides", "temp:scratch": 1}}
        }));
        let plan = AppendPlan::new(&e, 1);
        let persisted = plan.persisted_state().expect("one persisted key");
        let mut state = Map::new();
        merge_state(&mut state, &persisted);
        assert_eq!(Value::Object(state), json!({"topic": "tides"}));

        let only_temp = event(json!({
            "id": "e2", "invocation_id": "i1", "author": "user", "timestamp": 11.0,
            "actions": {"stateDelta": {"temp:scratch": 1}}
        }));
        assert!(AppendPlan::new(&only_temp, 2).persisted_state().is_none());
    }

    #[test]
    fn a_timestamp_that_does_not_follow_is_refused_naming_both() {
        let e = event(json!({
            "id": "e3", "invocation_id": "i1", "author": "user", "timestamp": 5.0
        }));
        let plan = AppendPlan::new(&e, 3);
        let key = SessionKey::new("app", "user", "s");
        assert!(plan.check_timestamp(Some(4.0), &key, PathBuf::new).is_ok());
        let refused = plan
            .check_timestamp(Some(6.0), &key, || PathBuf::from("db"))
            .expect_err("5 does not follow 6");
        assert!(matches!(
            refused,
            SessionStoreError::NonIncreasingTimestamp { ref event_id, .. } if event_id == "e3"
        ));
    }

    #[test]
    fn the_header_follows_the_core_on_a_whole_history() {
        // Invented turns: a user question, an answer, then a second question.
        let history: Vec<Event> = [
            json!({"id": "u1", "invocation_id": "i1", "author": "user", "timestamp": 1.0,
                   "content": {"role": "user", "parts": [{"text": "Why do tides lag the moon?"}]}}),
            json!({"id": "a1", "invocation_id": "i1", "author": "coordinator", "timestamp": 2.0,
                   "content": {"role": "model", "parts": [{"text": "Ocean basins resonate."}]}}),
            json!({"id": "u2", "invocation_id": "i2", "author": "user", "timestamp": 3.0,
                   "content": {"role": "user", "parts": [{"text": "And in lakes?"}]}}),
        ]
        .into_iter()
        .map(event)
        .collect();
        let mut incremental = row();
        for (i, e) in history.iter().enumerate() {
            let plan = AppendPlan::new(e, i as i64 + 1);
            assert!(matches!(plan.header_step(&mut incremental), NextStep::Done));
        }
        let mut whole = row();
        let stored: Vec<StoredFlags> = (1..=3).map(|seq| (seq, false, false)).collect();
        let changed = recompute(&mut whole, &history, &stored);
        assert_eq!(
            changed,
            vec![(1, true, false), (2, true, false), (3, true, false)]
        );
        assert_eq!(whole, incremental);
    }
}
