//! The outbound limiter on the whole flow: a quick exchange, a long answer, a busy group, a
//! soak over many chats, and a group whose slots are taken, with every Bot API send recorded
//! at the fake clock's time and judged by Telegram's limits as the testkit models them (a
//! send past one is answered 429).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::Drained;
use clawless_platform::{Clock, FakeClock, FakeHttp, Http, HttpRequest, HttpResponse};
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID};
use clawless_testkit::limits::Limits;
use clawless_testkit::llm::anthropic_text;
use clawless_testkit::spec::{call_body, method_of};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

/// Every message sent: (chat, the fake clock's ms).
type Sends = Arc<Mutex<Vec<(i64, u64)>>>;
/// Every send Telegram's limits refused with 429: what it broke.
type Refused = Arc<Mutex<Vec<String>>>;

/// Judges each sendMessage / sendDocument / editMessageText by Telegram's limits at the fake
/// clock's time: past one it answers 429 as Telegram does; else records it and lets the fake
/// answer.
struct Recorder {
    inner: Arc<FakeHttp>,
    clock: Arc<FakeClock>,
    sends: Sends,
    limits: Mutex<Limits>,
    refused: Refused,
}

#[async_trait]
impl Http for Recorder {
    async fn send(&self, req: HttpRequest) -> clawless_platform::Result<HttpResponse> {
        if let Some(method @ ("sendMessage" | "sendDocument" | "editMessageText")) =
            method_of(&req.url)
        {
            let body = call_body(req.header_value("content-type"), &req.body);
            let chat = body["chat_id"]
                .as_i64()
                .or_else(|| body["chat_id"].as_str().and_then(|s| s.parse().ok()))
                .unwrap_or_else(|| panic!("{method} without a chat"));
            let now = self.clock.now_ms();
            let new_message = method != "editMessageText";
            if let Err(why) = self.limits.lock().unwrap().send(chat, new_message, now) {
                self.refused.lock().unwrap().push(why);
                let body = json!({"ok": false, "error_code": 429,
                    "description": "Too Many Requests: retry after 5",
                    "parameters": {"retry_after": 5}});
                return Ok(HttpResponse::new(429, body.to_string()));
            }
            if new_message {
                self.sends.lock().unwrap().push((chat, now));
            }
        }
        self.inner.send(req).await
    }
}

/// A clock whose `sleep` returns at once without moving time: what a drainer sees when many
/// others send beside it, so waits pile up.
struct StillClock(Arc<FakeClock>);

#[async_trait]
impl Clock for StillClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
    async fn sleep(&self, _: Duration) {}
}

fn harness(still: bool) -> (Harness, Sends, Refused) {
    let sends = Sends::default();
    let refused = Refused::default();
    let (s, r) = (sends.clone(), refused.clone());
    let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
    let h = Harness::with_ports(Wire::Anthropic, config, move |platform, http, clock| {
        platform.http = Arc::new(Recorder {
            inner: http,
            clock: clock.clone(),
            sends: s,
            limits: Mutex::default(),
            refused: r,
        });
        if still {
            platform.clock = Arc::new(StillClock(clock));
        }
    });
    (h, sends, refused)
}

/// The update `fixture` as if sent in the chat `chat` (same sender).
fn in_chat(fixture: &str, id: i64, chat: i64) -> serde_json::Value {
    let mut u = fixtures::update(fixture, id);
    u["message"]["chat"]["id"] = json!(chat);
    u
}

