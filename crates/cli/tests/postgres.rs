//! `--db postgres://…` and `--db-env VAR` for `replay`, `evaluate` and `inspect`: the built
//! binary against the real PostgreSQL of `COMPACTION_TEST_POSTGRES_URL` (skipped when unset,
//! failing under `CI=true`), one fresh database per test. Every run logs at `trace`, and no
//! output, log line or error may show the URL's password.

mod common;
mod pg;

use std::process::Output;

use compaction_core::{SessionKey, SessionStore, compaction_history};
use pg::{SECRET, compaction, fresh_database, shown, transcript, url_of};
use serde_json::Value;
use session_store::PostgresStore;
use test_data::pg::database_url;

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs and checks that nothing it printed holds the password.
fn run(command: &mut std::process::Command) -> Output {
    let out = command.output().expect("run the binary");
    let all = text(&out);
    assert!(!all.contains(SECRET), "the password leaked:\n{all}");
    out
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `replay` stores a session in PostgreSQL (URL with a password, from `--db-env`); `inspect`
/// (URL on the command line) shows exactly the core's compaction history of what is stored;
/// `evaluate` runs once more on it; the replay says how to name the database again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_evaluate_and_inspect_on_postgres() {
    let Some(url) = database_url("replay_evaluate_and_inspect_on_postgres") else {
        return;
    };
    let db = fresh_database(&url, "cli_replay").await;
    let secret_url = url_of(&db, &pg::dbname(&db), Some(SECRET));
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(8)).expect("write");

    let out = run(compaction(dir.path())
        .arg("replay")
        .arg(&file)
        .args(["--decision", "offline", "--summarizer", "offline", "--json"])
        .args(["--db-env", "TEST_SESSIONS_URL", "--session", "s1"])
        .env("TEST_SESSIONS_URL", &secret_url));
    assert!(out.status.success(), "{}", text(&out));
    let records = json_lines(&out);
    let last = records.last().expect("a final record");
    assert_eq!(last["db"], shown(&db), "{last}");
    let compactions = last["compactions"].as_u64().expect("compactions");
    assert!(compactions >= 1, "{last}");

    // What is stored, read back by the test's own store.
    let store = PostgresStore::connect(&db).await.expect("connect");
    let key = SessionKey::new("zocrates", "replay", "s1");
    let session = store.load(&key).await.expect("the replayed session");
    let history = compaction_history(&session.events);
    assert_eq!(history.len() as u64, compactions);

    let out = run(compaction(dir.path())
        .args([
            "inspect",
            "--app",
            "zocrates",
            "--user",
            "replay",
            "--session",
            "s1",
        ])
        .args(["--db", &secret_url]));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let n = session.events.len();
    assert!(
        stdout.contains(&format!("session {key}: {n} events, revision {n}")),
        "{stdout}"
    );
    for entry in &history {
        let state = if entry.subsumed { "subsumed" } else { "live" };
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&entry.event_id))
            .unwrap_or_else(|| panic!("{} missing:\n{stdout}", entry.event_id));
        assert!(line.contains(state), "{line}");
    }
    // Read-only: inspect wrote nothing.
    assert_eq!(store.load(&key).await.unwrap().revision, session.revision);

    let out = run(compaction(dir.path())
        .args([
            "evaluate",
            "--decision",
            "offline",
            "--summarizer",
            "offline",
            "--json",
        ])
        .args(["--app", "zocrates", "--user", "replay", "--session", "s1"])
        .args(["--db-env", "TEST_SESSIONS_URL"])
        .env("TEST_SESSIONS_URL", &secret_url));
    assert!(out.status.success(), "{}", text(&out));
    let record = &json_lines(&out)[0];
    assert_eq!(record["session"], key.to_string(), "{record}");
    let after = store.load(&key).await.unwrap();
    match record["compaction_event_id"].as_str() {
        Some(id) => {
            assert_eq!(after.revision.0, session.revision.0 + 1);
            assert_eq!(after.events.last().unwrap().id, id);
        }
        None => assert_eq!(after.revision, session.revision, "{record}"),
    }

    // The text output names the database again without the password.
    let out = run(compaction(dir.path())
        .arg("replay")
        .arg(&file)
        .args(["--decision", "offline", "--summarizer", "offline"])
        .args(["--db", &secret_url, "--session", "s2"]));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "Session zocrates/replay/s2 is kept in {}; to see it again: compaction inspect --db {} ",
            shown(&db),
            db
        )),
        "{stdout}"
    );
    let out = run(compaction(dir.path())
        .arg("replay")
        .arg(&file)
        .args(["--decision", "offline", "--summarizer", "offline"])
        .args(["--db-env", "TEST_SESSIONS_URL", "--session", "s2"])
        .env("TEST_SESSIONS_URL", &secret_url));
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(text(&out).contains("already exists"), "{}", text(&out));
    let out = run(compaction(dir.path())
        .arg("replay")
        .arg(&file)
        .args(["--decision", "offline", "--summarizer", "offline"])
        .args(["--db-env", "TEST_SESSIONS_URL", "--session", "s3"])
        .env("TEST_SESSIONS_URL", &secret_url));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("to see it again: compaction inspect --db-env TEST_SESSIONS_URL "),
        "{}",
        text(&out)
    );
}

