//! The TTFT load generator: the reference server on loopback, driven by concurrent simulated
//! users; it measures the time to the first `delta` of every turn after the first, with
//! compaction enabled and disabled, and the throughput and memory under load.
//!
//! The models are stand-ins with fixed latencies: the coordinator's first token after
//! `--first-token-ms`, the decision model after `--probe-ms` (p = 0.9: every open gate
//! compresses), the offline summarizer after `--summarize-ms` more.
//!
//! ```text
//! cargo run --release -p adaptive-compaction-service --features http --example ttft -- ttft --think-ms 2000
//! cargo run --release -p adaptive-compaction-service --features http --example ttft -- load --sessions 1000
//! cargo run --release -p adaptive-compaction-service --features http --example ttft -- keepalive --turns 40
//! cargo run --release -p adaptive-compaction-service --features http --example ttft -- cost --turns 30
//! ```
//!
//! `cost` measures what a chat turn (request to `done`, the stand-in answering at once) and
//! `GET …/tokens` take in a session of 10 turns and one of 1,000, interleaved in one run
//! (`--turns` samples each). Each history ends with one compaction over all but its last two
//! turns, as a compacting session's does; evaluation is disabled, so nothing more is folded.
//!
//! `keepalive` measures the first `data:` of a turn over real HTTP, on a kept-alive connection
//! and on a new connection per turn, side by side, with the server's accepted sockets as
//! `Server::serve` sets them (TCP_NODELAY) and as a plain `axum::serve` of the same router
//! leaves them (Nagle's algorithm on): the latency after the stand-in's fixed first-token delay,
//! p50 and p99 (compaction disabled, one session, turns one after another).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, Engine, ModelInfo, ProbeRequest, Settings,
    Summarizer, Summary, SummaryRequest, async_trait,
};
use service::http::{OfflineCoordinator, SelectedCoordinator, ServeOptions, Server};
use service::{LaneConfig, Lanes, ProcessIds, SystemClock};
use session_store::SqliteStore;
use tokio_stream::StreamExt as _;

struct SlowDecision(Duration);

#[async_trait]
impl DecisionModel for SlowDecision {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("bench", "local", "fixed-latency")
    }
    async fn decide(&self, _: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        tokio::time::sleep(self.0).await;
        Ok(DecisionAnswer::new(0.9))
    }
}

struct SlowSummarizer(Duration, Arc<dyn Summarizer>);

#[async_trait]
impl Summarizer for SlowSummarizer {
    fn info(&self) -> ModelInfo {
        self.1.info()
    }
    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        tokio::time::sleep(self.0).await;
        self.1.summarize(request).await
    }
}

#[derive(Debug, Clone)]
struct Args {
    mode: String,
    sessions: usize,
    turns: usize,
    think: Duration,
    first_token: Duration,
    probe: Duration,
    summarize: Duration,
    enabled: Option<bool>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        mode: "ttft".into(),
        sessions: 20,
        turns: 10,
        think: Duration::ZERO,
        first_token: Duration::from_millis(50),
        probe: Duration::from_millis(150),
        summarize: Duration::from_millis(1500),
        enabled: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a whole number"))
        };
        match a.as_str() {
            "ttft" | "load" | "keepalive" | "cost" => args.mode = a,
            "--sessions" => args.sessions = value("--sessions")? as usize,
            "--turns" => args.turns = value("--turns")? as usize,
            "--think-ms" => args.think = Duration::from_millis(value("--think-ms")?),
            "--first-token-ms" => {
                args.first_token = Duration::from_millis(value("--first-token-ms")?)
            }
            "--probe-ms" => args.probe = Duration::from_millis(value("--probe-ms")?),
            "--summarize-ms" => args.summarize = Duration::from_millis(value("--summarize-ms")?),
            "--compaction" => args.enabled = Some(value("--compaction")? != 0),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

struct Run {
    ttfts: Vec<Duration>,
    turns: usize,
    errors: usize,
    elapsed: Duration,
    compactions: usize,
    rss_kib: u64,
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

type Failure = Box<dyn std::error::Error>;

/// The reference server over a SQLite file in a new temporary directory (returned: keep it),
/// with the stand-in models: the decision model after `--probe-ms`, the offline summarizer
/// after `summarize` more, the coordinator's first token after `--first-token-ms`.
fn bench_server(
    args: &Args,
    settings: Settings,
    summarize: Duration,
) -> Result<(Server, tempfile::TempDir), Failure> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("sessions.db"))?);
    let offline = summarizer::build_summarizer(
        &settings.clone().effective()?,
        &summarizer::SummarizerConfig::default(),
        |_| None,
    )?;
    let (clock, ids) = (
        Arc::new(SystemClock::default()),
        Arc::new(ProcessIds::default()),
    );
    let engine = Engine::builder(
        Arc::new(SlowDecision(args.probe)),
        Arc::new(SlowSummarizer(summarize, offline.summarizer)),
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings)
    .build()?;
    let server = Server::new(
        store,
        Lanes::new(Arc::new(engine), LaneConfig::default()),
        SelectedCoordinator {
            coordinator: Arc::new(OfflineCoordinator::with_first_token_delay(args.first_token)),
            reason: "offline stand-in".into(),
        },
        clock,
        ids,
        ServeOptions::default(),
    );
    Ok((server, dir))
}

