//! Watches on the real `App`: the model sets one with the `watch` tool; then the scheduler
//! checks the page every period with conditional GETs and no model call while it stays the
//! same; when its text changes one turn runs, once, and sees what changed, through a kill
//! between keeping the change and the turn; a failing page is put off and the person told
//! once at the third failure; `/watches` lists it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_core::Config;
use clawless_platform::HttpResponse;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const PAGE: &str = "https://shop.example/kettle";
const PERIOD: Duration = Duration::from_secs(15 * 60);

/// The page the test serves: its text (the ETag follows it), or a status to fail with, and
/// every request's `If-None-Match`.
#[derive(Default)]
struct Site {
    text: Mutex<String>,
    failing: Mutex<Option<u16>>,
    asked: Mutex<Vec<Option<String>>>,
}

impl Site {
    fn serve(&self, if_none_match: Option<&str>) -> HttpResponse {
        self.asked
            .lock()
            .unwrap()
            .push(if_none_match.map(str::to_owned));
        if let Some(status) = *self.failing.lock().unwrap() {
            return HttpResponse::new(status, "down");
        }
        let text = self.text.lock().unwrap().clone();
        let etag = etag_of(&text);
        if if_none_match == Some(etag.as_str()) {
            return HttpResponse::new(304, "").with_header("etag", etag);
        }
        let html = format!("<html><body><h1>Kettle</h1>{text}</body></html>");
        HttpResponse::new(200, html)
            .with_header("content-type", "text/html")
            .with_header("etag", etag)
    }

    fn set(&self, text: &str) {
        *self.text.lock().unwrap() = text.to_owned();
    }

