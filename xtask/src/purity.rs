//! The purity check: compaction-core's normal dependency tree must hold no I/O crate, and
//! the workspace's crates depend on each other only as ARCHITECTURE.md's dependency rule
//! allows.

use std::process::Command;

/// Crates compaction-core must never depend on (normal dependencies).
const FORBIDDEN: [&str; 6] = [
    "tokio",
    "reqwest",
    "rusqlite",
    "libsqlite3-sys",
    "hyper",
    "opentelemetry",
];

/// The registry prefix of our crates' package names; the rule below names each crate by its
/// folder (`adaptive-compaction-core` is `compaction-core`).
const PACKAGE_PREFIX: &str = "adaptive-compaction-";

/// A package's name as the rule writes it: its folder's name.
fn folder_name(package: &str) -> String {
    match package.strip_prefix(PACKAGE_PREFIX) {
        Some("core") => "compaction-core".to_owned(),
        Some(rest) => rest.to_owned(),
        None => package.to_owned(),
    }
}

/// Which of our crates each library crate may depend on (normal dependencies). A crate not
/// listed may depend on none of ours but the core; `cli`, `tests` and `xtask` are composition
/// roots and may depend on anything.
const ALLOWED: [(&str, &[&str]); 8] = [
    ("compaction-core", &[]),
    ("decision-client", &["compaction-core"]),
    ("summarizer", &["compaction-core", "decision-client"]),
    ("session-store", &["compaction-core"]),
    ("config-ssot", &["compaction-core"]),
    ("telemetry", &["compaction-core"]),
    // config-ssot for the page's preferences (feature `http`): the settings file is the
    // single source of truth, saved and watched through config-ssot only; decision-client for
    // the coordinator client's URL rules (one owner, as for the summarizer's client).
    (
        "service",
        &["compaction-core", "config-ssot", "decision-client"],
    ),
    ("cli", &["*"]),
];

/// The composition roots: they may depend on every crate of ours.
const ROOTS: [&str; 3] = ["cli", "tests", "xtask"];

/// Runs `cargo tree -p adaptive-compaction-core -e normal` and the other [`FENCES`] and fails on any
/// forbidden crate, then checks the dependency rule between our crates.
pub(crate) fn check() -> Result<(), String> {
    feature_fences()?;
    dependency_rule()
}

/// Our crates' normal dependencies on each other, from `cargo metadata`.
fn dependency_rule() -> Result<(), String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .map_err(|e| format!("could not run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata is not JSON: {e}"))?;
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let ours: Vec<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    let mut edges = Vec::new();
    for package in &packages {
        let name = package["name"].as_str().unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let normal = dep["kind"].is_null();
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if normal && ours.iter().any(|o| o == dep_name) {
                edges.push((folder_name(name), folder_name(dep_name)));
            }
        }
    }
    let broken = rule_violations(&edges);
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the dependency rule (ARCHITECTURE.md) is broken: {}",
            broken.join("; ")
        ))
    }
}

/// The edges `crate -> dependency` that the rule forbids.
fn rule_violations(edges: &[(String, String)]) -> Vec<String> {
    edges
        .iter()
        .filter(|(from, to)| {
            if ROOTS.contains(&from.as_str()) {
                return false;
            }
            let allowed = ALLOWED
                .iter()
                .find(|(name, _)| name == from)
                .map_or(&["compaction-core"][..], |(_, allowed)| *allowed);
            !allowed.iter().any(|a| *a == "*" || a == to)
        })
        .map(|(from, to)| format!("{from} may not depend on {to}"))
        .collect()
}

/// The feature fences: what a crate built with only the named features must not pull in.
/// Each is `(package, cargo tree arguments, forbidden crates, why)`; a forbidden crate
/// matches by name or as a `name-`/`name_` family.
pub(crate) const FENCES: [(&str, &[&str], &[&str], &str); 8] = [
    (
        "adaptive-compaction-core",
        &[],
        &FORBIDDEN,
        "compaction-core must stay I/O-free",
    ),
    (
        "xtask",
        &[],
        &["reqwest", "hyper", "rustls"],
        "xtask must not need an HTTP client (remote evaluations take --features remote)",
    ),
    (
        "adaptive-compaction-decision-client",
        &["--no-default-features"],
        &["reqwest", "hyper", "rustls", "tokio"],
        "decision-client without `http` (the offline model) must not build an HTTP client",
    ),
    (
        "adaptive-compaction-summarizer",
        &["--no-default-features"],
        &["reqwest", "hyper", "rustls", "tokio"],
        "summarizer without `http` (the offline summarizer) must not build an HTTP client",
    ),
    (
        "adaptive-compaction-session-store",
        &["--no-default-features", "--features", "postgres"],
        &["rusqlite", "libsqlite3-sys"],
        "session-store without `sqlite` (PostgresStore alone) must not link SQLite, so that a \
         host using sqlx's SQLite can depend on it",
    ),
    (
        "adaptive-compaction-cli",
        &["--no-default-features"],
        &["tokio-postgres", "deadpool-postgres"],
        "cli without `postgres` (what xtask and a library consumer of cli build) must not \
         build the PostgreSQL driver",
    ),
    (
        "adaptive-compaction-service",
        &["--no-default-features", "--features", "http"],
        &["reqwest"],
        "service with `http` alone (the server, the page and the offline coordinator) must not \
         build an HTTP client: the coordinator's OpenAI-compatible client is feature `openai`",
    ),
    (
        "adaptive-compaction-telemetry",
        &["--no-default-features"],
        &["opentelemetry_sdk", "opentelemetry-otlp", "reqwest"],
        "telemetry without `otlp` (the span adapter) must need the OpenTelemetry API only",
    ),
];

