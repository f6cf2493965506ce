//! Fits the embedding decision model's head and reports leave-one-session-out figures.
//!
//! ```text
//! cargo run --release -p adaptive-compaction-decision-client --features embedding,eval \
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

mod logistic;
mod nested;
mod store;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use compaction_core::CharsPerToken;
use compaction_core::DEFAULT_STATE_BUDGET_TOKENS;
use decision_client::embedding::Encoder;
use decision_client::embedding::features::{N_BASE, N_FEATURES, SIMILARITY_NAMES, feature_names};
use decision_client::embedding::files::resolve;
use decision_client::eval::{load_cases, metrics, roc_auc};
use decision_client::sessions::{load_sessions, turn_cases};

use logistic::Head;
use store::{Row, Store, separate_layout};

const TAU: f64 = 0.75;
/// Chosen with `--search` on the four shared sessions' leave-one-session-out figures and TIAGE
/// dev (the rule, fixed before the search: the highest pivot recall at specificity ≥ 0.95,
/// then the highest TIAGE dev AUC; see docs/DECISION-QUALITY.md).
const SESSION_WEIGHT: f64 = 5.0;
const L2: f64 = 0.0001;
/// The penalty of the research block (research weights = shared + research block).
const RESEARCH_L2: f64 = 0.0001;

/// The L2 penalties: `l2` on every weight but the research block's, `research` on those.
#[derive(Clone, Copy, Debug)]
struct Reg {
    l2: f64,
    research: f64,
}

const REG: Reg = Reg {
    l2: L2,
    research: RESEARCH_L2,
};

