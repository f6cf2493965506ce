//! The embedding model's features: similarities of meaning between the latest turn and the
//! earlier ones, beside the lexical model's features. The similarities are pure arithmetic
//! over unit vectors: no cue phrase, no rule.
//!
//! | feature | meaning |
//! | --- | --- |
//! | `sim_prev_query` | cosine of the query and the previous query |
//! | `sim_prev_turn` | cosine of the query and the previous turn (query + reply) |
//! | `sim_prev_reply` | cosine of the query and the previous reply |
//! | `sim_unit` | cosine of the query and the centroid of the last [`UNIT_TURNS`] turns (the current unit) |
//! | `tail_sim_unit` | the same for the query's last sentence (a query that closes the old unit and then asks something new) |
//! | `tail_gap` | `sim_unit − tail_sim_unit`, floored at 0: the query's request moves away from what its opening still talks about |
//! | `return_gain` | best cosine of the query with a turn older than the unit, minus `sim_unit`, floored at 0 (a return to an earlier unit) |
//! | `reply_sim_unit` | cosine of the latest reply and the centroid of the unit's replies |
//! | `reply_sim_prev_query` | cosine of the latest reply and the previous query |
//! | `prev_shift` | 1 − cosine of the previous query and the turns before it: the previous turn itself changed the subject, so this one follows it |
//! | `prev_recap` | cosine of the previous reply and the turns before it: the previous turn looked back over the unit (a recap, a comparison), so the unit may be done |
//! | `prev_table` | the previous reply holds a Markdown table (structure: a deliverable that gathers the unit) |
//! | `sent_prev_reply` | best cosine of the query with one sentence of the previous reply: the query picks up something the assistant just said (a drill-down that brings new words still names one of its points) |
//! | `tail_sent_prev_reply` | the same for the query's last sentence |
//! | `reply_sent_prev_reply` | best cosine of the latest reply with one sentence of the previous reply |
//! | `sent_unit` | best cosine of the query with one sentence of any reply of the unit |
//! | the lexical model's fitted features but `research_context` | [`crate::offline`] (novelty shares, a question, query length, the cue lists that occur in TIAGE, …) |
//!
//! Each of these appears twice: in the shared block (`all.*`, every state) and in the
//! research block (`research.*`, the same values in a research context, zero outside one),
//! then `research_context`. A research context's weight of a feature is the shared weight plus
//! the research block's: TIAGE's thousands of chit-chat shifts fit the shared weights, the
//! labelled research sessions (few, long findings summaries, usually just one earlier turn
//! within the 500-token budget) only how research differs, and the fit's penalty on the
//! research block keeps that difference small unless the sessions need it.

use crate::offline::{FITTED_FEATURES as LEXICAL_FEATURES, Features as Lexical};

/// How many of the latest earlier turns make up the current unit.
pub const UNIT_TURNS: usize = 3;

/// The vectors of one turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnVectors {
    /// The user query.
    pub query: Vec<f32>,
    /// The assistant reply (its opening).
    pub reply: Vec<f32>,
    /// The reply's first [`MAX_SENTENCES`] sentences ([`sentences`]), each embedded on its
    /// own; empty when not read (turns older than the unit; the features never read the
    /// latest turn's, which the model embeds for the next probe).
    pub reply_sentences: Vec<Vec<f32>>,
}

impl TurnVectors {
    /// Query and reply together: their normalised sum.
    fn whole(&self) -> Vec<f32> {
        centroid([self.query.as_slice(), self.reply.as_slice()])
    }

