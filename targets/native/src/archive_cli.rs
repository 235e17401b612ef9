//! `clawless export` and `clawless import`: the store as one archive (see
//! `clawless_core::archive`), written to or read from a file; and `clawless import --from
//! openclaw DIR`, which reads an OpenClaw workspace directory into the owner's memory, the
//! skills, and an agent of the config directory.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clawless_core::archive::{openclaw, Limits, Merge, Whom};
use clawless_core::ids::ConnectorId;
use clawless_core::App;

/// A workspace's files by relative path.
pub type Workspace = BTreeMap<String, Vec<u8>>;

/// Most files read from an OpenClaw workspace, and their sizes.
const MAX_WORKSPACE_FILES: usize = 10_000;
const MAX_WORKSPACE_FILE_BYTES: u64 = 4 << 20;
const MAX_WORKSPACE_BYTES: u64 = 128 << 20;
/// Folders not read from an OpenClaw workspace: version control and packages.
const SKIPPED_DIRS: [&str; 3] = [".git", "node_modules", ".venv"];

/// Writes the archive of `whom` to `file` (`-`: standard output); says what it holds on stderr.
pub async fn export(app: &App, whom: &Whom, file: &Path) -> Result<()> {
    let archive = app.export(whom, "native").await?;
    let (manifest, _) = clawless_core::archive::unpack(&archive, &Limits::default())
        .context("reading back the archive just written")?;
    if file == Path::new("-") {
        std::io::stdout().write_all(&archive)?;
    } else {
        write_new(file, &archive)?;
    }
    for why in &manifest.left_out {
        eprintln!("left out: {why}");
    }
    eprintln!(
        "exported {}: {} entries and {} files, {} bytes, to {}",
        manifest.whom,
        manifest.kv_entries,
        manifest.files,
        archive.len(),
        file.display()
    );
    Ok(())
}

/// Writes `bytes` beside `file`, then renames: a cut-off run never leaves half an archive
/// under the name. The file is readable by its owner only: it holds people's conversations.
pub fn write_new(file: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = file.with_extension("partial");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    out.write_all(bytes)?;
    out.sync_all()?;
    std::fs::rename(&tmp, file).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// Reads an archive from `file` (`-`: standard input), at most the import's limit.
fn read_archive(file: &Path, limits: &Limits) -> Result<Vec<u8>> {
    let cap = limits.packed_bytes as u64 + 1;
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        std::io::stdin().take(cap).read_to_end(&mut bytes)?;
    } else {
        std::fs::File::open(file)
            .with_context(|| format!("reading {}", file.display()))?
            .take(cap)
            .read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

/// Merges the archive at `file` into the store; says what it did.
pub async fn import(app: &App, file: &Path, overwrite: bool) -> Result<()> {
    let limits = Limits::default();
    let bytes = read_archive(file, &limits)?;
    let merge = match overwrite {
        true => Merge::Replace,
        false => Merge::KeepOurs,
    };
    let report = app.import(&bytes, &limits, merge).await?;
    println!("imported {}: {report}", file.display());
    if report.kept > 0 || report.files_kept > 0 {
        println!("what this store held and differed was kept; --overwrite replaces it");
    }
    say_reminders(&report);
    Ok(())
}

/// What people will notice of the reminders an import merged.
fn say_reminders(report: &clawless_core::archive::ImportReport) {
    let r = &report.reminders;
    if r.renumbered > 0 {
        println!(
            "{} reminders had a number another reminder has here: they have new numbers (/reminders in their chat)",
            r.renumbered
        );
    }
    if r.fired + r.removed > 0 {
        println!(
            "{} one-off reminders had fired already: they will not fire again",
            r.fired + r.removed
        );
    }
}

/// `clawless export --remote URL FILE`: the deployment's archive, checked, written to `file`.
pub async fn export_remote(
    env: &clawless_core::Env,
    base: &str,
    query: &str,
    file: &Path,
) -> Result<()> {
    let archive = crate::remote::export(env, base, query).await?;
    let (manifest, _) = clawless_core::archive::unpack(&archive, &Limits::default())
        .with_context(|| format!("{base} answered an archive that does not read"))?;
    for why in &manifest.left_out {
        eprintln!("left out: {why}");
    }
    if file == Path::new("-") {
        std::io::stdout().write_all(&archive)?;
    } else {
        write_new(file, &archive)?;
    }
    eprintln!(
        "exported {} of {} ({}): {} entries and {} files, {} bytes, to {}",
        manifest.whom,
        base,
        manifest.source,
        manifest.kv_entries,
        manifest.files,
        archive.len(),
        file.display()
    );
    Ok(())
}

/// `clawless import --remote URL FILE`: the archive checked here, then sent.
pub async fn import_remote(
    env: &clawless_core::Env,
    base: &str,
    file: &Path,
    overwrite: bool,
) -> Result<()> {
    let limits = Limits::default();
    let bytes = read_archive(file, &limits)?;
    let report = crate::remote::import(env, base, &bytes, overwrite).await?;
    println!("imported {} into {base}: {report}", file.display());
    say_reminders(&report);
    Ok(())
}

/// Reads an OpenClaw workspace's files (relative paths), within bounds; links are listed, not
/// followed.
pub fn read_workspace(dir: &Path) -> Result<(Workspace, Vec<String>)> {
    if !dir.is_dir() {
        bail!(
            "{} is not a directory (an OpenClaw workspace, such as ~/.openclaw/workspace)",
            dir.display()
        );
    }
    let (mut files, mut skipped, mut total) = (BTreeMap::new(), Vec::new(), 0u64);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join(&rel))
            .with_context(|| format!("reading {}", dir.join(&rel).display()))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = rel.join(&name);
            let shown = path.to_string_lossy().replace('\\', "/");
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                skipped.push(format!("{shown}: a link, not followed"));
            } else if kind.is_dir() {
                if SKIPPED_DIRS.contains(&name.as_str()) {
                    skipped.push(format!("{shown}/: not read"));
                } else {
                    stack.push(path);
                }
            } else if kind.is_file() {
                let size = entry.metadata()?.len();
                if size > MAX_WORKSPACE_FILE_BYTES {
                    skipped.push(format!(
                        "{shown}: {size} bytes, over {MAX_WORKSPACE_FILE_BYTES}"
                    ));
                    continue;
                }
                total += size;
                if files.len() >= MAX_WORKSPACE_FILES || total > MAX_WORKSPACE_BYTES {
                    bail!("the workspace holds more than {MAX_WORKSPACE_FILES} files or {MAX_WORKSPACE_BYTES} bytes: not an OpenClaw workspace?");
                }
                files.insert(shown, std::fs::read(dir.join(&path))?);
            }
        }
    }
    Ok((files, skipped))
}

