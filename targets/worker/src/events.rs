//! `fetch` and `scheduled` handlers.

use std::sync::Arc;
use std::time::Duration;

use clawless_core::{App, Drained};
use worker::{event, Context, Env, Request, Response, Result, ScheduleContext, ScheduledEvent};

use crate::setup::shell;

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// `ctx.wait_until` work may run about 30 s past the response: a drain waits inline for a retry
/// due within this long, later ones are left to the cron sweep.
pub const MAX_INLINE_WAIT: Duration = Duration::from_secs(10);

#[event(start)]
fn start() {
    crate::log::init();
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, ctx: Context) -> Result<Response> {
    let path = req.path();
    let method = req.method();
    #[cfg(feature = "test-routes")]
    if let Some(suite) = path.strip_prefix("/__conformance/") {
        return crate::conformance::run(suite, &req, &env).await;
    }
    #[cfg(feature = "test-routes")]
    if path == "/__bench" {
        return crate::bench::run().await;
    }
    if method == worker::Method::Get && path == "/healthz" {
        return Response::ok("ok");
    }
    let Some(connector) = path
        .strip_prefix("/telegram/")
        .filter(|c| !c.is_empty() && !c.contains('/'))
        .map(str::to_owned)
    else {
        return Response::error("not found", 404);
    };
    if method != worker::Method::Post {
        return Response::error("method not allowed", 405);
    }
    let shell = match shell(&env).await {
        Ok(shell) => shell,
        Err(e) => {
            worker::console_error!("start-up failed: {e}");
            return Response::error("not configured", 500);
        }
    };
    let secret = req.headers().get(SECRET_HEADER).ok().flatten();
    let Ok(body) = req.bytes().await else {
        return Response::error("unreadable body", 400);
    };
    let reply = shell
        .app
        .handle_webhook(&connector, secret.as_deref(), &body)
        .await;
    if let Some(lane) = reply.lane {
        let app = shell.app.clone();
        ctx.wait_until(async move { drain(app, lane).await });
    }
    Ok(Response::ok(reply.body)?.with_status(reply.status))
}

/// Drains one lane after the response; whatever is left (a crash, a later retry) is picked up
/// by the cron sweep.
async fn drain(app: Arc<App>, lane: String) {
    for _ in 0..8 {
        match app.drain(&lane).await {
            Ok(Drained::RetryAt(at)) => {
                let wait = Duration::from_millis(at.saturating_sub(app.platform.clock.now_ms()));
                if wait > MAX_INLINE_WAIT {
                    worker::console_log!("lane {lane}: retry left for the cron sweep");
                    return;
                }
                app.platform.clock.sleep(wait).await;
            }
            Ok(_) => return,
            Err(e) => {
                worker::console_error!("lane {lane}: drain failed, the sweep will retry: {e}");
                return;
            }
        }
    }
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
    if let Err(e) = shell.kv.purge_expired().await {
        worker::console_error!("purge failed: {e}");
    }
    let next = shell.app.scheduled().await;
    worker::console_log!("scheduled job done; next retry at {next:?}");
}
