//! OpenClaw's agent workspace (`~/.openclaw/workspace`) and its managed skills
//! (`~/.openclaw/skills`), mapped: memory files, skill folders, the persona files; the rest
//! listed with why.

use std::collections::BTreeMap;

use super::{Plan, PERSONA};

/// Maps the workspace's files (by path below it) into `plan`.
pub(super) fn map(files: &BTreeMap<&str, &[u8]>, plan: &mut Plan) {
    let skill_dirs = skill_dirs(files.keys().copied());
    let mut persona = BTreeMap::new();
    let mut lower = None;
    for (&path, &bytes) in files {
        let text = std::str::from_utf8(bytes).ok();
        let valid = clawless_platform::files::normalize(path).is_ok_and(|p| p == path);
        if !valid {
            plan.unmapped.push(format!(
                "workspace/{path}: a name this assistant cannot store"
            ));
            continue;
        }
        if skill_dirs.iter().any(|d| path.starts_with(d.as_str())) {
            let rel = path.strip_prefix("skills/").unwrap_or(path);
            plan.skills.insert(rel.to_owned(), bytes.to_vec());
            continue;
        }
        let why = match (path, text) {
            (_, None) if path.ends_with(".md") => "not UTF-8 text",
            ("MEMORY.md", Some(text)) => {
                plan.memory.insert("MEMORY.md".into(), text.to_owned());
                continue;
            }
            ("memory.md", Some(text)) => {
                lower = Some(text);
                continue;
            }
            (p, Some(text)) if PERSONA.contains(&p) => {
                persona.insert(p.to_owned(), text.to_owned());
                continue;
            }
            ("HEARTBEAT.md", _) => "periodic checks: set reminders or scheduled tasks instead",
            ("BOOTSTRAP.md", _) => "a first-run ritual, not needed here",
            (p, Some(text)) if is_note(p) => {
                plan.memory.insert(p.to_owned(), text.to_owned());
                continue;
            }
            (p, _) if p.starts_with("skills/") => "not inside a skill folder with a SKILL.md",
            (p, _) if p.starts_with("memory/") => "memory here is MEMORY.md and memory/*.md",
            _ => "no place for it here",
        };
        plan.unmapped.push(format!("workspace/{path}: {why}"));
    }
    // The older lower-case name: the memory itself when alone, else joined to MEMORY.md.
    if let Some(lower) = lower {
        match plan.memory.get_mut("MEMORY.md") {
            None => {
                plan.memory.insert("MEMORY.md".into(), lower.to_owned());
            }
            Some(upper) if upper.trim() == lower.trim() => plan
                .remarks
                .push("workspace/memory.md: the same as MEMORY.md".into()),
            Some(upper) => {
                upper.push_str(&format!(
                    "\n\n<!-- from OpenClaw's memory.md -->\n{}\n",
                    lower.trim()
                ));
                plan.remarks
                    .push("workspace/memory.md: joined to MEMORY.md (both were there)".into());
            }
        }
    }
    for name in PERSONA {
        if let Some(text) = persona.remove(name) {
            let joined = plan.persona.get_or_insert_with(String::new);
            if !joined.is_empty() {
                joined.push_str("\n\n");
            }
            joined.push_str(&format!("<!-- from OpenClaw's {name} -->\n{}", text.trim()));
            plan.persona_from.push(name.to_owned());
        }
    }
}

/// Maps OpenClaw's managed skills (`~/.openclaw/skills`, by path below it) into `plan`; a
/// workspace skill of the same name wins, as it did in OpenClaw.
pub(super) fn map_managed(files: &BTreeMap<&str, &[u8]>, plan: &mut Plan) {
    let full: Vec<String> = files.keys().map(|p| format!("skills/{p}")).collect();
    let dirs = skill_dirs(full.iter().map(String::as_str));
    let taken: Vec<String> = (dirs.iter())
        .filter(|d| {
            let name = d.trim_start_matches("skills/");
            plan.skills.keys().any(|k| k.starts_with(name))
        })
        .cloned()
        .collect();
    for ((&path, &bytes), full) in files.iter().zip(&full) {
        let Some(dir) = dirs.iter().find(|d| full.starts_with(d.as_str())) else {
            plan.unmapped
                .push(format!("{full}: not inside a skill folder with a SKILL.md"));
            continue;
        };
        if taken.contains(dir) {
            continue;
        }
        if clawless_platform::files::normalize(path).is_ok_and(|p| p == path) {
            plan.skills.insert(path.to_owned(), bytes.to_vec());
        } else {
            plan.unmapped
                .push(format!("{full}: a name this assistant cannot store"));
        }
    }
    for dir in taken {
        plan.unmapped.push(format!(
            "{dir}: the workspace has a skill of the same name, which OpenClaw used instead"
        ));
    }
}

/// `skills/<name>/` of every skill folder (one with a `SKILL.md`) among `paths`.
fn skill_dirs<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    paths
        .filter_map(|p| p.strip_prefix("skills/")?.strip_suffix("/SKILL.md"))
        .filter(|name| !name.contains('/'))
        .map(|name| format!("skills/{name}/"))
        .collect()
}

/// `memory/<note>.md`, one level deep.
fn is_note(path: &str) -> bool {
    path.strip_prefix("memory/")
        .is_some_and(|n| !n.contains('/') && n.ends_with(".md") && n.len() > 3)
}
