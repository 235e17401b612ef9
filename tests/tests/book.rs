//! The book (`docs/`) and the README stay true, as `architecture.rs` keeps ARCHITECTURE.md:
//! every chapter is in `docs/src/SUMMARY.md` and every entry there exists; every relative link
//! and `#anchor` resolves; every repository path named exists; every `clawless …` and `cargo
//! run -p native -- …` names a command and flags `targets/native/src/cli.rs` defines; every
//! `cargo test|bench` names a package, test, bench and feature that exist; every setting named
//! (an environment variable, a `section.key`, a key of a YAML example) is one the code or
//! `config/` reads; and the README stays a front door naming the test command `.ci/run` runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clawless_testkit::commands::{check_cargo, check_clawless, cli};
use clawless_testkit::markdown::{self, is_env_name};
use clawless_testkit::repo::{files_ending, root};

/// The README and every Markdown file of the book, with their text.
fn documents() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md")];
    paths.extend(files_ending(&root().join("docs/src"), &[".md"]));
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

fn name(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every command a document shows: in backticks, and each line of its shell blocks.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for span in markdown::spans(text) {
        out.extend(markdown::shell_commands(&[span]));
    }
    let (_, fences) = markdown::split_fences(text);
    for fence in fences {
        if matches!(fence.lang.as_str(), "sh" | "bash" | "shell") {
            out.extend(markdown::shell_commands(&fence.lines));
        }
    }
    out
}

#[test]
fn every_chapter_is_in_the_summary_and_every_entry_exists() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = markdown::links(&summary).into_iter().collect();
    assert!(
        listed.len() >= 20,
        "only {} entries in SUMMARY.md",
        listed.len()
    );
    let mut wrong = Vec::new();
    for entry in &listed {
        if !src.join(entry).is_file() {
            wrong.push(format!("SUMMARY.md lists {entry}, which does not exist"));
        }
    }
    for file in files_ending(&src, &[".md"]) {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        if rel != "SUMMARY.md" && !listed.contains(&rel) {
            wrong.push(format!("docs/src/{rel} is in no SUMMARY.md entry"));
        }
    }
    let book = std::fs::read_to_string(root().join("docs/book.toml")).unwrap();
    assert!(
        book.contains("create-missing = false"),
        "docs/book.toml: a missing chapter must fail the build, not be made empty"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_link_resolves() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        let dir = path.parent().unwrap();
        let mut targets = markdown::links(&text);
        // `{{#include ../../ARCHITECTURE.md}}`
        for piece in text.split("{{#include ").skip(1) {
            targets.push(piece.split("}}").next().unwrap().trim().to_owned());
        }
        for target in targets {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = match file {
                "" => path.clone(),
                f => dir.join(f),
            };
            if !file.exists() {
                wrong.push(format!("{}: {target} does not exist", name(&path)));
                continue;
            }
            if !anchor.is_empty() {
                let heads = markdown::anchors(&std::fs::read_to_string(&file).unwrap());
                if !heads.iter().any(|h| h == anchor) {
                    wrong.push(format!("{}: {target}: no such heading", name(&path)));
                }
            }
        }
    }
    assert!(checked >= 40, "only {checked} links checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The folders and root files of the repository a document may name.
const TOP: [&str; 11] = [
    "core", "platform", "targets", "tests", "config", "fuzz", ".ci", "docs", "dist", "deploy",
    "schema",
];

/// Whether `word` names a path in the repository that must exist: under one of [`TOP`], or a
/// root file (`ARCHITECTURE.md`, `LICENSE-MIT`, `Containerfile`, `template.yaml`, …).
fn repo_path(word: &str) -> Option<&str> {
    let word = word.trim_end_matches([',', '.', ':', ')']);
    if word.contains(['<', '*', '…', '$', '{']) || word.contains("...") {
        return None;
    }
    let top = word.split('/').next().unwrap_or("");
    let under_top = word.contains('/') && TOP.contains(&top) && top != "schema";
    let root_file = !word.contains('/')
        && (matches!(
            word,
            "Containerfile" | "compose.yaml" | "template.yaml" | "wrangler.toml" | "Cargo.lock"
        ) || word.starts_with("LICENSE")
            || matches!(word, "README.md" | "ARCHITECTURE.md" | "CHANGELOG.md"));
    (under_top || root_file).then_some(word)
}

#[test]
fn every_path_named_exists() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        let mut words: Vec<String> = markdown::spans(&text)
            .into_iter()
            .filter(|s| !s.contains(' '))
            .collect();
        for command in commands(&text) {
            words.extend(markdown::words(&command));
        }
        for word in words {
            let Some(p) = repo_path(&word) else { continue };
            checked += 1;
            if !root().join(p.trim_end_matches('/')).exists() {
                wrong.push(format!("{}: `{p}` does not exist", name(&path)));
            }
        }
    }
    assert!(checked >= 60, "only {checked} paths checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_command_named_exists() {
    let cli = cli();
    assert!(
        cli.get("Command").is_some_and(|c| c.len() >= 10),
        "cli.rs read wrongly: {cli:?}"
    );
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        for command in commands(&text) {
            let words = markdown::words(&command);
            let problem = match words.first().map(String::as_str) {
                Some("clawless") => check_clawless(&cli, &words[1..]),
                Some("cargo")
                    if matches!(
                        words.get(1).map(String::as_str),
                        Some("test" | "bench" | "run")
                    ) =>
                {
                    check_cargo(&cli, &words[1..])
                }
                _ => continue,
            };
            checked += 1;
            if let Some(problem) = problem {
                wrong.push(format!("{}: `{command}`: {problem}", name(&path)));
            }
        }
    }
    assert!(checked >= 50, "only {checked} commands checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every word of the code and of the files that configure or deploy it: the vocabulary a
/// setting named in the book must belong to.
fn vocabulary() -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in [
        "core", "platform", "targets", "tests", "config", "dist", "deploy",
    ] {
        files.extend(files_ending(
            &root().join(dir),
            &[".rs", ".yaml", ".md", ".sh", ".toml"],
        ));
    }
    for f in [
        "template.yaml",
        "wrangler.toml",
        ".ci/run",
        "Containerfile",
        "compose.yaml",
        "dist/build",
    ] {
        files.push(root().join(f));
    }
    let mut words = BTreeSet::new();
    // Not this file: its comments name settings as examples.
    for f in files
        .into_iter()
        .filter(|f| !f.ends_with("tests/tests/book.rs"))
    {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        words.extend(
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_owned),
        );
    }
    words
}

