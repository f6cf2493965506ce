//! Deterministic citation extraction: what the ledger promises never to lose.
//!
//! A **citation** is one of
//! - a **source line**: a non-blank line inside a sources section, that is under a Markdown
//!   heading such as `# Cited Sources`, `## References`, `## Bibliography`, `## Sources` or
//!   the ledger's own `## Sources carried forward` (any level, case-insensitive, trailing
//!   colon allowed; a bare `Cited Sources:` or `**Cited Sources**` line counts too). The
//!   section ends at the next other heading or at a chat speaker line (`**User**:`);
//! - a **DOI** (`10.1021/acsenergylett.1c01234`), anywhere in the text;
//! - an **arXiv id** written with its prefix (`arXiv:2301.01234v2`, `arxiv.org/abs/…`);
//! - an **author-year reference** (`Smith et al. (2021)`, `(Smith & Jones, 2020)`,
//!   `Haddad & Rivas 2021`; `Chen and Wang 2019b` is *not* one: a year needs a comma or
//!   parentheses, or `et al.` or `&` before it;
//!   a "surname" without a lower-case letter is not one either: `450 MW, 2022` cites nobody).
//!
//! Each citation has a display `text` (as written) and a normalized `key`. Two citations with
//! the same key are the same citation (DOIs compare case-insensitively, arXiv ids without
//! their version, author-year references by surnames and year whatever the punctuation).
//! A text **keeps** a citation when extracting that text yields the citation's key, or, for
//! an author-year reference, when one of its source lines [names its authors and
//! year](Citation::mentioned_by). This is deliberately strict for source lines (the same
//! line, up to case, whitespace, a trailing period and list markers, inside a sources
//! section) so that a kept citation is found again by the next rolling consolidation.

use std::collections::{BTreeSet, HashSet};
use std::sync::LazyLock;

use regex::Regex;

/// What kind of citation a [`Citation`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CitationKind {
    /// A line of a sources section (`# Cited Sources`).
    SourceLine,
    /// A DOI.
    Doi,
    /// An arXiv identifier.
    Arxiv,
    /// An author-year reference.
    AuthorYear,
}

/// One citation: its display text as written and its normalized identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Citation {
    /// The kind.
    pub kind: CitationKind,
    /// The text as written (list markers stripped from source lines).
    pub text: String,
    /// The identity: equal keys mean the same citation.
    pub key: String,
}

impl Citation {
    /// True when this is an author-year reference and `line` (a bibliography entry) names
    /// each of its authors and its year as whole words: `Chan et al. (2008)` is mentioned by
    /// `Chan, C. K. et al. High-performance … (2008).` Listing the entry keeps the reference.
    pub fn mentioned_by(&self, line: &str) -> bool {
        if self.kind != CitationKind::AuthorYear {
            return false;
        }
        let Some((names, year)) = self
            .key
            .strip_prefix("ay:")
            .and_then(|k| k.rsplit_once(':'))
        else {
            return false;
        };
        let year = year.trim_end_matches(|c: char| c.is_ascii_lowercase());
        let line = line.to_lowercase();
        let names = names.trim_end_matches(" et al");
        names
            .split(" & ")
            .chain(std::iter::once(year))
            .all(|word| contains_word(&line, word))
    }
}

