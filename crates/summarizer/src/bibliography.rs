//! The offline summary's bounded bibliography: the sources of the kept findings, one compact
//! line each, and every other source folded into one `Also cited` line.
//!
//! - A source line with a DOI or an arXiv id and an author-year form (`Haddad, R., & Rivas,
//!   M. (2021). Title. Journal. https://doi.org/…`) becomes `Haddad & Rivas 2021 — Title —
//!   doi:…` (the title cut to [`MAX_TITLE_CHARS`]); any other source line stays as written.
//! - Two source lines with the same identifier are one source (the first is kept).
//! - A source is **tied** to the summary when a kept line cites it (an author-year reference
//!   whose names and year the entry states, or its identifier). Tied sources are listed one per
//!   line; the others go into one `Also cited (no finding kept above): …` line as `key (id)`.
//! - The citations of the ledger that no source line holds (an author-year reference or a DOI
//!   in prose only) and that no kept line states go into the same line.
//!
//! No citation is lost: the ledger counts a source line kept when every identifier it contains
//! is kept (see [`crate::ledger`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::citation::{self, Citation, CitationKind};
use crate::text::cut;

/// Longest title kept in a compact entry, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 80;
/// Between two items of the `Also cited` line (entries may hold `; ` themselves).
pub(crate) const ALSO_SEPARATOR: &str = " · ";
/// The start of the line that lists the sources no kept finding cites.
pub(crate) const ALSO_CITED: &str = "Also cited (no finding kept above):";

static YEAR_IN_PARENS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(((?:19|20)\d{2}[a-z]?)\)").expect("the pattern is valid"));
static AUTHOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\p{Lu}[\p{L}'’\-]+(?:[\s\-]\p{Lu}[\p{L}'’\-]+)*),\s(?:\p{Lu}\.)")
        .expect("the pattern is valid")
});
static AUTHOR_WITH_INITIALS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\p{Lu}[\p{L}'’\-]+(?:[\s\-]\p{Lu}[\p{L}'’\-]+)*,\s(?:\p{Lu}\.[\s\-]?)+")
        .expect("the pattern is valid")
});
static COMPACT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[^—]{2,120}? (?:19|20)\d{2}[a-z]? — ").expect("the pattern is valid")
});

/// One source of the bibliography.
#[derive(Debug, Clone)]
struct Source {
    /// The compact line (or the line as written).
    line: String,
    /// `Haddad & Rivas 2021`, when the line has an author-year form.
    key: Option<String>,
    /// The identifiers' citations (DOIs, arXiv ids) the line holds.
    ids: Vec<Citation>,
}

impl Source {
    fn of(entry: &str) -> Source {
        let ids: Vec<Citation> = citation::extract(entry)
            .into_iter()
            .filter(|c| matches!(c.kind, CitationKind::Doi | CitationKind::Arxiv))
            .collect();
        if COMPACT.is_match(entry) {
            let key = entry.split(" — ").next().map(str::to_owned);
            return Source {
                line: entry.to_owned(),
                key,
                ids,
            };
        }
        match (ids.first(), author_year(entry)) {
            (Some(id), Some((key, title))) => Source {
                line: if title.is_empty() {
                    format!("{key} — {}", id.text)
                } else {
                    format!("{key} — {title} — {}", id.text)
                },
                key: Some(key),
                ids,
            },
            _ => Source {
                line: entry.to_owned(),
                key: None,
                ids,
            },
        }
    }

    /// The line without its title (`Haddad & Rivas 2021 — doi:…`), or the line itself when
    /// its title holds a citation of its own.
    fn untitled(&self) -> String {
        match (&self.key, self.ids.first()) {
            (Some(key), Some(id)) => {
                let title = self.line.split(" — ").nth(1).unwrap_or("");
                if citation::keys(title).is_empty() {
                    format!("{key} — {}", id.text)
                } else {
                    self.line.clone()
                }
            }
            _ => self.line.clone(),
        }
    }

    /// `key (id)` for the also-cited line, or the line itself.
    fn short(&self) -> String {
        match (&self.key, self.ids.first()) {
            (Some(key), Some(id)) => format!("{key} ({})", id.text),
            _ => self.line.clone(),
        }
    }
}

