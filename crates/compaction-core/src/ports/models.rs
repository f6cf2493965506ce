//! The model ports: the decision model and the summarizer, and what the engine exchanges with
//! them.

use async_trait::async_trait;

use crate::failure::AdapterError;
use crate::plan::TurnDigest;
use crate::probe::ProbeRequest;
use crate::receipt::Receipt;

/// Who answers: for spans and for the CLI's banner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The API family (`openrouter`, `openai`, `offline`, …), OpenInference's `*.system`.
    pub system: String,
    /// The host (`openrouter.ai`, `localhost:8000`, `local`), OpenInference's `*.provider`.
    pub provider: String,
    /// The configured model slug.
    pub model: String,
}

impl ModelInfo {
    /// Who answers: the API family, the host and the configured model slug.
    pub fn new(
        system: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        ModelInfo {
            system: system.into(),
            provider: provider.into(),
            model: model.into(),
        }
    }
}

/// Token counts a model reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Input (prompt) tokens.
    pub input: Option<u64>,
    /// Output (completion) tokens.
    pub output: Option<u64>,
}

impl TokenUsage {
    /// Input and output token counts, each when reported.
    pub fn new(input: Option<u64>, output: Option<u64>) -> Self {
        TokenUsage { input, output }
    }
}

/// A decision model's raw answer. The engine validates `probability`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct DecisionAnswer {
    /// P(compaction warranted), as the model returned it.
    pub probability: f64,
    /// The model the host says served the call, when it says.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
}

impl DecisionAnswer {
    /// An answer of `probability` (validated by the engine, not here).
    pub fn new(probability: f64) -> Self {
        DecisionAnswer {
            probability,
            served_model: None,
            usage: None,
        }
    }

    /// The model the host says served the call.
    pub fn with_served_model(mut self, model: impl Into<String>) -> Self {
        self.served_model = Some(model.into());
        self
    }

    /// The usage the host reported.
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Answers the probe with a calibrated probability.
#[async_trait]
pub trait DecisionModel: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Answers one probe. The engine bounds the call with its probe deadline (spec: 10 s)
    /// and fails open when it passes; an adapter may enforce a shorter timeout of its own.
    /// Return errors through [`crate::classified`] so the outcome can say what kind they are.
    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError>;
}

/// What a summarizer is asked to consolidate. Built by the engine; adapters read it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SummaryRequest {
    /// The summarizer model slug from settings.
    pub model: String,
    /// The spec-shaped prompt (`Existing Conversation Summary:` / `New Completed Turns to
    /// Integrate:`).
    pub prompt: String,
    /// The previous summary, for rolling consolidation.
    pub previous_summary: Option<String>,
    /// The new turns as serial Markdown (the prompt's second section).
    pub new_turns_text: String,
    /// The new turns, digested.
    pub turns: Vec<TurnDigest>,
    /// The session's turn number (1-based) of `turns[0]`, when the store could count it
    /// ([`crate::SessionStore::turns_before`]): `turns[i]` is turn `first_turn + i`, so a summary's
    /// sections can name the turns they came from ("turn 7"), which recall expands.
    pub first_turn: Option<usize>,
}

impl SummaryRequest {
    /// A request for `model` with the spec-shaped `prompt`, the previous summary and the new
    /// turns (as text and digested).
    pub fn new(
        model: impl Into<String>,
        prompt: impl Into<String>,
        previous_summary: Option<String>,
        new_turns_text: impl Into<String>,
        turns: Vec<TurnDigest>,
    ) -> Self {
        SummaryRequest {
            model: model.into(),
            prompt: prompt.into(),
            previous_summary,
            new_turns_text: new_turns_text.into(),
            turns,
            first_turn: None,
        }
    }

    /// The session's turn number of the first new turn (builder style).
    pub fn with_first_turn(mut self, first_turn: Option<usize>) -> Self {
        self.first_turn = first_turn;
        self
    }
}

/// A summarizer's answer.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Summary {
    /// The consolidated summary.
    pub text: String,
    /// The model the host says served the call.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
    /// What the summarizer did to the folded turns' findings ([`crate::Receipt`]), when it
    /// reports it; the engine stores it beside the summary.
    pub receipt: Option<Receipt>,
}

impl Summary {
    /// A summary of `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Summary {
            text: text.into(),
            served_model: None,
            usage: None,
            receipt: None,
        }
    }

    /// The receipt of the fold (builder style).
    pub fn with_receipt(mut self, receipt: Receipt) -> Self {
        self.receipt = Some(receipt);
        self
    }

    /// The model the host says served the call.
    pub fn with_served_model(mut self, model: impl Into<String>) -> Self {
        self.served_model = Some(model.into());
        self
    }

    /// The usage the host reported.
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Folds a previous summary and new turns into one consolidated summary.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Consolidates. The engine bounds the call with its summarize deadline and fails open
    /// when it passes. Return errors through [`crate::classified`].
    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError>;
}
