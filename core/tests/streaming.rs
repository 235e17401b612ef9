//! Streamed replies: in a private chat the model's text shows as a draft
//! (`sendMessageDraft`, checked against the Bot API spec) while it is written, then the
//! finished message is sent once; groups get only the message; a server that does not
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
