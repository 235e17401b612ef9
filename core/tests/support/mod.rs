//! The whole-flow harness: the real `App` on in-memory ports, a fake Bot API that checks every
//! call against the spec, and a scripted model.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use clawless_core::inbox::Job;
use clawless_core::{keys, App, Config, Drained, Env, Lane};
use clawless_platform::{FakeClock, FakeHttp, HttpResponse, Platform};
use clawless_testkit::fixtures::{self, BOT_ID, BOT_USERNAME, OWNER_ID};
use clawless_testkit::spec::{call_body, method_of, spec};
use serde_json::{json, Value};

pub mod kill;
pub mod spawn;

pub const TOKEN: &str = "123456:TEST-TOKEN";
pub const SECRET: &str = "webhook-s3cret";
pub const LLM: &str = "http://llm.test";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

pub struct Harness {
    pub app: App,
    pub http: Arc<FakeHttp>,
    pub clock: Arc<FakeClock>,
    pub platform: Platform,
    /// Scripted model answers: (status, body, retry-after).
    pub llm: Arc<Mutex<VecDeque<(u16, Value, Option<String>)>>>,
    /// Scripted sendMessage outcomes, one per call: `None` succeeds, `Some((status, body))`
    /// fails so; once empty, every call succeeds.
    pub tg_script: Arc<Mutex<VecDeque<Option<(u16, Value)>>>>,
    pub violations: Arc<Mutex<Vec<String>>>,
    /// Files the fake Bot API serves (`getFile`, then the download), by file id.
    pub files: Arc<Mutex<std::collections::BTreeMap<String, Vec<u8>>>>,
}

impl Harness {
    pub fn new(wire: Wire) -> Harness {
        Self::with_config(
            wire,
            Config::load(&clawless_core::config::embedded()).unwrap(),
        )
    }

    pub fn with_config(wire: Wire, config: Config) -> Harness {
        Self::with_http(wire, config, |fake, _| fake)
    }

    /// A harness whose app reaches HTTP through `wrap(fake, clock)` (the fake still answers).
    pub fn with_http(
        wire: Wire,
        config: Config,
        wrap: impl FnOnce(Arc<FakeHttp>, Arc<FakeClock>) -> Arc<dyn clawless_platform::Http>,
    ) -> Harness {
        Self::with_ports(wire, config, |platform, http, clock| {
            platform.http = wrap(http, clock);
        })
    }

    /// A harness whose in-memory ports `adjust` may wrap or replace before the app is built.
    pub fn with_ports(
        wire: Wire,
        config: Config,
        adjust: impl FnOnce(&mut Platform, Arc<FakeHttp>, Arc<FakeClock>),
    ) -> Harness {
        Self::build(wire, config, &[], adjust).unwrap()
    }

    /// A harness whose app also has the settings `extra`; `Err` is [`App::new`]'s.
    pub fn with_env(
        wire: Wire,
        config: Config,
        extra: &[(&str, &str)],
    ) -> Result<Harness, clawless_core::ConfigError> {
        Self::build(wire, config, extra, |_, _, _| {})
    }

    /// [`Harness::with_ports`] with the settings `extra`.
    pub fn with_ports_env(
        wire: Wire,
        config: Config,
        extra: &[(&str, &str)],
        adjust: impl FnOnce(&mut Platform, Arc<FakeHttp>, Arc<FakeClock>),
    ) -> Harness {
        Self::build(wire, config, extra, adjust).unwrap()
    }