/// Every way a PostgreSQL database can be wrong is named (the variable, the database, the
/// missing store) with the right exit code, shows no password, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_databases_are_named_and_never_show_the_password() {
    let Some(url) = database_url("bad_databases_are_named_and_never_show_the_password") else {
        return;
    };
    let db = fresh_database(&url, "cli_bad").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let target = [
        "--session",
        "s",
        "--decision",
        "offline",
        "--summarizer",
        "offline",
    ];
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(2)).expect("write");
    let file = file.to_str().expect("UTF-8 temp path");

    // An unset or empty variable: a configuration error naming it.
    for (value, says) in [(None, "is not set"), (Some(""), "is empty")] {
        let mut command = compaction(dir.path());
        command
            .args(["evaluate", "--db-env", "TEST_NO_SUCH_URL"])
            .args(target);
        match value {
            Some(v) => command.env("TEST_NO_SUCH_URL", v),
            None => command.env_remove("TEST_NO_SUCH_URL"),
        };
        let out = run(&mut command);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("--db-env TEST_NO_SUCH_URL: the variable {says}")),
            "{}",
            text(&out)
        );
    }

    // A database without the store: refused, and left without one.
    for command in ["evaluate", "inspect"] {
        let secret_url = url_of(&db, &pg::dbname(&db), Some(SECRET));
        let mut c = compaction(dir.path());
        c.args([command, "--db", &secret_url, "--session", "s"]);
        if command == "evaluate" {
            c.args(["--decision", "offline", "--summarizer", "offline"]);
        }
        let out = run(&mut c);
        assert_eq!(out.status.code(), Some(4), "{command}: {}", text(&out));
        let all = text(&out);
        assert!(all.contains("no session store in this database"), "{all}");
        assert!(all.contains(&shown(&db)), "{all}");
    }
    let schemas: i64 = pg::admin(&db)
        .await
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'compaction'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(schemas, 0, "a command created the store's schema");

    // A database that does not exist, and a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    for (bad, named) in [
        (
            url_of(&url, "no_such_database", Some(SECRET)),
            "no_such_database".to_owned(),
        ),
        (
            format!("postgres://alice:{SECRET}@127.0.0.1:{port}/db?connect_timeout=5"),
            format!("postgres://alice@127.0.0.1:{port}/db"),
        ),
    ] {
        for command in ["inspect", "evaluate", "replay", "serve"] {
            let mut c = compaction(dir.path());
            c.arg(command);
            match command {
                "replay" => c.args([file, "--session", "s", "--decision", "offline"]),
                "serve" => c.args(["--addr", "127.0.0.1:0", "--decision", "offline"]),
                "evaluate" => c.args(target),
                _ => c.args(["--session", "s"]),
            };
            let out = run(c
                .args(["--db-env", "TEST_BAD_URL"])
                .env("TEST_BAD_URL", &bad));
            assert_eq!(out.status.code(), Some(4), "{command}: {}", text(&out));
            assert!(text(&out).contains(&named), "{command}: {}", text(&out));
        }
    }

    // Usage errors: both forms at once, and --check (SQLite's integrity check) on PostgreSQL.
    let secret_url = url_of(&db, &pg::dbname(&db), Some(SECRET));
    let out = run(compaction(dir.path())
        .args(["inspect", "--session", "s", "--db", &secret_url])
        .args(["--db-env", "TEST_SESSIONS_URL"])
        .env("TEST_SESSIONS_URL", &secret_url));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(compaction(dir.path()).args([
        "inspect",
        "--check",
        "--session",
        "s",
        "--db",
        &secret_url,
    ]));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("--check"), "{}", text(&out));
}