/// True when `needle` occurs in `haystack` with no letter or digit on either side.
fn contains_word(haystack: &str, needle: &str) -> bool {
    !needle.is_empty()
        && haystack.match_indices(needle).any(|(i, _)| {
            let before = haystack[..i].chars().next_back();
            let after = haystack[i + needle.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
}

/// Headings (lower-cased, without `#`, emphasis or a trailing colon) that open a sources
/// section.
const SOURCE_HEADINGS: [&str; 8] = [
    "cited sources",
    "sources",
    "sources carried forward",
    "references",
    "bibliography",
    "works cited",
    "sources cited",
    "citations",
];

/// Capitalized words that look like an author before a year but are not.
const NOT_AUTHORS: [&str; 40] = [
    "In",
    "On",
    "At",
    "By",
    "Since",
    "From",
    "Until",
    "During",
    "Before",
    "After",
    "Of",
    "The",
    "This",
    "That",
    "And",
    "Or",
    "For",
    "To",
    "As",
    "Table",
    "Figure",
    "Fig",
    "Section",
    "Eq",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Year",
    "Q1",
    "Q2",
    "Mid",
];

static DOI: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b10\.\d{4,9}/[^\s"<>\]\[{}|\\^`]+"#).expect("the pattern is valid")
});
static ARXIV: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\barxiv(?::\s?|\.org/(?:abs|pdf)/)((?:\d{4}\.\d{4,5})|(?:[a-z\-]+(?:\.[a-z]{2})?/\d{7}))(v\d+)?",
    )
    .expect("the pattern is valid")
});
static AUTHOR_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    // Surname, optional co-author or et al., then a year in parentheses or after a comma.
    Regex::new(
        r"\b(\p{Lu}[\p{L}'’\-]+)(\s+et\s+al\.?|\s+(?:and|&)\s+\p{Lu}[\p{L}'’\-]+)?(?:,\s*|\s+\(|\s+)((?:19|20)\d{2}[a-z]?)\b\)?",
    )
    .expect("the pattern is valid")
});
static LIST_MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:[-*+•]\s+|\d{1,3}[.)]\s+|\[\d{1,3}\]\s*)").expect("the pattern is valid")
});

/// The works `text` names by surname and year, cited or not (`Kowalski 2018` in a table's
/// label column, where a citation would need its brackets or comma): `surname:year`, lower
/// case. An acronym or a capitalised word of [`NOT_AUTHORS`] before a year names none.
pub(crate) fn named_works(text: &str) -> BTreeSet<String> {
    AUTHOR_YEAR
        .captures_iter(text)
        .filter_map(|c| {
            let (surname, year) = (c.get(1)?.as_str(), c.get(3)?.as_str());
            let acronym = !surname.chars().any(char::is_lowercase);
            (!acronym && !NOT_AUTHORS.contains(&surname))
                .then(|| format!("{}:{}", surname.to_lowercase(), &year[..4]))
        })
        .collect()
}

/// Every citation in `text`, in order of first appearance, deduplicated by key. Source lines
/// come in document order with the inline citations found along the way.
pub(crate) fn extract(text: &str) -> Vec<Citation> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    extract_into(text, &mut out, &mut seen);
    out
}

/// Appends the citations of `text` not yet in `seen` to `out`.
pub(crate) fn extract_into(text: &str, out: &mut Vec<Citation>, seen: &mut HashSet<String>) {
    let mut in_sources = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(heading) = heading_text(trimmed) {
            in_sources = is_source_heading(&heading);
            continue;
        }
        if is_speaker_line(trimmed) {
            in_sources = false;
        }
        if in_sources && is_entry(trimmed) {
            let entry = strip_markers(trimmed);
            let key = source_key(&entry);
            if !key.is_empty() && seen.insert(format!("line:{key}")) {
                out.push(Citation {
                    kind: CitationKind::SourceLine,
                    text: entry,
                    key: format!("line:{key}"),
                });
            }
        }
        for citation in inline(line) {
            if seen.insert(citation.key.clone()) {
                out.push(citation);
            }
        }
    }
}

/// The lines of `text` outside sources sections (and without their headings), in order.
pub(crate) fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_sources = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(heading) = heading_text(trimmed) {
            in_sources = is_source_heading(&heading);
            if in_sources {
                continue;
            }
        } else if is_speaker_line(trimmed) {
            in_sources = false;
        }
        if !in_sources {
            out.push(line);
        }
    }
    out
}

/// The keys of every citation `text` keeps.
pub(crate) fn keys(text: &str) -> HashSet<String> {
    extract(text).into_iter().map(|c| c.key).collect()
}

