//! Modules that fit a screen: no non-test source file over [`MAX_FILE_LINES`] lines and no
//! non-test function over [`MAX_FN_LINES`] (issue 34). Test modules (`#[cfg(test)]`) and test
//! functions are not counted; generated tables are named in [`GENERATED`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;

use super::source::{Crate, Module, cfg_test, is_test_fn};

pub(crate) const MAX_FILE_LINES: usize = 600;
pub(crate) const MAX_FN_LINES: usize = 80;

/// Files that hold generated data rather than code (paths relative to the workspace root),
/// exempt from the file-length rule.
pub(crate) const GENERATED: &[&str] = &[];

/// Every violation, one line each, with the file and the count.
pub(crate) fn check(root: &Path, crates: &[Crate]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut file_lines: BTreeMap<PathBuf, (usize, usize)> = BTreeMap::new();
    for krate in crates {
        for module in &krate.modules {
            if module.test_only {
                continue;
            }
            let entry = file_lines.entry(module.file.clone()).or_insert((0, 0));
            if let Some(total) = file_total(module) {
                entry.0 = total;
            }
            entry.1 += test_lines(&module.items);
            for (name, lines, line) in long_functions(module) {
                problems.push(format!(
                    "{}:{line}: fn `{name}` runs {lines} lines (at most {MAX_FN_LINES})",
                    relative(root, &module.file)
                ));
            }
        }
    }
    for (file, (total, tests)) in file_lines {
        let rel = relative(root, &file);
        let code = total.saturating_sub(tests);
        if code > MAX_FILE_LINES && !GENERATED.contains(&rel.as_str()) {
            problems.push(format!(
                "{rel}: {code} non-test lines (at most {MAX_FILE_LINES}; split it by job)"
            ));
        }
    }
    problems
}

pub(crate) fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// The line count of the file the module lives in.
fn file_total(module: &Module) -> Option<usize> {
    std::fs::read_to_string(&module.file)
        .ok()
        .map(|text| text.lines().count())
}

/// Lines taken by `#[cfg(test)]` items directly in these items.
fn test_lines(items: &[syn::Item]) -> usize {
    items
        .iter()
        .filter(|item| cfg_test(item_attrs(item)))
        .map(|item| span_lines(item.span()))
        .sum()
}

fn span_lines(span: proc_macro2::Span) -> usize {
    span.end().line - span.start().line + 1
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// Non-test functions longer than the limit: (name, lines, first line).
fn long_functions(module: &Module) -> Vec<(String, usize, usize)> {
    let mut found = Vec::new();
    let mut note = |name: String, sig: &syn::Signature, block: &syn::Block| {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let lines = end - start + 1;
        if lines > MAX_FN_LINES {
            found.push((name, lines, start));
        }
    };
    for item in &module.items {
        if cfg_test(item_attrs(item)) {
            continue;
        }
        match item {
            syn::Item::Fn(f) if !is_test_fn(&f.attrs) => {
                note(f.sig.ident.to_string(), &f.sig, &f.block)
            }
            syn::Item::Impl(imp) => {
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it
                        && !cfg_test(&f.attrs)
                    {
                        note(f.sig.ident.to_string(), &f.sig, &f.block);
                    }
                }
            }
            syn::Item::Trait(t) => {
                for it in &t.items {
                    if let syn::TraitItem::Fn(f) = it
                        && let Some(block) = &f.default
                    {
                        note(f.sig.ident.to_string(), &f.sig, block);
                    }
                }
            }
            _ => {}
        }
    }
    found
}
