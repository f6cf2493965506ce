//! Lossless recall: every folded turn stays reachable. A session's raw events are searched by
//! plain words ([`RecallQuery`]) and a compaction's covered events come back verbatim
//! ([`RecalledEvent`]); the store port's `search`, `expand` and `expand_turns` answer with
//! these types, and [`scan`] states the rules once over a whole history (the in-memory store,
//! the ADK layouts and every test oracle answer with it).
//!
//! # The rules
//! - **What is searched**: the events of the history with rewinds applied, except compaction
//!   events (a summary is not an original) and rewinds; unscoped events only (user queries,
//!   replies, tool calls, tool results and syntheses) unless the query asks for pipeline
//!   (scoped) events too. An event's searchable text is [`searchable_text`].
//! - **Words**: a word is a maximal run of letters and digits, compared case-insensitively
//!   ([`words`]). This is SQLite FTS5's `unicode61` tokenizer (without diacritic removal) for
//!   every script this project's sessions use. A query matches an event that contains every
//!   one of its words. Everything else in a query — quotes, `*`, `-`, `NEAR`, parentheses —
//!   is plain text: punctuation separates words, and `NEAR` is the word "near".
//! - **Turn numbers**: turn `n` is the `n`-th turn start of the coordinator view
//!   ([`crate::history::starts_turn`]); an event belongs to the latest turn started at or
//!   before it (`None` before the first).
//! - **Covered**: an event is covered by the rendered (non-subsumed) compaction of the view
//!   whose range holds its timestamp; of several, the live one among them
//!   ([`crate::context::live_among`]).
//!
//! # What this module must never do
//! It never reads a store and never ranks by anything but the words: stores may rank
//! differently (SQLite's bm25), so tests compare hit sets, not orders.

pub mod scan;

use serde::Serialize;

use crate::context::{CompactionRange, live_among};
use crate::event::Event;
use crate::time::Timestamp;

/// The longest query accepted, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 500;
/// The most distinct words a query may hold.
pub(crate) const MAX_QUERY_WORDS: usize = 16;
/// The most hits one search returns.
pub(crate) const MAX_LIMIT: usize = 100;
/// Hits returned when the caller names no limit.
pub(crate) const DEFAULT_LIMIT: usize = 10;
/// Characters of text a snippet shows around its first match.
const SNIPPET_CHARS: usize = 160;
/// The name of the recall tool a chat model is offered (the service's `recall_history`):
/// its calls and results are never searched, so recall never finds its own answers.
pub const RECALL_TOOL_NAME: &str = "recall_history";
/// The marker put on each side of a matched word in a snippet (Markdown bold).
pub(crate) const MATCH_MARK: &str = "**";

/// Why a query or a limit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecallQueryError {
    /// Nothing but white space.
    #[error("the query is empty: give one or more words to search for")]
    Empty,
    /// Longer than `MAX_QUERY_CHARS`.
    #[error("the query is {chars} characters long; at most {MAX_QUERY_CHARS} are accepted")]
    TooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// Punctuation only: no letter or digit to search for.
    #[error("the query {query:?} holds no word (letters or digits) to search for")]
    NoWords {
        /// The query as given.
        query: String,
    },
    /// More than `MAX_QUERY_WORDS` distinct words.
    #[error("the query holds {words} distinct words; at most {MAX_QUERY_WORDS} are accepted")]
    TooManyWords {
        /// Distinct words found.
        words: usize,
    },
    /// A limit outside `1..=MAX_LIMIT`.
    #[error("the limit {limit} is out of range: give a number from 1 to {MAX_LIMIT}")]
    Limit {
        /// The limit given.
        limit: usize,
    },
}

/// A validated search: its distinct words, lower-cased, in query order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallQuery {
    words: Vec<String>,
    pipeline: bool,
}

impl RecallQuery {
    /// Parses what a person or a model typed. Every character is plain text (see the module
    /// docs); the errors say what is wrong with the query.
    pub fn parse(text: &str) -> Result<Self, RecallQueryError> {
        let chars = text.chars().count();
        if text.trim().is_empty() {
            return Err(RecallQueryError::Empty);
        }
        if chars > MAX_QUERY_CHARS {
            return Err(RecallQueryError::TooLong { chars });
        }
        let mut distinct: Vec<String> = Vec::new();
        for word in words(text) {
            if !distinct.contains(&word) {
                distinct.push(word);
            }
        }
        if distinct.is_empty() {
            return Err(RecallQueryError::NoWords {
                query: text.to_owned(),
            });
        }
        if distinct.len() > MAX_QUERY_WORDS {
            return Err(RecallQueryError::TooManyWords {
                words: distinct.len(),
            });
        }
        Ok(RecallQuery {
            words: distinct,
            pipeline: false,
        })
    }

    /// Also searches pipeline (scoped) events (builder style).
    pub fn with_pipeline(mut self, pipeline: bool) -> Self {
        self.pipeline = pipeline;
        self
    }

