//! What the assistant's Worker and its front (`front.rs`) share: the embedded config, the
//! string bindings as the core's `Env`, a request body read under a cap, and the message a
//! lane is handed on with through the queue.

use clawless_core::shell::BodyRefused;
use clawless_core::Env;
use futures::StreamExt;
use js_sys::{Object, Reflect};
use wasm_bindgen::JsValue;
use worker::Request;

/// `config/`, validated and turned into JSON by build.rs.
pub(crate) const CONFIG_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/config.json"));

/// The D1 database binding (wrangler.toml `[[d1_databases]] binding`).
pub const DB_BINDING: &str = "DB";

/// The queue binding lanes are handed on through: by the assistant's Worker (a turn longer
/// than one invocation, a retry soon) and by the front (every new lane). The assistant's
/// Worker consumes it.
pub const QUEUE_BINDING: &str = "HANDOFF";

/// A lane handed on through the queue.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct HandOff {
    pub lane: String,
}

/// Every string-valued binding (`[vars]` and secrets) as the core's `Env`.
pub(crate) fn env_strings(env: &worker::Env) -> Env {
    let obj: &JsValue = env.as_ref();
    let keys = Object::keys(&Object::from(obj.clone()));
    Env::from_pairs(keys.iter().filter_map(|k| {
        let name = k.as_string()?;
        let value = Reflect::get(obj, &k).ok()?.as_string()?;
        Some((name, value))
    }))
}

/// The body, at most `cap` bytes: a declared Content-Length over the cap is refused before a
/// byte is read, and the read stops as soon as the cap is passed.
pub(crate) async fn read_capped(
    req: &mut Request,
    cap: usize,
) -> std::result::Result<Vec<u8>, BodyRefused> {
    let declared = req.headers().get("content-length").ok().flatten();
    let declared = declared.and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(BodyRefused::TooLarge);
    }
    // A request without a body (a null stream) reads as empty.
    let Ok(mut stream) = req.stream() else {
        return Ok(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return Err(BodyRefused::Unreadable);
        };
        if body.len() + chunk.len() > cap {
            return Err(BodyRefused::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
