//! A child process for config-ssot's multi-process tests (not a user tool): it performs one
//! kind of concurrent work on a settings file and prints one result line.
//!
//! Usage:
//! - `config-ssot-helper increment FILE N`: N `update` increments of the token floor;
//! - `config-ssot-helper inplace FILE N`: N increments written *in place* under the lock, in two
//!   chunks, the way Python's `json.dump` under `filelock` does (a watcher must never see them
//!   half-written);
//! - `config-ssot-helper set FILE KEY VALUE`: one `set`;
//! - `config-ssot-helper load FILE`: one `load`, printing `OK` or `ERR <variant> <message>`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use config_ssot::{ConfigError, ConfigPath, ConfigStore};
use serde_json::Value;

const KEY: &str = "adaptive_compaction_token_floor";

fn count(arg: Option<&String>) -> Result<u64, String> {
    arg.ok_or("missing N")?
        .parse()
        .map_err(|e| format!("N: {e}"))
}

fn in_place_increment(path: &ConfigPath) -> Result<(), String> {
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path.lock_file())
        .map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| e.to_string())?;
    let text = std::fs::read(path.file()).map_err(|e| e.to_string())?;
    let mut map: serde_json::Map<String, Value> =
        serde_json::from_slice(&text).map_err(|e| e.to_string())?;
    let next = map
        .get(KEY)
        .and_then(Value::as_i64)
        .ok_or("no integer floor")?
        + 1;
    map.insert(KEY.to_owned(), Value::from(next));
    let out = serde_json::to_vec_pretty(&map).map_err(|e| e.to_string())?;
    let (head, tail) = out.split_at(out.len() / 2);
    let mut f = File::create(path.file()).map_err(|e| e.to_string())?;
    f.write_all(head).map_err(|e| e.to_string())?;
    f.flush().map_err(|e| e.to_string())?;
    f.write_all(tail).map_err(|e| e.to_string())?;
    drop(f);
    lock.unlock().map_err(|e| e.to_string())
}

fn run(args: &[String]) -> Result<(), String> {
    let mode = args.first().ok_or("missing mode")?;
    let file = PathBuf::from(args.get(1).ok_or("missing FILE")?);
    let path = ConfigPath::from(file);
    let store = ConfigStore::open(path.clone());
    match mode.as_str() {
        "increment" => {
            for _ in 0..count(args.get(2))? {
                store
                    .update(|s| s.adaptive_compaction_token_floor += 1)
                    .map_err(|e| e.to_string())?;
            }
        }
        "inplace" => {
            for _ in 0..count(args.get(2))? {
                in_place_increment(&path)?;
            }
        }
        "set" => {
            let key = args.get(2).ok_or("missing KEY")?;
            let value = args.get(3).ok_or("missing VALUE")?;
            store.set(key, value).map_err(|e| e.to_string())?;
        }
        "load" => match store.load() {
            Ok(_) => println!("OK"),
            Err(e) => println!("ERR {} {e}", variant(&e)),
        },
        other => return Err(format!("unknown mode {other}")),
    }
    Ok(())
}

fn variant(e: &ConfigError) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("config-ssot-helper: {e}");
            ExitCode::FAILURE
        }
    }
}
