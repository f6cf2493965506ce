//! ARCHITECTURE.md stays true (issue 34): it names every crate of the workspace and every
//! top-level module of each (as `` `module` ``, `module.rs` or `module/`).

use std::path::Path;

use super::source::Crate;

pub(crate) fn check(root: &Path, crates: &[Crate]) -> Vec<String> {
    let file = root.join("ARCHITECTURE.md");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return vec![format!("{}: cannot be read", file.display())];
    };
    let mut problems = Vec::new();
    for krate in crates {
        if !text.contains(&krate.name) {
            problems.push(format!(
                "ARCHITECTURE.md never names the crate `{}`",
                krate.name
            ));
        }
        let mut tops: Vec<&str> = krate
            .modules
            .iter()
            .filter(|m| m.path.len() == 1 && !m.test_only)
            .map(|m| m.path[0].as_str())
            .collect();
        tops.sort_unstable();
        tops.dedup();
        for module in tops {
            let named = [
                format!("`{module}`"),
                format!("{module}.rs"),
                format!("{module}/"),
                format!("::{module}"),
            ]
            .iter()
            .any(|form| text.contains(form.as_str()));
            if !named {
                problems.push(format!(
                    "ARCHITECTURE.md never names {}'s module `{module}` (as `{module}`, {module}.rs or {module}/)",
                    krate.name
                ));
            }
        }
    }
    problems
}
