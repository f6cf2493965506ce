//! The second consumer example: a downstream `compaction` binary with an extra adapter. The
//! example's registry runs the shipped command line (`cli::run_with_args`) on the bundled
//! demo conversation with `--decision fixed`, and the session database shows that the extra
//! adapter answered every probe.

use std::path::Path;
use std::process::ExitCode;

use compaction_core::SessionKey;

#[path = "../examples/compaction_with_extra_adapter.rs"]
mod example;

fn demo() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("demo/research-conversation.jsonl")
        .display()
        .to_string()
}

fn replay(dir: &Path, config: serde_json::Value, session: &str) -> ExitCode {
    let cfg = dir.join(format!("{session}.json"));
    std::fs::write(&cfg, config.to_string()).expect("write config");
    let db = dir.join("sessions.db");
    cli::run_with_args(
        example::registry(),
        [
            "compaction".to_owned(),
            "replay".to_owned(),
            demo(),
            "--config".to_owned(),
            cfg.display().to_string(),
            "--db".to_owned(),
            db.display().to_string(),
            "--session".to_owned(),
            session.to_owned(),
            "--decision".to_owned(),
            "fixed".to_owned(),
            "--summarizer".to_owned(),
            "offline".to_owned(),
            "--json".to_owned(),
        ],
    )
}

fn succeeded(code: ExitCode) {
    assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::SUCCESS));
}

#[test]
fn the_extra_adapter_is_selectable_by_name_and_reads_its_own_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shadow = compaction_core::KEY_SHADOW;
    succeeded(replay(
        dir.path(),
        serde_json::json!({ example::KEY_FIXED_PROBABILITY: 0.95, shadow: true }),
        "fixed-shadow",
    ));
    succeeded(replay(
        dir.path(),
        serde_json::json!({ example::KEY_FIXED_PROBABILITY: 0.95 }),
        "fixed-high",
    ));
    succeeded(replay(
        dir.path(),
        serde_json::json!({ example::KEY_FIXED_PROBABILITY: 0.0 }),
        "fixed-low",
    ));

    let store =
        session_store::blocking::SqliteStore::open(dir.path().join("sessions.db")).expect("open");
    let key = |id: &str| SessionKey::new("zocrates", "replay", id);
    // Shadow mode records every probe: each one was answered by the extra adapter.
    let decisions = store.decisions(&key("fixed-shadow")).expect("decisions");
    let probed: Vec<_> = decisions
        .iter()
        .filter(|d| d.probability.is_some())
        .collect();
    assert!(!probed.is_empty(), "{decisions:?}");
    for d in &probed {
        assert_eq!(d.probability, Some(0.95), "{d:?}");
        assert_eq!(d.served_model.as_deref(), Some("fixed-v1"), "{d:?}");
    }
    // Its answer decides: p = 0.95 above tau compacts whenever the gate opens, p = 0 only
    // at the backstop.
    let history = |id: &str| store.compaction_history(&key(id)).expect("history");
    let (high, low) = (history("fixed-high").len(), history("fixed-low").len());
    assert!(high > low, "p = 0.95: {high} compactions, p = 0: {low}");

    // A misspelled key of the extra adapter is a config error (exit 3), as for built-in keys.
    let code = replay(
        dir.path(),
        serde_json::json!({ "decision_fixed_probabilty": 0.95 }),
        "fixed-typo",
    );
    assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::from(3)));
}
