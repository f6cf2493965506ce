//! Reading the offline summary's inputs into **topics**: each new turn (its question heading,
//! pinned constraints and decisions, finding lines of the answer, its tables and tool
//! syntheses), and a previous summary parsed back into its topics and correction entries.
//!
//! What this module must never do: drop, merge or rank lines (that is the budget's and the
//! merge step's), or lose a line of the previous summary other than its title, condensation
//! note and sources.

use compaction_core::TurnDigest;

use super::{
    CONSTRAINT, DECISION, EVIDENCE, FOREIGN_HEADING, LINE, Line, MAX_PROSE_CHARS,
    MAX_QUESTION_CHARS, NOTE_PREFIX, OLD_CORRECTION, OLD_SUPERSEDED, QUESTION_PREFIX, Rank, TITLE,
    TOPIC_PREFIX, Topic,
};
use crate::citation;
use crate::corrections::{CORRECTIONS_HEADING, Entry};
use crate::findings;
use crate::supersede::{self, NewTurn};
use crate::text::{collapse, cut, sentences};

/// One turn as a topic, and the turn as the correction step reads it.
pub(super) fn topic_of(turn: &TurnDigest) -> (Topic, NewTurn) {
    let question = cut(&collapse(&plain_question(&turn.user)), MAX_QUESTION_CHARS);
    let mut lines = Vec::new();
    let user = sentences(&turn.user);
    for s in &user {
        if findings::is_constraint(s) {
            lines.push(Line::new(Rank::Pinned, format!("{CONSTRAINT}{s}")));
        } else if findings::is_decision(s) {
            lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
        }
    }
    let answer = sentences(&turn.assistant);
    for (i, s) in answer.iter().enumerate() {
        if findings::is_decision(s) {
            lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
        } else if findings::is_finding(s) {
            lines.push(Line::finding(format!("{LINE}{s}")));
        } else if i == 0 {
            lines.push(Line::new(
                Rank::Prose,
                format!("{LINE}{}", cut(s, MAX_PROSE_CHARS)),
            ));
        }
    }
    let answer_rows = findings::table_rows(&turn.assistant);
    for row in &answer_rows {
        if findings::is_finding(row) {
            lines.push(Line::row(format!("{LINE}{row}")));
        }
    }
    for output in &turn.tool_outputs {
        for row in findings::table_rows(output) {
            if findings::is_finding(&row) {
                lines.push(Line::row(format!("{EVIDENCE}{row}")));
            }
        }
    }
    for output in &turn.tool_outputs {
        for s in sentences(output) {
            if findings::is_decision(&s) {
                lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
            } else if findings::is_finding(&s) {
                lines.push(Line::finding(format!("{EVIDENCE}{s}")));
            }
        }
    }
    let new_turn = NewTurn {
        user,
        answer,
        rows: answer_rows,
        rows_announced: supersede::announced_before_table(&turn.assistant),
    };
    (
        Topic {
            heading: format!("{QUESTION_PREFIX}{question}"),
            lines,
        },
        new_turn,
    )
}

/// The user's query on one line, without Markdown heading marks.
fn plain_question(user: &str) -> String {
    let text = user.trim();
    if text.is_empty() {
        "(no question text)".to_owned()
    } else {
        text.lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The previous summary's topics. Sources sections, the title and the condensation note are
/// left out (the ledger lists the sources again); prose before the first `### ` heading, or a
/// whole summary from another summarizer, becomes an `### Earlier summary` topic.
pub(super) fn parse_previous(previous: &str) -> (Vec<Topic>, Vec<Entry>) {
    let mut topics: Vec<Topic> = Vec::new();
    let mut foreign: Vec<Line> = Vec::new();
    let mut entries = Vec::new();
    let mut in_corrections = false;
    for line in citation::prose_lines(previous) {
        let trimmed = line.trim();
        if trimmed == CORRECTIONS_HEADING {
            in_corrections = true;
            continue;
        }
        if in_corrections {
            match Entry::parse(trimmed) {
                Some(entry) => {
                    entries.push(entry);
                    continue;
                }
                None if trimmed.is_empty() => continue,
                None => in_corrections = false,
            }
        }
        if trimmed.is_empty()
            || trimmed == TITLE
            || trimmed.starts_with(NOTE_PREFIX)
            || trimmed.starts_with(OLD_SUPERSEDED)
        {
            continue;
        }
        if trimmed.starts_with(TOPIC_PREFIX) && trimmed != FOREIGN_HEADING {
            topics.push(Topic {
                heading: trimmed.to_owned(),
                lines: Vec::new(),
            });
            continue;
        }
        if trimmed == FOREIGN_HEADING {
            continue;
        }
        let entry = if [CONSTRAINT, DECISION, OLD_CORRECTION]
            .iter()
            .any(|p| trimmed.starts_with(p))
        {
            Line::new(Rank::Pinned, trimmed.to_owned())
        } else if trimmed.starts_with('#') {
            // Another summarizer's heading becomes bold text inside the earlier-summary topic.
            Line::new(
                Rank::Prose,
                format!("**{}**", trimmed.trim_start_matches('#').trim()),
            )
        } else {
            Line::finding(trimmed.to_owned())
        };
        match topics.last_mut() {
            Some(topic) => topic.lines.push(entry),
            None => foreign.push(entry),
        }
    }
    if !foreign.is_empty() {
        topics.insert(
            0,
            Topic {
                heading: FOREIGN_HEADING.to_owned(),
                lines: foreign,
            },
        );
    }
    (topics, entries)
}
