//! A driver for the store's process tests (not a user-facing tool).
//!
//! - `session-store-stress race <db> <app> <user> <session> <name>`: for every line `<rev>` on
//!   stdin, appends the event `<name>-<rev>` expecting revision `<rev>` and answers
//!   `ok <new revision>` or `stale <actual revision>` on stdout.
//! - `session-store-stress crash <db> <app> <user> <session>`: appends scripted events (turns,
//!   tool calls, scoped events, partial chunks, compactions, rewinds) forever, and after each
//!   commit writes `ack <revision> <event id>` on stdout. The parent kills it at will.

use std::error::Error;
use std::io::{BufRead, Write};

use compaction_core::{
    Content, Event, EventCompaction, FunctionCall, Part, Revision, SessionKey, Timestamp,
};
use session_store::SessionStoreError;
use session_store::blocking::SqliteStore;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: session-store-stress race|crash <db> <app> <user> <session> [name]";
    let (Some(mode), Some(db), Some(app), Some(user), Some(session)) = (
        args.get(1),
        args.get(2),
        args.get(3),
        args.get(4),
        args.get(5),
    ) else {
        return Err(usage.into());
    };
    let store = SqliteStore::open(db)?;
    let key = SessionKey::new(app, user, session);
    match mode.as_str() {
        "race" => race(&store, &key, args.get(6).ok_or(usage)?),
        "crash" => crash(&store, &key),
        _ => Err(usage.into()),
    }
}

fn race(store: &SqliteStore, key: &SessionKey, name: &str) -> Result<(), Box<dyn Error>> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let expected: u64 = line?.trim().parse()?;
        let event = Event::new(
            format!("{name}-{expected}"),
            format!("inv-{expected}"),
            name,
            timestamp(expected + 1)?,
        )
        .with_content(Content::model_text(format!("{name} won round {expected}")));
        match store.append_event(key, Revision(expected), &event) {
            Ok(revision) => writeln!(out, "ok {revision}")?,
            Err(SessionStoreError::Stale { actual, .. }) => writeln!(out, "stale {actual}")?,
            Err(e) => return Err(e.into()),
        }
        out.flush()?;
    }
    Ok(())
}

fn crash(store: &SqliteStore, key: &SessionKey) -> Result<(), Box<dyn Error>> {
    let mut out = std::io::stdout().lock();
    loop {
        let revision = store.header(key)?.revision;
        let event = scripted_event(revision.0 + 1)?;
        let acked = store.append_event(key, revision, &event)?;
        writeln!(out, "ack {acked} {}", event.id)?;
        out.flush()?;
    }
}

const BASE: f64 = 1_700_000_000.0;

fn timestamp(n: u64) -> Result<Timestamp, Box<dyn Error>> {
    Ok(Timestamp::new(BASE + n as f64)?)
}

/// The event appended at revision `n`: eight-event turns with every kind of event the store
/// treats specially.
fn scripted_event(n: u64) -> Result<Event, Box<dyn Error>> {
    let turn = n / 8;
    let invocation = format!("t{turn}");
    let id = format!("ev-{n}");
    let ts = timestamp(n)?;
    let event = match n % 8 {
        0 => Event::new(id, invocation, "user", ts)
            .with_content(Content::user_text(format!("question {turn}"))),
        1 => Event::new(id, invocation, "coordinator", ts).with_content(Content {
            role: Some("model".into()),
            parts: vec![Part {
                function_call: Some(FunctionCall {
                    id: Some(format!("fc-{n}")),
                    name: "search_library".into(),
                    args: Some(serde_json::json!({ "query": turn })),
                }),
                ..Part::default()
            }],
        }),
        2 => Event::new(id, invocation, "searcher", ts)
            .with_content(Content::model_text("ReAct step"))
            .with_scope(format!("search_pipeline:fc-{turn}"))
            .with_prompt_tokens(900_000),
        3 => Event::new(id, invocation, "user", ts).with_content(Content::user_text("tool result")),
        4 => {
            let mut chunk = Event::new(id, invocation, "coordinator", ts)
                .with_content(Content::model_text("partial"));
            chunk.partial = Some(true);
            chunk
        }
        5 => Event::new(id, invocation, "coordinator", ts)
            .with_content(Content::model_text(format!("answer {turn}")))
            .with_prompt_tokens(1_000 * n),
        6 if turn % 5 == 4 => {
            let mut c = Event::new(id, invocation, "user", ts);
            c.actions.compaction = Some(EventCompaction {
                start_timestamp: timestamp(0)?,
                end_timestamp: timestamp(n - 10)?,
                compacted_content: Content::model_text(format!("summary up to {}", n - 10)),
            });
            c
        }
        7 if turn % 7 == 6 => {
            let mut r = Event::new(id, format!("rewind-{turn}"), "user", ts);
            r.actions.rewind_before_invocation_id = Some(format!("t{}", turn - 1));
            r
        }
        _ => Event::new(id, invocation, "coordinator", ts)
            .with_content(Content::model_text("follow-up")),
    };
    Ok(event)
}
