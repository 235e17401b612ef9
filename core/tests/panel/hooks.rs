//! The panel's list of incoming webhooks (`/api/hooks`): the owner sees each hook's name,
//! mode, chat and whether its secret is set, never the secret; anyone else is refused.

use futures::executor::block_on;
use serde_json::json;

use super::support::{Harness, Wire, TOKEN};
use super::{call, json_of, launch, now_s, OTHER_ID};
use clawless_core::config::ConfigFiles;
use clawless_core::Config;
use clawless_testkit::fixtures::{GROUP_ID, OWNER_ID, STRANGER_ID};

const HOOK_SECRET: &str = "panel-hook-secret-0123456789";

/// The panel's harness with two hooks: `deploys` (a message to the owner, its secret set)
/// and `form` (a turn in a group, its secret not set).
fn harness() -> Harness {
    let mut files: ConfigFiles = clawless_core::config::embedded();
    let main = files.0.get_mut("main.yaml").unwrap();
    main.push_str(&format!(
        "\nhooks:\n  - name: deploys\n    secret_env: HOOK_DEPLOYS\n    chat: {OWNER_ID}\n  - name: form\n    secret_env: HOOK_FORM\n    chat: {GROUP_ID}\n    mode: turn\n"
    ));
    Harness::with_env(
        Wire::Anthropic,
        Config::load(&files).unwrap(),
        &[
            ("TELEGRAM_ALLOWED_USERS", &format!("{OWNER_ID},{OTHER_ID}")),
            ("HOOK_DEPLOYS", HOOK_SECRET),
        ],
    )
    .unwrap()
}

#[test]
fn only_the_owner_sees_the_hooks_and_never_their_secrets() {
    block_on(async {
        let h = harness();
        let now = now_s(&h);
        let owner = format!("tma {}", launch(TOKEN, OWNER_ID, now));
        let r = call(&h, "GET", "/api/hooks", &owner, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            json_of(&r),
            json!({"hooks": [
                {"name": "deploys", "mode": "message", "chat": OWNER_ID,
                 "secret_env": "HOOK_DEPLOYS", "secret_set": true},
                {"name": "form", "mode": "turn", "chat": GROUP_ID,
                 "secret_env": "HOOK_FORM", "secret_set": false},
            ]})
        );
        assert!(!r.body.contains(HOOK_SECRET), "{}", r.body);
        // Another person the bot serves, and a stranger: refused, nothing shown.
        let other = format!("tma {}", launch(TOKEN, OTHER_ID, now));
        let stranger = format!("tma {}", launch(TOKEN, STRANGER_ID, now));
        for who in [&other, &stranger] {
            let r = call(&h, "GET", "/api/hooks", who, None).await;
            assert_eq!(r.status, 403, "{}", r.body);
            assert!(!r.body.contains("deploys"), "{}", r.body);
        }
        // Only read: a change is not a method it takes.
        let r = call(&h, "POST", "/api/hooks", &owner, Some(json!({}))).await;
        assert_eq!(r.status, 405);
        // The page has the owner's tab for it.
        let page = call(&h, "GET", "/app/", &owner, None).await;
        assert!(
            page.body.contains("data-tab=\"hooks\" data-owner"),
            "{}",
            page.body
        );
    });
}
