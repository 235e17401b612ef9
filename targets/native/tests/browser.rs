//! The control panel in a real headless browser against `clawless serve`
//! ([`clawless_testkit::browser::panel_in_a_browser`]; first paint printed). Needs
//! chromium and chromedriver (`.ci/run` installs them):
//! `cargo test -p native --features browser --test browser`.

#![cfg(feature = "browser")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use clawless_testkit::browser::{panel_in_a_browser, OTHER_ID, PUBLIC};
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::servers::fakes;
use common::bot::{start_bot_with, Serve, TOKEN};
use common::shells::Native;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_in_a_real_browser() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("browser");
    let config = data.join("config");
    fixtures::asking_config(&config);
    let users = format!("{OWNER_ID},{OTHER_ID}");
    let how = Serve {
        env: &[
            ("TELEGRAM_ALLOWED_USERS", &users),
            ("CLAWLESS_CONFIG", config.to_str().unwrap()),
            ("CLAWLESS_PUBLIC_URL", PUBLIC),
        ],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm, how).await;
    let base = bot.url.clone();
    let native = Native { bot, f };
    panel_in_a_browser(&native, &base, TOKEN, "").await;
}
