//! Backups (`backup:` in `main.yaml`): an archive of the whole store (`clawless export`'s)
//! written into a directory every period beside the bot, never before a reply, and the newest
//! `keep` kept. A backup is due when the newest archive there is older than the period, so a
//! restart neither skips one nor writes one twice. `clawless import FILE` restores one.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use clawless_core::archive::Whom;
use clawless_core::config::BackupConfig;
use clawless_core::App;

/// The archives' names: `clawless-<UTC yyyymmddThhmmssZ>.tar.gz`, in time order.
const PREFIX: &str = "clawless-";
const SUFFIX: &str = ".tar.gz";

/// Where and how often, from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backups {
    pub dir: PathBuf,
    pub every: Duration,
    pub keep: usize,
}

impl Backups {
    /// The schedule `backup:` sets (`None`: off); `dir` defaults to `<data>/backups`.
    pub fn from_config(config: &BackupConfig, data: &Path) -> Result<Option<Backups>, String> {
        let Some(ms) = config.period_ms()? else {
            return Ok(None);
        };
        Ok(Some(Backups {
            dir: config
                .dir
                .as_ref()
                .map_or_else(|| data.join("backups"), PathBuf::from),
            every: Duration::from_millis(ms),
            keep: config.keep.max(1),
        }))
    }

    /// The archives there, oldest first.
    pub fn archives(&self) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
                    })
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    }

    /// How long until the next backup is due at `now` (zero: due).
    pub fn due_in(&self, now: SystemTime) -> Duration {
        let newest = self
            .archives()
            .last()
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok());
        match newest {
            Some(at) => (at + self.every)
                .duration_since(now)
                .unwrap_or(Duration::ZERO),
            None => Duration::ZERO,
        }
    }

    /// Writes one archive now, then removes all but the newest `keep`; the archive's path.
    pub async fn write(&self, app: &App, now: SystemTime) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let archive = app.admin().export(&Whom::Bot, "native").await?;
        let path = self.dir.join(format!("{PREFIX}{}{SUFFIX}", stamp(now)));
        crate::archive_cli::write_new(&path, &archive)?;
        let all = self.archives();
        for old in &all[..all.len().saturating_sub(self.keep)] {
            std::fs::remove_file(old).with_context(|| format!("removing {}", old.display()))?;
        }
        Ok(path)
    }

    /// Writes a backup whenever one is due, until `stop` resolves. A failure is logged and
    /// tried again after a tenth of the period (at most an hour).
    pub async fn run(self, app: std::sync::Arc<App>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let wait = self.due_in(SystemTime::now());
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(wait) => {}
            }
            match self.write(&app, SystemTime::now()).await {
                Ok(path) => tracing::info!(path = %path.display(), "backup written"),
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "backup failed");
                    let retry = (self.every / 10).min(Duration::from_secs(3600));
                    tokio::select! {
                        _ = &mut stop => return,
                        _ = tokio::time::sleep(retry) => {}
                    }
                }
            }
        }
    }
}

/// `yyyymmddThhmmssZ` of `at`, in UTC.
fn stamp(at: SystemTime) -> String {
    let s = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = clawless_core::calendar::civil_from_days((s / 86_400) as i64);
    let t = s % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_time_order() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_249_296);
        assert_eq!(stamp(at), "20251127T131456Z");
        assert!(stamp(at) < stamp(at + Duration::from_secs(1)));
    }

    #[test]
    fn the_config_sets_the_schedule() {
        let data = Path::new("/d");
        let off = BackupConfig::default();
        assert_eq!(Backups::from_config(&off, data), Ok(None));
        let daily = BackupConfig {
            every: Some("1d".into()),
            ..BackupConfig::default()
        };
        let b = Backups::from_config(&daily, data).unwrap().unwrap();
        assert_eq!(
            (b.dir, b.every, b.keep),
            (PathBuf::from("/d/backups"), Duration::from_secs(86_400), 7)
        );
        let often = BackupConfig {
            every: Some("5m".into()),
            ..BackupConfig::default()
        };
        assert!(Backups::from_config(&often, data).is_err());
    }
}
