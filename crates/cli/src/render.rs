//! What the binary shows a person: the per-turn table, the context, the compaction history.

use std::borrow::Cow;
use std::fmt::Write as _;

use compaction_core::{AssembledContext, CompactionEntry, ContextEntry, Timestamp};

use crate::replay::TurnRecord;

/// `text` made safe to print on a terminal: every control character but newline and tab (C0,
/// DEL, C1: ESC, BEL, NUL, carriage return…) and every bidirectional-text control (U+202E
/// and friends, which reorder what the reader sees) is shown as a Rust-style escape
/// (`\u{1b}`). Everything else, including a backslash, is kept as is.
pub(crate) fn for_terminal(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(
                c,
                '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
            )
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The table header.
pub(crate) fn table_header() -> String {
    format!(
        "{:>4}  {:>9}  {:>14}  {:>11}  {:<8}  {:>5}  {:<8}  {}",
        "turn", "completed", "tokens without", "tokens with", "gate", "p", "verdict", "detail"
    )
}

/// One table row.
pub(crate) fn table_row(r: &TurnRecord) -> String {
    let p = r
        .probability
        .map_or_else(|| "-".to_owned(), |p| format!("{p:.2}"));
    format!(
        "{:>4}  {:>9}  {:>14}  {:>11}  {:<8}  {:>5}  {:<8}  {}",
        r.turn,
        r.completed_turns,
        r.prompt_tokens_without,
        r.prompt_tokens_with,
        r.gate,
        p,
        r.verdict,
        r.detail
    )
}

/// `word` as one POSIX shell word: as is when it holds only safe characters, otherwise in
/// single quotes (a quote inside becomes `'\''`).
pub(crate) fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The assembled context, one block per entry, long texts shortened to `max_chars`.
pub(crate) fn context(ctx: &AssembledContext, max_chars: usize) -> String {
    let mut out = String::new();
    for entry in &ctx.entries {
        match entry {
            ContextEntry::Summary(s) => {
                let _ = writeln!(
                    out,
                    "── rolling summary (covers {} .. {}) ──\n{}",
                    utc(s.compaction.start_timestamp),
                    utc(s.compaction.end_timestamp),
                    s.compaction.summary_text().trim_end()
                );
            }
            ContextEntry::Event(e) => {
                let _ = writeln!(
                    out,
                    "── {} ──\n{}",
                    e.author,
                    shorten(&compaction_core::render_event_body(e), max_chars)
                );
            }
            // A kind of entry added to the core after this build: named, not shown.
            _ => out.push_str("── (an entry this version cannot show) ──\n"),
        }
    }
    out
}

/// A compaction history, oldest first, with whether each compaction is subsumed and its
/// receipt (what it kept, corrected and dropped).
pub(crate) fn compaction_history(entries: &[CompactionEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let state = if e.subsumed { "subsumed" } else { "live" };
        let _ = writeln!(
            out,
            "{}  [{} .. {}]  {}  {} chars",
            e.event_id,
            utc(e.start_timestamp),
            utc(e.end_timestamp),
            state,
            e.summary_chars
        );
        match &e.receipt {
            Some(receipt) => {
                for line in receipt.render_text() {
                    let _ = writeln!(out, "    receipt: {line}");
                }
            }
            None => {
                let _ = writeln!(out, "    receipt: (none recorded)");
            }
        }
    }
    if out.is_empty() {
        out.push_str("(no compaction yet)\n");
    }
    out
}

/// The assembled context as JSON: each entry's kind, event id and text.
pub(crate) fn context_json(ctx: &AssembledContext) -> serde_json::Value {
    serde_json::Value::Array(
        ctx.entries
            .iter()
            .map(|entry| match entry {
                ContextEntry::Summary(s) => serde_json::json!({
                    "kind": "summary",
                    "event_id": s.event_id,
                    "text": s.compaction.summary_text(),
                }),
                ContextEntry::Event(e) => serde_json::json!({
                    "kind": "event",
                    "event_id": e.id,
                    "author": e.author,
                    "text": compaction_core::render_event_body(e),
                }),
                _ => serde_json::json!({ "kind": "other" }),
            })
            .collect(),
    )
}

/// A compaction history as JSON: `compaction_history[]` entries with the range, the state and
/// `receipt: {kept, corrected, dropped}` (`null` for a compaction that recorded none).
pub(crate) fn compaction_history_json(entries: &[CompactionEntry]) -> serde_json::Value {
    serde_json::Value::Array(
        entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "event_id": e.event_id,
                    "start_timestamp": e.start_timestamp.seconds(),
                    "end_timestamp": e.end_timestamp.seconds(),
                    "start": utc(e.start_timestamp),
                    "end": utc(e.end_timestamp),
                    "subsumed": e.subsumed,
                    "summary_chars": e.summary_chars,
                    "receipt": e.receipt,
                })
            })
            .collect(),
    )
}

/// A timestamp as UTC, ISO 8601 with milliseconds (`Timestamp::to_utc_string`).
pub(crate) fn utc(t: Timestamp) -> String {
    t.to_utc_string()
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!(
            "{} […{} more characters]",
            &text[..cut],
            text[cut..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: f64) -> String {
        utc(Timestamp::new(seconds).expect("valid"))
    }

    #[test]
    fn control_and_bidi_characters_are_shown_escaped() {
        assert_eq!(for_terminal("plain\ttext\nnext"), "plain\ttext\nnext");
        assert_eq!(
            for_terminal("a\u{1b}]0;owned\u{7}b\u{0}c\rd\u{202e}e\u{9b}f"),
            "a\\u{1b}]0;owned\\u{7}b\\u{0}c\\u{d}d\\u{202e}e\\u{9b}f"
        );
        assert!(matches!(for_terminal("ok"), Cow::Borrowed("ok")));
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/demo.db"), "/tmp/demo.db");
        assert_eq!(shell_word("my sessions.db"), "'my sessions.db'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn timestamps_read_as_utc_with_milliseconds() {
        assert_eq!(at(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400.0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_164_800.5), "2024-02-29T00:00:00.500Z");
        assert_eq!(at(1_796_249_323.832_061), "2026-12-02T22:08:43.832Z");
        assert_eq!(at(4_102_444_799.999_4), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn timestamps_outside_the_calendar_keep_their_seconds() {
        assert_eq!(at(-1.5), Timestamp::new(-1.5).expect("valid").to_string());
        assert_eq!(at(1e13), Timestamp::new(1e13).expect("valid").to_string());
    }
}