    /// The distinct words, lower-cased.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// True when pipeline (scoped) events are searched too.
    pub fn includes_pipeline(&self) -> bool {
        self.pipeline
    }

    /// True when `text` holds every word of the query.
    pub fn matches(&self, text: &str) -> bool {
        let found: Vec<String> = words(text).collect();
        self.words.iter().all(|w| found.contains(w))
    }

    /// The query as an SQLite FTS5 expression: each word a quoted string, all required.
    /// Words hold only letters and digits, so nothing in them is FTS5 syntax.
    pub fn fts5_expression(&self) -> String {
        let quoted: Vec<String> = self
            .words
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect();
        quoted.join(" AND ")
    }
}

/// Checks a hit limit (`None`: `DEFAULT_LIMIT`).
pub fn check_limit(limit: Option<usize>) -> Result<usize, RecallQueryError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        Some(limit) => Err(RecallQueryError::Limit { limit }),
    }
}

/// The words of `text`, lower-cased, in order (see the module docs).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    word_spans(text).map(move |(start, end)| text[start..end].to_lowercase())
}

/// Byte ranges of the words of `text`.
fn word_spans(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        while chars.peek().is_some_and(|(_, c)| !c.is_alphanumeric()) {
            chars.next();
        }
        let (start, _) = *chars.peek()?;
        let mut end = start;
        while let Some(&(i, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                break;
            }
            end = i + c.len_utf8();
            chars.next();
        }
        Some((start, end))
    })
}

/// What of an event is searched: its message text, each tool call as `name(args)` and each
/// tool result (a `result` string as is, any other response as JSON), one per line. Thought
/// parts and the recall tool's own calls and results ([`RECALL_TOOL_NAME`]) are left out.
pub fn searchable_text(event: &Event) -> String {
    let mut lines: Vec<String> = Vec::new();
    for part in event.content.iter().flat_map(|c| &c.parts) {
        if let Some(text) = part.text.as_deref().filter(|_| !part.is_thought()) {
            lines.push(text.to_owned());
        }
        let own = |name: &str| name == RECALL_TOOL_NAME;
        if part.function_call.as_ref().is_some_and(|c| own(&c.name))
            || part
                .function_response
                .as_ref()
                .is_some_and(|r| own(&r.name))
        {
            continue;
        }
        if let Some(call) = &part.function_call {
            let args = call.args.as_ref().map(ToString::to_string);
            lines.push(format!("{}({})", call.name, args.unwrap_or_default()));
        }
        if let Some(response) = part
            .function_response
            .as_ref()
            .and_then(|r| r.response.as_ref())
        {
            match response.get("result").and_then(|r| r.as_str()) {
                Some(result) => lines.push(result.to_owned()),
                None => lines.push(response.to_string()),
            }
        }
    }
    lines.retain(|l| !l.trim().is_empty());
    lines.join("\n")
}

/// A window of `text` around the first word of `query` it holds, every query word in it
/// marked with `MATCH_MARK`; `…` where the window cuts the text.
pub fn snippet(text: &str, query: &RecallQuery) -> String {
    let spans: Vec<(usize, usize)> = word_spans(text)
        .filter(|&(s, e)| query.words.contains(&text[s..e].to_lowercase()))
        .collect();
    let first = spans.first().map_or(0, |&(s, _)| s);
    let (start, end) = window(text, first);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut at = start;
    for &(s, e) in spans.iter().filter(|&&(s, e)| s >= start && e <= end) {
        out.push_str(&text[at..s]);
        out.push_str(MATCH_MARK);
        out.push_str(&text[s..e]);
        out.push_str(MATCH_MARK);
        at = e;
    }
    out.push_str(&text[at..end]);
    if end < text.len() {
        out.push('…');
    }
    out
}

/// The leading part of `text` a listing shows (what [`snippet`] shows with no match).
pub(crate) fn preview(text: &str) -> String {
    let (_, end) = window(text, 0);
    let mut out = text[..end].to_owned();
    if end < text.len() {
        out.push('…');
    }
    out
}

