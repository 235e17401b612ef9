//! The control panel in a real headless browser (Debian's `chromium` and `chromium-driver`,
//! through WebDriver with `fantoccini`), for any shell serving it: signed in as a Mini App
//! (launch data in the URL's fragment, as Telegram opens it) and by the one-time link
//! `/panel` sends; an approval answered from the page resumes the turn once; a memory edit made
//! in the page is what the next turn recalls; the XSS corpus ([`crate::xss`]), placed in every
//! field the pages show, runs nothing (no dialog, no request to a canary); a person who is not
//! the owner sees none of the owner's pages; first paint timed; a screenshot of every page in
//! `$CLAWLESS_SCREENSHOTS` (else the system's temp dir). The shell runs the asking config
//! ([`crate::fixtures::asking_config`]) with [`OWNER_ID`] and [`OTHER_ID`] allowed and
//! `CLAWLESS_PUBLIC_URL` = [`PUBLIC`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::{json, Value};

mod web;

use web::{
    browser, canary, click, driver, enc, no_dialog, open_tab, shot, signed_in, text_of, wait_for,
};

use crate::fixtures::{self, OWNER_ID};
use crate::scenarios::{launch_data, launch_data_named, Shell};
use crate::servers::text_update;

/// An allowed person who is not the owner.
pub const OTHER_ID: i64 = OWNER_ID + 1;
/// The `CLAWLESS_PUBLIC_URL` the shell runs with (the link's host is swapped for the shell's).
pub const PUBLIC: &str = "https://panel.invalid";

/// Posts `update` to the shell's webhook with its secret.
async fn post(shell: &dyn Shell, update: &Value) {
    let status = shell.post(update.to_string(), Some(shell.secret())).await;
    assert_eq!(status, 200, "posting {update}");
}

/// The owner's launch data with `name` as their first name, as the page's URL fragment.
fn mini_app_url(base: &str, token: &str, user: i64, name: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let init = launch_data_named(token, user, now, name);
    let theme = json!({"bg_color": "#17212b", "text_color": "#f5f5f5", "hint_color": "#708499",
        "button_color": "#5288c1", "button_text_color": "#ffffff", "secondary_bg_color": "#232e3c",
        "link_color": "#6ab3f3"});
    format!(
        "{}/app/#tgWebAppData={}&tgWebAppVersion=8.0&tgWebAppPlatform=android&tgWebAppThemeParams={}",
        base,
        enc(&init),
        enc(&theme.to_string())
    )
}