async fn run(args: &Args, enabled: bool) -> Result<Run, Failure> {
    let settings = Settings {
        enable_adaptive_compaction: enabled,
        adaptive_compaction_min_turns: 4,
        adaptive_compaction_retention_turns: 2,
        adaptive_compaction_token_floor: 50,
        ..Settings::default()
    };
    let (server, _dir) = bench_server(args, settings, args.summarize)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut reports = server.lanes().subscribe();
    let served = tokio::spawn(server.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    let counted = tokio::spawn(async move {
        let mut compactions = 0;
        while let Ok(r) = reports.recv().await {
            compactions += usize::from(r.outcome().is_some_and(|o| o.compaction().is_some()));
        }
        compactions
    });
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .build()?;
    let started = Instant::now();
    let mut users = Vec::new();
    for i in 0..args.sessions {
        let (http, base, args) = (http.clone(), base.clone(), args.clone());
        users.push(tokio::spawn(async move {
            let mut ttfts = Vec::new();
            let mut errors = 0;
            let created = http
                .post(format!("{base}/v1/sessions"))
                .json(&serde_json::json!({"app": "bench", "user": "u", "id": format!("s{i}")}))
                .send()
                .await;
            if !created.is_ok_and(|r| r.status().is_success()) {
                return (ttfts, 1);
            }
            let url = format!("{base}/v1/sessions/bench/u/s{i}/chat");
            for t in 1..=args.turns {
                if t > 1 && !args.think.is_zero() {
                    // The user's think time between turns (a simulated person, not a wait
                    // for the server).
                    tokio::time::sleep(args.think).await;
                }
                let sent = Instant::now();
                let message =
                    format!("Question {t}: what about the {i}th cell chemistry and its limits?");
                let Ok(response) = http
                    .post(&url)
                    .json(&serde_json::json!({ "message": message }))
                    .send()
                    .await
                else {
                    errors += 1;
                    continue;
                };
                let mut body = response.bytes_stream();
                let (mut first, mut text) = (None, String::new());
                while let Some(chunk) = body.next().await {
                    let Ok(chunk) = chunk else {
                        errors += 1;
                        break;
                    };
                    text.push_str(&String::from_utf8_lossy(&chunk));
                    if first.is_none() && text.contains("event: delta") {
                        first = Some(sent.elapsed());
                    }
                }
                if text.contains("event: error") || !text.contains("event: done") {
                    errors += 1;
                }
                if t > 1
                    && let Some(ttft) = first
                {
                    ttfts.push(ttft);
                }
            }
            (ttfts, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for u in users {
        let (t, e) = u.await?;
        all.extend(t);
        errors += e;
    }
    let elapsed = started.elapsed();
    let rss = rss_kib("VmHWM:");
    let _ = stop.send(());
    served.await??;
    drop(server);
    let compactions = counted.await.unwrap_or(0);
    all.sort();
    Ok(Run {
        ttfts: all,
        turns: args.sessions * args.turns,
        errors,
        elapsed,
        compactions,
        rss_kib: rss,
    })
}

fn pct(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

/// One `keepalive` variant: the latency of the first `data:` after the stand-in's delay, per
/// turn, on a kept-alive connection (`fresh` false) or a new one per turn.
async fn first_data(args: &Args, nodelay: bool, fresh: bool) -> Result<Vec<Duration>, Failure> {
    let settings = Settings {
        enable_adaptive_compaction: false,
        ..Settings::default()
    };
    let (server, _dir) = bench_server(args, settings, Duration::ZERO)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = if nodelay {
        tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .map(|_| ())
        })
    } else {
        let router = server.router();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        })
    };
    let http = if fresh {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()?
    } else {
        reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()?
    };
    http.post(format!("{base}/v1/sessions"))
        .json(&serde_json::json!({"app": "bench", "user": "u", "id": "s"}))
        .send()
        .await?
        .error_for_status()?;
    let url = format!("{base}/v1/sessions/bench/u/s/chat");
    let mut latencies = Vec::new();
    // Turn 0 warms the connection (and the pool) up; it is not counted.
    for t in 0..=args.turns {
        let sent = Instant::now();
        let response = http
            .post(&url)
            .json(&serde_json::json!({ "message": format!("Question {t}?") }))
            .send()
            .await?;
        let mut body = response.bytes_stream();
        let (mut first, mut text) = (None, String::new());
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk?));
            if first.is_none() && text.contains("data:") {
                first = Some(sent.elapsed());
            }
        }
        if !text.contains("event: done") {
            return Err(format!("turn {t} did not end with done: {text}").into());
        }
        if t > 0
            && let Some(first) = first
        {
            latencies.push(first.saturating_sub(args.first_token));
        }
    }
    let _ = stop.send(());
    served.await??;
    latencies.sort();
    Ok(latencies)
}

