//! End-to-end: the built `compaction` binary against wiremock servers for the decision API and
//! the chat-completions summarizer, a temp config file and a temp SQLite database.

mod common;

use common::{compaction, offline_replay};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use compaction_core::{
    SessionKey, assemble_context, completed_turns, coordinator_view, subsumed_compaction_ids,
};
use serde_json::{Value, json};
use session_store::blocking::SqliteStore;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Marks every scoped (search-pipeline) payload; it must never reach a model.
const SCOPED: &str = "SCOPED-PIPELINE-PAYLOAD";

/// A transcript of `n` turns; every other turn is a research turn with a scoped pipeline.
fn transcript(n: usize, tokens: impl Fn(usize) -> u64) -> String {
    (1..=n)
        .map(|i| {
            let mut turn = json!({
                "user": format!("Question {i} about topic {}?", i / 3),
                "assistant": format!("Answer {i}: a finding of {i}.5 mAh/g."),
                "prompt_tokens": tokens(i),
            });
            if i % 2 == 1 {
                turn["tools"] = json!([{ "name": "search_library", "args": {"query": format!("q{i}")},
                    "result": format!("Synthesis {i}.\n# Cited Sources\n1. Author{i} et al. (2021). doi:10.1000/e2e.{i}") }]);
                turn["pipeline"] = json!([format!("{SCOPED} step {i}"), format!("{SCOPED} chunk {i}")]);
                turn["findings_summary"] = json!(format!("Finding {i}."));
            }
            turn.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `compaction replay FILE` on the offline models and the spec defaults: the default config
/// location is under `dir`, where there is no config file.
fn offline_replay_in(dir: &Path, file: &Path) -> Command {
    let mut command = offline_replay(file);
    command.env("ZOTERO_DATA_DIR", dir);
    command
}

fn write_config(
    dir: &Path,
    decision_url: &str,
    summarizer_url: &str,
    timeout: f64,
) -> std::path::PathBuf {
    let config = json!({
        "enable_adaptive_compaction": true,
        "adaptive_compaction_decision_model": "inception/mercury-decide",
        "decision_adapter": "decisions",
        "decision_api_base_url": decision_url,
        "decision_api_path": "/api/alpha/decisions",
        "decision_api_key_env": "E2E_DECISION_KEY",
        "decision_timeout_secs": timeout,
        "summarizer_adapter": "chat",
        "summarizer_base_url": format!("{summarizer_url}/v1"),
        "summarizer_api_key_env": "E2E_SUMMARIZER_KEY",
        "summarizer_timeout_secs": 5,
    });
    let file = dir.join("zocrates_config.json");
    std::fs::write(&file, serde_json::to_string_pretty(&config).expect("json"))
        .expect("write config");
    file
}

/// Runs `compaction replay` and returns its JSON records.
fn replay(dir: &Path, config: &Path, transcript: &str) -> Vec<Value> {
    let file = dir.join("transcript.jsonl");
    std::fs::write(&file, transcript).expect("write transcript");
    let out = compaction()
        .arg("replay")
        .arg(&file)
        .args(["--json", "--session", "e2e"])
        .arg("--db")
        .arg(dir.join("sessions.db"))
        .arg("--config")
        .arg(config)
        .env("E2E_DECISION_KEY", "sk-e2e-decision-secret")
        .env("E2E_SUMMARIZER_KEY", "sk-e2e-summarizer-secret")
        .output()
        .expect("run compaction");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        !stdout.contains("sk-e2e") && !stderr.contains("sk-e2e"),
        "an API key leaked"
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

async fn received_bodies(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

fn chat_reply(text: &str) -> Value {
    json!({"id": "x", "model": "nvidia/nemotron-3.5-lightning:free",
           "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020}})
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_compacts_through_real_models_and_keeps_k_turns_verbatim() {
    let decisions = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/alpha/decisions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"answers": {"compaction_warranted": {"type": "noul", "noul": 0.9}}, "usage": {"prompt_tokens": 310}}),
        ))
        .mount(&decisions)
        .await;
    let chat = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_reply(
            // It keeps the first fold's figures and source, so the rolling fold that gets the
            // same reply has not dropped the previous summary's ledger (that is refused).
            "## Comprehensive Conversation Summary\nConsolidated. Findings of 1.5 mAh/g and \
             2.5 mAh/g (doi:10.1000/e2e.1).",
        )))
        .mount(&chat)
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &decisions.uri(), &chat.uri(), 5.0);
    let records = replay(
        dir.path(),
        &config,
        &transcript(8, |i| 30_000 + 1_000 * i as u64),
    );

    let outcomes: Vec<&str> = records[1..9]
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "fast-exit",
            "fast-exit",
            "fast-exit",
            "compressed",
            "fast-exit",
            "fast-exit",
            "fast-exit",
            "compressed"
        ]
    );

    // The closing record names the session and where it is kept.
    let last = records.last().expect("a closing record");
    assert_eq!(last["compactions"], 2);
    assert_eq!(last["session"], "zocrates/replay/e2e");
    let db = dir.path().join("sessions.db");
    assert_eq!(last["db"], db.to_str().expect("utf-8"));

    let store = SqliteStore::open(&db).expect("open db");
    let key = SessionKey::new("zocrates", "replay", "e2e");
    let session = store.get_session(&key).expect("session");
    let compactions: Vec<_> = session
        .events
        .iter()
        .filter(|e| e.compaction().is_some())
        .collect();
    assert_eq!(
        compactions.len(),
        2,
        "one compaction at turn 4, a rolling one at turn 8"
    );
    let (first, second) = (
        compactions[0].compaction().unwrap(),
        compactions[1].compaction().unwrap(),
    );
    assert_eq!(
        first.start_timestamp, second.start_timestamp,
        "the rolling summary starts at t_1"
    );
    assert_eq!(
        subsumed_compaction_ids(&session.events),
        vec![compactions[0].id.clone()]
    );
    // Every model reply is kept, plus the citations the ledger carried forward.
    let summary = second.summary_text();
    assert!(
        summary.starts_with("## Comprehensive Conversation Summary\nConsolidated."),
        "{summary}"
    );
    for i in [1, 3, 5] {
        assert!(
            summary.contains(&format!("doi:10.1000/e2e.{i}")),
            "citation {i} lost:\n{summary}"
        );
    }

    // The next prompt: the live summary, then turns 7 and 8 verbatim.
    let context = store.load_context(&key).expect("context");
    assert_eq!(context, assemble_context(&session.events));
    let view = coordinator_view(&session.events);
    let turns = completed_turns(&view);
    let retained: Vec<String> = turns[6..]
        .iter()
        .flat_map(|t| t.events.iter().map(|e| e.id.clone()))
        .collect();
    let verbatim: Vec<String> = context.events().map(|e| e.id.clone()).collect();
    assert_eq!(verbatim, retained);

    // No scoped event reached either model.
    let decision_bodies = received_bodies(&decisions).await;
    let chat_bodies = received_bodies(&chat).await;
    assert_eq!((decision_bodies.len(), chat_bodies.len()), (2, 2));
    for body in decision_bodies.iter().chain(&chat_bodies) {
        assert!(
            !body.contains(SCOPED),
            "a scoped payload reached a model: {body}"
        );
    }
    // The decision model read the findings summary of research turns, not the synthesis.
    assert!(
        decision_bodies[0].contains("Finding 3.") && !decision_bodies[0].contains("Synthesis 3.")
    );
    // The summarizer got the spec's rolling-consolidation prompt the second time.
    assert!(chat_bodies[1].contains("Existing Conversation Summary:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_models_fail_open_and_write_nothing() {
    let decisions = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(
                    json!({"answers": {"compaction_warranted": {"type": "noul", "noul": 0.99}}}),
                )
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&decisions)
        .await;
    let chat = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .mount(&chat)
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &decisions.uri(), &chat.uri(), 0.3);
    // Turns 4 and 5 probe (and time out); turn 6 hits the hard backstop, whose summarizer fails.
    let tokens = |i: usize| if i >= 6 { 120_000 } else { 40_000 };
    let records = replay(dir.path(), &config, &transcript(6, tokens));
    let by_turn: Vec<(&str, &str)> = records[1..7]
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap_or("?"),
                r["detail"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(by_turn[3].0, "continue");
    assert!(
        by_turn[3].1.contains("fail-open") && by_turn[3].1.contains("no answer within"),
        "{:?}",
        by_turn[3]
    );
    assert_eq!(by_turn[4].0, "continue");
    assert_eq!(by_turn[5].0, "summarizer-failed");
    assert!(by_turn[5].1.contains("500"), "{:?}", by_turn[5]);

    let store = SqliteStore::open(dir.path().join("sessions.db")).expect("open db");
    let session = store
        .get_session(&SessionKey::new("zocrates", "replay", "e2e"))
        .expect("session");
    assert!(
        session.events.iter().all(|e| e.compaction().is_none()),
        "nothing may be written"
    );
}

