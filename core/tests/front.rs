//! The front (`clawless_core::front`): an update acknowledged by the front alone and drained
//! by the app is answered exactly as one the app acknowledged itself, for every real-format
//! fixture; what the front cannot tell without the app becomes a job the turn ignores.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::front::Front;
use clawless_core::{Config, Env};
use clawless_testkit::fixtures::{self, STRANGER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire, SECRET};

/// The config [`Harness::new`] runs on, as the Worker embeds it.
fn config_json() -> String {
    Config::load(&clawless_core::config::embedded())
        .unwrap()
        .to_json()
}

fn front_of(h: &Harness) -> Front {
    let env = Env::from_pairs([("TELEGRAM_WEBHOOK_SECRET", SECRET.to_string())]);
    Front::new(
        &config_json(),
        &env,
        h.platform.kv.clone(),
        h.platform.clock.clone(),
        "front-1".into(),
    )
    .unwrap()
}

/// The Bot API and model calls made, in order: `(url, body)`.
fn calls(h: &Harness) -> Vec<(String, Vec<u8>)> {
    h.http
        .requests()
        .into_iter()
        .map(|r| (r.url, r.body))
        .collect()
}

/// `updates` through the app's own webhook, and through the front then the app's drain.
fn both(updates: &[Value], answers: usize) -> (Harness, Harness) {
    let by_app = Harness::new(Wire::Anthropic);
    let by_front = Harness::new(Wire::Anthropic);
    for h in [&by_app, &by_front] {
        for _ in 0..answers {
            h.script(200, anthropic_text("An answer."));
        }
    }
    let front = front_of(&by_front);
    block_on(async {
        for update in updates {
            let body = update.to_string();
            let app = by_app
                .app
                .handle_webhook("main", Some(SECRET), body.as_bytes())
                .await;
            let ack = front.ack("main", Some(SECRET), body.as_bytes()).await;
            assert_eq!(app.status, ack.status, "{update}");
            if let Some(lane) = &app.lane {
                by_app.app.drain(lane).await.unwrap();
                assert_eq!(ack.lane.as_ref(), Some(lane), "{update}");
            }
            if let Some(lane) = &ack.lane {
                by_front.app.drain(lane).await.unwrap();
            }
        }
    });
    (by_app, by_front)
}

#[test]
fn every_fixture_is_answered_the_same_through_the_front() {
    for name in fixtures::ALL {
        let (by_app, by_front) = both(&[fixtures::update(name, 1)], 2);
        assert_eq!(calls(&by_app), calls(&by_front), "{name}");
    }
}

#[test]
fn a_stranger_is_told_once_and_duplicates_are_dropped_through_the_front() {
    let stranger = fixtures::update("stranger_private", 1);
    let again = fixtures::update("stranger_private", 2);
    let text = fixtures::update("private_text", 3);
    let (by_app, by_front) = both(&[stranger.clone(), again, text.clone(), text, stranger], 2);
    assert_eq!(calls(&by_app), calls(&by_front));
    let to_stranger = by_front
        .calls("sendMessage")
        .into_iter()
        .filter(|b| b["chat_id"] == json!(STRANGER_ID))
        .count();
    assert_eq!(to_stranger, 1, "one notice with the code");
    assert_eq!(by_front.llm_requests().len(), 1, "the text answered once");
}

#[test]
fn the_front_refuses_as_the_app_does() {
    let h = Harness::new(Wire::Anthropic);
    let front = front_of(&h);
    let body = fixtures::update("private_text", 1).to_string();
    block_on(async {
        for secret in [Some("wrong"), None, Some("")] {
            let r = front.ack("main", secret, body.as_bytes()).await;
            assert_eq!((r.status, r.lane), (401, None));
        }
        assert_eq!(
            front
                .ack("nope", Some(SECRET), body.as_bytes())
                .await
                .status,
            404
        );
        let big = vec![b' '; clawless_core::shell::MAX_UPDATE_BYTES + 1];
        assert_eq!(front.ack("main", Some(SECRET), &big).await.status, 413);
        for junk in [&b"{not json"[..], br#"{"message": {}}"#, b"[]"] {
            let r = front.ack("main", Some(SECRET), junk).await;
            assert_eq!((r.status, r.lane), (200, None));
        }
        assert!(
            h.platform.kv.list("", 10).await.unwrap().is_empty(),
            "nothing stored"
        );
    });
    // No secret set: every webhook refused, and said.
    let unset = Front::new(
        &config_json(),
        &Env::default(),
        h.platform.kv.clone(),
        h.platform.clock.clone(),
        "front-2".into(),
    )
    .unwrap();
    assert_eq!(unset.unset_secrets(), ["main"]);
    let r = block_on(unset.ack("main", Some(""), body.as_bytes()));
    assert_eq!(r.status, 401);
    assert!(Front::new(
        "{}",
        &Env::default(),
        h.platform.kv.clone(),
        h.platform.clock.clone(),
        "front-3".into(),
    )
    .is_err());
    assert!(!format!("{front:?}").contains(SECRET), "no secret in Debug");
}

/// The lines of `metrics` (Prometheus text) of the acknowledgement's series.
fn ack_lines(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| {
            ["clawless_updates_", "clawless_ack_seconds_count"]
                .iter()
                .any(|m| l.starts_with(m))
        })
        .collect()
}

#[test]
fn the_front_counts_its_acks_as_the_app_does_and_metrics_sums_them() {
    let text = fixtures::update("private_text", 1);
    let mut edited = fixtures::update("private_text", 2);
    edited["edited_message"] = edited["message"].take();
    edited.as_object_mut().unwrap().remove("message");
    let bodies: Vec<Vec<u8>> = [
        text.to_string(),
        text.to_string(),
        edited.to_string(),
        fixtures::update("unknown_poll", 3).to_string(),
        json!({"update_id": 4, "callback_query": {"id": "q", "from": {"id": 7}}}).to_string(),
        json!({"message": {}}).to_string(),
        "{not json".to_owned(),
    ]
    .map(String::into_bytes)
    .to_vec();
    let by_app = Harness::new(Wire::Anthropic);
    let by_front = Harness::new(Wire::Anthropic);
    let front = front_of(&by_front);
    block_on(async {
        for body in &bodies {
            by_app.app.handle_webhook("main", Some(SECRET), body).await;
            front.ack("main", Some(SECRET), body).await;
        }
        front.keep_counts().await;
        let app = by_app.app.admin().metrics_text().await;
        let summed = by_front.app.admin().metrics_text().await;
        let lines = ack_lines(&app);
        assert_eq!(lines.len(), 8, "{app}");
        assert_eq!(ack_lines(&summed), lines, "the front's counts, summed");
        assert!(summed.contains("clawless_instances 2"), "{summed}");
        // Kept once more only when they changed; a later ack is counted on.
        front.ack("main", Some(SECRET), &bodies[0]).await;
        front.keep_counts().await;
        let later = by_front.app.admin().metrics_text().await;
        assert!(later.contains(r#"reason="duplicate"} 2"#), "{later}");
    });
}
