//! No module cycles (issue 34): within each crate, the top-level modules' `crate::`/`super::`
//! references (in `use` declarations and in code, test code aside) form a graph with no cycle.
//! A name the crate root re-exports counts as a reference to the module that defines it.

use std::collections::{BTreeMap, BTreeSet};

use syn::visit::Visit;

use super::source::{Crate, Module, cfg_test};

/// Every cycle, one line per strongly connected group of top-level modules.
pub(crate) fn check(crates: &[Crate]) -> Vec<String> {
    let mut problems = Vec::new();
    for krate in crates {
        for in_lib in [true, false] {
            let graph = graph(krate, in_lib);
            for group in strongly_connected(&graph) {
                if group.len() > 1 {
                    problems.push(format!(
                        "{}: module cycle between {}",
                        krate.name,
                        group.join(" ↔ ")
                    ));
                }
            }
        }
    }
    problems
}

/// The top-level modules each top-level module refers to.
pub(crate) fn graph(krate: &Crate, in_lib: bool) -> BTreeMap<String, BTreeSet<String>> {
    let modules: Vec<&Module> = krate
        .modules
        .iter()
        .filter(|m| m.in_lib == in_lib && !m.test_only)
        .collect();
    let top: BTreeSet<String> = modules
        .iter()
        .filter_map(|m| m.path.first().cloned())
        .collect();
    let reexports = root_reexports(&modules, &top);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let Some(from) = module.path.first() else {
            continue;
        };
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.path.len() == module.path.len() + 1 && m.path.starts_with(&module.path))
            .filter_map(|m| m.path.last().cloned())
            .collect();
        let mut refs = References::default();
        for item in &module.items {
            if !has_cfg_test(item) {
                refs.visit_item(item);
            }
        }
        let edges = graph.entry(from.clone()).or_default();
        for path in refs.paths {
            let Some(abs) = resolve(&module.path, &children, &path) else {
                continue;
            };
            let target = match abs.as_slice() {
                [only] => reexports.get(only).cloned(),
                [first, ..] if top.contains(first) => Some(first.clone()),
                [first, ..] => reexports.get(first).cloned(),
                [] => None,
            };
            if let Some(target) = target
                && target != *from
            {
                edges.insert(target);
            }
        }
    }
    graph
}

fn has_cfg_test(item: &syn::Item) -> bool {
    match item {
        syn::Item::Mod(m) => cfg_test(&m.attrs) || m.content.is_some(),
        syn::Item::Fn(f) => cfg_test(&f.attrs),
        syn::Item::Impl(i) => cfg_test(&i.attrs),
        syn::Item::Use(u) => cfg_test(&u.attrs),
        _ => false,
    }
}

/// Names the crate root brings in from its own top-level modules: name → module.
fn root_reexports(modules: &[&Module], top: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Some(root) = modules.iter().find(|m| m.path.is_empty()) else {
        return map;
    };
    for item in &root.items {
        if let syn::Item::Use(u) = item {
            let mut paths = Vec::new();
            flatten(&u.tree, Vec::new(), &mut paths);
            for path in paths {
                let path: Vec<String> = match path.first().map(String::as_str) {
                    Some("crate" | "self") => path[1..].to_vec(),
                    _ => path,
                };
                if let (Some(first), Some(last)) = (path.first(), path.last())
                    && top.contains(first)
                    && path.len() > 1
                {
                    map.insert(last.clone(), first.clone());
                }
            }
        }
    }
    map
}

/// A path as written in `module`, made absolute from the crate root; None for another crate's.
fn resolve(module: &[String], children: &BTreeSet<String>, path: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some(module.iter().chain(rest).cloned().collect()),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = rest;
            base.pop()?;
            while let Some((s, r)) = rest.split_first()
                && s == "super"
            {
                base.pop()?;
                rest = r;
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        name if children.contains(name) => Some(module.iter().chain(path).cloned().collect()),
        _ => None,
    }
}

fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let mut next = prefix;
            if n.ident != "self" {
                next.push(n.ident.to_string());
            }
            out.push(next);
        }
        syn::UseTree::Rename(r) => {
            let mut next = prefix;
            next.push(r.ident.to_string());
            out.push(next);
        }
        syn::UseTree::Glob(_) => out.push(prefix),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix.clone(), out);
            }
        }
    }
}

/// Paths that start at the crate, a parent or the module itself, in `use` and in code.
#[derive(Default)]
struct References {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for References {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        flatten(&u.tree, Vec::new(), &mut self.paths);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) && segments.len() > 1
        {
            self.paths.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        groups: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            group.sort();
            s.groups.push(group);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    let nodes: Vec<&str> = graph.keys().map(String::as_str).collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.groups
}
