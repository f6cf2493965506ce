//! The embedding decision model with its real files (installed by `cargo xtask fetch-model`;
//! CI installs them). Outside CI a missing install prints a SKIPPED line; under `CI=true` it
//! fails. Every text is invented for the test.
#![cfg(feature = "embedding")]
#![allow(clippy::print_stderr)]

use std::sync::Arc;

use compaction_core::StateTurn;
use compaction_core::{DecisionModel, DecisionState, ProbeRequest, Settings};
use decision_client::embedding::files::{
    MODEL_FILES, ModelDir, WEIGHTS_BYTES, WEIGHTS_FILE, resolve,
};
use decision_client::embedding::{EmbeddingModel, Encoder, VectorCache, cosine, state_vectors};
use decision_client::{DecisionAdapter, DecisionConfig, build_decision_model, process_env};

/// The installed model directory, or `None` (with a SKIPPED line) outside CI.
fn installed() -> Option<ModelDir> {
    match resolve(None, process_env) {
        Ok(dir) => Some(dir),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but the embedding model is not installed: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: the embedding model's files are absent ({e})");
            None
        }
    }
}

fn turn(age: usize, user: &str, assistant: &str) -> StateTurn {
    StateTurn {
        age,
        user: user.to_owned(),
        assistant: assistant.to_owned(),
        ..StateTurn::default()
    }
}

fn state(turns: &[(&str, &str)]) -> DecisionState {
    let n = turns.len();
    let turns: Vec<StateTurn> = turns
        .iter()
        .enumerate()
        .map(|(i, (u, a))| turn(n - 1 - i, u, a))
        .collect();
    let (latest, earlier) = turns.split_last().unwrap();
    DecisionState {
        earlier_discussion: earlier
            .iter()
            .map(StateTurn::render)
            .collect::<Vec<_>>()
            .join("\n\n"),
        latest_turn: latest.render(),
        turns,
        older: Vec::new(),
    }
}

const EARLIER: [(&str, &str); 3] = [
    (
        "How do sea otters keep warm in cold water without blubber?",
        "Their fur is the densest of any mammal, about a million hairs per square inch, trapping an insulating layer of air.",
    ),
    (
        "How much do they have to eat each day to stay warm?",
        "Roughly a quarter of their body weight, because their metabolic rate is two to three times that of a similar land mammal.",
    ),
    (
        "Does that high metabolism change when the water gets warmer?",
        "It drops somewhat; otters in warmer southern waters eat a smaller share of their weight.",
    ),
];

#[test]
fn paraphrases_are_closer_than_unrelated_questions() {
    let Some(dir) = installed() else { return };
    let encoder = Encoder::load(&dir).unwrap();
    let v = |t: &str| encoder.embed(t, 256).unwrap();
    let a = v("How do sea otters stay warm in icy water?");
    let b = v("What keeps sea otters warm when the sea is freezing?");
    let c = v("Which compiler flags make a Rust binary smaller?");
    assert_eq!(a.len(), 384);
    let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    assert!(
        cosine(&a, &b) > cosine(&a, &c) + 0.3,
        "{} {}",
        cosine(&a, &b),
        cosine(&a, &c)
    );
    // A text longer than the window is cut, not refused.
    let long = "otters ".repeat(600);
    assert_eq!(encoder.embed(&long, 256).unwrap().len(), 384);
}

/// The factory finds the installed files, the model loads on the first probe only, answers
/// a new subject with a higher p than a follow-up, and embeds each text once.
#[test]
fn auto_picks_the_installed_model_which_loads_lazily_and_embeds_each_turn_once() {
    let Some(_) = installed() else { return };
    let settings = Settings::default().effective().unwrap();
    let selected = build_decision_model(
        &settings,
        &DecisionConfig::from_map(&serde_json::Map::new()).unwrap(),
        |name| {
            if name == "OPENROUTER_API_KEY" {
                None
            } else {
                process_env(name)
            }
        },
    )
    .unwrap();
    assert_eq!(selected.adapter, DecisionAdapter::Embedding);
    assert!(
        selected
            .reason
            .starts_with("embedding model all-MiniLM-L6-v2"),
        "{}",
        selected.reason
    );
    assert_eq!(selected.model.info().system, "embedding");

    let dir = resolve(None, process_env).unwrap();
    let model = Arc::new(EmbeddingModel::new(dir));
    assert!(!model.is_loaded());
    let ask = |s: DecisionState| {
        let model = model.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move { model.decide(&ProbeRequest::new("m", s)).await.unwrap() })
    };
    let mut pivot = EARLIER.to_vec();
    pivot.push((
        "Different question: what interest rate did the European Central Bank set in its last meeting?",
        "It kept the deposit facility rate unchanged.",
    ));
    let answer = ask(state(&pivot));
    assert!(model.is_loaded());
    assert_eq!(
        answer.served_model.as_deref(),
        Some(decision_client::embedding::MODEL_NAME)
    );
    // Four turns: four queries, four replies; the pivot's query has two sentences, so its
    // last one is embedded too.
    assert_eq!(model.cached_vectors(), 9);
    let mut follow = EARLIER.to_vec();
    follow.push((
        "And in the coldest months, how much more do they eat?",
        "Up to a third of their body weight.",
    ));
    let follow_up = ask(state(&follow));
    // Only the new turn is embedded: its query and its reply.
    assert_eq!(model.cached_vectors(), 11);
    assert!(
        answer.probability > follow_up.probability,
        "pivot {} <= follow-up {}",
        answer.probability,
        follow_up.probability
    );
}

