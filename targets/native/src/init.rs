//! `clawless init`: the first set-up, asked in the terminal or given as flags. The bot token is
//! checked with `getMe` (its `@name` shown); the owner is whoever sends `/start` to the bot
//! (read with `getUpdates`); a provider and its key are checked with the provider's cheapest
//! call; all of it is written to an env file (`.env`, mode 0600) that `clawless` reads at
//! start. A wrong token or key is said in one sentence and asked again. No secret is ever
//! printed, and a secret typed at a terminal is not shown.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clawless_core::config::ProviderConfig;
use clawless_core::secret::Secret;
use clawless_core::telegram::{BotApi, TelegramError};
use clawless_core::{Config, Env};
use clawless_platform::Http;
use serde_json::{json, Value};

/// How long `init` waits for the owner's `/start`.
const WAIT_FOR_START: Duration = Duration::from_secs(600);
/// Tries at each question before giving up (a script feeding wrong answers ends).
const TRIES: usize = 5;
/// The variables `init` writes; any other line of an existing file is kept as it is.
const OWNED: &[&str] = &["TELEGRAM_BOT_TOKEN", "TELEGRAM_ALLOWED_USERS"];

/// What the flags already answer; `None` is asked.
#[derive(Debug, Default, Clone)]
pub struct Answers {
    pub token: Option<String>,
    pub owner: Option<i64>,
    /// A provider id of `providers.d`.
    pub provider: Option<String>,
    pub key: Option<String>,
}

/// The terminal, or what stands for it in a test.
pub struct Io<'a> {
    pub input: &'a mut dyn BufRead,
    pub output: &'a mut dyn Write,
    /// Typed secrets are hidden (the input is a terminal).
    pub hide: bool,
}

impl Io<'_> {
    fn say(&mut self, line: &str) -> Result<()> {
        writeln!(self.output, "{line}")?;
        self.output.flush()?;
        Ok(())
    }

    /// Asks `prompt` and reads one line, trimmed; the end of the input is an error.
    fn ask(&mut self, prompt: &str, secret: bool) -> Result<String> {
        write!(self.output, "{prompt}")?;
        self.output.flush()?;
        if secret && self.hide {
            let line = rpassword::read_password().context("reading from the terminal")?;
            writeln!(self.output)?;
            return Ok(line.trim().to_owned());
        }
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            bail!("no answer (the input ended): nothing was written");
        }
        Ok(line.trim().to_owned())
    }
}

/// Runs the set-up and writes `env_file`. `env` gives the Bot API and provider base URLs
/// (`TELEGRAM_API_BASE`, `<PROVIDER>_BASE_URL`), `config` the providers.
pub async fn run(
    io: &mut Io<'_>,
    given: Answers,
    env: &Env,
    config: &Config,
    env_file: &Path,
) -> Result<()> {
    let http: Arc<dyn Http> = Arc::new(
        clawless_platform::native_io::ReqwestHttp::new().map_err(|e| anyhow::anyhow!("{e}"))?,
    );
    let clock = Arc::new(clawless_platform::native_io::SystemClock);
    let base = env
        .get("TELEGRAM_API_BASE")
        .unwrap_or(clawless_core::telegram::api::DEFAULT_API_BASE)
        .to_owned();
    io.say("Setting up clawless. Nothing typed here is shown again.")?;
    let (token, bot, name) = ask_token(io, given.token.clone(), |t| {
        BotApi::new(http.clone(), clock.clone(), &base, Secret::new(t))
    })
    .await?;
    let owner = match given.owner {
        Some(owner) => owner,
        None => wait_for_start(io, &bot, &name).await?,
    };
    let (provider, secret) = ask_provider(io, &given, env, config, &http).await?;
    let mut vars = vec![
        ("TELEGRAM_BOT_TOKEN".to_owned(), token),
        ("TELEGRAM_ALLOWED_USERS".to_owned(), owner.to_string()),
    ];
    if let Some((var, value)) = secret {
        vars.push((var, value));
    }
    write_env_file(env_file, &vars)?;
    io.say(&format!(
        "Wrote {} (readable only by you): @{name}, owner {owner}, {provider}. Start the bot with `cargo run -p native` (or `clawless`) in this folder.",
        env_file.display()
    ))?;
    Ok(())
}

