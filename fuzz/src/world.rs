//! `World`: a fresh `App` on in-memory ports per input (so a crash replays from its input
//! alone, and nothing piles up over millions of runs), with the embedded config, a fake Bot API
//! that answers like Telegram and records every call that breaks the spec or sends HTML
//! Telegram could not parse, and a fake model that plays the answers the input scripts, then
//! echoes the user.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use clawless_core::{App, Config, ConfigError, Drained, Env, Lane};
use clawless_platform::{FakeClock, FakeHttp, HttpRequest, HttpResponse, Platform};
use clawless_testkit::fixtures::{BOT_ID, BOT_USERNAME, OWNER_ID};
use clawless_testkit::spec::{call_body, method_of, spec};
use futures::executor::block_on;
use serde_json::{json, Value};

use crate::html::check_html;

pub const TOKEN: &str = "123456:FUZZ-TOKEN";
pub const SECRET: &str = "fuzz-s3cret";
pub const LLM: &str = "http://llm.fuzz";
pub const BOT_API: &str = "https://api.telegram.org/bot";

/// The model's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

/// One scripted model answer: HTTP status and body.
pub type Answer = (u16, Vec<u8>);

pub struct World {
    pub app: App,
    pub http: Arc<FakeHttp>,
    pub clock: Arc<FakeClock>,
    /// Bot API calls Telegram would have refused, with why.
    pub violations: Arc<Mutex<Vec<String>>>,
}

/// The embedded config, loaded once per process.
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::load(&clawless_core::config::embedded()).unwrap())
}

impl World {
    /// A world with the embedded config.
    pub fn new(wire: Wire, script: Vec<Answer>) -> World {
        Self::with_config(config().clone(), wire, script).unwrap()
    }

    pub fn with_config(
        config: Config,
        wire: Wire,
        script: Vec<Answer>,
    ) -> Result<World, ConfigError> {
        let (platform, clock, http) = Platform::in_memory();
        let mut env = Env::from_pairs([
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
            ("TELEGRAM_WEBHOOK_SECRET", SECRET.to_string()),
            ("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string()),
        ]);
        match wire {
            Wire::Anthropic => {
                env.set("ANTHROPIC_API_KEY", "sk-ant-fuzz");
                env.set("ANTHROPIC_BASE_URL", LLM);
            }
            Wire::OpenAi => {
                env.set("OPENAI_API_KEY", "sk-openai-fuzz");
                env.set("OPENAI_BASE_URL", format!("{LLM}/v1"));
            }
        }
        let app = App::new(platform, config, &env, "fuzz")?;
        let violations: Arc<Mutex<Vec<String>>> = Arc::default();
        let script = Mutex::new(VecDeque::from(script));
        http.route(LLM, move |req| {
            Ok(match script.lock().unwrap().pop_front() {
                Some((status, body)) => {
                    HttpResponse::new(status, body).with_header("retry-after", "1")
                }
                None => echo(wire, req),
            })
        });
        let seen = violations.clone();
        let counter = Mutex::new(1000i64);
        http.route(format!("{BOT_API}{TOKEN}/"), move |req| {
            let method = method_of(&req.url).unwrap_or("").to_owned();
            let body = call_body(req.header_value("content-type"), &req.body);
            if let Err(v) = check_call(&method, &body) {
                seen.lock().unwrap().push(v.clone());
                return Ok(HttpResponse::json(
                    400,
                    &json!({"ok": false, "error_code": 400, "description": format!("Bad Request: {v}")}),
                ));
            }
            let result = match method.as_str() {
                "getMe" => {
                    json!({"id": BOT_ID, "is_bot": true, "first_name": "Clawless", "username": BOT_USERNAME})
                }
                "sendMessage" | "sendDocument" => {
                    let mut n = counter.lock().unwrap();
                    *n += 1;
                    json!({"message_id": *n, "date": 1, "chat": {"id": body["chat_id"], "type": "private"}})
                }
                _ => json!(true),
            };
            Ok(HttpResponse::json(200, &json!({"ok": true, "result": result})))
        });
        Ok(World {
            app,
            http,
            clock,
            violations,
        })
    }

    /// Drains `lane` until it is idle, letting the clock run to each retry; `false` when it is
    /// still not idle after 16 rounds.
    pub fn drain(&self, lane: &Lane) -> bool {
        for _ in 0..16 {
            match block_on(self.app.drain(lane)).expect("in-memory storage never fails") {
                Drained::Idle => return true,
                Drained::RetryAt(at) => self.advance_to(at),
                Drained::Busy => panic!("nobody else holds the lane"),
                Drained::HandOff => panic!("nothing limits this drain"),
            }
        }
        false
    }

    /// Lets the fake clock run to `at_ms` (a retry's due time).
    pub fn advance_to(&self, at_ms: u64) {
        use clawless_platform::Clock;
        let now = self.clock.now_ms();
        self.clock
            .advance(Duration::from_millis(at_ms.saturating_sub(now)));
    }

    /// The Bot API calls made: `(method, body)`.
    pub fn bot_calls(&self) -> Vec<(String, Value)> {
        self.http
            .requests()
            .iter()
            .filter(|r| r.url.starts_with(BOT_API))
            .map(|r| {
                let method = method_of(&r.url).unwrap_or("").to_owned();
                (method, call_body(r.header_value("content-type"), &r.body))
            })
            .collect()
    }

    /// How many requests went to the model.
    pub fn model_calls(&self) -> usize {
        self.http
            .requests()
            .iter()
            .filter(|r| r.url.starts_with(LLM))
            .count()
    }
}

/// What Telegram would refuse: the spec, and for HTML messages, HTML it cannot parse or that
/// shows nothing.
fn check_call(method: &str, body: &Value) -> Result<(), String> {
    spec().check_call(method, body)?;
    if method == "sendMessage" && body["parse_mode"] == "HTML" {
        let text = body["text"].as_str().unwrap_or("");
        check_html(text).map_err(|e| format!("can't parse entities: {e}"))?;
        if clawless_core::telegram::render::strip_html(text)
            .trim()
            .is_empty()
        {
            return Err("message text is empty".into());
        }
    }
    Ok(())
}

/// A final answer that repeats the last user text of `req` (so the input reaches the
/// renderer), in `wire`'s format.
fn echo(wire: Wire, req: &HttpRequest) -> HttpResponse {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let text = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let answer = match wire {
        Wire::Anthropic => clawless_testkit::llm::anthropic_text(&text),
        Wire::OpenAi => clawless_testkit::llm::openai_text(&text),
    };
    HttpResponse::json(200, &answer)
}
