//! Fits the embedding decision model's head and reports leave-one-session-out figures.
//!
//! ```text
//! cargo run --release -p adaptive-compaction-decision-client --features embedding \
//!     --example fit_embedding_model -- [--write] [--search] [--cases FILE] [--sessions DIR]... [--model-dir DIR]
//! ```
//!
//! 1. Every TIAGE case and every turn of every labelled session is turned into the decision
//!    state the engine sends (`decision_client::sessions`), embedded once (vectors cached in
//!    `target/embedding-vectors.bin`, keyed by text), and featurized
//!    (`decision_client::embedding::features`).
//! 2. Leave-one-session-out: for each session S, the head (logistic regression, L2, Newton's
//!    method from zero; Platt's A and B after it) is fitted on TIAGE **train** + every other
//!    session (weights) and TIAGE **dev** + every other session (Platt), then S is scored at
//!    τ = 0.75. The lexical model is refitted the same way, fold by fold, beside it.
//! 3. The shipped head is fitted the same way on every session; its TIAGE **test** figures are
//!    printed (the test split is never read by a fit). `--write` replaces the constants block
//!    of `src/embedding/head.rs`.
//!
//! Without `--cases` the repository's vendored TIAGE cases are read; without `--sessions` the
//! repository's `data/research-sessions/` and, when `COMPACTION_OUTSIDE_DATA` names it, the
//! shared `research-sessions/` outside the repository.
//!
//! `--shipped` scores every session and the TIAGE test split with the committed constants of
//! both models (no refit): the first-contact figures of sessions no fit has read.
//!
//! `--search` prints the pooled leave-one-session-out figures over a small grid of the
//! session weight and the L2 penalty (how they were chosen). Deterministic.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use compaction_core::state::DEFAULT_STATE_BUDGET_TOKENS;
use compaction_core::{CharsPerToken, DecisionState};
use decision_client::embedding::features::{FEATURE_NAMES, features, has_table, last_sentence};
use decision_client::embedding::files::resolve;
use decision_client::embedding::head;
use decision_client::embedding::{Encoder, QUERY_TOKENS, REPLY_TOKENS, StateVectors, TurnVectors};
use decision_client::eval::{load_cases, metrics, roc_auc};
use decision_client::offline::{Features, sigmoid};
use decision_client::sessions::{load_sessions, turn_cases};

const TAU: f64 = 0.75;
/// Newton iterations at most (it converges in about ten).
const STEPS: usize = 50;
/// Chosen with `--search` on the four shared sessions (see docs/DECISION-QUALITY.md).
const SESSION_WEIGHT: f64 = 40.0;
const L2: f64 = 0.001;

#[derive(Clone)]
struct Row {
    x: Vec<f64>,
    y: bool,
    w: f64,
    /// Lexical features, for the lexical model beside it.
    lex: Vec<f64>,
    /// `turn N` of a session, the case id of TIAGE.
    name: String,
    /// 1 in a research context (a research turn in the state), else 0.
    research: f64,
    /// p of the committed embedding head and of the committed lexical model (`--shipped`).
    shipped: (f64, f64),
}

/// Vectors by (text, max tokens), persisted between runs.
struct Store {
    encoder: Encoder,
    map: HashMap<(String, usize), Vec<f32>>,
    path: PathBuf,
    fresh: usize,
}

