//! `cargo xtask eval-summary [--sessions DIR] [--also DIR]... [--tuned a,b,...] [--dump DIR]
//! [--summarizer offline|chat|auto] [--config FILE]
//! [--canary] [--verbose]`: how much of the folded turns a rolling summary still holds.
//!
//! Each labelled session (the repository's `data/research-sessions/*.json` by default, `--sessions DIR` for others;
//! format in its README) is
//! replayed through the real engine (`compaction_core::Engine`, a `SqliteStore` in a temporary
//! directory, the cli's replay driver) under four runs:
//! - `defaults`: the spec's settings and the offline decision model;
//! - `every-2`, `every-3`, `every-5`: forced folds — a decision model that always answers
//!   p = 1, token floor 0, `min_turns` N (K = 1 for N = 2, since min_turns >= K + 1; K = 2
//!   otherwise), so the engine folds every N turns.
//!
//! After each fold (a new live summary) it checks the live summary against the labels of the
//! turns it covers: **fact survival** by kind (`citation`: an author-year key; `number`: a
//! number with a unit or label; `other`: a bare number), a fact surviving when it occurs in
//! the summary (case-insensitive, whitespace collapsed); **superseded** lines
//! (`checks.superseded_lines`); **tokens** (chars / 4, the core's estimator) against the
//! summarizer's budget; **citations lost** (a DOI of a covered turn's `# Cited Sources` the
//! summary no longer holds); **bibliography entries with no claim** (a listed source whose
//! first author and year no prose line of the summary names).
//!
//! Issue 30's checks ([`crate::summary_checks`]): **restated** — a line that states a
//! retracted claim without its corrected content (a marker word is not enough); **valid
//! marked** — a valid fact (`facts[]`, `disputed_but_stands[]`) shown as superseded or
//! withdrawn; **duplicates** — extra lines stating the same labelled fact; **receipt** — the
//! compaction's receipt agrees with its summary. `--tuned a,b,...` names the sessions looked at while tuning: the totals of each
//! run are reported for them and for the others apart.
//!
//! `--canary` replays a generated 55-turn session with one planted fact per turn, five types in
//! rotation (number with unit, citation key, identifier or path, user constraint, decision),
//! folds every 5 turns, and reports the survival of every planted fact folded so far after 1,
//! 3, 5 and 10 folds, per type.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use cli::replay::Replay;
use cli::transcript::{ToolUse, TranscriptTurn};
use compaction_core::{
    AdapterError, CharsPerToken, Clock, DecisionAnswer, DecisionModel, Engine, IdGenerator,
    ModelInfo, ProbeRequest, SessionKey, SessionStore, Settings, Sleep, Timestamp, TokenEstimator,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use session_store::SqliteStore;
use summarizer::{AdapterChoice, SummarizerConfig, build_summarizer};

use crate::summary_checks;

const USAGE: &str = "usage: cargo xtask eval-summary [--sessions DIR] [--also DIR]... [--tuned a,b,...] [--dump DIR] [--summarizer offline|chat|auto] [--config FILE] [--canary] [--verbose]";

struct Args {
    sessions: PathBuf,
    /// More session directories (`--also DIR`, repeatable).
    more_sessions: Vec<PathBuf>,
    /// Sessions looked at while tuning (`--tuned a,b`): reported apart from the others.
    tuned: Vec<String>,
    /// Where to write each run's last summary (`--dump DIR`), for reading.
    dump: Option<PathBuf>,
    adapter: AdapterChoice,
    config: Option<PathBuf>,
    canary: bool,
    verbose: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        sessions: test_data::repo_path(test_data::RESEARCH_SESSIONS),
        more_sessions: Vec::new(),
        tuned: Vec::new(),
        dump: None,
        adapter: AdapterChoice::Offline,
        config: None,
        canary: false,
        verbose: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--sessions" => parsed.sessions = PathBuf::from(value()?),
            "--also" => parsed.more_sessions.push(PathBuf::from(value()?)),
            "--dump" => parsed.dump = Some(PathBuf::from(value()?)),
            "--tuned" => {
                parsed.tuned = value()?
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
            }
            "--config" => parsed.config = Some(PathBuf::from(value()?)),
            "--summarizer" => {
                let v = value()?;
                parsed.adapter = match v.as_str() {
                    "offline" => AdapterChoice::Offline,
                    "chat" => AdapterChoice::Chat,
                    "auto" => AdapterChoice::Auto,
                    _ => {
                        return Err(format!(
                            "--summarizer must be offline, chat or auto, got {v}\n{USAGE}"
                        ));
                    }
                }
            }
            "--canary" => parsed.canary = true,
            "--verbose" => parsed.verbose = true,
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------------------------
// The labelled sessions.

#[derive(Debug, Deserialize)]
struct SessionFile {
    turns: Vec<LabelledTurn>,
    #[serde(default)]
    checks: Checks,
}

#[derive(Debug, Default, Deserialize)]
struct Checks {
    #[serde(default)]
    superseded_lines: Vec<SupersededLine>,
}

#[derive(Debug, Clone, Deserialize)]
struct SupersededLine {
    all_of: Vec<String>,
    #[serde(default)]
    unless_any: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct LabelledTurn {
    user: String,
    assistant: String,
    #[serde(default)]
    findings_summary: Option<String>,
    #[serde(default)]
    synthesis: Option<String>,
    #[serde(default)]
    tool_call: Option<ToolCall>,
    #[serde(default)]
    scoped_events: Vec<ScopedEvent>,
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    facts: Vec<String>,
    #[serde(default)]
    superseded: Vec<String>,
    #[serde(default)]
    disputed_but_stands: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct ToolCall {
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
struct ScopedEvent {
    text: String,
}

/// A fact a summary must keep, with its kind.
#[derive(Debug, Clone)]
struct Fact {
    text: String,
    kind: &'static str,
}

/// One turn as the eval sees it: the transcript turn replayed, its facts, its DOIs.
#[derive(Debug, Clone)]
struct EvalTurn {
    transcript: TranscriptTurn,
    facts: Vec<Fact>,
    dois: Vec<String>,
    /// Facts a rejected dispute left standing.
    stands: Vec<String>,
}

/// "README: Mapping to `compaction replay`".
fn transcript_turn(t: &LabelledTurn) -> TranscriptTurn {
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

fn fact_kind(fact: &str) -> &'static str {
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

fn dois(text: &str) -> Vec<String> {
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
struct Corrections {
    lines: Vec<SupersededLine>,
    strict: Vec<summary_checks::StrictCheck>,
    by_turn: Option<usize>,
}

fn corrected_by(notes: &[String]) -> Option<usize> {
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

fn load_session(path: &Path) -> Result<(Vec<EvalTurn>, Corrections), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: SessionFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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

/// A clock that ticks one second per reading, so each turn's first event has a known time.
#[derive(Debug, Default)]
struct TickClock(AtomicU64);

impl TickClock {
    fn current(&self) -> f64 {
        1_700_000_000.0 + self.0.load(Ordering::SeqCst) as f64
    }
}

impl Clock for TickClock {
    fn now(&self) -> Timestamp {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Timestamp::new(1_700_000_000.0 + n as f64).expect("a finite timestamp")
    }

    /// The offline models answer at once; an evaluation has no deadline to keep.
    fn sleep(&self, _: std::time::Duration) -> Sleep {
        Box::pin(std::future::pending())
    }
}

#[derive(Debug, Default)]
struct CountingIds(AtomicU64);

impl IdGenerator for CountingIds {
    fn next_id(&self) -> String {
        format!("id-{}", self.0.fetch_add(1, Ordering::SeqCst))
    }
}

/// A decision model that always says "compact": with `min_turns` N the engine folds every N
/// turns.
struct AlwaysCompress;

#[async_trait]
impl DecisionModel for AlwaysCompress {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("eval", "local", "always-compress")
    }
    async fn decide(&self, _: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        Ok(DecisionAnswer::new(1.0))
    }
}

/// One way of replaying a session.
#[derive(Debug, Clone, Copy)]
struct Run {
    name: &'static str,
    /// Fold every N turns; `None` for the spec's defaults and the offline decision model.
    every: Option<usize>,
}

const RUNS: [Run; 4] = [
    Run {
        name: "defaults",
        every: None,
    },
    Run {
        name: "every-2",
        every: Some(2),
    },
    Run {
        name: "every-3",
        every: Some(3),
    },
    Run {
        name: "every-5",
        every: Some(5),
    },
];

fn settings_for(run: Run) -> Settings {
    match run.every {
        None => Settings::default(),
        Some(n) => Settings {
            adaptive_compaction_retention_turns: if n <= 2 { 1 } else { 2 },
            adaptive_compaction_min_turns: n as i64,
            adaptive_compaction_token_floor: 0,
            adaptive_compaction_token_ceiling: 10_000_000,
            adaptive_compaction_threshold: 0.5,
            ..Settings::default()
        },
    }
}

/// The live summary after one fold, and the turns (0-based) it covers.
#[derive(Debug, Clone)]
struct Fold {
    after_turn: usize,
    text: String,
    covered: Vec<usize>,
    receipt: Option<compaction_core::Receipt>,
}

/// What a replay produced: each fold, and the failures the engine reported.
#[derive(Debug, Default)]
struct Replayed {
    folds: Vec<Fold>,
    failures: Vec<String>,
}

/// The receipt the engine stored on compaction `event_id`.
async fn stored_receipt(
    store: &SqliteStore,
    key: &SessionKey,
    event_id: &str,
) -> Result<Option<compaction_core::Receipt>, String> {
    let session = store.load(key).await.map_err(|e| e.to_string())?;
    Ok(session
        .events
        .iter()
        .find(|e| e.id == event_id)
        .and_then(compaction_core::Receipt::of_event))
}

async fn replay(
    turns: &[EvalTurn],
    run: Run,
    config: &SummarizerConfig,
    settings_map: &Map<String, Value>,
) -> Result<Replayed, String> {
    let settings = settings_for(run);
    let effective = settings.effective().map_err(|e| e.to_string())?;
    let selected = build_summarizer(&effective, config, decision_client::process_env).map_err(
        |e| match e {
            summarizer::FactoryError::NotBuilt { .. } => format!(
                "{e}; for the chat summarizer run \
                 `cargo run -p xtask --features remote -- eval-summary ...`"
            ),
            e => e.to_string(),
        },
    )?;
    let decision: Arc<dyn DecisionModel> = match run.every {
        Some(_) => Arc::new(AlwaysCompress),
        None => {
            let mut decision_config = decision_client::DecisionConfig::from_map(settings_map)
                .map_err(|e| e.to_string())?;
            decision_config.adapter = decision_client::DecisionAdapter::Offline;
            decision_client::build_decision_model(&effective, &decision_config, |_| None)
                .map_err(|e| e.to_string())?
                .model
        }
    };
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let store =
        Arc::new(SqliteStore::open(dir.path().join("sessions.db")).map_err(|e| e.to_string())?);
    let clock = Arc::new(TickClock::default());
    let ids = Arc::new(CountingIds::default());
    let engine = Engine::builder(
        decision,
        selected.summarizer.clone(),
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings)
    .build()
    .map_err(|e| e.to_string())?;
    let key = SessionKey::new("eval", "researcher", "eval-summary");
    let mut replay = Replay::start(engine, store.clone(), clock.clone(), ids, key.clone())
        .await
        .map_err(|e| e.to_string())?;
    let mut starts = Vec::new();
    let mut out = Replayed::default();
    let mut live: Option<String> = None;
    for (i, turn) in turns.iter().enumerate() {
        // The turn's user event is the clock's next reading.
        starts.push(Timestamp::new(clock.current() + 1.0).expect("finite"));
        let record = replay
            .turn(&turn.transcript)
            .await
            .map_err(|e| e.to_string())?;
        if record.detail.starts_with("nothing written") || record.detail.starts_with("dropped") {
            out.failures
                .push(format!("turn {}: {}", i + 1, record.detail));
        }
        let context = store.load_context(&key).await.map_err(|e| e.to_string())?;
        if let Some(summary) = context.summary()
            && live.as_deref() != Some(summary.event_id.as_str())
        {
            live = Some(summary.event_id.clone());
            let covered = starts
                .iter()
                .enumerate()
                .filter(|(_, ts)| summary.compaction.covers(**ts))
                .map(|(n, _)| n)
                .collect();
            let receipt = stored_receipt(&store, &key, &summary.event_id).await?;
            out.folds.push(Fold {
                after_turn: i + 1,
                text: summary.compaction.summary_text(),
                covered,
                receipt,
            });
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Measuring one fold.

fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Kept / total per kind.
#[derive(Debug, Default, Clone)]
struct Tally(BTreeMap<&'static str, (usize, usize)>);

impl Tally {
    fn add(&mut self, kind: &'static str, kept: bool) {
        let e = self.0.entry(kind).or_default();
        e.0 += usize::from(kept);
        e.1 += 1;
    }
    fn merge(&mut self, other: &Tally) {
        for (k, (kept, total)) in &other.0 {
            let e = self.0.entry(k).or_default();
            e.0 += kept;
            e.1 += total;
        }
    }
    fn total(&self) -> (usize, usize) {
        self.0
            .values()
            .fold((0, 0), |(a, b), (k, t)| (a + k, b + t))
    }
    fn render(&self) -> String {
        let (kept, total) = self.total();
        let mut out = format!("facts {}", ratio(kept, total));
        for (kind, (k, t)) in &self.0 {
            out.push_str(&format!(" {kind} {}", ratio(*k, *t)));
        }
        out
    }
}

fn ratio(kept: usize, total: usize) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!(
            "{kept}/{total} ({:.1}%)",
            100.0 * kept as f64 / total as f64
        )
    }
}

/// One fold's figures.
#[derive(Debug, Default, Clone)]
struct Measure {
    facts: Tally,
    missing: Vec<String>,
    superseded: Vec<String>,
    tokens: usize,
    dois_lost: Vec<String>,
    unclaimed_entries: usize,
    entries: usize,
    /// The citation ledger had to append `## Sources carried forward`.
    carried_forward: bool,
    /// Lines stating a retracted claim without its corrected content.
    restated: Vec<String>,
    /// Valid facts shown as superseded or withdrawn.
    valid_marked: Vec<String>,
    /// Extra statements of labelled facts.
    duplicates: usize,
    /// Why the receipt disagrees with the summary, if it does.
    receipt: Option<String>,
}

fn superseded_lines(summary: &str, checks: &[SupersededLine]) -> Vec<String> {
    let mut out = Vec::new();
    for line in summary.lines() {
        let lower = line.to_lowercase();
        for check in checks {
            if check
                .all_of
                .iter()
                .all(|s| lower.contains(&s.to_lowercase()))
                && !check
                    .unless_any
                    .iter()
                    .any(|s| lower.contains(&s.to_lowercase()))
            {
                out.push(line.chars().take(160).collect());
            }
        }
    }
    out
}

/// Bibliography entries (lines of a sources section) and how many name a source no prose line
/// of the summary cites (first author surname and year).
fn bibliography(summary: &str) -> (usize, usize) {
    let mut in_sources = false;
    let mut prose = String::new();
    let mut entries = Vec::new();
    for line in summary.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            let h = t.trim_start_matches('#').trim().to_lowercase();
            in_sources =
                h.contains("sources") || h.contains("references") || h.contains("bibliograph");
            continue;
        }
        if in_sources && t.starts_with("- ") {
            entries.push(t.to_owned());
        } else {
            prose.push_str(t);
            prose.push('\n');
        }
    }
    let prose = prose.to_lowercase();
    let unclaimed = entries
        .iter()
        .filter(|e| {
            let first = e
                .trim_start_matches("- ")
                .split([',', ' '])
                .next()
                .unwrap_or("")
                .to_lowercase();
            let year = e
                .split(|c: char| !c.is_ascii_digit())
                .find(|w| w.len() == 4 && (w.starts_with("19") || w.starts_with("20")))
                .unwrap_or("");
            !prose
                .lines()
                .any(|l| !first.is_empty() && l.contains(&first) && l.contains(year))
        })
        .count();
    (entries.len(), unclaimed)
}

fn measure(fold: &Fold, turns: &[EvalTurn], checks: &Corrections) -> Measure {
    let summary = normalized(&fold.text);
    let corrected = checks.by_turn.is_some_and(|t| fold.covered.contains(&t));
    let mut m = Measure {
        tokens: CharsPerToken.estimate(&fold.text),
        superseded: if corrected {
            superseded_lines(&fold.text, &checks.lines)
        } else {
            Vec::new()
        },
        ..Measure::default()
    };
    let mut valid: Vec<String> = Vec::new();
    for &n in &fold.covered {
        valid.extend(turns[n].facts.iter().map(|f| f.text.clone()));
        valid.extend(turns[n].stands.iter().cloned());
        for fact in &turns[n].facts {
            let kept = summary.contains(&normalized(&fact.text));
            m.facts.add(fact.kind, kept);
            if !kept {
                m.missing
                    .push(format!("t{} {}: {}", n + 1, fact.kind, fact.text));
            }
        }
        for doi in &turns[n].dois {
            if !summary.contains(doi) {
                m.dois_lost.push(doi.clone());
            }
        }
    }
    m.carried_forward = fold.text.contains(summarizer::CARRIED_FORWARD_HEADING);
    if corrected {
        m.restated = summary_checks::restated(&fold.text, &checks.strict);
    }
    m.valid_marked = summary_checks::valid_marked(&fold.text, &valid);
    m.duplicates = summary_checks::duplicates(&fold.text, &valid);
    m.receipt = summary_checks::receipt_mismatch(&fold.text, fold.receipt.as_ref());
    // A fact a rejected dispute left standing must still be stated.
    for &n in &fold.covered {
        for f in &turns[n].stands {
            if !summary.contains(&normalized(f)) {
                m.valid_marked
                    .push(format!("{f} (disputed but stands: missing)"));
            }
        }
    }
    m.dois_lost.sort();
    m.dois_lost.dedup();
    (m.entries, m.unclaimed_entries) = bibliography(&fold.text);
    m
}

// ---------------------------------------------------------------------------------------------
// The canary.

/// The planted fact types, in rotation.
const CANARY_TYPES: [&str; 5] = ["number", "citation", "identifier", "constraint", "decision"];
const CANARY_TURNS: usize = 55;
const SURNAMES: [&str; 11] = [
    "Quillfeather",
    "Ostrowska",
    "Mbeki-Laurent",
    "Tanaka-Reyes",
    "Haugland",
    "Vasquez-Imre",
    "Dunleavy",
    "Achterberg",
    "Rosenthal",
    "Okonkwo",
    "Lindqvist",
];
const SUBJECTS: [&str; 11] = [
    "soil moisture",
    "leaf nitrogen",
    "stomatal conductance",
    "root biomass",
    "canopy height",
    "seed mass",
    "pollen load",
    "nectar volume",
    "flowering date",
    "wing length",
    "forager count",
];

/// The canary session: one planted fact per turn, types in rotation, in an answer of filler
/// prose, with a tool synthesis of six figures that are not planted facts (about 60 of them
/// per fold, so that the budget bites after a few folds).
fn canary_session() -> Vec<EvalTurn> {
    let mut turns = Vec::new();
    for i in 0..CANARY_TURNS {
        let kind = CANARY_TYPES[i % CANARY_TYPES.len()];
        let subject = SUBJECTS[i % SUBJECTS.len()];
        let name = SURNAMES[(i * 7) % SURNAMES.len()];
        let year = 2003 + (i * 3) % 20;
        let (user, fact, planted) = match kind {
            "number" => {
                let v = format!("{}.{} mg/kg", 10 + i * 3, i % 10);
                (
                    format!("What is the typical {subject} effect in the field plots?"),
                    v.clone(),
                    format!(
                        "The pooled plot-level estimate for {subject} is {v} across the trial sites."
                    ),
                )
            }
            "citation" => {
                let key = format!("{name} et al. {year}");
                (
                    format!("Which study anchors the {subject} result?"),
                    key.clone(),
                    format!(
                        "The anchoring study for {subject} is {key}, a multi-site field trial."
                    ),
                )
            }
            "identifier" => {
                let path = format!("data/plots/run_{i:03}/{}.csv", subject.replace(' ', "_"));
                (
                    format!("Where is the {subject} data for this analysis?"),
                    path.clone(),
                    format!(
                        "The cleaned {subject} table is stored at `{path}` in the project repository."
                    ),
                )
            }
            "constraint" => {
                let c = format!("exclude pre-{} studies", 2000 + i % 20);
                (
                    format!("For the {subject} review, please {c} and keep only field trials."),
                    c.clone(),
                    format!("Understood: for {subject} I will {c} from now on."),
                )
            }
            _ => {
                let d = format!("use a mixed model with site as random effect for {subject}");
                (
                    format!("Which model should we use for {subject}?"),
                    d.clone(),
                    format!("Decision: we will {d}, as agreed."),
                )
            }
        };
        let filler = format!(
            "Several groups discussed {subject} at length, and the broader literature is mixed. \
             Some reviews argue the methods matter more than the setting, others the reverse. \
             Sampling designs vary between sites and seasons, which complicates any pooled view. \
             This remains an open question worth revisiting once more data arrive."
        );
        let assistant = format!("{filler}\n\n{planted}\n\nWant me to look further into {subject}?");
        // Evidence that competes for the budget: a synthesis with figures of its own.
        let synthesis = (0..6)
            .map(|k| {
                format!(
                    "Plot {} recorded {}.{} cm of {subject} change in season {}, against {}.{} cm at the control site.",
                    i * 10 + k,
                    20 + (i * 7 + k * 3) % 70,
                    (i + k) % 10,
                    k + 1,
                    15 + (i * 5 + k) % 60,
                    (i * 3 + k) % 10
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        turns.push(EvalTurn {
            transcript: TranscriptTurn {
                user: user.clone(),
                assistant,
                prompt_tokens: None,
                completion_tokens: None,
                tools: vec![ToolUse {
                    name: "search_library".into(),
                    args: None,
                    result: format!("## Field notes on {subject}\n\n{synthesis}"),
                }],
                pipeline: Vec::new(),
                findings_summary: Some(planted.clone()),
            },
            facts: vec![Fact { text: fact, kind }],
            dois: Vec::new(),
            stands: Vec::new(),
        });
    }
    turns
}

// ---------------------------------------------------------------------------------------------
// Driving.

fn settings_file(path: Option<&Path>) -> Result<Map<String, Value>, String> {
    let Some(path) = path else {
        return Ok(Map::new());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{}: expected a JSON object", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Totals of one run over a group of sessions.
#[derive(Debug, Default)]
struct Totals {
    facts: Tally,
    restated: usize,
    valid_marked: usize,
    over_budget: usize,
    over_bar: usize,
    max_tokens: usize,
    dois_lost: usize,
    receipt_mismatches: usize,
    duplicates: usize,
}

impl Totals {
    fn render(&self, budget: usize) -> String {
        format!(
            "{} | restated (all folds covering the correction) {} | valid marked (all folds) {} | \
             duplicates (last folds) {} | max tokens {} | folds over budget ({budget}) {} | \
             folds over {SUMMARY_BAR_TOKENS} tokens {} | dois lost {} | receipt mismatches {}",
            self.facts.render(),
            self.restated,
            self.valid_marked,
            self.duplicates,
            self.max_tokens,
            self.over_budget,
            self.over_bar,
            self.dois_lost,
            self.receipt_mismatches
        )
    }

    fn passes(&self) -> bool {
        let (kept, total) = self.facts.total();
        total > 0
            && kept * 100 >= total * 95
            && self.restated == 0
            && self.valid_marked == 0
            && self.over_budget == 0
            && self.dois_lost == 0
            && self.receipt_mismatches == 0
    }
}

/// Issue 30's bar for a summary at spec defaults, in tokens.
const SUMMARY_BAR_TOKENS: usize = 4000;

fn fold_line(m: &Measure) -> String {
    format!(
        "{} | restated {} (marker-lenient {}) | valid marked {} | duplicates {} | tokens {} | \
         dois lost {} | no-claim entries {} | receipt {}",
        m.facts.render(),
        m.restated.len(),
        m.superseded.len(),
        m.valid_marked.len(),
        m.duplicates,
        m.tokens,
        m.dois_lost.len(),
        m.unclaimed_entries,
        m.receipt.as_deref().unwrap_or("ok")
    )
}

/// The `*.json` sessions of `--sessions` and every `--also` directory, by name.
fn session_files(args: &Args) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in std::iter::once(&args.sessions).chain(&args.more_sessions) {
        files.extend(
            std::fs::read_dir(dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    files.sort_by_key(|p| p.file_stem().map(|s| s.to_owned()));
    if files.is_empty() {
        return Err(format!("{}: no *.json session", args.sessions.display()));
    }
    Ok(files)
}

/// Adds every fold of one replay to `totals`, printing each with `--verbose`.
fn count_folds(
    name: &str,
    replayed: &Replayed,
    turns: &[EvalTurn],
    checks: &Corrections,
    budget: usize,
    verbose: bool,
    totals: &mut Totals,
) {
    for (i, fold) in replayed.folds.iter().enumerate() {
        let m = measure(fold, turns, checks);
        totals.over_budget += usize::from(m.tokens > budget);
        totals.over_bar += usize::from(m.tokens > SUMMARY_BAR_TOKENS);
        totals.max_tokens = totals.max_tokens.max(m.tokens);
        totals.restated += m.restated.len();
        totals.valid_marked += m.valid_marked.len();
        totals.receipt_mismatches += usize::from(m.receipt.is_some());
        if verbose {
            println!(
                "  {name} fold {} (after turn {}, covers {} turns): {}",
                i + 1,
                fold.after_turn,
                fold.covered.len(),
                fold_line(&m)
            );
            for s in &m.restated {
                println!("      restated: {s}");
            }
            for s in &m.valid_marked {
                println!("      valid marked: {s}");
            }
        }
    }
}

async fn run_sessions(
    args: &Args,
    config: &SummarizerConfig,
    map: &Map<String, Value>,
) -> Result<bool, String> {
    let files = session_files(args)?;
    let budget = config.summary_max_tokens;
    let mut ok = true;
    for run in RUNS {
        println!("== run {} ==", run.name);
        let mut groups: BTreeMap<&str, Totals> = BTreeMap::new();
        for file in &files {
            let name = file.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
            let group = if args.tuned.is_empty() {
                "all"
            } else if args.tuned.iter().any(|t| t == name) {
                "tuned"
            } else {
                "not tuned"
            };
            let (turns, checks) = load_session(file)?;
            let replayed = replay(&turns, run, config, map).await?;
            let Some(last) = replayed.folds.last() else {
                println!("{name}: no fold");
                continue;
            };
            let totals = groups.entry(group).or_default();
            count_folds(
                name,
                &replayed,
                &turns,
                &checks,
                budget,
                args.verbose,
                totals,
            );
            let m = measure(last, &turns, &checks);
            if let Some(dir) = &args.dump {
                let path = dir.join(format!("{name}.{}.md", run.name));
                std::fs::write(&path, &last.text)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            totals.dois_lost += m.dois_lost.len();
            totals.duplicates += m.duplicates;
            totals.facts.merge(&m.facts);
            println!(
                "{name} [{}] ({group}) last fold: {} | failures {}",
                run.name,
                fold_line(&m),
                replayed.failures.len()
            );
            for f in &replayed.failures {
                println!("    failure: {f}");
            }
            if args.verbose {
                for miss in &m.missing {
                    println!("    missing {miss}");
                }
            }
        }
        for (group, totals) in &groups {
            println!(
                "OVERALL [{}] ({group}) last fold: {}",
                run.name,
                totals.render(budget)
            );
            ok &= totals.passes();
        }
    }
    Ok(ok)
}

async fn run_canary(config: &SummarizerConfig, map: &Map<String, Value>) -> Result<bool, String> {
    let turns = canary_session();
    let run = Run {
        name: "canary",
        every: Some(5),
    };
    let replayed = replay(&turns, run, config, map).await?;
    println!(
        "== canary: {} turns, one planted fact per turn ({}), fold every 5 turns: {} folds ==",
        turns.len(),
        CANARY_TYPES.join(", "),
        replayed.folds.len()
    );
    let mut ok = true;
    for after in [1usize, 3, 5, 10] {
        let Some(fold) = replayed.folds.get(after - 1) else {
            println!("after {after} folds: not reached");
            ok = false;
            continue;
        };
        let m = measure(fold, &turns, &Corrections::default());
        println!(
            "after {after} folds (turn {}, {} turns folded, {} tokens): {}",
            fold.after_turn,
            fold.covered.len(),
            m.tokens,
            m.facts.render()
        );
        for miss in m.missing.iter().take(5) {
            println!("    missing {miss}");
        }
        if after == 10 {
            ok &= m.facts.0.values().all(|(k, t)| *k * 100 >= *t * 95);
        }
    }
    for f in &replayed.failures {
        println!("    failure: {f}");
    }
    Ok(ok)
}

fn run(args: &[String]) -> Result<bool, String> {
    let args = parse_args(args)?;
    let map = settings_file(args.config.as_deref())?;
    let mut config = SummarizerConfig::from_map(&map).map_err(|e| e.to_string())?;
    config.adapter = args.adapter;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        if args.canary {
            run_canary(&config, &map).await
        } else {
            run_sessions(&args, &config, &map).await
        }
    })
}

/// Entry point of `cargo xtask eval-summary`.
pub(crate) fn eval_summary(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("eval-summary: below the issue's bar (see the figures above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("eval-summary: {e}");
            ExitCode::from(2)
        }
    }
}
