//! The control panel in a real headless browser (Debian's `chromium` and `chromium-driver`,
//! through WebDriver with `fantoccini`), against `clawless serve` and the fake Bot API and
//! model: signed in as a Mini App (launch data in the URL's fragment, as Telegram opens it)
//! and by the one-time link `/panel` sends; an approval answered from the page resumes the
//! turn once; a memory edit made in the page is what the next turn recalls; the XSS corpus,
//! placed in every field the pages show, runs nothing (no dialog, no request to a canary);
//! a person who is not the owner sees none of the owner's pages; first paint timed; a
//! screenshot of every page. Needs chromium and chromedriver (`.ci/run` installs them):
//! `cargo test -p native --features browser --test browser`. Screenshots go to
//! `$CLAWLESS_SCREENSHOTS` (else the test's temp dir).

#![cfg(feature = "browser")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "browser/web.rs"]
mod web;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::scenarios::{self, launch_data, launch_data_named};
use clawless_testkit::servers::{fakes, text_update};
use common::bot::{post_update, start_bot_with, Bot, Serve, SECRET, TOKEN};
use fantoccini::Locator;
use serde_json::{json, Value};
use web::{browser, canary, driver, enc, no_dialog, open_tab, shot, text_of, wait_for};

const OTHER_ID: i64 = OWNER_ID + 1;

/// The owner's launch data with `name` as their first name, as the page's URL fragment.
fn mini_app_url(bot: &Bot, user: i64, name: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let init = launch_data_named(TOKEN, user, now, name);
    let theme = json!({"bg_color": "#17212b", "text_color": "#f5f5f5", "hint_color": "#708499",
        "button_color": "#5288c1", "button_text_color": "#ffffff", "secondary_bg_color": "#232e3c",
        "link_color": "#6ab3f3"});
    format!(
        "{}/app/#tgWebAppData={}&tgWebAppVersion=8.0&tgWebAppPlatform=android&tgWebAppThemeParams={}",
        bot.url,
        enc(&init),
        enc(&theme.to_string())
    )
}

