//! Bindings → `App`, once per isolate.

use std::cell::RefCell;
use std::sync::Arc;

use clawless_core::{App, Config};
use clawless_platform::{Clock, Platform, Vectors};
use js_sys::Reflect;
use wasm_bindgen::JsValue;

use crate::ai::{WorkersAi, WorkersAiPainter, WorkersAiSpeech, WorkersAiWhisper};
use crate::d1::{D1Files, D1Kv, D1Text, D1Vectors, D1};
use crate::inbound::{env_strings, CONFIG_JSON, DB_BINDING, QUEUE_BINDING};
use crate::io::{FetchHttp, WorkerClock};
use crate::vectorize::Vectorize;

/// The optional Vectorize index binding.
pub const VECTORIZE_BINDING: &str = "VECTORIZE";
/// The optional Workers AI binding (memory embeddings).
pub const AI_BINDING: &str = "AI";

/// The setting of how many outbound requests one invocation may make.
pub const SUBREQUESTS_VAR: &str = "CLAWLESS_SUBREQUESTS";
/// Cloudflare's limit on the free plan.
pub const FREE_SUBREQUESTS: u64 = 50;

pub struct Shell {
    pub app: Arc<App>,
    /// Where a lane with work left goes on at once (`None`: at the next cron minute).
    pub queue: Option<worker::Queue>,
    /// Outbound requests one invocation may make (`CLAWLESS_SUBREQUESTS`, else 50).
    pub subrequests: u64,
    /// D1 queries one invocation may make ([`crate::d1::queries_per_invocation`]).
    pub d1_queries: u64,
    /// The test build's cut: every invocation ends this long after it began
    /// (`CLAWLESS_TEST_CUT_MS`), as Cloudflare ends wait-until work; Miniflare does not.
    pub cut: Option<std::time::Duration>,
}

thread_local! {
    // A Worker isolate is single-threaded; the shell lives as long as the isolate.
    static SHELL: RefCell<Option<Arc<Shell>>> = const { RefCell::new(None) };
}

/// The shell of this isolate, built on first use.
pub async fn shell(env: &worker::Env) -> Result<Arc<Shell>, String> {
    if let Some(shell) = SHELL.with(|s| s.borrow().clone()) {
        return Ok(shell);
    }
    let db = env
        .d1(DB_BINDING)
        .map_err(|_| format!("no D1 database bound as {DB_BINDING} (see wrangler.toml)"))?;
    let d1 = D1::new(db);
    // The isolate's start-up, in its phases, logged once: what a cold isolate's first request
    // waits for beside the ack. Local workerd's clock runs on; Cloudflare's advances only at
    // I/O, so there the app's CPU shows in the phase of the next I/O (the store check).
    let started = js_sys::Date::now();
    d1.ensure_schema().await.map_err(|e| e.to_string())?;
    let schema_ms = js_sys::Date::now() - started;
    let clock: Arc<dyn Clock> = Arc::new(WorkerClock);
    let index = Reflect::get(env.as_ref(), &JsValue::from_str(VECTORIZE_BINDING))
        .unwrap_or(JsValue::UNDEFINED);
    let vectors: Arc<dyn Vectors> = if index.is_object() {
        Arc::new(Vectorize::new(index))
    } else {
        Arc::new(D1Vectors(d1.clone()))
    };
    let platform = Platform {
        kv: Arc::new(D1Kv {
            d1: d1.clone(),
            clock: clock.clone(),
        }),
        files: Arc::new(D1Files(d1.clone())),
        http: Arc::new(FetchHttp),
        vectors,
        text: Arc::new(D1Text(d1)),
        clock: clock.clone(),
        exec: None,
    };
    let config = Config::from_json(CONFIG_JSON).map_err(|e| e.to_string())?;
    let instance = format!("worker-{}-{}", clock.now_ms(), js_sys::Math::random());
    let ai =
        Reflect::get(env.as_ref(), &JsValue::from_str(AI_BINDING)).unwrap_or(JsValue::UNDEFINED);
    let queue = env.queue(QUEUE_BINDING).ok();
    let env = env_strings(env);
    let subrequests = match env.get(SUBREQUESTS_VAR) {
        None | Some("") => FREE_SUBREQUESTS,
        Some(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 20)
            .ok_or_else(|| format!("{SUBREQUESTS_VAR} must be a whole number, at least 20"))?,
    };
    let cut = env
        .get("CLAWLESS_TEST_CUT_MS")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|_| cfg!(feature = "test-routes"))
        .map(std::time::Duration::from_millis);
    let mut app = if ai.is_object() {
        App::with_embedder(
            platform,
            config,
            &env,
            instance,
            (
                Arc::new(WorkersAi::new(ai.clone())),
                Some(Arc::new(WorkersAiPainter::new(ai.clone()))),
            ),
        )
    } else {
        App::new(platform, config, &env, instance)
    }
    .map_err(|e| e.to_string())?;
    // A transcription service set in the environment wins; else Whisper on Workers AI.
    if ai.is_object() && !app.transcribes() {
        app = app.with_transcriber(Arc::new(WorkersAiWhisper::new(ai.clone())));
    }
    // Likewise for speech, unless voice replies are turned off (`SPEECH_BASE_URL=off`).
    let speech_off = env.get("SPEECH_BASE_URL").map(str::trim) == Some("off");
    if ai.is_object() && app.speaks().is_none() && !speech_off {
        app = app.with_speaker(Arc::new(WorkersAiSpeech::new(ai)));
    }
    // Before any request: a store a newer release wrote is refused, an older one brought up.
    let built_ms = js_sys::Date::now() - started;
    app.upgrade_store()
        .await
        .map_err(|e| format!("the D1 database: {e}"))?;
    let total_ms = js_sys::Date::now() - started;
    worker::console_log!(
        "isolate started in {total_ms:.0} ms: schema check {schema_ms:.0} ms, app {:.0} ms, store check {:.0} ms",
        built_ms - schema_ms,
        total_ms - built_ms
    );
    for missing in app.missing_settings() {
        worker::console_error!(
            "not configured: the bot cannot answer until this is set: {missing}"
        );
    }
    for line in app
        .answering_models()
        .into_iter()
        .chain(app.voice_services())
    {
        worker::console_log!("{line}");
    }
    for note in app.unoffered_tools() {
        worker::console_warn!("tool not offered: {note}");
    }
    if queue.is_none() {
        worker::console_log!("no queue bound as {QUEUE_BINDING}: a turn longer than one invocation goes on at the next cron minute");
    }
    let shell = Arc::new(Shell {
        app: Arc::new(app),
        queue,
        subrequests,
        d1_queries: crate::d1::queries_per_invocation(subrequests),
        cut,
    });
    SHELL.with(|s| *s.borrow_mut() = Some(shell.clone()));
    Ok(shell)
}
