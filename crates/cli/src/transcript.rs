//! The replay transcript format: JSON Lines, one turn per line.
//!
//! ```json
//! {"user": "…", "assistant": "…", "prompt_tokens": 41000, "completion_tokens": 350,
//!  "tools": [{"name": "search_library", "args": {"query": "…"}, "result": "… # Cited Sources …"}],
//!  "pipeline": ["Thought: … Action: retrieve(…)", "chunk 4f2a: …"],
//!  "findings_summary": "…"}
//! ```
//!
//! - `user`, `assistant` (strings) are required; everything else is optional.
//! - `prompt_tokens` / `completion_tokens`: the coordinator's usage for the turn in an
//!   uncompacted run. Without them the documented estimator is used (see `replay`).
//! - `tools`: the coordinator's tool calls and their results (a research synthesis with its
//!   `# Cited Sources`, say).
//! - `pipeline`: raw steps of the literature-search sub-agents; they become events scoped to
//!   `search_pipeline:<call id>` and never reach the decision model or the summarizer.
//! - `findings_summary`: marks a research turn; recorded in session state
//!   `RESEARCH_TURN_HISTORY` so the decision model reads it instead of the synthesis (only
//!   for turns the live summary does not cover yet: older entries are dropped, so the state
//!   stays bounded however long the transcript).
//!
//! Blank lines are skipped. Unknown fields are refused, so a typo is reported, not ignored.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;

/// One turn of a transcript.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptTurn {
    /// The user's query.
    pub user: String,
    /// The coordinator's final answer.
    pub assistant: String,
    /// Reported prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Reported completion tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Tool calls and results.
    #[serde(default)]
    pub tools: Vec<ToolUse>,
    /// Scoped sub-agent steps.
    #[serde(default)]
    pub pipeline: Vec<String>,
    /// The concise findings summary of a research turn.
    #[serde(default)]
    pub findings_summary: Option<String>,
}

/// A tool call and its result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolUse {
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub args: Option<Value>,
    /// Result text.
    pub result: String,
}

/// A transcript could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Reading failed.
    #[error("{source_name}: cannot read: {error}")]
    Io {
        /// The file (or `<stdin>`).
        source_name: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A line is not a valid turn.
    #[error(
        "{source_name}:{line}: {reason}\n  expected one JSON object per line with string fields \"user\" and \"assistant\" (see README: transcript format)"
    )]
    Line {
        /// The file (or `<stdin>`).
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// No turn at all.
    #[error("{0}: the transcript holds no turn")]
    Empty(String),
}

/// Parses a whole transcript.
pub fn parse(
    source_name: &str,
    reader: impl BufRead,
) -> Result<Vec<TranscriptTurn>, TranscriptError> {
    let mut turns = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|error| TranscriptError::Io {
            source_name: source_name.to_owned(),
            error,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let turn: TranscriptTurn =
            serde_json::from_str(&line).map_err(|e| TranscriptError::Line {
                source_name: source_name.to_owned(),
                line: i + 1,
                reason: describe(&e),
            })?;
        if turn.user.trim().is_empty() {
            return Err(TranscriptError::Line {
                source_name: source_name.to_owned(),
                line: i + 1,
                reason: "field \"user\" is empty".to_owned(),
            });
        }
        turns.push(turn);
    }
    if turns.is_empty() {
        return Err(TranscriptError::Empty(source_name.to_owned()));
    }
    Ok(turns)
}

/// serde_json's message names the field (`missing field `user``); drop its position suffix,
/// which refers to the line, not the file.
fn describe(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(cut) => message[..cut].to_owned(),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_line_and_the_field() {
        let input = "{\"user\":\"q\",\"assistant\":\"a\"}\n\n{\"user\":\"q2\"}\n";
        let err = parse("t.jsonl", input.as_bytes()).unwrap_err().to_string();
        assert!(
            err.starts_with("t.jsonl:3: missing field `assistant`"),
            "{err}"
        );
        let err = parse(
            "t.jsonl",
            "{\"user\":\"q\",\"assistant\":\"a\",\"promt_tokens\":3}".as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(":1: unknown field `promt_tokens`"), "{err}");
        let err = parse("t.jsonl", "not json".as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("t.jsonl:1: expected"), "{err}");
        assert!(matches!(
            parse("e", "".as_bytes()),
            Err(TranscriptError::Empty(_))
        ));
    }

    #[test]
    fn reads_a_full_turn() {
        let line = r#"{"user":"q","assistant":"a","prompt_tokens":5,"tools":[{"name":"search_library","result":"r"}],"pipeline":["step"],"findings_summary":"f"}"#;
        let turns = parse("t", line.as_bytes()).unwrap();
        assert_eq!(turns[0].tools[0].name, "search_library");
        assert_eq!(turns[0].pipeline, ["step"]);
    }
}
