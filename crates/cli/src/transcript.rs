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
//! Blank lines are skipped. Unknown fields and a field named twice on one line are refused, so
//! a typo is reported, not ignored.

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
#[non_exhaustive]
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
        let line = line.map_err(|error| match error.kind() {
            std::io::ErrorKind::InvalidData => TranscriptError::Line {
                source_name: source_name.to_owned(),
                line: i + 1,
                reason: "the line is not valid UTF-8".to_owned(),
            },
            _ => TranscriptError::Io {
                source_name: source_name.to_owned(),
                error,
            },
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let bad_line = |reason: String| TranscriptError::Line {
            source_name: source_name.to_owned(),
            line: i + 1,
            reason,
        };
        // A key named twice is a typo to report, not "last one wins".
        let value: Value = config_ssot::reject_duplicate_keys(line.as_bytes())
            .and_then(|()| serde_json::from_str(&line))
            .map_err(|e| bad_line(describe(&e)))?;
        check_fields(&value).map_err(bad_line)?;
        let turn: TranscriptTurn =
            serde_json::from_value(value).map_err(|e| bad_line(describe(&e)))?;
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

/// The largest token count a transcript may report: far above any context window, far below
/// where sums of counts could overflow.
pub const MAX_TOKENS: u64 = 1_000_000_000;

/// serde_json's message (`missing field `user``, `expected `,` or `}``); its position suffix
/// refers to the line, not the file, so only the column is kept.
fn describe(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(cut) if e.column() > 0 => format!("{} (column {})", &message[..cut], e.column()),
        Some(cut) => message[..cut].to_owned(),
        None => message,
    }
}

/// Checks the type of every field the line has, so that a wrong type is reported by name
/// (serde's own message does not say which field).
fn check_fields(value: &Value) -> Result<(), String> {
    let Some(object) = value.as_object() else {
        return Err(format!("expected a JSON object, got {}", kind(value)));
    };
    for (field, value) in object {
        let expected = match field.as_str() {
            "user" | "assistant" | "findings_summary" => (value.is_string()
                || (field == "findings_summary" && value.is_null()))
            .then_some(())
            .ok_or("a string"),
            "prompt_tokens" | "completion_tokens" => (value.is_null()
                || value.as_u64().is_some_and(|n| n <= MAX_TOKENS))
            .then_some(())
            .ok_or("an integer from 0 to 1000000000"),
            "pipeline" => value
                .as_array()
                .is_some_and(|steps| steps.iter().all(Value::is_string))
                .then_some(())
                .ok_or("an array of strings"),
            "tools" => value
                .as_array()
                .is_some_and(|tools| {
                    tools.iter().all(|t| {
                        t.get("name").is_some_and(Value::is_string)
                            && t.get("result").is_some_and(Value::is_string)
                    })
                })
                .then_some(())
                .ok_or("an array of objects with string fields \"name\" and \"result\""),
            // Unknown fields are refused by the typed parse, which names them.
            _ => Ok(()),
        };
        if let Err(expected) = expected {
            return Err(format!(
                "field \"{field}\" must be {expected}, got {}",
                kind(value)
            ));
        }
    }
    Ok(())
}

/// A short description of a JSON value for an error message.
fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_named_twice_is_refused_naming_field_and_line() {
        let text = "{\"user\": \"q\", \"assistant\": \"a\"}\n{\"user\": \"q\", \"assistant\": \"a\", \"user\": \"other\"}";
        let err = parse("t.jsonl", text.as_bytes()).unwrap_err().to_string();
        assert!(
            err.starts_with("t.jsonl:2: duplicate key \"user\""),
            "{err}"
        );
    }

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
    fn a_wrong_type_or_range_names_the_field_and_the_expected_form() {
        let cases = [
            (
                r#"{"user":5,"assistant":"a"}"#,
                r#"t:1: field "user" must be a string, got 5"#,
            ),
            (
                r#"{"user":"q","assistant":"a","prompt_tokens":-1}"#,
                r#"t:1: field "prompt_tokens" must be an integer from 0 to 1000000000, got -1"#,
            ),
            (
                r#"{"user":"q","assistant":"a","completion_tokens":18446744073709551615}"#,
                r#"field "completion_tokens" must be an integer from 0 to 1000000000, got 18446744073709551615"#,
            ),
            (
                r#"{"user":"q","assistant":"a","pipeline":["ok",3]}"#,
                r#"field "pipeline" must be an array of strings, got an array"#,
            ),
            (
                r#"{"user":"q","assistant":"a","tools":[{"name":"s"}]}"#,
                r#"field "tools" must be an array of objects with string fields "name" and "result""#,
            ),
            (r#"[1,2]"#, "t:1: expected a JSON object, got an array"),
            (
                r#"{"user":"q","assistant":"a""#,
                "t:1: EOF while parsing an object (column 27)",
            ),
        ];
        for (line, expected) in cases {
            let err = parse("t", line.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(expected), "{line}: {err}");
        }
        let ok =
            r#"{"user":"q","assistant":"a","prompt_tokens":1000000000,"findings_summary":null}"#;
        assert_eq!(
            parse("t", ok.as_bytes()).unwrap()[0].prompt_tokens,
            Some(MAX_TOKENS)
        );
    }

    #[test]
    fn reads_a_full_turn() {
        let line = r#"{"user":"q","assistant":"a","prompt_tokens":5,"tools":[{"name":"search_library","result":"r"}],"pipeline":["step"],"findings_summary":"f"}"#;
        let turns = parse("t", line.as_bytes()).unwrap();
        assert_eq!(turns[0].tools[0].name, "search_library");
        assert_eq!(turns[0].pipeline, ["step"]);
    }
}
