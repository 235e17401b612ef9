//! Recovery within a minute: a dead drainer's lease lapses in seconds, a live one keeps its
//! lane through a slow model call by renewing beside it, the sweep drains lanes side by side,
//! and the scheduled job purges expired Kv rows without ever stopping for it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use clawless_core::inbox::LEASE_TTL;
use clawless_core::{keys, Drained, Lane};
use clawless_platform::kv::tap::{KvCall, Tapped, Verdict};
use clawless_platform::{async_trait, Clock, FakeClock, FakeHttp, Http, HttpRequest, HttpResponse};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use support::{Harness, Wire, LLM};

/// Another drainer takes `lane` (its lease row written as the inbox writes it).
async fn take_lease(h: &Harness, lane: &Lane, owner: &str) {
    let taken = h
        .platform
        .kv
        .put_if_absent(&keys::lease(lane), owner.as_bytes(), Some(LEASE_TTL))
        .await
        .unwrap();
    assert!(taken);
}

#[test]
fn a_crashed_drainers_lane_is_taken_over_within_half_a_minute() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        // A drainer took the lane and died (kill -9): its lease stays behind.
        take_lease(&h, &lane, "dead-drainer").await;
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
        take_lease(&h, &busy, "someone-else").await;
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

#[test]
fn the_scheduled_job_purges_expired_rows_and_goes_on_when_purging_fails() {
    block_on(async {
        for fail in [false, true] {
            let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
            let purges = Arc::new(AtomicUsize::new(0));
            let (seen, store) = (purges.clone(), Arc::new(std::sync::OnceLock::new()));
            let kept = store.clone();
            let h = Harness::with_ports(Wire::Anthropic, config, move |platform, _, _| {
                let _ = kept.set(platform.kv.clone());
                platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |call| {
                    if call.kind() != "purge" {
                        return Verdict::Run;
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                    if fail {
                        Verdict::Fail(clawless_platform::PortError::unavailable("purge refused"))
                    } else {
                        Verdict::Run
                    }
                }));
            });
            let kv = &h.platform.kv;
            kv.put("scratch/old", b"x", Some(Duration::from_secs(1)))
                .await
                .unwrap();
            h.clock.advance(Duration::from_secs(2));
            h.accept_only("private_text", 1).await.unwrap();
            h.script(200, anthropic_text("answered"));
            h.app.scheduled().await;
            assert_eq!(
                purges.load(Ordering::SeqCst),
                1,
                "one purge per scheduled run"
            );
            // What is left to purge in the store itself: the expired row, unless it went.
            let left = store.get().unwrap().purge_expired().await.unwrap();
            assert_eq!(
                left,
                u64::from(fail),
                "the expired row went unless purging failed"
            );
            assert_eq!(
                h.sent_texts(),
                ["answered"],
                "the sweep runs after the purge (purge failing: {fail})"
            );
        }
    });
}

#[test]
fn an_update_accepted_while_the_drainer_lets_go_is_not_stranded() {
    block_on(async {
        let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        let lane = &Lane::new("main:111111111");
        let update = clawless_testkit::fixtures::update("private_text", 2);
        let late = clawless_core::inbox::Job::new("main".into(), 2, update, 0);
        let job = (
            format!("inbox/{lane}/{:020}", 2),
            serde_json::to_vec(&late).unwrap(),
        );
        // When the lane's lease is released, first one more job is stored in that lane: an
        // update accepted by another invocation in the instant the drainer let go.
        let job = std::sync::Mutex::new(Some(job));
        let h = Harness::with_ports(Wire::Anthropic, config, move |platform, _, _| {
            let inner = platform.kv.clone();
            platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |call| {
                if let KvCall::CompareAndSwap {
                    key,
                    expected: Some(_),
                    new: None,
                } = call
                {
                    let late = job.lock().unwrap().take();
                    if let (true, Some((k, v))) = (key.starts_with("lease/"), late) {
                        // The in-memory store answers at its first poll.
                        let put = futures::FutureExt::now_or_never(inner.put(&k, &v, None));
                        assert!(matches!(put, Some(Ok(()))), "{put:?}");
                    }
                }
                Verdict::Run
            }));
        });
        h.script(200, anthropic_text("first"));
        h.script(200, anthropic_text("second"));
        let accepted = h.accept_only("private_text", 1).await.unwrap();
        assert_eq!(&accepted, lane);
        // One drain: the job that arrived as it released the lease is answered too.
        assert_eq!(h.drain(lane).await, Drained::Idle);
        assert_eq!(h.sent_texts(), ["first", "second"]);
    });
}

/// A redelivery that races its twin's finish: its `seen` read comes before the twin's turn
/// writes `seen`, its put after the twin's job is gone. Neither the accept nor a drainer that
/// takes the job at once runs it again.
#[test]
fn a_redelivery_racing_its_twins_finish_is_not_run_again() {
    block_on(async {
        let config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        let lane = &Lane::new("main:111111111");
        let job_key = format!("inbox/{lane}/{:020}", 1);
        let seen_key = keys::seen(&"main".into(), 1);
        // Armed for the redelivery: as its job is put, the twin finishes first (`seen`
        // written, its job removed), as `Inbox::finish` does.
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let arm = armed.clone();
        let h = Harness::with_ports(Wire::Anthropic, config, move |platform, _, _| {
            let inner = platform.kv.clone();
            platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |call| {
                if let KvCall::PutIfAbsent { key, .. } = call {
                    if *key == job_key && arm.swap(false, Ordering::SeqCst) {
                        let now = futures::FutureExt::now_or_never;
                        assert!(matches!(
                            now(inner.put(&seen_key, b"1", None)),
                            Some(Ok(()))
                        ));
                        assert!(matches!(now(inner.delete(&job_key)), Some(Ok(()))));
                    }
                }
                Verdict::Run
            }));
        });
        h.accept_only("private_text", 1).await.unwrap();
        armed.store(true, Ordering::SeqCst);
        let again = h
            .app
            .handle_webhook(
                "main",
                Some(support::SECRET),
                clawless_testkit::fixtures::update("private_text", 1)
                    .to_string()
                    .as_bytes(),
            )
            .await;
        assert_eq!(again.status, 200);
        assert_eq!(again.lane, None, "accepted before, not again");
        assert!(h.head_job(lane).await.is_none(), "its job taken back");

        // The drainer that took the put in the instant before it was taken back.
        let job = clawless_core::inbox::Job::new(
            "main".into(),
            1,
            clawless_testkit::fixtures::update("private_text", 1),
            0,
        );
        h.platform
            .kv
            .put(
                &format!("inbox/{lane}/{:020}", 1),
                &serde_json::to_vec(&job).unwrap(),
                None,
            )
            .await
            .unwrap();
        h.script(200, anthropic_text("twice"));
        assert_eq!(h.drain(lane).await, Drained::Idle);
        assert!(h.sent_texts().is_empty(), "{:?}", h.sent_texts());
        assert!(h.head_job(lane).await.is_none());
    });
}
