//! The control panel in a real headless browser against the Worker in workerd: its pages from
//! static assets (as `wrangler.toml` serves them), its API from the Worker
//! ([`clawless_testkit::browser::panel_in_a_browser`]). Needs chromium and chromedriver,
//! which `.ci/run` installs before the Worker suites.

use clawless_testkit::browser::{panel_in_a_browser, OTHER_ID, PUBLIC};
use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::fakes;
use serde_json::json;

use super::Worker;
use clawless_testkit::miniflare::{bot_vars, Miniflare};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_in_a_real_browser_on_workerd() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["TELEGRAM_ALLOWED_USERS"] = json!(format!("{OWNER_ID},{OTHER_ID}"));
    vars["CLAWLESS_PUBLIC_URL"] = json!(PUBLIC);
    // The test build runs the asking config (memory_write asks first).
    let mf = Miniflare::start("CLAWLESS_WORKER_TEST_BUILD", vars, false);
    let base = mf.url.clone();
    let worker = Worker { mf, f };
    // No first-paint goal here (the goal is native's); it is printed.
    panel_in_a_browser(&worker, &base, "77:WORKER-E2E", "worker-").await;
}
