//! The summary's **Corrections** section (issue 30): each superseded claim stated once —
//! what was said, what it was corrected to, which turn corrected it — and a correction of a
//! correction appended to the same entry.
//!
//! ```text
//! ## Corrections
//! - Said: the whole watershed lost 312 t/yr → corrected in turn 4: 312 t/yr is the upper sub-basin alone; the whole watershed lost 505 t/yr
//! ```
//!
//! The entry's text before its first `→` is what was said; everything after is the record of
//! what it became. The summarizer parses its own section back when it consolidates again, so a
//! correction survives every later fold.
//!
//! What this module must never do: drop an entry (a correction is pinned), or state a
//! superseded claim anywhere but before an entry's first arrow.

use compaction_core::CorrectedClaim;

use crate::supersede;

/// The section's heading.
pub const CORRECTIONS_HEADING: &str = "## Corrections";
const ENTRY: &str = "- Said: ";
const ARROW: &str = " → corrected";
/// Between two claims one correction targets.
const ALSO: &str = " · ";

/// One correction entry: what was said, and each later correction of it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// What was said.
    pub was: String,
    /// Each correction: the turn (when known) and the correcting sentence.
    pub chain: Vec<(Option<usize>, String)>,
}

impl Entry {
    /// A new entry.
    pub(crate) fn new(was: &str, turn: Option<usize>, now: &str) -> Entry {
        Entry {
            was: claim_part(&clean(was), now),
            chain: vec![(turn, clean(now))],
        }
    }

    /// Adds another claim the same correction targets to what was said, unless every fact
    /// it states is already there.
    pub(crate) fn absorb(&mut self, was: &str) {
        let known = crate::findings::facts(&self.was);
        if !crate::findings::facts(was).is_subset(&known) {
            self.was = format!("{}{ALSO}{}", self.was, clean(was));
        }
    }

    /// What the claim is now (the last correction).
    pub(crate) fn now(&self) -> &str {
        self.chain.last().map_or("", |(_, s)| s.as_str())
    }

    /// The entry as one line.
    pub(crate) fn render(&self) -> String {
        let mut out = format!("{ENTRY}{}", self.was);
        for (turn, now) in &self.chain {
            match turn {
                Some(t) => out.push_str(&format!("{ARROW} in turn {t}: {now}")),
                None => out.push_str(&format!("{ARROW} later: {now}")),
            }
        }
        out
    }

    /// An entry line of the section back into an entry; `None` for any other line.
    pub(crate) fn parse(line: &str) -> Option<Entry> {
        let rest = line.trim().strip_prefix(ENTRY)?;
        let mut parts = rest.split(ARROW);
        let was = parts.next()?.trim().to_owned();
        let mut chain = Vec::new();
        for part in parts {
            let (turn, now) = if let Some(p) = part.strip_prefix(" in turn ") {
                let (n, now) = p.split_once(": ")?;
                (n.trim().parse().ok(), now)
            } else {
                (None, part.strip_prefix(" later: ")?)
            };
            chain.push((turn, now.trim().to_owned()));
        }
        (!chain.is_empty()).then_some(Entry { was, chain })
    }

    /// The receipt's record of the entry's last correction.
    pub(crate) fn receipt(&self) -> CorrectedClaim {
        let (turn, now) = self.chain.last().cloned().unwrap_or((None, String::new()));
        let was = if self.chain.len() > 1 {
            self.chain[self.chain.len() - 2].1.clone()
        } else {
            self.was.clone()
        };
        CorrectedClaim { was, now, turn }
    }
}

