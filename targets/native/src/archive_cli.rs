//! `clawless export` and `clawless import`: the store as one archive (see
//! `clawless_core::archive`), written to or read from a file, or moved through a deployment's
//! admin endpoint. (`clawless import --from openclaw`: `openclaw_cli.rs`.)

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use clawless_core::archive::{Limits, Merge, Whom};
use clawless_core::App;

/// Writes the archive of `whom` to `file` (`-`: standard output); says what it holds on stderr.
pub async fn export(app: &App, whom: &Whom, file: &Path) -> Result<()> {
    let archive = app.admin().export(whom, "native").await?;
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
    let report = app.admin().import(&bytes, &limits, merge).await?;
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
