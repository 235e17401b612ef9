//! Reading the environment, the config directory and the data directory into an `App`.
//! The only place the native shell reads environment variables.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clawless_core::{App, Config, ConfigFiles, Env};
use clawless_platform::{Clock, Platform};

use crate::fs::FsFiles;
use crate::listen::Limits;
use crate::store::{Db, SqlKv, SqlText, SqlVectors, KV_SCHEMA};
use clawless_platform::native_io::{ReqwestHttp, SystemClock};

/// Everything `main` needs: the app, and the two databases (for tests and tools).
pub struct Native {
    pub app: Arc<App>,
    /// The Kv's database, `clawless.db`.
    pub kv_db: Db,
    /// The memory index's database, `index.db`: a file and a connection apart from the Kv's.
    pub index_db: Db,
    pub config_source: String,
    /// Archives of the store on a schedule (`backup:`), when set.
    pub backups: Option<crate::backup::Backups>,
}

/// The process environment as the core's `Env`, over the variables of `./.env` when there is
/// one (what `clawless init` writes): a variable set in the environment wins over the file's.
/// A file that cannot be read is said on stderr and skipped.
pub fn env() -> Env {
    let mut env = Env::default();
    match dotenvy::from_path_iter(ENV_FILE) {
        Ok(lines) => {
            for line in lines {
                match line {
                    Ok((k, v)) => env.set(k, v),
                    Err(e) => {
                        eprintln!("warning: {ENV_FILE}: {e}; the rest of it is skipped");
                        break;
                    }
                }
            }
        }
        Err(e) if e.not_found() => {}
        Err(e) => eprintln!("warning: {ENV_FILE} not read: {e}"),
    }
    for (k, v) in std::env::vars() {
        env.set(k, v);
    }
    env
}

/// The env file `clawless` reads at start and `clawless init` writes.
pub const ENV_FILE: &str = ".env";

/// The webhook listener's limits: the defaults, each replaced by its variable when set:
/// `CLAWLESS_HEADER_TIMEOUT`, `CLAWLESS_BODY_TIMEOUT`, `CLAWLESS_SHUTDOWN_DEADLINE` (seconds,
/// fractions allowed) and `CLAWLESS_MAX_CONNECTIONS`.
pub fn limits(env: &Env) -> Result<Limits> {
    let default = Limits::default();
    Ok(Limits {
        header_timeout: seconds(env, "CLAWLESS_HEADER_TIMEOUT", default.header_timeout)?,
        body_timeout: seconds(env, "CLAWLESS_BODY_TIMEOUT", default.body_timeout)?,
        max_connections: count(env, "CLAWLESS_MAX_CONNECTIONS", default.max_connections)?,
        shutdown_deadline: seconds(env, "CLAWLESS_SHUTDOWN_DEADLINE", default.shutdown_deadline)?,
    })
}

/// A positive number of seconds from `name`, or `default` when it is not set.
fn seconds(env: &Env, name: &str, default: Duration) -> Result<Duration> {
    let Some(text) = env.get(name) else {
        return Ok(default);
    };
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{name} must be a positive number of seconds, not {text:?}"))
}

/// A positive count from `name`, or `default` when it is not set.
fn count(env: &Env, name: &str, default: usize) -> Result<usize> {
    let Some(text) = env.get(name) else {
        return Ok(default);
    };
    text.parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .with_context(|| format!("{name} must be a positive whole number, not {text:?}"))
}

/// `CLAWLESS_CONFIG`, else `./config` when it exists, else the config embedded at build time.
pub fn load_config(env: &Env) -> Result<(Config, String)> {
    let dir = env.get("CLAWLESS_CONFIG").map(PathBuf::from).or_else(|| {
        Path::new("config")
            .is_dir()
            .then(|| PathBuf::from("config"))
    });
    let (files, source) = match dir {
        Some(dir) => (
            clawless_platform::native_io::read_config_dir(&dir)
                .map(ConfigFiles)
                .with_context(|| format!("reading config directory {}", dir.display()))?,
            dir.display().to_string(),
        ),
        None => (
            clawless_core::config::embedded(),
            "built-in defaults".to_owned(),
        ),
    };
    let config =
        Config::load(&files).map_err(|e| anyhow::anyhow!("config ({source}) is invalid: {e}"))?;
    Ok((config, source))
}

/// Builds the app on libsql under `CLAWLESS_DATA` (default `./data`).
pub async fn build(env: &Env) -> Result<Native> {
    let (config, config_source) = load_config(env)?;
    build_with(env, config, config_source).await
}

