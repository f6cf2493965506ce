//! The embedding model as a [`DecisionModel`]: the encoder loaded on the first probe, and
//! every text's vector cached in memory and, with a vector directory, on disk for the next
//! process ([`super::disk`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use compaction_core::StateTurn;
use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, DecisionState, ModelInfo, ProbeRequest,
};

use super::disk::DiskVectors;
use super::encoder::Encoder;
use super::features::{self, StateVectors, TurnVectors};
use super::files::{ModelDir, ModelFileError};
use super::{CACHE_ENTRIES, MODEL_NAME, QUERY_TOKENS, REPLY_TOKENS, probability};

/// Vectors by (hash of the text, tokens embedded).
type Vectors = HashMap<(u64, usize), Arc<[f32]>>;

/// Vectors by text, computed once: in memory, and in a directory when one is given.
#[derive(Debug, Default)]
pub struct VectorCache {
    map: Mutex<Vectors>,
    disk: Option<DiskVectors>,
    /// Texts the encoder embedded through this cache (neither in memory nor on disk).
    embedded: AtomicUsize,
}

fn key(text: &str, max_tokens: usize) -> (u64, usize) {
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    (h.finish(), max_tokens)
}

impl VectorCache {
    /// A cache that also keeps every vector in `dir` and reads the vectors kept there.
    pub fn in_dir(dir: PathBuf) -> VectorCache {
        VectorCache {
            disk: Some(DiskVectors::new(dir)),
            ..VectorCache::default()
        }
    }

    /// The directory vectors are kept in, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.disk.as_ref().map(DiskVectors::dir)
    }

    /// The vector of `text`'s first `max_tokens` tokens, embedded by `encoder` unless cached.
    pub fn vector(
        &self,
        encoder: &Encoder,
        text: &str,
        max_tokens: usize,
    ) -> Result<Arc<[f32]>, String> {
        let k = key(text, max_tokens);
        if let Some(v) = self.lock().get(&k) {
            return Ok(v.clone());
        }
        let kept = self.disk.as_ref().and_then(|d| d.get(text, max_tokens));
        let v: Arc<[f32]> = match kept {
            Some(v) => v.into(),
            None => {
                let v = encoder.embed(text, max_tokens)?;
                self.embedded.fetch_add(1, Ordering::Relaxed);
                if let Some(disk) = &self.disk {
                    disk.put(text, max_tokens, &v);
                }
                v.into()
            }
        };
        self.insert(k, v.clone());
        Ok(v)
    }

    fn insert(&self, k: (u64, usize), v: Arc<[f32]>) {
        let mut map = self.lock();
        if map.len() >= CACHE_ENTRIES {
            map.clear();
        }
        map.insert(k, v);
    }

    /// Caches the vector of every `(text, max_tokens)` of `wanted`: those found neither in
    /// memory nor on disk are embedded concurrently, one pass per text on up to one thread
    /// per core (candle's matrix products leave a core idle on these short inputs). Each
    /// vector is the one [`VectorCache::vector`] gives: the same [`Encoder::embed`] of the
    /// same text.
    pub fn fill(&self, encoder: &Encoder, wanted: &[(&str, usize)]) -> Result<(), String> {
        let mut missing: Vec<(&str, usize)> = Vec::new();
        for &(text, max_tokens) in wanted {
            let k = key(text, max_tokens);
            if self.lock().contains_key(&k) || missing.contains(&(text, max_tokens)) {
                continue;
            }
            match self.disk.as_ref().and_then(|d| d.get(text, max_tokens)) {
                Some(v) => self.insert(k, v.into()),
                None => missing.push((text, max_tokens)),
            }
        }
        // Longest first, so that the threads finish together.
        missing.sort_by_key(|&(text, _)| std::cmp::Reverse(text.len()));
        for (&(text, max_tokens), v) in missing.iter().zip(embed_all(encoder, &missing)?) {
            self.embedded.fetch_add(1, Ordering::Relaxed);
            if let Some(disk) = &self.disk {
                disk.put(text, max_tokens, &v);
            }
            self.insert(key(text, max_tokens), v.into());
        }
        Ok(())
    }

    /// Texts the encoder embedded through this cache: those found neither in memory nor in
    /// the directory (the test seam of "no turn is embedded twice").
    pub fn embedded(&self) -> usize {
        self.embedded.load(Ordering::Relaxed)
    }

    /// Vectors held in memory.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vectors> {
        // A panic while holding the lock leaves a usable map of complete entries.
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The vectors of `texts` (text, token cap), in order: one [`Encoder::embed`] pass per text,
/// the passes shared out among up to one scoped thread per core.
fn embed_all(encoder: &Encoder, texts: &[(&str, usize)]) -> Result<Vec<Vec<f32>>, String> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(texts.len());
    if workers <= 1 {
        return texts.iter().map(|&(t, m)| encoder.embed(t, m)).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(text, max_tokens)) = texts.get(i) else {
                return done;
            };
            done.push((i, encoder.embed(text, max_tokens)));
        }
    };
    let mut out: Vec<Option<Result<Vec<f32>, String>>> = vec![None; texts.len()];
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
        let mine = work();
        let theirs = helpers.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        for (i, v) in theirs.flatten().chain(mine) {
            out[i] = Some(v);
        }
    });
    out.into_iter()
        .map(|v| v.unwrap_or_else(|| Err("a text was not embedded".to_owned())))
        .collect()
}

