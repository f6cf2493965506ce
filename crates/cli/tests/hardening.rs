//! Regression tests of issue 20 (hardening), each against the built binary and real files:
//! corrupt databases, read-only reading commands, config locking, terminal output, output
//! failures.

mod common;

use common::{compaction, offline_replay, success};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;

/// A plain transcript of `n` turns (prompt tokens grow, so compaction happens).
fn transcript(n: usize) -> String {
    (1..=n)
        .map(|i| {
            json!({
                "user": format!("Question {i} about the solid electrolyte interphase?"),
                "assistant": format!("Answer {i}: a finding of {i}.5 mAh/g, with some detail to fill a page."),
                "prompt_tokens": 2_000 + 400 * i,
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replays `n` turns offline into `db` as session `session`; the default config location is
/// under `dir` (no file there).
fn replay_into(dir: &Path, db: &Path, session: &str, n: usize) -> Output {
    let file = dir.join(format!("{session}.jsonl"));
    std::fs::write(&file, transcript(n)).expect("write transcript");
    offline_replay(&file)
        .args(["--json"])
        .args(["--session", session, "--db"])
        .arg(db)
        .env("ZOTERO_DATA_DIR", dir)
        .output()
        .expect("run replay")
}

#[track_caller]
fn assert_success(out: &Output) {
    success("the run", out);
}

/// The files in `dir` whose names start with `prefix`, sorted; the check stamp a writing run
/// leaves when it closes cleanly (`<file>-compaction-check`) is not counted.
fn files_like(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && !n.ends_with("-compaction-check"))
        .collect();
    names.sort();
    names
}

/// A native database of `n` replayed turns in a fresh temp dir.
fn native_db(n: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    assert_success(&replay_into(dir.path(), &db, "first", n));
    (dir, db)
}

/// Overwrites one page in the middle of the file with 0xFF bytes (an invalid b-tree page).
fn damage_middle_page(db: &Path) {
    let mut bytes = std::fs::read(db).expect("read db");
    let page = 4096;
    let pages = bytes.len() / page;
    assert!(
        pages >= 8,
        "the database is too small to damage: {pages} pages"
    );
    let at = (pages / 2) * page;
    bytes[at..at + page].fill(0xFF);
    std::fs::write(db, bytes).expect("write db");
}

/// Issue 20 item 3: a database damaged in the middle is refused with exit 4 naming the file
/// before the first write of `replay` and `evaluate`; the file is left byte-identical.
#[test]
fn a_damaged_database_is_refused_before_the_first_write() {
    let (dir, db) = native_db(120);
    damage_middle_page(&db);
    let before = std::fs::read(&db).expect("read");
    let out = replay_into(dir.path(), &db, "second", 3);
    assert_eq!(
        out.status.code(),
        Some(4),
        "replay on a damaged file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sessions.db"), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    let out = compaction()
        .args([
            "evaluate",
            "--decision",
            "offline",
            "--summarizer",
            "offline",
        ])
        .args([
            "--app",
            "zocrates",
            "--user",
            "replay",
            "--session",
            "first",
            "--db",
        ])
        .arg(&db)
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run evaluate");
    assert_eq!(
        out.status.code(),
        Some(4),
        "evaluate on a damaged file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&db).expect("read"),
        before,
        "the file was written"
    );
    assert_eq!(files_like(dir.path(), "sessions.db"), ["sessions.db"]);
}

/// Issue 20 item 3: `inspect --check` runs SQLite's full integrity check: exit 0 and "ok" on a
/// sound file, exit 4 naming the file and the damage on a damaged one.
#[test]
fn inspect_check_runs_the_full_integrity_check() {
    let (_dir, db) = native_db(120);
    let inspect = |db: &Path| {
        compaction()
            .args([
                "inspect", "--check", "--app", "zocrates", "--user", "replay",
            ])
            .args(["--session", "first", "--db"])
            .arg(db)
            .output()
            .expect("run inspect")
    };
    let out = inspect(&db);
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("integrity check: ok"), "{stdout}");
    damage_middle_page(&db);
    let out = inspect(&db);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sessions.db") && stderr.contains("integrity_check"),
        "{stderr}"
    );
}

/// Issue 20 item 6: `inspect` opens the database read-only: it never migrates an older file,
/// leaves no `-wal`/`-shm` behind, and reads while another connection holds the write lock.
#[test]
fn inspect_reads_without_writing_migrating_or_waiting_for_a_writer() {
    let (dir, db) = native_db(10);
    // An older schema version (1 has the same tables): a reader must not migrate it.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.pragma_update(None, "user_version", 1)
        .expect("set version");
    drop(conn);
    assert_eq!(files_like(dir.path(), "sessions.db"), ["sessions.db"]);
    let inspect = || {
        compaction()
            .args(["inspect", "--app", "zocrates", "--user", "replay"])
            .args(["--session", "first", "--db"])
            .arg(&db)
            .output()
            .expect("run inspect")
    };
    assert_success(&inspect());
    assert_eq!(
        files_like(dir.path(), "sessions.db"),
        ["sessions.db"],
        "inspect left files behind"
    );
    let conn = rusqlite::Connection::open(&db).expect("open");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("version");
    assert_eq!(version, 1, "inspect migrated the file");
    // Another process's writer holds the write lock for the whole run of inspect.
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE sessions SET updated_at = updated_at;")
        .expect("hold the write lock");
    let out = compaction()
        .args(["inspect", "--app", "zocrates", "--user", "replay"])
        .args(["--session", "first", "--db"])
        .arg(&db)
        .output()
        .expect("run inspect");
    assert_success(&out);
    conn.execute_batch("ROLLBACK").expect("rollback");
}

/// Control characters a session or a transcript may carry: an OSC retitle (ESC … BEL), a
/// screen clear (CSI 2J), NUL, a carriage return and a right-to-left override.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{0}\r\u{202e}txt.exe";

/// No raw control or bidi character in `text`.
#[track_caller]
fn assert_terminal_safe(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}')
        .collect();
    assert!(bad.is_empty(), "{what} prints raw {bad:?}: {text}");
}

/// Issue 20 item 4: session text and unknown transcript field names reach the terminal
/// escaped in `replay`, `inspect` and error messages, while `--json` output stays exact JSON.
#[test]
fn session_text_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let file = dir.path().join("hostile.jsonl");
    let turns: Vec<String> = (1..=12)
        .map(|i| {
            json!({
                "user": format!("Question {i} {HOSTILE}"),
                "assistant": format!("Answer {i} {HOSTILE}"),
                "prompt_tokens": 2_000 + 4_000 * i,
            })
            .to_string()
        })
        .collect();
    std::fs::write(&file, turns.join("\n")).expect("write");
    let out = offline_replay(&file)
        .args(["--session", "s", "--db"])
        .arg(&db)
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run replay");
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_terminal_safe("replay", &stdout);
    assert!(stdout.contains("\\u{1b}]0;owned\\u{7}"), "{stdout}");
    let out = compaction()
        .args([
            "inspect",
            "--app",
            "zocrates",
            "--user",
            "replay",
            "--session",
            "s",
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .expect("run inspect");
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_terminal_safe("inspect", &stdout);
    assert!(stdout.contains("\\u{202e}txt.exe"), "{stdout}");
    // JSON output is exact: the text round-trips through a JSON parser unchanged.
    let out = offline_replay(&file)
        .args(["--json"])
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run replay --json");
    assert_success(&out);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every line is JSON");
    }
    // An unknown field name is named in the error, escaped.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        json!({ "user": "q", "assistant": "a", format!("x{HOSTILE}"): 1 }).to_string(),
    )
    .expect("write");
    let out = offline_replay(&bad)
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run replay");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_terminal_safe("an error", &stderr);
    assert!(stderr.contains("x\\u{1b}]0;owned"), "{stderr}");
}

