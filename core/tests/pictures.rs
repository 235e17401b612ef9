//! Pictures, whole flow: `generate_image` makes one picture (an OpenAI-compatible
//! `/images/generations` fake), keeps it in the conversation's workspace and the answer sends
//! it once with `sendPhoto` (its bytes as made), the text after it, the spend counted; a
//! content-policy refusal, a failing service and a body that is not a picture each end in a
//! sentence and the text; `/imagine` makes one without the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use base64::Engine as _;
use clawless_core::Config;
use clawless_platform::HttpResponse;
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use clawless_testkit::spec::multipart_file_bytes;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const IMAGES: &str = "http://images.test";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\x00\x10JFIF a lighthouse \x00\xff";

fn harness(answer: fn() -> HttpResponse) -> Harness {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let h = Harness::with_env(
        Wire::Anthropic,
        config,
        &[("IMAGE_BASE_URL", IMAGES), ("IMAGE_API_KEY", "img-key")],
    )
    .unwrap();
    h.http.route(IMAGES, move |_| Ok(answer()));
    h
}

fn picture() -> HttpResponse {
    let b64 = base64::engine::general_purpose::STANDARD.encode(JPEG);
    HttpResponse::json(200, &json!({"created": 1, "data": [{"b64_json": b64}]}))
}

fn text(id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", id);
    u["message"]["message_id"] = json!(100 + id);
    u["message"]["text"] = json!(text);
    u["message"].as_object_mut().unwrap().remove("entities");
    u
}

/// The photos `sendPhoto` was given: (file name, bytes, caption).
fn photos(h: &Harness) -> Vec<(String, Vec<u8>, String)> {
    let calls = h.calls("sendPhoto");
    h.http
        .requests()
        .iter()
        .filter(|r| r.url.ends_with("/sendPhoto"))
        .filter_map(|r| multipart_file_bytes(r.header_value("content-type"), &r.body))
        .zip(calls)
        .map(|((name, bytes), call)| {
            (
                name,
                bytes,
                call["caption"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn image_requests(h: &Harness) -> Vec<clawless_platform::HttpRequest> {
    h.http
        .requests()
        .into_iter()
        .filter(|r| r.url.starts_with(IMAGES))
        .collect()
}

fn asks_for_a_picture(h: &Harness) {
    h.script(
        200,
        anthropic_tool_use(
            "tu1",
            "generate_image",
            json!({"prompt": "a lighthouse at dusk", "caption": "Your lighthouse"}),
        ),
    );
}

#[test]
fn a_picture_is_made_kept_and_sent_once_with_the_answer() {
    block_on(async {
        let h = harness(picture);
        asks_for_a_picture(&h);
        h.script(200, anthropic_text("Here is your lighthouse."));
        h.deliver_raw(&text(1, "draw me a lighthouse")).await;

        let asked = image_requests(&h);
        assert_eq!(asked.len(), 1, "one picture");
        assert_eq!(asked[0].url, format!("{IMAGES}/images/generations"));
        assert_eq!(
            asked[0].header_value("authorization"),
            Some("Bearer img-key")
        );
        let body: Value = serde_json::from_slice(&asked[0].body).unwrap();
        assert_eq!(body["prompt"], "a lighthouse at dusk");
        assert_eq!(
            (body["n"].as_i64(), body["size"].as_str()),
            (Some(1), Some("1024x1024"))
        );

        // The photo first, its bytes as made and the model's caption; then the text.
        let sent = photos(&h);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, "picture.jpg");
        assert_eq!(sent[0].1, JPEG);
        assert_eq!(sent[0].2, "Your lighthouse");
        assert_eq!(h.sent_texts(), vec!["Here is your lighthouse."]);
        let order: Vec<String> = h
            .http
            .requests()
            .iter()
            .filter_map(|r| clawless_testkit::spec::method_of(&r.url).map(str::to_owned))
            .filter(|m| m == "sendPhoto" || m == "sendMessage")
            .collect();
        assert_eq!(order, ["sendPhoto", "sendMessage"]);
        // gpt-image-1 is asked for a medium-quality JPEG, as priced.
        assert_eq!(
            (body["quality"].as_str(), body["output_format"].as_str()),
            (Some("medium"), Some("jpeg"))
        );

        // Kept in the owner's workspace under pictures/.
        let root = format!("workspace/assistant/main/u{}/pictures/", fixtures::OWNER_ID);
        let kept = h.platform.files.list(&root).await.unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0].ends_with(".jpg"));
        assert_eq!(h.platform.files.read(&kept[0]).await.unwrap(), JPEG);

        // The model was told it goes with the answer.
        let result = h.llm_requests()[1].to_string();
        assert!(result.contains("sent with your answer"), "{result}");

        // $0.042 for gpt-image-1 at 1024x1024, beside the model's $0.00021.
        h.deliver_raw(&text(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(report.contains("($0.0422)"), "{report}");
        h.assert_spec_clean();
    });
}

fn policy_refusal() -> HttpResponse {
    HttpResponse::json(
        400,
        &json!({"error": {"code": "content_policy_violation", "message": "Your request was rejected as a result of our safety system."}}),
    )
}
fn down() -> HttpResponse {
    HttpResponse::json(503, &json!({"error": {"message": "overloaded"}}))
}
fn a_link() -> HttpResponse {
    HttpResponse::json(
        200,
        &json!({"data": [{"url": "https://images.test/a.png"}]}),
    )
}
fn not_a_picture() -> HttpResponse {
    let b64 = base64::engine::general_purpose::STANDARD.encode(b"<html>no</html>");
    HttpResponse::json(200, &json!({"data": [{"b64_json": b64}]}))
}

#[test]
fn a_refused_or_failed_picture_is_told_to_the_model_and_the_text_arrives() {
    block_on(async {
        for (answer, told) in [
            (
                policy_refusal as fn() -> HttpResponse,
                "refused this prompt",
            ),
            (down, "failed (transient)"),
            (not_a_picture, "failed (failed)"),
            (a_link, "failed (failed)"),
        ] {
            let h = harness(answer);
            asks_for_a_picture(&h);
            h.script(200, anthropic_text("I could not draw that."));
            h.deliver_raw(&text(1, "draw me a lighthouse")).await;
            assert!(photos(&h).is_empty());
            let result = h.llm_requests()[1].to_string();
            assert!(result.contains(told), "{told}: {result}");
            assert!(!result.contains("overloaded"), "no raw body: {result}");
            assert_eq!(h.sent_texts(), vec!["I could not draw that."]);
            h.assert_spec_clean();
        }
    });
}

#[test]
fn imagine_makes_a_picture_without_the_model() {
    block_on(async {
        let h = harness(picture);
        h.deliver_raw(&text(1, "/imagine a red kite over the sea"))
            .await;
        assert!(h.llm_requests().is_empty(), "no model call");
        let sent = photos(&h);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1, JPEG);
        assert_eq!(sent[0].2, "a red kite over the sea");

        h.deliver_raw(&text(2, "/imagine")).await;
        assert!(h.sent_texts()[0].contains("Say what to draw"));
        h.assert_spec_clean();

        let h = harness(policy_refusal);
        h.deliver_raw(&text(1, "/imagine something refused")).await;
        assert!(photos(&h).is_empty());
        assert!(
            h.sent_texts()[0].contains("refused this prompt"),
            "{:?}",
            h.sent_texts()
        );
    });
}

#[test]
fn without_an_image_service_the_tool_is_not_offered_and_imagine_says_so() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("ok"));
        h.deliver_raw(&text(1, "hello")).await;
        let tools = h.llm_requests()[0]["tools"].to_string();
        assert!(!tools.contains("generate_image"), "{tools}");
        h.deliver_raw(&text(2, "/imagine a cat")).await;
        assert!(h.sent_texts()[1].contains("No image service is set"));
    });
}