/// A panel API call as the owner's Mini App makes it.
async fn api(bot: &Bot, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let r = reqwest::Client::new()
        .request(method, format!("{}{path}", bot.url))
        .header(
            "authorization",
            format!("tma {}", launch_data(TOKEN, OWNER_ID, now)),
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
async fn until_listed(bot: &Bot, path: &str, field: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = api(bot, reqwest::Method::GET, path, Value::Null).await;
        if v[field].as_array().map_or(0, Vec::len) >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{path}: fewer than {n} {field}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the page has signed in (its tabs shown).
async fn signed_in(c: &fantoccini::Client, what: &str) {
    wait_for(c, what, || async {
        c.execute("return !document.getElementById('tabs').hidden", vec![])
            .await
            .unwrap()
            == json!(true)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_in_a_real_browser() {
    let (f, tg, llm) = fakes().await;
    let (canary, hits) = canary().await;
    let xss = clawless_testkit::xss::corpus(&canary);
    let data = common::temp_dir("browser");
    let config = data.join("config");
    fixtures::asking_config(&config);
    let users = format!("{OWNER_ID},{OTHER_ID}");
    let how = Serve {
        env: &[
            ("TELEGRAM_ALLOWED_USERS", &users),
            ("CLAWLESS_CONFIG", config.to_str().unwrap()),
            ("CLAWLESS_PUBLIC_URL", "https://panel.invalid"),
        ],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm, how).await;

    // The corpus in every field the pages show: a memory file's lines, reminders,
    // a stranger's name (pairing), an approval's arguments (and so the audit trail), the
    // signed-in person's own name.
    let mut lines = String::from("xsscorpus\n");
    for p in &xss {
        lines.push_str(&format!("- xsscorpus {p}\n"));
    }
    let (s, _) = api(
        &bot,
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
    let (s, _) = api(&bot, reqwest::Method::PUT, &path, json!({"text": "x\n"})).await;
    assert_eq!(s, 400);
    let mut id = 100;
    for p in xss.iter().take(3) {
        id += 1;
        let args = json!({"action": "create", "in_minutes": 600, "text": p});
        post_update(
            &bot,
            &text_update(id, &format!("schedule: {args}")),
            Some(SECRET),
        )
        .await;
    }
    let mut stranger = fixtures::update("stranger_private", 150);
    stranger["message"]["from"]["first_name"] = json!(xss[1]);
    post_update(&bot, &stranger, Some(SECRET)).await;
    until_listed(&bot, "/api/reminders", "reminders", 3).await;
    // Last, the approval: a later message in the chat would supersede it.
    post_update(
        &bot,
        &text_update(200, &format!("remember: {}", xss[0])),
        Some(SECRET),
    )
    .await;
    until_listed(&bot, "/api/approvals", "approvals", 1).await;

    let driver = driver().await;

    // 1. Inside Telegram: the Mini App, cold browser. First paint timed.
    let c = browser(&driver).await;
    let owner_name = xss[2].clone();
    c.goto(&mini_app_url(&bot, OWNER_ID, &owner_name))
        .await
        .unwrap();
    signed_in(&c, "the tabs").await;
    let paint: Value = c
        .execute("const p = performance.getEntriesByName('first-contentful-paint')[0] || performance.getEntriesByName('first-paint')[0]; return p ? p.startTime : null;", vec![])
        .await
        .unwrap();
    let paint = paint.as_f64().expect("a paint timing");
    println!("panel first contentful paint, cold browser on loopback: {paint:.0} ms");
    assert!(paint < 200.0, "first paint {paint} ms");
    assert!(
        text_of(&c).await.contains(&owner_name),
        "the name is shown, as text"
    );
    // The fragment is gone from the address bar once read.
    let url = c.current_url().await.unwrap();
    assert!(url.fragment().is_none(), "{url}");
    shot(&c, "memory").await;

    // Every page, with the corpus in it.
    c.find(Locator::Css("#view input[type=search]"))
        .await
        .unwrap()
        .send_keys("xsscorpus")
        .await
        .unwrap();
    c.find(Locator::Css("#view form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&c, "search results", || async {
        text_of(&c).await.contains("score")
    })
    .await;
    assert!(
        text_of(&c).await.contains("<script>alert(1)</script>"),
        "payloads shown as text"
    );
    shot(&c, "memory-search").await;
    for tab in [
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
        shot(&c, tab).await;
        no_dialog(&c).await;
    }
    open_tab(&c, "reminders").await;
    assert!(
        text_of(&c).await.contains(&xss[0]),
        "a reminder's text shown as text"
    );
    open_tab(&c, "conversations").await;
    c.find(Locator::XPath(
        "//div[contains(@class,'card')][.//div[text()='main:111111111']]/button",
    ))
    .await
    .unwrap()
    .click()
    .await
    .unwrap();
    wait_for(&c, "the conversation", || async {
        text_of(&c).await.contains("Tool said:")
    })
    .await;
    assert!(
        text_of(&c).await.contains(&xss[0]),
        "what was said, shown as text"
    );
    shot(&c, "conversation").await;
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
    c.find(Locator::XPath("//button[text()='Allow once']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
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
    c.find(Locator::XPath(
        "//div[contains(@class,'card')][span[text()='MEMORY.md']]/button",
    ))
    .await
    .unwrap()
    .click()
    .await
    .unwrap();
    wait_for(&c, "the editor", || async {
        c.find(Locator::Css("textarea")).await.is_ok()
    })
    .await;
    shot(&c, "memory-file").await;
    let area = c.find(Locator::Css("textarea")).await.unwrap();
    area.clear().await.unwrap();
    area.send_keys("- My favourite tea is genmaicha, brewed at 80 degrees.\n")
        .await
        .unwrap();
    c.find(Locator::XPath("//button[text()='Save']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&c, "saved", || async {
        text_of(&c).await.contains("Saved.")
    })
    .await;
    post_update(
        &bot,
        &text_update(300, "Which tea is my favourite? genmaicha?"),
        Some(SECRET),
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
    post_update(&bot, &panel, Some(SECRET)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let link = loop {
        if let Some(l) = scenarios::panel_link(&f, OWNER_ID) {
            break l;
        }
        assert!(Instant::now() < deadline, "no link");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let link = link.replace("https://panel.invalid", &bot.url);
    let c = browser(&driver).await;
    c.goto(&link).await.unwrap();
    shot(&c, "sign-in").await;
    c.find(Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    signed_in(&c, "signed in by link").await;
    assert!(text_of(&c).await.contains("owner"));
    // The link again: used.
    c.goto(&link).await.unwrap();
    c.find(Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&c, "refused", || async {
        text_of(&c).await.contains("used already")
    })
    .await;
    c.close().await.unwrap();

    // 5. Another allowed person sees none of the owner's pages.
    let c = browser(&driver).await;
    c.goto(&mini_app_url(&bot, OTHER_ID, "Pat")).await.unwrap();
    signed_in(&c, "the other person's tabs").await;
    let visible: Value = c
        .execute("return [...document.querySelectorAll('#tabs button')].filter(b => !b.hidden).map(b => b.dataset.tab)", vec![])
        .await
        .unwrap();
    assert_eq!(
        visible,
        json!(["memory", "conversations", "reminders", "usage", "account"])
    );
    let text = text_of(&c).await;
    assert!(
        !text.contains("xsscorpus") && !text.contains("genmaicha"),
        "{text}"
    );
    shot(&c, "not-the-owner").await;
    c.close().await.unwrap();
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a payload reached the canary"
    );
}
