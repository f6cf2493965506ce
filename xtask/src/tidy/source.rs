//! The workspace's source as tidy sees it: every crate's module tree, parsed once, from its
//! `lib.rs`/`main.rs` along the `mod` declarations (what the compiler builds, not every file
//! that happens to sit in `src/`).

use std::path::{Path, PathBuf};

/// One module: a file, or an inline `mod x { … }` inside one.
pub(crate) struct Module {
    /// Its path below the crate root (`[]` is the root, `["recall", "scan"]`).
    pub path: Vec<String>,
    /// The file it lives in.
    pub file: PathBuf,
    /// Its items (the file's, or the inline module's).
    pub items: Vec<syn::Item>,
    /// Declared `pub` all the way from the crate root, and not `#[doc(hidden)]`.
    pub public: bool,
    /// Compiled only for tests (`#[cfg(test)]` on it or on a parent).
    pub test_only: bool,
    /// Compiled only with a feature outside semver (`test-support`, `eval`).
    pub unstable: bool,
    /// A library root (`lib.rs`) rather than a binary's `main.rs`.
    pub in_lib: bool,
}

/// One crate of the workspace.
pub(crate) struct Crate {
    /// Its folder's name (`compaction-core`, `xtask`).
    pub name: String,
    pub modules: Vec<Module>,
}

/// Every crate under `crates/`, plus `xtask` and `tests`, parsed.
pub(crate) fn workspace(root: &Path) -> Result<Vec<Crate>, String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map_err(|e| format!("reading {}: {e}", root.join("crates").display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs.push(root.join("xtask"));
    dirs.push(root.join("tests"));
    dirs.into_iter().map(|dir| parse_crate(&dir)).collect()
}

pub(crate) fn parse_crate(dir: &Path) -> Result<Crate, String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut modules = Vec::new();
    for (entry, in_lib) in [("lib.rs", true), ("main.rs", false)] {
        let file = dir.join("src").join(entry);
        if file.is_file() {
            let flags = Flags {
                public: in_lib,
                test_only: false,
                unstable: false,
                in_lib,
            };
            load_file(&file, Vec::new(), flags, &mut modules)?;
        }
    }
    Ok(Crate { name, modules })
}

#[derive(Clone, Copy)]
struct Flags {
    public: bool,
    test_only: bool,
    unstable: bool,
    in_lib: bool,
}

fn load_file(
    file: &Path,
    path: Vec<String>,
    flags: Flags,
    out: &mut Vec<Module>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let dir = module_dir(file);
    add_module(file, &dir, path, ast.items, flags, out)
}

/// Where a file's child modules live: beside `lib.rs`/`main.rs`/`mod.rs`, else in the folder
/// named after the file.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new(".")).to_owned();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "main" | "mod") => parent,
        Some(stem) => parent.join(stem),
        None => parent,
    }
}

fn add_module(
    file: &Path,
    dir: &Path,
    path: Vec<String>,
    items: Vec<syn::Item>,
    flags: Flags,
    out: &mut Vec<Module>,
) -> Result<(), String> {
    for item in &items {
        let syn::Item::Mod(m) = item else { continue };
        let mut child = path.clone();
        child.push(m.ident.to_string());
        let child_flags = Flags {
            public: flags.public && is_pub(&m.vis) && !doc_hidden(&m.attrs),
            test_only: flags.test_only || cfg_test(&m.attrs),
            unstable: flags.unstable || cfg_unstable(&m.attrs),
            in_lib: flags.in_lib,
        };
        match &m.content {
            Some((_, inner)) => {
                let inner_dir = dir.join(m.ident.to_string());
                add_module(file, &inner_dir, child, inner.clone(), child_flags, out)?;
            }
            None => {
                let target = path_attr(&m.attrs)
                    .map(|p| file.parent().unwrap_or(Path::new(".")).join(p))
                    .or_else(|| {
                        let flat = dir.join(format!("{}.rs", m.ident));
                        let nested = dir.join(m.ident.to_string()).join("mod.rs");
                        [flat, nested].into_iter().find(|p| p.is_file())
                    })
                    .ok_or_else(|| format!("{}: no file for `mod {}`", file.display(), m.ident))?;
                load_file(&target, child, child_flags, out)?;
            }
        }
    }
    out.push(Module {
        path,
        file: file.to_owned(),
        items,
        public: flags.public,
        test_only: flags.test_only,
        unstable: flags.unstable,
        in_lib: flags.in_lib,
    });
    Ok(())
}

/// `pub` without a restriction (`pub(crate)` and friends are not the public API).
pub(crate) fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

fn attr_text(attr: &syn::Attribute) -> String {
    use quote::ToTokens;
    attr.meta
        .to_token_stream()
        .to_string()
        .replace(char::is_whitespace, "")
}

/// `#[cfg(test)]` exactly: code that only tests compile.
pub(crate) fn cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| attr_text(a) == "cfg(test)")
}

/// Compiled only with a feature that is outside semver: `test-support` (fakes for tests) or
/// `eval` (a model's evaluation and fitted internals).
fn cfg_unstable(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let t = attr_text(a);
        t.starts_with("cfg(") && (t.contains("test-support") || t.contains("feature=\"eval\""))
    })
}

/// `#[doc(hidden)]`.
pub(crate) fn doc_hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| attr_text(a) == "doc(hidden)")
}

/// `#[test]`, `#[tokio::test]` and the like.
pub(crate) fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let t = attr_text(a);
        t == "test" || t.ends_with("::test") || t.starts_with("tokio::test")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}
