//! The history both recall benches fill (SQLite and PostgreSQL): research turns whose texts
//! draw from a 400-word vocabulary, with one compaction over the first 50 turns.

use std::time::Duration;

use compaction_core::Event;
use compaction_core::testing::EventFactory;

const VOCABULARY: usize = 400;

/// Deterministic text: `n` words of a fixed vocabulary (`w0` … `w399` plus a few real words).
pub(crate) struct Words(pub(crate) u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        self.0 >> 33
    }

    fn text(&mut self, n: usize) -> String {
        let real = [
            "plating", "onset", "anode", "lithium", "cathode", "dendrite",
        ];
        (0..n)
            .map(|_| {
                let k = (self.next() % VOCABULARY as u64) as usize;
                real.get(k % 67)
                    .map_or_else(|| format!("w{k}"), |w| (*w).to_owned())
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A research turn with generated texts (6 events).
pub(crate) fn turn(f: &mut EventFactory, words: &mut Words, n: usize) -> Vec<Event> {
    let inv = format!("inv{n}");
    f.research_turn(&inv, &words.text(12), &words.text(60))
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            if i == 5 {
                e = f.model(&inv, &words.text(40));
            }
            e
        })
        .collect()
}

/// `turns` generated turns, each event given to `append`, with a compaction over the first 50
/// turns after the 50th; returns the compaction's id.
pub(crate) fn history(turns: usize, mut append: impl FnMut(&Event)) -> String {
    let (mut f, mut words) = (EventFactory::new(), Words(7));
    let mut range = None;
    let mut compaction = String::new();
    for n in 0..turns {
        for e in turn(&mut f, &mut words, n) {
            let start = range.map_or(e.timestamp, |(s, _)| s);
            range = Some((start, e.timestamp));
            append(&e);
        }
        if let (49, Some((start, end))) = (n, range) {
            let c = f.compaction("c", start, end, "fifty turns");
            compaction = c.id.clone();
            append(&c);
        }
    }
    compaction
}

/// Median and p95.
pub(crate) fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 95 / 100],
    )
}