impl Store {
    fn open(encoder: Encoder, path: PathBuf) -> Store {
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

    fn vector(&mut self, text: &str, max: usize) -> Vec<f32> {
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

    fn save(&self) {
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

    fn state(&mut self, state: &DecisionState) -> StateVectors {
        let turns = if state.turns.is_empty() {
            decision_client::eval::state_from_markdown(
                &state.earlier_discussion,
                &state.latest_turn,
            )
            .turns
        } else {
            state.turns.clone()
        };
        let mut turn = |u: &str, a: &str| TurnVectors {
            query: self.vector(u, QUERY_TOKENS),
            reply: self.vector(a, REPLY_TOKENS),
        };
        let Some((latest, earlier)) = turns.split_last() else {
            return StateVectors::default();
        };
        let earlier = earlier
            .iter()
            .map(|t| turn(&t.user, &t.assistant))
            .collect();
        let latest_v = turn(&latest.user, &latest.assistant);
        let latest_tail = match last_sentence(&latest.user) {
            Some(tail) => self.vector(tail, QUERY_TOKENS),
            None => latest_v.query.clone(),
        };
        StateVectors {
            earlier,
            latest: latest_v,
            latest_tail,
            previous_table: turns
                .len()
                .checked_sub(2)
                .is_some_and(|i| has_table(&turns[i].assistant)),
        }
    }

    fn row(&mut self, state: &DecisionState, y: bool, w: f64, name: String) -> Row {
        let lexical = Features::of(state);
        let v = self.state(state);
        let x = features(&v, &lexical);
        Row {
            shipped: (
                head::probability(&x, lexical.research_context),
                decision_client::offline::probability(state),
            ),
            x: x.to_vec(),
            y,
            w,
            lex: lexical.fitted().to_vec(),
            name,
            research: if lexical.research_context { 1.0 } else { 0.0 },
        }
    }
}

/// A fitted head: weights, bias, Platt's A and B.
struct Head {
    w: Vec<f64>,
    b: f64,
    a: f64,
    /// Platt's shift in a research context.
    pc: f64,
    pb: f64,
}

impl Head {
    fn z(w: &[f64], b: f64, x: &[f64]) -> f64 {
        b + w.iter().zip(x).map(|(wi, xi)| wi * xi).sum::<f64>()
    }

    fn p(&self, r: &Row, x: fn(&Row) -> &[f64]) -> f64 {
        sigmoid(self.a * Self::z(&self.w, self.b, x(r)) + self.pc * r.research + self.pb)
    }

    /// Logistic regression on `fit`, then Platt on `calibrate`; `x` picks the features.
    fn fit(fit: &[Row], calibrate: &[Row], x: fn(&Row) -> &[f64], l2: f64) -> Head {
        let rows: Vec<(Vec<f64>, f64, f64)> = fit
            .iter()
            .map(|r| (x(r).to_vec(), f64::from(u8::from(r.y)), r.w))
            .collect();
        let (b, w) = newton(&rows, l2);
        let zs: Vec<(Vec<f64>, f64, f64)> = calibrate
            .iter()
            .map(|r| {
                (
                    vec![Self::z(&w, b, x(r)), r.research],
                    f64::from(u8::from(r.y)),
                    r.w,
                )
            })
            .collect();
        let (pb, a) = newton(&zs, 1e-6);
        Head {
            w,
            b,
            a: a[0],
            pc: a[1],
            pb,
        }
    }
}

/// Weighted L2 logistic regression by Newton's method (the bias is not penalized):
/// minimizes Σ wᵢ·loss(yᵢ, σ(b + w·xᵢ)) / Σ wᵢ + λ/2·|w|². Returns (b, w).
fn newton(rows: &[(Vec<f64>, f64, f64)], l2: f64) -> (f64, Vec<f64>) {
    let d = rows[0].0.len() + 1;
    let n: f64 = rows.iter().map(|r| r.2).sum();
    let mut theta = vec![0.0f64; d];
    for _ in 0..STEPS {
        let mut g = vec![0.0f64; d];
        let mut h = vec![vec![0.0f64; d]; d];
        for (xs, y, wt) in rows {
            let xa: Vec<f64> = std::iter::once(1.0).chain(xs.iter().copied()).collect();
            let z: f64 = theta.iter().zip(&xa).map(|(t, v)| t * v).sum();
            let p = sigmoid(z);
            let (e, s) = ((p - y) * wt / n, p * (1.0 - p) * wt / n);
            for i in 0..d {
                g[i] += e * xa[i];
                for j in 0..d {
                    h[i][j] += s * xa[i] * xa[j];
                }
            }
        }
        for i in 1..d {
            g[i] += l2 * theta[i];
            h[i][i] += l2;
        }
        let step = solve(h, g);
        let mut moved = 0.0f64;
        for (t, s) in theta.iter_mut().zip(&step) {
            *t -= s;
            moved = moved.max(s.abs());
        }
        if moved < 1e-9 {
            break;
        }
    }
    (theta[0], theta[1..].to_vec())
}

/// Solves h·s = g by Gaussian elimination with partial pivoting.
fn solve(mut h: Vec<Vec<f64>>, mut g: Vec<f64>) -> Vec<f64> {
    let d = g.len();
    for c in 0..d {
        let p = (c..d)
            .max_by(|&a, &b| h[a][c].abs().total_cmp(&h[b][c].abs()))
            .unwrap_or(c);
        h.swap(c, p);
        g.swap(c, p);
        let pivot = if h[c][c].abs() < 1e-12 {
            1e-12
        } else {
            h[c][c]
        };
        for r in c + 1..d {
            let f = h[r][c] / pivot;
            let pivot_row = h[c].clone();
            for (x, p) in h[r].iter_mut().zip(&pivot_row).skip(c) {
                *x -= f * p;
            }
            g[r] -= f * g[c];
        }
    }
    let mut s = vec![0.0f64; d];
    for c in (0..d).rev() {
        let rest: f64 = (c + 1..d).map(|k| h[c][k] * s[k]).sum();
        let pivot = if h[c][c].abs() < 1e-12 {
            1e-12
        } else {
            h[c][c]
        };
        s[c] = (g[c] - rest) / pivot;
    }
    s
}

fn embedding_x(r: &Row) -> &[f64] {
    &r.x
}
fn lexical_x(r: &Row) -> &[f64] {
    &r.lex
}

/// One session scored by a head fitted without it: (session, [(p, label, turn)]).
type Fold = (String, Vec<(f64, bool, String)>);

struct Data {
    train: Vec<Row>,
    dev: Vec<Row>,
    test: Vec<Row>,
    sessions: Vec<(String, Vec<Row>)>,
}

impl Data {
    fn with(&self, split: &[Row], sessions: &[&(String, Vec<Row>)], weight: f64) -> Vec<Row> {
        let mut rows = split.to_vec();
        for (_, s) in sessions {
            rows.extend(s.iter().map(|r| Row {
                w: weight,
                ..r.clone()
            }));
        }
        rows
    }

    fn head(&self, held_out: Option<&str>, x: fn(&Row) -> &[f64], weight: f64, l2: f64) -> Head {
        let others: Vec<&(String, Vec<Row>)> = self
            .sessions
            .iter()
            .filter(|(n, _)| Some(n.as_str()) != held_out)
            .collect();
        Head::fit(
            &self.with(&self.train, &others, weight),
            &self.with(&self.dev, &others, weight),
            x,
            l2,
        )
    }

    /// Every session scored by the head fitted without it: (session, [(p, y, turn)]).
    fn loso(&self, x: fn(&Row) -> &[f64], weight: f64, l2: f64) -> Vec<Fold> {
        self.sessions
            .iter()
            .map(|(name, rows)| {
                let head = self.head(Some(name), x, weight, l2);
                let scored = rows
                    .iter()
                    .map(|r| (head.p(r, x), r.y, r.name.clone()))
                    .collect();
                (name.clone(), scored)
            })
            .collect()
    }
}

fn pooled(folds: &[Fold]) -> Vec<(f64, bool)> {
    folds
        .iter()
        .flat_map(|(_, s)| s.iter().map(|(p, y, _)| (*p, *y)))
        .collect()
}

fn report(label: &str, folds: &[Fold]) {
    println!("## {label} (tau {TAU})");
    for (name, scored) in folds {
        let pairs: Vec<(f64, bool)> = scored.iter().map(|(p, y, _)| (*p, *y)).collect();
        let Some(m) = metrics(&pairs, TAU) else {
            continue;
        };
        let misses: Vec<String> = scored
            .iter()
            .filter(|(p, y, _)| (*p >= TAU) != *y)
            .map(|(p, y, t)| {
                format!(
                    "{t} {} p={p:.2}",
                    if *y { "pivot missed" } else { "false COMPRESS" }
                )
            })
            .collect();
        println!(
            "{name}: n={} recall={:.2} specificity={:.2} auc={:.3} ece={:.3} | misses: {}",
            m.n,
            m.recall_at_tau,
            m.specificity_at_tau,
            m.auc,
            m.ece,
            if misses.is_empty() {
                "none".to_owned()
            } else {
                misses.join("; ")
            }
        );
    }
    if let Some(m) = metrics(&pooled(folds), TAU) {
        println!(
            "all sessions: n={} recall={:.3} specificity={:.3} auc={:.3} ece={:.3}",
            m.n, m.recall_at_tau, m.specificity_at_tau, m.auc, m.ece
        );
    }
}

/// `--shipped`: every session scored by the committed constants (no refit), and TIAGE test.
fn shipped(data: &Data) {
    for (label, pick) in [
        (
            "committed embedding head",
            (|r: &Row| r.shipped.0) as fn(&Row) -> f64,
        ),
        ("committed lexical model", |r: &Row| r.shipped.1),
    ] {
        let folds: Vec<Fold> = data
            .sessions
            .iter()
            .map(|(name, rows)| {
                let scored = rows
                    .iter()
                    .map(|r| (pick(r), r.y, r.name.clone()))
                    .collect();
                (name.clone(), scored)
            })
            .collect();
        report(label, &folds);
        let test: Vec<(f64, bool)> = data.test.iter().map(|r| (pick(r), r.y)).collect();
        if let Some(m) = metrics(&test, TAU) {
            println!("tiage test ({label}): {m}");
        }
    }
}

fn constants_block(head: &Head, note: &str) -> String {
    let mut out = String::from("// FITTED-CONSTANTS-BEGIN\n");
    out.push_str(note);
    out.push_str("/// Fitted weights, same order as [`super::features::FEATURE_NAMES`].\n");
    out.push_str("#[allow(clippy::approx_constant)]\n");
    out.push_str("pub const WEIGHTS: [f64; N_FEATURES] = [\n");
    for (name, wi) in FEATURE_NAMES.iter().zip(&head.w) {
        out.push_str(&format!("    {wi:.4}, // {name}\n"));
    }
    out.push_str("];\n");
    out.push_str(&format!(
        "/// Fitted with [`WEIGHTS`].\npub const BIAS: f64 = {:.4};\n",
        head.b
    ));
    out.push_str(&format!(
        "/// Platt scaling slope.\npub const PLATT_A: f64 = {:.4};\n",
        head.a
    ));
    out.push_str(&format!(
        "/// Platt scaling intercept.\npub const PLATT_B: f64 = {:.4};\n",
        head.pb
    ));
    out.push_str(&format!(
        "/// Platt scaling's shift in a research context.\npub const PLATT_RESEARCH: f64 = {:.4};\n",
        head.pc
    ));
    out.push_str("// FITTED-CONSTANTS-END\n");
    out
}

fn write_constants(path: &Path, block: &str) -> std::io::Result<()> {
    let src = std::fs::read_to_string(path)?;
    let (Some(start), Some(end)) = (
        src.find("// FITTED-CONSTANTS-BEGIN\n"),
        src.find("// FITTED-CONSTANTS-END\n"),
    ) else {
        return Err(std::io::Error::other("constants markers not found"));
    };
    let end = end + "// FITTED-CONSTANTS-END\n".len();
    std::fs::write(path, format!("{}{block}{}", &src[..start], &src[end..]))
}

struct Args {
    write: bool,
    search: bool,
    shipped: bool,
    cases: PathBuf,
    sessions: Vec<PathBuf>,
    model_dir: Option<PathBuf>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        write: false,
        search: false,
        shipped: false,
        cases: test_data::repo_path(test_data::TIAGE_CASES),
        sessions: Vec::new(),
        model_dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .map(PathBuf::from)
                .ok_or(format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--write" => a.write = true,
            "--search" => a.search = true,
            "--shipped" => a.shipped = true,
            "--cases" => a.cases = value()?,
            "--sessions" => a.sessions.push(value()?),
            "--model-dir" => a.model_dir = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.sessions.is_empty() {
        // The repository's sessions, and the shared ones outside it only when asked for.
        a.sessions
            .push(test_data::repo_path(test_data::RESEARCH_SESSIONS));
        match test_data::outside_path(test_data::RESEARCH_SESSIONS) {
            Ok(dir) => a.sessions.push(dir),
            Err(why) => eprintln!("not reading the shared sessions: {why}"),
        }
    }
    Ok(a)
}

fn load(a: &Args) -> Result<(Data, Store), String> {
    let dir =
        resolve(a.model_dir.as_deref(), |n| std::env::var(n).ok()).map_err(|e| e.to_string())?;
    let encoder = Encoder::load(&dir).map_err(|e| e.to_string())?;
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut store = Store::open(encoder, manifest.join("../../target/embedding-vectors.bin"));
    let cases = load_cases(&a.cases).map_err(|e| e.to_string())?;
    let mut split = |name: &str| -> Vec<Row> {
        cases
            .iter()
            .filter(|c| c.split() == name)
            .map(|c| store.row(&c.state(), c.label, 1.0, c.id.clone()))
            .collect()
    };
    let (train, dev, test) = (split("train"), split("dev"), split("test"));
    let mut sessions = Vec::new();
    for d in &a.sessions {
        for s in load_sessions(d).map_err(|e| e.to_string())? {
            let rows = turn_cases(&s, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS)
                .iter()
                .map(|t| store.row(&t.state, t.expect.pivot, 1.0, format!("turn {}", t.turn)))
                .collect();
            sessions.push((s.session.clone(), rows));
        }
    }
    store.save();
    if train.is_empty() || dev.is_empty() {
        return Err(format!("{}: needs train and dev cases", a.cases.display()));
    }
    Ok((
        Data {
            train,
            dev,
            test,
            sessions,
        },
        store,
    ))
}

fn main() -> ExitCode {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (data, _store) = match load(&a) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if a.shipped {
        shipped(&data);
        return ExitCode::SUCCESS;
    }
    if a.search {
        for weight in [10.0, 20.0, 40.0, 80.0] {
            for l2 in [0.00001, 0.0001, 0.001] {
                let pairs = pooled(&data.loso(embedding_x, weight, l2));
                if let Some(m) = metrics(&pairs, TAU) {
                    println!(
                        "weight={weight} l2={l2}: recall={:.3} specificity={:.3} auc={:.3} ece={:.3}",
                        m.recall_at_tau, m.specificity_at_tau, m.auc, m.ece
                    );
                }
            }
        }
        return ExitCode::SUCCESS;
    }
    report(
        "embedding model, leave-one-session-out",
        &data.loso(embedding_x, SESSION_WEIGHT, L2),
    );
    report(
        "lexical model, refitted per fold, leave-one-session-out",
        &data.loso(lexical_x, SESSION_WEIGHT, L2),
    );
    let head = data.head(None, embedding_x, SESSION_WEIGHT, L2);
    let lexical = data.head(None, lexical_x, SESSION_WEIGHT, L2);
    for (label, h, x) in [
        ("embedding", &head, embedding_x as fn(&Row) -> &[f64]),
        ("lexical (refitted)", &lexical, lexical_x),
    ] {
        for (split, rows) in [
            ("train", &data.train),
            ("dev", &data.dev),
            ("test", &data.test),
        ] {
            let scored: Vec<(f64, bool)> = rows.iter().map(|r| (h.p(r, x), r.y)).collect();
            if let Some(m) = metrics(&scored, TAU) {
                println!("tiage {split} ({label}, all-session head): {m}");
            }
        }
    }
    let test_auc = roc_auc(
        &data
            .test
            .iter()
            .map(|r| (head.p(r, embedding_x), r.y))
            .collect::<Vec<_>>(),
    );
    let names: Vec<&str> = data.sessions.iter().map(|(n, _)| n.as_str()).collect();
    let note = format!(
        "// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding\n// --example fit_embedding_model -- --write`: weights on {} TIAGE train cases + sessions\n// {names:?} (weight {SESSION_WEIGHT}, L2 {L2}), Platt on {} TIAGE dev cases + the same sessions.\n// TIAGE test AUC {test_auc:.3}.\n",
        data.train.len(),
        data.dev.len()
    );
    let block = constants_block(&head, &note);
    print!("{block}");
    if a.write {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/embedding/head.rs");
        if let Err(e) = write_constants(&path, &block) {
            eprintln!("{}: cannot write the constants: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote the constants into {}", path.display());
    }
    ExitCode::SUCCESS
}
