//! `fetch` and `scheduled` handlers.

use std::time::Duration;

use clawless_core::allowance::Limits;
use clawless_core::shell::{route, BodyRefused, Route, SECRET_HEADER};
use clawless_core::{Drained, Lane};
use worker::{
    event, Context, Env, MessageBatch, MessageExt, Request, Response, Result, ScheduleContext,
    ScheduledEvent,
};

use crate::inbound::{read_capped, HandOff};
use crate::setup::{shell, Shell};

/// `ctx.wait_until` work may run about 30 s past the response: a drain waits inline for a retry
/// due within this long, later ones are left to the cron sweep.
pub const MAX_INLINE_WAIT: Duration = Duration::from_secs(15);

/// How long Cloudflare lets wait-until work run after the response.
pub const WAIT_UNTIL: Duration = Duration::from_secs(30);

/// The wall time of a queue consumer's or a cron trigger's invocation.
pub const LONG_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// The latest retry handed to the queue (later ones, an approval's expiry, wait for the cron).
pub const MAX_QUEUED_RETRY: Duration = Duration::from_secs(120);

#[event(start)]
fn start() {
    crate::log::init();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let path = req.path();
    #[cfg(feature = "test-routes")]
    if let Some(suite) = path.strip_prefix("/__conformance/") {
        return crate::conformance::run(suite, &req, &env).await;
    }
    #[cfg(feature = "test-routes")]
    if path == "/__bench" {
        return crate::bench::run().await;
    }
    #[cfg(feature = "test-routes")]
    if path == "/__invocations" {
        return crate::bench::invocations();
    }
    match route(req.method().as_ref(), &path) {
        Route::Webhook(connector) => webhook(req, connector, &env, ctx).await,
        Route::Hook(name) => hook(req, name, &env, ctx).await,
        Route::Health => Response::ok("ok"),
        Route::Admin(name) => admin(req, &env, name).await,
        Route::Panel(path) => panel(req, &env, path, ctx).await,
        Route::MethodNotAllowed => Response::error("method not allowed", 405),
        Route::NotFound => Response::error("not found", 404),
    }
}

/// `/admin/<name>` (see [`Admin::serve`]): 404 unless `CLAWLESS_ADMIN_TOKEN` is set.
async fn admin(mut req: Request, env: &Env, name: &str) -> Result<Response> {
    let shell = match shell(env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            // Said to the operator (what is missing names a binding or a setting, never a
            // secret's value); the webhook answers Telegram only "not configured".
            return Response::error(format!("not configured: {e}"), 500);
        }
    };
    let authorization = req.headers().get("authorization").ok().flatten();
    // The query and the origin as sent, split off by hand: `Request::url` would parse the URL
    // with the `url` crate, whose IDNA tables add about 75 KB (gzip) to the bundle.
    let url = req.inner().url();
    let query = url
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(q));
    let origin = url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest)));
    let method = req.method();
    // Only the admin's archive is read: anyone else is answered before the body.
    let body = if name == "import" && shell.app.admin().admits(authorization.as_deref()) {
        match read_capped(&mut req, clawless_core::admin_http::MAX_ADMIN_BODY).await {
            Ok(body) => body,
            Err(BodyRefused::TooLarge) => return Response::error("payload too large", 413),
            Err(_) => return Response::error("bad request", 400),
        }
    } else {
        Vec::new()
    };
    let reply = shell
        .app
        .admin()
        .serve(clawless_core::admin_http::AdminRequest {
            method: method.as_ref(),
            name,
            authorization: authorization.as_deref(),
            query,
            origin: origin.as_deref(),
            body: &body,
            shell: "worker",
        })
        .await;
    let headers = worker::Headers::new();
    headers.set("content-type", reply.content_type)?;
    Ok(Response::from_bytes(reply.body)?
        .with_status(reply.status)
        .with_headers(headers))
}