/// The DOIs, arXiv ids and author-year references of one line, in order.
fn inline(line: &str) -> Vec<Citation> {
    let mut found: Vec<(usize, Citation)> = Vec::new();
    for m in DOI.find_iter(line) {
        let doi = trim_doi(m.as_str());
        found.push((
            m.start(),
            Citation {
                kind: CitationKind::Doi,
                key: format!("doi:{}", doi.to_lowercase()),
                text: format!("doi:{doi}"),
            },
        ));
    }
    for c in ARXIV.captures_iter(line) {
        let (Some(all), Some(id)) = (c.get(0), c.get(1)) else {
            continue;
        };
        let version = c.get(2).map_or("", |v| v.as_str());
        found.push((
            all.start(),
            Citation {
                kind: CitationKind::Arxiv,
                key: format!("arxiv:{}", id.as_str().to_lowercase()),
                text: format!("arXiv:{}{version}", id.as_str()),
            },
        ));
    }
    for c in AUTHOR_YEAR.captures_iter(line) {
        let (Some(all), Some(surname), Some(year)) = (c.get(0), c.get(1), c.get(3)) else {
            continue;
        };
        let second = c.get(2).map_or("", |s| s.as_str());
        let separator = &line[surname.end() + second.len()..year.start()];
        // A bare space before the year only counts after `et al.` or `A & B`.
        let plain_space = !separator.contains(',') && !separator.contains('(');
        // A surname has a lower-case letter: `MW, 2022` (a unit) or `ICC, 2020` is no author.
        let acronym = !surname.as_str().chars().any(char::is_lowercase);
        if acronym
            || NOT_AUTHORS.contains(&surname.as_str())
            || (plain_space && !second.contains("al") && !second.contains('&'))
        {
            continue;
        }
        let second_norm = normalize_second(second);
        found.push((
            all.start(),
            Citation {
                kind: CitationKind::AuthorYear,
                key: format!(
                    "ay:{}{}:{}",
                    surname.as_str().to_lowercase(),
                    second_norm,
                    year.as_str()
                ),
                text: if separator.contains('(') {
                    all.as_str().to_owned()
                } else {
                    all.as_str().trim_end_matches(')').to_owned()
                },
            },
        ));
    }
    found.sort_by_key(|(start, _)| *start);
    found.into_iter().map(|(_, c)| c).collect()
}

fn normalize_second(second: &str) -> String {
    let words: Vec<&str> = second.split_whitespace().collect();
    match words.as_slice() {
        [] => String::new(),
        ["et", ..] => " et al".to_owned(),
        [_, name] => format!(" & {}", name.to_lowercase()),
        _ => String::new(),
    }
}

/// Strips trailing sentence punctuation and an unbalanced closing bracket from a DOI.
fn trim_doi(raw: &str) -> &str {
    let mut doi = raw;
    loop {
        let before = doi;
        doi = doi.trim_end_matches(['.', ',', ';', ':', '\'', '*', '_']);
        if doi.ends_with(')') && doi.matches('(').count() < doi.matches(')').count() {
            doi = &doi[..doi.len() - 1];
        }
        if doi == before {
            return doi;
        }
    }
}

/// The heading's text when `line` is a Markdown heading or a bare `Cited Sources:` line.
fn heading_text(line: &str) -> Option<String> {
    let text = if let Some(rest) = line.strip_prefix('#') {
        rest.trim_start_matches('#').trim()
    } else {
        let bare = line.trim_matches(['*', '_']).trim();
        let bare = bare
            .strip_suffix(':')
            .unwrap_or(bare)
            .trim_matches(['*', '_']);
        if is_source_heading(bare) && bare.len() + 6 >= line.len() {
            bare
        } else {
            return None;
        }
    };
    Some(text.to_owned())
}

fn is_source_heading(heading: &str) -> bool {
    let h = heading.to_lowercase();
    // Emphasis, leading numbering or symbols ("5. ", "📚 "), a trailing count ("(12)") and
    // punctuation do not change what the heading names.
    let h = h.trim_start_matches(|c: char| !c.is_alphabetic());
    let h = match h.rfind('(') {
        Some(open) if h.trim_end().ends_with(')') => &h[..open],
        _ => h,
    };
    let h = h.trim_end_matches(|c: char| !c.is_alphabetic());
    SOURCE_HEADINGS.contains(&h)
}

fn is_speaker_line(line: &str) -> bool {
    ["**User**:", "**Assistant**:", "**Tool**:"]
        .iter()
        .any(|p| line.starts_with(p))
}

