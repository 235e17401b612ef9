//! Streamed replies: in a private chat the model's text shows as a draft
//! (`sendMessageDraft`, checked against the Bot API spec) while it is written, then the
//! finished message is sent once; groups get only the message, or with `streaming.groups` a
//! placeholder edited as it is written and then into the answer; a server that does not
//! stream costs no draft.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_platform::http::FakeStream;
use clawless_testkit::fixtures;
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use support::{Harness, Wire, LLM};

/// A recorded Anthropic stream ("Hello there!"), in pieces of 40 bytes.
fn recorded() -> FakeStream {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/streams/anthropic-text.sse"
    );
    let bytes = std::fs::read(path).unwrap();
    let mut s = FakeStream::new(200, bytes.chunks(40).map(<[u8]>::to_vec));
    s.headers
        .push(("content-type".into(), "text/event-stream".into()));
    s
}

#[test]
fn a_private_reply_shows_as_a_draft_then_arrives_once() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.http.route_stream(LLM, |req| {
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
            assert_eq!(body["stream"], true, "the model is asked to stream");
            Ok(recorded())
        });
        h.deliver("private_text", 1).await;
        let drafts = h.calls("sendMessageDraft");
        assert!(!drafts.is_empty(), "a draft was shown");
        let last = drafts.last().unwrap();
        assert_eq!(last["text"], "Hello there!");
        assert_eq!(last["chat_id"], fixtures::OWNER_ID);
        assert!(last["draft_id"].as_i64().unwrap() != 0);
        // Each draft is a prefix of the answer: nothing shown that the answer lacks.
        for d in &drafts {
            assert!(
                "Hello there!".starts_with(d["text"].as_str().unwrap()),
                "{d}"
            );
        }
        assert_eq!(h.sent_texts(), vec!["Hello there!"], "the message, once");
        h.assert_spec_clean();
    });
}

#[test]
fn groups_and_servers_that_do_not_stream_get_no_drafts() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.http.route_stream(LLM, |req| {
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
            assert!(body.get("stream").is_none(), "groups do not stream");
            let mut s = FakeStream::new(200, [anthropic_text("Hello there!").to_string()]);
            s.headers
                .push(("content-type".into(), "application/json".into()));
            Ok(s)
        });
        h.deliver("group_mention", 1).await;
        assert!(h.calls("sendMessageDraft").is_empty());
        assert_eq!(h.sent_texts(), vec!["Hello there!"]);

        // A server answering the streamed request with the whole JSON answer.
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("all at once"));
        h.deliver("private_text", 1).await;
        assert!(h.calls("sendMessageDraft").is_empty());
        assert_eq!(h.sent_texts(), vec!["all at once"]);
    });
}

#[test]
fn drafts_can_be_turned_off() {
    block_on(async {
        let mut config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        config.streaming.private = false;
        let h = Harness::with_config(Wire::Anthropic, config);
        h.http.route(LLM, |req| {
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
            assert!(body.get("stream").is_none(), "not asked to stream");
            Ok(clawless_platform::HttpResponse::json(
                200,
                &anthropic_text("plain"),
            ))
        });
        h.deliver("private_text", 1).await;
        assert!(h.calls("sendMessageDraft").is_empty());
        assert_eq!(h.sent_texts(), vec!["plain"]);
    });
}

fn group_streaming() -> Harness {
    let mut config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
    config.streaming.groups = true;
    Harness::with_config(Wire::Anthropic, config)
}

/// Every edit of the placeholder shows a prefix of the answer (or "…", withdrawn), and the
/// last shows the answer.
fn assert_edits_end_in(h: &Harness, answer: &str) {
    let edits = h.calls("editMessageText");
    assert!(!edits.is_empty(), "the placeholder became the answer");
    for e in &edits {
        let t = e["text"].as_str().unwrap();
        assert!(t == "…" || answer.starts_with(t), "{e}");
        assert_eq!(e["chat_id"], fixtures::GROUP_ID);
    }
    let last = edits.last().unwrap();
    assert_eq!(last["text"], answer);
    assert_eq!(
        last["parse_mode"], "HTML",
        "the last edit is the rendered answer"
    );
}

