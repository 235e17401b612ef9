//! The native `clawless` binary against a running shell's admin endpoint, as a person moving
//! their bot would run it: `clawless import --remote URL FILE` and `export --remote URL FILE`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

/// Runs `bin` with `args` and the admin token; whether it succeeded, and what it said.
pub fn clawless(bin: &str, token: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CLAWLESS_ADMIN_TOKEN", token)
        .env("RUST_LOG", "warn")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// Imports `archive` into the shell at `base` twice (the second changes nothing), refuses a
/// cut-off copy, and exports it back: the exported archive's bytes.
pub fn round_trip(bin: &str, base: &str, token: &str, dir: &Path, archive: &[u8]) -> Vec<u8> {
    let file = dir.join("in.tar.gz");
    std::fs::write(&file, archive).unwrap();
    let file = file.to_str().unwrap();
    let (ok, said) = clawless(bin, token, &["import", "--remote", base, file]);
    assert!(ok && said.contains("files: 4 added"), "{said}");
    let (ok, said) = clawless(bin, token, &["import", "--remote", base, file]);
    assert!(
        ok && said.contains("entries: 0 added") && said.contains("files: 0 added, 4 already there"),
        "the second import changes nothing: {said}"
    );
    let cut = dir.join("cut.tar.gz");
    std::fs::write(&cut, &archive[..archive.len() / 2]).unwrap();
    let (ok, said) = clawless(
        bin,
        token,
        &["import", "--remote", base, cut.to_str().unwrap()],
    );
    assert!(!ok && said.contains("damaged"), "{said}");
    let (ok, said) = clawless(
        bin,
        "wrong-token-0123456789",
        &["export", "--remote", base, "-"],
    );
    assert!(!ok && said.contains("refused the token"), "{said}");
    let out = dir.join("out.tar.gz");
    let (ok, said) = clawless(
        bin,
        token,
        &["export", "--remote", base, out.to_str().unwrap()],
    );
    assert!(ok && said.contains("exported bot"), "{said}");
    std::fs::read(&out).unwrap()
}

/// `bin` on the data directory `data`: the repository's config, the fixtures' owner as the
/// one allowed user.
fn on_data(bin: &str, data: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CLAWLESS_DATA", data)
        .env("CLAWLESS_CONFIG", crate::repo::root().join("config"))
        .env("TELEGRAM_BOT_TOKEN", "1:LOCAL")
        .env(
            "TELEGRAM_ALLOWED_USERS",
            crate::fixtures::OWNER_ID.to_string(),
        )
        .env("RUST_LOG", "warn");
    cmd
}

/// The bot running with long polling on a data directory, killed and reaped when dropped.
pub struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the bot (`clawless run`, long polling) on the data directory `data` against the fake
/// Bot API at `tg` and the fake model at `llm`.
pub fn run(bin: &str, data: &Path, tg: &str, llm: &str) -> Running {
    let child = on_data(bin, data)
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-local")
        .env("ANTHROPIC_BASE_URL", llm)
        .arg("run")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    Running(child)
}

/// Runs `bin` on the data directory `data` (see [`on_data`]): `clawless import`, `export`,
/// `memory search` there.
pub fn local(bin: &str, data: &Path, args: &[&str]) -> (bool, String) {
    let out = on_data(bin, data)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}