/// The vectors of a decision state's turns, from `cache`: `turns` are the state's own (the
/// 500-token window, latest last), `older` the uncovered turns before them
/// (`DecisionState::older`). The texts not cached yet are embedded first, concurrently
/// ([`VectorCache::fill`]), then every vector is read from the cache
/// ([`state_vectors_with`] says which texts).
pub fn state_vectors(
    encoder: &Encoder,
    cache: &VectorCache,
    older: &[StateTurn],
    turns: &[StateTurn],
) -> Result<StateVectors, String> {
    let mut wanted = Vec::new();
    state_vectors_with(older, turns, &mut |text, max_tokens| {
        wanted.push((text, max_tokens));
        Ok(Vec::new())
    })?;
    cache.fill(encoder, &wanted)?;
    state_vectors_with(older, turns, &mut |text, max_tokens| {
        cache.vector(encoder, text, max_tokens).map(|v| v.to_vec())
    })
}

/// The vectors of `older` and `turns`, each text's vector from `vector` (its text and token
/// cap): the one owner of which texts a probe reads, shared by [`state_vectors`] and the fit
/// example (which keeps its vectors in its own file). `earlier` holds `older` then the
/// window's earlier turns.
pub fn state_vectors_with<'t>(
    older: &'t [StateTurn],
    turns: &'t [StateTurn],
    vector: &mut dyn FnMut(&'t str, usize) -> Result<Vec<f32>, String>,
) -> Result<StateVectors, String> {
    let Some((latest, earlier)) = turns.split_last() else {
        return Ok(StateVectors::default());
    };
    let mut turn = |t: &'t StateTurn, with_sentences: bool| -> Result<TurnVectors, String> {
        Ok(TurnVectors {
            query: vector(&t.user, QUERY_TOKENS)?,
            reply: vector(&t.assistant, REPLY_TOKENS)?,
            reply_sentences: if with_sentences {
                features::sentences(&t.assistant)
                    .into_iter()
                    .map(|s| vector(s, REPLY_TOKENS))
                    .collect::<Result<_, _>>()?
            } else {
                Vec::new()
            },
        })
    };
    // The latest reply's sentences are embedded now, once, for the next probe (where it is
    // the previous reply); the unit's replies are read sentence by sentence.
    let latest_vectors = turn(latest, true)?;
    // The unit (the last `UNIT_TURNS` earlier turns) is read sentence by sentence.
    let known: Vec<&StateTurn> = older.iter().chain(earlier).collect();
    let unit_start = known.len().saturating_sub(features::UNIT_TURNS);
    let earlier_vectors = known
        .iter()
        .enumerate()
        .map(|(i, t)| turn(t, i >= unit_start))
        .collect::<Result<_, _>>()?;
    let latest_tail = match features::last_sentence(&latest.user) {
        Some(tail) => vector(tail, QUERY_TOKENS)?,
        None => latest_vectors.query.clone(),
    };
    Ok(StateVectors {
        earlier: earlier_vectors,
        latest: latest_vectors,
        latest_tail,
        previous_table: earlier
            .last()
            .is_some_and(|t| features::has_table(&t.assistant)),
    })
}

/// The embedding model as a [`DecisionModel`]; the encoder loads on the first probe.
pub struct EmbeddingModel {
    dir: ModelDir,
    encoder: OnceLock<Result<Arc<Encoder>, String>>,
    cache: VectorCache,
}

impl std::fmt::Debug for EmbeddingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingModel")
            .field("dir", &self.dir)
            .field("loaded", &self.encoder.get().is_some())
            .field("cached_vectors", &self.cache.len())
            .finish()
    }
}

impl EmbeddingModel {
    /// The model over the files of `dir`, not yet loaded.
    pub fn new(dir: ModelDir) -> EmbeddingModel {
        EmbeddingModel {
            dir,
            encoder: OnceLock::new(),
            cache: VectorCache::default(),
        }
    }

    /// The model with its encoder already loaded (a benchmark, a batch evaluation).
    pub fn loaded(dir: ModelDir) -> Result<EmbeddingModel, ModelFileError> {
        let encoder = Encoder::load(&dir)?;
        let model = EmbeddingModel::new(dir);
        let _ = model.encoder.set(Ok(Arc::new(encoder)));
        Ok(model)
    }

    /// Whether the encoder has been loaded (it loads on the first probe).
    pub fn is_loaded(&self) -> bool {
        self.encoder.get().is_some()
    }

    /// The model keeping every turn's vector in `dir` and reading those kept there by
    /// earlier processes (the one-shot `compaction evaluate`).
    pub fn with_vector_dir(mut self, dir: PathBuf) -> EmbeddingModel {
        self.cache = VectorCache::in_dir(dir);
        self
    }

    /// The directory vectors are kept in, if any.
    pub fn vector_dir(&self) -> Option<&Path> {
        self.cache.dir()
    }

    /// The vectors cached in memory so far.
    pub fn cached_vectors(&self) -> usize {
        self.cache.len()
    }

    /// Texts this model has embedded (found neither in memory nor in the vector directory).
    pub fn embedded_texts(&self) -> usize {
        self.cache.embedded()
    }

    /// The encoder, loading it on first use.
    pub fn encoder(&self) -> Result<Arc<Encoder>, String> {
        self.encoder
            .get_or_init(|| {
                Encoder::load(&self.dir)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// p for `state`.
    pub fn probability(&self, state: &DecisionState) -> Result<f64, String> {
        let encoder = self.encoder()?;
        let turns = crate::offline::turns_of(state);
        let vectors = state_vectors(&encoder, &self.cache, &state.older, &turns)?;
        let p = probability(&vectors, state);
        Ok(if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.5
        })
    }
}

#[async_trait]
impl DecisionModel for EmbeddingModel {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("embedding", "local", MODEL_NAME.to_owned())
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        self.probability(&request.state)
            .map(|p| DecisionAnswer::new(p).with_served_model(MODEL_NAME))
            .map_err(|e| AdapterError::from(format!("embedding model: {e}")))
    }
}
