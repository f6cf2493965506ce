//! The fit's rows: every decision state embedded once (vectors persisted between runs,
//! keyed by text) and featurized.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use compaction_core::{DecisionState, StateTurn};
use decision_client::embedding::features::features;
use decision_client::embedding::head;
use decision_client::embedding::{Encoder, StateVectors, state_vectors_with};
use decision_client::offline::Features;

#[derive(Clone)]
pub(crate) struct Row {
    pub(crate) x: Vec<f64>,
    /// `x` in the separate layout (`--separate`, the ablation): the first block only outside
    /// a research context, so the two contexts share no weight.
    pub(crate) xs: Vec<f64>,
    pub(crate) y: bool,
    pub(crate) w: f64,
    /// Lexical features, for the lexical model beside it.
    pub(crate) lex: Vec<f64>,
    /// `turn N` of a session, the case id of TIAGE.
    pub(crate) name: String,
    /// 1 in a research context (a research turn in the state), else 0.
    pub(crate) research: f64,
    /// p of the committed embedding head and of the committed lexical model (`--shipped`).
    pub(crate) shipped: (f64, f64),
}

/// Vectors by (text, max tokens), persisted between runs.
pub(crate) struct Store {
    pub(crate) encoder: Encoder,
    pub(crate) map: HashMap<(String, usize), Vec<f32>>,
    pub(crate) path: PathBuf,
    pub(crate) fresh: usize,
}

impl Store {
    pub(crate) fn open(encoder: Encoder, path: PathBuf) -> Store {
        let mut map = HashMap::new();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut bytes = Vec::new();
            if f.read_to_end(&mut bytes).is_ok() {
                let mut i = 0;
                let take = |i: &mut usize, n: usize| {
                    let s = bytes.get(*i..*i + n);
                    *i += n;
                    s
                };
                while let Some(len) = take(&mut i, 4) {
                    let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
                    let (Some(text), Some(max), Some(v)) =
                        (take(&mut i, len), take(&mut i, 4), take(&mut i, 384 * 4))
                    else {
                        break;
                    };
                    let text = String::from_utf8_lossy(text).into_owned();
                    let max = u32::from_le_bytes(max.try_into().unwrap_or_default()) as usize;
                    let v = v
                        .chunks(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                        .collect();
                    map.insert((text, max), v);
                }
            }
        }
        Store {
            encoder,
            map,
            path,
            fresh: 0,
        }
    }

    pub(crate) fn vector(&mut self, text: &str, max: usize) -> Vec<f32> {
        let key = (text.to_owned(), max);
        if let Some(v) = self.map.get(&key) {
            return v.clone();
        }
        let v = self
            .encoder
            .embed(text, max)
            .unwrap_or_else(|e| panic!("embedding {text:?}: {e}"));
        self.fresh += 1;
        self.map.insert(key, v.clone());
        v
    }

    pub(crate) fn save(&self) {
        if self.fresh == 0 {
            return;
        }
        let mut out = Vec::new();
        for ((text, max), v) in &self.map {
            out.extend((text.len() as u32).to_le_bytes());
            out.extend(text.as_bytes());
            out.extend((*max as u32).to_le_bytes());
            for x in v {
                out.extend(x.to_le_bytes());
            }
        }
        if let Err(e) = std::fs::File::create(&self.path).and_then(|mut f| f.write_all(&out)) {
            eprintln!("{}: cannot save the vectors: {e}", self.path.display());
        }
    }

    /// The vectors of `state` as a probe computes them
    /// ([`decision_client::embedding::state_vectors_with`]), the window's earlier turns after
    /// `older` (the state's own `DecisionState::older`, or none for `--window-only`).
    pub(crate) fn state(&mut self, state: &DecisionState, older: &[StateTurn]) -> StateVectors {
        let turns = if state.turns.is_empty() {
            decision_client::eval::state_from_markdown(
                &state.earlier_discussion,
                &state.latest_turn,
            )
            .turns
        } else {
            state.turns.clone()
        };
        state_vectors_with(older, &turns, &mut |text, max| Ok(self.vector(text, max)))
            .unwrap_or_else(|e| panic!("vectors of a state: {e}"))
    }

    pub(crate) fn row(
        &mut self,
        state: &DecisionState,
        older: &[StateTurn],
        y: bool,
        w: f64,
        name: String,
    ) -> Row {
        let lexical = Features::of(state);
        let v = self.state(state, older);
        let x = features(&v, &lexical);
        Row {
            shipped: (
                head::probability(&x, lexical.research_context),
                decision_client::offline::probability(state),
            ),
            xs: separate_layout(&x),
            x: x.to_vec(),
            y,
            w,
            lex: lexical.fitted().to_vec(),
            name,
            research: if lexical.research_context { 1.0 } else { 0.0 },
        }
    }
}

/// The separate layout of the features: the shared block zeroed in a research context
/// (where the research block holds the same values).
pub(crate) fn separate_layout(x: &[f64]) -> Vec<f64> {
    use decision_client::embedding::features::{N_BASE, N_FEATURES};
    let mut out = x.to_vec();
    if x[N_FEATURES - 1] > 0.0 {
        out[..N_BASE].iter_mut().for_each(|v| *v = 0.0);
    }
    out
}