/// The one-shot `evaluate`: every process starts with an empty memory, so the vectors are
/// kept in a directory and a later process embeds only the turns no earlier one did. Counted
/// through the model's embedding counter, not timed.
#[test]
fn a_later_process_embeds_only_the_turn_no_earlier_process_embedded() {
    let Some(dir) = installed() else { return };
    let vectors = tempfile_dir("kept-vectors");
    let mut turns = EARLIER.to_vec();
    let first = EmbeddingModel::new(dir.clone()).with_vector_dir(vectors.clone());
    let p_first = first.probability(&state(&turns)).unwrap();
    // Three turns: three queries and three replies (every query one sentence).
    assert_eq!(first.embedded_texts(), 6);
    drop(first);

    turns.push((
        "And in the coldest months, how much more do they eat?",
        "Up to a third of their body weight.",
    ));
    let second = EmbeddingModel::new(dir.clone()).with_vector_dir(vectors.clone());
    let p_second = second.probability(&state(&turns)).unwrap();
    // Only the new turn: its query and its reply.
    assert_eq!(second.embedded_texts(), 2);
    assert_eq!(second.vector_dir(), Some(vectors.as_path()));

    // The kept vectors are the ones the encoder gives: the same p as with no directory,
    // where every turn is embedded again.
    let fresh = EmbeddingModel::new(dir.clone());
    assert_eq!(fresh.probability(&state(&turns)).unwrap(), p_second);
    assert_eq!(fresh.embedded_texts(), 8);
    let again = EmbeddingModel::new(dir).with_vector_dir(vectors.clone());
    assert_eq!(again.probability(&state(&EARLIER)).unwrap(), p_first);
    assert_eq!(again.embedded_texts(), 0);
    std::fs::remove_dir_all(&vectors).unwrap();
}

/// The probe embeds the texts it has not seen concurrently, one pass per text: every vector
/// equals, to float rounding, the one a single pass of that text gives on this thread, and a
/// text met twice (a repeated reply, a query's last sentence asked before) is embedded once.
#[test]
fn concurrent_passes_give_the_vectors_of_one_pass_each_and_embed_a_text_once() {
    let Some(dir) = installed() else { return };
    let encoder = Encoder::load(&dir).unwrap();
    let asked = "Which seaweeds grow fastest in cold water?";
    let turns = state(&[
        (
            asked,
            "Giant kelp can grow half a metre a day. Sugar kelp is slower but hardier. Both need nitrate-rich water.",
        ),
        (
            "What about the warm season?",
            "Growth slows in summer. Warm water carries fewer nutrients. Farms often harvest before it.",
        ),
        (
            &format!("Thanks, that settles the farms. {asked}"),
            "Giant kelp can grow half a metre a day. Sugar kelp is slower but hardier. Both need nitrate-rich water.",
        ),
    ])
    .turns;
    let cache = VectorCache::default();
    let vectors = state_vectors(&encoder, &cache, &[], &turns).unwrap();
    assert_eq!(
        vectors.earlier.len(),
        2,
        "no older turn: the window's earlier turns"
    );
    let one = |text: &str, cap: usize| encoder.embed(text, cap).unwrap();
    let same = |a: &[f32], b: &[f32]| {
        assert_eq!(a.len(), b.len());
        let gap = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(gap < 1e-6, "vectors differ by {gap}");
    };
    for (t, v) in turns
        .iter()
        .zip(vectors.earlier.iter().chain([&vectors.latest]))
    {
        same(&v.query, &one(&t.user, 256));
        same(&v.reply, &one(&t.assistant, 128));
        let sentences: Vec<&str> = t.assistant.split_inclusive(". ").map(str::trim).collect();
        assert_eq!(v.reply_sentences.len(), sentences.len());
        for (s, sv) in sentences.iter().zip(&v.reply_sentences) {
            same(sv, &one(s, 128));
        }
    }
    same(&vectors.latest_tail, &one(asked, 256));
    // Distinct texts: three queries, two replies, six sentences (the first turn's asked
    // again as the latest query's last sentence, its reply repeated by the latest).
    assert_eq!(cache.embedded(), 11);
    assert_eq!(cache.len(), 11);

    // The first turn as an older turn before a window of the other two: the earlier turns
    // are the older turn then the window's earlier one, each reply read sentence by sentence
    // (both are in the unit), the same vectors as with the whole window, and nothing is
    // embedded again.
    let wider = state_vectors(&encoder, &cache, &turns[..1], &turns[1..]).unwrap();
    assert_eq!(wider.earlier.len(), 2);
    same(&wider.earlier[0].query, &one(asked, 256));
    same(&wider.earlier[1].query, &one(&turns[1].user, 256));
    assert_eq!(wider.earlier[0].reply_sentences.len(), 3);
    assert_eq!(wider.earlier, vectors.earlier);
    assert_eq!(cache.embedded(), 11);
}

/// Weights of the right size that are not safetensors: the probe fails with the file's
/// name (the engine then fails open), and `embedding` still builds (the check is cheap).
#[test]
fn damaged_weights_are_named_when_the_model_loads() {
    let Some(good) = installed() else { return };
    let dir = tempfile_dir("damaged-model");
    for file in MODEL_FILES {
        if file != WEIGHTS_FILE {
            std::fs::copy(good.path().join(file), dir.join(file)).unwrap();
        }
    }
    let f = std::fs::File::create(dir.join(WEIGHTS_FILE)).unwrap();
    f.set_len(WEIGHTS_BYTES).unwrap();
    let config = DecisionConfig::from_map(
        serde_json::json!({"decision_adapter": "embedding", "decision_embedding_model_dir": dir})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let settings = Settings::default().effective().unwrap();
    let selected = build_decision_model(&settings, &config, |_| None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt
        .block_on(
            selected
                .model
                .decide(&ProbeRequest::new("m", state(&EARLIER))),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.safetensors: damaged"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ac-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
