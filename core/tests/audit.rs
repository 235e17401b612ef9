//! The audit trail beyond approvals: a failed model call leaves its entry although the turn
//! fails, and the serverless shells' `/admin/audit` endpoint (absent without a token, 401 on a
//! wrong one, the entries as JSON to the right one); and what the app tells the operator about
//! tools it cannot offer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::audit::Step;
use clawless_core::Config;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::Value;
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
            .admin_audit("GET", Some(&format!("Bearer {TOKEN}")), None)
            .await;
        assert_eq!((r.status, r.body.as_str()), (404, "not found"));
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
            let r = h.app.admin_audit("GET", auth, Some("since=1h")).await;
            assert_eq!(
                (r.status, r.body.as_str()),
                (401, "unauthorized"),
                "{auth:?}"
            );
        }
        let bearer = format!("Bearer {TOKEN}");
        let r = h.app.admin_audit("POST", Some(&bearer), None).await;
        assert_eq!(r.status, 405);
        let r = h
            .app
            .admin_audit("GET", Some(&bearer), Some("since=2w"))
            .await;
        assert!(r.status == 400 && r.body.contains("unit"), "{r:?}");
        let r = h
            .app
            .admin_audit("GET", Some(&bearer), Some("connector=other"))
            .await;
        assert!(r.status == 400 && r.body.contains("no connector"), "{r:?}");

        let r = h
            .app
            .admin_audit(
                "GET",
                Some(&bearer),
                Some(&format!("since=1h&chat={OWNER_ID}")),
            )
            .await;
        assert_eq!((r.status, r.content_type), (200, "application/json"));
        let v: Value = serde_json::from_str(&r.body).unwrap();
        let entries = v["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{v}");
        assert_eq!(entries[0]["kind"], "model");
        assert_eq!(entries[0]["connector"], "main");
        assert_eq!(entries[0]["outcome"], "ok");
        // Another chat's filter finds nothing.
        let r = h
            .app
            .admin_audit(
                "GET",
                Some(&bearer),
                Some(&format!("chat={}", fixtures::GROUP_ID)),
            )
            .await;
        assert_eq!(r.body, r#"{"entries":[]}"#);
    });
}

/// `web_search` is listed by the default agent but offered only once a search API is set;
/// without one, the app says so (shells log it, `config check` prints it).
#[test]
fn tools_that_cannot_be_offered_are_named() {
    let h = Harness::new(Wire::Anthropic);
    assert_eq!(
        h.app.unoffered_tools(),
        [
            "agent \"assistant\" lists web_search, which needs a search API: BRAVE_API_KEY, \
          TAVILY_API_KEY or SEARXNG_URL: not offered here"
        ]
    );
    let h = Harness::with_env(Wire::Anthropic, config(), &[("BRAVE_API_KEY", "k")]).unwrap();
    assert!(h.app.unoffered_tools().is_empty());
}
