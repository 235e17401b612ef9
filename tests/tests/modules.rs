//! No import circle anywhere: in every crate, at every level of its module tree, sibling
//! modules (each with everything under it) import each other in one direction.
//!
//! A module and the modules under it are one unit and may use each other (a parent's shared
//! types, its children's items); an import from `a::x::y` of `a::z::w` counts as `a::x` →
//! `a::z`. Imports are read from `use` lines and paths in code (`crate::`, `super::`,
//! `self::`, and `name::` of a child the file declares); tests and comments are left out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clawless_testkit::repo::{root, rust_files};

/// Module → the sibling units it imports, with a file that makes each import.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The crates' source roots (a `bin/` folder holds crates of their own and is left out).
const CRATES: &[&str] = &[
    "core/src",
    "platform/src",
    "targets/native/src",
    "targets/lambda/src",
    "targets/worker/src",
    "tests/src",
];

/// One source file as the graph reads it.
struct Source {
    module: Vec<String>,
    file: String,
    code: String,
}

/// A file's module path from its crate's source root: `llm/stream.rs` → `llm::stream`,
/// `llm/mod.rs` → `llm`, `lib.rs` → the root (empty).
fn module_of(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = segs.last_mut() {
        *last = last.trim_end_matches(".rs").to_owned();
    }
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    if segs.len() == 1 && matches!(segs[0].as_str(), "lib" | "main") {
        segs.clear();
    }
    segs
}

/// A file's code without its tests and comments.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn crate_sources(src: &str) -> Vec<Source> {
    let dir = root().join(src);
    rust_files(&dir)
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&dir).unwrap().to_path_buf();
            let name = rel.to_string_lossy().into_owned();
            if name.starts_with("bin/") || name.ends_with("tests.rs") {
                return None;
            }
            let code = code_of(&std::fs::read_to_string(&f).unwrap());
            Some(Source {
                module: module_of(&rel),
                file: format!("{src}/{name}"),
                code,
            })
        })
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier `s` starts with, and the rest.
fn ident(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    s.split_at(end)
}

/// The paths a use tree names (`a::b`, `a::{b, c::d}`, `a::{self, b}`) under `prefix`.
fn tree(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut rest = s;
    loop {
        let trimmed = rest.trim_start();
        if let Some(group) = trimmed.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        tree(&group[start..i], &path, out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        tree(&group[start..i], &path, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let (id, after) = ident(trimmed);
        if id.is_empty() {
            break;
        }
        if id != "self" {
            path.push(id.to_owned());
        }
        match after.trim_start().strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    out.push(path);
}

/// Every module path `source` names (unresolved: a path may run on into an item).
fn named_paths(source: &Source) -> Vec<Vec<String>> {
    let code = &source.code;
    let cur = &source.module;
    // The children this file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
    let children: Vec<String> = code
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.trim_end().strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect();
    let mut out = Vec::new();
    let mut prev = ' ';
    for (at, c) in code.char_indices() {
        let starts = !is_ident(prev) && prev != ':';
        prev = c;
        if !starts || !is_ident(c) {
            continue;
        }
        let (word, rest) = ident(&code[at..]);
        let Some(mut rest) = rest.strip_prefix("::") else {
            continue;
        };
        let base: Vec<String> = match word {
            "crate" => Vec::new(),
            "self" => cur.clone(),
            "super" => {
                let mut base = cur[..cur.len().saturating_sub(1)].to_vec();
                while let Some(more) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = more;
                }
                base
            }
            w if children.iter().any(|k| k == w) => {
                let mut base = cur.clone();
                base.push(w.to_owned());
                base
            }
            _ => continue,
        };
        tree(rest, &base, &mut out);
    }
    out
}

/// The import graph of one crate's sources, at every level (see the module doc).
fn graph(sources: &[Source]) -> Graph {
    let modules: BTreeSet<&[String]> = sources.iter().map(|s| s.module.as_slice()).collect();
    let mut graph = Graph::new();
    for source in sources {
        let a = &source.module;
        for path in named_paths(source) {
            // The longest prefix that is a module (the rest is an item in it).
            let Some(b) = (0..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            if common == a.len() || common == b.len() {
                continue; // one is inside the other: the same unit
            }
            let from = a[..=common].join("::");
            let to = b[..=common].join("::");
            graph
                .entry(from)
                .or_default()
                .entry(to)
                .or_insert_with(|| source.file.clone());
        }
    }
    graph
}

/// A circle of `graph`, if it has one: the modules in order, the first again at the end.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        m: &'a str,
        graph: &'a Graph,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut circle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for dep in graph.get(m).into_iter().flat_map(BTreeMap::keys) {
            if let Some(circle) = visit(dep, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut circles = Vec::new();
    for src in CRATES {
        let graph = graph(&crate_sources(src));
        if let Some(circle) = circle(&graph) {
            let by: Vec<String> = circle
                .windows(2)
                .map(|w| format!("{} → {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
                .collect();
            circles.push(format!("{src}: {}", by.join("; ")));
        }
    }
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn the_reader_sees_each_form_of_import() {
    let g = graph(&crate_sources("core/src"));
    let imports = |from: &str, to: &str| g.get(from).is_some_and(|d| d.contains_key(to));
    // `use crate::app::App` in a file under turn/.
    assert!(imports("turn", "app"), "{g:?}");
    // `use super::stream::{receive, …}` in llm/anthropic.rs, a sibling under llm.
    assert!(imports("llm::anthropic", "llm::stream"), "{g:?}");
    // A declared child's path and a parent's item are the same unit: no edge.
    assert!(!imports("llm", "llm::stream") && !imports("llm::stream", "llm"));
}

#[test]
fn a_circle_is_found_and_named() {
    let source = |module: &str, code: &str| Source {
        module: module.split("::").map(str::to_owned).collect(),
        file: format!("{module}.rs"),
        code: code.to_owned(),
    };
    let sources = [
        source("a", "use crate::b::{x::Thing, self};"),
        source("b", "mod x;\nfn f() { x::g() }"),
        source("b::x", "fn g() { super::super::c::h() }"),
        source("c", "use crate::{d, a::One};"),
        source("d", ""),
    ];
    let g = graph(&sources);
    assert_eq!(
        circle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]),
        "{g:?}"
    );
    assert_eq!(g["b"]["c"], "b::x.rs", "the import under b counts for b");
    let without: Vec<Source> = sources.into_iter().filter(|s| s.module != ["c"]).collect();
    assert_eq!(circle(&graph(&without)), None);
}