/// A line that can be a bibliography entry: has a letter or digit, is not a cut marker.
fn is_entry(line: &str) -> bool {
    line.chars().any(char::is_alphanumeric) && !line.starts_with("[… truncated")
}

/// Removes every leading list marker (`- `, `1. `, `[3] `), so that re-listing an entry under
/// another marker keeps its identity.
pub(crate) fn strip_markers(line: &str) -> String {
    let mut s = line.trim();
    while let Some(m) = LIST_MARKER.find(s) {
        if m.end() == 0 {
            break;
        }
        s = s[m.end()..].trim_start();
    }
    s.trim_end().to_owned()
}

/// A source line's identity: lower-cased, whitespace collapsed, trailing period dropped.
fn source_key(entry: &str) -> String {
    let collapsed = entry.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.trim_end_matches(['.', ' ']).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<(CitationKind, String)> {
        extract(text)
            .into_iter()
            .map(|c| (c.kind, c.text))
            .collect()
    }

    #[test]
    fn source_headings_are_recognised_through_numbering_symbols_and_counts() {
        for heading in [
            "Cited Sources",
            "**References:**",
            "5. References",
            "📚 Cited Sources",
            "Cited Sources (12)",
            "_Bibliography_",
        ] {
            assert!(is_source_heading(heading), "{heading}");
        }
        for heading in [
            "Sources of error",
            "Key Findings",
            "References to prior work (3)",
        ] {
            assert!(!is_source_heading(heading), "{heading}");
        }
    }

    #[test]
    fn finds_dois_arxiv_ids_and_author_year_references() {
        let found = texts(
            "Silicon swells 300% (Obrovac & Chevrier, 2014; doi:10.1021/cr500207g.) and \
             Smith et al. (2021) confirm it; see arXiv:2301.01234v2 and \
             https://arxiv.org/abs/1706.03762. In 2021 prices fell.",
        );
        assert_eq!(
            found,
            vec![
                (CitationKind::AuthorYear, "Obrovac & Chevrier, 2014".into()),
                (CitationKind::Doi, "doi:10.1021/cr500207g".into()),
                (CitationKind::AuthorYear, "Smith et al. (2021)".into()),
                (CitationKind::Arxiv, "arXiv:2301.01234v2".into()),
                (CitationKind::Arxiv, "arXiv:1706.03762".into()),
            ]
        );
    }

    #[test]
    fn source_sections_yield_lines_until_the_next_heading() {
        let text = "Intro Smith (2020).\n# Cited Sources\n1. A. Author (2019). Title. J. 10.1000/xyz123\n\n- [2] B. Writer. Other.\n## Next\n- not a source\n";
        let found = extract(text);
        let lines: Vec<&str> = found
            .iter()
            .filter(|c| c.kind == CitationKind::SourceLine)
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(
            lines,
            [
                "A. Author (2019). Title. J. 10.1000/xyz123",
                "B. Writer. Other."
            ]
        );
    }

    #[test]
    fn dois_keep_balanced_parentheses() {
        let found = texts("(see 10.1016/S0378-7753(02)00123-4)");
        assert_eq!(
            found,
            vec![(
                CitationKind::Doi,
                "doi:10.1016/S0378-7753(02)00123-4".into()
            )]
        );
    }

    #[test]
    fn bibliography_entries_mention_author_year_references() {
        let entry = "Obrovac, M. N.; Chevrier, V. L. Alloy Negative Electrodes. Chem. Rev. (2014).";
        let mentioned = |reference: &str| extract(reference)[0].mentioned_by(entry);
        assert!(mentioned("(Obrovac & Chevrier, 2014)"));
        assert!(mentioned("Obrovac et al. (2014)"));
        assert!(!mentioned("Obrovac et al. (2015)"));
        assert!(!mentioned("Chevrier and Dahn (2014)"));
        assert!(!mentioned("Obrov et al. (2014)"));
    }

    #[test]
    fn markers_are_stripped_repeatedly() {
        assert_eq!(strip_markers("- [3] 1. Entry"), "Entry");
    }
}