fn feature_fences() -> Result<(), String> {
    let broken: Vec<String> = FENCES
        .iter()
        .filter_map(
            |(package, args, forbidden, why)| match normal_tree(package, args) {
                Ok(tree) => {
                    let found = offenders(&tree, forbidden);
                    (!found.is_empty()).then(|| {
                        format!(
                            "{why}, but `cargo tree -p {package} -e normal {}` holds: {}",
                            args.join(" "),
                            found.join(", ")
                        )
                    })
                }
                Err(e) => Some(e),
            },
        )
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(broken.join("\n"))
    }
}

/// `cargo tree -p PACKAGE -e normal --prefix none ARGS`.
fn normal_tree(package: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(args)
        .output()
        .map_err(|e| format!("could not run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {package} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn offenders(tree: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| {
            forbidden.iter().any(|f| {
                name == f
                    || name.starts_with(&format!("{f}-"))
                    || name.starts_with(&format!("{f}_"))
            })
        })
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::{offenders, rule_violations};

    fn edges(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn the_dependency_rule_refuses_adapters_that_depend_on_each_other() {
        let ok = edges(&[
            ("summarizer", "decision-client"),
            ("cli", "telemetry"),
            ("tests", "session-store"),
        ]);
        assert!(rule_violations(&ok).is_empty());
        let bad = edges(&[
            ("compaction-core", "telemetry"),
            ("telemetry", "session-store"),
            ("newcrate", "decision-client"),
        ]);
        assert_eq!(
            rule_violations(&bad),
            [
                "compaction-core may not depend on telemetry",
                "telemetry may not depend on session-store",
                "newcrate may not depend on decision-client",
            ]
        );
    }

    #[test]
    fn package_names_read_as_folders() {
        assert_eq!(
            super::folder_name("adaptive-compaction-core"),
            "compaction-core"
        );
        assert_eq!(
            super::folder_name("adaptive-compaction-session-store"),
            "session-store"
        );
        assert_eq!(super::folder_name("xtask"), "xtask");
    }

    /// The workspace as it is keeps the rule.
    #[test]
    fn the_workspace_keeps_the_dependency_rule() {
        super::dependency_rule().unwrap();
    }

    #[test]
    fn finds_forbidden_crates_and_their_families() {
        let tree = "compaction-core v0.0.0\nserde v1.0.0\ntokio v1.54.1\nopentelemetry_sdk v0.33.1\nhyper-util v0.1\n";
        assert_eq!(
            offenders(tree, &super::FORBIDDEN),
            ["hyper-util", "opentelemetry_sdk", "tokio"]
        );
        assert!(offenders("serde v1\nthiserror v2\n", &super::FORBIDDEN).is_empty());
    }

    /// What xtask's tree held before the `http` features: reqwest by way of decision-client.
    #[test]
    fn the_xtask_fence_refuses_an_http_client() {
        let (_, _, forbidden, _) = super::FENCES
            .iter()
            .find(|(package, ..)| *package == "xtask")
            .expect("an xtask fence");
        let before =
            "xtask v0.1.0\ndecision-client v0.1.0\nreqwest v0.13.5\nhyper v1.8.1\nrustls v0.23\n";
        assert_eq!(offenders(before, forbidden), ["hyper", "reqwest", "rustls"]);
    }

    /// What cli's tree held before its `postgres` feature: the driver by way of session-store.
    #[test]
    fn the_cli_fence_refuses_the_postgres_driver() {
        let (_, args, forbidden, _) = super::FENCES
            .iter()
            .find(|(package, ..)| *package == "adaptive-compaction-cli")
            .expect("a cli fence");
        assert_eq!(*args, ["--no-default-features"]);
        let before = "adaptive-compaction-cli v0.1.0\nadaptive-compaction-session-store v0.1.0\n\
                      tokio-postgres v0.7.18\ndeadpool-postgres v0.14.2\npostgres-types v0.2\n";
        assert_eq!(
            offenders(before, forbidden),
            ["deadpool-postgres", "tokio-postgres"]
        );
    }

    /// The workspace as it is keeps every feature fence (xtask without reqwest, the offline
    /// adapters without an HTTP client, the span adapter without the SDK, the core pure).
    #[test]
    fn the_workspace_keeps_every_feature_fence() {
        super::feature_fences().unwrap();
    }
}
