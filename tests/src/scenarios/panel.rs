//! The control panel over each shell's own HTTP (`/app/...`, `/api/...`): sign-in both ways
//! (Telegram's launch data, signed here independently of the core; the one-time link `/panel`
//! sends), the forged and expired launch data, the reused link, the CSRF token on changes,
//! and an IDOR corpus: a person asking for the owner's pages, memory and reminders.

use std::future::Future;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::Shell;
use crate::fixtures::OWNER_ID;
use crate::servers::{text_update_from, Fakes};

/// The allowed person the panel scenario signs in as (in [`super::allowed_users`]).
pub const PANEL_USER: i64 = OWNER_ID + 90;

/// One request to the panel.
#[derive(Debug, Clone)]
pub struct PanelCall {
    pub method: &'static str,
    /// Path and query.
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

/// Its answer (redirects not followed).
#[derive(Debug, Clone)]
pub struct PanelAnswer {
    pub status: u16,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl PanelAnswer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// The one-time browser link the bot's `/panel` answer sent to `chat`, if it was sent.
pub fn panel_link(f: &Fakes, chat: i64) -> Option<String> {
    f.sent()
        .iter()
        .filter(|b| b["chat_id"] == chat)
        .flat_map(|b| {
            b["reply_markup"]["inline_keyboard"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .find_map(|k| {
            k["url"]
                .as_str()
                .filter(|u| u.contains("/app/login?t="))
                .map(str::to_owned)
        })
}

/// One panel request over HTTP to the shell at `base`, redirects not followed.
pub async fn panel_http(base: &str, c: PanelCall) -> PanelAnswer {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let method = reqwest::Method::from_bytes(c.method.as_bytes()).unwrap();
    let mut req = client
        .request(method, format!("{base}{}", c.path))
        .body(c.body);
    for (name, value) in c.headers {
        req = req.header(name, value);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    PanelAnswer {
        status,
        headers,
        body: r.text().await.unwrap(),
    }
}

/// Launch data Telegram would give bot `token`'s Mini App for `user`, signed at `auth_s`
/// (Telegram's documented construction, written here apart from the core's).
pub fn launch_data(token: &str, user: i64, auth_s: u64) -> String {
    launch_data_named(token, user, auth_s, "Pat")
}

/// [`launch_data`] for a person whose first name is `name`.
pub fn launch_data_named(token: &str, user: i64, auth_s: u64, name: &str) -> String {
    let mut k = <Hmac<Sha256> as KeyInit>::new_from_slice(b"WebAppData").unwrap();
    k.update(token.as_bytes());
    let secret = k.finalize().into_bytes();
    let user_json = json!({"id": user, "first_name": name, "username": "pat"}).to_string();
    let auth = auth_s.to_string();
    let mut fields = [
        ("auth_date", auth.as_str()),
        ("query_id", "AAHdF6IQAAAAAN0XohDhrOrc"),
        ("user", user_json.as_str()),
    ];
    fields.sort();
    let check: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&secret).unwrap();
    m.update(check.join("\n").as_bytes());
    let hash: String = m
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let mut out: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    out.push(format!("hash={hash}"));
    out.join("&")
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The panel scenario on `shell`, whose bot token is `token`, through `send`. The shell runs
/// with `CLAWLESS_PUBLIC_URL` set (the link's host is not used: `send` goes to the shell).
pub async fn panel_over_http<F, Fut>(shell: &dyn Shell, token: &str, send: F)
where
    F: Fn(PanelCall) -> Fut,
    Fut: Future<Output = PanelAnswer>,
{
    let call =
        |method: &'static str, path: &str, headers: Vec<(&'static str, String)>, body: &str| {
            send(PanelCall {
                method,
                path: path.to_owned(),
                headers,
                body: body.to_owned(),
            })
        };
    let tma = |user: i64, at: u64| {
        vec![(
            "authorization",
            format!("tma {}", launch_data(token, user, at)),
        )]
    };
    let now = now_s();

    // The pages themselves.
    let page = call("GET", "/app/", vec![], "").await;
    assert_eq!(page.status, 200, "{}: /app/", shell.name());
    assert!(page.body.contains("/app/panel.js"), "{}", page.body);
    let js = call("GET", "/app/panel.js", vec![], "").await;
    assert_eq!(js.status, 200);
    assert!(js.body.contains("textContent"));

    // Launch data: none, forged, another bot's, expired → 401; a stranger → 403.
    let forged = launch_data(token, PANEL_USER, now).replace("AAHdF6", "AAHdF7");
    for (what, headers) in [
        ("none", vec![]),
        ("forged", vec![("authorization", format!("tma {forged}"))]),
        (
            "another bot's",
            vec![(
                "authorization",
                format!("tma {}", launch_data("1:OTHER", PANEL_USER, now)),
            )],
        ),
        ("expired", tma(PANEL_USER, now - 7200)),
        (
            "a cookie of nothing",
            vec![("cookie", "__Host-clawless=s1.main.1.2.x".into())],
        ),
    ] {
        let r = call("GET", "/api/me", headers, "").await;
        assert_eq!(r.status, 401, "{}: {what}: {}", shell.name(), r.body);
    }
    let r = call(
        "GET",
        "/api/me",
        tma(crate::fixtures::STRANGER_ID - 99, now),
        "",
    )
    .await;
    assert_eq!(r.status, 403, "a stranger: {}", r.body);
    let r = call("GET", "/api/me", tma(PANEL_USER, now), "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["owner"], false);
    assert!(r
        .headers
        .iter()
        .any(|(n, v)| n == "content-security-policy" && v.contains("script-src 'self'")));

    // The owner writes a note; the person reaches none of the owner's.
    let note = "/api/memory/file?agent=assistant&path=memory%2Fpanel.md";
    let r = call(
        "PUT",
        note,
        tma(OWNER_ID, now),
        r#"{"text":"- the owner's locker code is 4711\n"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}: owner's PUT: {}", shell.name(), r.body);
    let r = call("GET", "/api/memory?q=locker%20code", tma(OWNER_ID, now), "").await;
    assert!(
        r.body.contains("4711"),
        "the owner finds their note: {}",
        r.body
    );
    for (method, path, body) in [
        ("GET", "/api/memory", ""),
        ("GET", "/api/memory?q=locker%20code", ""),
        ("GET", note, ""),
        (
            "GET",
            "/api/memory/file?agent=assistant&path=..%2Fu111111111%2Fmemory%2Fpanel.md",
            "",
        ),
        (
            "GET",
            "/api/memory/file?agent=assistant%2Fmain%2Fu111111111&path=memory%2Fpanel.md",
            "",
        ),
        ("DELETE", note, ""),
        ("GET", "/api/files", ""),
        (
            "GET",
            "/api/files/file?agent=assistant&path=..%2Fu111111111%2Fnotes.md",
            "",
        ),
        (
            "DELETE",
            "/api/files/file?agent=assistant%2Fmain%2Fu111111111&path=notes.md",
            "",
        ),
        ("GET", "/api/audit", ""),
        ("GET", "/api/approvals", ""),
        ("GET", "/api/pairing", ""),
        ("GET", "/api/health", ""),
        ("GET", "/api/config", ""),
        ("POST", "/api/pairing/remove", r#"{"user":111111111}"#),
        ("DELETE", "/api/reminders/1", ""),
    ] {
        let r = call(method, path, tma(PANEL_USER, now), body).await;
        assert!(
            [200, 400, 403, 404].contains(&r.status) && !r.body.contains("4711"),
            "{}: {method} {path} as another person: {} {}",
            shell.name(),
            r.status,
            r.body
        );
        if path.starts_with("/api/audit")
            || path.starts_with("/api/approvals")
            || path.starts_with("/api/config")
            || path.starts_with("/api/pairing")
            || path.starts_with("/api/health")
        {
            assert_eq!(r.status, 403, "{method} {path}");
        }
    }
    // The owner's conversation: not the person's to read.
    let r = call(
        "GET",
        &format!("/api/conversations/messages?key=main%3A{OWNER_ID}"),
        tma(PANEL_USER, now),
        "",
    )
    .await;
    assert_eq!(
        r.status,
        404,
        "{}: another's conversation: {}",
        shell.name(),
        r.body
    );
    let r = call("GET", "/api/conversations", tma(PANEL_USER, now), "").await;
    assert_eq!(r.status, 200);
    assert!(!r.body.contains(&OWNER_ID.to_string()), "{}", r.body);
    let r = call("GET", note, tma(OWNER_ID, now), "").await;
    assert!(
        r.body.contains("4711"),
        "the owner's note stays: {}",
        r.body
    );

    // An approval answered from the page: the turn resumes once, the approval message says
    // so, Telegram gets no answerCallbackQuery for it.
    let f = shell.fakes();
    let status = shell
        .post(
            text_update_from(PANEL_USER, 970_002, "remember: panel seat 7").to_string(),
            Some(shell.secret()),
        )
        .await;
    assert_eq!(status, 200);
    let waiting = || async {
        let r = call("GET", "/api/approvals", tma(OWNER_ID, now), "").await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["asker"] == PANEL_USER)
            .cloned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let approval = loop {
        if let Some(a) = waiting().await {
            break a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}: no approval waits",
            shell.name()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(approval["tool"], "memory_write");
    let answer =
        json!({"lane": approval["lane"], "id": approval["id"], "answer": "once"}).to_string();
    let r = call("POST", "/api/approvals", tma(PANEL_USER, now), &answer).await;
    assert_eq!(r.status, 403, "only the owner answers from the panel");
    let r = call("POST", "/api/approvals", tma(OWNER_ID, now), &answer).await;
    assert_eq!(r.status, 202, "{}: {}", shell.name(), r.body);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while f.sent_to(PANEL_USER).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}: not resumed: {:?}",
            shell.name(),
            f.sent_to(PANEL_USER)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = call("POST", "/api/approvals", tma(OWNER_ID, now), &answer).await;
    assert_eq!(again.status, 404, "answered once");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = f.sent_to(PANEL_USER);
    assert!(
        sent.len() == 2 && sent[1].starts_with("Tool said:"),
        "{sent:?}"
    );
    let edits: Vec<Value> = f
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, b)| m == "editMessageText" && b["chat_id"] == PANEL_USER)
        .map(|(_, b)| b.clone())
        .collect();
    assert!(
        edits.len() == 1
            && edits[0]["text"]
                .as_str()
                .unwrap_or("")
                .contains("from the panel"),
        "{edits:?}"
    );
    let to_panel = f
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, b)| {
            m == "answerCallbackQuery"
                && b["callback_query_id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("panel:"))
        })
        .count();
    assert_eq!(
        to_panel, 0,
        "Telegram is not asked to answer the panel's tap"
    );

    // The browser way: /panel in the private chat sends a one-time link.
    let status = shell
        .post(
            text_update_from(PANEL_USER, 970_001, "/panel").to_string(),
            Some(shell.secret()),
        )
        .await;
    assert_eq!(status, 200, "posting /panel");
    let f = shell.fakes();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let link = loop {
        if let Some(link) = panel_link(f, PANEL_USER) {
            break link;
        }
        let to_user: Vec<Value> = f
            .sent()
            .into_iter()
            .filter(|b| b["chat_id"] == PANEL_USER)
            .collect();
        assert!(
            std::time::Instant::now() < deadline,
            "{}: no panel message; sent: {to_user:?}; violations: {:?}; log: {:?}",
            shell.name(),
            f.violations.lock().unwrap(),
            shell.logs().iter().rev().take(15).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let t = link.split("t=").nth(1).unwrap().to_owned();
    let opened = call("GET", &format!("/app/login?t={t}"), vec![], "").await;
    assert_eq!(opened.status, 200);
    let form = vec![(
        "content-type",
        "application/x-www-form-urlencoded".to_owned(),
    )];
    let signed = call("POST", "/app/login", form.clone(), &format!("t={t}")).await;
    assert_eq!(signed.status, 303, "{}: {}", shell.name(), signed.body);
    let set = signed
        .headers
        .iter()
        .find(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v.clone())
        .expect("a session cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("Secure") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let again = call("POST", "/app/login", form, &format!("t={t}")).await;
    assert_eq!(again.status, 401, "a link works once");

    let me = call("GET", "/api/me", vec![("cookie", cookie.clone())], "").await;
    assert_eq!(me.status, 200, "{}", me.body);
    assert_eq!(me.json()["id"], PANEL_USER);
    let csrf = me.json()["csrf"].as_str().expect("a CSRF token").to_owned();
    let mine = "/api/memory/file?agent=assistant&path=MEMORY.md";
    let text = r#"{"text":"- Pat prefers the window seat\n"}"#;
    let no_token = call("PUT", mine, vec![("cookie", cookie.clone())], text).await;
    assert_eq!(no_token.status, 403, "a change without its CSRF token");
    let wrong = call(
        "PUT",
        mine,
        vec![("cookie", cookie.clone()), ("x-csrf-token", "x".into())],
        text,
    )
    .await;
    assert_eq!(wrong.status, 403);
    assert_eq!(
        call("GET", mine, vec![("cookie", cookie.clone())], "")
            .await
            .status,
        404,
        "nothing written"
    );
    let ok = call(
        "PUT",
        mine,
        vec![("cookie", cookie.clone()), ("x-csrf-token", csrf.clone())],
        text,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let read = call("GET", mine, vec![("cookie", cookie.clone())], "").await;
    assert_eq!(read.json()["text"], "- Pat prefers the window seat\n");
    let out = call(
        "POST",
        "/api/signout",
        vec![("cookie", cookie.clone()), ("x-csrf-token", csrf)],
        r#"{"everywhere":true}"#,
    )
    .await;
    assert_eq!(out.status, 200);
    assert_eq!(
        call("GET", "/api/me", vec![("cookie", cookie)], "")
            .await
            .status,
        401,
        "signed out everywhere"
    );
}