#[test]
fn a_malformed_transcript_names_the_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.jsonl");
    std::fs::write(
        &file,
        "{\"user\":\"q\",\"assistant\":\"a\"}\n{\"user\":\"q2\"}\n",
    )
    .expect("write");
    let out = offline_replay_in(dir.path(), &file).output().expect("run");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.jsonl:2: missing field `assistant`"),
        "{stderr}"
    );
}

#[test]
fn a_corrupt_database_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("corrupt.db");
    std::fs::write(&db, vec![0x42u8; 8192]).expect("write");
    let out = compaction()
        .args(["inspect", "--session", "s"])
        .arg("--db")
        .arg(&db)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("corrupt.db"), "{stderr}");
}

/// The demo's output, with volatile figures (timestamps, generated ids) redacted.
#[test]
fn demo_output() {
    let out = compaction().arg("demo").output().expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[timestamp]"),
        (r"(?m)^[0-9a-f]+-[0-9a-f]+-\d+ ", "[event-id] "),
    ]}, {
        insta::assert_snapshot!(stdout);
    });
}

/// With the embedding model's files installed, the demo runs it and its banner says so;
/// without them (outside CI) the test says SKIPPED. The other tests run the lexical model
/// (see `common::compaction`), whose banner says how to install the files.
#[test]
#[allow(clippy::print_stderr)]
fn the_demo_runs_the_embedding_model_when_its_files_are_installed() {
    let out = common::compaction_with_installed_model()
        .arg("demo")
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let banner = stdout.lines().next().unwrap_or_default();
    if banner.starts_with("decision model: offline lexical model") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but the demo did not find the embedding model: {banner}"
        );
        assert!(banner.contains("cargo xtask fetch-model"), "{banner}");
        eprintln!("SKIPPED: the embedding model's files are not installed ({banner})");
        return;
    }
    assert!(
        banner.starts_with(
            "decision model: embedding model all-MiniLM-L6-v2+head-v8 (local, files in "
        ),
        "{banner}"
    );
    assert!(stdout.contains("probe"), "{stdout}");
}