/// ADK's `DatabaseSessionService` schema v1 on PostgreSQL, as real ADK created it.
const ADK_PG_DDL: &str =
    include_str!("../../session-store/tests/fixtures/adk-database-v1-postgres.sql");

/// A database holding Google ADK's own tables (in `public`, as ADK creates them) is detected
/// and operated on in place: `evaluate` compacts the ADK session (the compaction is ADK's
/// shape, stamped later than the session's update_time), a handle loaded before it is stale,
/// `inspect` shows ADK's prompt with the summary and reads only; no `compaction` schema is
/// ever created in ADK's database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluate_and_inspect_detect_adks_own_tables_on_postgres() {
    use compaction_core::testing::EventFactory;
    use compaction_core::{Revision, StoreError, Timestamp};
    use session_store::AdkPostgresStore;

    let Some(url) = database_url("evaluate_and_inspect_detect_adks_own_tables_on_postgres") else {
        return;
    };
    let db = fresh_database(&url, "cli_adk").await;
    let admin = pg::admin(&db).await;
    admin.batch_execute(ADK_PG_DDL).await.expect("ADK's DDL");
    let store = AdkPostgresStore::connect(&db).await.expect("the ADK store");
    let key = SessionKey::new("zocrates", "u1", "s1");
    let created = store
        .create_session(&key, serde_json::Map::new())
        .await
        .expect("create");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut f = EventFactory::new();
    let created_at = created.revision.0 as f64 / 1e6;
    let mut n = 0.0;
    let mut revision = created.revision;
    for turn in 0..8 {
        let inv = format!("inv{turn}");
        let mut events = f.conversational_turn(&inv, &format!("Question {turn}?"), "Answer.");
        events[1] = events[1].clone().with_prompt_tokens(120_000);
        for mut e in events {
            // After the session's creation and before the engine's "now", in ADK's order.
            n += 1.0;
            e.timestamp = Timestamp::new(created_at + n / 1_000.0).unwrap();
            revision = store.append(&key, revision, e).await.expect("append");
        }
    }
    let before = store.load(&key).await.expect("load");

    let args = ["--app", "zocrates", "--user", "u1", "--session", "s1"];
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run(compaction(dir.path())
        .args([
            "evaluate",
            "--decision",
            "offline",
            "--summarizer",
            "offline",
            "--json",
        ])
        .args(args)
        .args(["--db", &db]));
    assert!(out.status.success(), "{}", text(&out));
    let record = &json_lines(&out)[0];
    let id = record["compaction_event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no compaction: {record}"));
    let after = store.load(&key).await.expect("load");
    assert_eq!(after.events.len(), before.events.len() + 1);
    let appended = after.events.last().unwrap();
    assert_eq!(appended.id, id);
    assert!(appended.actions.compaction.is_some());
    assert!(after.revision > before.revision);
    // The handle loaded before the compaction is stale.
    let late = EventFactory::starting_at(now.ceil() + 10_000.0).user("inv9", "late");
    let err = store.append(&key, before.revision, late).await.unwrap_err();
    assert!(matches!(err, StoreError::Stale { .. }), "{err:?}");
    assert_ne!(before.revision, Revision(0));

    let out = run(compaction(dir.path())
        .arg("inspect")
        .args(args)
        .args(["--db", &db]));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "session {key}: {} events, revision {}",
            after.events.len(),
            after.revision
        )),
        "{stdout}"
    );
    assert!(stdout.contains(id), "{stdout}");
    assert_eq!(store.load(&key).await.unwrap(), after, "inspect wrote");
    let native: bool = admin
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.schemata WHERE schema_name = 'compaction')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!native, "a native store was created in ADK's database");
}

