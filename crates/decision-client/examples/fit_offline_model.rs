//! Refits the offline lexical model's constants, reproducibly.
//!
//! ```text
//! cargo run -p decision-client --example fit_offline_model [-- CASES.jsonl]
//! ```
//!
//! 1. Logistic regression (batch gradient descent from zero, L2 = 0.01, 4,000 steps of 0.5,
//!    the hand-set cue weights as a fixed offset) on the TIAGE **train** split only.
//! 2. Platt scaling (p = σ(A·z + B), same descent, no penalty) on the **dev** split only.
//!
//! The test split is never read. The program prints the constants to paste into
//! `src/offline/mod.rs` and the train and dev figures. Deterministic: no randomness at all.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use decision_client::eval::{Case, load_cases, metrics};
use decision_client::offline::{FITTED_FEATURES, Features, sigmoid};

const L2: f64 = 0.01;
const STEPS: usize = 4000;
const RATE: f64 = 0.5;

struct Row {
    x: [f64; 7],
    offset: f64,
    y: f64,
}

fn rows(cases: &[Case], split: &str) -> Vec<Row> {
    cases
        .iter()
        .filter(|c| c.split() == split)
        .map(|c| {
            let f = Features::of(&c.state());
            Row {
                x: f.fitted(),
                offset: f.cue_offset(),
                y: f64::from(u8::from(c.label)),
            }
        })
        .collect()
}

/// Fits weights and bias by full-batch gradient descent on the mean log loss + L2/2·|w|².
fn fit_logistic(rows: &[Row]) -> ([f64; 7], f64) {
    let (mut w, mut b) = ([0.0f64; 7], 0.0f64);
    let n = rows.len() as f64;
    for _ in 0..STEPS {
        let (mut gw, mut gb) = ([0.0f64; 7], 0.0f64);
        for r in rows {
            let z = b + r.offset + w.iter().zip(r.x).map(|(wi, xi)| wi * xi).sum::<f64>();
            let e = sigmoid(z) - r.y;
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

/// Fits Platt's A and B on logits z.
fn fit_platt(z: &[(f64, f64)]) -> (f64, f64) {
    let (mut a, mut b) = (1.0f64, 0.0f64);
    let n = z.len() as f64;
    for _ in 0..STEPS {
        let (mut ga, mut gb) = (0.0, 0.0);
        for &(zi, y) in z {
            let e = sigmoid(a * zi + b) - y;
            ga += e * zi;
            gb += e;
        }
        a -= RATE * ga / n;
        b -= RATE * gb / n;
    }
    (a, b)
}

fn main() -> ExitCode {
    let path = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/topic-shift/cases.jsonl")
        },
        PathBuf::from,
    );
    let cases = match load_cases(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (train, dev) = (rows(&cases, "train"), rows(&cases, "dev"));
    if train.is_empty() || dev.is_empty() {
        eprintln!("{}: needs train and dev cases", path.display());
        return ExitCode::FAILURE;
    }
    let (w, b) = fit_logistic(&train);
    let logit = |r: &Row| b + r.offset + w.iter().zip(r.x).map(|(wi, xi)| wi * xi).sum::<f64>();
    let dev_z: Vec<(f64, f64)> = dev.iter().map(|r| (logit(r), r.y)).collect();
    let (a, pb) = fit_platt(&dev_z);
    println!(
        "// Fitted by `cargo run -p decision-client --example fit_offline_model` on {} train and {} dev cases.",
        train.len(),
        dev.len()
    );
    println!("pub const WEIGHTS: [f64; 7] = [");
    for (name, wi) in FITTED_FEATURES.iter().zip(w) {
        println!("    {wi:.4}, // {name}");
    }
    println!("];");
    println!("pub const BIAS: f64 = {b:.4};");
    println!("pub const PLATT_A: f64 = {a:.4};");
    println!("pub const PLATT_B: f64 = {pb:.4};");
    for (name, set) in [("train", &train), ("dev", &dev)] {
        let scored: Vec<(f64, bool)> = set
            .iter()
            .map(|r| (sigmoid(a * logit(r) + pb), r.y > 0.5))
            .collect();
        if let Some(m) = metrics(&scored, 0.75) {
            println!(
                "// split={name} {m} (best threshold {:.3})",
                m.best_threshold
            );
        }
    }
    // Ablation: the same fit with the hand-set cue weights left out, to show what they cost
    // or gain on chit-chat.
    let strip = |set: &[Row]| -> Vec<Row> {
        set.iter()
            .map(|r| Row {
                x: r.x,
                offset: 0.0,
                y: r.y,
            })
            .collect()
    };
    let (train0, dev0) = (strip(&train), strip(&dev));
    let (w0, b0) = fit_logistic(&train0);
    let scored: Vec<(f64, bool)> = dev0
        .iter()
        .map(|r| {
            let z = b0 + w0.iter().zip(r.x).map(|(wi, xi)| wi * xi).sum::<f64>();
            (sigmoid(z), r.y > 0.5)
        })
        .collect();
    if let Some(m) = metrics(&scored, 0.75) {
        println!(
            "// ablation without cue weights: split=dev auc={:.3}",
            m.auc
        );
    }
    ExitCode::SUCCESS
}