/// The probe span says which model answered: with the embedding model's files installed,
/// `--decision local` runs it and the exported probe spans name it; without them (outside CI)
/// the test says SKIPPED.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::print_stderr)]
async fn the_probe_span_names_the_embedding_model_when_it_answers() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.jsonl");
    // Turns 4 and 5 are inside the gate's envelope: both probe.
    std::fs::write(&file, transcript(5, |_| 40_000)).expect("write");
    let out = common::compaction_with_installed_model()
        .arg("replay")
        .arg(&file)
        .args(["--decision", "local", "--summarizer", "offline"])
        .env("ZOTERO_DATA_DIR", dir.path())
        .arg("--otlp-endpoint")
        .arg(format!("{}/v1/traces", collector.uri()))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bodies = collector.received_requests().await.unwrap_or_default();
    let all: Vec<u8> = bodies.iter().flat_map(|r| r.body.clone()).collect();
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("compaction_decision_probe"), "no probe span");
    if text.contains("offline-lexical-v2") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but the lexical model answered the probe"
        );
        eprintln!("SKIPPED: the embedding model's files are not installed");
        return;
    }
    assert!(
        text.contains("all-MiniLM-L6-v2+head-v8"),
        "the probe span does not name the embedding model"
    );
}

/// `--otlp-endpoint URL` exports the compaction spans, with the replay's turn spans, to a
/// collector; the turn span is OpenInference's CHAIN with `session.id`, filed under the
/// project `--otlp-project` names.
#[tokio::test(flavor = "multi_thread")]
async fn otlp_export_reaches_a_collector() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.jsonl");
    // Six turns above the ceiling: the backstop forces a compaction, so both kinds of span
    // may appear without a remote model.
    std::fs::write(&file, transcript(6, |_| 120_000)).expect("write");
    let out = offline_replay_in(dir.path(), &file)
        .arg("--otlp-endpoint")
        .arg(format!("{}/v1/traces", collector.uri()))
        .args(["--otlp-project", "e2e-project"])
        .env_remove("PHOENIX_PROJECT_NAME")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bodies = collector.received_requests().await.unwrap_or_default();
    let all: Vec<u8> = bodies.iter().flat_map(|r| r.body.clone()).collect();
    let text = String::from_utf8_lossy(&all);
    assert!(
        text.contains("compact_session_history"),
        "no summarize span exported"
    );
    // A span's name is protobuf field 5 (tag 0x2a), length-prefixed: a span named exactly "turn".
    assert!(
        all.windows(6).any(|w| w == b"\x2a\x04turn"),
        "no turn span exported"
    );
    assert!(!text.contains(SCOPED), "a scoped payload was exported");
    for needle in [
        "openinference.project.name",
        "e2e-project",
        "session.id",
        "user.id",
        "CHAIN",
        "compaction.turn",
        "llm.token_count.total",
        "compaction.summarize.token_counts_estimated",
    ] {
        assert!(text.contains(needle), "{needle} not exported");
    }
    // The old attribute `session` (the whole key as text) is gone: a key named exactly
    // "session" is field 1 (tag 0x0a) of a KeyValue, length 7.
    assert!(
        !all.windows(9).any(|w| w == b"\x0a\x07session"),
        "the old `session` attribute is still exported"
    );
}