/// `("Haddad & Rivas 2021", "Trial-level variability …")` from an APA-style entry.
fn author_year(entry: &str) -> Option<(String, String)> {
    let year = YEAR_IN_PARENS.captures(entry)?;
    let (all, year_text) = (year.get(0)?, year.get(1)?.as_str());
    let authors = &entry[..all.start()];
    // Only an author list may stand before the year (APA): `Chan, C. K. et al. A title.
    // Journal (2008)` is not read.
    let rest_of_authors = AUTHOR_WITH_INITIALS.replace_all(authors, "");
    if !rest_of_authors
        .replace("et al.", "")
        .chars()
        .all(|c| matches!(c, ',' | '&' | '.' | ' '))
    {
        return None;
    }
    let names: Vec<&str> = AUTHOR
        .captures_iter(authors)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    let key = match names.as_slice() {
        [] => return None,
        [one] => format!("{one} {year_text}"),
        [a, b] => format!("{a} & {b} {year_text}"),
        [a, ..] => format!("{a} et al. {year_text}"),
    };
    let rest = entry[all.end()..].trim_start_matches(['.', ' ']);
    let title_end = rest
        .char_indices()
        .find(|&(i, c)| matches!(c, '.' | '?' | '!') && rest[i + c.len_utf8()..].starts_with(' '))
        .map_or(rest.len(), |(i, c)| i + c.len_utf8());
    let title = rest[..title_end]
        .trim()
        .trim_end_matches('.')
        .replace(['*', '_'], "");
    Some((key, cut(&title, MAX_TITLE_CHARS)))
}

/// The sources of `entries` (the ledger, in order), deduplicated by identifier and line:
/// their source lines, then the items of an earlier `Also cited` line as sources of their own.
fn sources_of(entries: &[Citation]) -> Vec<Source> {
    let mut sources: Vec<Source> = Vec::new();
    let mut seen_ids: HashSet<String> = HashSet::new();
    let mut seen_lines: HashSet<String> = HashSet::new();
    for entry in entries
        .iter()
        .filter(|c| c.kind == CitationKind::SourceLine)
    {
        if entry.text.starts_with(ALSO_CITED) {
            continue;
        }
        let source = Source::of(&entry.text);
        let duplicate =
            !source.ids.is_empty() && source.ids.iter().all(|id| seen_ids.contains(&id.key));
        if duplicate || !seen_lines.insert(source.line.to_lowercase()) {
            continue;
        }
        seen_ids.extend(source.ids.iter().map(|id| id.key.clone()));
        sources.push(source);
    }
    // The items of an earlier `Also cited` line come back as sources of their own.
    for entry in entries.iter().filter(|c| c.text.starts_with(ALSO_CITED)) {
        for item in entry.text[ALSO_CITED.len()..].split(ALSO_SEPARATOR) {
            let item = item.trim().trim_end_matches('.');
            let ids: Vec<Citation> = citation::extract(item)
                .into_iter()
                .filter(|c| matches!(c.kind, CitationKind::Doi | CitationKind::Arxiv))
                .collect();
            if item.is_empty()
                || (!ids.is_empty() && ids.iter().all(|id| seen_ids.contains(&id.key)))
                || !seen_lines.insert(item.to_lowercase())
            {
                continue;
            }
            seen_ids.extend(ids.iter().map(|id| id.key.clone()));
            // `key (id)` as this module writes it; anything else stays as written.
            let key = match (item.rsplit_once(" ("), ids.as_slice()) {
                (Some((key, id)), [only]) if id.strip_suffix(')') == Some(only.text.as_str()) => {
                    Some(key.to_owned())
                }
                _ => None,
            };
            sources.push(Source {
                line: key
                    .as_ref()
                    .map_or_else(|| item.to_owned(), |k| format!("{k} — {}", ids[0].text)),
                key,
                ids,
            });
        }
    }
    sources
}