/// A line's text without its bullet and emphasis marks, on one line, without arrows.
fn clean(text: &str) -> String {
    let t = text.trim();
    let t = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .unwrap_or(t);
    t.replace("**", "")
        .replace('→', "->")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the correction targets in a corrected line: its parentheticals and its clauses
/// (between commas or semicolons) that share a value or a content word with the correcting
/// sentence `now`. The rest of the line — its source, its cohort, a figure no correction
/// names — is not what was withdrawn. A table row (`Label — Column: value`) is one claim and
/// stays whole, and so does a line none of whose parts shares anything with `now`.
fn claim_part(was: &str, now: &str) -> String {
    if was.contains(" — ") || now.is_empty() {
        return was.to_owned();
    }
    let (now_values, now_words) = (supersede::values(now), supersede::words(now));
    let named = |part: &str| {
        !supersede::values(part).is_disjoint(&now_values)
            || !supersede::words(part).is_disjoint(&now_words)
    };
    let mut kept = String::new();
    let mut rest = was;
    while let Some(open) = rest.find(" (") {
        let Some(close) = rest[open..].find(')').map(|c| open + c) else {
            break;
        };
        kept.push_str(&rest[..open]);
        if named(&rest[open + 2..close]) {
            kept.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    kept.push_str(rest);
    let part: String = clauses(&kept).into_iter().filter(|c| named(c)).collect();
    let part = part.trim().trim_end_matches([',', ';']).trim();
    if part.is_empty() {
        return was.to_owned();
    }
    let mut out = part.to_owned();
    if was.ends_with('.') && !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// `text` cut after each `, ` or `; ` outside parentheses (`18,900` is one number); a clause
/// without a content word stays with the clause before it.
fn clauses(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut ends: Vec<usize> = Vec::new();
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b',' | b';' if depth == 0 && bytes.get(i + 1) == Some(&b' ') => ends.push(i + 1),
            _ => {}
        }
    }
    ends.push(text.len());
    // A clause of values and function words only (`not 12.0 m`) belongs to the one before.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for end in ends {
        match spans.last_mut() {
            Some(last) if supersede::words(&text[start..end]).is_empty() => last.1 = end,
            _ => spans.push((start, end)),
        }
        start = end;
    }
    spans.into_iter().map(|(s, e)| &text[s..e]).collect()
}

/// The section, or nothing when there is no entry.
pub(crate) fn render(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut out = String::from(CORRECTIONS_HEADING);
    for e in entries {
        out.push('\n');
        out.push_str(&e.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_with_its_chain() {
        let mut e = Entry::new(
            "- The mean canopy gap is **12.0 m**.",
            Some(4),
            "The mean canopy gap is 17.5 m, not 12.0 m.",
        );
        e.chain.push((None, "It is 15.2 m, not 17.5 m.".into()));
        let line = e.render();
        assert_eq!(
            line,
            "- Said: The mean canopy gap is 12.0 m. → corrected in turn 4: The mean canopy gap is \
             17.5 m, not 12.0 m. → corrected later: It is 15.2 m, not 17.5 m."
        );
        assert_eq!(Entry::parse(&line), Some(e.clone()));
        assert_eq!(e.now(), "It is 15.2 m, not 17.5 m.");
        assert_eq!(
            e.receipt().was,
            "The mean canopy gap is 17.5 m, not 12.0 m."
        );
        assert_eq!(Entry::parse("- Plain finding 3.4 m"), None);
        // A second claim the same sentence corrects joins the entry once.
        let mut one = Entry::new("The gap is 12.0 m.", Some(4), "It is 17.5 m, not 12.0 m.");
        one.absorb("- A 12.0 m gap.");
        assert_eq!(one.was, "The gap is 12.0 m.");
        one.absorb("- Gaps of 12.0 m and 9.1 m.");
        assert_eq!(one.was, "The gap is 12.0 m. · Gaps of 12.0 m and 9.1 m.");
        assert_eq!(Entry::parse(&one.render()), Some(one));
    }

    #[test]
    fn what_was_said_is_the_part_of_the_line_the_correction_names() {
        let e = Entry::new(
            "- In the Brenner 2018 survey (2,310 hives, 4 regions), winter loss was 31%, \
             highest in the north.",
            Some(3),
            "I gave the wrong figure: winter loss was 21%, not 31%.",
        );
        assert_eq!(e.was, "winter loss was 31%.");
        // A row is one claim; a line whose parts share nothing with the correction stays whole.
        let row = Entry::new("Site B — Loss: 31%", Some(3), "Site B lost 21%, not 31%.");
        assert_eq!(row.was, "Site B — Loss: 31%");
        let unrelated = Entry::new("Brenner 2018, 2,310 hives.", Some(3), "It was 21%.");
        assert_eq!(unrelated.was, "Brenner 2018, 2,310 hives.");
    }
}