/// A panel API call as the owner's Mini App makes it.
async fn api(
    base: &str,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let r = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header(
            "authorization",
            format!("tma {}", launch_data(token, OWNER_ID, now)),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Waits until the owner's `path` lists at least `n` entries under `field`.
async fn until_listed(base: &str, token: &str, path: &str, field: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = api(base, token, reqwest::Method::GET, path, Value::Null).await;
        if v[field].as_array().map_or(0, Vec::len) >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{path}: fewer than {n} {field}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The whole browser test on `shell`, reached at `base`, whose bot token is `token`;
/// screenshots named `<prefix><page>.png`; the first paint printed (a figure for README, not
/// a check: timings belong in benchmarks, and a loaded CI machine paints late).
pub async fn panel_in_a_browser(shell: &dyn Shell, base: &str, token: &str, prefix: &str) {
    let f = shell.fakes();
    let (canary, hits) = canary().await;
    let xss = crate::xss::corpus(&canary);
    // The corpus in every field the pages show: a memory file's lines, reminders, a
    // message and the model's reply, file names and contents, tool arguments (the audit
    // trail) and results (the conversation), a stranger's name (pairing), an approval's
    // arguments, the signed-in person's own name.
    let mut lines = String::from("xsscorpus\n");
    for p in &xss {
        lines.push_str(&format!("- xsscorpus {p}\n"));
    }
    let (s, _) = api(
        base,
        token,
        reqwest::Method::PUT,
        "/api/memory/file?agent=assistant&path=MEMORY.md",
        json!({"text": lines}),
    )
    .await;
    assert_eq!(s, 200);
    // A file name that is markup is refused (names are letters, digits and `-_. `).
    let path = format!(
        "/api/memory/file?agent=assistant&path=memory%2F{}.md",
        enc(&xss[1])
    );
    let (s, _) = api(
        base,
        token,
        reqwest::Method::PUT,
        &path,
        json!({"text": "x\n"}),
    )
    .await;
    assert_eq!(s, 400);
    // Every payload in a reminder's text, twelve to a reminder.
    for (i, chunk) in xss.chunks(12).enumerate() {
        let args = json!({"action": "create", "in_minutes": 600, "text": chunk.join(" | ")});
        post(
            shell,
            &text_update(101 + i as i64, &format!("schedule: {args}")),
        )
        .await;
    }
    // Every payload said in a message (which the model's reply says back), and written as a
    // file whose name is the payload too (the characters a path refuses made `_`): the
    // calls' arguments reach the audit trail, their results the conversation.
    post(
        shell,
        &text_update(110, &format!("xsscorpus {}", xss.join(" "))),
    )
    .await;
    let names = file_names(&xss);
    let files: Vec<Value> = names
        .iter()
        .zip(&xss)
        .map(|(n, p)| json!({"path": format!("xss/{n}"), "content": p}))
        .collect();
    post(
        shell,
        &text_update(111, &format!("files: {}", Value::from(files))),
    )
    .await;
    let mut stranger = fixtures::update("stranger_private", 150);
    stranger["message"]["from"]["first_name"] = json!(xss[1]);
    post(shell, &stranger).await;
    until_listed(base, token, "/api/reminders", "reminders", 3).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = api(base, token, reqwest::Method::GET, "/api/files", Value::Null).await;
        if v["workspaces"][0]["files"].as_array().map_or(0, Vec::len) == xss.len() {
            break;
        }
        assert!(Instant::now() < deadline, "the files were not written: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Last, the approval (its arguments shown up to 600 characters): a later message in the
    // chat would supersede it.
    post(
        shell,
        &text_update(200, &format!("remember: {}", xss.join(" "))),
    )
    .await;
    until_listed(base, token, "/api/approvals", "approvals", 1).await;

    let driver = driver().await;

    // 1. Inside Telegram: the Mini App, cold browser. First paint timed.
    let c = browser(&driver).await;
    let owner_name = xss[2].clone();
    c.goto(&mini_app_url(base, token, OWNER_ID, &owner_name))
        .await
        .unwrap();
    signed_in(&c, "the tabs").await;
    let paint: Value = c
        .execute("const p = performance.getEntriesByName('first-contentful-paint')[0] || performance.getEntriesByName('first-paint')[0]; return p ? p.startTime : null;", vec![])
        .await
        .unwrap();
    let paint = paint.as_f64().expect("a paint timing");
    println!(
        "{}: panel first contentful paint, cold browser on loopback: {paint:.0} ms",
        shell.name()
    );
    assert!(
        text_of(&c).await.contains(&owner_name),
        "the name is shown, as text"
    );
    // The fragment is gone from the address bar once read.
    let url = c.current_url().await.unwrap();
    assert!(url.fragment().is_none(), "{url}");
    shot(&c, &format!("{prefix}memory")).await;

    // Every page, with the corpus in it.
    c.find(Locator::Css("#view input[type=search]"))
        .await
        .unwrap()
        .send_keys("xsscorpus")
        .await
        .unwrap();
    click(&c, Locator::Css("#view form button")).await;
    wait_for(&c, "search results", || async {
        text_of(&c).await.contains("score")
    })
    .await;
    assert!(
        text_of(&c).await.contains("<script>alert(1)</script>"),
        "payloads shown as text"
    );
    shot(&c, &format!("{prefix}memory-search")).await;
    for tab in [
        "files",
        "conversations",
        "reminders",
        "usage",
        "approvals",
        "pairing",
        "audit",
        "health",
        "config",
        "account",
    ] {
        open_tab(&c, tab).await;
        shot(&c, &format!("{prefix}{tab}")).await;
        no_dialog(&c).await;
    }
    open_tab(&c, "files").await;
    let text = text_of(&c).await;
    for name in &names {
        assert!(
            text.contains(name.as_str()),
            "file name {name} shown as text"
        );
    }
    click(
        &c,
        Locator::XPath("(//div[contains(@class,'card')]/button)[1]"),
    )
    .await;
    wait_for(&c, "a file", || async {
        c.find(Locator::Css("#view pre")).await.is_ok()
    })
    .await;
    let shown = c
        .execute(
            "return document.querySelector('#view pre').textContent",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        xss.iter().any(|p| shown == json!(p)),
        "a file's content shown as text: {shown}"
    );
    shot(&c, &format!("{prefix}file")).await;
    no_dialog(&c).await;
    open_tab(&c, "reminders").await;
    assert!(
        text_of(&c).await.contains(&xss[0]),
        "a reminder's text shown as text"
    );
    open_tab(&c, "conversations").await;
    click(
        &c,
        Locator::XPath("//div[contains(@class,'card')][.//div[text()='main:111111111']]/button"),
    )
    .await;
    wait_for(&c, "the conversation", || async {
        text_of(&c).await.contains("Tool said:")
    })
    .await;
    assert!(
        text_of(&c).await.contains(&xss[0]),
        "what was said, shown as text"
    );
    shot(&c, &format!("{prefix}conversation")).await;
    no_dialog(&c).await;
    open_tab(&c, "pairing").await;
    assert!(
        text_of(&c).await.contains("onerror"),
        "the stranger's name shown as text"
    );

    // 2. The approval, answered from the page: the turn resumes once.
    open_tab(&c, "approvals").await;
    let said = || {
        f.sent_to(OWNER_ID)
            .iter()
            .filter(|t| t.starts_with("Tool said:"))
            .count()
    };
    let before = said();
    click(&c, Locator::XPath("//button[text()='Allow once']")).await;
    wait_for(&c, "the resumed answer", || async { said() > before }).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(said(), before + 1, "answered once");
    let edits = f
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, b)| {
            m == "editMessageText" && b["text"].as_str().unwrap_or("").contains("from the panel")
        })
        .count();
    assert_eq!(edits, 1);

    // 3. A memory edit made in the page is what the next turn recalls.
    open_tab(&c, "memory").await;
    click(
        &c,
        Locator::XPath("//div[contains(@class,'card')][span[text()='MEMORY.md']]/button"),
    )
    .await;
    wait_for(&c, "the editor", || async {
        c.find(Locator::Css("textarea")).await.is_ok()
    })
    .await;
    shot(&c, &format!("{prefix}memory-file")).await;
    let area = c.find(Locator::Css("textarea")).await.unwrap();
    area.clear().await.unwrap();
    area.send_keys("- My favourite tea is genmaicha, brewed at 80 degrees.\n")
        .await
        .unwrap();
    click(&c, Locator::XPath("//button[text()='Save']")).await;
    wait_for(&c, "saved", || async {
        text_of(&c).await.contains("Saved.")
    })
    .await;
    post(
        shell,
        &text_update(300, "Which tea is my favourite? genmaicha?"),
    )
    .await;
    wait_for(&c, "the question answered", || async {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t.contains("Which tea is my favourite"))
    })
    .await;
    let recalled = f
        .llm_requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.to_string().contains("Which tea is my favourite"))
        .any(|r| r.to_string().contains("brewed at 80 degrees"));
    assert!(recalled, "the edited note is recalled into the next turn");

    // Every payload as the signed-in person's name (Telegram's 64 characters of it).
    for p in &xss {
        let name: String = p.chars().take(64).collect();
        // From another page, so the fragment is a new load rather than a jump.
        c.goto("about:blank").await.unwrap();
        c.goto(&mini_app_url(base, token, OWNER_ID, &name))
            .await
            .unwrap();
        signed_in(&c, "signed in under a payload's name").await;
        let who = c
            .execute("return document.getElementById('who').textContent", vec![])
            .await
            .unwrap();
        let who = who.as_str().unwrap_or_default();
        assert!(who.starts_with(&name), "{who:?} shows {name:?} as text");
        no_dialog(&c).await;
    }

    // Nothing of the corpus ran, anywhere.
    no_dialog(&c).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a payload reached the canary"
    );
    c.close().await.unwrap();

    // 4. In a browser, by the one-time link /panel sends.
    let mut panel = text_update(400, "/panel");
    panel["message"]["message_id"] = json!(4000);
    post(shell, &panel).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let link = loop {
        if let Some(l) = crate::scenarios::panel_link(f, OWNER_ID) {
            break l;
        }
        assert!(Instant::now() < deadline, "no link");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let link = link.replace(PUBLIC, base);
    let c = browser(&driver).await;
    c.goto(&link).await.unwrap();
    shot(&c, &format!("{prefix}sign-in")).await;
    click(&c, Locator::Css("button[type=submit]")).await;
    signed_in(&c, "signed in by link").await;
    assert!(text_of(&c).await.contains("owner"));
    // The link again: used.
    c.goto(&link).await.unwrap();
    click(&c, Locator::Css("button[type=submit]")).await;
    wait_for(&c, "refused", || async {
        text_of(&c).await.contains("used already")
    })
    .await;
    c.close().await.unwrap();

    // 5. Another allowed person sees none of the owner's pages.
    let c = browser(&driver).await;
    c.goto(&mini_app_url(base, token, OTHER_ID, "Pat"))
        .await
        .unwrap();
    signed_in(&c, "the other person's tabs").await;
    let visible: Value = c
        .execute("return [...document.querySelectorAll('#tabs button')].filter(b => !b.hidden).map(b => b.dataset.tab)", vec![])
        .await
        .unwrap();
    assert_eq!(
        visible,
        json!([
            "memory",
            "files",
            "conversations",
            "reminders",
            "usage",
            "account"
        ])
    );
    let text = text_of(&c).await;
    assert!(
        !text.contains("xsscorpus") && !text.contains("genmaicha"),
        "{text}"
    );
    shot(&c, &format!("{prefix}not-the-owner")).await;
    c.close().await.unwrap();
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a payload reached the canary"
    );
}

/// A file name of each payload: `:`, `/` and `\` (which a path refuses or splits at) and
/// text-direction controls made `_`, at most 120 bytes.
fn file_names(xss: &[String]) -> Vec<String> {
    xss.iter()
        .map(|p| {
            let mut n = String::new();
            for c in p.chars() {
                let c = if matches!(c, ':' | '/' | '\\' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                    '_'
                } else {
                    c
                };
                if n.len() + c.len_utf8() > 120 {
                    break;
                }
                n.push(c);
            }
            n
        })
        .collect()
}
