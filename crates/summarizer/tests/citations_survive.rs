//! Properties of the citation ledger across rolling consolidation, checked against the
//! citations the generator wrote (never against the extractor under test alone).

mod common;

use std::collections::HashSet;
use std::sync::LazyLock;

use common::{Conversation, ResearchTurn};
use compaction_core::{
    AdapterError, CharsPerToken, ModelInfo, Summarizer, Summary, SummaryRequest, TokenEstimator,
};
use proptest::prelude::*;
use regex::Regex;
use summarizer::{CitationLedger, OfflineSummarizer, WithCitationLedger};

const SURNAMES: [&str; 12] = [
    "Obrovac",
    "Chevrier",
    "Chan",
    "Liu",
    "Schmidt",
    "Darling",
    "Skyllas-Kazacos",
    "Müller",
    "O'Brien",
    "Nakamura",
    "García",
    "Etacheri",
];
const UNITS: [&str; 8] = ["mAh/g", "%", "$/kWh", "cycles", "nm", "Wh/kg", "h", "°C"];

/// One citation the generator wrote, and how to tell it survived.
#[derive(Debug, Clone, PartialEq)]
enum Written {
    Doi(String),
    Arxiv {
        id: String,
        version: Option<u8>,
    },
    AuthorYear {
        surname: usize,
        year: u16,
    },
    Bib {
        surname: usize,
        year: u16,
        title: String,
        doi: String,
        marker: u8,
    },
}

impl Written {
    /// The text as it appears in a message.
    fn render(&self) -> String {
        match self {
            Written::Doi(doi) => format!("doi:{doi}"),
            Written::Arxiv { id, version } => match version {
                Some(v) => format!("arXiv:{id}v{v}"),
                None => format!("arXiv:{id}"),
            },
            Written::AuthorYear { surname, year } => {
                // One style per surname, so one key always has one spelling.
                if surname % 2 == 0 {
                    format!("{} et al. ({year})", SURNAMES[*surname])
                } else {
                    format!(
                        "({} & {}, {year})",
                        SURNAMES[*surname],
                        SURNAMES[(surname + 1) % SURNAMES.len()]
                    )
                }
            }
            Written::Bib { .. } => self.bib_entry(),
        }
    }

    fn bib_entry(&self) -> String {
        match self {
            Written::Bib {
                surname,
                year,
                title,
                doi,
                ..
            } => format!(
                "{}, A. et al. {title}. J. Test. Res. 12, 345 ({year}). https://doi.org/{doi}",
                SURNAMES[*surname]
            ),
            _ => String::new(),
        }
    }

    /// True when `summary` still carries this citation.
    fn survives_in(&self, summary: &str) -> bool {
        match self {
            Written::Doi(doi) => summary.to_lowercase().contains(&doi.to_lowercase()),
            Written::Arxiv { id, .. } => summary.contains(id.as_str()),
            Written::AuthorYear { surname, year } => {
                let text = self.render();
                let text = text.trim_start_matches('(').trim_end_matches(')');
                // Kept as written, or by a bibliography entry naming its authors and year.
                summary.contains(text)
                    || summary.lines().any(|line| {
                        let mut words = vec![SURNAMES[*surname].to_owned(), year.to_string()];
                        if surname % 2 == 1 {
                            words.push(SURNAMES[(surname + 1) % SURNAMES.len()].to_owned());
                        }
                        words.iter().all(|w| has_word(line, w))
                    })
            }
            // Kept as written, or by its identifier (a compacted bibliography entry keeps the
            // DOI it was made from; see `CitationLedger::missing_from`).
            Written::Bib { doi, .. } => {
                summary.contains(&self.bib_entry())
                    || summary.to_lowercase().contains(&doi.to_lowercase())
            }
        }
    }
}

fn has_word(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(i, _)| {
        !line[..i]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
            && !line[i + word.len()..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric)
    })
}

fn doi() -> impl Strategy<Value = String> {
    "10\\.[0-9]{4,5}/[a-zA-Z][a-zA-Z0-9]{2,8}(\\.[a-z0-9]{1,4})?"
}

fn written() -> impl Strategy<Value = Written> {
    prop_oneof![
        doi().prop_map(Written::Doi),
        (
            "[0-9]{2}(0[1-9]|1[0-2])\\.[0-9]{5}",
            proptest::option::of(1u8..9)
        )
            .prop_map(|(id, version)| Written::Arxiv { id, version }),
        (0..SURNAMES.len(), 1990u16..2026)
            .prop_map(|(surname, year)| Written::AuthorYear { surname, year }),
        (
            0..SURNAMES.len(),
            1990u16..2026,
            "[A-Z][a-z]{3,9}( [a-z]{3,9}){1,4}",
            doi(),
            0u8..4
        )
            .prop_map(|(surname, year, title, doi, marker)| Written::Bib {
                surname,
                year,
                title,
                doi,
                marker,
            }),
    ]
}

