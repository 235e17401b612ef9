//! The audit trail beyond approvals: a failed model call leaves its entry although the turn
//! fails, and the serverless shells' `/admin/audit` endpoint (absent without a token, 401 on a
//! wrong one, the entries as JSON to the right one); what the app tells the operator about
//! tools it cannot offer; `doctor` and `/admin/doctor`; and the command menu.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::audit::Step;
use clawless_core::Config;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const TOKEN: &str = "0123456789abcdef-admin";

fn config() -> Config {
    Config::load(&clawless_core::config::embedded()).unwrap()
}

#[test]
fn a_failed_model_call_is_in_the_audit_trail() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // Nothing scripted: every model call gets a 500, so the turn fails (to be retried).
        h.deliver("private_text", 1).await;
        assert!(
            h.sent_texts().is_empty(),
            "not answered yet: the job is retried"
        );
        let entries = h
            .app
            .admin()
            .audit_entries(&"main".into(), 86_400_000, Some(OWNER_ID), 100)
            .await
            .unwrap();
        let failed: Vec<_> = entries
            .iter()
            .filter_map(|e| match &e.step {
                Step::Model { model, outcome, .. } => Some((model.clone(), outcome.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            failed,
            [(
                "anthropic/claude-sonnet-4-5".to_owned(),
                "transient".to_owned()
            )],
            "{entries:?}"
        );
    });
}

#[test]
fn the_admin_endpoint_is_absent_without_a_token() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let r = h
            .app
            .admin()
            .admin_audit("GET", Some(&format!("Bearer {TOKEN}")), None)
            .await;
        assert_eq!((r.status, r.body_text()), (404, "not found"));
    });
}

#[test]
fn a_short_admin_token_is_refused_at_start() {
    let err = Harness::with_env(
        Wire::Anthropic,
        config(),
        &[("CLAWLESS_ADMIN_TOKEN", "short")],
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("CLAWLESS_ADMIN_TOKEN") && !err.to_string().contains("short\""),
        "{err}"
    );
}

#[test]
fn the_admin_endpoint_answers_only_the_token() {
    block_on(async {
        let h = Harness::with_env(
            Wire::Anthropic,
            config(),
            &[("CLAWLESS_ADMIN_TOKEN", TOKEN)],
        )
        .unwrap();
        h.script(200, anthropic_text("Hello."));
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["Hello."]);

        let wrong = format!("Bearer {TOKEN}x");
        for auth in [None, Some("Bearer "), Some(wrong.as_str()), Some(TOKEN)] {
            let r = h
                .app
                .admin()
                .admin_audit("GET", auth, Some("since=1h"))
                .await;
            assert_eq!((r.status, r.body_text()), (401, "unauthorized"), "{auth:?}");
        }
        let bearer = format!("Bearer {TOKEN}");
        let r = h.app.admin().admin_audit("POST", Some(&bearer), None).await;
        assert_eq!(r.status, 405);
        let r = h
            .app
            .admin()
            .admin_audit("GET", Some(&bearer), Some("since=2w"))
            .await;
        assert!(r.status == 400 && r.body_text().contains("unit"), "{r:?}");
        let r = h
            .app
            .admin()
            .admin_audit("GET", Some(&bearer), Some("connector=other"))
            .await;
        assert!(
            r.status == 400 && r.body_text().contains("no connector"),
            "{r:?}"
        );

        let r = h
            .app
            .admin()
            .admin_audit(
                "GET",
                Some(&bearer),
                Some(&format!("since=1h&chat={OWNER_ID}")),
            )
            .await;
        assert_eq!((r.status, r.content_type), (200, "application/json"));
        let v: Value = serde_json::from_str(r.body_text()).unwrap();
        let entries = v["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{v}");
        assert_eq!(entries[0]["kind"], "model");
        assert_eq!(entries[0]["connector"], "main");
        assert_eq!(entries[0]["outcome"], "ok");
        // Another chat's filter finds nothing.
        let r = h
            .app
            .admin()
            .admin_audit(
                "GET",
                Some(&bearer),
                Some(&format!("chat={}", fixtures::GROUP_ID)),
            )
            .await;
        assert_eq!(r.body_text(), r#"{"entries":[]}"#);
    });
}

