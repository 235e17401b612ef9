//! The control panel's sign-in and API (`App::panel`): launch data from Telegram (good,
//! forged, expired, another bot's, after "sign out everywhere"), the one-time browser link
//! (`browser`: used once, its cookie, the CSRF token on changes, sign-out), and everyone
//! reaching only their own (an IDOR corpus over every endpoint); the owner's list of hooks
//! (`hooks`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

#[path = "panel/browser.rs"]
mod browser;
#[path = "panel/hooks.rs"]
mod hooks;
#[path = "panel/idor.rs"]
mod idor;

use clawless_core::panel::auth::{sign_init_data, PanelKeys};
use clawless_core::panel::{PanelReply, PanelRequest};
use clawless_core::Config;
use clawless_testkit::fixtures::{OWNER_ID, STRANGER_ID};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire, SECRET, TOKEN};

/// A person the config allows besides the owner.
const OTHER_ID: i64 = 222_222_222;
const PUBLIC: &str = "https://bot.example";

fn harness() -> Harness {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    Harness::with_env(
        Wire::Anthropic,
        config,
        &[
            ("TELEGRAM_ALLOWED_USERS", &format!("{OWNER_ID},{OTHER_ID}")),
            ("CLAWLESS_PUBLIC_URL", PUBLIC),
        ],
    )
    .unwrap()
}

/// Launch data for `user` signed with `token`'s key at `auth_s`.
fn launch(token: &str, user: i64, auth_s: u64) -> String {
    let keys = PanelKeys::new(token, SECRET);
    let user = json!({ "id": user, "first_name": "Ada <b>", "username": "ada" }).to_string();
    sign_init_data(
        &keys,
        &[
            ("query_id", "AAH"),
            ("user", &user),
            ("auth_date", &auth_s.to_string()),
        ],
    )
}

fn now_s(h: &Harness) -> u64 {
    use clawless_platform::Clock;
    h.clock.now_ms() / 1000
}

async fn call(
    h: &Harness,
    method: &str,
    path: &str,
    auth: &str,
    body: Option<Value>,
) -> PanelReply {
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    h.app
        .panel()
        .serve(PanelRequest {
            method,
            path,
            query,
            authorization: Some(auth),
            body: body.as_bytes(),
            ..Default::default()
        })
        .await
}

fn json_of(r: &PanelReply) -> Value {
    serde_json::from_str(&r.body).unwrap_or(Value::Null)
}

#[test]
fn launch_data_signs_in_only_when_telegram_signed_it_for_this_bot_lately() {
    block_on(async {
        let h = harness();
        let now = now_s(&h);
        let good = format!("tma {}", launch(TOKEN, OWNER_ID, now - 30));
        let r = call(&h, "GET", "/api/me", &good, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let me = json_of(&r);
        assert_eq!(
            (me["id"].as_i64(), me["owner"].as_bool()),
            (Some(OWNER_ID), Some(true))
        );
        assert!(me.get("csrf").is_none(), "no cookie, no CSRF token");
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| *n == "content-security-policy" && v.contains("script-src 'self'")));

        // Forged: a field changed after signing.
        let forged = launch(TOKEN, OWNER_ID, now).replace("AAH", "AAX");
        // Another bot's token; expired; from the future; no hash; garbage; too long.
        let cases = [
            forged,
            launch("999:OTHER-BOT", OWNER_ID, now),
            launch(TOKEN, OWNER_ID, now - 3700),
            launch(TOKEN, OWNER_ID, now + 600),
            launch(TOKEN, OWNER_ID, now)
                .split("&hash=")
                .next()
                .unwrap()
                .to_owned(),
            "%%%&&==".to_owned(),
            "a=b&".repeat(2000),
        ];
        for bad in cases {
            let r = call(&h, "GET", "/api/me", &format!("tma {bad}"), None).await;
            assert_eq!(r.status, 401, "{bad:.80}");
        }
        // No sign-in at all.
        let r = h
            .app
            .panel()
            .serve(PanelRequest {
                method: "GET",
                path: "/api/me",
                ..Default::default()
            })
            .await;
        assert_eq!(r.status, 401);
        // Signed by Telegram, but a stranger to the bot.
        let stranger = format!("tma {}", launch(TOKEN, STRANGER_ID, now));
        assert_eq!(
            call(&h, "GET", "/api/me", &stranger, None).await.status,
            403
        );
    });
}