async fn keepalive(args: &Args) -> Result<(), Failure> {
    println!(
        "first data: after the stand-in's {} ms first-token delay, {} turns each (ms)",
        args.first_token.as_millis(),
        args.turns
    );
    for nodelay in [false, true] {
        let mut p50s = Vec::new();
        for fresh in [false, true] {
            let v = first_data(args, nodelay, fresh).await?;
            println!(
                "{:<28} | {:<15} | p50 {:>7.2} | p99 {:>7.2} | max {:>7.2} (n={})",
                if nodelay {
                    "Server::serve (TCP_NODELAY)"
                } else {
                    "axum::serve (Nagle on)"
                },
                if fresh {
                    "new connection"
                } else {
                    "kept-alive"
                },
                pct(&v, 0.5),
                pct(&v, 0.99),
                pct(&v, 1.0),
                v.len()
            );
            p50s.push(pct(&v, 0.5));
        }
        println!(
            "  kept-alive p50 - new-connection p50: {:+.2} ms",
            p50s[0] - p50s[1]
        );
    }
    Ok(())
}

/// Chat turn and token series at 10 and 1,000 turns, side by side.
async fn cost(args: &Args) -> Result<(), Failure> {
    use compaction_core::{Revision, SessionKey, SessionStore as _};
    let settings = Settings {
        enable_adaptive_compaction: false,
        ..Settings::default()
    };
    let quick = Args {
        first_token: Duration::ZERO,
        ..args.clone()
    };
    let (server, dir) = bench_server(&quick, settings, Duration::ZERO)?;
    let store = SqliteStore::open(dir.path().join("sessions.db"))?;
    let mut f = compaction_core::testing::EventFactory::new();
    for (id, turns) in [("s10", 10), ("s1000", 1_000)] {
        let key = SessionKey::new("bench", "u", id);
        store.create_session(&key, Default::default()).await?;
        let mut revision = Revision(0);
        let (mut first, mut folded_end) = (None, None);
        for t in 0..turns {
            let query = format!("Question {t} about the sample, with some words to weigh it?");
            let answer = "An answer of a few sentences that the next prompt carries. ".repeat(4);
            for event in f.conversational_turn(&format!("p{t}"), &query, &answer) {
                first.get_or_insert(event.timestamp);
                if t + 2 < turns {
                    folded_end = Some(event.timestamp);
                }
                revision = store.append(&key, revision, event).await?;
            }
        }
        // All but the last two turns folded into one summary, as a compacting session is.
        if let (Some(start), Some(end)) = (first, folded_end) {
            let summary = "The rolling summary of the earlier turns. ".repeat(40);
            let compaction = f.compaction("fold", start, end, &summary);
            store.append(&key, revision, compaction).await?;
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        server
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
            .map(|_| ())
    });
    let http = reqwest::Client::new();
    let (mut chat, mut tokens) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for t in 0..=args.turns {
        for (i, id) in ["s10", "s1000"].iter().enumerate() {
            let sent = Instant::now();
            let text = http
                .post(format!("{base}/v1/sessions/bench/u/{id}/chat"))
                .json(&serde_json::json!({ "message": format!("Follow-up {t}?") }))
                .send()
                .await?
                .text()
                .await?;
            let took = sent.elapsed();
            if !text.contains("event: done") {
                return Err(format!("{id} turn {t} did not end with done: {text}").into());
            }
            let asked = Instant::now();
            http.get(format!("{base}/v1/sessions/bench/u/{id}/tokens"))
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await?;
            // The first round warms the connection and the caches up; it is not counted.
            if t > 0 {
                chat[i].push(took);
                tokens[i].push(asked.elapsed());
            }
        }
    }
    let _ = stop.send(());
    served.await??;
    for v in chat.iter_mut().chain(tokens.iter_mut()) {
        v.sort();
    }
    println!(
        "median of {} (ms)  | 10 turns | 1,000 turns | ratio",
        args.turns
    );
    for (name, pair) in [("chat turn to done", &chat), ("GET .../tokens", &tokens)] {
        let (a, b) = (pct(&pair[0], 0.5), pct(&pair[1], 0.5));
        println!("{name:<20} | {a:>8.2} | {b:>11.2} | {:.2}x", b / a);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    if args.mode == "keepalive" {
        return keepalive(&args).await;
    }
    if args.mode == "cost" {
        return cost(&args).await;
    }
    println!(
        "mode {} | sessions {} | turns {} | think {} ms | first token {} ms | probe {} ms | summarize {} ms",
        args.mode,
        args.sessions,
        args.turns,
        args.think.as_millis(),
        args.first_token.as_millis(),
        args.probe.as_millis(),
        args.summarize.as_millis()
    );
    let modes: Vec<bool> = match args.enabled {
        Some(e) => vec![e],
        None if args.mode == "load" => vec![true],
        None => vec![false, true],
    };
    let mut p50s = Vec::new();
    for enabled in modes {
        let r = run(&args, enabled).await?;
        println!(
            "compaction {:<8} | TTFT of turns 2..{} (ms): p50 {:.2} p95 {:.2} max {:.2} (n={}) | {} turns in {:.2} s = {:.1} turns/s | compactions {} | errors {} | peak RSS {:.1} MiB",
            if enabled { "enabled" } else { "disabled" },
            args.turns,
            pct(&r.ttfts, 0.5),
            pct(&r.ttfts, 0.95),
            pct(&r.ttfts, 1.0),
            r.ttfts.len(),
            r.turns,
            r.elapsed.as_secs_f64(),
            r.turns as f64 / r.elapsed.as_secs_f64(),
            r.compactions,
            r.errors,
            r.rss_kib as f64 / 1024.0,
        );
        p50s.push(pct(&r.ttfts, 0.5));
    }
    if let [off, on] = p50s[..] {
        println!(
            "TTFT p50 difference (enabled - disabled): {:+.2} ms",
            on - off
        );
    }
    Ok(())
}