/// A research turn citing some of the pool, with numbers and a `# Cited Sources` list.
#[derive(Debug, Clone)]
struct TurnSpec {
    user_cites: Vec<usize>,
    answer_cites: Vec<usize>,
    tool_cites: Vec<usize>,
    number: u32,
    unit: usize,
}

fn turn_spec() -> impl Strategy<Value = TurnSpec> {
    (
        prop::collection::vec(0usize..64, 0..2),
        prop::collection::vec(0usize..64, 0..3),
        prop::collection::vec(0usize..64, 0..6),
        1u32..5000,
        0..UNITS.len(),
    )
        .prop_map(
            |(user_cites, answer_cites, tool_cites, number, unit)| TurnSpec {
                user_cites,
                answer_cites,
                tool_cites,
                number,
                unit,
            },
        )
}

/// Renders a turn; returns it with the citations it carries.
fn build_turn(spec: &TurnSpec, pool: &[Written]) -> (ResearchTurn, Vec<Written>) {
    let pick = |i: &usize| pool[i % pool.len()].clone();
    let mut cited = Vec::new();
    let inline = |cites: &[usize], cited: &mut Vec<Written>| -> String {
        cites
            .iter()
            .map(pick)
            .filter(|w| !matches!(w, Written::Bib { .. }))
            .map(|w| {
                let text = format!("This is supported by {}.", w.render());
                cited.push(w);
                text
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let user = format!(
        "What did the study find about anodes? {}",
        inline(&spec.user_cites, &mut cited)
    );
    let answer = format!(
        "The cells reached {} {} in the main experiment. {}",
        spec.number,
        UNITS[spec.unit],
        inline(&spec.answer_cites, &mut cited)
    );
    let mut tool_outputs = Vec::new();
    if !spec.tool_cites.is_empty() {
        let body = inline(&spec.tool_cites, &mut cited);
        let mut entries = Vec::new();
        for (n, w) in spec.tool_cites.iter().map(pick).enumerate() {
            if let Written::Bib { marker, .. } = &w {
                let marker = match marker {
                    0 => "- ".to_owned(),
                    1 => format!("{}. ", n + 1),
                    2 => format!("[{}] ", n + 1),
                    _ => "* ".to_owned(),
                };
                entries.push(format!("{marker}{}", w.bib_entry()));
                cited.push(w);
            }
        }
        tool_outputs.push(format!(
            "## Synthesis\n\nWe measured {} {} across 3 cells. {body}\n\n# Cited Sources\n{}",
            spec.number + 1,
            UNITS[(spec.unit + 1) % UNITS.len()],
            entries.join("\n")
        ));
    }
    (
        ResearchTurn {
            user,
            tool_outputs,
            answer,
        },
        cited,
    )
}

/// What the dropping model may cut out of a line.
static CITATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:doi:|https://doi\.org/)?10\.\d{4,9}/\S+|arXiv:\S+|\(?\p{Lu}[\p{L}'\-]+ (?:et al\.|& \p{Lu}[\p{L}'\-]+),? \(?\d{4}\)?",
    )
    .expect("valid")
});

/// A model that copies the prompt but drops lines and citations at random (seeded).
#[derive(Debug)]
struct DroppingModel {
    seed: u64,
}

