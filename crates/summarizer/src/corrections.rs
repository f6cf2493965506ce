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
            was: clean(was),
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
}