/// [`build`] with a config already loaded: `clawless.db` (Kv) and `index.db` (the memory
/// index, see [`crate::index::open`]) under the data directory, each on its own thread.
pub async fn build_with(env: &Env, config: Config, config_source: String) -> Result<Native> {
    let data = PathBuf::from(env.get("CLAWLESS_DATA").unwrap_or("data"));
    std::fs::create_dir_all(&data)
        .with_context(|| format!("creating data directory {}", data.display()))?;
    let db_path = data.join("clawless.db");
    let db = Db::open(&db_path.to_string_lossy(), &KV_SCHEMA)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", db_path.display()))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let kv = Arc::new(SqlKv::new(db.clone(), clock.clone()));
    // A store a newer release wrote is refused before anything here changes it.
    clawless_core::upgrade::check(&*kv)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", db_path.display()))?;
    let index_path = data.join("index.db");
    let index_db = crate::index::open(&index_path, &db, &*kv)
        .await
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", index_path.display()))?;
    let files_root = data.join("files");
    // What no command may read: this bot's data, its config, and where its `.env` is.
    crate::sandbox::protect(
        [
            data.clone(),
            PathBuf::from(env.get("CLAWLESS_CONFIG").unwrap_or("config")),
        ]
        .into_iter()
        .chain(std::env::current_dir().ok()),
    );
    // Said once at start when a part of the sandbox is missing here (see `sandbox.rs`), and
    // what an earlier bot's commands left (their cgroups) swept. Off the start's path: a few
    // short processes.
    if crate::sandbox::helper().is_some() {
        std::thread::spawn(|| {
            crate::sandbox::sweep();
            crate::fence::missing(false)
        });
    }
    // Before any command can run: the bot's environment (its secrets) stays out of their reach.
    if let Err(e) = crate::exec::hide_from_commands() {
        tracing::warn!(error = %e, "could not hide the process from commands (exec)");
    }
    let platform = Platform {
        kv: kv.clone(),
        files: Arc::new(FsFiles::new(&files_root).context("creating files directory")?),
        http: Arc::new(ReqwestHttp::new().map_err(|e| anyhow::anyhow!("{e}"))?),
        vectors: Arc::new(SqlVectors::new(index_db.clone())),
        text: Arc::new(SqlText::new(index_db.clone())),
        clock: clock.clone(),
        exec: Some(Arc::new(crate::exec::ShellExec::new(files_root))),
    };
    let instance = format!(
        "{}{}-{}",
        crate::runner::INSTANCE_PREFIX,
        std::process::id(),
        clock.now_ms()
    );
    let backups = crate::backup::Backups::from_config(&config.backup, &data)
        .map_err(|e| anyhow::anyhow!("config: backup: {e}"))?;
    let app = App::new(platform, config, env, instance).map_err(|e| anyhow::anyhow!("{e}"))?;
    app.upgrade_store()
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", db_path.display()))?;
    Ok(Native {
        app: Arc::new(app),
        kv_db: db,
        index_db,
        config_source,
        backups,
    })
}

#[cfg(test)]
mod tests;

/// What `doctor --security` finds on this machine: the bot running as root while it runs
/// commands, the sandbox's missing parts, and a data directory or `.env` others can read.
pub fn machine_checks(env: &Env, runs_commands: bool) -> Vec<clawless_core::doctor::Check> {
    use clawless_core::doctor::{Check, Status};
    let mut out = Vec::new();
    if runs_commands {
        if rustix::process::geteuid().is_root() {
            out.push(Check {
                name: "root".into(),
                status: Status::Warn,
                detail: "the bot runs as root and offers exec: a command that escapes its sandbox is root; run it as a user of its own".into(),
            });
        }
        out.push(crate::fence::check());
    }
    let data = PathBuf::from(env.get("CLAWLESS_DATA").unwrap_or("data"));
    for (path, fix) in [
        (data.as_path(), "chmod 700"),
        (Path::new(ENV_FILE), "chmod 600"),
    ] {
        if others_read(path) {
            out.push(Check {
                name: "files".into(),
                status: Status::Warn,
                detail: format!(
                    "{} can be read by every user of this machine (the bot's data or its secrets): {fix} {}",
                    path.display(),
                    path.display()
                ),
            });
        }
    }
    out
}

/// Whether users other than its owner and group may read `path`.
fn others_read(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o004 != 0)
}
