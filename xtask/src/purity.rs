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
    // single source of truth, saved and watched through config-ssot only.
    ("service", &["compaction-core", "config-ssot"]),
    ("cli", &["*"]),
];

/// The composition roots: they may depend on every crate of ours.
const ROOTS: [&str; 3] = ["cli", "tests", "xtask"];

/// Runs `cargo tree -p compaction-core -e normal` and fails on any forbidden crate, then
/// checks the dependency rule between our crates.
pub(crate) fn check() -> Result<(), String> {
    io_free_core()?;
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
                edges.push((name.to_owned(), dep_name.to_owned()));
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

fn io_free_core() -> Result<(), String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "compaction-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .map_err(|e| format!("could not run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tree = String::from_utf8_lossy(&out.stdout);
    let found = offenders(&tree);
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "compaction-core must stay I/O-free, but its dependency tree holds: {}",
            found.join(", ")
        ))
    }
}

fn offenders(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| {
            FORBIDDEN.iter().any(|f| {
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

    /// The workspace as it is keeps the rule.
    #[test]
    fn the_workspace_keeps_the_dependency_rule() {
        super::dependency_rule().unwrap();
    }

    #[test]
    fn finds_forbidden_crates_and_their_families() {
        let tree = "compaction-core v0.0.0\nserde v1.0.0\ntokio v1.54.1\nopentelemetry_sdk v0.33.1\nhyper-util v0.1\n";
        assert_eq!(
            offenders(tree),
            ["hyper-util", "opentelemetry_sdk", "tokio"]
        );
        assert!(offenders("serde v1\nthiserror v2\n").is_empty());
    }
}