/// The config directory agents are written to: `CLAWLESS_CONFIG`, else `./config`.
fn config_dir(env: &clawless_core::env::Env) -> Option<PathBuf> {
    env.get("CLAWLESS_CONFIG").map(PathBuf::from).or_else(|| {
        Path::new("config")
            .is_dir()
            .then(|| PathBuf::from("config"))
    })
}

/// `clawless import --from openclaw DIR`.
pub async fn import_openclaw(
    app: &App,
    env: &clawless_core::env::Env,
    dir: &Path,
    connector: &ConnectorId,
) -> Result<()> {
    let (files, skipped) = read_workspace(dir)?;
    let mut plan = openclaw::plan(&files);
    plan.unmapped.extend(skipped);
    let done = app.import_openclaw(&plan, connector).await?;
    println!(
        "memory: {} notes added, {} appended to, {} already there; {} indexed",
        done.notes_added, done.notes_appended, done.notes_same, done.reindexed
    );
    println!(
        "skills: {} files added, {} already there",
        done.skill_files_added, done.skill_files_kept
    );
    if let Some(persona) = &plan.persona {
        match config_dir(env) {
            Some(config) => {
                let said = write_agent(app, connector, &config, persona)?;
                println!("{said} (from {})", plan.persona_from.join(", "));
            }
            None => plan.unmapped.push(format!(
                "{}: no config directory to write an agent into (set CLAWLESS_CONFIG)",
                plan.persona_from.join(", ")
            )),
        }
    }
    if plan.unmapped.is_empty() {
        println!("everything was mapped");
    } else {
        println!("not mapped ({}):", plan.unmapped.len());
        for line in &plan.unmapped {
            println!("  - {line}");
        }
    }
    Ok(())
}

/// Writes agent `openclaw` (the connector's default agent's models and tools, the persona as
/// its prompt) into the config directory, unless it is there already.
fn write_agent(app: &App, connector: &ConnectorId, config: &Path, persona: &str) -> Result<String> {
    const ID: &str = "openclaw";
    let file = config.join("agents.d").join(format!("{ID}.yaml"));
    let prompt = config.join("prompts").join(ID).join("system.md");
    if file.exists() || prompt.exists() {
        return Ok(format!(
            "agent {ID}: kept as it is in {} (delete it to import the persona again)",
            config.display()
        ));
    }
    let mut agent = app
        .admin()
        .default_agent_config(connector)
        .context("the connector's default agent")?;
    agent.id = ID.to_owned();
    agent.name = Some(persona_name(persona).unwrap_or_else(|| "OpenClaw".to_owned()));
    agent.emoji = None;
    agent.agent_tools.clear();
    agent.spawn = Default::default();
    // JSON is YAML: the file reads back as any agents.d file does.
    let text = serde_json::to_string_pretty(&agent)?;
    std::fs::create_dir_all(file.parent().unwrap_or(config))?;
    std::fs::create_dir_all(prompt.parent().unwrap_or(config))?;
    std::fs::write(&file, format!("# Imported from OpenClaw.\n{text}\n"))?;
    std::fs::write(&prompt, format!("{persona}\n"))?;
    Ok(format!(
        "agent {ID}: written to {} and {}; restart, then /agent {ID} in a chat uses it",
        file.display(),
        prompt.display()
    ))
}

/// The `Name` line of OpenClaw's IDENTITY.md (`- **Name**: Jarvis`).
fn persona_name(persona: &str) -> Option<String> {
    persona.lines().find_map(|line| {
        let rest = line
            .trim_start_matches(['-', '*', ' '])
            .strip_prefix("Name")?;
        let name = rest.trim_start_matches(['*', ':', ' ']).trim();
        (!name.is_empty() && name.len() <= 40).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::persona_name;

    #[test]
    fn the_name_comes_from_identity() {
        assert_eq!(
            persona_name("# IDENTITY.md\n\n- **Name**: Jarvis\n").as_deref(),
            Some("Jarvis")
        );
        assert_eq!(persona_name("Name: Ada").as_deref(), Some("Ada"));
        assert_eq!(persona_name("no name here"), None);
    }
}