/// Waits for `child` at most `limit`; a child still running then is killed and reported.
fn finish_within(mut child: std::process::Child, limit: std::time::Duration) -> Output {
    let deadline = std::time::Instant::now() + limit;
    // Polling a child for a hang: there is no timed wait in std.
    while child.try_wait().expect("poll child").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("reap child");
            panic!(
                "still running after {limit:?}; stderr so far: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("collect child")
}

/// Issue 20 item 7: `replay` reads the settings file without writing it (missing keys take
/// their defaults in memory), creates no lock file, and waits for a writer holding the lock a
/// bounded time, saying so, instead of for ever.
#[test]
fn replay_reads_the_config_without_writing_it_or_waiting_for_ever() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("zocrates_config.json");
    let text = "{\"adaptive_compaction_threshold\": 0.9}";
    std::fs::write(&config, text).expect("write config");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(3)).expect("write transcript");
    let run = || {
        offline_replay(&file)
            .args(["--config"])
            .arg(&config)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn replay")
    };
    let limit = std::time::Duration::from_secs(60);
    assert_success(&finish_within(run(), limit));
    assert_eq!(std::fs::read_to_string(&config).expect("read"), text);
    assert_eq!(
        files_like(dir.path(), "zocrates_config"),
        ["zocrates_config.json"],
        "a lock or temporary file was created"
    );
    // Another process (this test) holds the settings lock for the whole run.
    let lock = std::fs::File::create(dir.path().join("zocrates_config.json.lock")).expect("lock");
    lock.lock().expect("hold the lock");
    let out = finish_within(run(), limit);
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("waiting up to 5 s for the settings lock"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("were read without it"), "{stdout}");
}

