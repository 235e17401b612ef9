//! `clawless hooks test NAME [--url URL]`: sends hook NAME a sample delivery as a caller
//! would (its secret from its `secret_env`, an `Idempotency-Key`), and says in one line what
//! the running bot's answer means.

use std::time::Duration;

use anyhow::{anyhow, Result};
use clawless_native::setup;

use super::ConfigProblem;

/// How long the bot has to answer.
const WAIT: Duration = Duration::from_secs(10);
/// What the sample delivery says.
const SAMPLE_TEXT: &str = "A test delivery from clawless hooks test";

/// Sends the sample delivery to `url`'s `/hooks/<name>`: `Ok` when the bot took it (202),
/// else the sentence saying why not. An unknown hook or an unset secret is the
/// configuration's problem.
pub(super) async fn test(name: &str, url: &str) -> Result<()> {
    let env = setup::env();
    let (config, _) = setup::load_config(&env).map_err(|e| ConfigProblem(format!("{e:#}")))?;
    let Some(hook) = config.hooks.iter().find(|h| h.name == name) else {
        let names: Vec<&str> = config.hooks.iter().map(|h| h.name.as_str()).collect();
        let known = match names.is_empty() {
            true => "it has no hooks".to_owned(),
            false => format!("its hooks: {}", names.join(", ")),
        };
        return Err(
            ConfigProblem(format!("no hook {name:?} in the configuration ({known})")).into(),
        );
    };
    let Some(secret) = env.get(&hook.secret_env).filter(|s| !s.is_empty()) else {
        return Err(ConfigProblem(format!(
            "set {} first: it is hook {name}'s secret, the same value the running bot has",
            hook.secret_env
        ))
        .into());
    };
    let base = base_url(url);
    let target = format!("{base}/hooks/{name}");
    let body = serde_json::json!({"hook": name, "status": "test", "text": SAMPLE_TEXT});
    let key = format!("test-{}", unix_seconds());
    let client = reqwest::Client::builder().timeout(WAIT).build()?;
    let sent = client
        .post(&target)
        .bearer_auth(secret)
        .header("Idempotency-Key", &key)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await;
    let answer = match sent {
        Ok(r) => {
            let status = r.status().as_u16();
            // The bot's own words are short; a proxy's page is cut.
            let text: String = r.text().await.unwrap_or_default().chars().take(200).collect();
            meaning(status, text.trim(), name, hook.chat, &hook.secret_env, &base)
        }
        Err(e) if e.is_connect() => Err(format!(
            "nothing listens at {base}: start `clawless serve` or `clawless run --listen 127.0.0.1:8080` (or give the bot's URL with --url)"
        )),
        Err(e) if e.is_timeout() => Err(format!(
            "{base} did not answer within {} s",
            WAIT.as_secs()
        )),
        Err(e) => Err(format!("{target} could not be reached: {e}")),
    };
    match answer {
        Ok(line) => {
            println!("{line}");
            Ok(())
        }
        Err(line) => Err(anyhow!(line)),
    }
}

/// `url` without a trailing `/`, `http://` put in front when it names no scheme.
fn base_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    match url.contains("://") {
        true => url.to_owned(),
        false => format!("http://{url}"),
    }
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the bot's answer `status` (its body `text`) to hook `name` means, as one sentence:
/// `Ok` when it took the delivery.
fn meaning(
    status: u16,
    text: &str,
    name: &str,
    chat: i64,
    secret_env: &str,
    base: &str,
) -> Result<String, String> {
    match status {
        202 if text == "accepted before" => Ok(
            "202: the bot took a delivery with this key before and delivers it once; run the test again in a second for a new one"
                .to_owned(),
        ),
        202 => Ok(format!(
            "202: delivered; look in chat {chat} for it (a turn hook's answer comes once the model has answered)"
        )),
        401 => Err(format!(
            "401: the running bot has another secret for hook {name}: give it the same {secret_env} as here and restart it"
        )),
        404 => Err(format!(
            "404: the bot at {base} has no hook {name}: is it running with this configuration? Restart it after adding the hook"
        )),
        429 => Err(format!(
            "429: hook {name} took its per_minute deliveries this minute; try again in a minute"
        )),
        500 => Err("500: the bot could not store the delivery; its log says why".to_owned()),
        other => Err(format!("{other}: the bot refused the delivery: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_is_one_sentence_saying_what_to_do() {
        let m = |status, text| meaning(status, text, "ci", -100, "HOOK_CI", "http://h:1");
        assert!(m(202, "accepted").unwrap().contains("look in chat -100"));
        assert!(m(202, "accepted before").unwrap().contains("before"));
        assert!(m(401, "unauthorized").unwrap_err().contains("same HOOK_CI"));
        assert!(m(404, "unknown hook")
            .unwrap_err()
            .contains("http://h:1 has no hook ci"));
        assert!(m(429, "").unwrap_err().contains("per_minute"));
        assert_eq!(
            m(415, "send JSON, text or a form").unwrap_err(),
            "415: the bot refused the delivery: send JSON, text or a form"
        );
        for status in [202, 401, 404, 429, 500, 400] {
            let line = m(status, "x").unwrap_or_else(|e| e);
            assert!(!line.contains('\n'), "{line}");
        }
        assert_eq!(base_url("127.0.0.1:8080/"), "http://127.0.0.1:8080");
        assert_eq!(base_url("https://bot.example"), "https://bot.example");
    }
}