/// `--otlp` takes no value, so `replay --otlp FILE` reads FILE (issue 21 item 8); the old
/// `--otlp=URL` form is a usage error naming `--otlp-endpoint`.
#[test]
fn otlp_takes_no_value_and_the_endpoint_has_its_own_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(2, |_| 1_000)).expect("write");
    // A port nobody listens on: the export fails quietly, the replay succeeds.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = compaction()
        .args(["replay", "--otlp"])
        .arg(&file)
        .args(["--decision", "offline", "--summarizer", "offline", "--json"])
        .env("ZOTERO_DATA_DIR", dir.path())
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("http://127.0.0.1:{port}/v1/traces"),
        )
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("\"turn\""))
            .count(),
        2,
        "both turns of FILE were replayed"
    );
    let out = compaction()
        .arg("replay")
        .arg(&file)
        .arg("--otlp=http://localhost:6006/v1/traces")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--otlp-endpoint http://localhost:6006/v1/traces"),
        "{stderr}"
    );
}

/// Usage errors exit 2 (clap names the flag and its values), a named config file that does not
/// exist exits 3 naming it, and a reading command refuses an empty file without writing to it.
#[test]
fn usage_config_and_empty_database_errors_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = compaction()
        .args(["evaluate", "--session", "s"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--db"));
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(1, |_| 1_000)).expect("write");
    let out = compaction()
        .arg("replay")
        .arg(&file)
        .args(["--decision", "magic"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("magic") && stderr.contains("chat-logprobs"),
        "{stderr}"
    );
    let missing = dir.path().join("typo.json");
    let out = offline_replay_in(dir.path(), &file)
        .arg("--config")
        .arg(&missing)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("typo.json: no such config file"),
        "{stderr}"
    );
    assert!(
        !missing.exists(),
        "a reading command must not create the config file"
    );
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("write");
    for command in ["inspect", "evaluate"] {
        let out = compaction()
            .args([command, "--session", "s", "--db"])
            .arg(&empty)
            .env("ZOTERO_DATA_DIR", dir.path())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(4), "{command}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("empty.db: not a session database"),
            "{stderr}"
        );
        assert_eq!(std::fs::metadata(&empty).expect("stat").len(), 0);
    }
}