    fn build(
        wire: Wire,
        config: Config,
        extra: &[(&str, &str)],
        adjust: impl FnOnce(&mut Platform, Arc<FakeHttp>, Arc<FakeClock>),
    ) -> Result<Harness, clawless_core::ConfigError> {
        let (mut platform, clock, http) = Platform::in_memory();
        adjust(&mut platform, http.clone(), clock.clone());
        let mut env = Env::from_pairs([
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
            ("TELEGRAM_WEBHOOK_SECRET", SECRET.to_string()),
            ("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string()),
        ]);
        match wire {
            Wire::Anthropic => {
                env.set("ANTHROPIC_API_KEY", "sk-ant-test");
                env.set("ANTHROPIC_BASE_URL", LLM);
            }
            Wire::OpenAi => {
                env.set("OPENAI_API_KEY", "sk-openai-test");
                env.set("OPENAI_BASE_URL", format!("{LLM}/v1"));
            }
        }
        for &(k, v) in extra {
            env.set(k, v);
        }
        let app = App::new(platform.clone(), config, &env, "test")?;
        let h = Harness {
            app,
            http: http.clone(),
            clock,
            platform,
            llm: Default::default(),
            tg_script: Default::default(),
            violations: Default::default(),
            files: Default::default(),
        };
        h.install_routes();
        Ok(h)
    }

    fn install_routes(&self) {
        let llm = self.llm.clone();
        self.http.route(LLM, move |_req| {
            let next = llm.lock().unwrap().pop_front();
            Ok(match next {
                Some((status, body, retry_after)) => {
                    let mut r = HttpResponse::json(status, &body);
                    if let Some(ra) = retry_after {
                        r = r.with_header("retry-after", ra);
                    }
                    r
                }
                None => HttpResponse::json(500, &json!({"error": "script exhausted"})),
            })
        });
        let files = self.files.clone();
        self.http.route(
            format!("https://api.telegram.org/file/bot{TOKEN}/media/"),
            move |req| {
                let id = req.url.rsplit('/').next().unwrap_or("");
                Ok(match files.lock().unwrap().get(id) {
                    Some(bytes) => HttpResponse::new(200, bytes.clone()),
                    None => HttpResponse::new(404, "not found"),
                })
            },
        );
        let files = self.files.clone();
        let script = self.tg_script.clone();
        let violations = self.violations.clone();
        let counter = Arc::new(Mutex::new(1000i64));
        self.http.route(format!("https://api.telegram.org/bot{TOKEN}/"), move |req| {
            let method = method_of(&req.url).unwrap_or("").to_owned();
            let body = call_body(req.header_value("content-type"), &req.body);
            if let Err(v) = spec().check_call(&method, &body) {
                violations.lock().unwrap().push(v.clone());
                return Ok(HttpResponse::json(400, &json!({"ok": false, "error_code": 400, "description": v})));
            }
            match method.as_str() {
                "getMe" => Ok(HttpResponse::json(200, &json!({"ok": true, "result": {
                    "id": BOT_ID, "is_bot": true, "first_name": "Clawless", "username": BOT_USERNAME}}))),
                "sendChatAction" => Ok(HttpResponse::json(200, &json!({"ok": true, "result": true}))),
                "getFile" => {
                    let id = body["file_id"].as_str().unwrap_or("").to_owned();
                    Ok(match files.lock().unwrap().get(&id) {
                        Some(bytes) => HttpResponse::json(200, &json!({"ok": true, "result": {
                            "file_id": id, "file_unique_id": format!("u{id}"),
                            "file_size": bytes.len(), "file_path": format!("media/{id}")}})),
                        None => HttpResponse::json(400, &json!({"ok": false, "error_code": 400,
                            "description": "Bad Request: invalid file_id"})),
                    })
                }
                "sendMessage" | "sendDocument" | "sendVoice" | "sendPhoto" => {
                    if let Some(Some((status, body))) = script.lock().unwrap().pop_front() {
                        return Ok(HttpResponse::json(status, &body));
                    }
                    let mut n = counter.lock().unwrap();
                    *n += 1;
                    Ok(HttpResponse::json(200, &json!({"ok": true, "result": {
                        "message_id": *n, "date": 1, "chat": {"id": body["chat_id"], "type": "private"}, "text": body["text"]}})))
                }
                _ => Ok(HttpResponse::json(200, &json!({"ok": true, "result": true}))),
            }
        });
    }

    pub fn script(&self, status: u16, body: Value) {
        self.llm.lock().unwrap().push_back((status, body, None));
    }

    pub fn script_429(&self, retry_after: &str) {
        self.llm.lock().unwrap().push_back((
            429,
            json!({"error": {"type": "rate_limit_error"}}),
            Some(retry_after.into()),
        ));
    }

    /// Delivers a fixture through the webhook (right secret) and returns the HTTP status.
    pub async fn deliver(&self, fixture: &str, update_id: i64) -> u16 {
        self.deliver_raw(&fixtures::update(fixture, update_id))
            .await
    }

    pub async fn deliver_raw(&self, update: &Value) -> u16 {
        let reply = self
            .app
            .handle_webhook("main", Some(SECRET), update.to_string().as_bytes())
            .await;
        if let Some(lane) = &reply.lane {
            self.app.drain(lane).await.unwrap();
        }
        reply.status
    }

    /// Accepts without draining; returns the lane.
    pub async fn accept_only(&self, fixture: &str, update_id: i64) -> Option<Lane> {
        let reply = self
            .app
            .handle_webhook(
                "main",
                Some(SECRET),
                fixtures::update(fixture, update_id).to_string().as_bytes(),
            )
            .await;
        assert_eq!(reply.status, 200);
        reply.lane
    }

    pub async fn drain(&self, lane: &Lane) -> Drained {
        self.app.drain(lane).await.unwrap()
    }

    /// The first pending job of `lane`, read as the inbox stores it.
    pub async fn head_job(&self, lane: &Lane) -> Option<Job> {
        use clawless_platform::KvExt;
        let kv = &self.platform.kv;
        let key = kv.list(&keys::lane_jobs(lane), 1).await.unwrap().pop()?;
        kv.get_json(&key).await.unwrap()
    }

    /// Bodies of the Bot API calls of `method`, in order.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.http
            .requests()
            .iter()
            .filter(|r| {
                r.url.starts_with("https://api.telegram.org/") && method_of(&r.url) == Some(method)
            })
            .map(|r| call_body(r.header_value("content-type"), &r.body))
            .collect()
    }