/// The sources section: every source line of `entries` (the ledger, in order) compacted and
/// deduplicated, tied sources one per line, the rest and the prose-only citations that
/// `kept_prose` does not state in one `Also cited` line; without `titles`, a compact line
/// keeps only its key and identifier. Empty when there is no citation.
pub(crate) fn render(
    heading: &str,
    entries: &[Citation],
    kept_prose: &str,
    titles: bool,
) -> String {
    let cited_in_prose = citation::extract(kept_prose);
    let prose_keys: HashSet<&str> = cited_in_prose.iter().map(|c| c.key.as_str()).collect();
    let sources = sources_of(entries);
    let listed_text: String = sources
        .iter()
        .map(|s| s.line.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let listed_keys = citation::keys(&listed_text);
    let tied = |s: &Source| {
        s.ids.iter().any(|id| prose_keys.contains(id.key.as_str()))
            || cited_in_prose.iter().any(|c| c.mentioned_by(&s.line))
    };
    let mut lines: Vec<String> = Vec::new();
    let mut also: Vec<String> = Vec::new();
    for s in &sources {
        if tied(s) {
            lines.push(if titles { s.line.clone() } else { s.untitled() });
        } else {
            also.push(s.short());
        }
    }
    // Prose-only citations (no source line holds them) that the kept prose no longer states.
    for c in entries
        .iter()
        .filter(|c| c.kind != CitationKind::SourceLine)
    {
        let held = listed_keys.contains(&c.key)
            || sources.iter().any(|s| c.mentioned_by(&s.line))
            || prose_keys.contains(c.key.as_str());
        if !held && !also.contains(&c.text) {
            also.push(c.text.clone());
        }
    }
    if lines.is_empty() && also.is_empty() {
        return String::new();
    }
    let mut out = String::from(heading);
    for line in &lines {
        out.push_str("\n- ");
        out.push_str(line);
    }
    if !also.is_empty() {
        out.push('\n');
        out.push_str(ALSO_CITED);
        out.push(' ');
        out.push_str(&also.join(ALSO_SEPARATOR));
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apa_entries_become_compact_lines() {
        let s = Source::of(
            "Haddad, R., & Rivas, M. (2021). Trial-level variability and the reliability paradox in task fMRI: a hierarchical Bayesian approach. *Psychometrika Neuroimaging*, 4(1), 12–35. https://doi.org/10.5555/pmni.2021.0012",
        );
        assert_eq!(
            s.line,
            "Haddad & Rivas 2021 — Trial-level variability and the reliability paradox in task fMRI: a hierarchica… — doi:10.5555/pmni.2021.0012"
        );
        let three = Source::of(
            "Nwosu, C., Ekwueme, J., & Park, S.-Y. (2023). Trial counts. *Cortex*, 9. https://doi.org/10.5555/cxm.2023.0077",
        );
        assert_eq!(
            three.key.as_deref(),
            Some("Nwosu et al. 2023"),
            "{}",
            three.line
        );
        // A compact line is kept as it is.
        assert_eq!(Source::of(&s.line).line, s.line);
        // No identifier: the line as written.
        let plain = "Lee, K. (2020). Cathodes.";
        assert_eq!(Source::of(plain).line, plain);
    }

    #[test]
    fn untied_sources_fold_into_one_line_and_duplicates_merge() {
        let text = "# Cited Sources\n\
            - Haddad, R., & Rivas, M. (2021). Trial-level variability. *J*, 4. https://doi.org/10.5555/a.1\n\
            - Vesterlund, A., & Cho, E. (2018). Spearman–Brown limits. *J*, 22. https://doi.org/10.5555/b.2\n\
            - Haddad, R. & Rivas, M. (2021). Trial-level variability (preprint). doi:10.5555/A.1";
        let entries = citation::extract(text);
        let out = render(
            "## Cited Sources",
            &entries,
            "- ICC 0.55 (Haddad & Rivas 2021).",
            true,
        );
        assert_eq!(
            out,
            "## Cited Sources\n\
             - Haddad & Rivas 2021 — Trial-level variability — doi:10.5555/a.1\n\
             Also cited (no finding kept above): Vesterlund & Cho 2018 (doi:10.5555/b.2)."
        );
        let untitled = render(
            "## Cited Sources",
            &entries,
            "- ICC 0.55 (Haddad & Rivas 2021).",
            false,
        );
        assert!(
            untitled.contains("\n- Haddad & Rivas 2021 — doi:10.5555/a.1\n"),
            "{untitled}"
        );
    }
}