/// Issue 29 item 3: when another transaction holds ADK's row lock on the session (ADK
/// mid-append, or a stuck transaction), `evaluate` on ADK's PostgreSQL layout waits at most
/// the lock timeout (as SQLite's busy timeout) and ends with exit 4 saying so, writing
/// nothing; a database with neither layout is refused naming the tables looked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_adk_row_lock_ends_evaluate_with_exit_4() {
    use compaction_core::Timestamp;
    use compaction_core::testing::EventFactory;
    use session_store::AdkPostgresStore;

    let Some(url) = database_url("a_held_adk_row_lock_ends_evaluate_with_exit_4") else {
        return;
    };
    let db = fresh_database(&url, "cli_adk_lock").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let evaluate = || {
        run(compaction(dir.path())
            .args([
                "evaluate",
                "--decision",
                "offline",
                "--summarizer",
                "offline",
            ])
            .args(["--app", "zocrates", "--user", "u1", "--session", "s1"])
            .args(["--db", &db]))
    };
    // Neither layout yet.
    let out = evaluate();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    for table in [
        "compaction.schema_version",
        "public.adk_internal_metadata",
        "public.sessions",
        "public.events",
    ] {
        assert!(text(&out).contains(table), "{}", text(&out));
    }

    let admin = pg::admin(&db).await;
    admin.batch_execute(ADK_PG_DDL).await.expect("ADK's DDL");
    let store = AdkPostgresStore::connect(&db).await.expect("the ADK store");
    let key = SessionKey::new("zocrates", "u1", "s1");
    let created = store
        .create_session(&key, serde_json::Map::new())
        .await
        .expect("create");
    let mut f = EventFactory::new();
    let created_at = created.revision.0 as f64 / 1e6;
    let mut revision = created.revision;
    let mut n = 0.0;
    for turn in 0..8 {
        let inv = format!("inv{turn}");
        let mut events = f.conversational_turn(&inv, &format!("Question {turn}?"), "Answer.");
        events[1] = events[1].clone().with_prompt_tokens(120_000);
        for mut e in events {
            n += 1.0;
            e.timestamp = Timestamp::new(created_at + n / 1_000.0).unwrap();
            revision = store.append(&key, revision, e).await.expect("append");
        }
    }
    let before = store.load(&key).await.expect("load");
    // Another transaction holds ADK's row lock for the whole run.
    let holder = pg::admin(&db).await;
    holder
        .batch_execute(
            "BEGIN; SELECT 1 FROM sessions WHERE app_name = 'zocrates' AND user_id = 'u1' \
             AND id = 's1' FOR UPDATE",
        )
        .await
        .expect("hold the row lock");
    let out = evaluate();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        text(&out).contains("lock timeout") && text(&out).contains("55P03"),
        "{}",
        text(&out)
    );
    holder.batch_execute("ROLLBACK").await.expect("release");
    assert_eq!(
        store.load(&key).await.expect("load"),
        before,
        "evaluate wrote"
    );
    // Released, the same run compacts.
    let out = evaluate();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        store.load(&key).await.expect("load").events.len(),
        before.events.len() + 1
    );
}