/// The number of events of session `session` (app `zocrates`, user `replay`) in `db`.
fn stored_events(db: &Path, session: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        "SELECT count(*) FROM events JOIN sessions ON events.session_pk = sessions.pk \
         WHERE sessions.session_id = ?1",
        [session],
        |r| r.get(0),
    )
    .expect("count")
}

/// Issue 20 item 11: a closed stdout (`| head`) does not cut the replay short: the session is
/// finished, and stderr says so with a non-zero exit.
#[test]
fn a_closed_stdout_still_finishes_the_session_and_says_so() {
    let (dir, db) = native_db(30);
    let full = stored_events(&db, "first");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(30)).expect("write");
    let mut child = offline_replay(&file)
        .args(["--session", "second", "--db"])
        .arg(&db)
        .env("ZOTERO_DATA_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Close the read end at once: every write of the child fails with a broken pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot write output") && stderr.contains("finished session"),
        "{stderr}"
    );
    assert_eq!(stored_events(&db, "second"), full, "the session is partial");
}

/// Issue 20 item 11: a store that fails part-way (a full disk, simulated by a trigger that
/// refuses inserts past a point) rolls the session back, says so, and the id can be reused.
#[test]
fn a_store_failure_part_way_rolls_the_session_back_and_says_so() {
    let (dir, db) = native_db(3);
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "CREATE TRIGGER disk_full BEFORE INSERT ON events \
         WHEN (SELECT count(*) FROM events) >= 40 \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END;",
    )
    .expect("trigger");
    let out = replay_into(dir.path(), &db, "second", 20);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("was rolled back"), "{stderr}");
    assert_eq!(stored_events(&db, "second"), 0, "a partial session is left");
    conn.execute_batch("DROP TRIGGER disk_full")
        .expect("drop trigger");
    drop(conn);
    assert_success(&replay_into(dir.path(), &db, "second", 20));
}

/// Issue 20 item 2: on the uncompacted path the session state the replay writes stays bounded:
/// no research turn's `state_delta` carries more than `RESEARCH_WINDOW_TURNS` entries of
/// `RESEARCH_TURN_HISTORY`, however long the session grows without a compaction.
#[test]
fn the_research_history_in_the_session_state_stays_bounded_without_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("off.json");
    std::fs::write(&config, r#"{"enable_adaptive_compaction": false}"#).expect("config");
    let turns = cli::replay::RESEARCH_WINDOW_TURNS + 40;
    let lines: Vec<String> = (1..=turns)
        .map(|i| {
            json!({ "user": format!("q{i}"), "assistant": format!("a{i}"), "findings_summary": format!("f{i}") })
                .to_string()
        })
        .collect();
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, lines.join("\n")).expect("write");
    let db = dir.path().join("sessions.db");
    let out = offline_replay(&file)
        .args(["--json", "--config"])
        .arg(&config)
        .arg("--db")
        .arg(&db)
        .output()
        .expect("run replay");
    assert_success(&out);
    let conn = rusqlite::Connection::open(&db).expect("open");
    let (largest, research_turns): (i64, i64) = conn
        .query_row(
            "SELECT max(json_array_length(body, '$.actions.state_delta.RESEARCH_TURN_HISTORY')), \
             count(json_extract(body, '$.actions.state_delta.RESEARCH_TURN_HISTORY')) FROM events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("query");
    assert_eq!(research_turns, turns as i64);
    assert_eq!(largest, cli::replay::RESEARCH_WINDOW_TURNS as i64);
}