/// The most sends of `times` in any window `[t, t + len)`.
fn most_in_window(times: &[u64], len: u64) -> usize {
    times
        .iter()
        .map(|&t| times.iter().filter(|&&u| u >= t && u < t + len).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn a_quick_exchange_is_never_held_back() {
    block_on(async {
        // 30 messages one after another, each answered by an instant model before the next:
        // the first twenty replies leave at once, the rest are paced, none refused. (The fake
        // clock moves when any task sleeps, the typing indicator's too, so the paced ones'
        // exact instants are not asserted.)
        let (h, sends, refused) = harness(false);
        let start = h.clock.now_ms();
        for id in 1..=30 {
            h.script(200, anthropic_text(&format!("answer {id}")));
            assert_eq!(h.deliver("private_text", id).await, 200);
        }
        assert_eq!(h.sent_texts().len(), 30, "every message answered");
        let times: Vec<u64> = sends.lock().unwrap().iter().map(|s| s.1).collect();
        assert!(
            times[..20].iter().all(|&t| t == start),
            "no reply within the allowance waited: {times:?}"
        );
        assert!(
            most_in_window(&times, 5_000) <= 25,
            "past it, paced: {times:?}"
        );
        assert!(
            refused.lock().unwrap().is_empty(),
            "{:?}",
            refused.lock().unwrap()
        );
        h.assert_spec_clean();
    });
}

#[test]
fn a_long_answer_goes_out_at_once_within_the_limits() {
    block_on(async {
        let (h, sends, refused) = harness(false);
        let long = (0..14)
            .map(|i| format!("Paragraph {i}: {}", "lorem ipsum ".repeat(70)))
            .collect::<Vec<_>>()
            .join("\n\n");
        h.script(200, anthropic_text(&long));
        h.deliver("private_text", 1).await;
        let times: Vec<u64> = sends.lock().unwrap().iter().map(|s| s.1).collect();
        assert!(times.len() >= 3, "split into {} parts", times.len());
        assert!(
            times.iter().all(|&t| t == times[0]),
            "no part waits: {times:?}"
        );
        assert!(refused.lock().unwrap().is_empty());
        h.assert_spec_clean();
    });
}

#[test]
fn a_busy_group_gets_at_most_twenty_messages_a_minute() {
    block_on(async {
        let (h, sends, refused) = harness(false);
        for id in 1..=30 {
            h.script(200, anthropic_text(&format!("answer {id}")));
            h.deliver("group_mention", id).await;
        }
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 30, "every mention answered");
        for id in 1..=30 {
            assert_eq!(
                sent.iter()
                    .filter(|t| **t == format!("answer {id}"))
                    .count(),
                1
            );
        }
        let times: Vec<u64> = sends.lock().unwrap().iter().map(|s| s.1).collect();
        assert!(sends.lock().unwrap().iter().all(|s| s.0 == GROUP_ID));
        assert!(most_in_window(&times, 60_000) <= 20, "sent at {times:?}");
        assert!(
            refused.lock().unwrap().is_empty(),
            "{:?}",
            refused.lock().unwrap()
        );
    });
}

#[test]
fn a_soak_over_many_chats_draws_no_429() {
    block_on(async {
        // Private chats and groups, quick replies and long multi-part answers, interleaved:
        // 400 answers, every one delivered once, none refused by Telegram's limits.
        let (h, sends, refused) = harness(false);
        let long = (0..10)
            .map(|i| format!("Part {i}: {}", "words ".repeat(150)))
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut expected = 0;
        for id in 1..=400i64 {
            let (fixture, chat) = match id % 5 {
                0 => ("group_mention", GROUP_ID),
                1 => ("group_mention", GROUP_ID - 1 - id % 3),
                _ => ("private_text", OWNER_ID),
            };
            let text = if id % 7 == 0 {
                long.clone()
            } else {
                format!("answer {id}")
            };
            h.script(200, anthropic_text(&text));
            assert_eq!(h.deliver_raw(&in_chat(fixture, id, chat)).await, 200);
            expected += 1;
            if id % 40 == 0 {
                h.clock.advance(Duration::from_millis(700));
            }
        }
        let refused = refused.lock().unwrap();
        assert!(
            refused.is_empty(),
            "{} refused: {:?}",
            refused.len(),
            &refused[..refused.len().min(5)]
        );
        let sent = h.sent_texts();
        for id in 1..=400i64 {
            if id % 7 != 0 {
                let n = sent
                    .iter()
                    .filter(|t| **t == format!("answer {id}"))
                    .count();
                assert_eq!(n, 1, "answer {id}");
            }
        }
        assert!(sends.lock().unwrap().len() >= expected);
        h.assert_spec_clean();
    });
}

#[test]
fn a_group_without_free_slots_waits_without_spending_attempts() {
    block_on(async {
        // The clock stands still while sends wait, as when other drainers fill the group's
        // slots: the waits pile up until one would pass the limiter's bound.
        let (h, sends, _) = harness(true);
        let mut deferred = None;
        for id in 1..=30 {
            h.script(200, anthropic_text(&format!("answer {id}")));
            let lane = h.accept_only("group_mention", id).await.unwrap();
            match h.drain(&lane).await {
                Drained::Idle => {}
                Drained::RetryAt(at) => {
                    deferred = Some((id, lane, at));
                    break;
                }
                other => panic!("update {id}: {other:?}"),
            }
        }
        let (id, lane, at) = deferred.expect("a send was put off");
        assert!(id > 10, "the first ten go out at once ({id})");
        let before = sends.lock().unwrap().len();
        assert_eq!(before as i64, id - 1, "the put-off answer was not sent");
        let job = h.head_job(&lane).await.unwrap();
        assert_eq!(
            job.attempts, 0,
            "waiting for a slot is not a failed attempt"
        );
        assert!(
            job.checkpoint().is_some(),
            "the answer is kept, not asked again"
        );
        assert!(at > h.clock.now_ms());
        h.clock
            .advance(Duration::from_millis(at - h.clock.now_ms()));
        assert_eq!(h.drain(&lane).await, Drained::Idle);
        assert_eq!(sends.lock().unwrap().len(), before + 1);
        assert_eq!(
            h.sent_texts().last().map(String::as_str),
            Some(format!("answer {id}").as_str())
        );
        assert_eq!(
            h.llm_requests().len() as i64,
            id,
            "one model call per update"
        );
    });
}