/// The bot token, checked with `getMe`: the token, its client and the bot's @name.
async fn ask_token(
    io: &mut Io<'_>,
    given: Option<String>,
    client: impl Fn(&str) -> BotApi,
) -> Result<(String, BotApi, String)> {
    for _ in 0..TRIES {
        let token = match &given {
            Some(t) => t.clone(),
            None => io.ask("Bot token (from @BotFather, /newbot): ", true)?,
        };
        let bot = client(&token);
        let said = match bot.get_me().await {
            Ok(me) => {
                io.say(&format!("Token OK: the bot is @{}.", me.username))?;
                return Ok((token, bot, me.username));
            }
            Err(TelegramError::Refused(..)) | Err(TelegramError::BadRequest(_)) => {
                "Telegram refused that token: copy it again from @BotFather (/mybots, API Token)."
                    .to_owned()
            }
            Err(e) => format!("Telegram could not be asked ({e}); check the connection."),
        };
        if given.is_some() {
            bail!("{said}");
        }
        io.say(&said)?;
    }
    bail!("no working token after {TRIES} tries")
}

/// Waits for a private `/start` to the bot: its sender becomes the owner, told so in Telegram.
async fn wait_for_start(io: &mut Io<'_>, bot: &BotApi, name: &str) -> Result<i64> {
    let info = bot.get_webhook_info().await?;
    if info["url"].as_str().is_some_and(|u| !u.is_empty()) {
        bail!("@{name} has a webhook set, so its updates cannot be read here: run `clawless webhook delete` first, or give --owner");
    }
    io.say(&format!(
        "Now open Telegram and send /start to @{name} (https://t.me/{name}); waiting for it…"
    ))?;
    let started = Instant::now();
    let mut offset = 0i64;
    while started.elapsed() < WAIT_FOR_START {
        let updates = match bot.get_updates(offset, 20).await {
            Ok(updates) => updates,
            // A blip on the way to Telegram does not end a set-up that waits for a person.
            Err(e) if e.is_transient() => {
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for u in &updates {
            offset = offset.max(u["update_id"].as_i64().unwrap_or(0) + 1);
            if let Some(owner) = start_sender(u) {
                // Marks what was read as handled, so the bot does not answer it later.
                let _ = bot.get_updates(offset, 0).await;
                let who = describe(&u["message"]["from"]);
                io.say(&format!("Found you: {who}, id {owner}. You are the owner."))?;
                let _ = bot
                    .call(
                        "sendMessage",
                        json!({"chat_id": owner, "text": "Found you! Finish the set-up in the terminal."}),
                    )
                    .await;
                return Ok(owner);
            }
        }
    }
    bail!(
        "no /start reached @{name} within {} minutes",
        WAIT_FOR_START.as_secs() / 60
    )
}

/// The sender of a `/start` in a private chat.
fn start_sender(update: &Value) -> Option<i64> {
    let m = &update["message"];
    let text = m["text"].as_str()?;
    let is_start = text == "/start" || text.starts_with("/start ") || text.starts_with("/start@");
    (is_start && m["chat"]["type"] == "private")
        .then(|| m["from"]["id"].as_i64())
        .flatten()
}

fn describe(user: &Value) -> String {
    let name = user["first_name"].as_str().unwrap_or("someone");
    match user["username"].as_str() {
        Some(u) => format!("{name} (@{u})"),
        None => name.to_owned(),
    }
}

/// The provider and the variable to write (its key, or Ollama's base URL), checked.
async fn ask_provider(
    io: &mut Io<'_>,
    given: &Answers,
    env: &Env,
    config: &Config,
    http: &Arc<dyn Http>,
) -> Result<(String, Option<(String, String)>)> {
    let ids: Vec<&String> = config.providers.keys().collect();
    let provider = match &given.provider {
        Some(p) => config
            .providers
            .get(p)
            .with_context(|| format!("no provider {p:?} (there are: {})", join(&ids)))?,
        None => pick_provider(io, config, &ids)?,
    };
    for _ in 0..TRIES {
        let (var, value) = match (&provider.api_key_env, &provider.base_url_env) {
            (Some(var), _) => {
                let value = match &given.key {
                    Some(k) => k.clone(),
                    None => io.ask(&format!("{} key ({var}): ", provider.id), true)?,
                };
                (var.clone(), value)
            }
            (None, Some(var)) => {
                let value = match &given.key {
                    Some(k) => k.clone(),
                    None => io.ask(
                        &format!(
                            "{} server URL, e.g. http://localhost:11434/v1: ",
                            provider.id
                        ),
                        false,
                    )?,
                };
                (var.clone(), value)
            }
            (None, None) => return Ok((provider.id.clone(), None)),
        };
        let said = check(http, provider, &var, &value, env).await;
        match said {
            None => {
                io.say(&format!("{}: the key works.", provider.id))?;
                return Ok((provider.id.clone(), Some((var, value))));
            }
            Some(said) if given.key.is_some() => bail!("{said}"),
            Some(said) => io.say(&said)?,
        }
    }
    bail!("no working key after {TRIES} tries")
}

fn pick_provider<'c>(
    io: &mut Io<'_>,
    config: &'c Config,
    ids: &[&String],
) -> Result<&'c ProviderConfig> {
    io.say("Which model provider do you have a key for?")?;
    for (i, id) in ids.iter().enumerate() {
        io.say(&format!("  {}) {id}", i + 1))?;
    }
    for _ in 0..TRIES {
        let answer = io.ask("Number or name: ", false)?;
        let chosen = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| ids.get(i).map(|s| s.as_str()))
            .unwrap_or(answer.as_str());
        if let Some(p) = config.providers.get(chosen) {
            return Ok(p);
        }
        io.say(&format!("{answer:?} is none of them: {}.", join(ids)))?;
    }
    bail!("no provider chosen after {TRIES} tries")
}

