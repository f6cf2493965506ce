//! The sentence encoder: all-MiniLM-L6-v2 (BERT, 6 layers, 384 dimensions) on candle, CPU,
//! one text at a time; the sentence vector is the masked mean of the last hidden states,
//! L2-normalised (the model's pooling config says mean).
//!
//! It never downloads anything and never maps a file into memory (the workspace forbids
//! `unsafe`): the weights are read into a buffer once, at [`Encoder::load`].

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::files::{CONFIG_FILE, ModelDir, ModelFileError, TOKENIZER_FILE, WEIGHTS_FILE};

/// Dimensions of a sentence vector.
pub const DIMENSIONS: usize = 384;

/// A loaded encoder.
pub struct Encoder {
    model: BertModel,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").finish_non_exhaustive()
    }
}

fn damaged(dir: &Path, file: &str, reason: impl std::fmt::Display) -> ModelFileError {
    ModelFileError::Damaged {
        path: dir.join(file).display().to_string(),
        reason: reason.to_string(),
    }
}

impl Encoder {
    /// Loads the three files of `dir`. A missing or unreadable file is an error naming it.
    pub fn load(dir: &ModelDir) -> Result<Encoder, ModelFileError> {
        let path = dir.path();
        let read = |file: &str| {
            std::fs::read(path.join(file)).map_err(|source| ModelFileError::Read {
                path: path.join(file).display().to_string(),
                source,
            })
        };
        let config: Config = serde_json::from_slice(&read(CONFIG_FILE)?)
            .map_err(|e| damaged(path, CONFIG_FILE, format!("not a BERT config: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read(TOKENIZER_FILE)?)
            .map_err(|e| damaged(path, TOKENIZER_FILE, e))?;
        // The shipped tokenizer pads every input to 128 tokens and cuts there: one text at a
        // time needs no padding, and queries may use the model's 256-token window.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| damaged(path, TOKENIZER_FILE, e))?;
        let vb =
            VarBuilder::from_buffered_safetensors(read(WEIGHTS_FILE)?, DType::F32, &Device::Cpu)
                .map_err(|e| damaged(path, WEIGHTS_FILE, e))?;
        let model = BertModel::load(vb, &config).map_err(|e| damaged(path, WEIGHTS_FILE, e))?;
        Ok(Encoder { model, tokenizer })
    }

    /// The unit sentence vector of `text`'s first `max_tokens` tokens (at most
    /// [`MAX_TOKENS`]); the zero vector for text without a token.
    pub fn embed(&self, text: &str, max_tokens: usize) -> Result<Vec<f32>, String> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let n = encoding
            .get_ids()
            .len()
            .min(max_tokens.clamp(2, MAX_TOKENS));
        if n <= 2 {
            return Ok(vec![0.0; DIMENSIONS]);
        }
        let mut ids = encoding.get_ids()[..n].to_vec();
        // Keep the closing [SEP] when the text was cut here.
        if let (Some(last), Some(&sep)) = (ids.last_mut(), encoding.get_ids().last()) {
            *last = sep;
        }
        self.forward(&ids).map_err(|e| format!("model: {e}"))
    }

    fn forward(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let device = Device::Cpu;
        let input = Tensor::new(ids, &device)?.unsqueeze(0)?;
        let types = input.zeros_like()?;
        let mask = input.ones_like()?;
        let hidden = self.model.forward(&input, &types, Some(&mask))?;
        // No padding: the mean over every token is the masked mean.
        let mean = hidden.mean(1)?.squeeze(0)?;
        let v: Vec<f32> = mean.to_vec1()?;
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        Ok(if norm > 0.0 {
            v.into_iter().map(|x| x / norm).collect()
        } else {
            v
        })
    }
}

/// The model's longest input, in tokens (with its two special tokens).
pub const MAX_TOKENS: usize = super::QUERY_TOKENS;