#[test]
fn gemini_draws_with_its_image_output_and_a_safety_block_is_a_refusal() {
    block_on(async {
        const GEMINI: &str = "http://gemini.test";
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let env = [("GEMINI_API_KEY", "g-key"), ("GEMINI_BASE_URL", GEMINI)];
        let h = Harness::with_env(Wire::Anthropic, config, &env).unwrap();
        h.http.route(GEMINI, |r| {
            let asked: Value = serde_json::from_slice(&r.body).unwrap();
            let prompt = asked["contents"][0]["parts"][0]["text"].as_str().unwrap();
            Ok(if prompt.contains("forbidden") {
                HttpResponse::json(
                    200,
                    &json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}),
                )
            } else {
                let data = base64::engine::general_purpose::STANDARD.encode(JPEG);
                HttpResponse::json(
                    200,
                    &json!({"candidates": [{"content": {"parts": [
                    {"text": "Here it is."},
                    {"inlineData": {"mimeType": "image/jpeg", "data": data}}
                ]}, "finishReason": "STOP"}]}),
                )
            })
        });
        h.deliver_raw(&text(1, "/imagine a lighthouse")).await;
        let asked = image_requests_at(&h, GEMINI);
        assert_eq!(asked.len(), 1);
        assert_eq!(
            asked[0].url,
            format!("{GEMINI}/v1beta/models/gemini-2.5-flash-image:generateContent")
        );
        assert_eq!(asked[0].header_value("x-goog-api-key"), Some("g-key"));
        let body: Value = serde_json::from_slice(&asked[0].body).unwrap();
        assert_eq!(
            body["generationConfig"]["responseModalities"],
            json!(["IMAGE"])
        );
        assert_eq!(photos(&h)[0].1, JPEG);

        h.deliver_raw(&text(2, "/imagine something forbidden"))
            .await;
        assert_eq!(photos(&h).len(), 1);
        assert!(
            h.sent_texts()[0].contains("refused this prompt"),
            "{:?}",
            h.sent_texts()
        );
        h.assert_spec_clean();
    });
}

fn image_requests_at(h: &Harness, base: &str) -> Vec<clawless_platform::HttpRequest> {
    h.http
        .requests()
        .into_iter()
        .filter(|r| r.url.starts_with(base))
        .collect()
}

#[test]
fn one_answer_makes_at_most_four_pictures() {
    block_on(async {
        let h = harness(picture);
        let calls: Vec<Value> = (0..6)
            .map(|i| {
                json!({"type": "tool_use", "id": format!("tu{i}"), "name": "generate_image",
                "input": {"prompt": format!("picture {i}")}})
            })
            .collect();
        h.script(
            200,
            json!({"id": "m1", "type": "message", "role": "assistant", "model": "claude-test",
                "content": calls, "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 5}}),
        );
        h.script(200, anthropic_text("Four of them."));
        h.deliver_raw(&text(1, "draw six")).await;
        assert_eq!(
            image_requests(&h).len(),
            4,
            "four made, two refused before paying"
        );
        assert_eq!(photos(&h).len(), 4);
        let results = h.llm_requests()[1].to_string();
        assert!(results.contains("has made its 4 pictures"), "{results}");
        assert_eq!(h.sent_texts(), vec!["Four of them."]);
    });
}
