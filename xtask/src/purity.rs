//! The purity check: compaction-core's normal dependency tree must hold no I/O crate.

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

/// Runs `cargo tree -p compaction-core -e normal` and fails on any forbidden crate.
pub(crate) fn check() -> Result<(), String> {
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
    use super::offenders;

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