#[test]
fn a_group_reply_streams_into_one_placeholder_that_becomes_the_answer() {
    block_on(async {
        let h = group_streaming();
        h.http.route_stream(LLM, |req| {
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
            assert_eq!(body["stream"], true, "the group's reply streams");
            Ok(recorded())
        });
        h.deliver("group_mention", 1).await;
        let sent = h.calls("sendMessage");
        assert_eq!(sent.len(), 1, "one message: the placeholder: {sent:?}");
        assert_eq!(sent[0]["chat_id"], fixtures::GROUP_ID);
        assert_eq!(
            sent[0]["reply_parameters"]["message_id"], 21,
            "it quotes the question"
        );
        assert!("Hello there!".starts_with(sent[0]["text"].as_str().unwrap()));
        let id = h.calls("editMessageText")[0]["message_id"].clone();
        assert!(h
            .calls("editMessageText")
            .iter()
            .all(|e| e["message_id"] == id));
        assert_edits_end_in(&h, "Hello there!");
        assert!(
            h.calls("sendMessageDraft").is_empty(),
            "no drafts in groups"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn a_retried_group_turn_edits_the_placeholder_it_already_sent() {
    block_on(async {
        let h = group_streaming();
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let n = calls.clone();
        h.http.route_stream(LLM, move |_| {
            let full = recorded();
            Ok(match n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                // The first tries break off half-way (a lost connection).
                0..=3 => {
                    let mut cut =
                        FakeStream::new(200, full.pieces.into_iter().take(23).map(Result::unwrap));
                    cut.headers = full.headers;
                    cut.then_fail(clawless_platform::PortError::unavailable(
                        "connection reset",
                    ))
                }
                _ => full,
            })
        });
        let lane = h.accept_only("group_mention", 1).await.unwrap();
        let first = h.drain(&lane).await;
        assert!(
            matches!(first, clawless_core::Drained::RetryAt(_)),
            "{first:?}"
        );
        assert_eq!(h.calls("sendMessage").len(), 1, "the placeholder went out");
        h.clock.advance(std::time::Duration::from_secs(3600));
        let mut rounds = 0;
        while h.drain(&lane).await != clawless_core::Drained::Idle {
            h.clock.advance(std::time::Duration::from_secs(3600));
            rounds += 1;
            assert!(rounds < 5, "the turn finishes");
        }
        assert_eq!(
            h.calls("sendMessage").len(),
            1,
            "no second placeholder, no new message"
        );
        assert_edits_end_in(&h, "Hello there!");
        h.assert_spec_clean();
    });
}

#[test]
fn a_group_reply_from_a_server_that_does_not_stream_still_arrives_once() {
    block_on(async {
        let h = group_streaming();
        h.script(200, anthropic_text("all at once"));
        h.deliver("group_mention", 1).await;
        // The whole text comes in one piece as the call ends: at most a placeholder, which
        // the answer then replaces; never two messages.
        let sent = h.calls("sendMessage");
        assert_eq!(sent.len(), 1, "{sent:?}");
        let edits = h.calls("editMessageText");
        let shown = edits.last().map_or(&sent[0]["text"], |e| &e["text"]);
        assert_eq!(shown, "all at once");
        h.assert_spec_clean();
    });
}

/// A Bot API whose first sendMessage reaches Telegram at once but answers only after many
/// polls: a placeholder still being sent when the model has finished.
struct SlowFirstSend {
    inner: std::sync::Arc<clawless_platform::FakeHttp>,
    first: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl clawless_platform::Http for SlowFirstSend {
    async fn send(
        &self,
        req: clawless_platform::HttpRequest,
    ) -> clawless_platform::Result<clawless_platform::HttpResponse> {
        let slow = req.url.ends_with("/sendMessage")
            && self.first.swap(false, std::sync::atomic::Ordering::SeqCst);
        let resp = self.inner.send(req).await;
        if slow {
            for _ in 0..50 {
                let mut yielded = false;
                std::future::poll_fn(|cx| {
                    if yielded {
                        return std::task::Poll::Ready(());
                    }
                    yielded = true;
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                })
                .await;
            }
        }
        resp
    }
    async fn send_streaming(
        &self,
        req: clawless_platform::HttpRequest,
    ) -> clawless_platform::Result<clawless_platform::HttpStreamResponse> {
        self.inner.send_streaming(req).await
    }
}

#[test]
fn a_turn_ending_while_its_placeholder_is_sent_edits_that_placeholder() {
    block_on(async {
        let mut config = clawless_core::Config::load(&clawless_core::config::embedded()).unwrap();
        config.streaming.groups = true;
        let h = Harness::with_http(Wire::Anthropic, config, |fake, _| {
            std::sync::Arc::new(SlowFirstSend {
                inner: fake,
                first: true.into(),
            })
        });
        h.http.route_stream(LLM, |_| Ok(recorded()));
        h.deliver("group_mention", 1).await;
        assert_eq!(h.calls("sendMessage").len(), 1, "the placeholder only");
        assert_edits_end_in(&h, "Hello there!");
        h.assert_spec_clean();
    });
}
