//! The front Worker (feature `front`, deployed with `targets/worker/front.toml`): Telegram's
//! webhook acknowledged and nothing else. It checks the connector and the secret before the
//! body is read, reads the body under the cap, stores the update as a job in its chat's lane
//! (the core's [`Front`]: the same D1 rows the assistant's own ack writes) and, after the
//! response, hands the lane to the assistant's Worker through the `HANDOFF` queue (without a
//! queue bound the lane waits for the assistant's cron minute) and keeps its counts of acks
//! in D1 for the assistant's `/metrics`.
//!
//! Nothing of the assistant is compiled in (`events.rs` and `setup.rs` are left out): a fresh
//! isolate instantiates a tenth of the assistant's wasm before its first ack.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use clawless_core::front::Front;
use clawless_core::shell::{route, BodyRefused, Route, MAX_UPDATE_BYTES, SECRET_HEADER};
use clawless_platform::Clock;
use worker::{event, Context, Env, Request, Response, Result};

use crate::d1::{D1Kv, D1};
use crate::inbound::{env_strings, read_capped, HandOff, CONFIG_JSON, DB_BINDING, QUEUE_BINDING};
use crate::io::WorkerClock;

struct Shell {
    front: Front,
    queue: Option<worker::Queue>,
}

thread_local! {
    // A Worker isolate is single-threaded; the front lives as long as the isolate.
    static SHELL: RefCell<Option<Rc<Shell>>> = const { RefCell::new(None) };
}

/// The front of this isolate, built on first use: its bindings, and the tables checked.
async fn shell(env: &Env) -> std::result::Result<Rc<Shell>, String> {
    if let Some(shell) = SHELL.with(|s| s.borrow().clone()) {
        return Ok(shell);
    }
    let db = env
        .d1(DB_BINDING)
        .map_err(|_| format!("no D1 database bound as {DB_BINDING} (see front.toml)"))?;
    let d1 = D1::new(db);
    d1.ensure_schema().await.map_err(|e| e.to_string())?;
    let clock: Arc<dyn Clock> = Arc::new(WorkerClock);
    let kv = Arc::new(D1Kv {
        d1,
        clock: clock.clone(),
    });
    // Its counts are kept as an instance of their own, which the assistant's `/metrics` sums.
    let instance = format!("front-{}-{}", clock.now_ms(), js_sys::Math::random());
    let front = Front::new(CONFIG_JSON, &env_strings(env), kv, clock, instance)?;
    for connector in front.unset_secrets() {
        worker::console_error!(
            "not configured: the webhook secret of connector {connector} is not set; its webhooks are refused"
        );
    }
    let queue = env.queue(QUEUE_BINDING).ok();
    if queue.is_none() {
        worker::console_log!(
            "no queue bound as {QUEUE_BINDING}: updates wait for the assistant's cron minute"
        );
    }
    let shell = Rc::new(Shell { front, queue });
    SHELL.with(|s| *s.borrow_mut() = Some(shell.clone()));
    Ok(shell)
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, ctx: Context) -> Result<Response> {
    let path = req.path();
    let connector = match route(req.method().as_ref(), &path) {
        Route::Webhook(connector) => connector.to_owned(),
        Route::Health => return Response::ok("ok"),
        Route::MethodNotAllowed if path.starts_with("/telegram/") => {
            return Response::error("method not allowed", 405)
        }
        // The panel, the admin routes and incoming hooks are the assistant's Worker's.
        _ => return Response::error("not found", 404),
    };
    let shell = match shell(&env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return Response::error("not configured", 500);
        }
    };
    let secret = req.headers().get(SECRET_HEADER).ok().flatten();
    if let Err(refused) = shell.front.authorize(&connector, secret.as_deref()) {
        return Response::error(refused.body, refused.status);
    }
    let body = match read_capped(&mut req, MAX_UPDATE_BYTES).await {
        Ok(body) => body,
        Err(BodyRefused::TooLarge) => return Response::error("payload too large", 413),
        Err(_) => return Response::error("unreadable body", 400),
    };
    let reply = shell.front.ack(&connector, secret.as_deref(), &body).await;
    if reply.status == 500 {
        worker::console_error!(
            "connector {connector}: could not store an update; Telegram sends it again"
        );
    }
    let queue = reply.lane.zip(shell.queue.clone());
    // After the response: the hand-off (a lost message leaves the job to the assistant's cron
    // sweep), then the counts kept.
    ctx.wait_until(async move {
        if let Some((lane, queue)) = queue {
            let message = HandOff {
                lane: lane.to_string(),
            };
            if let Err(e) = queue.send(message).await {
                worker::console_error!(
                    "lane {lane}: hand-off failed, the cron sweep will take it: {e}"
                );
            }
        }
        shell.front.keep_counts().await;
    });
    Ok(Response::ok(reply.body)?.with_status(reply.status))
}