    /// The best cosine of `v` with one of the reply's sentences (with the reply itself when
    /// it has none).
    fn best_sentence(&self, v: &[f32]) -> f64 {
        if self.reply_sentences.is_empty() {
            return cosine(v, &self.reply);
        }
        self.reply_sentences
            .iter()
            .map(|s| cosine(v, s))
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

/// True when `text` holds a Markdown table: two or more lines that start and end with `|`.
pub fn has_table(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .filter(|l| l.len() > 2 && l.starts_with('|') && l.ends_with('|'))
        .count()
        >= 2
}

/// The vectors of a decision state's turns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StateVectors {
    /// Every earlier turn the model knows of, oldest first: the core's
    /// `DecisionState::older` (the uncovered turns before the 500-token window), then the
    /// window's earlier turns. Reading past the window keeps a return to a topic the window no
    /// longer holds visible (docs/DECISION-QUALITY.md, head v7).
    pub earlier: Vec<TurnVectors>,
    /// The latest turn.
    pub latest: TurnVectors,
    /// The latest query's last sentence (the query itself when it has one sentence).
    pub latest_tail: Vec<f32>,
    /// The previous reply holds a Markdown table.
    pub previous_table: bool,
}

/// Number of similarity features (the first block of [`BASE_NAMES`]).
pub const N_SIMILARITIES: usize = 16;
/// Number of features of one context block: the similarities and the lexical model's fitted
/// features but its last (`research_context`, which chooses the block).
pub const N_BASE: usize = N_SIMILARITIES + LEXICAL_FEATURES.len() - 1;
/// Number of fitted features: a shared block, a research block, and `research_context`.
pub const N_FEATURES: usize = 2 * N_BASE + 1;

/// The similarities of meaning, in order.
pub const SIMILARITY_NAMES: [&str; N_SIMILARITIES] = [
    "sim_prev_query",
    "sim_prev_turn",
    "sim_prev_reply",
    "sim_unit",
    "tail_sim_unit",
    "tail_gap",
    "return_gain",
    "reply_sim_unit",
    "reply_sim_prev_query",
    "prev_shift",
    "prev_recap",
    "prev_table",
    "sent_prev_reply",
    "tail_sent_prev_reply",
    "reply_sent_prev_reply",
    "sent_unit",
];

/// Names of the fitted features, in weight order: `all.<name>` for the shared block (every
/// state), `research.<name>` for the research block (0 outside a research context), then
/// `research_context`.
pub fn feature_names() -> Vec<String> {
    let base: Vec<&str> = SIMILARITY_NAMES
        .iter()
        .chain(&LEXICAL_FEATURES[..LEXICAL_FEATURES.len() - 1])
        .copied()
        .collect();
    ["all", "research"]
        .iter()
        .flat_map(|block| base.iter().map(move |n| format!("{block}.{n}")))
        .chain(std::iter::once("research_context".to_owned()))
        .collect()
}

/// Cosine of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The normalised sum of `vectors` (empty when there is none).
pub fn centroid<'a>(vectors: impl IntoIterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut sum: Vec<f32> = Vec::new();
    for v in vectors {
        if sum.is_empty() {
            sum = vec![0.0; v.len()];
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += x;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|x| *x /= norm);
    }
    sum
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// The similarities of meaning of a state, in [`SIMILARITY_NAMES`] order.
pub fn similarities(v: &StateVectors) -> [f64; N_SIMILARITIES] {
    let q = &v.latest.query;
    let known = &v.earlier;
    let n = known.len();
    let unit = &known[n.saturating_sub(UNIT_TURNS)..];
    let older = &known[..n.saturating_sub(UNIT_TURNS)];
    let wholes: Vec<Vec<f32>> = unit.iter().map(TurnVectors::whole).collect();
    let unit_centroid = centroid(wholes.iter().map(Vec::as_slice));
    let unit_replies = centroid(unit.iter().map(|t| t.reply.as_slice()));
    let sentences = match known.last() {
        Some(prev) => [
            prev.best_sentence(q),
            prev.best_sentence(&v.latest_tail),
            prev.best_sentence(&v.latest.reply),
            unit.iter()
                .map(|t| t.best_sentence(q))
                .fold(f64::NEG_INFINITY, f64::max),
        ],
        None => [0.0; 4],
    };
    let (previous, prev_shift, prev_recap) = match known.split_last() {
        Some((prev, before)) => {
            let before = &before[before.len().saturating_sub(UNIT_TURNS)..];
            let wholes: Vec<Vec<f32>> = before.iter().map(TurnVectors::whole).collect();
            let before_centroid = centroid(wholes.iter().map(Vec::as_slice));
            let (shift, recap) = if before.is_empty() {
                (0.0, 0.0)
            } else {
                (
                    1.0 - cosine(&prev.query, &before_centroid),
                    cosine(&prev.reply, &before_centroid),
                )
            };
            let sims = [
                cosine(q, &prev.query),
                cosine(q, &prev.whole()),
                cosine(q, &prev.reply),
                cosine(&v.latest.reply, &prev.query),
            ];
            (sims, shift, recap)
        }
        None => ([0.0; 4], 0.0, 0.0),
    };
    let sim_unit = cosine(q, &unit_centroid);
    let tail_sim_unit = cosine(&v.latest_tail, &unit_centroid);
    let best_older = older
        .iter()
        .map(|t| cosine(q, &t.whole()))
        .fold(f64::NEG_INFINITY, f64::max);
    let return_gain = if older.is_empty() {
        0.0
    } else {
        (best_older - sim_unit).max(0.0)
    };
    [
        previous[0],
        previous[1],
        previous[2],
        sim_unit,
        tail_sim_unit,
        (sim_unit - tail_sim_unit).max(0.0),
        return_gain,
        cosine(&v.latest.reply, &unit_replies),
        previous[3],
        prev_shift,
        prev_recap,
        flag(v.previous_table),
        sentences[0],
        sentences[1],
        sentences[2],
        sentences[3],
    ]
}

/// The fitted features of a state from its vectors and its lexical features: the
/// similarities and the lexical features in the shared block, again in the research block
/// when the state is a research context (else 0 there), then `research_context`. Research
/// sessions stay within one field and pivot about once in six turns, chit-chat wanders: the
/// research block lets the sessions move their weights away from the shared ones.
pub fn features(v: &StateVectors, lexical: &Lexical) -> [f64; N_FEATURES] {
    let research = lexical.research_context;
    let lex = lexical.fitted();
    let mut x = [0.0; N_FEATURES];
    let values = similarities(v)
        .into_iter()
        .chain(lex[..lex.len() - 1].iter().copied());
    for (i, value) in values.enumerate() {
        x[i] = value;
        if research {
            x[N_BASE + i] = value;
        }
    }
    x[N_FEATURES - 1] = flag(research);
    x
}

/// How many of a reply's sentences are embedded one by one.
pub const MAX_SENTENCES: usize = 8;

/// The sentences of `text`, trimmed: cut after `.`, `?`, `!`, `:` or a line break followed
/// by white space, and with `every_line` at every line break (a list item, a table row).
fn split_sentences(text: &str, every_line: bool) -> Vec<&str> {
    let trimmed = text.trim();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in trimmed.char_indices() {
        let end = i + c.len_utf8();
        let cut = (every_line && c == '\n')
            || (matches!(c, '.' | '?' | '!' | ':' | '\n')
                && trimmed[end..]
                    .chars()
                    .next()
                    .is_some_and(char::is_whitespace));
        if cut {
            out.push(trimmed[start..end].trim());
            start = end;
        }
    }
    out.push(trimmed[start..].trim());
    out
}

fn is_sentence(s: &str) -> bool {
    s.split_whitespace().count() >= 3
}

/// The last sentence of `query` with at least three words, when the query has more than
/// one sentence; `None` otherwise.
pub fn last_sentence(query: &str) -> Option<&str> {
    let all = split_sentences(query, false);
    if all.len() < 2 {
        return None;
    }
    // From the last sentence backwards, the first one long enough to be a sentence.
    all.into_iter().rev().find(|s| is_sentence(s))
}

/// The first [`MAX_SENTENCES`] sentences of `reply` with at least three words each, when
/// it has more than one; empty otherwise (the reply's own vector stands for it).
pub fn sentences(reply: &str) -> Vec<&str> {
    let all: Vec<&str> = split_sentences(reply, true)
        .into_iter()
        .filter(|s| is_sentence(s))
        .take(MAX_SENTENCES)
        .collect();
    if all.len() < 2 { Vec::new() } else { all }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        centroid([v])
    }

