//! The outbound limiter on the whole flow: a long answer, a busy group and a group whose
//! slots are taken, with every Bot API send recorded at the fake clock's time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::Drained;
use clawless_platform::{Clock, FakeClock, FakeHttp, Http, HttpRequest, HttpResponse};
use clawless_testkit::fixtures::GROUP_ID;
use clawless_testkit::llm::anthropic_text;
use clawless_testkit::spec::{call_body, method_of};
use futures::executor::block_on;
use support::{Harness, Wire};

/// Every message sent: (chat, the fake clock's ms).
type Sends = Arc<Mutex<Vec<(i64, u64)>>>;

/// Records each sendMessage / sendDocument with its chat and time, then lets the fake answer.
struct Recorder {
    inner: Arc<FakeHttp>,
    clock: Arc<FakeClock>,
    sends: Sends,
}

#[async_trait]
impl Http for Recorder {
    async fn send(&self, req: HttpRequest) -> clawless_platform::Result<HttpResponse> {
        if let Some(method @ ("sendMessage" | "sendDocument")) = method_of(&req.url) {
            let body = call_body(req.header_value("content-type"), &req.body);
            let chat = body["chat_id"]
                .as_i64()
                .or_else(|| body["chat_id"].as_str().and_then(|s| s.parse().ok()))
                .unwrap_or_else(|| panic!("{method} without a chat"));
            self.sends.lock().unwrap().push((chat, self.clock.now_ms()));
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

fn harness(still: bool) -> (Harness, Sends) {
    let sends = Sends::default();
    let s = sends.clone();
    let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
    let h = Harness::with_ports(Wire::Anthropic, config, move |platform, http, clock| {
        platform.http = Arc::new(Recorder {
            inner: http,
            clock: clock.clone(),
            sends: s,
        });
        if still {
            platform.clock = Arc::new(StillClock(clock));
        }
    });
    (h, sends)
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
fn a_long_answer_goes_out_one_part_a_second() {
    block_on(async {
        let (h, sends) = harness(false);
        let long = (0..14)
            .map(|i| format!("Paragraph {i}: {}", "lorem ipsum ".repeat(70)))
            .collect::<Vec<_>>()
            .join("\n\n");
        h.script(200, anthropic_text(&long));
        h.deliver("private_text", 1).await;
        let times: Vec<u64> = sends.lock().unwrap().iter().map(|s| s.1).collect();
        assert!(times.len() >= 3, "split into {} parts", times.len());
        assert_eq!(most_in_window(&times, 1_000), 1, "sent at {times:?}");
        assert!(
            times.windows(2).all(|w| w[1] - w[0] <= 1_000),
            "no part waits longer than it must: {times:?}"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn a_busy_group_gets_at_most_twenty_messages_a_minute() {
    block_on(async {
        let (h, sends) = harness(false);
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
        assert_eq!(most_in_window(&times, 1_000), 1, "sent at {times:?}");
    });
}

#[test]
fn a_group_without_free_slots_waits_without_spending_attempts() {
    block_on(async {
        // The clock stands still while sends wait, as when other drainers fill the group's
        // slots: the waits pile up until one would pass the limiter's bound.
        let (h, sends) = harness(true);
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
            job.checkpoint.is_some(),
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
