//! The binary as a `Shell` of the shared scenarios (`clawless_testkit::scenarios`): over its
//! webhook, and long polling.

use std::sync::Arc;

use clawless_testkit::scenarios::{Shell, Status};
use clawless_testkit::servers::Fakes;

use super::bot::{post_body, Bot, SECRET};

/// The binary as a [`Shell`] for the shared scenarios.
pub struct Native {
    pub bot: Bot,
    pub f: Arc<Fakes>,
}

impl Shell for Native {
    fn name(&self) -> &str {
        "native"
    }
    fn fakes(&self) -> &Fakes {
        &self.f
    }
    fn secret(&self) -> &str {
        SECRET
    }
    fn post<'a>(&'a self, body: String, secret: Option<&'a str>) -> Status<'a> {
        Box::pin(post_body(&self.bot, body, secret))
    }
    fn logs(&self) -> Vec<String> {
        self.bot.logs()
    }
}

/// `clawless` long polling as a [`Shell`]: what a webhook would have received is handed out
/// by the fake Bot API's getUpdates instead.
pub struct Polling {
    pub bot: Bot,
    pub f: Arc<Fakes>,
}

impl Shell for Polling {
    fn name(&self) -> &str {
        "native long polling"
    }
    fn fakes(&self) -> &Fakes {
        &self.f
    }
    fn secret(&self) -> &str {
        SECRET
    }
    fn post<'a>(&'a self, body: String, _secret: Option<&'a str>) -> Status<'a> {
        Box::pin(async move {
            let update = serde_json::from_str(&body).expect("an update");
            self.f.updates.lock().unwrap().push(update);
            200
        })
    }
    fn logs(&self) -> Vec<String> {
        self.bot.logs()
    }
    fn skip(&self, scenario: &str) -> Option<&'static str> {
        match scenario {
            "a_wrong_secret_is_refused" => Some("long polling has no webhook secret"),
            "unhandled_updates_are_acknowledged" => {
                Some("getUpdates hands out updates, never a raw body that is not JSON")
            }
            _ => None,
        }
    }
}