/// `demo --db` can run again on the same file (each run has its own session), and a session
/// id already in the file is refused before anything is printed.
#[test]
fn demo_keeps_each_run_in_its_own_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("demo.db");
    for _ in 0..2 {
        let out = compaction()
            .args(["demo", "--json", "--db"])
            .arg(&db)
            .output()
            .expect("run demo");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = compaction()
        .args(["demo", "--session", "mine", "--db"])
        .arg(&db)
        .output()
        .expect("run demo");
    assert!(out.status.success());
    let out = compaction()
        .args(["demo", "--session", "mine", "--db"])
        .arg(&db)
        .output()
        .expect("run demo");
    assert_eq!(out.status.code(), Some(4));
    assert!(
        out.stdout.is_empty(),
        "nothing is printed before the session exists"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pick another --session"), "{stderr}");
}

/// `config set` works through config-ssot on spec keys and on the adapters' keys (checked by
/// the adapter's own parser before anything is written), and refuses an unknown key naming
/// every settable one; `config show` prints the file.
#[test]
fn config_set_takes_spec_and_adapter_keys_and_refuses_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("zocrates_config.json");
    let config = |args: &[&str]| {
        compaction()
            .arg("config")
            .args(args)
            .arg("--config")
            .arg(&file)
            .output()
            .expect("run config")
    };
    assert!(
        config(&["set", "adaptive_compaction_min_turns", "6"])
            .status
            .success()
    );
    assert!(
        config(&["set", "decision_adapter", "offline"])
            .status
            .success()
    );
    assert!(
        config(&["set", "summarizer_timeout_secs", "45"])
            .status
            .success()
    );
    // The coordinator of `compaction serve` reads the same file.
    assert!(
        config(&["set", "coordinator_model", "openai/gpt-4o-mini"])
            .status
            .success()
    );
    let out = config(&["set", "coordinator_base_url", "ftp://nowhere"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a bad coordinator URL is refused"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("coordinator_base_url"), "{stderr}");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert_eq!(written["coordinator_model"], "openai/gpt-4o-mini");
    assert!(written.get("coordinator_base_url").is_none());
    assert_eq!(written["adaptive_compaction_min_turns"], 6);
    assert_eq!(written["decision_adapter"], "offline");
    assert_eq!(written["summarizer_timeout_secs"], 45);
    // min_turns 6 with K = 6: spec 3.1's clamp fires, and the banner says so below.
    assert!(
        config(&["set", "adaptive_compaction_retention_turns", "6"])
            .status
            .success()
    );
    let before = std::fs::read(&file).expect("read");
    let out = config(&["set", "decision_adapter", "psychic"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("zocrates_config.json") && stderr.contains("decision_adapter"),
        "{stderr}"
    );
    let out = config(&["set", "decison_adapter", "offline"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown key decison_adapter")
            && stderr.contains("adaptive_compaction_threshold")
            && stderr.contains("summarizer_base_url"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "refusals write nothing"
    );
    // A misspelled setting is kept (the desktop app may own keys) but named on the banner.
    let mut map: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    map.insert("adaptive_compaction_treshold".into(), json!(0.9));
    std::fs::write(&file, serde_json::to_string(&map).expect("json")).expect("write");
    let transcript_file = dir.path().join("t.jsonl");
    std::fs::write(&transcript_file, transcript(1, |_| 1_000)).expect("write");
    let out = compaction()
        .arg("replay")
        .arg(&transcript_file)
        .arg("--config")
        .arg(&file)
        .args(["--summarizer", "offline"])
        .output()
        .expect("run replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let banner = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        banner.contains("warning: adaptive_compaction_treshold is not a setting (did you mean adaptive_compaction_threshold?)"),
        "{banner}"
    );
    assert!(
        banner.contains(
            "warning: adaptive_compaction_min_turns (6) must be strictly greater than \
             retention_turns (6). Disambiguating by clamping effective_min_turns to 7."
        ),
        "{banner}"
    );
    let shown = config(&["show"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("\"decision_adapter\": \"offline\""));
}