/// The YAML keys in `text` (`key:` followed by a space or the end): lower-case ones only, so
/// header names and environment variables mapped in an example are left out.
fn yaml_keys(text: &str) -> Vec<String> {
    let text = text.split(" #").next().unwrap_or("");
    let mut out = Vec::new();
    for (at, _) in text.match_indices(':') {
        let after = text[at + 1..].chars().next();
        if !after.is_none_or(|c| c == ' ' || c == '}' || c == ',') {
            continue;
        }
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let start = text[..at].rfind(|c: char| !word(c)).map_or(0, |s| s + 1);
        let key = &text[start..at];
        // An MCP tool's name (`github__get_issue`) is the server's, not a setting.
        if key.starts_with(|c: char| c.is_ascii_lowercase())
            && key.chars().all(|c| !c.is_ascii_uppercase())
            && !key.contains("__")
        {
            out.push(key.to_owned());
        }
    }
    out
}

#[test]
fn every_setting_named_exists() {
    let known = vocabulary();
    let mut wrong = Vec::new();
    let mut checked = 0;
    let mut check = |doc: &Path, what: &str, word: &str| {
        checked += 1;
        if !known.contains(word) {
            wrong.push(format!("{}: {what} `{word}` is read nowhere", name(doc)));
        }
    };
    let files = [
        "yaml", "yml", "md", "rs", "toml", "json", "db", "gz", "png", "txt", "log",
    ];
    for (path, text) in documents() {
        for span in markdown::spans(&text) {
            // TELEGRAM_BOT_TOKEN, `SPEECH_BASE_URL=off`, `A`, `B`; in a command, only the
            // variables set before it (`clawless pairing remove USER_ID` holds a placeholder).
            let command = ["clawless ", "cargo ", "wrangler "]
                .iter()
                .filter_map(|c| span.find(c))
                .min()
                .unwrap_or(span.len());
            for word in span[..command].split([' ', ',', '(', ')']) {
                let var = word.split('=').next().unwrap();
                if is_env_name(var) {
                    check(&path, "variable", var);
                }
            }
            // media.max_photo_kb, `streaming.private: false`
            let head = span.split(':').next().unwrap();
            let dotted = head.contains('.')
                && head.split('.').all(|p| {
                    !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                })
                && !files.contains(&head.rsplit('.').next().unwrap());
            if dotted {
                head.split('.')
                    .for_each(|part| check(&path, "setting", part));
            }
            // `sandbox: {network: true}`, `owner:`
            if !span.contains("::") && !span.contains("://") && !span.starts_with('/') {
                yaml_keys(&span)
                    .iter()
                    .for_each(|k| check(&path, "setting", k));
            }
        }
        let (_, fences) = markdown::split_fences(&text);
        for fence in fences.iter().filter(|f| f.lang == "yaml") {
            for line in &fence.lines {
                yaml_keys(line)
                    .iter()
                    .for_each(|k| check(&path, "YAML key", k));
            }
        }
    }
    assert!(checked >= 150, "only {checked} settings checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The README is the front door (the book holds the rest), and it names the test command
/// `.ci/run` runs, in its section "Test it".
#[test]
fn the_readme_is_a_front_door_with_the_test_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; keep it to 250, the rest in docs/"
    );
    let test_it = readme
        .split("\n## Test it\n")
        .nth(1)
        .expect("README.md: no ## Test it");
    let test_it = test_it.split("\n## ").next().unwrap();
    let (_, fences) = markdown::split_fences(test_it);
    assert!(
        fences
            .iter()
            .any(|f| f.lines.iter().any(|l| l.trim() == "cargo test --workspace")),
        "README.md's Test it shows no `cargo test --workspace`"
    );
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.contains("cargo test --workspace --locked\n"),
        ".ci/run runs no `cargo test --workspace`"
    );
    assert!(
        ci.contains("mdbook build docs"),
        ".ci/run does not build the book"
    );
    let pin = ci
        .split("MDBOOK_VERSION=")
        .nth(1)
        .and_then(|v| v.lines().next())
        .unwrap_or("");
    assert!(
        !pin.is_empty()
            && readme.contains(&format!("cargo install mdbook --locked --version {pin}\n")),
        "README.md installs another mdbook than the {pin} .ci/run pins"
    );
}
