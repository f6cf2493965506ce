//! Where the repository's data files are: the one resolver that tests, `xtask` and examples use,
//! so that no default path leaves the repository.
//!
//! - [`repo`] answers the repository's own data (`data/` at the workspace root: the vendored
//!   TIAGE cases, this project's labelled research sessions). It must be there: a missing file is
//!   a failure under `CI=true` and a visible `SKIPPED` line elsewhere (a packaged crate, a
//!   partial checkout).
//! - [`outside`] answers data outside the repository, read only when asked for: the directory
//!   named by [`OUTSIDE_VAR`] (for example the shared research sessions beside a checkout,
//!   `COMPACTION_OUTSIDE_DATA=../shared/data`). Unset, a test that needs it prints `SKIPPED: <why>`
//!   and passes, under `CI=true` too (CI proves that no default reaches outside by running with
//!   the directory beside the checkout hidden, see `.ci/run`).
//!
//! - [`pg`] starts a throwaway PostgreSQL cluster: the one launcher of `cargo xtask pg` and of
//!   the tests that need a cluster of their own.
//!
//! Never published: a path-only dev-dependency, which `cargo publish` strips.

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

pub mod pg;

/// The environment variable naming a data directory outside the repository (read only when a
/// test or command asks for outside data).
pub const OUTSIDE_VAR: &str = "COMPACTION_OUTSIDE_DATA";

/// The vendored TIAGE decision cases (`data/topic-shift/cases.jsonl`).
pub const TIAGE_CASES: &str = "topic-shift/cases.jsonl";
/// This project's labelled research sessions (`data/research-sessions/`).
pub const RESEARCH_SESSIONS: &str = "research-sessions";

/// The repository's `data/` directory.
pub fn data_dir() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/test-data → the workspace root.
    crate_dir
        .ancestors()
        .nth(2)
        .unwrap_or(crate_dir)
        .join("data")
}

/// The repository's data file or directory `relative` (e.g. [`TIAGE_CASES`]), whether or not it
/// exists: a default for a command, which names the path when it cannot read it.
pub fn repo_path(relative: &str) -> PathBuf {
    data_dir().join(relative)
}

/// True under `CI=true`, where a missing repository file fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The repository's data `relative`, for a test: `Some(path)` when it exists; otherwise a
/// `SKIPPED <test>` line on stderr and `None`, or a panic naming the path under `CI=true`.
pub fn repo(test: &str, relative: &str) -> Option<PathBuf> {
    let path = repo_path(relative);
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "the repository's data file {} is missing (a packaged crate or a partial checkout)",
        path.display()
    );
    assert!(!in_ci(), "{test}: {why}; under CI=true it must be there");
    skipped(test, &why);
    None
}

/// The outside data `relative` under the directory named by [`OUTSIDE_VAR`], for a test:
/// `Some(path)` when the variable is set and the path exists; otherwise a `SKIPPED <test>` line
/// saying why, and `None`.
pub fn outside(test: &str, relative: &str) -> Option<PathBuf> {
    match outside_path(relative) {
        Ok(path) => Some(path),
        Err(why) => {
            skipped(test, &why);
            None
        }
    }
}

/// The outside data `relative`, or why it is not available (the variable unset, or the path
/// missing under it).
pub fn outside_path(relative: &str) -> Result<PathBuf, String> {
    let Some(dir) = std::env::var_os(OUTSIDE_VAR) else {
        return Err(format!(
            "{OUTSIDE_VAR} is unset (outside data is read only when asked for, e.g. \
             {OUTSIDE_VAR}=../shared/data)"
        ));
    };
    let path = Path::new(&dir).join(relative);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} does not exist (from {OUTSIDE_VAR})",
            path.display()
        ))
    }
}

/// Prints the visible skip line the project's tests use.
pub fn skipped(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_cases_are_in_the_repository() {
        assert!(
            repo_path(TIAGE_CASES).is_file(),
            "{:?}",
            repo_path(TIAGE_CASES)
        );
        assert!(repo_path(RESEARCH_SESSIONS).is_dir());
    }

    #[test]
    fn outside_data_needs_the_variable() {
        let err = outside_path("no-such-dir-anywhere").unwrap_err();
        assert!(err.contains(OUTSIDE_VAR), "{err}");
    }
}
