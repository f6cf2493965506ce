//! `compaction recall`: lossless recall from a stored session, read-only (opened the way
//! `inspect` opens it: never created, migrated or written, no `-wal`/`-shm` left behind).
//! A search lists the matching raw events, best first; a compaction or a turn range lists
//! the original events verbatim, in order.
//!
//! Exit codes: 3 for a bad query, limit or `--turns` value (the message says the expected
//! form), 4 when the session, the compaction or the turns are not in the database.

use std::io::Write;

use compaction_core::RecallHit;
use compaction_core::store_support as recall;
use compaction_core::{RecallQuery, SessionKey, SessionStore, StoreError};

use super::args::{ReadDbArgs, SessionArgs};
use crate::database::{Access, Database, open_existing};
use crate::error::{Cause, CliError};
use crate::render;

#[derive(Debug, clap::Args)]
pub(super) struct RecallArgs {
    #[command(flatten)]
    target: SessionArgs,
    #[command(flatten)]
    what: WhatArgs,
    /// At most N hits (1 to 100; default 10).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print a JSON list of hits `{turn, event_id, author, timestamp, snippet, text,
    /// covered_by}` instead of the listing.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: ReadDbArgs,
}

/// What `recall` brings back: exactly one of a search, a compaction or a turn range.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
struct WhatArgs {
    /// Search the raw events for these words (every word must occur; punctuation and FTS
    /// operators are plain text).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    query: Option<String>,
    /// Print the original events this compaction event covers, verbatim.
    #[arg(long, value_name = "ID")]
    compaction: Option<String>,
    /// Print the events of turns A..B (1-based, inclusive), verbatim.
    #[arg(long, value_name = "A..B", value_parser = parse_turns)]
    turns: Option<(usize, usize)>,
}

/// What to recall.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// The raw events matching these words.
    Query(String),
    /// The events a compaction event covers.
    Compaction(String),
    /// The events of turns `first..=last`.
    Turns(usize, usize),
}

/// Parses `--turns A..B` (or a single turn `A`).
fn parse_turns(value: &str) -> Result<(usize, usize), String> {
    let expected = "expected a turn range A..B of turn numbers from 1 (e.g. 3..7), or one turn N";
    let number = |s: &str| s.trim().parse::<usize>().ok().filter(|&n| n > 0);
    let (first, last) = match value.split_once("..") {
        Some((a, b)) => (number(a), number(b.trim_start_matches('='))),
        None => (number(value), number(value)),
    };
    match (first, last) {
        (Some(a), Some(b)) if a <= b => Ok((a, b)),
        _ => Err(format!("{value:?}: {expected}")),
    }
}

/// Runs `compaction recall`.
pub(super) async fn run(args: RecallArgs) -> Result<(), CliError> {
    let key = args.target.key();
    let target = match (args.what.query, args.what.compaction, args.what.turns) {
        (Some(q), _, _) => Target::Query(q),
        (_, Some(id), _) => Target::Compaction(id),
        (_, _, Some((a, b))) => Target::Turns(a, b),
        _ => {
            return Err(CliError::Config(Cause::new(
                "give --query, --compaction or --turns",
            )));
        }
    };
    let db = args.db.database()?;
    recall(key, db, target, args.limit, args.json).await
}

/// Recalls `target` from session `key` in `db` and prints it.
async fn recall(
    key: SessionKey,
    db: Database,
    target: Target,
    limit: Option<usize>,
    json: bool,
) -> Result<(), CliError> {
    let input = |e: compaction_core::RecallQueryError| CliError::input(e);
    let limit = recall::check_limit(limit).map_err(input)?;
    let query = match &target {
        Target::Query(text) => Some(RecallQuery::parse(text).map_err(input)?),
        _ => None,
    };
    let store = open_existing(&db, Access::Read).await?.port();
    let store: &dyn SessionStore = &*store;
    let database = |e: StoreError| CliError::database(e);
    let (hits, searched) = match (&target, query) {
        (Target::Query(_), Some(q)) => {
            (store.search(&key, &q, limit).await.map_err(database)?, true)
        }
        (Target::Compaction(id), _) => (
            to_hits(store.expand(&key, id).await.map_err(database)?),
            false,
        ),
        (Target::Turns(a, b), _) => (
            to_hits(store.expand_turns(&key, *a, *b).await.map_err(database)?),
            false,
        ),
        (Target::Query(_), None) => unreachable!("a query target always parses a query"),
    };
    let mut out = std::io::stdout().lock();
    let write = |out: &mut std::io::StdoutLock<'_>, line: &str| {
        writeln!(out, "{line}")
            .map_err(|e| CliError::Other(Cause::with(format!("cannot write output: {e}"), e)))
    };
    if json {
        let text = serde_json::to_string_pretty(&hits).map_err(|e| {
            CliError::Other(Cause::with(
                format!("cannot write the hits as JSON: {e}"),
                e,
            ))
        })?;
        return write(&mut out, &text);
    }
    if hits.is_empty() {
        return write(&mut out, &format!("session {key}: nothing found"));
    }
    for hit in &hits {
        write(&mut out, &render::for_terminal(&heading(hit)))?;
        let body = if searched { &hit.snippet } else { &hit.text };
        for line in body.lines() {
            write(&mut out, &render::for_terminal(&format!("    {line}")))?;
        }
    }
    Ok(())
}

fn to_hits(events: Vec<compaction_core::RecalledEvent>) -> Vec<RecallHit> {
    events.iter().map(|e| e.to_hit()).collect()
}

/// `turn 3 · e12 · coordinator · 2023-11-14 22:13:25Z · folded into c1`.
fn heading(hit: &RecallHit) -> String {
    let turn = hit
        .turn
        .map_or_else(|| "before turn 1".to_owned(), |t| format!("turn {t}"));
    let folded = hit.covered_by.as_ref().map_or_else(
        || "verbatim in context".to_owned(),
        |c| format!("folded into {c}"),
    );
    let scope = hit
        .scope
        .as_ref()
        .map(|s| format!(" · scope {s}"))
        .unwrap_or_default();
    format!(
        "{turn} · {} · {} · {} · {folded}{scope}",
        hit.event_id,
        hit.author,
        render::utc(hit.timestamp)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_ranges_parse_or_say_the_expected_form() {
        assert_eq!(parse_turns("3..7"), Ok((3, 7)));
        assert_eq!(parse_turns("3..=7"), Ok((3, 7)));
        assert_eq!(parse_turns("4"), Ok((4, 4)));
        for bad in ["0..2", "7..3", "a..b", "", "1..", "-1..2"] {
            let e = parse_turns(bad).unwrap_err();
            assert!(e.contains("expected a turn range A..B"), "{bad}: {e}");
        }
    }
}
