//! Incoming webhooks over each shell's own HTTP (`POST /hooks/<name>`), on the asking config
//! ([`crate::fixtures::asking_config`] adds the hooks `ci` and `ask`): a `message` delivery is
//! sent once however often its `Idempotency-Key` comes, with no model call; a `turn` delivery
//! is answered by the model in the hook's chat; a wrong or missing secret, an unknown hook, a
//! body over 64 KB and one neither JSON nor text are refused with their status and deliver
//! nothing.

use std::future::Future;
use std::time::Duration;

use super::{PanelAnswer, PanelCall, Shell};
use crate::fixtures::{HOOK_CHAT, HOOK_SECRET};

/// The hooks scenario on `shell` through `send` (one HTTP request to the shell).
pub async fn hooks_over_http<F, Fut>(shell: &dyn Shell, send: F)
where
    F: Fn(PanelCall) -> Fut,
    Fut: Future<Output = PanelAnswer>,
{
    let name = shell.name();
    let f = shell.fakes();
    let hook = |path: &str, auth: Option<&str>, key: Option<&str>, ct: &str, body: String| {
        let mut headers = vec![("content-type", ct.to_owned())];
        if let Some(a) = auth {
            headers.push(("authorization", a.to_owned()));
        }
        if let Some(k) = key {
            headers.push(("idempotency-key", k.to_owned()));
        }
        send(PanelCall {
            method: "POST",
            path: path.to_owned(),
            headers,
            body,
        })
    };
    let bearer = format!("Bearer {HOOK_SECRET}");
    let auth = Some(bearer.as_str());
    let json = "application/json";
    let first = r#"{"status":"failed","repo":{"name":"clawless"}}"#.to_owned();

    // Refused, and nothing delivered.
    let refused = [
        ("/hooks/ci", None, json, first.clone(), 401),
        ("/hooks/ci", Some("Bearer wrong"), json, first.clone(), 401),
        ("/hooks/nope", auth, json, first.clone(), 404),
        ("/hooks/ci", auth, json, " ".repeat(64 * 1024 + 1), 413),
        ("/hooks/ci", auth, "image/png", first.clone(), 415),
    ];
    for (path, a, ct, body, want) in refused {
        let r = hook(path, a, None, ct, body).await;
        assert_eq!(r.status, want, "{name}: {path} {a:?} {ct}: {}", r.body);
    }

    // A message, its key sent three times: delivered once.
    for _ in 0..3 {
        let r = hook("/hooks/ci", auth, Some("build-1"), json, first.clone()).await;
        assert_eq!(r.status, 202, "{name}: {}", r.body);
    }
    let second = r#"{"status":"passed","repo":{"name":"clawless"}}"#.to_owned();
    let r = hook("/hooks/ci", auth, Some("build-2"), json, second).await;
    assert_eq!(r.status, 202, "{name}: {}", r.body);
    crate::servers::within(
        &format!("{name}: both CI deliveries"),
        Duration::from_secs(60),
        || f.sent_to(HOOK_CHAT).len() >= 2,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        f.sent_to(HOOK_CHAT),
        vec!["CI failed: clawless", "CI passed: clawless"],
        "{name}: each delivery once, in order, as the template says"
    );
    assert_eq!(f.llm_count("clawless"), 0, "{name}: no model call");

    // A turn: the model reads the delivery and answers in the hook's chat.
    let r = hook(
        "/hooks/ask",
        auth,
        None,
        "text/plain",
        "door sensor: open".into(),
    )
    .await;
    assert_eq!(r.status, 202, "{name}: {}", r.body);
    crate::servers::within(
        &format!("{name}: the turn's answer"),
        Duration::from_secs(60),
        || f.sent_to(HOOK_CHAT).len() >= 3,
    )
    .await;
    let sent = f.sent_to(HOOK_CHAT);
    assert!(
        sent[2].contains("door sensor: open") && sent[2].contains("Webhook"),
        "{name}: the model answered the delivery: {sent:?}"
    );
    assert_eq!(
        f.llm_count("door sensor: open"),
        1,
        "{name}: one model call"
    );
}
