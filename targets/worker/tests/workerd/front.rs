//! The front Worker (`front.toml`, the `front` feature's build) before the assistant's: every
//! shared scenario with Telegram's updates posted to the front, and what the front alone answers.

use clawless_testkit::miniflare::{bot_vars, Miniflare, SECRET};
use clawless_testkit::scenarios::{self, Shell, Status};
use clawless_testkit::servers::{fakes, text_update, Fakes};
use serde_json::json;

use super::{Worker, ADMIN_TOKEN};

/// The front Worker and the assistant's behind it, as `front.toml` and `wrangler.toml`
/// deploy them: webhooks to the front, lanes through the queue.
struct Pair {
    worker: Worker,
    front: String,
}

impl Shell for Pair {
    fn name(&self) -> &str {
        "worker behind its front"
    }
    fn fakes(&self) -> &Fakes {
        &self.worker.f
    }
    fn secret(&self) -> &str {
        SECRET
    }
    fn post<'a>(&'a self, body: String, secret: Option<&'a str>) -> Status<'a> {
        Box::pin(self.worker.mf.post_body_to(&self.front, body, secret))
    }
    fn logs(&self) -> Vec<String> {
        self.worker.logs()
    }
    fn scheduled(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        self.worker.scheduled()
    }
}

/// Every shared scenario with Telegram's updates posted to the front Worker (its own build,
/// `CLAWLESS_WORKER_FRONT_BUILD`): the front acknowledges and hands the lane on through the
/// queue, the assistant's Worker answers. Then what the front alone answers: its refusals,
/// its health, nothing else routed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_through_the_front_worker() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["TELEGRAM_ALLOWED_USERS"] = json!(scenarios::allowed_users());
    vars["CLAWLESS_ADMIN_TOKEN"] = json!(ADMIN_TOKEN);
    let options = json!({"vars": vars, "vectorize": true, "queue": true, "front": true});
    let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    let front = mf.front.clone().expect("the front's URL");
    let pair = Pair {
        worker: Worker { mf, f },
        front: front.clone(),
    };
    scenarios::run_all(&pair).await;
    // The assistant's `/metrics` counts the acks the front made (kept in D1 by the front).
    let url = format!("{}/metrics", pair.worker.mf.url);
    let scrape = || {
        let req = reqwest::Client::new()
            .get(&url)
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"));
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.text().await.unwrap()
        }
    };
    scenarios::metrics_count_a_scenario(&pair, scrape).await;
    let mf = &pair.worker.mf;
    let body = text_update(1_000_000, "hello").to_string();
    assert_eq!(
        mf.post_body_to(&front, body.clone(), Some("wrong")).await,
        401
    );
    assert_eq!(mf.post_body_to(&front, body.clone(), None).await, 401);
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(300 * 1024));
    assert_eq!(mf.post_body_to(&front, big, Some(SECRET)).await, 413);
    let http = reqwest::Client::new();
    let status = |path: &'static str| {
        let (http, front) = (http.clone(), front.clone());
        async move {
            let r = http.get(format!("{front}{path}")).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(status("/healthz").await, (200, "ok".to_owned()));
    for path in ["/app/", "/api/me", "/admin/audit", "/hooks/ci"] {
        assert_eq!(status(path).await.0, 404, "{path}");
    }
    assert_eq!(status("/telegram/main").await.0, 405, "a webhook is a POST");
    let nope = http
        .post(format!("{front}/telegram/nope"))
        .header("x-telegram-bot-api-secret-token", SECRET)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(nope.status().as_u16(), 404, "no such connector");
    let inbox = mf
        .control(
            "sql",
            "SELECT count(*) AS n FROM kv WHERE key LIKE 'inbox/%'",
        )
        .await;
    assert_eq!(inbox[0]["n"], 0, "nothing left in the inbox");
}