#[test]
fn sign_out_everywhere_refuses_earlier_launch_data_and_sessions() {
    block_on(async {
        let h = harness();
        let now = now_s(&h);
        let earlier = format!("tma {}", launch(TOKEN, OWNER_ID, now - 5));
        assert_eq!(call(&h, "GET", "/api/me", &earlier, None).await.status, 200);
        let r = call(
            &h,
            "POST",
            "/api/signout",
            &earlier,
            Some(json!({"everywhere": true})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        // The same data, replayed: refused.
        assert_eq!(call(&h, "GET", "/api/me", &earlier, None).await.status, 401);
        h.clock.advance(std::time::Duration::from_secs(2));
        let fresh = format!("tma {}", launch(TOKEN, OWNER_ID, now_s(&h)));
        assert_eq!(call(&h, "GET", "/api/me", &fresh, None).await.status, 200);
    });
}

#[test]
fn pages_are_served_with_a_strict_policy_and_unknown_paths_are_not() {
    block_on(async {
        let h = harness();
        let get = |path: &'static str| {
            let h = &h;
            async move {
                h.app
                    .panel()
                    .serve(PanelRequest {
                        method: "GET",
                        path,
                        ..Default::default()
                    })
                    .await
            }
        };
        for p in ["/app/", "/app/panel.js", "/app/panel.css"] {
            let r = get(p).await;
            assert_eq!(r.status, 200, "{p}");
            assert!(r
                .headers
                .iter()
                .any(|(n, _)| *n == "content-security-policy"));
        }
        assert_eq!(get("/app").await.status, 308);
        assert_eq!(get("/app/../Cargo.toml").await.status, 404);
        assert_eq!(get("/app/nothing.js").await.status, 404);
        assert_eq!(
            get("/api/nothing").await.status,
            401,
            "who asks is settled first"
        );
        // The page puts no text in as markup.
        let js = get("/app/panel.js").await.body;
        assert!(
            !js.contains("innerHTML")
                && !js.contains("insertAdjacentHTML")
                && !js.contains("eval(")
        );
    });
}

#[test]
fn usage_per_day_splits_the_owners_view_by_person_agent_and_model() {
    block_on(async {
        let h = harness();
        h.script(200, clawless_testkit::llm::anthropic_text("Hello."));
        assert_eq!(h.deliver("private_text", 1).await, 200);
        assert_eq!(h.sent_texts(), ["Hello."]);
        let now = now_s(&h);
        let owner = format!("tma {}", launch(TOKEN, OWNER_ID, now));
        let r = call(&h, "GET", "/api/usage/days?days=1", &owner, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let day = &json_of(&r)["days"][0];
        let models = day["models"].as_array().unwrap();
        assert_eq!(models.len(), 1, "{day}");
        assert_eq!(models[0]["agent"], "assistant");
        let model = models[0]["model"].as_str().unwrap();
        assert!(
            !model.is_empty() && model != clawless_core::usage::UNNAMED,
            "{model}"
        );
        assert_eq!(
            models[0]["tally"], day["everyone"],
            "one model did all of it"
        );
        assert_eq!(models[0]["tally"]["calls"], 1);
        assert_eq!(day["people"][0]["id"], OWNER_ID);
        // Another person sees their own day only: no one else's, no split by model.
        let other = format!("tma {}", launch(TOKEN, OTHER_ID, now));
        let r = call(&h, "GET", "/api/usage/days?days=1", &other, None).await;
        let day = &json_of(&r)["days"][0];
        assert!(
            day.get("models").is_none() && day.get("people").is_none(),
            "{day}"
        );
        assert_eq!(day["you"]["calls"], 0);
    });
}

#[test]
fn workspace_files_show_text_cut_and_binary_by_size() {
    block_on(async {
        let h = harness();
        let root = format!("workspace/assistant/main/u{OWNER_ID}");
        let files = &h.platform.files;
        files
            .write(&format!("{root}/photo.png"), b"\x89PNG\r\n\x1a\n\0\0\0")
            .await
            .unwrap();
        let long = "é".repeat(40_000); // 80,000 bytes
        files
            .write(&format!("{root}/long.txt"), long.as_bytes())
            .await
            .unwrap();
        let owner = format!("tma {}", launch(TOKEN, OWNER_ID, now_s(&h)));
        let get = |p: &'static str| call(&h, "GET", p, &owner, None);
        let r = json_of(&get("/api/files/file?agent=assistant&path=photo.png").await);
        assert_eq!((r["size"].as_u64(), r["text"].is_null()), (Some(11), true));
        let r = json_of(&get("/api/files/file?agent=assistant&path=long.txt").await);
        assert_eq!(r["cut"], true);
        assert_eq!(r["text"].as_str().unwrap().len(), 64 * 1024);
        for bad in ["", "..", "a%00b", "%2e%2e%2Fx", "dir%2F"] {
            let p = format!("/api/files/file?agent=assistant&path={bad}");
            assert_eq!(call(&h, "GET", &p, &owner, None).await.status, 400, "{bad}");
        }
        assert_eq!(
            get("/api/files/file?agent=nobody&path=long.txt")
                .await
                .status,
            404
        );
    });
}

#[test]
fn health_shows_the_bots_last_errors_with_their_trace() {
    block_on(async {
        let h = harness();
        h.script(
            500,
            json!({"type": "error", "error": {"type": "api_error", "message": "down"}}),
        );
        h.script(
            500,
            json!({"type": "error", "error": {"type": "api_error", "message": "down"}}),
        );
        h.deliver("private_text", 7).await;
        let owner = format!("tma {}", launch(TOKEN, OWNER_ID, now_s(&h)));
        let r = call(&h, "GET", "/api/health", &owner, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = json_of(&r);
        let errors = v["errors"].as_array().unwrap();
        assert!(!errors.is_empty(), "{v}");
        assert!(errors.iter().all(|e| e["trace"] == "main/7"), "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e["type"] == "model" && e["outcome"] != "ok"),
            "{errors:?}"
        );
        assert!(v["overview"]["lanes"].is_array());
    });
}