/// `web_search` and `generate_image` are listed by the default agent but offered only once a
/// search API or an image service is set; without one, the app says so (shells log it,
/// `config check` prints it).
#[test]
fn tools_that_cannot_be_offered_are_named() {
    let h = Harness::new(Wire::Anthropic);
    assert_eq!(
        h.app.unoffered_tools(),
        [
            "agent \"assistant\" lists generate_image, which needs an image service: \
          OPENAI_API_KEY, GEMINI_API_KEY or IMAGE_BASE_URL (on Cloudflare, the AI binding): not \
          offered here",
            "agent \"assistant\" lists web_search, which needs a search API: BRAVE_API_KEY, \
          TAVILY_API_KEY or SEARXNG_URL: not offered here"
        ]
    );
    let both = [
        ("BRAVE_API_KEY", "k"),
        ("IMAGE_BASE_URL", "http://images.test"),
    ];
    let h = Harness::with_env(Wire::Anthropic, config(), &both).unwrap();
    assert!(h.app.unoffered_tools().is_empty());
}

#[test]
fn the_command_menu_is_set_once_per_change() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.app.scheduled().await;
        let menus = h.calls("setMyCommands");
        assert_eq!(menus.len(), 2, "everyone's and the owner's");
        assert_eq!(menus[0]["scope"]["type"], "default");
        assert_eq!(
            menus[1]["scope"],
            json!({"type": "chat", "chat_id": OWNER_ID})
        );
        let names = |body: &serde_json::Value| -> Vec<String> {
            body["commands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["command"].as_str().unwrap().to_owned())
                .collect()
        };
        assert!(names(&menus[0]).contains(&"new".to_owned()));
        assert!(!names(&menus[0]).contains(&"users".to_owned()));
        assert!(names(&menus[1]).contains(&"users".to_owned()));
        // The same help text as /help.
        assert_eq!(
            menus[0]["commands"][0]["description"],
            "start a fresh conversation"
        );
        h.app.scheduled().await;
        assert_eq!(h.calls("setMyCommands").len(), 2, "once per instance");
        // What the Kv keeps says Telegram has it: a new instance sends nothing.
        assert_eq!(
            h.app.admin().register_menus().await,
            ["main: command menu unchanged"]
        );
        assert_eq!(h.calls("setMyCommands").len(), 2);
        h.assert_spec_clean();
    });
}

#[test]
fn doctor_finds_a_healthy_bot_healthy_and_a_stuck_backlog_stuck() {
    use clawless_core::doctor::{Delivery, Status};
    block_on(async {
        let h = Harness::with_env(
            Wire::Anthropic,
            config(),
            &[("CLAWLESS_ADMIN_TOKEN", TOKEN)],
        )
        .unwrap();
        h.script(200, json!({"data": []})); // the model's key check
        let checks = h.app.admin().doctor(Delivery::Either).await;
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "settings",
                "settings",
                "telegram main",
                "webhook main",
                "model anthropic/claude-sonnet-4-5",
                "storage",
                "backlog"
            ]
        );
        assert!(
            checks[..2].iter().all(|c| c.status == Status::Warn),
            "no image service, no search API: {checks:?}"
        );
        assert!(
            checks[2..].iter().all(|c| c.status == Status::Ok),
            "{checks:?}"
        );
        assert_eq!(checks[2].detail, "the token is @clawless_test_bot's");
        // The key check listed models with the key, and nothing else was sent to the model.
        let sent = h.http.requests();
        let check = sent
            .iter()
            .find(|r| r.url.starts_with(support::LLM))
            .unwrap();
        assert_eq!(check.url, format!("{}/v1/models?limit=1", support::LLM));
        assert_eq!(check.header_value("x-api-key"), Some("sk-ant-test"));

        // An update accepted and never drained: after 11 minutes the backlog is stuck.
        h.accept_only("private_text", 7).await.unwrap();
        h.clock.advance(std::time::Duration::from_secs(11 * 60));
        h.script(401, json!({"error": {"type": "authentication_error"}}));
        let checks = h.app.admin().doctor(Delivery::Webhook).await;
        let by = |name: &str| checks.iter().find(|c| c.name == name).unwrap().clone();
        let backlog = by("backlog");
        assert_eq!(backlog.status, Status::Fail);
        assert!(
            backlog
                .detail
                .starts_with("1 conversation(s) waiting, the oldest for 11 min"),
            "{}",
            backlog.detail
        );
        let model = by("model anthropic/claude-sonnet-4-5");
        assert_eq!(model.status, Status::Fail);
        assert!(model.detail.contains("refused the key"), "{}", model.detail);
        assert_eq!(
            by("webhook main").status,
            Status::Fail,
            "a serverless shell needs one"
        );

        // The same over /admin/doctor, to the admin only.
        let app = &h.app;
        let ask = |auth: Option<String>| async move {
            app.admin()
                .serve(clawless_core::admin_http::AdminRequest {
                    method: "GET",
                    name: "doctor",
                    authorization: auth.as_deref(),
                    ..Default::default()
                })
                .await
        };
        assert_eq!(ask(None).await.status, 401);
        h.script(200, json!({"data": []}));
        let reply = ask(Some(format!("Bearer {TOKEN}"))).await;
        assert_eq!(reply.status, 200);
        let answer: Value = serde_json::from_str(reply.body_text()).unwrap();
        assert_eq!(answer["ok"], false);
        assert!(answer["checks"].as_array().unwrap().len() >= 5);
        assert!(
            !reply.body_text().contains(support::TOKEN),
            "no secret in the answer"
        );
        assert!(!reply.body_text().contains("sk-ant-test"));
    });
}