    fn requests(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

/// The page's ETag: a hash of its text.
fn etag_of(text: &str) -> String {
    let h = text
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!("\"{h:x}\"")
}

fn harness(kill: Option<Arc<support::kill::Kill>>) -> (Harness, Arc<Site>) {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.tools.push("watch".into());
    let h = Harness::with_ports(Wire::Anthropic, config, |p, _, _| {
        if let Some(kill) = &kill {
            support::kill::install(p, kill);
        }
    });
    let site = Arc::new(Site::default());
    site.set("<p>Price: 10</p><p>In stock</p>");
    let served = site.clone();
    h.http.route(PAGE, move |req| {
        Ok(served.serve(req.header_value("if-none-match")))
    });
    (h, site)
}

fn private(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(10 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// The person asks; the model sets the watch and says so.
async fn set_watch(h: &Harness) {
    h.script(
        200,
        anthropic_tool_use(
            "w1",
            "watch",
            json!({"action": "create", "url": PAGE, "every": "15m", "task": "tell me what changed"}),
        ),
    );
    h.script(200, anthropic_text("I'm watching it."));
    assert_eq!(
        h.deliver_raw(&private(1, "watch the kettle page")).await,
        200
    );
    assert!(h.sent_texts().iter().any(|t| t == "I'm watching it."));
    let result = h.last_tool_result().to_string();
    assert!(
        result.contains("Watching https://shop.example/kettle as #"),
        "{result}"
    );
}

/// The owner's reminders as the panel's API lists them.
async fn panel_reminders(h: &Harness) -> Vec<Value> {
    use clawless_core::panel::auth::{sign_init_data, PanelKeys};
    use clawless_platform::Clock;
    let keys = PanelKeys::new(support::TOKEN, support::SECRET);
    let user = json!({"id": OWNER_ID, "first_name": "Ada"}).to_string();
    let at = (h.clock.now_ms() / 1000).to_string();
    let data = sign_init_data(
        &keys,
        &[("query_id", "AAH"), ("user", &user), ("auth_date", &at)],
    );
    let auth = format!("tma {data}");
    let reply = h
        .app
        .panel()
        .serve(clawless_core::panel::PanelRequest {
            method: "GET",
            path: "/api/reminders",
            authorization: Some(&auth),
            ..Default::default()
        })
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let v: Value = serde_json::from_str(&reply.body).unwrap();
    v["reminders"].as_array().cloned().unwrap_or_default()
}

/// Moves the clock by `by` and runs what is due, as the native runner does.
async fn tick(h: &Harness, by: Duration) {
    h.clock.advance(by);
    h.app.fire_due().await;
}

#[test]
fn an_unchanged_page_costs_no_model_call_and_a_change_one_turn() {
    block_on(async {
        let (h, site) = harness(None);
        set_watch(&h).await;
        let model_calls = h.llm_requests().len();
        let sent = h.sent_texts().len();
        // The first check learns the page; four periods of the same page: 304s.
        tick(&h, Duration::from_secs(2)).await;
        for _ in 0..4 {
            tick(&h, PERIOD).await;
        }
        let asked = site.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 5, "a check each period: {asked:?}");
        assert_eq!(
            asked[0], None,
            "the first check has nothing to compare with"
        );
        let etag = etag_of(&site.text.lock().unwrap());
        assert!(
            asked[1..]
                .iter()
                .all(|e| e.as_deref() == Some(etag.as_str())),
            "every later check is conditional: {asked:?}"
        );
        assert_eq!(h.llm_requests().len(), model_calls, "no model call");
        assert_eq!(h.sent_texts().len(), sent, "nothing said");

        // The page changes: one turn, which sees what changed.
        site.set("<p>Price: 12</p><p>In stock</p>");
        h.script(200, anthropic_text("The kettle now costs 12."));
        tick(&h, PERIOD).await;
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), model_calls + 1, "one model call");
        let told = reqs[model_calls]["messages"].to_string();
        assert!(
            told.contains("+ Price: 12") && told.contains("- Price: 10"),
            "{told}"
        );
        assert!(told.contains("tell me what changed"), "{told}");
        assert_eq!(h.sent_texts().last().unwrap(), "The kettle now costs 12.");
        // The next period, the same new page: nothing more.
        tick(&h, PERIOD).await;
        assert_eq!(h.llm_requests().len(), model_calls + 1);

        let metrics = h.app.admin().metrics_text().await;
        for (result, n) in [("learned", 1), ("not_modified", 5), ("changed", 1)] {
            let line = format!("clawless_watch_checks_total{{result=\"{result}\"}} {n}");
            assert!(metrics.contains(&line), "{line} in\n{metrics}");
        }
        // The panel's reminders show it as a watch.
        let panel = panel_reminders(&h).await;
        assert_eq!(panel[0]["watch"]["url"], PAGE, "{panel:?}");
        assert_eq!(panel[0]["watch"]["every"], "15 min", "{panel:?}");
        // `/watches` shows it.
        assert_eq!(h.deliver_raw(&private(2, "/watches")).await, 200);
        let listed = h.sent_texts().last().unwrap().clone();
        assert!(
            listed.contains("https://shop.example/kettle every 15 min"),
            "{listed}"
        );
        assert!(listed.contains("changed 15 min ago"), "{listed}");
        h.assert_spec_clean();
    });
}

#[test]
fn a_kill_between_keeping_the_change_and_its_turn_runs_the_turn_once() {
    block_on(async {
        let kill = Arc::new(support::kill::Kill::default());
        let (h, site) = harness(Some(kill.clone()));
        set_watch(&h).await;
        let model_calls = h.llm_requests().len();
        tick(&h, Duration::from_secs(2)).await;
        site.set("<p>Price: 9</p><p>In stock</p>");
        // Killed just after the change is kept, before the turn.
        kill.arm("put watch/main/", true);
        h.clock.advance(PERIOD);
        assert!(
            kill.run(h.app.fire_due()).await,
            "killed after keeping the change"
        );
        assert_eq!(h.llm_requests().len(), model_calls, "no turn yet");
        let fetched = site.requests();
        // The killed drainer's lease lapses; the sweep goes on with the job.
        h.script(200, anthropic_text("It is cheaper now: 9."));
        h.clock.advance(Duration::from_secs(30));
        h.app.scheduled().await;
        assert_eq!(
            site.requests(),
            fetched,
            "not fetched again: the kept change is used"
        );
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), model_calls + 1, "one turn");
        assert!(reqs[model_calls]["messages"]
            .to_string()
            .contains("+ Price: 9"));
        let answers = h.sent_texts();
        let n = answers
            .iter()
            .filter(|t| *t == "It is cheaper now: 9.")
            .count();
        assert_eq!(n, 1, "{answers:?}");
        // Later periods: the same page, no second turn.
        tick(&h, PERIOD).await;
        tick(&h, PERIOD).await;
        assert_eq!(h.llm_requests().len(), model_calls + 1);
    });
}

#[test]
fn a_failing_page_is_put_off_and_the_person_told_once() {
    block_on(async {
        let (h, site) = harness(None);
        set_watch(&h).await;
        tick(&h, Duration::from_secs(2)).await;
        *site.failing.lock().unwrap() = Some(503);
        let sent = h.sent_texts().len();
        // Failure 1 at the next period; 2 a period later; 3 after two more (doubled).
        for _ in 0..8 {
            tick(&h, PERIOD).await;
        }
        let told: Vec<String> = h.sent_texts()[sent..].to_vec();
        assert_eq!(told.len(), 1, "told once: {told:?}");
        assert!(
            told[0].contains("3 times in a row") && told[0].contains("HTTP 503"),
            "{told:?}"
        );
        let metrics = h.app.admin().metrics_text().await;
        assert!(
            metrics.contains("clawless_watch_checks_total{result=\"put_off\"}"),
            "{metrics}"
        );
        // Fewer requests than periods: the backoff.
        assert!(site.requests() < 1 + 8, "{}", site.requests());
        // Back up: the next try succeeds quietly and the failures reset.
        *site.failing.lock().unwrap() = None;
        for _ in 0..8 {
            tick(&h, PERIOD).await;
        }
        assert_eq!(h.sent_texts().len(), sent + 1);
        assert_eq!(h.deliver_raw(&private(3, "/watches")).await, 200);
        let listed = h.sent_texts().last().unwrap().clone();
        assert!(!listed.contains("failing"), "{listed}");
    });
}

