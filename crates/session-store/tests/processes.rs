//! Real processes against one file: racing writers with expected revisions, and a writer killed
//! with SIGKILL in the middle of its appends. The driver is the crate's `session-store-stress`
//! binary; it reports each acknowledged append on its stdout, line by line.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use compaction_core::{SessionKey, assemble_context, gate_input};
use serde_json::Map;
use session_store::blocking::SqliteStore;

const DRIVER: &str = env!("CARGO_BIN_EXE_session-store-stress");

fn spawn(args: &[&str]) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = Command::new(DRIVER)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the stress driver");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdin, stdout)
}

fn read_line(out: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    let n = out.read_line(&mut line).expect("read the driver's stdout");
    assert!(n > 0, "the driver exited early");
    line.trim_end().to_owned()
}

/// Every round both processes append with the same expected revision: exactly one wins, the
/// other sees the stale-session error, and the stored history holds each winner's event once,
/// at gap-free revisions.
#[test]
fn two_processes_racing_appends_have_exactly_one_winner_per_round() {
    const ROUNDS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let key = SessionKey::new("zocrates", "user-1", "race");
    SqliteStore::open(&db)
        .unwrap()
        .create_session(&key, Map::new())
        .unwrap();
    let db_arg = db.to_str().unwrap();
    let mut procs: Vec<_> = ["A", "B"]
        .iter()
        .map(|name| spawn(&["race", db_arg, "zocrates", "user-1", "race", name]))
        .collect();
    let mut winners = Vec::new();
    for round in 0..ROUNDS {
        // Alternate who hears the starting gun first.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            writeln!(procs[i].1, "{round}").unwrap();
            procs[i].1.flush().unwrap();
        }
        let answers: Vec<String> = (0..2).map(|i| read_line(&mut procs[i].2)).collect();
        let won: Vec<usize> = (0..2).filter(|&i| answers[i].starts_with("ok ")).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let (w, l) = (won[0], 1 - won[0]);
        assert_eq!(answers[w], format!("ok {}", round + 1), "round {round}");
        assert_eq!(answers[l], format!("stale {}", round + 1), "round {round}");
        winners.push(["A", "B"][w]);
    }
    for (mut child, stdin, _) in procs {
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
    let store = SqliteStore::open(&db).unwrap();
    let session = store.get_session(&key).unwrap();
    assert_eq!(session.revision.0, ROUNDS);
    let ids: Vec<String> = session.events.iter().map(|e| e.id.clone()).collect();
    let expected: Vec<String> = winners
        .iter()
        .enumerate()
        .map(|(round, w)| format!("{w}-{round}"))
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(store.integrity_check().unwrap(), ["ok"]);
}

/// A tiny xorshift generator: the kill points vary from run to run, and the seed is in every
/// failure message.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A writer appending in a loop (turns, scoped events, compactions, rewinds) is killed with
/// SIGKILL after a random number of acknowledged appends, several times. After each kill the
/// file passes `PRAGMA integrity_check`, holds every acknowledged event at its revision, and
/// its header and context still equal compaction-core's from the whole history.
#[test]
fn sigkill_mid_append_loses_no_acknowledged_event() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let key = SessionKey::new("zocrates", "user-1", "crash");
    SqliteStore::open(&db)
        .unwrap()
        .create_session(&key, Map::new())
        .unwrap();
    let mut acked: Vec<(u64, String)> = Vec::new();
    for kill in 0..6 {
        let (mut child, _stdin, mut out) =
            spawn(&["crash", db.to_str().unwrap(), "zocrates", "user-1", "crash"]);
        let wanted = 20 + rng.below(80);
        for _ in 0..wanted {
            let line = read_line(&mut out);
            let mut parts = line.split(' ');
            assert_eq!(parts.next(), Some("ack"), "seed {seed}: {line}");
            let revision: u64 = parts.next().unwrap().parse().unwrap();
            let id = parts.next().unwrap().to_owned();
            if let Some((last, _)) = acked.last() {
                assert!(revision > *last, "seed {seed}: revisions went backwards");
            }
            acked.push((revision, id));
        }
        child.kill().unwrap(); // SIGKILL on Unix
        assert!(!child.wait().unwrap().success());

        let store = SqliteStore::open(&db).unwrap();
        assert_eq!(
            store.integrity_check().unwrap(),
            ["ok"],
            "seed {seed}, kill {kill}"
        );
        let session = store.get_session(&key).unwrap();
        assert_eq!(
            session.revision.0 as usize,
            session.events.len(),
            "seed {seed}"
        );
        for (revision, id) in &acked {
            let stored = session
                .events
                .get(*revision as usize - 1)
                .map(|e| e.id.as_str());
            assert_eq!(
                stored,
                Some(id.as_str()),
                "seed {seed}, kill {kill}: ack lost"
            );
        }
        let header = store.header(&key).unwrap();
        assert_eq!(
            header.gate,
            gate_input(&session.events),
            "seed {seed}, kill {kill}"
        );
        assert_eq!(
            store.load_context(&key).unwrap(),
            assemble_context(&session.events)
        );
    }
    // The killed writer went through the slow paths too: compactions and rewinds.
    let session = SqliteStore::open(&db).unwrap().get_session(&key).unwrap();
    assert!(session.events.iter().any(|e| e.compaction().is_some()));
    assert!(
        session
            .events
            .iter()
            .any(|e| e.actions.rewind_before_invocation_id.is_some())
    );
}