/// Issue 20 (what keeps these from coming back): `replay` killed (SIGKILL) at many points
/// leaves a database that passes SQLite's full integrity check and reopens, and every
/// compaction a record reported before the kill is stored. The kill points are spread by a
/// fixed-seed generator so that a failure reproduces.
#[test]
fn replay_killed_at_random_points_keeps_the_database_sound_and_every_reported_compaction() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let turns = 60;
    let lines: Vec<String> = (1..=turns)
        .map(|i| {
            json!({ "user": format!("Question {i}?"), "assistant": format!("Answer {i}, with a finding."),
                    "prompt_tokens": 2_000 + 4_000 * i })
            .to_string()
        })
        .collect();
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, lines.join("\n")).expect("write");
    let db = dir.path().join("sessions.db");
    let mut seed: u64 = 0x5eed_2020;
    let mut killed_with_compactions = 0;
    for round in 0..8 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // A kill point after the banner and between 1 and `turns` turn records.
        let kill_after = 1 + (seed >> 33) as usize % turns;
        let session = format!("crash-{round}");
        let mut child = offline_replay(&file)
            .args(["--json"])
            .args(["--session", &session, "--db"])
            .arg(&db)
            .env("ZOTERO_DATA_DIR", dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let mut reported = 0;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .skip(1)
            .take(kill_after)
        {
            let record: serde_json::Value =
                serde_json::from_str(&line.expect("line")).expect("JSON");
            if matches!(record["outcome"].as_str(), Some("compressed" | "forced")) {
                reported += 1;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        session_store::check_integrity(&db).expect("the file is sound after the kill");
        let store = session_store::blocking::SqliteStore::open(&db).expect("reopens");
        let key = compaction_core::SessionKey::new("zocrates", "replay", session);
        let stored = store.compaction_history(&key).expect("history").len();
        assert!(
            stored >= reported,
            "round {round}, killed after {kill_after} records: {reported} compactions reported, {stored} stored"
        );
        if reported > 0 {
            killed_with_compactions += 1;
        }
    }
    assert!(
        killed_with_compactions > 0,
        "no round was killed after a compaction"
    );
}

/// Issue 20 item 13: an OTLP endpoint with a wrong path (HTTP 404) is reported once on stderr
/// by default (no `COMPACTION_LOG` needed), and the run still succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_otlp_endpoint_is_warned_about_once() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript(12)).expect("write");
    let endpoint = format!("{}/wrong/path", server.uri());
    let out = tokio::task::spawn_blocking(move || {
        offline_replay(&file)
            .args(["--otlp-endpoint", &endpoint])
            .env("ZOTERO_DATA_DIR", dir.path())
            .output()
            .expect("run replay")
    })
    .await
    .expect("join");
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("spans could not be sent to").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("/wrong/path"), "{stderr}");
}

/// Issue 29 item 1: a writing run skips SQLite's whole-file check when the file is exactly as
/// the last run left it (the check stamp), so damage that keeps the file's size and modification
/// time (bit rot) in pages the run never reads is not seen by that run: it appends its turns
/// (every page it reads is checked by SQLite as it reads it), and `inspect --check`, the full
/// check, still finds the damage. Damage that changes the modification time is refused before the
/// first write (the test above).
#[test]
fn damage_in_pages_a_run_does_not_read_is_found_by_the_full_check() {
    let (dir, db) = native_db(120);
    let stamp = dir.path().join("sessions.db-compaction-check");
    assert!(stamp.exists(), "a clean writing run leaves the check stamp");
    let modified = std::fs::metadata(&db)
        .and_then(|m| m.modified())
        .expect("mtime");
    damage_middle_page(&db);
    std::fs::File::options()
        .write(true)
        .open(&db)
        .and_then(|f| f.set_modified(modified))
        .expect("keep the modification time, as bit rot would");
    let out = replay_into(dir.path(), &db, "second", 3);
    assert_success(&out);
    let inspect = compaction()
        .args([
            "inspect", "--check", "--app", "zocrates", "--user", "replay",
        ])
        .args(["--session", "second", "--db"])
        .arg(&db)
        .output()
        .expect("run inspect --check");
    assert_eq!(inspect.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&inspect.stderr);
    assert!(stderr.contains("integrity_check"), "{stderr}");
}

/// Issue 29 item 4: `inspect` reads a WAL database that another user owns in a directory it
/// cannot write (an operator inspecting the service's database, a backup volume): it runs as
/// uid 65534 through `setpriv`, creates nothing, and shows the session; with a `-wal` file
/// beside it (a writer at work) it refuses, saying why. Needs root to change uid: elsewhere it
/// prints SKIPPED, under `CI=true` (root) it runs.
#[test]
#[allow(clippy::print_stderr)]
fn inspect_reads_another_users_database_in_a_read_only_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    let test = "inspect_reads_another_users_database_in_a_read_only_directory";
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test} needs root under CI=true"
        );
        eprintln!("SKIPPED {test}: changing to another uid needs root");
        return;
    }
    let (dir, db) = native_db(10);
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    let copy = ro.join("sessions.db");
    std::fs::copy(&db, &copy).expect("copy");
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    mode(&copy, 0o444);
    mode(&ro, 0o555);
    mode(dir.path(), 0o755);
    let inspect = || {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_compaction"))
            .args(["inspect", "--app", "zocrates", "--user", "replay"])
            .args(["--session", "first", "--db"])
            .arg(&copy)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .expect("run inspect as uid 65534")
    };
    let out = inspect();
    assert_success(&out);
    assert_eq!(
        files_like(&ro, "sessions.db"),
        ["sessions.db"],
        "nothing created"
    );
    // A writer's -wal beside it: refused, naming why.
    mode(&ro, 0o755);
    std::fs::write(ro.join("sessions.db-wal"), b"not empty").expect("wal");
    mode(&ro, 0o555);
    let out = inspect();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("being written"), "{stderr}");
}
