//! Text handling for the offline model: serial-Markdown pairs, word tokens, content words.

use std::collections::HashSet;

use compaction_core::{DecisionState, StateTurn};

/// One `**User**: …` / `**Assistant**: …` pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pair {
    /// The user's message.
    pub user: String,
    /// The assistant's response.
    pub assistant: String,
}

const USER: &str = "**User**:";
const ASSISTANT: &str = "**Assistant**:";

/// Splits serial Markdown into pairs. A line starting with `**User**:` opens a pair and one
/// starting with `**Assistant**:` its response; other lines continue the current message.
/// Text with no markers at all is one user message.
pub fn pairs(text: &str) -> Vec<Pair> {
    enum Side {
        User,
        Assistant,
    }
    let mut out: Vec<Pair> = Vec::new();
    let mut side = Side::User;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(USER) {
            out.push(Pair {
                user: rest.trim().to_owned(),
                assistant: String::new(),
            });
            side = Side::User;
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix(ASSISTANT) {
            match out.last_mut() {
                Some(p) if p.assistant.is_empty() => p.assistant = rest.trim().to_owned(),
                _ => out.push(Pair {
                    user: String::new(),
                    assistant: rest.trim().to_owned(),
                }),
            }
            side = Side::Assistant;
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push(Pair::default());
        }
        if let Some(p) = out.last_mut() {
            let target = match side {
                Side::User => &mut p.user,
                Side::Assistant => &mut p.assistant,
            };
            if !target.is_empty() {
                target.push(' ');
            }
            target.push_str(trimmed);
        }
    }
    out
}

/// Function words and chit-chat fillers that carry no topic, sorted.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "don't",
    "dont",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "get",
    "go",
    "going",
    "good",
    "got",
    "great",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "i'm",
    "if",
    "im",
    "in",
    "into",
    "is",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "like",
    "lol",
    "lot",
    "lots",
    "love",
    "many",
    "me",
    "more",
    "most",
    "much",
    "my",
    "myself",
    "nice",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "oh",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "really",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "that's",
    "thats",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "well",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "yeah",
    "yes",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

static STOPWORD_SET: std::sync::LazyLock<WordSet<'static>> =
    std::sync::LazyLock::new(|| STOPWORDS.iter().copied().collect());

/// True for a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORD_SET.contains(word)
}

/// The text lower-cased, with typographic apostrophes made plain: the form [`words`] reads.
pub fn normalize(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut out = text.to_lowercase();
    if out.contains('’') {
        out = out.replace('’', "'");
    }
    out
}

/// Word tokens of normalized text: runs of letters, digits and inner apostrophes.
pub fn words(normalized: &str) -> impl Iterator<Item = &str> {
    normalized
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
}

/// A crude suffix stem so that `plating`/`plated`/`plates` meet: strips `ing`, `ed`, `es` or
/// `s` when at least three characters remain.
pub fn stem(word: &str) -> &str {
    for suffix in ["ing", "ed", "es", "s"] {
        if word.len() > suffix.len() + 2 && word.ends_with(suffix) {
            let cut = word.len() - suffix.len();
            if word.is_char_boundary(cut) {
                return &word[..cut];
            }
        }
    }
    word
}

/// The stemmed content words of normalized text (no stopwords, no one-character words).
pub fn content_words(normalized: &str) -> Vec<&str> {
    words(normalized)
        .filter(|w| w.chars().nth(1).is_some() && !is_stopword(w))
        .map(stem)
        .collect()
}

/// A small, fast, deterministic string hasher (FNV-1a) for the word sets: SipHash's
/// protection against hash flooding buys nothing for a few hundred words of one request.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A set of words hashed with [`Fnv`].
pub type WordSet<'a> = HashSet<&'a str, std::hash::BuildHasherDefault<Fnv>>;

/// The share of `words` absent from `reference`; 0.5 when `words` is empty (no evidence).
pub fn novelty(words: &[&str], reference: &WordSet<'_>) -> f64 {
    if words.is_empty() {
        return 0.5;
    }
    let absent = words.iter().filter(|w| !reference.contains(*w)).count();
    absent as f64 / words.len() as f64
}

/// Normalized text as ` w1 w2 … ` (single spaces, padded) so cue phrases match on word bounds.
pub fn padded(normalized: &str) -> String {
    let mut out = String::with_capacity(normalized.len() + 2);
    out.push(' ');
    for w in words(normalized) {
        out.push_str(w);
        out.push(' ');
    }
    out
}

/// A decision state from serial Markdown alone (a case file's text, a hand-written state):
/// the turns are read from the `**User**:` / `**Assistant**:` markers.
pub fn state_from_markdown(earlier_discussion: &str, latest_turn: &str) -> DecisionState {
    let mut turns: Vec<StateTurn> = pairs(earlier_discussion)
        .into_iter()
        .chain(pairs(latest_turn).into_iter().take(1))
        .map(|p| StateTurn {
            user: p.user,
            assistant: p.assistant,
            ..StateTurn::default()
        })
        .collect();
    let n = turns.len();
    for (i, t) in turns.iter_mut().enumerate() {
        t.age = n - 1 - i;
    }
    DecisionState {
        earlier_discussion: earlier_discussion.to_owned(),
        latest_turn: latest_turn.to_owned(),
        turns,
        older: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn pairs_follow_the_markers_and_keep_multi_line_messages() {
        let p = pairs("**User**: a?\n**Assistant**: b\nmore b\n\n**User**: c\n**Assistant**: d");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].assistant, "b more b");
        assert_eq!(p[1].user, "c");
        assert_eq!(pairs("no markers here")[0].user, "no markers here");
        assert!(pairs("").is_empty());
    }

    #[test]
    fn content_words_drop_stopwords_and_stem() {
        let text = normalize("Do the plated anodes suffer from plating?");
        assert_eq!(content_words(&text), ["plat", "anod", "suffer", "plat"]);
        assert_eq!(
            padded(&normalize("No, I MEANT the SEI.")),
            " no i meant the sei "
        );
        assert_eq!(padded(&normalize("It’s Kendall’s")), " it's kendall's ");
    }
}