/// `/app/...` and `/api/...` that are not static assets (those are served before the Worker
/// runs, from `core/panel`; see `wrangler.toml`): the core's panel.
async fn panel(mut req: Request, env: &Env, path: &str, ctx: Context) -> Result<Response> {
    let shell = match shell(env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return Response::error("not configured", 500);
        }
    };
    let start = spent(&shell);
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let (authorization, cookie, csrf) = (
        header("authorization"),
        header("cookie"),
        header("x-csrf-token"),
    );
    let url = req.inner().url();
    let query = url
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(q).to_owned());
    let method = req.method();
    let body = match read_capped(&mut req, clawless_core::panel::MAX_BODY).await {
        Ok(b) => b,
        Err(BodyRefused::TooLarge) => return Response::error("payload too large", 413),
        Err(_) => return Response::error("bad request", 400),
    };
    let reply = shell
        .app
        .panel()
        .serve(clawless_core::panel::PanelRequest {
            method: method.as_ref(),
            path,
            query: query.as_deref(),
            authorization: authorization.as_deref(),
            cookie: cookie.as_deref(),
            csrf: csrf.as_deref(),
            body: &body,
        })
        .await;
    if let Some(lane) = reply.lane.clone() {
        let shell = shell.clone();
        ctx.wait_until(async move {
            let limits = limits(&shell, WAIT_UNTIL, start);
            invocation(&shell, "panel", drain(&shell, lane, limits)).await;
        });
    }
    let headers = worker::Headers::new();
    headers.set("content-type", reply.content_type)?;
    for (name, value) in &reply.headers {
        headers.append(name, value)?;
    }
    Ok(Response::ok(reply.body)?
        .with_status(reply.status)
        .with_headers(headers))
}

/// `POST /telegram/<connector>`: the core's webhook sequence ([`App::serve_webhook`]:
/// authorized before the body is read, read up to the cap, acknowledged) with this shell's
/// body reader; the lane is drained after the response.
async fn webhook(mut req: Request, connector: &str, env: &Env, ctx: Context) -> Result<Response> {
    let shell = match shell(env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return Response::error("not configured", 500);
        }
    };
    let secret = req.headers().get(SECRET_HEADER).ok().flatten();
    // The ack's D1 queries are the invocation's too.
    let start = spent(&shell);
    #[cfg(feature = "test-routes")]
    let before = crate::d1::STATEMENTS.load(std::sync::atomic::Ordering::Relaxed);
    let reply = shell
        .app
        .serve_webhook(connector, secret.as_deref(), |cap| {
            read_capped(&mut req, cap)
        })
        .await;
    if let Some(lane) = reply.lane {
        let shell = shell.clone();
        ctx.wait_until(async move {
            let limits = limits(&shell, WAIT_UNTIL, start);
            invocation(&shell, "webhook", drain(&shell, lane, limits)).await;
        });
    }
    let response = Response::ok(reply.body)?.with_status(reply.status);
    // The test build tells how many D1 statements the ack sent (the drain comes after).
    #[cfg(feature = "test-routes")]
    let response = counted(response, before)?;
    Ok(response)
}

/// `POST /hooks/<name>`: the core's hook sequence ([`App::serve_hook`]) with this shell's
/// body reader; the lane is drained after the response, as a webhook's is.
async fn hook(mut req: Request, name: &str, env: &Env, ctx: Context) -> Result<Response> {
    use clawless_core::shell::{AUTHORIZATION, CONTENT_TYPE, IDEMPOTENCY_KEY};
    let shell = match shell(env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return Response::error("not configured", 500);
        }
    };
    let header = |h: &str| req.headers().get(h).ok().flatten();
    let (authorization, key, content_type) = (
        header(AUTHORIZATION),
        header(IDEMPOTENCY_KEY),
        header(CONTENT_TYPE),
    );
    let start = spent(&shell);
    let request = clawless_core::hooks::HookRequest {
        name,
        authorization: authorization.as_deref(),
        idempotency_key: key.as_deref(),
        content_type: content_type.as_deref(),
    };
    let reply = shell
        .app
        .serve_hook(request, |cap| read_capped(&mut req, cap))
        .await;
    if let Some(lane) = reply.lane {
        let shell = shell.clone();
        ctx.wait_until(async move {
            let limits = limits(&shell, WAIT_UNTIL, start);
            invocation(&shell, "hook", drain(&shell, lane, limits)).await;
        });
    }
    Ok(Response::ok(reply.body)?.with_status(reply.status))
}

/// `response` with the D1 statements sent since `before` in `x-clawless-d1-statements`.
#[cfg(feature = "test-routes")]
fn counted(mut response: Response, before: usize) -> Result<Response> {
    let now = crate::d1::STATEMENTS.load(std::sync::atomic::Ordering::Relaxed);
    let sent = now.wrapping_sub(before).to_string();
    response
        .headers_mut()
        .set("x-clawless-d1-statements", &sent)?;
    Ok(response)
}

/// The outbound requests and the storage calls (D1 queries) the app has made so far.
fn spent(shell: &Shell) -> (u64, u64) {
    (shell.app.outbound_requests(), shell.app.storage_calls())
}

