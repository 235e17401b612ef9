//! ARCHITECTURE.md stays short and true: at most 300 lines, and everything it names in
//! backticks exists — each repository path, each type (a CamelCase name defined as a struct,
//! enum, trait, type alias or enum variant in the Rust sources), and each `Type::item` or
//! `module::item` path's parts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use clawless_testkit::repo::root;

/// Every Rust file under `dir`, appended to `out`.
fn rust_sources(dir: &Path, out: &mut String) {
    for path in clawless_testkit::repo::rust_files(dir) {
        out.push_str(&std::fs::read_to_string(&path).unwrap());
        out.push('\n');
    }
}

/// The backticked spans of `text`, fenced blocks left out (diagrams).
fn backticked(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        out.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    out
}

fn is_camel(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars().any(|c| c.is_ascii_lowercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

fn is_snake(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `name` is defined in `code`: as an item (`struct`, `enum`, `trait`, `type`, `fn`,
/// `mod`, `const`, `static`, a `macro_rules!`), or as an enum variant or field.
fn defined(code: &str, name: &str) -> bool {
    let items = [
        "struct ", "enum ", "trait ", "type ", "fn ", "mod ", "const ", "static ",
    ];
    if items.iter().any(|k| {
        code.match_indices(&format!("{k}{name}")).any(|(at, m)| {
            let next = code[at + m.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    }) {
        return true;
    }
    code.lines().any(|l| {
        let t = l.trim_start();
        t.strip_prefix(name)
            .or_else(|| t.strip_prefix("pub ").and_then(|t| t.strip_prefix(name)))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([',', '(', ' ', '{', ':']))
    })
}

#[test]
fn architecture_is_short_and_names_only_what_exists() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let lines = doc.lines().count();
    assert!(
        lines <= 300,
        "ARCHITECTURE.md has {lines} lines; keep it to 300"
    );
    let mut code = String::new();
    for dir in ["core", "platform", "targets", "tests"] {
        rust_sources(&root().join(dir), &mut code);
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for span in backticked(&doc) {
        let span = span.trim();
        // A repository path: a file or directory that exists.
        let top = span.split('/').next().unwrap_or("");
        let repo_dirs = [
            "core", "platform", "targets", "tests", "config", "fuzz", ".ci",
        ];
        if span.contains('/') && repo_dirs.contains(&top) && !span.contains(['<', '*', ' ']) {
            checked += 1;
            if !root().join(span.trim_end_matches('/')).exists() {
                missing.push(format!("path {span}"));
            }
            continue;
        }
        // `Type`, `Type::item`, `module::Type`, `module::function`.
        let span = span
            .trim_end_matches("()")
            .trim_start_matches("impl ")
            .trim_start_matches("crate::");
        let parts: Vec<&str> = span.split("::").collect();
        let rusty = parts.iter().all(|p| is_camel(p) || is_snake(p));
        let named = parts.iter().any(|p| is_camel(p)) || parts.len() > 1;
        if !rusty || !named {
            continue;
        }
        // `Type::method`: a method of that type, in one of its `impl` blocks or its trait.
        if let [ty, item] = parts[..] {
            if is_camel(ty) && is_snake(item) && !method_of(&code, ty, item) {
                missing.push(format!("{item} as a method of {ty} (in `{span}`)"));
            }
        }
        for part in parts {
            checked += 1;
            let found = match is_camel(part) {
                true => defined(&code, part),
                // A module or function: an item, or a file of that name.
                false => defined(&code, part) || code_has_file(part),
            };
            if !found {
                missing.push(format!("{part} (in `{span}`)"));
            }
        }
    }
    assert!(
        checked >= 40,
        "only {checked} names checked: is the parser reading the doc?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist: {missing:?}"
    );
}

/// The top-level `impl` and `trait` blocks of `code` (from their first line to the `}` that
/// closes them at the start of a line), each with the type or trait it is for.
fn blocks(code: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let line_end = code[at..].find('\n').map_or(code.len(), |e| at + e + 1);
        let head = &code[at..line_end];
        let head_t = head
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ");
        // Only a block that opens on its first line (not `struct X;`, not `impl X for Y {}`).
        let opens = head_t.trim_end().ends_with('{');
        if opens
            && ["impl", "trait ", "struct "]
                .iter()
                .any(|k| head_t.starts_with(k))
        {
            let end = code[at..].find("\n}").map_or(code.len(), |e| at + e + 2);
            // `impl<'a> Trait for Type<'a> {` → `Type`; `trait Name: Send {` → `Name`.
            let after = head_t.rsplit(" for ").next().unwrap_or("");
            let after = match after.strip_prefix("impl") {
                // Skip the generics of `impl<…>`.
                Some(rest) if rest.starts_with('<') => rest.split_once("> ").map_or("", |(_, r)| r),
                Some(rest) => rest,
                None => after
                    .trim_start_matches("trait ")
                    .trim_start_matches("struct "),
            };
            let ty = after
                .trim()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("");
            out.push((ty, &code[at..end]));
            at = end;
        } else {
            at = line_end;
        }
    }
    out
}

/// Whether `ty` has a method `item` in one of its `impl` blocks, or its trait declares it, or
/// it is a field of the struct.
fn method_of(code: &str, ty: &str, item: &str) -> bool {
    let f = format!("fn {item}");
    let fields = [format!("    pub {item}: "), format!("    {item}: ")];
    blocks(code).iter().any(|(t, block)| {
        let method = block
            .match_indices(&f)
            .any(|(at, m)| matches!(block[at + m.len()..].chars().next(), Some('(' | '<')));
        let field = block.lines().any(|l| {
            let l = l
                .replace("pub(crate) ", "pub ")
                .replace("pub(super) ", "pub ");
            fields.iter().any(|f| l.starts_with(f.as_str()))
        });
        *t == ty && (method || field)
    })
}

/// Whether some Rust file or directory under the crates is called `name`.
fn code_has_file(name: &str) -> bool {
    fn walk(dir: &Path, name: &str) -> bool {
        std::fs::read_dir(dir).unwrap().any(|e| {
            let path = e.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if file == "target" || file == "node_modules" || file.starts_with('.') {
                return false;
            }
            file == format!("{name}.rs") || (path.is_dir() && (file == name || walk(&path, name)))
        })
    }
    ["core", "platform", "targets", "tests"]
        .iter()
        .any(|d| walk(&root().join(d), name))
}

#[test]
fn the_checker_finds_what_is_missing() {
    let mut code = String::new();
    rust_sources(&root().join("core/src/turn"), &mut code);
    assert!(defined(&code, "Button"));
    assert!(defined(&code, "DefaultModel"), "an enum variant");
    assert!(!defined(&code, "NoSuchTypeAnywhere"));
    assert!(code_has_file("button"));
    assert!(
        method_of(&code, "Button", "decode"),
        "a method in an impl block"
    );
    assert!(method_of(&code, "Turn", "answer"));
    assert!(
        !method_of(&code, "Turn", "button_tap"),
        "a free function is no method"
    );
    assert!(method_of(&code, "Turn", "lease"), "a field");
    assert!(!code_has_file("no_such_module"));
    assert_eq!(
        backticked("a `X` b\n```\n`Y`\n```\n`z/w`"),
        vec!["X".to_owned(), "z/w".to_owned()]
    );
}
