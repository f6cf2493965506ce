//! What the recall tests of every store share: generated texts over a small vocabulary, the
//! queries asked, and hits in a comparable order.

use compaction_core::testing::EventFactory;
use compaction_core::{Event, RecallHit, RecallQuery};

/// The words generated texts draw from (`near` and mixed case on purpose).
pub const VOCABULARY: [&str; 6] = ["plating", "lithium", "anode", "Dendrite", "SEI", "near"];

/// Rewrites every text part of `events` with words of [`VOCABULARY`] picked by `picks`.
pub fn with_words(mut events: Vec<Event>, picks: &[Vec<usize>]) -> Vec<Event> {
    let mut next = picks.iter().cycle();
    for event in &mut events {
        for part in event.content.iter_mut().flat_map(|c| &mut c.parts) {
            if let (Some(text), Some(pick)) = (part.text.as_mut(), next.next()) {
                let words: Vec<&str> = pick.iter().map(|&i| VOCABULARY[i % 6]).collect();
                *text = format!("{}, then: {}.", text, words.join(" "));
            }
        }
    }
    events
}

/// Hits by event id: stores rank differently, so tests compare sets.
pub fn by_id(mut hits: Vec<RecallHit>) -> Vec<RecallHit> {
    hits.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    hits
}

/// The queries every oracle test asks, each with and without pipeline events.
pub fn queries() -> Vec<RecallQuery> {
    let texts = [
        "plating",
        "lithium anode",
        "dendrite",
        "sei near",
        "synthesis",
        "question",
    ];
    texts
        .iter()
        .flat_map(|t| {
            let q = RecallQuery::parse(t).unwrap();
            [q.clone(), q.with_pipeline(true)]
        })
        .collect()
}

/// The turn ranges every oracle test expands (some outside every session, some empty).
pub const TURN_RANGES: [(usize, usize); 7] =
    [(1, 1), (1, 3), (2, 5), (0, 1), (3, 2), (1, 40), (4, 4)];

/// A session with two folded turns about plating, a compaction and a later turn.
pub fn folded(f: &mut EventFactory) -> (Vec<Event>, String) {
    let mut events = f.conversational_turn("i1", "What is lithium plating?", "Metal on the anode.");
    events.extend(f.research_turn("i2", "plating onset", "Onset at 4C and 0 °C."));
    let (start, end) = (events[0].timestamp, events[events.len() - 1].timestamp);
    let compaction = f.compaction("c1", start, end, "Turns 1–2: plating.");
    let id = compaction.id.clone();
    events.push(compaction);
    events.extend(f.conversational_turn("i3", "Next: SEI?", "A passivation layer."));
    (events, id)
}
