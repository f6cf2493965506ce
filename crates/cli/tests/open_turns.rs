//! No turn stays open after a crash (issue 28), from outside: `compaction serve` is killed
//! (SIGKILL) while the coordinator has not answered, so its session keeps the query with no
//! reply. A restart closes that turn with an `interrupted` reply once the session has been
//! quiet for `--open-turn-quiet`, and not before (another replica may still be streaming it).

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::{Serve, serve_in, use_coordinator};
use compaction_core::INTERRUPTED_CODE;
use compaction_core::SessionKey;

/// Answers every completion after a long delay, and says when it was asked.
struct Stalled(std::sync::Mutex<mpsc::Sender<()>>);

impl wiremock::Respond for Stalled {
    fn respond(&self, _: &wiremock::Request) -> wiremock::ResponseTemplate {
        let _ = self.0.lock().expect("sender").send(());
        wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(600))
    }
}

fn serve(dir: &Path, extra: &[&str]) -> Serve {
    serve_in(dir, extra, &[])
}

fn banner_line<'a>(server: &'a Serve, prefix: &str) -> &'a str {
    server
        .banner
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {:?}", server.banner))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_cut_by_sigkill_is_closed_as_interrupted_at_restart_once_quiet() {
    let upstream = wiremock::MockServer::start().await;
    let (asked, was_asked) = mpsc::channel();
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Stalled(std::sync::Mutex::new(asked)))
        .mount(&upstream)
        .await;
    let dir = tempfile::tempdir().expect("dir");
    use_coordinator(dir.path(), &upstream.uri());
    let mut first = serve(dir.path(), &[]);
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{}/v1/sessions", first.base))
        .json(&serde_json::json!({"app": "a", "user": "u", "id": "s"}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let chat = http
        .post(format!("{}/v1/sessions/a/u/s/chat", first.base))
        .json(&serde_json::json!({"message": "What did the survey find?"}))
        .send();
    let pending = tokio::spawn(chat);
    // The query is stored before the coordinator is called: once it is asked, kill.
    tokio::task::spawn_blocking(move || was_asked.recv_timeout(Duration::from_secs(60)))
        .await
        .expect("join")
        .expect("the coordinator was asked");
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    drop(pending);

    let key = SessionKey::new("a", "u", "s");
    let db = dir.path().join("sessions.db");
    let last = |db: &Path| {
        let store = session_store::blocking::SqliteStore::open(db).expect("open");
        let session = store.get_session(&key).expect("session");
        let events = session.events;
        (events.len(), events.last().cloned().expect("an event"))
    };
    let (count, query) = last(&db);
    assert_eq!(count, 1, "only the query was stored");
    assert_eq!(query.author, "user");

    // Restarted at once: the turn may be another replica's, still streaming; it stays open.
    let second = serve(dir.path(), &[]);
    let line = banner_line(&second, "open turns:");
    assert!(line.contains("open turns: 0 left by a crash"), "{line}");
    drop(second);
    assert_eq!(last(&db).0, 1);

    // Quiet for longer than the bound: closed, once.
    let third = serve(dir.path(), &["--open-turn-quiet", "0.001"]);
    let line = banner_line(&third, "open turns:");
    assert!(
        line.contains("open turns: 1 left by a crash closed"),
        "{line}"
    );
    drop(third);
    let (count, closing) = last(&db);
    assert_eq!(count, 2);
    assert_eq!(closing.error_code.as_deref(), Some(INTERRUPTED_CODE));
    assert_eq!(closing.invocation_id, query.invocation_id);

    let fourth = serve(dir.path(), &["--open-turn-quiet", "0.001"]);
    let line = banner_line(&fourth, "open turns:");
    assert!(line.contains("open turns: 0 left by a crash"), "{line}");
    drop(fourth);
    assert_eq!(last(&db).0, 2, "a closed turn is not closed twice");
}
