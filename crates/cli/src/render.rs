//! What the binary shows a person: the per-turn table, the context, the compaction history.

use std::fmt::Write as _;

use compaction_core::{AssembledContext, CompactionEntry, ContextEntry};

use cli::replay::TurnRecord;

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

/// The assembled context, one block per entry, long texts shortened to `max_chars`.
pub(crate) fn context(ctx: &AssembledContext, max_chars: usize) -> String {
    let mut out = String::new();
    for entry in &ctx.entries {
        match entry {
            ContextEntry::Summary(s) => {
                let _ = writeln!(
                    out,
                    "── rolling summary (covers {} .. {}) ──\n{}",
                    s.compaction.start_timestamp,
                    s.compaction.end_timestamp,
                    s.compaction.summary_text().trim_end()
                );
            }
            ContextEntry::Event(e) => {
                let _ = writeln!(
                    out,
                    "── {} ──\n{}",
                    e.author,
                    shorten(&compaction_core::plan::render_event_body(e), max_chars)
                );
            }
        }
    }
    out
}

/// A compaction history, oldest first, with whether each compaction is subsumed.
pub(crate) fn compaction_history(entries: &[CompactionEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let state = if e.subsumed { "subsumed" } else { "live" };
        let _ = writeln!(
            out,
            "{}  [{} .. {}]  {}  {} chars",
            e.event_id, e.start_timestamp, e.end_timestamp, state, e.summary_chars
        );
    }
    if out.is_empty() {
        out.push_str("(no compaction yet)\n");
    }
    out
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
