//! Plain-text helpers for the extractive summarizer: sentences, numeric findings, cuts.

use std::sync::LazyLock;

use regex::Regex;

use crate::citation;

/// Abbreviations after which a period does not end a sentence.
const ABBREVIATIONS: [&str; 16] = [
    "al.", "e.g.", "i.e.", "etc.", "vs.", "cf.", "fig.", "figs.", "eq.", "approx.", "ca.", "dr.",
    "no.", "vol.", "ref.", "refs.",
];

/// A number followed by a unit (`3,579 mAh/g`, `12.5 %`, `0.5C`, `$150/kWh`, `2.4×`).
static NUMBER_WITH_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"((?:(?:US\$|\$|€|£)\s?\d[\d,]*(?:\.\d+)?)",
        r"|(?:\d[\d,]*(?:\.\d+)?(?:\s?(?:–|-|to|±)\s?\d[\d,]*(?:\.\d+)?)?\s?",
        r"(?:%|‰|°C|×|wt%|vol%|at%|mAh/g|mAh g⁻¹|mAh/cm²|mAh|Ah|Wh/kg|Wh/L|Wh|kWh|MWh|GWh|TWh|",
        r"W/kg|mW|kW|MW|GW|W|mV|kV|V|mA|A|mS/cm|S/cm|µm|μm|nm|mm|cm|km|m²|kg|mg|µg|g|Mt|t|",
        r"mol/L|mol|mM|M|ppm|ppb|kPa|MPa|GPa|Pa|bar|atm|K|kHz|MHz|GHz|Hz|eV|kJ/mol|kJ|MJ|J|",
        r"ms|s|min|hours?|h|days?|weeks?|months?|years?|yr|cycles?|C|x|fold|USD|EUR|",
        r"\$/kWh|USD/kWh|\$/MWh|ct/kWh|tokens|parameters|samples|participants|patients|m)))",
        r"(?:[^\p{L}\p{N}]|$)",
    ))
    .expect("the pattern is valid")
});

/// The numbers with units `sentence` states, normalized (`3,579mah/g`), in order.
pub(crate) fn numeric_findings(sentence: &str) -> Vec<String> {
    NUMBER_WITH_UNIT
        .captures_iter(sentence)
        .filter_map(|c| c.get(1))
        .map(|m| {
            m.as_str()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_lowercase()
        })
        .collect()
}

/// Collapses whitespace runs to one space and trims.
pub(crate) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` characters, ending with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((byte, _)) if text.chars().count() > max => {
            format!("{}…", text[..byte].trim_end())
        }
        _ => text.to_owned(),
    }
}

/// Strips Markdown decoration from one line: heading marks, list markers, emphasis.
fn plain_line(line: &str) -> String {
    let line = line.trim().trim_start_matches('#').trim();
    let line = citation::strip_markers(line);
    line.replace("**", "").replace("__", "")
}

/// The prose sentences of a message, in order: sources sections, headings, tables and cut
/// markers are left out; each line is split at sentence ends.
pub(crate) fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in citation::prose_lines(text) {
        let trimmed = line.trim();
        if trimmed.starts_with('#')
            || trimmed.starts_with('|')
            || trimmed.starts_with("[… truncated")
            || trimmed.starts_with("```")
        {
            continue;
        }
        let plain = plain_line(trimmed);
        for sentence in split_sentences(&plain) {
            if sentence.chars().filter(|c| c.is_alphabetic()).count() >= 3 {
                out.push(sentence);
            }
        }
    }
    out
}

/// Splits one line at `.`, `!` or `?` followed by a space and an upper-case letter, digit or
/// bracket, except after a known abbreviation or a single-letter initial.
fn split_sentences(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (i, &(byte, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next_is_space = chars.get(i + 1).is_some_and(|(_, n)| n.is_whitespace());
        let after = chars.get(i + 2).map(|(_, n)| *n);
        let starts_sentence =
            after.is_some_and(|n| n.is_uppercase() || n.is_ascii_digit() || n == '(' || n == '[');
        if !(next_is_space && starts_sentence) {
            continue;
        }
        let candidate = &line[start..byte + c.len_utf8()];
        let mut words = candidate.rsplit(char::is_whitespace);
        let last_word = words.next().unwrap_or("").to_lowercase();
        // `J.` is an initial, but `3 V.` ends a sentence with a unit.
        let after_number = words
            .next()
            .is_some_and(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()));
        let initial = last_word.chars().count() == 2
            && last_word.starts_with(char::is_alphabetic)
            && !after_number;
        if c == '.' && (ABBREVIATIONS.contains(&last_word.as_str()) || initial) {
            continue;
        }
        out.push(candidate.trim().to_owned());
        start = byte + c.len_utf8();
    }
    let rest = line[start..].trim();
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sentences_but_not_after_abbreviations_or_initials() {
        assert_eq!(
            split_sentences("Smith et al. showed 3 V. J. Chen disagreed. Why? Fig. 2 shows it."),
            [
                "Smith et al. showed 3 V.",
                "J. Chen disagreed.",
                "Why?",
                "Fig. 2 shows it."
            ]
        );
    }

    #[test]
    fn recognizes_numbers_with_units() {
        for yes in [
            "a capacity of 3,579 mAh/g",
            "costs fell to $150/kWh",
            "efficiency of 85 %",
            "at 0.5C rate",
            "a 2.4× gain",
            "lasted 10,000 cycles",
            "between 4–8 hours",
        ] {
            assert!(!numeric_findings(yes).is_empty(), "{yes}");
        }
        for no in [
            "in 2021 the field",
            "see Table 3 and Section 2",
            "version 12b",
        ] {
            assert!(numeric_findings(no).is_empty(), "{no}");
        }
    }

    #[test]
    fn numeric_findings_are_normalized() {
        assert_eq!(
            numeric_findings("held 3.7 mAh/cm² and 97 % after 1,000 cycles at $150/kWh."),
            ["3.7mah/cm²", "97%", "1,000cycles", "$150"]
        );
    }

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(cut("αβγδε", 3), "αβ…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
