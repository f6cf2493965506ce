//! The store against compaction-core as the oracle: for generated histories (rolling and
//! arbitrary compactions, scoped events, partial chunks, out-of-order timestamps, rewinds) the
//! header, `load_context`, `load_live_tail` and `compaction_history` after every append equal what the core computes from the whole
//! history.

mod common;

use common::{history, key, temp_store};
use compaction_core::store_support::{latest_view_timestamp, timestamp_may_follow};
use compaction_core::{
    Event, Revision, assemble_context, compaction_history, gate_input, live_tail,
};
use proptest::prelude::*;
use session_store::{Durability, SessionStoreError};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// After every append: a stale append is refused, the revision is the number of events
    /// (gap-free), the header equals
    /// `gate_input` of the history so far, and `load_context` equals `assemble_context`.
    /// At the end the stored history is the appended one, event for event.
    #[test]
    fn sut_matches_oracle_after_every_append(events in history(40)) {
        let (_dir, store) = temp_store(Durability::Normal);
        let key = key();
        store.create_session(&key, Default::default()).unwrap();
        let mut revision = Revision(0);
        let mut accepted: Vec<Event> = Vec::new();
        for event in &events {
            // The core's timestamp rule decides which events the store must refuse.
            if !timestamp_may_follow(latest_view_timestamp(&accepted), event) {
                let refused = store.append_event(&key, revision, event);
                let typed = matches!(refused, Err(SessionStoreError::NonIncreasingTimestamp { .. }));
                prop_assert!(typed, "{:?}", refused);
                prop_assert_eq!(store.header(&key).unwrap().revision, revision);
                continue;
            }
            accepted.push(event.clone());
            let i = accepted.len() - 1;
            if i > 0 {
                // A writer that read an older revision is refused and writes nothing.
                let stale = store.append_event(&key, Revision(revision.0 - 1), event);
                let refused = matches!(
                    stale,
                    Err(SessionStoreError::Stale { actual, .. }) if actual == revision
                );
                prop_assert!(refused, "{:?}", stale);
            }
            revision = store.append_event(&key, revision, event).unwrap();
            prop_assert_eq!(revision, Revision(i as u64 + 1));
            let prefix = &accepted[..];
            let header = store.header(&key).unwrap();
            prop_assert_eq!(header.revision, revision);
            prop_assert_eq!(header.gate, gate_input(prefix), "header after event {}", i);
            prop_assert_eq!(store.load_context(&key).unwrap(), assemble_context(prefix), "context after event {}", i);
            prop_assert_eq!(store.load_live_tail(&key).unwrap().events, live_tail(prefix), "live tail after event {}", i);
            // The window is the live tail's newest events (compactions always kept).
            let tail = live_tail(prefix);
            let others = tail.iter().filter(|e| e.compaction().is_none()).count();
            for n in [1usize, 3, 64] {
                let (window, whole) = store.load_live_tail_window(&key, n).unwrap();
                let mut skip = others.saturating_sub(n);
                let expected: Vec<Event> = tail
                    .iter()
                    .filter(|e| {
                        if e.compaction().is_some() || skip == 0 {
                            true
                        } else {
                            skip -= 1;
                            false
                        }
                    })
                    .cloned()
                    .collect();
                prop_assert_eq!(whole, others <= n, "whole after event {}", i);
                prop_assert_eq!(window.events, expected, "window {} after event {}", n, i);
            }
            prop_assert_eq!(store.compaction_history(&key).unwrap(), compaction_history(prefix), "compaction history after event {}", i);
        }
        let session = store.get_session(&key).unwrap();
        prop_assert_eq!(session.revision, revision);
        prop_assert_eq!(&session.events, &accepted);
    }

    /// Reopening the file changes nothing: header and context are read from disk, not memory.
    #[test]
    fn reopened_store_agrees(events in history(25)) {
        let (dir, store) = temp_store(Durability::Normal);
        let key = key();
        store.create_session(&key, Default::default()).unwrap();
        let mut accepted: Vec<Event> = Vec::new();
        for event in &events {
            if timestamp_may_follow(latest_view_timestamp(&accepted), event) {
                store.append_event(&key, Revision(accepted.len() as u64), event).unwrap();
                accepted.push(event.clone());
            }
        }
        let events = accepted;
        drop(store);
        let store = session_store::blocking::SqliteStore::open(dir.path().join("sessions.db")).unwrap();
        prop_assert_eq!(store.header(&key).unwrap().gate, gate_input(&events));
        prop_assert_eq!(store.load_context(&key).unwrap(), assemble_context(&events));
    }

    /// The sessions with an open turn: the store's answer (from its header) is the in-memory
    /// store's (the core's turn tracker over each whole history), for several sessions at once;
    /// a bound before every append lists none.
    #[test]
    fn open_turns_match_the_oracle(histories in proptest::collection::vec(history(12), 1..5)) {
        use compaction_core::{SessionKey, SessionStore as _, Timestamp};
        let (_dir, store) = temp_store(Durability::Normal);
        let oracle = compaction_core::testing::InMemoryStore::new();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (n, events) in histories.iter().enumerate() {
            let key = SessionKey::new("app", "user", format!("s{n}"));
            store.create_session(&key, Default::default()).unwrap();
            runtime.block_on(oracle.create_session(&key, Default::default())).unwrap();
            let mut accepted: Vec<Event> = Vec::new();
            for event in events {
                if timestamp_may_follow(latest_view_timestamp(&accepted), event) {
                    let at = Revision(accepted.len() as u64);
                    store.append_event(&key, at, event).unwrap();
                    runtime.block_on(oracle.append(&key, at, event.clone())).unwrap();
                    accepted.push(event.clone());
                }
            }
        }
        let later = Timestamp::new(4.0e9).unwrap();
        let mut stored = store.open_turns(later).unwrap();
        stored.sort_by_key(ToString::to_string);
        let expected = runtime.block_on(oracle.open_turns(later)).unwrap().unwrap();
        prop_assert_eq!(stored, expected);
        prop_assert_eq!(store.open_turns(Timestamp::new(0.0).unwrap()).unwrap(), Vec::<SessionKey>::new());
    }
}
