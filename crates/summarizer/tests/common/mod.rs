//! A conversation driven through compaction-core's real planner, so that every request a
//! test sends is exactly what the engine would send, and a fixed research conversation.
#![allow(dead_code, unreachable_pub)]

pub mod fixture;

use compaction_core::testing::EventFactory;
use compaction_core::{CompactionPlan, Event, SummaryRequest, TurnDigest, plan_compaction};
use serde_json::Map;

/// The settings' default summarizer slug.
pub const MODEL: &str = "openrouter/nvidia/nemotron-3.5-lightning:free";

/// One research turn: the query, the tool syntheses, the coordinator's answer.
#[derive(Debug, Clone)]
pub struct ResearchTurn {
    pub user: String,
    pub tool_outputs: Vec<String>,
    pub answer: String,
}

/// A session's events, grown turn by turn and compacted with K = 0 (every completed turn is
/// folded), as rolling consolidation does.
#[derive(Debug)]
pub struct Conversation {
    factory: EventFactory,
    events: Vec<Event>,
    turns: usize,
}

impl Default for Conversation {
    fn default() -> Self {
        Self::new()
    }
}

impl Conversation {
    pub fn new() -> Self {
        Conversation {
            factory: EventFactory::new(),
            events: Vec::new(),
            turns: 0,
        }
    }

    /// Appends one completed research turn.
    pub fn add(&mut self, turn: &ResearchTurn) {
        self.turns += 1;
        let inv = format!("inv-{}", self.turns);
        let f = &mut self.factory;
        self.events.push(f.user(&inv, &turn.user));
        for output in &turn.tool_outputs {
            self.events.push(f.function_call(&inv, "research_library"));
            self.events
                .push(f.function_response(&inv, "research_library", output));
        }
        self.events.push(f.model(&inv, &turn.answer));
    }

    /// The events so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Makes the last coordinator answer report `tokens` prompt tokens.
    pub fn report_prompt_tokens(&mut self, tokens: u64) {
        if let Some(last) = self.events.pop() {
            self.events.push(last.with_prompt_tokens(tokens));
        }
    }

    /// The request the engine would send now, with its plan.
    pub fn request(&self) -> (SummaryRequest, CompactionPlan) {
        let plan = plan_compaction(&self.events, 0).expect("there are turns to fold");
        let request = SummaryRequest::new(
            MODEL.to_owned(),
            plan.summarizer_prompt(),
            plan.previous.as_ref().map(|p| p.summary.clone()),
            plan.new_turns_text(),
            plan.turns.clone(),
        );
        (request, plan)
    }

    /// Records `summary` as the live compaction, as the engine appends it.
    pub fn commit(&mut self, plan: &CompactionPlan, summary: &str) {
        let now = self.factory.tick();
        let n = self.events.len();
        self.events.push(plan.compaction_event(
            summary,
            format!("c{n}"),
            format!("compaction-{n}"),
            now,
            Map::new(),
        ));
    }
}

/// A request that folds invented `turns` onto the `previous` summary, with no instructions
/// and no rendered transcript (what the offline summarizer's tests need).
pub fn request(previous: Option<&str>, turns: Vec<TurnDigest>) -> SummaryRequest {
    SummaryRequest::new(
        String::new(),
        String::new(),
        previous.map(str::to_owned),
        String::new(),
        turns,
    )
}