/// `None` when the provider takes the key (a base URL for a keyless one); else a sentence.
async fn check(
    http: &Arc<dyn Http>,
    p: &ProviderConfig,
    var: &str,
    value: &str,
    env: &Env,
) -> Option<String> {
    if value.is_empty() {
        return Some(format!("{var} cannot be empty."));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!(
            "{var} has spaces or control characters: paste it again."
        ));
    }
    let (key, env) = if p.api_key_env.is_some() {
        (value, env.clone())
    } else {
        // A keyless provider's answer is its base URL: checked there.
        let mut env = env.clone();
        env.set(var, value);
        ("", env)
    };
    match clawless_core::assemble::check_provider_key(http.clone(), p, key, &env).await {
        Ok(()) => None,
        Err(clawless_core::llm::LlmError::KeyRefused { .. }) => Some(format!(
            "{} refused that key: copy it again from the provider's console.",
            p.id
        )),
        Err(e) => Some(format!(
            "{} could not be asked ({e}): check the key or the connection.",
            p.id
        )),
    }
}

fn join(ids: &[&String]) -> String {
    ids.iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes `vars` into `path` (mode 0600): an existing file keeps its other lines, and any
/// earlier key of a provider is replaced by the new one.
pub fn write_env_file(path: &Path, vars: &[(String, String)]) -> Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let ours = |line: &str| {
        let name = line.split('=').next().unwrap_or("").trim();
        let name = name.strip_prefix("export ").unwrap_or(name).trim();
        vars.iter().any(|(v, _)| v == name) || OWNED.contains(&name)
    };
    let mut text: String = old
        .lines()
        .filter(|l| !ours(l))
        .map(|l| format!("{l}\n"))
        .collect();
    for (name, value) in vars {
        text.push_str(&format!("{name}={}\n", quote(value)));
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // An existing file keeps its mode on open: narrowed here.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(text.as_bytes())?;
    Ok(())
}

/// A value as dotenv reads it back unchanged: bare when it is plain, single-quoted (nothing
/// expanded) when it has no `'`, else double-quoted with `\\`, `"` and `$` escaped.
fn quote(value: &str) -> String {
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+,".contains(c));
    if plain {
        value.to_owned()
    } else if !value.contains('\'') {
        format!("'{value}'")
    } else {
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('$', "\\$");
        format!("\"{escaped}\"")
    }
}

/// Whether standard input is a terminal (typed secrets are then hidden).
pub fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_private_start_names_the_owner() {
        let u = |text: &str, kind: &str| json!({"update_id": 1, "message": {"text": text, "chat": {"id": 5, "type": kind}, "from": {"id": 5, "first_name": "Ada"}}});
        assert_eq!(start_sender(&u("/start", "private")), Some(5));
        assert_eq!(start_sender(&u("/start@bot", "private")), Some(5));
        assert_eq!(start_sender(&u("/start", "group")), None);
        assert_eq!(start_sender(&u("/starts", "private")), None);
        assert_eq!(start_sender(&u("hello", "private")), None);
    }

    #[test]
    fn the_env_file_keeps_other_lines_and_is_private() {
        let dir = clawless_testkit::scratch::dir("init");
        let path = dir.join(".env");
        std::fs::write(
            &path,
            "RUST_LOG=debug\nTELEGRAM_BOT_TOKEN=old\nGEMINI_API_KEY=old\n",
        )
        .unwrap();
        write_env_file(
            &path,
            &[
                ("TELEGRAM_BOT_TOKEN".into(), "1:abc".into()),
                ("GEMINI_API_KEY".into(), "k y'z$HOME\\".into()),
                ("OTHER".into(), "a b".into()),
            ],
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "RUST_LOG=debug\nTELEGRAM_BOT_TOKEN=1:abc\nGEMINI_API_KEY=\"k y'z\\$HOME\\\\\"\nOTHER='a b'\n"
        );
        // Read back as `clawless` reads it.
        let read: Vec<(String, String)> = dotenvy::from_path_iter(&path)
            .unwrap()
            .map(|kv| kv.unwrap())
            .collect();
        assert_eq!(read[2], ("GEMINI_API_KEY".into(), "k y'z$HOME\\".into()));
        assert_eq!(read[3], ("OTHER".into(), "a b".into()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
