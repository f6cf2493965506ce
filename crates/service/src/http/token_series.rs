//! The page's token series (`GET …/tokens`): per completed turn, the prompt tokens the
//! coordinator reported for the prompt it was sent (`with`: the compacted one) and the same
//! assembly over the whole uncompacted history by the core's estimator (`without`); `next` is
//! both for the next prompt, before its query. One pass over the history: the uncompacted
//! prompt before a turn is a prefix sum of the messages its events become.

use compaction_core::{
    AssembledContext, CharsPerToken, Event, TokenEstimator as _, completed_turns, coordinator_view,
};
use serde_json::{Value, json};

use super::coordinator::{CoordinatorMessage, CoordinatorRequest};

/// The series for a session's `events` and its next prompt's `context`.
pub(super) fn token_series(events: &[Event], context: &AssembledContext) -> Value {
    let plain: Vec<&Event> = coordinator_view(events)
        .into_iter()
        .filter(|e| e.compaction().is_none())
        .collect();
    // prefix[i]: the estimated tokens of the messages plain[..i] become.
    let mut prefix = Vec::with_capacity(plain.len() + 1);
    prefix.push(0u64);
    for event in &plain {
        let tokens = CoordinatorRequest::message_of(event).map_or(0, |m| estimate(&m));
        prefix.push(prefix.last().copied().unwrap_or(0) + tokens);
    }
    let question = |text: &str| CharsPerToken.estimate(text) as u64;
    // Each turn's first event, found in one forward walk (turns come in view order).
    let mut at = 0;
    let turns: Vec<Value> = completed_turns(&plain)
        .iter()
        .enumerate()
        .map(|(i, turn)| {
            while at < plain.len() && !std::ptr::eq(plain[at], turn.events[0]) {
                at += 1;
            }
            json!({
                "turn": i + 1,
                "with": turn.final_response().and_then(Event::prompt_tokens),
                "without": prefix[at] + question(&turn.user_query()),
            })
        })
        .collect();
    json!({
        "turns": turns,
        "next": {
            "with": CoordinatorRequest::assemble(context, "").estimated_prompt_tokens(),
            "without": prefix[plain.len()] + question(""),
        },
    })
}

fn estimate(message: &CoordinatorMessage) -> u64 {
    CharsPerToken.estimate(&message.content) as u64
}

#[cfg(test)]
mod tests {
    use compaction_core::testing::EventFactory;
    use compaction_core::{assemble_around, assemble_context};
    use proptest::prelude::*;

    use super::*;

    /// The definition, re-assembling every prefix (quadratic): the oracle.
    fn by_definition(events: &[Event], context: &AssembledContext) -> Value {
        let plain: Vec<&Event> = coordinator_view(events)
            .into_iter()
            .filter(|e| e.compaction().is_none())
            .collect();
        let uncompacted = |before: &[&Event], question: &str| {
            let context = assemble_around(None, before.iter().map(|e| (*e).clone()));
            CoordinatorRequest::assemble(&context, question).estimated_prompt_tokens()
        };
        let turns: Vec<Value> = completed_turns(&plain)
            .iter()
            .enumerate()
            .map(|(i, turn)| {
                let start = plain
                    .iter()
                    .position(|e| std::ptr::eq(*e, turn.events[0]))
                    .unwrap_or(0);
                json!({
                    "turn": i + 1,
                    "with": turn.final_response().and_then(Event::prompt_tokens),
                    "without": uncompacted(&plain[..start], &turn.user_query()),
                })
            })
            .collect();
        json!({
            "turns": turns,
            "next": {
                "with": CoordinatorRequest::assemble(context, "").estimated_prompt_tokens(),
                "without": uncompacted(&plain, ""),
            },
        })
    }

    /// What a history of `turns` looks like: research turns (tool calls, results, syntheses),
    /// plain turns, a partial reply now and then, an unanswered query, and a compaction.
    fn history(turns: &[(u8, usize, usize)]) -> Vec<Event> {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        for (i, &(kind, q, a)) in turns.iter().enumerate() {
            let invocation = format!("i{i}");
            let query = "q".repeat(q + 1);
            let answer = "a".repeat(a + 1);
            match kind % 4 {
                0 => events.extend(f.conversational_turn(&invocation, &query, &answer)),
                1 => events.extend(f.research_turn(&invocation, &query, &answer)),
                2 => {
                    events.push(f.user(&invocation, &query));
                    let mut partial = f.model(&invocation, &answer);
                    partial.partial = Some(true);
                    events.push(partial);
                }
                _ => events.push(f.user(&invocation, &query)),
            }
            if i == turns.len() / 2 && i > 0 {
                let start = events[0].timestamp;
                let end = events[events.len() - 1].timestamp;
                events.push(f.compaction("c", start, end, "the summary"));
            }
        }
        events
    }

    proptest! {
        #[test]
        fn one_pass_equals_the_definition(turns in proptest::collection::vec((0u8..4, 0usize..300, 0usize..300), 0..14)) {
            let events = history(&turns);
            let context = assemble_context(&events);
            prop_assert_eq!(token_series(&events, &context), by_definition(&events, &context));
        }
    }
}
