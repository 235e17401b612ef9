//! The one-time browser link: `/panel` sends it, it signs in once and expires, its cookie's
//! changes need the CSRF token, and signing out holds on the server (a replayed cookie, a
//! link made before "sign out everywhere").

use futures::executor::block_on;
use serde_json::json;

use super::support::Harness;
use super::{harness, json_of, OTHER_ID, PUBLIC};
use clawless_core::panel::{PanelReply, PanelRequest};
use clawless_testkit::fixtures::{self, OWNER_ID};

/// Sends `/panel` from the owner's private chat and returns the token of the browser link.
async fn panel_link(h: &Harness, update_id: i64) -> String {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["text"] = json!("/panel");
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["entities"] = json!([{"type": "bot_command", "offset": 0, "length": 6}]);
    assert_eq!(h.deliver_raw(&u).await, 200);
    let sent = h.calls("sendMessage");
    let last = sent.last().expect("the panel message");
    let rows = last["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("buttons")
        .clone();
    assert_eq!(rows[0][0]["web_app"]["url"], format!("{PUBLIC}/app/"));
    let url = rows[1][0]["url"].as_str().expect("a link").to_owned();
    h.assert_spec_clean();
    url.split("t=").nth(1).expect("a token").to_owned()
}

async fn browser(
    h: &Harness,
    method: &str,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: &str,
) -> PanelReply {
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    h.app
        .panel()
        .serve(PanelRequest {
            method,
            path,
            query,
            cookie: Some(cookie),
            csrf,
            body: body.as_bytes(),
            ..Default::default()
        })
        .await
}

#[test]
fn a_browser_link_signs_in_once_and_changes_need_the_csrf_token() {
    block_on(async {
        let h = harness();
        let token = panel_link(&h, 7).await;
        // Opening the link (or a preview fetching it) uses nothing up.
        for _ in 0..2 {
            let page = h
                .app
                .panel()
                .serve(PanelRequest {
                    method: "GET",
                    path: "/app/login",
                    query: Some(&format!("t={token}")),
                    ..Default::default()
                })
                .await;
            assert_eq!(page.status, 200);
            assert!(page.body.contains(&token));
        }
        let h = &h;
        let post = |t: String| async move {
            let body = format!("t={t}");
            h.app
                .panel()
                .serve(PanelRequest {
                    method: "POST",
                    path: "/app/login",
                    body: body.as_bytes(),
                    ..Default::default()
                })
                .await
        };
        let r = post(token.clone()).await;
        assert_eq!(r.status, 303, "{}", r.body);
        let set = r
            .headers
            .iter()
            .find(|(n, _)| *n == "set-cookie")
            .expect("a cookie")
            .1
            .clone();
        for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(set.contains(attr), "{set}");
        }
        let cookie = set.split(';').next().unwrap().to_owned();
        // Used once: the second post, and a token never sent, are refused.
        assert_eq!(post(token.clone()).await.status, 401);
        assert_eq!(post("A".repeat(32)).await.status, 401);

        let me = browser(h, "GET", "/api/me", &cookie, None, "").await;
        assert_eq!(me.status, 200, "{}", me.body);
        let csrf = json_of(&me)["csrf"]
            .as_str()
            .expect("a CSRF token")
            .to_owned();
        let put = r#"{"text": "- likes green tea\n"}"#;
        let path = "/api/memory/file?agent=assistant&path=MEMORY.md";
        // A change without the token, or with another: refused, nothing written.
        assert_eq!(
            browser(h, "PUT", path, &cookie, None, put).await.status,
            403
        );
        assert_eq!(
            browser(h, "PUT", path, &cookie, Some("wrong"), put)
                .await
                .status,
            403
        );
        assert_eq!(browser(h, "GET", path, &cookie, None, "").await.status, 404);
        let r = browser(h, "PUT", path, &cookie, Some(&csrf), put).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let r = browser(h, "GET", path, &cookie, None, "").await;
        assert_eq!(json_of(&r)["text"], "- likes green tea\n");
        // What the page wrote is what search (and so recall) finds.
        let r = browser(h, "GET", "/api/memory?q=green%20tea", &cookie, None, "").await;
        let hits = json_of(&r)["hits"].as_array().cloned().unwrap_or_default();
        assert!(
            hits.iter()
                .any(|h| h["text"].as_str().unwrap_or("").contains("green tea")),
            "{}",
            r.body
        );

        // A tampered cookie is nobody's.
        let tampered = cookie.replace(&OWNER_ID.to_string(), &OTHER_ID.to_string());
        assert_eq!(
            browser(h, "GET", "/api/me", &tampered, None, "")
                .await
                .status,
            401
        );
        // Sign out everywhere (with the token) ends the session.
        let r = browser(
            h,
            "POST",
            "/api/signout",
            &cookie,
            Some(&csrf),
            r#"{"everywhere":true}"#,
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(
            browser(h, "GET", "/api/me", &cookie, None, "").await.status,
            401
        );
    });
}

#[test]
fn a_link_expires_after_ten_minutes() {
    block_on(async {
        let h = harness();
        let token = panel_link(&h, 8).await;
        h.clock.advance(std::time::Duration::from_secs(601));
        let body = format!("t={token}");
        let r = h
            .app
            .panel()
            .serve(PanelRequest {
                method: "POST",
                path: "/app/login",
                body: body.as_bytes(),
                ..Default::default()
            })
            .await;
        assert_eq!(r.status, 401);
    });
}

/// Posts a link's token to the sign-in page, as its button does.
async fn sign_in(h: &Harness, token: &str) -> PanelReply {
    let body = format!("t={token}");
    h.app
        .panel()
        .serve(PanelRequest {
            method: "POST",
            path: "/app/login",
            body: body.as_bytes(),
            ..Default::default()
        })
        .await
}

/// The `name=value` of the cookie a sign-in set.
fn cookie_set(r: &PanelReply) -> String {
    let (_, set) = r
        .headers
        .iter()
        .find(|(n, _)| *n == "set-cookie")
        .expect("a cookie");
    set.split(';').next().unwrap().to_owned()
}

/// The CSRF token `/api/me` gives a browser session.
async fn csrf_of(h: &Harness, cookie: &str) -> String {
    let me = browser(h, "GET", "/api/me", cookie, None, "").await;
    assert_eq!(me.status, 200, "{}", me.body);
    json_of(&me)["csrf"]
        .as_str()
        .expect("a CSRF token")
        .to_owned()
}

#[test]
fn signing_out_refuses_the_cookie_replayed_and_links_made_before_everywhere() {
    block_on(async {
        let h = harness();
        let h = &h;
        let r = sign_in(h, &panel_link(h, 20).await).await;
        assert_eq!(r.status, 303, "{}", r.body);
        let first = cookie_set(&r);
        let csrf = csrf_of(h, &first).await;
        let r = browser(h, "POST", "/api/signout", &first, Some(&csrf), "{}").await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(cookie_set(&r).ends_with('='), "the browser forgets it");
        // The same cookie replayed (kept by another tab, copied, stolen): refused.
        for path in ["/api/me", "/api/memory"] {
            assert_eq!(browser(h, "GET", path, &first, None, "").await.status, 401);
        }

        // A second browser, and a link made but not used yet; then "sign out everywhere".
        h.clock.advance(std::time::Duration::from_secs(1));
        let second = cookie_set(&sign_in(h, &panel_link(h, 21).await).await);
        let unused = panel_link(h, 22).await;
        h.clock.advance(std::time::Duration::from_secs(1));
        let csrf = csrf_of(h, &second).await;
        let everywhere = r#"{"everywhere":true}"#;
        let r = browser(h, "POST", "/api/signout", &second, Some(&csrf), everywhere).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            browser(h, "GET", "/api/me", &second, None, "").await.status,
            401
        );
        let r = sign_in(h, &unused).await;
        assert_eq!(r.status, 401, "{}", r.body);
        assert!(
            r.body.contains("before you signed out everywhere"),
            "{}",
            r.body
        );
        assert!(!r.headers.iter().any(|(n, _)| *n == "set-cookie"));

        // A link asked for afterwards signs in, and the one signed out before stays out.
        h.clock.advance(std::time::Duration::from_secs(1));
        let r = sign_in(h, &panel_link(h, 23).await).await;
        assert_eq!(r.status, 303, "{}", r.body);
        let fresh = cookie_set(&r);
        csrf_of(h, &fresh).await;
        assert_eq!(
            browser(h, "GET", "/api/me", &first, None, "").await.status,
            401
        );
    });
}