    /// Three orthogonal unit vectors.
    fn axes() -> [Vec<f32>; 3] {
        [
            unit(&[1.0, 0.0, 0.0]),
            unit(&[0.0, 1.0, 0.0]),
            unit(&[0.0, 0.0, 1.0]),
        ]
    }

    /// A turn whose query and reply are both `v`.
    fn turn(v: &[f32]) -> TurnVectors {
        TurnVectors {
            query: v.to_vec(),
            reply: v.to_vec(),
            reply_sentences: Vec::new(),
        }
    }

    #[test]
    fn one_name_per_feature_in_two_blocks() {
        let names = feature_names();
        assert_eq!(names.len(), N_FEATURES);
        assert_eq!(names[0], "all.sim_prev_query");
        assert_eq!(names[N_BASE], "research.sim_prev_query");
        assert_eq!(names[N_FEATURES - 1], "research_context");
    }

    #[test]
    fn cosine_and_centroid_by_hand() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - 0.5f64.sqrt()).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        let c = centroid([[1.0f32, 0.0].as_slice(), [0.0, 1.0].as_slice()]);
        assert!((c[0] - 0.5f32.sqrt()).abs() < 1e-6 && (c[1] - c[0]).abs() < 1e-6);
        assert!(centroid(std::iter::empty::<&[f32]>()).is_empty());
    }

    #[test]
    fn the_last_sentence_is_the_request_after_a_wrap_up() {
        assert_eq!(
            last_sentence(
                "Good, that closes the first part. Different paper now: how do kelp forests store carbon?"
            ),
            Some("how do kelp forests store carbon?")
        );
        assert_eq!(last_sentence("How do kelp forests store carbon?"), None);
        // A short trailing fragment is not a sentence: the one before it is taken.
        assert_eq!(
            last_sentence("Okay. Tell me about kelp carbon storage. Thanks!"),
            Some("Tell me about kelp carbon storage.")
        );
    }

    #[test]
    fn a_reply_is_read_sentence_by_sentence_and_line_by_line() {
        let reply = "Kelp stores carbon in two ways.\n- Blades export detritus to deep water\n| site | rate |\nOk.";
        assert_eq!(
            sentences(reply),
            vec![
                "Kelp stores carbon in two ways.",
                "- Blades export detritus to deep water",
                "| site | rate |",
            ]
        );
        assert!(sentences("Kelp stores carbon in two ways.").is_empty());
        let long = "One two three. ".repeat(MAX_SENTENCES + 3);
        assert_eq!(sentences(&long).len(), MAX_SENTENCES);
    }

    /// A query that picks up one sentence of the previous reply scores that sentence's
    /// cosine, above its cosine with the whole reply; without sentences the whole reply
    /// stands for them.
    #[test]
    fn the_best_sentence_of_the_previous_reply_counts() {
        let [a, b, c] = axes();
        let at = |name: &str| SIMILARITY_NAMES.iter().position(|n| *n == name).unwrap();
        let whole = centroid([a.as_slice(), b.as_slice()]);
        let previous = TurnVectors {
            query: a.clone(),
            reply: whole.clone(),
            reply_sentences: vec![a.clone(), b.clone()],
        };
        let state = StateVectors {
            earlier: vec![previous.clone()],
            latest: TurnVectors {
                query: b.clone(),
                reply: c.clone(),
                reply_sentences: Vec::new(),
            },
            latest_tail: b.clone(),
            previous_table: false,
        };
        let sims = similarities(&state);
        assert!((sims[at("sent_prev_reply")] - 1.0).abs() < 1e-6, "{sims:?}");
        assert!((sims[at("sim_prev_reply")] - 0.5f64.sqrt()).abs() < 1e-6);
        assert!((sims[at("tail_sent_prev_reply")] - 1.0).abs() < 1e-6);
        assert!(sims[at("reply_sent_prev_reply")].abs() < 1e-6);
        assert!((sims[at("sent_unit")] - 1.0).abs() < 1e-6);
        let unsplit = StateVectors {
            earlier: vec![TurnVectors {
                reply_sentences: Vec::new(),
                ..previous
            }],
            ..state
        };
        let sims = similarities(&unsplit);
        assert!((sims[at("sent_prev_reply")] - 0.5f64.sqrt()).abs() < 1e-6);
    }

    proptest::proptest! {
        /// Every sentence is a piece of the reply with three words or more, in order, at
        /// most [`MAX_SENTENCES`] of them, and never just one.
        #[test]
        fn sentences_are_ordered_pieces_of_the_reply(reply in "([a-z]{1,6}[ .?!:\n]{1,2}){0,40}") {
            let found = sentences(&reply);
            proptest::prop_assert!(found.len() <= MAX_SENTENCES && found.len() != 1);
            let mut from = 0;
            for s in found {
                proptest::prop_assert!(s.split_whitespace().count() >= 3, "{s:?}");
                let at = reply[from..].find(s);
                proptest::prop_assert!(at.is_some(), "{s:?} not after byte {from} of {reply:?}");
                from += at.unwrap_or(0) + s.len();
            }
        }
    }

    /// A query pointing away from the unit scores lower similarities than one that stays,
    /// and a return to an older turn shows as a gain.
    #[test]
    fn similarities_follow_the_vectors() {
        let [a, b, c] = axes();
        let earlier = vec![turn(&c), turn(&a), turn(&a), turn(&a)];
        let state = |q: &Vec<f32>| StateVectors {
            earlier: earlier.clone(),
            latest: turn(q),
            latest_tail: q.clone(),
            previous_table: false,
        };
        let lexical = Lexical::default();
        let stay = features(&state(&a), &lexical);
        let away = features(&state(&b), &lexical);
        let back = features(&state(&c), &lexical);
        assert!((stay[3] - 1.0).abs() < 1e-6 && away[3].abs() < 1e-6);
        assert!(back[6] > 0.99 && stay[6] == 0.0, "{back:?}");
        // Outside a research context the research block is zero; in one it repeats the
        // shared block.
        assert!(stay[N_BASE..N_FEATURES].iter().all(|x| *x == 0.0));
        let research = Lexical {
            research_context: true,
            ..Lexical::default()
        };
        let stay_research = features(&state(&a), &research);
        assert_eq!(stay_research[..N_BASE], stay_research[N_BASE..2 * N_BASE]);
        assert_eq!(stay_research[..N_BASE], stay[..N_BASE]);
        assert_eq!(stay_research[N_FEATURES - 1], 1.0);
    }

    /// With earlier turns beyond the window (`DecisionState::older`), the unit and the older
    /// turns come from them: a return to a turn outside the window shows.
    #[test]
    fn turns_beyond_the_window_make_a_return_visible() {
        let [a, b, c] = axes();
        let at = |name: &str| SIMILARITY_NAMES.iter().position(|n| *n == name).unwrap();
        let window = StateVectors {
            earlier: vec![turn(&b)],
            latest: turn(&c),
            latest_tail: c.clone(),
            previous_table: false,
        };
        let remembered = StateVectors {
            earlier: vec![turn(&c), turn(&a), turn(&b), turn(&b), turn(&b)],
            ..window.clone()
        };
        assert_eq!(similarities(&window)[at("return_gain")], 0.0);
        assert!(similarities(&remembered)[at("return_gain")] > 0.99);
    }
}
