//! What every shell repeats, written once: the secret header Telegram sends, the size a real
//! update can have, the routes, the headers a hook request is read by, and why a webhook body
//! could not be read. The webhook's
//! sequence itself (authorize, read capped, acknowledge) is [`crate::App::serve_webhook`].

/// The header Telegram puts the webhook secret in (`secret_token` of `setWebhook`).
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The headers of a hook request ([`crate::hooks::HookRequest`]), lower case.
pub const AUTHORIZATION: &str = "authorization";
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const CONTENT_TYPE: &str = "content-type";

/// The largest webhook body accepted. A real update is a few KB (a 4096-character message
/// with its entities and the message it replies to stays far below this); anything larger is
/// refused with 413 before it is parsed.
pub const MAX_UPDATE_BYTES: usize = 256 * 1024;

/// Why a shell could not read a webhook body (see [`crate::App::serve_webhook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRefused {
    /// Over the cap it was given (declared or read): 413.
    TooLarge,
    /// The connection failed or the encoding is broken: 400.
    Unreadable,
    /// It did not arrive in time: 408.
    TooSlow,
}

/// Where a request goes, from its method and path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `POST /telegram/<connector>`.
    Webhook(&'a str),
    /// `POST /hooks/<name>`: an incoming webhook ([`crate::App::serve_hook`]).
    Hook(&'a str),
    /// `GET /healthz`.
    Health,
    /// `/admin/<name>`, any method: [`crate::Admin::serve`] decides (nothing there exists
    /// without an admin token).
    Admin(&'a str),
    /// `/app`, `/app/...` and `/api/...`, any method: the control panel
    /// ([`crate::app::Panel::serve`]) with the whole path.
    Panel(&'a str),
    /// A known path with the wrong method.
    MethodNotAllowed,
    NotFound,
}

/// Routes a request by method and path.
pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    if path == "/healthz" {
        return if method.eq_ignore_ascii_case("GET") {
            Route::Health
        } else {
            Route::MethodNotAllowed
        };
    }
    if path == "/app" || path.starts_with("/app/") || path.starts_with("/api/") {
        return Route::Panel(path);
    }
    if path == "/metrics" {
        return Route::Admin("metrics");
    }
    if let Some(name) = path
        .strip_prefix("/admin/")
        .filter(|n| !n.is_empty() && !n.contains('/'))
    {
        return Route::Admin(name);
    }
    if let Some(name) = path
        .strip_prefix("/hooks/")
        .filter(|n| !n.is_empty() && !n.contains('/'))
    {
        return match method.eq_ignore_ascii_case("POST") {
            true => Route::Hook(name),
            false => Route::MethodNotAllowed,
        };
    }
    let Some(connector) = path
        .strip_prefix("/telegram/")
        .filter(|c| !c.is_empty() && !c.contains('/'))
    else {
        return Route::NotFound;
    };
    if method.eq_ignore_ascii_case("POST") {
        Route::Webhook(connector)
    } else {
        Route::MethodNotAllowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("POST", "/telegram/main"), Route::Webhook("main"));
        assert_eq!(route("GET", "/telegram/main"), Route::MethodNotAllowed);
        assert_eq!(route("POST", "/telegram/"), Route::NotFound);
        assert_eq!(route("POST", "/telegram/a/b"), Route::NotFound);
        assert_eq!(route("GET", "/healthz"), Route::Health);
        assert_eq!(route("GET", "/"), Route::NotFound);
        assert_eq!(route("GET", "/admin/audit"), Route::Admin("audit"));
        assert_eq!(route("GET", "/metrics"), Route::Admin("metrics"));
        assert_eq!(route("POST", "/admin/setup"), Route::Admin("setup"));
        assert_eq!(route("GET", "/admin/"), Route::NotFound);
        // The app answers an unknown admin name with 404 (see `Admin::serve`).
        assert_eq!(route("GET", "/admin/other"), Route::Admin("other"));
        assert_eq!(route("GET", "/app"), Route::Panel("/app"));
        assert_eq!(route("GET", "/app/panel.js"), Route::Panel("/app/panel.js"));
        assert_eq!(
            route("DELETE", "/api/reminders/3"),
            Route::Panel("/api/reminders/3")
        );
        assert_eq!(route("GET", "/apps"), Route::NotFound);
        assert_eq!(route("POST", "/hooks/deploys"), Route::Hook("deploys"));
        assert_eq!(route("GET", "/hooks/deploys"), Route::MethodNotAllowed);
        assert_eq!(route("POST", "/hooks/"), Route::NotFound);
        assert_eq!(route("POST", "/hooks/a/b"), Route::NotFound);
    }
}
