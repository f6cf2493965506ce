//! `cargo xtask tidy [--bless]`: the structure rules of issue 34, checked on the source with
//! `syn` (no nightly, no rustdoc JSON): functions and files that fit a screen ([`size`]), no
//! module cycles ([`cycles`]), the public API listed and bounded ([`public_api`]), and
//! ARCHITECTURE.md naming every crate and top-level module ([`architecture`]). `--bless`
//! rewrites the committed public-API listings; everything else only reports.

mod architecture;
mod cycles;
mod public_api;
mod size;
mod source;

use std::path::Path;

/// Runs every rule; the error lists each violation on its own line.
pub(crate) fn check(root: &Path, bless: bool) -> Result<(), String> {
    let crates = source::workspace(root)?;
    let mut problems = size::check(root, &crates);
    problems.extend(cycles::check(&crates));
    problems.extend(public_api::check(root, &crates, bless));
    problems.extend(architecture::check(root, &crates));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tidy: {} problem(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ))
    }
}

#[cfg(test)]
mod tests;
