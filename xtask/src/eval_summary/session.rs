//! The labelled session as eval-summary reads it: turns, facts, corrections.

use std::path::Path;

use cli::transcript::{ToolUse, TranscriptTurn};
pub(super) use decision_client::sessions::SupersededLine;
use decision_client::sessions::{SessionTurn, parse_session};

use crate::summary_checks;

/// A fact a summary must keep, with its kind.
#[derive(Debug, Clone)]
pub(super) struct Fact {
    pub(super) text: String,
    pub(super) kind: &'static str,
}

/// One turn as the eval sees it: the transcript turn replayed, its facts, its DOIs.
#[derive(Debug, Clone)]
pub(super) struct EvalTurn {
    pub(super) transcript: TranscriptTurn,
    pub(super) facts: Vec<Fact>,
    pub(super) dois: Vec<String>,
    /// Facts a rejected dispute left standing.
    pub(super) stands: Vec<String>,
}

/// "README: Mapping to `compaction replay`".
pub(super) fn transcript_turn(t: &SessionTurn) -> TranscriptTurn {
    let tools = match (&t.tool_call, &t.synthesis) {
        (Some(call), Some(synthesis)) => vec![ToolUse {
            name: call.name.clone(),
            args: call.args.clone(),
            result: synthesis.clone(),
        }],
        _ => Vec::new(),
    };
    TranscriptTurn {
        user: t.user.clone(),
        assistant: t.assistant.clone(),
        prompt_tokens: t.prompt_tokens,
        completion_tokens: None,
        tools,
        pipeline: t.scoped_events.iter().map(|e| e.text.clone()).collect(),
        findings_summary: t.findings_summary.clone(),
    }
}

pub(super) fn fact_kind(fact: &str) -> &'static str {
    static CITATION: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\p{Lu}[\p{L}'’\-]+(?:\s+et\s+al\.?|\s+(?:&|and)\s+\p{Lu}[\p{L}'’\-]+),?\s+\(?(?:19|20)\d{2}")
            .expect("the pattern is valid")
    });
    if CITATION.is_match(fact) {
        "citation"
    } else if fact.chars().any(|c| c.is_ascii_digit())
        && fact
            .chars()
            .any(|c| c.is_alphabetic() || matches!(c, '%' | '×' | '‰' | '°'))
    {
        "number"
    } else {
        "other"
    }
}

pub(super) fn dois(text: &str) -> Vec<String> {
    static DOI: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"10\.\d{4,9}/[^\s)\]>,;]+[^\s)\]>,;.]").expect("the pattern is valid")
    });
    let mut out: Vec<String> = DOI
        .find_iter(text)
        .map(|m| m.as_str().to_lowercase())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The labelled checks of a session: the superseded-line checks and the (0-based) turn by
/// which every retracted claim has been corrected (the highest turn its `superseded` note
/// names); a fold is checked only once it covers that turn.
#[derive(Debug, Clone, Default)]
pub(super) struct Corrections {
    pub(super) lines: Vec<SupersededLine>,
    pub(super) strict: Vec<summary_checks::StrictCheck>,
    pub(super) by_turn: Option<usize>,
}

pub(super) fn corrected_by(notes: &[String]) -> Option<usize> {
    static TURN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"turns? (\d+)(?:\s*[-–]\s*(\d+))?").expect("the pattern is valid")
    });
    notes
        .iter()
        .flat_map(|n| TURN.captures_iter(n).collect::<Vec<_>>())
        .filter_map(|c| {
            c.get(2)
                .or(c.get(1))
                .and_then(|m| m.as_str().parse::<usize>().ok())
        })
        .max()
        .map(|n| n.saturating_sub(1))
}

pub(super) fn load_session(path: &Path) -> Result<(Vec<EvalTurn>, Corrections), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = parse_session(&text, &path.display().to_string()).map_err(|e| e.to_string())?;
    let turns = file
        .turns
        .iter()
        .map(|t| EvalTurn {
            transcript: transcript_turn(t),
            facts: t
                .facts
                .iter()
                .map(|f| Fact {
                    text: f.clone(),
                    kind: fact_kind(f),
                })
                .collect(),
            dois: dois(t.synthesis.as_deref().unwrap_or("")),
            stands: t.disputed_but_stands.clone(),
        })
        .collect();
    let notes: Vec<String> = file
        .turns
        .iter()
        .flat_map(|t| t.superseded.clone())
        .collect();
    Ok((
        turns,
        Corrections {
            strict: file
                .checks
                .superseded_lines
                .iter()
                .map(|c| summary_checks::strict(&c.all_of, &c.unless_any, &notes))
                .collect(),
            lines: file.checks.superseded_lines,
            by_turn: corrected_by(&notes),
        },
    ))
}

// ---------------------------------------------------------------------------------------------
// Running the engine.
