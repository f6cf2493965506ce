//! Refits the offline lexical model's constants, reproducibly.
//!
//! ```text
//! cargo run -p adaptive-compaction-decision-client --features eval --example fit_offline_model [-- [--write] [CASES.jsonl SESSIONS_DIR]]
//! ```
//!
//! CASES defaults to the repository's vendored TIAGE cases (`data/topic-shift/cases.jsonl`);
//! SESSIONS_DIR to `$COMPACTION_OUTSIDE_DATA/research-sessions` (the shared sessions the fit
//! names live outside the repository and are read only when asked for).
//!
//! 1. Logistic regression (full-batch gradient descent from zero, L2 = 0.01, 6,000 steps of
//!    0.5) on the TIAGE **train** split plus the research sessions in [`FIT_SESSIONS`], each
//!    session turn weighted [`SESSION_WEIGHT`] (76 session turns against 1,177 TIAGE cases).
//! 2. Platt scaling (p = σ(A·z + B), same descent, no penalty) on the TIAGE **dev** split plus
//!    the sessions in [`CALIBRATION_SESSIONS`], each turn weighted [`CALIBRATION_SESSION_WEIGHT`].
//!
//! The TIAGE test split and every other session are never used for a choice. Session turns
//! are the decision states the engine sends (see `decision_client::sessions`). The program
//! prints the constants and the figures on every split and session; with `--write` it also
//! replaces the constants block in `src/offline/mod.rs`. Deterministic: no randomness at all.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use compaction_core::CharsPerToken;
use compaction_core::DEFAULT_STATE_BUDGET_TOKENS;
use decision_client::eval::{load_cases, metrics};
use decision_client::offline::{FITTED_FEATURES, Features, N_FEATURES, sigmoid};
use decision_client::sessions::{load_sessions, turn_cases};

const L2: f64 = 0.0005;
const STEPS: usize = 6000;
const RATE: f64 = 0.5;
/// Sessions whose turns join the TIAGE train split for the weights.
const FIT_SESSIONS: [&str; 2] = ["neuro-fmri", "ecology-pollinators"];
/// Sessions whose turns join the TIAGE dev split for Platt scaling.
const CALIBRATION_SESSIONS: [&str; 1] = ["astro-exoplanets"];
/// Weight of one session turn against one TIAGE case.
const SESSION_WEIGHT: f64 = 30.0;
/// Weight of one session turn against one TIAGE case in Platt scaling.
const CALIBRATION_SESSION_WEIGHT: f64 = 30.0;
const TAU: f64 = 0.75;

#[derive(Clone)]
struct Row {
    x: [f64; N_FEATURES],
    y: f64,
    w: f64,
}

fn row(f: &Features, label: bool, w: f64) -> Row {
    Row {
        x: f.fitted(),
        y: f64::from(u8::from(label)),
        w,
    }
}

fn z(w: &[f64; N_FEATURES], b: f64, r: &Row) -> f64 {
    b + w.iter().zip(r.x).map(|(wi, xi)| wi * xi).sum::<f64>()
}

/// Fits weights and bias by full-batch gradient descent on the weighted mean log loss +
/// L2/2·|w|².
fn fit_logistic(rows: &[Row]) -> ([f64; N_FEATURES], f64) {
    let (mut w, mut b) = ([0.0f64; N_FEATURES], 0.0f64);
    let n: f64 = rows.iter().map(|r| r.w).sum();
    for _ in 0..STEPS {
        let (mut gw, mut gb) = ([0.0f64; N_FEATURES], 0.0f64);
        for r in rows {
            let e = (sigmoid(z(&w, b, r)) - r.y) * r.w;
            gb += e;
            for (g, xi) in gw.iter_mut().zip(r.x) {
                *g += e * xi;
            }
        }
        b -= RATE * gb / n;
        for (wi, g) in w.iter_mut().zip(gw) {
            *wi -= RATE * (g / n + L2 * *wi);
        }
    }
    (w, b)
}

/// Fits Platt's A and B on weighted logits (z, y, weight).
fn fit_platt(z: &[(f64, f64, f64)]) -> (f64, f64) {
    let (mut a, mut b) = (1.0f64, 0.0f64);
    let n: f64 = z.iter().map(|r| r.2).sum();
    for _ in 0..STEPS {
        let (mut ga, mut gb) = (0.0, 0.0);
        for &(zi, y, w) in z {
            let e = (sigmoid(a * zi + b) - y) * w;
            ga += e * zi;
            gb += e;
        }
        a -= RATE * ga / n;
        b -= RATE * gb / n;
    }
    (a, b)
}