    /// The files uploaded with `sendDocument`: `(filename, content)`.
    pub fn documents(&self) -> Vec<(String, String)> {
        self.http
            .requests()
            .iter()
            .filter(|r| method_of(&r.url) == Some("sendDocument"))
            .filter_map(|r| {
                clawless_testkit::spec::multipart_file(r.header_value("content-type"), &r.body)
            })
            .collect()
    }

    pub fn sent_texts(&self) -> Vec<String> {
        self.calls("sendMessage")
            .iter()
            .map(|b| b["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Serves `bytes` as the file `file_id`.
    pub fn file(&self, file_id: &str, bytes: impl Into<Vec<u8>>) {
        self.files
            .lock()
            .unwrap()
            .insert(file_id.to_owned(), bytes.into());
    }

    /// The model requests made, as JSON bodies.
    pub fn llm_requests(&self) -> Vec<Value> {
        self.http
            .requests()
            .iter()
            .filter(|r| r.url.starts_with(LLM))
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    /// The text of the system prompt of each request: Anthropic's is blocks once marked for
    /// its prompt cache.
    pub fn llm_systems(&self) -> Vec<String> {
        self.llm_requests().iter().map(system_text).collect()
    }

    /// The last tool result the model was shown, in its last request.
    pub fn last_tool_result(&self) -> Value {
        let requests = self.llm_requests();
        let last = requests.last().expect("a model request");
        last["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .rfind(|b| b["type"] == "tool_result")
            .expect("a tool result")
    }

    /// Every Bot API call so far obeyed the spec.
    pub fn assert_spec_clean(&self) {
        let v = self.violations.lock().unwrap();
        assert!(v.is_empty(), "Bot API spec violations: {v:?}");
    }
}

/// The owner's daily note of 2023-11-14 (the fake clock's day), empty when absent.
pub async fn daily(h: &Harness) -> String {
    let bytes = h
        .platform
        .files
        .read("memory/assistant/main/u111111111/memory/2023-11-14.md")
        .await
        .unwrap_or_default();
    String::from_utf8(bytes).unwrap()
}

/// An Exec port that keeps each command it is asked to run and answers exit status 0.
#[derive(Default)]
pub struct Ran(pub Mutex<Vec<String>>);

#[clawless_platform::async_trait]
impl clawless_platform::Exec for Ran {
    async fn run(
        &self,
        r: clawless_platform::ExecRequest,
    ) -> Result<clawless_platform::ExecOutput, clawless_platform::PortError> {
        self.0.lock().unwrap().push(r.command);
        Ok(clawless_platform::ExecOutput {
            status: Some(0),
            ..clawless_platform::ExecOutput::default()
        })
    }
}

/// The system prompt of a request as text: a string, or the texts of its blocks (Anthropic's,
/// marked for its prompt cache).
pub fn system_text(req: &Value) -> String {
    match &req["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The memories recalled for a request: the last block of its last message when it is them
/// (they come after everything the prompt cache keeps), else `""`.
pub fn recalled(req: &Value) -> String {
    let last = req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .and_then(|c| c.last());
    match last.and_then(|b| b["text"].as_str()) {
        Some(text) if text.starts_with("## Relevant memories") => text.to_owned(),
        _ => String::new(),
    }
}
