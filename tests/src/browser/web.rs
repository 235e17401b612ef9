//! The browser test's tools: chromedriver, a headless chromium the size of a phone, a canary
//! server, screenshots, and waiting on the page.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// chromedriver on a free port, killed when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn driver() -> Driver {
    let port = free_port();
    let bin = std::env::var("CLAWLESS_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    // Chromium's profile and scoped directories go under the test's scratch directory (a
    // killed driver leaves them behind; the next run sweeps them).
    let child = Command::new(bin)
        .arg(format!("--port={port}"))
        .env("TMPDIR", crate::scratch::dir("chromium"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (apt install chromium-driver)");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{url}/status")).await.is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Driver { child, url }
}

/// A fresh headless browser the size of a phone: no cookies, no cache.
pub async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": std::env::var("CLAWLESS_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=412,915", "--force-device-scale-factor=1"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

/// An HTTP server that counts every connection: what a payload that ran would reach.
pub async fn canary() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    (url, hits)
}

pub fn shots_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("CLAWLESS_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("clawless-panel-screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(shots_dir().join(format!("{name}.png")), png).unwrap();
}

/// Clicks the element `at`.
pub async fn click(c: &Client, at: Locator<'_>) {
    c.find(at).await.unwrap().click().await.unwrap();
}

/// Opens tab `name` and waits until its heading or list is drawn.
pub async fn open_tab(c: &Client, name: &str) {
    click(c, Locator::Css(&format!("#tabs button[data-tab='{name}']"))).await;
    wait_for(c, &format!("the {name} tab"), || async {
        let busy: Value = c
            .execute("return document.querySelector('#view h2, #view .card, #view form') !== null && document.querySelector(\"#tabs button[aria-current='page']\").dataset.tab === arguments[0];", vec![json!(name)])
            .await
            .unwrap();
        busy == json!(true)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
}

pub async fn wait_for<F, Fut>(c: &Client, what: &str, cond: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond().await {
        if Instant::now() > deadline {
            let text = c
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            panic!("{what}: not within 20 s; the page says: {text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn text_of(c: &Client) -> String {
    c.execute("return document.body.innerText", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// No dialog is open (an `alert` that ran would hold one).
pub async fn no_dialog(c: &Client) {
    assert!(c.get_alert_text().await.is_err(), "a dialog opened");
}

/// Percent-encodes all but unreserved characters.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits until the page has signed in (its tabs shown).
pub async fn signed_in(c: &Client, what: &str) {
    wait_for(c, what, || async {
        c.execute(
            "const t = document.getElementById('tabs'); return !!t && !t.hidden",
            vec![],
        )
        .await
        .unwrap()
            == json!(true)
    })
    .await;
}
