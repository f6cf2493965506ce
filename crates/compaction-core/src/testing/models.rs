//! Fakes of the two model ports that answer from a script and record every request.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::failure::AdapterError;
use crate::ports::{
    DecisionAnswer, DecisionModel, ModelInfo, Summarizer, Summary, SummaryRequest, TokenUsage,
};
use crate::probe::ProbeRequest;

use super::lock;

/// A decision model that answers from a script (or a constant) and records every request.
#[derive(Debug, Default)]
pub struct ScriptedDecisionModel {
    script: Mutex<VecDeque<Result<f64, String>>>,
    fallback: Option<f64>,
    requests: Mutex<Vec<ProbeRequest>>,
    calls: AtomicUsize,
}

impl ScriptedDecisionModel {
    /// Always answers `p`.
    pub fn constant(p: f64) -> Self {
        ScriptedDecisionModel {
            fallback: Some(p),
            ..Self::default()
        }
    }

    /// Answers from `script` in order, then fails.
    pub fn scripted(script: impl IntoIterator<Item = Result<f64, String>>) -> Self {
        ScriptedDecisionModel {
            script: Mutex::new(script.into_iter().collect()),
            ..Self::default()
        }
    }

    /// Always fails with `message`.
    pub fn failing(message: &str) -> Self {
        Self::scripted(std::iter::repeat_n(Err(message.to_owned()), 1024))
    }

    /// How many times `decide` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<ProbeRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl DecisionModel for ScriptedDecisionModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            system: "scripted".into(),
            provider: "in-memory".into(),
            model: "scripted-decision".into(),
        }
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.requests).push(request.clone());
        let next = lock(&self.script).pop_front();
        match next.or(self.fallback.map(Ok)) {
            Some(Ok(p)) => Ok(DecisionAnswer {
                probability: p,
                served_model: Some("scripted-decision".into()),
                usage: Some(TokenUsage {
                    input: Some(100),
                    output: Some(0),
                }),
            }),
            Some(Err(message)) => Err(message.into()),
            None => Err("script exhausted".into()),
        }
    }
}

/// A summarizer that writes a deterministic summary naming what it consolidated, or fails.
#[derive(Debug, Default)]
pub struct RecordingSummarizer {
    failure: Option<String>,
    requests: Mutex<Vec<SummaryRequest>>,
    calls: AtomicUsize,
}

impl RecordingSummarizer {
    /// Succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Always fails with `message`.
    pub fn failing(message: &str) -> Self {
        RecordingSummarizer {
            failure: Some(message.to_owned()),
            ..Self::default()
        }
    }

    /// How many times `summarize` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<SummaryRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl Summarizer for RecordingSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            system: "recording".into(),
            provider: "in-memory".into(),
            model: "recording-summarizer".into(),
        }
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.requests).push(request.clone());
        if let Some(message) = &self.failure {
            return Err(message.clone().into());
        }
        let mut text = String::new();
        if let Some(previous) = &request.previous_summary {
            text.push_str(previous);
            text.push('\n');
        }
        for turn in &request.turns {
            text.push_str(&format!("- {}\n", turn.user));
        }
        Ok(Summary {
            text: text.trim_end().to_owned(),
            served_model: Some("recording-summarizer".into()),
            usage: Some(TokenUsage {
                input: Some(request.prompt.len() as u64 / 4),
                output: Some(text.len() as u64 / 4),
            }),
            receipt: None,
        })
    }
}
