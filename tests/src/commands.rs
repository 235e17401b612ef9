//! The command lines the book and the README show, checked against what exists: `clawless`
//! commands and flags against the clap definitions in `targets/native/src/cli.rs` (read as
//! text: the testkit does not build the binary), and `cargo test|bench|run` against the
//! workspace's packages, their tests, benches and features (`tests/tests/book.rs`).

// A check's helper: a file that cannot be read fails the check, as in the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::repo::root;

/// Each enum of `cli.rs` (`Command`, `WebhookAction`, …) with its variants as commands.
pub type Cli = BTreeMap<String, BTreeMap<String, Cmd>>;

/// One command of `clawless` (or one action of it): its flags (`true`: takes a value), the
/// flags it hands down to its actions, and the enum of its actions.
#[derive(Default, Debug)]
pub struct Cmd {
    pub flags: BTreeMap<String, bool>,
    pub globals: BTreeMap<String, bool>,
    pub actions: Option<String>,
}

fn kebab(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out.replace('_', "-")
}

/// The command line clap builds from `cli.rs`: each enum's variants as commands, with their
/// `#[arg(long …)]` fields as flags and a `#[command(subcommand)]` field as their actions.
pub fn cli() -> Cli {
    let code = std::fs::read_to_string(root().join("targets/native/src/cli.rs")).unwrap();
    let mut enums: BTreeMap<String, BTreeMap<String, Cmd>> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut attrs = String::new();
    for line in code.lines() {
        if let Some(rest) = line.strip_prefix("pub enum ") {
            let e = rest.trim_end_matches(" {").to_owned();
            enums.insert(e.clone(), BTreeMap::new());
            current = Some((e, String::new()));
            continue;
        }
        if line == "}" {
            current = None;
        }
        let Some((e, variant)) = current.as_mut() else {
            continue;
        };
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if indent == 4 && body.starts_with(|c: char| c.is_ascii_uppercase()) {
            *variant = body.split([' ', ',', '{']).next().unwrap().to_owned();
            enums
                .get_mut(e.as_str())
                .unwrap()
                .insert(kebab(variant), Cmd::default());
        } else if body.starts_with("#[") {
            attrs.push_str(body);
        } else if indent == 8 && !body.starts_with("//") {
            if let Some((field, ty)) = body.trim_end_matches(',').split_once(": ") {
                let cmd = enums
                    .get_mut(e.as_str())
                    .unwrap()
                    .get_mut(&kebab(variant))
                    .unwrap();
                if attrs.contains("subcommand") {
                    cmd.actions = Some(ty.to_owned());
                } else if attrs.contains("arg(long") {
                    let flag = match attrs.split("long = \"").nth(1) {
                        Some(r) => r.split('"').next().unwrap().to_owned(),
                        None => kebab(field),
                    };
                    let set = match attrs.contains("global = true") {
                        true => &mut cmd.globals,
                        false => &mut cmd.flags,
                    };
                    set.insert(flag, ty != "bool");
                }
            }
            attrs.clear();
        }
    }
    enums
}

/// What is wrong with `clawless ARGS`, if anything.
pub fn check_clawless(cli: &Cli, args: &[String]) -> Option<String> {
    let mut enum_name = "Command".to_owned();
    let mut path: Vec<&Cmd> = Vec::new();
    let mut flags: BTreeMap<String, bool> = [("help".into(), false), ("version".into(), false)]
        .into_iter()
        .collect();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if let Some(flag) = word.strip_prefix("--") {
            let flag = flag.split('=').next().unwrap();
            match flags.get(flag) {
                Some(true) if !word.contains('=') => drop(words.next()),
                Some(_) => {}
                None => return Some(format!("no flag --{flag} there")),
            }
        } else if word.starts_with('-') || matches!(word.as_str(), "…" | "...") {
            continue;
        } else if path.last().is_none_or(|c| c.actions.is_some()) && !enum_name.is_empty() {
            let Some(cmd) = cli.get(&enum_name).and_then(|e| e.get(word.as_str())) else {
                return Some(format!("no command {word}"));
            };
            flags.extend(
                cmd.flags
                    .iter()
                    .chain(&cmd.globals)
                    .map(|(k, v)| (k.clone(), *v)),
            );
            enum_name = cmd.actions.clone().unwrap_or_default();
            path.push(cmd);
        }
    }
    None
}

/// What is wrong with `cargo test|bench|run ARGS`, if anything: its package, `--test`,
/// `--bench` and `--features`, and after `--` in `cargo run -p native`, the command line.
pub fn check_cargo(cli: &Cli, args: &[String]) -> Option<String> {
    let manifests: BTreeMap<String, (PathBuf, String)> = ["core", "platform", "tests"]
        .into_iter()
        .map(|d| root().join(d))
        .chain(
            std::fs::read_dir(root().join("targets"))
                .unwrap()
                .map(|e| e.unwrap().path()),
        )
        .filter_map(|dir| {
            let toml = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            let package = toml
                .split("name = \"")
                .nth(1)?
                .split('"')
                .next()?
                .to_owned();
            Some((package, (dir, toml)))
        })
        .collect();
    let mut package = None;
    let mut targets = Vec::new();
    let mut features = Vec::new();
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "-p" | "--package" => package = words.next().cloned(),
            "--test" | "--bench" => targets.push((word.clone(), words.next()?.clone())),
            "--features" => features.extend(words.next()?.split([',', ' ']).map(str::to_owned)),
            "--" if args[0] == "run" => {
                let rest: Vec<String> = words.cloned().collect();
                return check_clawless(cli, &rest).map(|e| format!("clawless: {e}"));
            }
            "--" => break,
            _ => {}
        }
    }
    let own: Vec<&(PathBuf, String)> = match &package {
        Some(p) => match manifests.get(p) {
            Some(m) => vec![m],
            None => return Some(format!("no package {p}")),
        },
        None => manifests.values().collect(),
    };
    for (kind, target) in targets {
        let (dir, section) = match kind.as_str() {
            "--test" => ("tests", "[[test]]"),
            _ => ("benches", "[[bench]]"),
        };
        let found = own.iter().any(|(path, toml)| {
            path.join(dir).join(format!("{target}.rs")).is_file()
                || path.join(dir).join(&target).join("main.rs").is_file()
                || toml
                    .split(section)
                    .skip(1)
                    .any(|s| s.contains(&format!("name = \"{target}\"")))
        });
        if !found {
            return Some(format!("no {kind} {target}"));
        }
    }
    for feature in features.iter().filter(|f| !f.is_empty()) {
        let (toml, feature) = match feature.split_once('/') {
            Some((p, f)) => (&manifests.get(p)?.1, f),
            None => (&own.first()?.1, feature.as_str()),
        };
        let table = toml.split("[features]").nth(1).unwrap_or("");
        let table = table.split("\n[").next().unwrap_or("");
        if !table
            .lines()
            .any(|l| l.split('=').next().unwrap().trim() == feature)
        {
            return Some(format!("no feature {feature}"));
        }
    }
    None
}