#[test]
fn watches_are_bounded() {
    block_on(async {
        let (h, _) = harness(None);
        let bad = [
            (
                json!({"action": "create", "url": PAGE, "every": "1m", "task": "x"}),
                "at least 15 min",
            ),
            (
                json!({"action": "create", "url": "http://10.0.0.1/", "every": "1h", "task": "x"}),
                "cannot be watched",
            ),
            (
                json!({"action": "create", "url": PAGE, "every": "often", "task": "x"}),
                "not a period",
            ),
            (
                json!({"action": "create", "url": PAGE, "every": "1h"}),
                "needs a task",
            ),
            (json!({"action": "cancel", "id": 99}), "no watch #99"),
        ];
        for (i, (input, why)) in bad.into_iter().enumerate() {
            h.script(200, anthropic_tool_use("b", "watch", input.clone()));
            h.script(200, anthropic_text("ok"));
            h.deliver_raw(&private(10 + i as i64, "watch")).await;
            let result = h.last_tool_result().to_string();
            assert!(result.contains(why), "{input}: {result}");
        }
    });
}

#[test]
fn a_task_gated_by_a_watch_runs_only_after_a_change() {
    block_on(async {
        let (h, site) = harness(None);
        set_watch(&h).await;
        tick(&h, Duration::from_secs(2)).await;
        // A daily digest task that runs only when watch #1 saw a change.
        h.script(
            200,
            anthropic_tool_use(
                "t1",
                "schedule",
                json!({"action": "create", "cron": "0 * * * *", "prompt": "summarise the kettle page", "if_changed": 1}),
            ),
        );
        h.script(200, anthropic_text("Set."));
        assert_eq!(
            h.deliver_raw(&private(5, "every hour, if it changed, summarise"))
                .await,
            200
        );
        let result = h.last_tool_result().to_string();
        assert!(result.contains("when its watch saw a change"), "{result}");
        let calls = h.llm_requests().len();
        // Two hours of the same page: neither the watch nor the task calls the model.
        for _ in 0..8 {
            tick(&h, PERIOD).await;
        }
        assert_eq!(
            h.llm_requests().len(),
            calls,
            "no model call while nothing changed"
        );
        // The page changes: the watch's own turn, then the task's at its next hour, once.
        site.set("<p>Price: 15</p><p>In stock</p>");
        h.script(200, anthropic_text("Price went up to 15."));
        h.script(200, anthropic_text("Summary: the kettle costs 15 now."));
        for _ in 0..8 {
            tick(&h, PERIOD).await;
        }
        let asked: Vec<String> = h.llm_requests()[calls..]
            .iter()
            .map(|r| r["messages"].to_string())
            .collect();
        assert_eq!(asked.len(), 2, "the watch's turn and the task's: {asked:?}");
        assert!(
            asked[1].contains("summarise the kettle page"),
            "{}",
            asked[1]
        );
        let texts = h.sent_texts();
        assert_eq!(
            texts.iter().filter(|t| t.starts_with("Summary:")).count(),
            1,
            "{texts:?}"
        );
    });
}

/// A gated task counts changes from when it is set: one set after a change does not run for
/// it (a digest of news it never asked about).
#[test]
fn a_task_gated_after_a_change_does_not_run_for_it() {
    block_on(async {
        let (h, site) = harness(None);
        set_watch(&h).await;
        tick(&h, Duration::from_secs(2)).await;
        site.set("<p>Price: 15</p><p>In stock</p>");
        h.script(200, anthropic_text("Price went up to 15."));
        tick(&h, PERIOD).await;
        h.script(
            200,
            anthropic_tool_use(
                "t1",
                "schedule",
                json!({"action": "create", "in_minutes": 0.2, "prompt": "summarise the kettle page", "if_changed": 1}),
            ),
        );
        h.script(200, anthropic_text("Set."));
        assert_eq!(
            h.deliver_raw(&private(5, "in a moment, summarise")).await,
            200
        );
        let result = h.last_tool_result().to_string();
        assert!(result.contains("when its watch saw a change"), "{result}");
        let calls = h.llm_requests().len();
        tick(&h, Duration::from_secs(20)).await;
        assert_eq!(h.llm_requests().len(), calls, "{:?}", h.sent_texts());
    });
}