impl DroppingModel {
    fn next(state: &mut u64) -> u64 {
        // xorshift64*: deterministic per seed.
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[async_trait::async_trait]
impl Summarizer for DroppingModel {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "in-memory", "dropping-model")
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let mut state = self.seed | 1;
        state ^= request.prompt.len() as u64;
        let citation = &*CITATION;
        let mut out = String::from("## Comprehensive Conversation Summary\nConsolidated.\n");
        for line in request.prompt.lines() {
            if Self::next(&mut state).is_multiple_of(3) {
                continue; // drop the whole line
            }
            let line = citation.replace_all(line, |caps: &regex::Captures<'_>| {
                if Self::next(&mut state).is_multiple_of(2) {
                    String::new()
                } else {
                    caps[0].to_owned()
                }
            });
            out.push_str(&line);
            out.push('\n');
        }
        Ok(Summary::new(out))
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Runs the rounds through `summarizer`; returns every summary and every citation written.
fn consolidate(
    summarizer: &dyn Summarizer,
    rounds: &[Vec<TurnSpec>],
    pool: &[Written],
) -> (Vec<(SummaryRequest, String)>, Vec<Written>) {
    let mut conversation = Conversation::new();
    let mut written = Vec::new();
    let mut outputs = Vec::new();
    for round in rounds {
        for spec in round {
            let (turn, cited) = build_turn(spec, pool);
            conversation.add(&turn);
            written.extend(cited);
        }
        let (request, plan) = conversation.request();
        let summary = block_on(summarizer.summarize(&request)).expect("summarizes");
        conversation.commit(&plan, &summary.text);
        outputs.push((request, summary.text));
    }
    (outputs, written)
}

fn rounds() -> impl Strategy<Value = Vec<Vec<TurnSpec>>> {
    prop::collection::vec(prop::collection::vec(turn_spec(), 1..4), 1..=6)
}

fn pool() -> impl Strategy<Value = Vec<Written>> {
    prop::collection::vec(written(), 1..24)
}

fn lost(summary: &str, written: &[Written]) -> Vec<String> {
    written
        .iter()
        .filter(|w| !w.survives_in(summary))
        .map(Written::render)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// After 1–6 rolling consolidations through the offline summarizer, every citation of
    /// every summarized turn is in the final summary, and every summary stays within its
    /// token budget whenever its sources section leaves room for the title.
    #[test]
    fn offline_rolling_consolidation_never_loses_a_citation(
        pool in pool(),
        rounds in rounds(),
        budget in 200usize..1000,
    ) {
        let offline = WithCitationLedger::new(OfflineSummarizer::new(budget));
        let (outputs, written) = consolidate(&offline, &rounds, &pool);
        for (request, text) in &outputs {
            let sources = text.split("\n\n## Cited Sources").nth(1).unwrap_or_default();
            let tokens = CharsPerToken.estimate(text);
            if CharsPerToken.estimate(sources) + 100 < budget {
                prop_assert!(tokens <= budget, "{tokens} tokens > {budget}\n{text}");
            }
            // The offline summary needs no help from the wrapper: nothing is carried forward.
            prop_assert!(!text.contains("## Sources carried forward"));
            prop_assert!(CitationLedger::from_request(request).missing_from(text).is_empty());
        }
        let final_summary = &outputs.last().expect("at least one round").1;
        let lost = lost(final_summary, &written);
        prop_assert!(lost.is_empty(), "lost {lost:?} in\n{final_summary}");
    }

    /// After 1–6 rolling consolidations through a model that drops lines and citations at
    /// random, the ledger has carried every citation into the final summary.
    #[test]
    fn a_citation_dropping_model_loses_nothing_behind_the_ledger(
        pool in pool(),
        rounds in rounds(),
        seed in any::<u64>(),
    ) {
        let model = WithCitationLedger::new(DroppingModel { seed });
        let (outputs, written) = consolidate(&model, &rounds, &pool);
        let final_summary = &outputs.last().expect("at least one round").1;
        let lost = lost(final_summary, &written);
        prop_assert!(lost.is_empty(), "lost {lost:?} in\n{final_summary}");
    }

    /// Reconciling is idempotent, keeps the model's text as its prefix, and lists each
    /// citation at most once.
    #[test]
    fn reconcile_is_idempotent_and_never_rewrites_the_model_text(
        pool in pool(),
        specs in prop::collection::vec(turn_spec(), 1..4),
        seed in any::<u64>(),
    ) {
        let rounds = vec![specs];
        let (outputs, _) = consolidate(&DroppingModel { seed }, &rounds, &pool);
        let (request, model_text) = &outputs[0];
        let ledger = CitationLedger::from_request(request);
        let once = ledger.reconcile(model_text);
        prop_assert!(once.starts_with(model_text.trim()));
        prop_assert_eq!(&ledger.reconcile(&once), &once);
        let keys: Vec<&str> = ledger.entries().iter().map(|c| c.key.as_str()).collect();
        let unique: HashSet<&str> = keys.iter().copied().collect();
        prop_assert_eq!(keys.len(), unique.len());
        let carried = once.strip_prefix(model_text.trim()).unwrap_or_default();
        let lines: Vec<&str> = carried.lines().filter(|l| l.starts_with("- ")).collect();
        let distinct: HashSet<&str> = lines.iter().copied().collect();
        prop_assert_eq!(lines.len(), distinct.len());
    }

    /// Every citation's display text, written on its own, is the same citation again: what
    /// the ledger appends is found by the next consolidation.
    #[test]
    fn a_citation_written_alone_is_found_again(pool in pool(), specs in prop::collection::vec(turn_spec(), 1..3)) {
        for spec in &specs {
            let (turn, _) = build_turn(spec, &pool);
            for text in std::iter::once(&turn.answer).chain(turn.tool_outputs.iter()) {
                let mut found = CitationLedger::new();
                found.add_text(text);
                for c in found.entries() {
                    let mut again = CitationLedger::new();
                    again.add_text(&format!("## Sources carried forward\n- {}", c.text));
                    prop_assert!(
                        again.entries().iter().any(|a| a.key == c.key),
                        "{:?} not found again",
                        c
                    );
                }
            }
        }
    }
}
