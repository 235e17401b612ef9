//! What the operator is told of the incoming webhooks: `/admin/hooks` lists them behind the
//! admin token (whether each secret is set, never the secret), and `doctor` has one check per
//! hook (its secret missing, short or fine, and where it lands).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::admin_http::AdminRequest;
use clawless_core::config::ConfigFiles;
use clawless_core::doctor::{Delivery, Status};
use clawless_core::Config;
use clawless_testkit::fixtures::{GROUP_ID, OWNER_ID};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const ADMIN: &str = "0123456789abcdef-admin";
const LONG_SECRET: &str = "a-long-hook-secret-0123456789";
const SHORT_SECRET: &str = "short-secret";

/// The default config with three hooks: `deploys` (a message to the owner, secret set and
/// long), `form` (a turn in a group for agent `assistant`, 5 a minute, secret short) and
/// `orphan` (its secret not set).
fn harness() -> Harness {
    let mut files: ConfigFiles = clawless_core::config::embedded();
    let main = files.0.get_mut("main.yaml").unwrap();
    main.push_str(&format!(
        r#"
hooks:
  - name: deploys
    secret_env: HOOK_DEPLOYS
    chat: {OWNER_ID}
  - name: form
    secret_env: HOOK_FORM
    chat: {GROUP_ID}
    mode: turn
    agent: assistant
    per_minute: 5
  - name: orphan
    secret_env: HOOK_ORPHAN
    chat: {OWNER_ID}
"#
    ));
    let config = Config::load(&files).unwrap();
    Harness::with_env(
        Wire::Anthropic,
        config,
        &[
            ("CLAWLESS_ADMIN_TOKEN", ADMIN),
            ("HOOK_DEPLOYS", LONG_SECRET),
            ("HOOK_FORM", SHORT_SECRET),
        ],
    )
    .unwrap()
}

async fn admin_hooks(h: &Harness, method: &str, auth: Option<&str>) -> (u16, String) {
    let r = h
        .app
        .admin()
        .serve(AdminRequest {
            method,
            name: "hooks",
            authorization: auth,
            ..Default::default()
        })
        .await;
    (r.status, r.body_text().to_owned())
}

#[test]
fn admin_hooks_lists_each_hook_without_its_secret() {
    block_on(async {
        let h = harness();
        for auth in [None, Some("Bearer wrong-token-of-some-length"), Some(ADMIN)] {
            let (status, body) = admin_hooks(&h, "GET", auth).await;
            assert_eq!((status, body.as_str()), (401, "unauthorized"), "{auth:?}");
        }
        let bearer = format!("Bearer {ADMIN}");
        let (status, _) = admin_hooks(&h, "POST", Some(&bearer)).await;
        assert_eq!(status, 405);
        let (status, body) = admin_hooks(&h, "GET", Some(&bearer)).await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            json!({"hooks": [
                {"name": "deploys", "connector": "main", "chat": OWNER_ID, "mode": "message",
                 "per_minute": 30, "agent": null, "secret_env": "HOOK_DEPLOYS", "secret_set": true},
                {"name": "form", "connector": "main", "chat": GROUP_ID, "mode": "turn",
                 "per_minute": 5, "agent": "assistant", "secret_env": "HOOK_FORM", "secret_set": true},
                {"name": "orphan", "connector": "main", "chat": OWNER_ID, "mode": "message",
                 "per_minute": 30, "agent": null, "secret_env": "HOOK_ORPHAN", "secret_set": false},
            ]})
        );
        for secret in [LONG_SECRET, SHORT_SECRET] {
            assert!(!body.contains(secret), "a secret in {body}");
        }
        // The same list is the Admin's, for the command line and the panel.
        let names: Vec<String> = h.app.admin().hooks().into_iter().map(|i| i.name).collect();
        assert_eq!(names, ["deploys", "form", "orphan"]);
    });
}

#[test]
fn admin_hooks_is_absent_without_an_admin_token() {
    block_on(async {
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let h = Harness::with_env(Wire::Anthropic, config, &[]).unwrap();
        let (status, _) = admin_hooks(&h, "GET", Some("Bearer anything-at-all-here")).await;
        assert_eq!(status, 404);
    });
}

#[test]
fn doctor_checks_each_hook_secret_and_says_where_it_lands() {
    block_on(async {
        let h = harness();
        h.script(200, json!({"data": []})); // the model's key check
        let checks = h.app.admin().doctor(Delivery::Either).await;
        let hooks: Vec<_> = checks
            .iter()
            .filter(|c| c.name.starts_with("hook "))
            .map(|c| (c.name.as_str(), c.status, c.detail.as_str()))
            .collect();
        assert_eq!(
            hooks,
            [
                (
                    "hook deploys",
                    Status::Ok,
                    &*format!("POST /hooks/deploys sends its message to the private chat of {OWNER_ID} (bot main), at most 30 a minute"),
                ),
                (
                    "hook form",
                    Status::Warn,
                    "HOOK_FORM is shorter than 16 characters: anyone who guesses it can post to /hooks/form; set a long random one",
                ),
                (
                    "hook orphan",
                    Status::Fail,
                    "set HOOK_ORPHAN (a long random string, e.g. openssl rand -hex 32) or every delivery to /hooks/orphan is refused with 401",
                ),
            ]
        );
        // Over /admin/doctor: the same checks, no secret in them.
        h.script(200, json!({"data": []}));
        let reply = h
            .app
            .admin()
            .serve(AdminRequest {
                method: "GET",
                name: "doctor",
                authorization: Some(&format!("Bearer {ADMIN}")),
                ..Default::default()
            })
            .await;
        assert_eq!(reply.status, 200);
        let body = reply.body_text();
        let answer: Value = serde_json::from_str(body).unwrap();
        assert_eq!(answer["ok"], false, "a hook without its secret fails");
        assert!(body.contains("hook orphan"), "{body}");
        for secret in [LONG_SECRET, SHORT_SECRET] {
            assert!(!body.contains(secret), "a secret in {body}");
        }
    });
}