fn constants_block(w: &[f64; N_FEATURES], b: f64, a: f64, pb: f64, note: &str) -> String {
    let mut out = String::new();
    out.push_str("// FITTED-CONSTANTS-BEGIN\n");
    out.push_str(note);
    out.push_str("/// Fitted weights, same order as [`FITTED_FEATURES`].\n");
    // A fitted weight may happen to lie near a constant such as π/4.
    out.push_str("#[allow(clippy::approx_constant)]\n");
    out.push_str("pub const WEIGHTS: [f64; N_FEATURES] = [\n");
    for (name, wi) in FITTED_FEATURES.iter().zip(w) {
        out.push_str(&format!("    {wi:.4}, // {name}\n"));
    }
    out.push_str("];\n");
    out.push_str(&format!(
        "/// Fitted with [`WEIGHTS`].\npub const BIAS: f64 = {b:.4};\n"
    ));
    out.push_str(&format!(
        "/// Platt scaling slope.\npub const PLATT_A: f64 = {a:.4};\n"
    ));
    out.push_str(&format!(
        "/// Platt scaling intercept.\npub const PLATT_B: f64 = {pb:.4};\n"
    ));
    out.push_str("// FITTED-CONSTANTS-END\n");
    out
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let write = args.iter().any(|a| a == "--write");
    args.retain(|a| a != "--write");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cases_path = args.first().map_or_else(
        || test_data::repo_path(test_data::TIAGE_CASES),
        PathBuf::from,
    );
    // The fit's sessions (FIT_SESSIONS, CALIBRATION_SESSIONS) are the shared ones outside the
    // repository: read only when named, or asked for through COMPACTION_OUTSIDE_DATA.
    let sessions_dir = match args.get(1).map(PathBuf::from) {
        Some(dir) => dir,
        None => match test_data::outside_path("research-sessions") {
            Ok(dir) => dir,
            Err(why) => {
                eprintln!(
                    "the fit reads the sessions {FIT_SESSIONS:?} and {CALIBRATION_SESSIONS:?}: \
                     name their directory (SESSIONS_DIR) or set {} ({why})",
                    test_data::OUTSIDE_VAR
                );
                return ExitCode::FAILURE;
            }
        },
    };
    let cases = match load_cases(&cases_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let sessions = match load_sessions(&sessions_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let tiage = |split: &str| -> Vec<Row> {
        cases
            .iter()
            .filter(|c| c.split() == split)
            .map(|c| row(&Features::of(&c.state()), c.label, 1.0))
            .collect()
    };
    let session_rows: Vec<(String, Vec<Row>)> = sessions
        .iter()
        .map(|s| {
            let rows = turn_cases(s, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS)
                .iter()
                .map(|t| row(&Features::of(&t.state), t.expect.pivot, SESSION_WEIGHT))
                .collect();
            (s.session.clone(), rows)
        })
        .collect();
    let of_sessions = |names: &[&str]| -> Vec<Row> {
        session_rows
            .iter()
            .filter(|(name, _)| names.contains(&name.as_str()))
            .flat_map(|(_, rows)| rows.iter().cloned())
            .collect()
    };
    let mut train = tiage("train");
    let (train_tiage, dev_tiage) = (train.len(), tiage("dev").len());
    train.extend(of_sessions(&FIT_SESSIONS));
    let mut dev = tiage("dev");
    dev.extend(of_sessions(&CALIBRATION_SESSIONS).into_iter().map(|r| Row {
        w: CALIBRATION_SESSION_WEIGHT,
        ..r
    }));
    if train_tiage == 0 || dev_tiage == 0 {
        eprintln!("{}: needs train and dev cases", cases_path.display());
        return ExitCode::FAILURE;
    }
    let (w, b) = fit_logistic(&train);
    let dev_z: Vec<(f64, f64, f64)> = dev.iter().map(|r| (z(&w, b, r), r.y, r.w)).collect();
    let (a, pb) = fit_platt(&dev_z);
    let note = format!(
        "// Fitted by `cargo run -p adaptive-compaction-decision-client --features eval --example fit_offline_model`: weights on {train_tiage} TIAGE\n// train cases + sessions {FIT_SESSIONS:?} (weight {SESSION_WEIGHT}), Platt on {dev_tiage} TIAGE dev\n// cases + sessions {CALIBRATION_SESSIONS:?} (weight {CALIBRATION_SESSION_WEIGHT}).\n"
    );
    let block = constants_block(&w, b, a, pb, &note);
    print!("{block}");
    let p = |r: &Row| sigmoid(a * z(&w, b, r) + pb);
    let report = |name: &str, rows: &[Row], role: &str| {
        let scored: Vec<(f64, bool)> = rows.iter().map(|r| (p(r), r.y > 0.5)).collect();
        if let Some(m) = metrics(&scored, TAU) {
            println!("// {name} ({role}): {m}");
        }
    };
    for split in ["train", "dev", "test"] {
        let role = match split {
            "train" => "fit",
            "dev" => "calibration",
            _ => "held out",
        };
        report(&format!("tiage {split}"), &tiage(split), role);
    }
    let mut all = Vec::new();
    for (name, rows) in &session_rows {
        let role = if FIT_SESSIONS.contains(&name.as_str()) {
            "fit"
        } else if CALIBRATION_SESSIONS.contains(&name.as_str()) {
            "calibration"
        } else {
            "held out"
        };
        report(&format!("session {name}"), rows, role);
        all.extend(rows.iter().cloned());
    }
    report("sessions overall", &all, "mixed");
    if write {
        let path = manifest.join("src/offline/mod.rs");
        let result = std::fs::read_to_string(&path).and_then(|src| {
            let (Some(start), Some(end)) = (
                src.find("// FITTED-CONSTANTS-BEGIN\n"),
                src.find("// FITTED-CONSTANTS-END\n"),
            ) else {
                return Err(std::io::Error::other("constants markers not found"));
            };
            let end = end + "// FITTED-CONSTANTS-END\n".len();
            std::fs::write(&path, format!("{}{block}{}", &src[..start], &src[end..]))
        });
        if let Err(e) = result {
            eprintln!("{}: cannot write the constants: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote the constants into {}", path.display());
    }
    ExitCode::SUCCESS
}