#[test]
fn setup_points_the_webhook_at_the_deployment_and_sets_the_menu() {
    block_on(async {
        let h = Harness::with_env(
            Wire::Anthropic,
            config(),
            &[("CLAWLESS_ADMIN_TOKEN", TOKEN)],
        )
        .unwrap();
        let auth = format!("Bearer {TOKEN}");
        let setup = |origin: Option<&'static str>, method: &'static str| {
            let auth = auth.clone();
            let app = &h.app;
            async move {
                app.admin()
                    .serve(clawless_core::admin_http::AdminRequest {
                        method,
                        name: "setup",
                        authorization: Some(&auth),
                        origin,
                        ..Default::default()
                    })
                    .await
            }
        };
        assert_eq!(setup(Some("https://bot.example"), "GET").await.status, 405);
        assert_eq!(setup(None, "POST").await.status, 400);
        let reply = setup(Some("https://bot.example.workers.dev"), "POST").await;
        assert_eq!(reply.status, 200, "{}", reply.body_text());
        let report: Value = serde_json::from_str(reply.body_text()).unwrap();
        assert_eq!(
            report["steps"][0],
            "main: webhook set to https://bot.example.workers.dev/telegram/main"
        );
        assert_eq!(
            report["steps"][1],
            "main: command menu set (default and owner scope)"
        );
        assert_eq!(
            report["steps"][2],
            "main: the menu button opens the panel at https://bot.example.workers.dev/app/"
        );
        let button = h.calls("setChatMenuButton");
        assert_eq!(
            button[0]["menu_button"]["web_app"]["url"],
            "https://bot.example.workers.dev/app/"
        );
        let set = h.calls("setWebhook");
        assert_eq!(set.len(), 1);
        assert_eq!(
            set[0]["url"],
            "https://bot.example.workers.dev/telegram/main"
        );
        assert_eq!(set[0]["secret_token"], support::SECRET);
        assert_eq!(h.calls("setMyCommands").len(), 2);
        assert!(
            !reply.body_text().contains(support::SECRET),
            "the secret is not answered"
        );

        // With the Worker's front: the webhook goes to the front, the panel stays here.
        let reply = h
            .app
            .admin()
            .serve(clawless_core::admin_http::AdminRequest {
                method: "POST",
                name: "setup",
                authorization: Some(&auth),
                origin: Some("https://bot.example.workers.dev"),
                query: Some("webhook=https%3A%2F%2Ffront.example.workers.dev"),
                ..Default::default()
            })
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body_text());
        let set = h.calls("setWebhook");
        assert_eq!(
            set[1]["url"],
            "https://front.example.workers.dev/telegram/main"
        );
        let button = h.calls("setChatMenuButton");
        assert_eq!(
            button[1]["menu_button"]["web_app"]["url"],
            "https://bot.example.workers.dev/app/"
        );
        let reply = h
            .app
            .admin()
            .serve(clawless_core::admin_http::AdminRequest {
                method: "POST",
                name: "setup",
                authorization: Some(&auth),
                origin: Some("https://bot.example.workers.dev"),
                query: Some("webhook=ftp://front"),
                ..Default::default()
            })
            .await;
        assert_eq!(reply.status, 502);
        assert!(
            reply
                .body_text()
                .contains("ftp://front\\\" is not an http(s) URL"),
            "{}",
            reply.body_text()
        );
        assert_eq!(h.calls("setWebhook").len(), 2, "nothing set");
        h.assert_spec_clean();
    });
}