/// What an invocation of `wall` may spend, what the app made since `start` ([`spent`])
/// already made in it: the test build's cut shortens it as it shortens the invocation.
fn limits(shell: &Shell, wall: Duration, start: (u64, u64)) -> Limits {
    let wall = shell.cut.map_or(wall, |cut| wall.min(cut));
    let (requests, storage) = spent(shell);
    Limits {
        wall: Some(wall),
        requests: Some(
            shell
                .subrequests
                .saturating_sub(requests.saturating_sub(start.0)),
        ),
        // Bounded only where handing on is cheap: with a queue bound, the rest of a turn goes
        // on at once in a fresh invocation. Without one it would wait for the next cron
        // minute, and a turn with a tool (about 45 to 55 queries, the usage ledger's 7 to 14
        // among them) is handed on before its tool on the free plan's 50: every such turn
        // would answer a minute late. There a turn past 50 queries fails its last writes
        // instead and is finished by the sweep, as before they were counted.
        storage: shell.queue.is_some().then(|| {
            shell
                .d1_queries
                .saturating_sub(storage.saturating_sub(start.1))
        }),
    }
}

/// Drains one lane within `limits`; a lane with work left is handed on. Whatever else is
/// left (a crash, a later retry) is picked up by the cron sweep.
async fn drain(shell: &Shell, lane: Lane, limits: Limits) {
    match shell.app.drain_within(&lane, MAX_INLINE_WAIT, limits).await {
        Ok(Drained::HandOff) => hand_on(shell, &lane, 0).await,
        // A retry soon (a failing model's backoff) that the invocation could not wait for: at
        // its time through the queue, rather than at the next cron minute.
        Ok(Drained::RetryAt(at)) if shell.queue.is_some() => {
            let wait = Duration::from_millis(at.saturating_sub(js_sys::Date::now() as u64));
            if wait <= MAX_QUEUED_RETRY {
                let secs = u32::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u32::MAX);
                hand_on(shell, &lane, secs).await;
            }
        }
        Ok(_) => {}
        Err(e) => worker::console_error!("lane {lane}: drain failed, the sweep will retry: {e}"),
    }
}

/// Asks a fresh invocation to go on with `lane` in `delay` seconds: through the queue when one
/// is bound, else the next cron minute's sweep finds it.
async fn hand_on(shell: &Shell, lane: &Lane, delay: u32) {
    let Some(queue) = &shell.queue else {
        worker::console_log!("lane {lane}: handed on to the next cron minute");
        return;
    };
    let message = HandOff {
        lane: lane.to_string(),
    };
    let message = worker::MessageBuilder::new(message)
        .delay_seconds(delay)
        .build();
    if let Err(e) = queue.send(message).await {
        worker::console_error!("lane {lane}: hand-off failed, the cron sweep will go on: {e}");
    }
}

/// Runs one invocation's `work`. The test build ends it at its cut, as Cloudflare ends
/// wait-until work, and keeps what it used for `GET /__invocations`.
async fn invocation(shell: &Shell, kind: &str, work: impl std::future::Future<Output = ()>) {
    #[cfg(feature = "test-routes")]
    {
        crate::bench::invocation(shell, kind, work).await;
    }
    #[cfg(not(feature = "test-routes"))]
    {
        let _ = (shell, kind);
        work.await;
    }
}

/// The queue's consumer: each message names a lane handed on, drained within the consumer's
/// wall time and the requests the batch has left.
#[event(queue)]
async fn queue(batch: MessageBatch<HandOff>, env: Env, _ctx: Context) -> Result<()> {
    let shell = match shell(&env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            batch.retry_all();
            return Ok(());
        }
    };
    let messages = match batch.messages() {
        Ok(messages) => messages,
        Err(e) => {
            // Not ours to read: the cron sweep drains every lane with work anyway.
            worker::console_error!("unreadable hand-off batch dropped: {e}");
            batch.ack_all();
            return Ok(());
        }
    };
    let began = js_sys::Date::now();
    let start = spent(&shell);
    let work = async {
        for message in messages {
            let elapsed = Duration::from_millis((js_sys::Date::now() - began).max(0.0) as u64);
            let limits = limits(&shell, LONG_INVOCATION.saturating_sub(elapsed), start);
            drain(&shell, Lane::new(&message.body().lane), limits).await;
            message.ack();
        }
    };
    invocation(&shell, "queue", work).await;
    Ok(())
}

#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let shell = match shell(&env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return;
        }
    };
    let work = async {
        let swept = shell
            .app
            .scheduled_within(limits(&shell, LONG_INVOCATION, spent(&shell)))
            .await;
        for lane in &swept.handed_on {
            hand_on(&shell, lane, 0).await;
        }
        worker::console_log!(
            "scheduled job done; next retry or reminder at {:?}",
            swept.next
        );
    };
    invocation(&shell, "cron", work).await;
}