/// Byte range of about [`SNIPPET_CHARS`] characters of `text` starting a quarter of the
/// window before `anchor`, on character boundaries.
fn window(text: &str, anchor: usize) -> (usize, usize) {
    let before: Vec<usize> = text[..anchor].char_indices().map(|(i, _)| i).collect();
    let start = before
        .len()
        .checked_sub(SNIPPET_CHARS / 4)
        .map_or(0, |i| before[i]);
    let end = text[start..]
        .char_indices()
        .nth(SNIPPET_CHARS)
        .map_or(text.len(), |(i, _)| start + i);
    (start, end)
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RecallHit {
    /// The turn the event belongs to (1-based), `None` before the first turn.
    pub turn: Option<usize>,
    /// The event's id.
    pub event_id: String,
    /// The event's author.
    pub author: String,
    /// The event's timestamp.
    pub timestamp: Timestamp,
    /// A window of the text with the matched words marked ([`snippet`]).
    pub snippet: String,
    /// The event's whole searchable text ([`searchable_text`]).
    pub text: String,
    /// The id of the rendered compaction that covers the event, when one does: the event
    /// was folded into that summary.
    pub covered_by: Option<String>,
    /// The event's isolation scope, for a pipeline event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl RecallHit {
    /// A hit on `event`, in `turn`, covered by `covered_by`, with `snippet` and `text`.
    pub fn new(
        event: &Event,
        turn: Option<usize>,
        covered_by: Option<String>,
        snippet: String,
        text: String,
    ) -> Self {
        RecallHit {
            turn,
            event_id: event.id.clone(),
            author: event.author.clone(),
            timestamp: event.timestamp,
            snippet,
            text,
            covered_by,
            scope: event.isolation_scope.clone(),
        }
    }
}

/// One event given back verbatim by an expansion, with its turn and its coverage.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecalledEvent {
    /// The turn the event belongs to (1-based), `None` before the first turn.
    pub turn: Option<usize>,
    /// The event as stored.
    pub event: Event,
    /// The id of the rendered compaction that covers the event, when one does.
    pub covered_by: Option<String>,
}

impl RecalledEvent {
    /// `event`, in `turn`, covered by `covered_by`.
    pub fn new(event: Event, turn: Option<usize>, covered_by: Option<String>) -> Self {
        RecalledEvent {
            turn,
            event,
            covered_by,
        }
    }

    /// The event as a hit: its whole text, with its `preview` as the snippet.
    pub fn to_hit(&self) -> RecallHit {
        let text = searchable_text(&self.event);
        RecallHit::new(
            &self.event,
            self.turn,
            self.covered_by.clone(),
            preview(&text),
            text,
        )
    }
}

/// The rendered compactions of a view, by id and range: which one covers a timestamp.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coverage {
    rendered: Vec<(String, CompactionRange)>,
}

impl Coverage {
    /// The rendered compactions: `(event id, range with its append position)`.
    pub fn new(rendered: Vec<(String, CompactionRange)>) -> Self {
        Coverage { rendered }
    }

    /// The id of the compaction covering `ts`: of several, the live one among them.
    pub fn covered_by(&self, ts: Timestamp) -> Option<String> {
        let covering: Vec<CompactionRange> = self
            .rendered
            .iter()
            .map(|(_, r)| *r)
            .filter(|r| r.start <= ts && ts <= r.end)
            .collect();
        let live = live_among(&covering)?;
        self.rendered
            .iter()
            .find(|(_, r)| r.position == live.position)
            .map(|(id, _)| id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_syntax_is_plain_text() {
        let q = RecallQuery::parse(r#""plating" NEAR onset* -dendrite (x OR y)"#).unwrap();
        assert_eq!(
            q.words(),
            ["plating", "near", "onset", "dendrite", "x", "or", "y"]
        );
        assert_eq!(
            q.fts5_expression(),
            r#""plating" AND "near" AND "onset" AND "dendrite" AND "x" AND "or" AND "y""#
        );
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        assert_eq!(RecallQuery::parse("  \n"), Err(RecallQueryError::Empty));
        let long = "a".repeat(MAX_QUERY_CHARS + 1);
        assert!(matches!(
            RecallQuery::parse(&long),
            Err(RecallQueryError::TooLong { chars }) if chars == MAX_QUERY_CHARS + 1
        ));
        assert!(matches!(
            RecallQuery::parse(r#"" * - ""#),
            Err(RecallQueryError::NoWords { .. })
        ));
        let many: Vec<String> = (0..=MAX_QUERY_WORDS).map(|i| format!("w{i}")).collect();
        assert!(matches!(
            RecallQuery::parse(&many.join(" ")),
            Err(RecallQueryError::TooManyWords { .. })
        ));
        assert_eq!(
            check_limit(Some(0)),
            Err(RecallQueryError::Limit { limit: 0 })
        );
        assert_eq!(check_limit(None), Ok(DEFAULT_LIMIT));
        assert!(check_limit(Some(MAX_LIMIT + 1)).is_err());
    }

    #[test]
    fn a_query_matches_every_word_case_insensitively() {
        let q = RecallQuery::parse("Lithium plating").unwrap();
        assert!(q.matches("Onset of lithium-plating at 4C."));
        assert!(!q.matches("lithium only"));
        assert!(!q.matches("platings of lithium"));
    }

    #[test]
    fn a_snippet_marks_the_words_in_a_window() {
        let q = RecallQuery::parse("plating").unwrap();
        let text = format!(
            "{} Plating starts at 4C. {}",
            "x ".repeat(100),
            "y ".repeat(100)
        );
        let s = snippet(&text, &q);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("**Plating** starts"), "{s}");
        assert_eq!(snippet("short plating note", &q), "short **plating** note");
        assert_eq!(snippet("naïve plating", &q), "naïve **plating**");
    }
}
