//! Recovery within a minute: a dead drainer's lease lapses in seconds, a live one keeps its
//! lane through a slow model call by renewing beside it, and the sweep drains lanes side by
//! side.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use clawless_core::Drained;
use clawless_platform::{async_trait, Clock, FakeClock, FakeHttp, Http, HttpRequest, HttpResponse};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use support::{Harness, Wire, LLM};

#[test]
fn a_crashed_drainers_lane_is_taken_over_within_half_a_minute() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        // A drainer took the lane and died (kill -9): its lease stays behind.
        assert!(h.app.inbox.try_lease(&lane, "dead-drainer").await.unwrap());
        assert_eq!(h.drain(&lane).await, Drained::Busy);
        h.clock.advance(Duration::from_secs(25));
        h.script(200, anthropic_text("back"));
        h.app.sweep().await.unwrap();
        assert_eq!(h.sent_texts(), ["back"]);
    });
}

/// Model calls that take `delay` of the fake clock: pending (asking to be polled again) until
/// the clock has moved that far since the call began. Gives up after many polls so a build
/// where nothing moves the clock fails instead of hanging.
struct SlowModel {
    inner: Arc<FakeHttp>,
    clock: Arc<FakeClock>,
    delay: Duration,
    polls: AtomicUsize,
}

#[async_trait]
impl Http for SlowModel {
    async fn send(&self, req: HttpRequest) -> clawless_platform::Result<HttpResponse> {
        if req.url.starts_with(LLM) {
            let until = self.clock.now_ms() + self.delay.as_millis() as u64;
            std::future::poll_fn(|cx| {
                if self.clock.now_ms() >= until
                    || self.polls.fetch_add(1, Ordering::SeqCst) > 10_000
                {
                    Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
        }
        self.inner.send(req).await
    }
}

#[test]
fn a_live_drainer_keeps_its_lane_through_a_slow_model_call() {
    block_on(async {
        let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        let h = Harness::with_http(Wire::Anthropic, config, |fake, clock| {
            Arc::new(SlowModel {
                inner: fake,
                clock,
                delay: Duration::from_secs(60),
                polls: AtomicUsize::new(0),
            })
        });
        let lane = h.accept_only("private_text", 1).await.unwrap();
        h.script(200, anthropic_text("slow answer"));
        let start = h.clock.now_ms();
        let clock = h.clock.clone();
        let (first, second) = futures::join!(h.app.drain(&lane), async {
            // Half a minute into the model call, well past the lease's life, another drainer
            // (the cron sweep) tries the lane.
            std::future::poll_fn(|cx| {
                if clock.now_ms() >= start + 30_000 {
                    Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
            h.app.drain(&lane).await
        });
        assert_eq!(
            second.unwrap(),
            Drained::Busy,
            "the live drainer kept its lane"
        );
        assert_eq!(first.unwrap(), Drained::Idle);
        assert_eq!(h.sent_texts(), ["slow answer"]);
        assert_eq!(h.llm_requests().len(), 1, "the model was asked once");
        assert!(
            h.calls("sendChatAction").len() >= 3,
            "typing kept up beside the call"
        );
    });
}

#[test]
fn a_chat_with_a_huge_backlog_never_hides_the_others_from_the_sweep() {
    block_on(async {
        let mut config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        config.connectors.get_mut("main").unwrap().allowed_users = vec![111_111_111, 222_222_222];
        let h = Harness::with_config(Wire::Anthropic, config);
        // 1,500 updates waiting in one chat whose drainer holds the lane.
        let mut busy = None;
        for id in 1..=1500 {
            busy = h.accept_only("private_text", id).await;
        }
        let busy = busy.unwrap();
        assert!(h.app.inbox.try_lease(&busy, "someone-else").await.unwrap());
        // One update in another chat, whose lane sorts after the busy one.
        let mut other = clawless_testkit::fixtures::update("private_text", 5000);
        other["message"]["from"]["id"] = serde_json::json!(222_222_222);
        other["message"]["chat"]["id"] = serde_json::json!(222_222_222);
        let reply = h
            .app
            .handle_webhook("main", Some(support::SECRET), other.to_string().as_bytes())
            .await;
        assert_eq!(reply.status, 200);
        h.script(200, anthropic_text("not forgotten"));
        h.app.sweep().await.unwrap();
        assert_eq!(h.sent_texts(), ["not forgotten"]);
    });
}