fn embedding_x(r: &Row) -> &[f64] {
    &r.x
}
fn separate_x(r: &Row) -> &[f64] {
    &r.xs
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
    /// The sessions `--search` chooses on (those read from outside the repository): the
    /// repository's sessions are only reported.
    tuning: Vec<String>,
    /// No research prior: every head keeps δ = 0.
    no_prior: bool,
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

    /// The head fitted on TIAGE and every session but `left_out` (no research prior).
    fn head_without(
        &self,
        left_out: &[&str],
        x: fn(&Row) -> &[f64],
        weight: f64,
        reg: Reg,
    ) -> Head {
        let others: Vec<&(String, Vec<Row>)> = self
            .sessions
            .iter()
            .filter(|(n, _)| !left_out.contains(&n.as_str()))
            .collect();
        let d = x(&self.train[0]).len();
        // The embedding features' research block (a shift from the shared weights in a
        // research context) has its own penalty; the lexical features have one block.
        let penalty: Vec<f64> = (0..d)
            .map(|i| {
                if d == N_FEATURES && (N_BASE..2 * N_BASE).contains(&i) {
                    reg.research
                } else {
                    reg.l2
                }
            })
            .collect();
        Head::fit(
            &self.with(&self.train, &others, weight),
            &self.with(&self.dev, &others, weight),
            x,
            &penalty,
        )
    }

    /// Every session scored by the head fitted without it: (session, [(p, y, turn)]).
    fn loso(&self, x: fn(&Row) -> &[f64], weight: f64, reg: Reg) -> Vec<Fold> {
        self.loso_of(|_| true, x, weight, reg)
    }

    /// [`Data::loso`] for the sessions `keep` names.
    fn loso_of(
        &self,
        keep: impl Fn(&str) -> bool,
        x: fn(&Row) -> &[f64],
        weight: f64,
        reg: Reg,
    ) -> Vec<Fold> {
        self.sessions
            .iter()
            .filter(|(name, _)| keep(name))
            .map(|(name, rows)| {
                let head = self.nested_head(&[name], x, weight, reg);
                let scored = rows
                    .iter()
                    .map(|r| (head.p(r, x), r.y, r.name.clone()))
                    .collect();
                (
                    format!(
                        "{name} (prior shift {:.1}, research L2 {})",
                        head.shift, head.research_l2
                    ),
                    scored,
                )
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
    let all = pooled(folds);
    if let Some(m) = metrics(&all, TAU) {
        println!(
            "all sessions: n={} recall={:.3} specificity={:.3} auc={:.3} ece={:.3}",
            m.n, m.recall_at_tau, m.specificity_at_tau, m.auc, m.ece
        );
        println!("{}", operating_points(&all));
    }
}

/// Where the pooled ranking could operate if the threshold moved (a diagnosis, never a
/// choice: τ is the spec's): the best specificity with recall ≥ 0.90, and the threshold
/// where the smaller of recall and specificity is largest.
fn operating_points(pairs: &[(f64, bool)]) -> String {
    let positives = pairs.iter().filter(|(_, y)| *y).count().max(1) as f64;
    let negatives = pairs.iter().filter(|(_, y)| !*y).count().max(1) as f64;
    let at = |t: f64| {
        let tp = pairs.iter().filter(|(p, y)| *y && *p >= t).count() as f64;
        let tn = pairs.iter().filter(|(p, y)| !*y && *p < t).count() as f64;
        (tp / positives, tn / negatives)
    };
    let mut best_spec = (0.0, 0.0);
    let mut best_min = (0.0, 0.0, 0.0, 0.0);
    for (t, _) in pairs {
        let (recall, spec) = at(*t);
        if recall >= 0.90 && spec > best_spec.0 {
            best_spec = (spec, *t);
        }
        if recall.min(spec) > best_min.0 {
            best_min = (recall.min(spec), *t, recall, spec);
        }
    }
    format!(
        "operating points (diagnosis): best specificity at recall >= 0.90 is {:.3} (threshold \
         {:.3}); max min(recall, specificity) {:.3} at threshold {:.3} (recall {:.3}, \
         specificity {:.3})",
        best_spec.0, best_spec.1, best_min.0, best_min.1, best_min.2, best_min.3
    )
}

/// `--search`: the grid of session weight and L2, judged only on the tuning sessions'
/// leave-one-session-out figures and on TIAGE dev (the repository's sessions and TIAGE test
/// are not printed: they are reported, never chosen on).
fn search(data: &Data) {
    println!("tuning sessions: {:?}", data.tuning);
    for weight in [5.0, 10.0, 20.0, 40.0, 80.0] {
        for l2 in [0.00001, 0.00003, 0.0001, 0.001] {
            let folds = data.loso_of(
                |n| data.tuning.iter().any(|t| t == n),
                embedding_x,
                weight,
                Reg { l2, research: l2 },
            );
            let head = data.nested_head(&[], embedding_x, weight, Reg { l2, research: l2 });
            let dev = roc_auc(
                &data
                    .dev
                    .iter()
                    .map(|r| (head.p(r, embedding_x), r.y))
                    .collect::<Vec<_>>(),
            );
            if let Some(m) = metrics(&pooled(&folds), TAU) {
                println!(
                    "weight={weight} l2={l2}: tuning sessions recall={:.3} specificity={:.3} auc={:.3} ece={:.3}; tiage dev auc={dev:.3}",
                    m.recall_at_tau, m.specificity_at_tau, m.auc, m.ece
                );
            }
        }
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
    out.push_str("/// Fitted weights, same order as [`super::features::feature_names`].\n");
    out.push_str("#[allow(clippy::approx_constant)]\n");
    out.push_str("pub const WEIGHTS: [f64; N_FEATURES] = [\n");
    for (name, wi) in feature_names().iter().zip(&head.w) {
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
    out.push_str(&format!(
        "/// The research prior's shift of the logit, chosen by leave-one-session-out over the\n/// sessions (balanced recall and specificity at τ).\npub const RESEARCH_PRIOR_SHIFT: f64 = {:.1};\n",
        head.shift
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
    /// The separate layout (one block per context, no shared weights: the design before
    /// issue 31's second round), for the ablation.
    separate: bool,
    /// No research prior (δ = 0): calibrated p.
    no_prior: bool,
    /// The features read the 500-token window only, not `DecisionState::older` (the design
    /// before head v7): the comparison of docs/DECISION-QUALITY.md, never the committed head.
    window_only: bool,
    /// Similarities left out of the fit (`--drop a,b`: their columns zeroed in both blocks,
    /// so their weights stay 0): the ablations of docs/DECISION-QUALITY.md.
    drop: Vec<String>,
    reg: Reg,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        write: false,
        search: false,
        shipped: false,
        cases: test_data::repo_path(test_data::TIAGE_CASES),
        sessions: Vec::new(),
        model_dir: None,
        separate: false,
        no_prior: false,
        window_only: false,
        drop: Vec::new(),
        reg: REG,
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
            "--separate" => a.separate = true,
            "--no-prior" => a.no_prior = true,
            "--window-only" => a.window_only = true,
            "--drop" => {
                let v = value()?;
                for name in v.to_string_lossy().split(',') {
                    if !SIMILARITY_NAMES.contains(&name) {
                        return Err(format!("--drop: no similarity named {name:?}"));
                    }
                    a.drop.push(name.to_owned());
                }
            }
            "--research-l2" => {
                let v = value()?;
                a.reg.research = v
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .ok_or(format!("--research-l2: not a number: {}", v.display()))?;
            }
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
            .map(|c| store.row(&c.state(), &[], c.label, 1.0, c.id.clone()))
            .collect()
    };
    let (mut train, mut dev, mut test) = (split("train"), split("dev"), split("test"));
    let mut sessions = Vec::new();
    let mut tuning = Vec::new();
    let repo = test_data::repo_path(test_data::RESEARCH_SESSIONS);
    for d in &a.sessions {
        for s in load_sessions(d).map_err(|e| e.to_string())? {
            if *d != repo {
                tuning.push(s.session.clone());
            }
            // The engine's own state: the 500-token window and the older uncovered turns
            // before it (`DecisionState::older`), read as the probe reads them.
            let rows: Vec<Row> = turn_cases(&s, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS)
                .iter()
                .map(|t| {
                    let older = if a.window_only {
                        &[][..]
                    } else {
                        &t.state.older
                    };
                    store.row(
                        &t.state,
                        older,
                        t.expect.pivot,
                        1.0,
                        format!("turn {}", t.turn),
                    )
                })
                .collect();
            sessions.push((s.session.clone(), rows));
        }
    }
    store.save();
    let columns: Vec<usize> = SIMILARITY_NAMES
        .iter()
        .enumerate()
        .filter(|(_, n)| a.drop.iter().any(|d| d == *n))
        .flat_map(|(i, _)| [i, N_BASE + i])
        .collect();
    let rows = train
        .iter_mut()
        .chain(dev.iter_mut())
        .chain(test.iter_mut())
        .chain(sessions.iter_mut().flat_map(|(_, rows)| rows.iter_mut()));
    for r in rows {
        columns.iter().for_each(|&i| r.x[i] = 0.0);
        r.xs = separate_layout(&r.x);
    }
    if train.is_empty() || dev.is_empty() {
        return Err(format!("{}: needs train and dev cases", a.cases.display()));
    }
    Ok((
        Data {
            train,
            dev,
            test,
            sessions,
            tuning,
            no_prior: a.no_prior,
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
    if a.write && a.window_only {
        eprintln!(
            "--write with --window-only: the engine sends the older turns, the head reads them"
        );
        return ExitCode::from(2);
    }
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
        search(&data);
        return ExitCode::SUCCESS;
    }
    let emb = if a.separate { separate_x } else { embedding_x };
    eprintln!(
        "penalties {:?}, separate blocks {}, research prior {}, history beyond the window {}, dropped {:?}",
        a.reg, a.separate, !a.no_prior, !a.window_only, a.drop
    );
    report(
        "embedding model, leave-one-session-out",
        &data.loso(emb, SESSION_WEIGHT, a.reg),
    );
    report(
        "lexical model, refitted per fold, leave-one-session-out",
        &data.loso(lexical_x, SESSION_WEIGHT, a.reg),
    );
    let head = data.nested_head(&[], emb, SESSION_WEIGHT, a.reg);
    let lexical = data.nested_head(&[], lexical_x, SESSION_WEIGHT, a.reg);
    for (label, h, x) in [
        ("embedding", &head, emb as fn(&Row) -> &[f64]),
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
            .map(|r| (head.p(r, emb), r.y))
            .collect::<Vec<_>>(),
    );
    let names: Vec<&str> = data.sessions.iter().map(|(n, _)| n.as_str()).collect();
    let note = format!(
        "// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding,eval\n// --example fit_embedding_model -- --write`: weights on {} TIAGE train cases + sessions\n// {names:?} (weight {SESSION_WEIGHT}, L2 {L2}; research block L2 {} and prior shift {:.1} chosen by\n// leave-one-session-out over them), Platt on {} TIAGE dev cases + the same sessions.\n// TIAGE test AUC {test_auc:.3}.\n",
        data.train.len(),
        head.research_l2,
        head.shift,
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
