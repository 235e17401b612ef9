//! Media in, whole flow: photos reach the model as images in each wire format, voice notes
//! are transcribed once (even when the turn is retried), an album is one turn, text files are
//! read in, PDFs go to models that read them, and what cannot be read gets a plain reply.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use base64::Engine as _;
use clawless_core::Config;
use clawless_platform::HttpResponse;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, openai_text};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire, TOKEN};

const STT: &str = "http://stt.test";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0 a tiny jpeg";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn config() -> Config {
    Config::load(&clawless_core::config::embedded()).unwrap()
}

/// A harness whose transcription service is the fake at [`STT`], answering `transcript`.
fn with_stt(wire: Wire, transcript: &'static str) -> Harness {
    let h = Harness::with_env(
        wire,
        config(),
        &[
            ("TRANSCRIBE_BASE_URL", STT),
            ("TRANSCRIBE_API_KEY", "stt-key"),
        ],
    )
    .unwrap();
    h.http.route(STT, move |_| {
        Ok(HttpResponse::json(200, &json!({ "text": transcript })))
    });
    h
}

/// A private message from the owner with `fields` (photo, voice, document …).
fn message(id: i64, fields: Value) -> Value {
    let mut u = fixtures::update("private_text", id);
    let m = u["message"].as_object_mut().unwrap();
    m.remove("text");
    m.remove("entities");
    m.extend(fields.as_object().unwrap().clone());
    u
}

fn photo(id: &str, size: usize) -> Value {
    json!([{"file_id": format!("{id}-small"), "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1},
           {"file_id": id, "file_unique_id": "l", "width": 800, "height": 600, "file_size": size}])
}

fn stt_requests(h: &Harness) -> Vec<clawless_platform::HttpRequest> {
    h.http
        .requests()
        .into_iter()
        .filter(|r| r.url.starts_with(STT))
        .collect()
}

#[test]
fn a_photo_with_a_caption_reaches_an_anthropic_model_as_an_image() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.file("p1", JPEG);
        h.script(200, anthropic_text("A tiny jpeg."));
        let u = message(
            1,
            json!({"photo": photo("p1", JPEG.len()), "caption": "What is this?"}),
        );
        assert_eq!(h.deliver_raw(&u).await, 200);
        let req = &h.llm_requests()[0];
        let content = &req["messages"][0]["content"];
        assert_eq!(
            content[0],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": b64(JPEG)}})
        );
        // The newest turn's last block is marked for the prompt cache.
        assert_eq!(
            content[1],
            json!({"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}})
        );
        assert_eq!(h.sent_texts(), vec!["A tiny jpeg."]);
        // The largest size was fetched, not the thumbnail.
        assert_eq!(h.calls("getFile")[0]["file_id"], "p1");

        // The history keeps a line, not the bytes.
        h.script(200, anthropic_text("ok"));
        h.deliver("private_text", 2).await;
        let next = h.llm_requests()[1].to_string();
        assert!(next.contains("An image was attached here"), "{next}");
        assert!(!next.contains(&b64(JPEG)), "image bytes kept in history");
        h.assert_spec_clean();
    });
}

#[test]
fn a_photo_reaches_an_openai_model_as_a_data_url() {
    block_on(async {
        let h = Harness::new(Wire::OpenAi);
        h.file("p1", JPEG);
        h.script(200, openai_text("A tiny jpeg."));
        let u = message(
            1,
            json!({"photo": photo("p1", JPEG.len()), "caption": "What is this?"}),
        );
        h.deliver_raw(&u).await;
        let req = &h.llm_requests()[0];
        let user = &req["messages"][1];
        assert_eq!(user["role"], "user");
        assert_eq!(
            user["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{}", b64(JPEG))}}
            ])
        );
        assert_eq!(h.sent_texts(), vec!["A tiny jpeg."]);
    });
}

#[test]
fn a_photo_over_the_cap_gets_a_plain_reply_and_no_download() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let too_big = 6 * 1024 * 1024;
        let u = message(
            1,
            json!({"photo": [
            {"file_id": "big", "file_unique_id": "b", "width": 5000, "height": 5000, "file_size": too_big}]}),
        );
        h.deliver_raw(&u).await;
        assert!(h.llm_requests().is_empty());
        assert!(h.calls("getFile").is_empty(), "not fetched");
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1);
        assert!(
            sent[0].contains("too large") && sent[0].contains("5 MB"),
            "{sent:?}"
        );

        // A file whose size Telegram did not say is cut at the cap while downloading.
        h.file("unsized", vec![0u8; too_big]);
        let u = message(
            2,
            json!({"photo": [
            {"file_id": "unsized", "file_unique_id": "u", "width": 5000, "height": 5000}]}),
        );
        h.deliver_raw(&u).await;
        assert!(h.llm_requests().is_empty());
        assert!(h.sent_texts()[1].contains("too large"));
    });
}

#[test]
fn a_voice_note_is_transcribed_and_answered() {
    block_on(async {
        let h = with_stt(Wire::Anthropic, "what is the weather like");
        h.file("v1", b"OggS voice".to_vec());
        h.script(200, anthropic_text("Sunny."));
        let u = message(
            1,
            json!({"voice": {"file_id": "v1", "file_unique_id": "v", "duration": 4, "mime_type": "audio/ogg", "file_size": 10}}),
        );
        h.deliver_raw(&u).await;
        let stt = stt_requests(&h);
        assert_eq!(stt.len(), 1);
        assert!(stt[0].url.ends_with("/audio/transcriptions"));
        assert_eq!(stt[0].header_value("authorization"), Some("Bearer stt-key"));
        let form = String::from_utf8_lossy(&stt[0].body).into_owned();
        assert!(form.contains("name=\"model\"\r\n\r\nwhisper-1"), "{form}");
        assert!(form.contains("filename=\"voice.ogg\"") && form.contains("OggS voice"));
        let asked = h.llm_requests()[0]["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            asked.contains("voice note from the user, transcribed")
                && asked.contains("what is the weather like"),
            "{asked}"
        );
        assert_eq!(h.sent_texts(), vec!["Sunny."]);
        h.assert_spec_clean();
    });
}

#[test]
fn a_retried_voice_turn_does_not_transcribe_again() {
    block_on(async {
        let h = with_stt(Wire::Anthropic, "remind me of the milk");
        h.file("v1", b"OggS voice".to_vec());
        // The model fails every attempt of the first try: the turn is retried later.
        for _ in 0..3 {
            h.script(500, json!({"error": "down"}));
        }
        let u = message(
            1,
            json!({"voice": {"file_id": "v1", "file_unique_id": "v", "duration": 4}}),
        );
        h.deliver_raw(&u).await;
        assert!(h.sent_texts().is_empty(), "not answered yet");
        let lane = clawless_core::Lane::of_chat(&"main".into(), OWNER_ID);
        let job = h
            .head_job(&lane)
            .await
            .expect("the job waits for its retry");
        assert_eq!(job.attempts, 1);
        h.script(200, anthropic_text("Milk noted."));
        h.clock.advance(std::time::Duration::from_secs(60));
        h.drain(&lane).await;
        assert_eq!(h.sent_texts(), vec!["Milk noted."]);
        assert_eq!(stt_requests(&h).len(), 1, "transcribed once");
        let last = h.llm_requests().last().unwrap().to_string();
        assert!(last.contains("remind me of the milk"));
    });
}

#[test]
fn a_failing_transcription_is_retried_then_explained() {
    block_on(async {
        let h =
            Harness::with_env(Wire::Anthropic, config(), &[("TRANSCRIBE_BASE_URL", STT)]).unwrap();
        h.http.route(STT, |_| {
            Ok(HttpResponse::json(503, &json!({"error": "busy"})))
        });
        h.file("v1", b"OggS".to_vec());
        let u = message(
            1,
            json!({"voice": {"file_id": "v1", "file_unique_id": "v", "duration": 4}}),
        );
        h.deliver_raw(&u).await;
        let lane = clawless_core::Lane::of_chat(&"main".into(), OWNER_ID);
        for _ in 0..5 {
            h.clock.advance(std::time::Duration::from_secs(120));
            h.drain(&lane).await;
        }
        assert!(h.llm_requests().is_empty());
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].contains("transcription service") && sent[0].contains("HTTP 503"),
            "{sent:?}"
        );
        assert!(!sent[0].contains(TOKEN));
    });
}

#[test]
fn voice_without_a_transcriber_or_over_the_limits_gets_a_plain_reply() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let u = message(
            1,
            json!({"voice": {"file_id": "v1", "file_unique_id": "v", "duration": 4}}),
        );
        h.deliver_raw(&u).await;
        assert!(
            h.sent_texts()[0].contains("GROQ_API_KEY"),
            "{:?}",
            h.sent_texts()
        );

        let h = with_stt(Wire::Anthropic, "never");
        let long = message(
            2,
            json!({"voice": {"file_id": "v2", "file_unique_id": "v", "duration": 3600}}),
        );
        h.deliver_raw(&long).await;
        assert!(
            h.sent_texts()[0].contains("too long"),
            "{:?}",
            h.sent_texts()
        );
        let big = message(
            3,
            json!({"audio": {"file_id": "a3", "file_unique_id": "a", "duration": 60, "file_size": 30_000_000}}),
        );
        h.deliver_raw(&big).await;
        assert!(
            h.sent_texts()[1].contains("too large"),
            "{:?}",
            h.sent_texts()
        );
        assert!(stt_requests(&h).is_empty());
        assert!(h.llm_requests().is_empty());
    });
}

#[test]
fn an_album_is_one_turn() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.file("a1", b"first".to_vec());
        h.file("a2", b"second".to_vec());
        h.file("a3", b"third".to_vec());
        let item = |id: i64, file: &str, caption: Option<&str>| {
            let mut u = message(
                id,
                json!({"photo": photo(file, 5), "media_group_id": "album-1"}),
            );
            if let Some(c) = caption {
                u["message"]["caption"] = json!(c);
            }
            u
        };
        let reply = h
            .app
            .handle_webhook(
                "main",
                Some(support::SECRET),
                item(1, "a1", Some("Which is best?")).to_string().as_bytes(),
            )
            .await;
        for (id, file) in [(2, "a2"), (3, "a3")] {
            let u = item(id, file, None).to_string();
            h.app
                .handle_webhook("main", Some(support::SECRET), u.as_bytes())
                .await;
        }
        h.script(200, anthropic_text("The second."));
        h.drain(&reply.lane.unwrap()).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 1, "one turn; sent {:?}", h.sent_texts());
        let content = requests[0]["messages"][0]["content"]
            .as_array()
            .unwrap()
            .clone();
        let images: Vec<&str> = content
            .iter()
            .filter(|b| b["type"] == "image")
            .map(|b| b["source"]["data"].as_str().unwrap())
            .collect();
        assert_eq!(images, vec![b64(b"first"), b64(b"second"), b64(b"third")]);
        assert_eq!(content.last().unwrap()["text"], "Which is best?");
        assert_eq!(h.sent_texts(), vec!["The second."]);
        // The other items are finished: re-delivered, they are dropped.
        let again = h
            .app
            .handle_webhook(
                "main",
                Some(support::SECRET),
                item(2, "a2", None).to_string().as_bytes(),
            )
            .await;
        assert_eq!(again.lane, None);
    });
}

#[test]
fn a_text_file_is_read_into_the_message() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.file("d1", "name,qty\nmilk,2\n".as_bytes().to_vec());
        h.script(200, anthropic_text("Two milks."));
        let u = message(
            1,
            json!({"caption": "How many?", "document": {
            "file_id": "d1", "file_unique_id": "d", "file_name": "list.csv", "mime_type": "text/csv", "file_size": 16}}),
        );
        h.deliver_raw(&u).await;
        let asked = h.llm_requests()[0]["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            asked.contains("\"list.csv\"") && asked.contains("milk,2"),
            "{asked}"
        );
        assert!(asked.ends_with("How many?"), "{asked}");

        // Not UTF-8: said so, no model call.
        h.file("d2", vec![0xff, 0xfe, 0x00, 0x01]);
        let u = message(
            2,
            json!({"document": {"file_id": "d2", "file_unique_id": "e", "file_name": "x.txt", "file_size": 4}}),
        );
        h.deliver_raw(&u).await;
        assert!(
            h.sent_texts()[1].contains("not text"),
            "{:?}",
            h.sent_texts()
        );
        // Too large: said so, nothing fetched.
        let u = message(
            3,
            json!({"document": {"file_id": "d3", "file_unique_id": "f", "file_name": "big.log", "file_size": 10_000_000}}),
        );
        h.deliver_raw(&u).await;
        assert!(
            h.sent_texts()[2].contains("too large"),
            "{:?}",
            h.sent_texts()
        );
        assert_eq!(h.llm_requests().len(), 1);
        // Something else entirely: described.
        let u = message(
            4,
            json!({"document": {"file_id": "d4", "file_unique_id": "g", "file_name": "a.zip", "mime_type": "application/zip"}}),
        );
        h.deliver_raw(&u).await;
        assert!(
            h.sent_texts()[3].contains("cannot read the file \"a.zip\""),
            "{:?}",
            h.sent_texts()
        );
    });
}

#[test]
fn a_pdf_goes_to_a_model_that_reads_pdfs_and_is_refused_plainly_otherwise() {
    block_on(async {
        let pdf = b"%PDF-1.7 tiny".to_vec();
        let doc = json!({"file_id": "pdf1", "file_unique_id": "p", "file_name": "a.pdf", "mime_type": "application/pdf", "file_size": pdf.len()});
        let h = Harness::new(Wire::Anthropic);
        h.file("pdf1", pdf.clone());
        h.script(200, anthropic_text("A tiny PDF."));
        h.deliver_raw(&message(1, json!({"document": doc.clone()})))
            .await;
        assert_eq!(
            h.llm_requests()[0]["messages"][0]["content"][0],
            json!({"type": "document", "title": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(&pdf)}, "cache_control": {"type": "ephemeral"}})
        );

        // The OpenAI harness talks to a compatible server, not OpenAI: no PDFs.
        let h = Harness::new(Wire::OpenAi);
        h.file("pdf1", pdf);
        h.deliver_raw(&message(1, json!({"document": doc}))).await;
        assert!(h.llm_requests().is_empty());
        assert!(
            h.sent_texts()[0].contains("cannot read PDFs"),
            "{:?}",
            h.sent_texts()
        );
    });
}

#[test]
fn no_error_names_the_bot_token() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // Telegram's file server fails every time.
        h.http
            .route(format!("https://api.telegram.org/file/bot{TOKEN}/"), |_| {
                Err(clawless_platform::PortError::unavailable(
                    "connection refused",
                ))
            });
        h.file("p1", JPEG);
        let u = message(1, json!({"photo": photo("p1", JPEG.len())}));
        h.deliver_raw(&u).await;
        let lane = clawless_core::Lane::of_chat(&"main".into(), OWNER_ID);
        for _ in 0..5 {
            h.clock.advance(std::time::Duration::from_secs(120));
            h.drain(&lane).await;
        }
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].contains("Telegram did not answer"), "{sent:?}");
        assert!(!sent[0].contains(TOKEN) && !sent[0].contains("TEST-TOKEN"));
    });
}

#[test]
fn a_model_without_vision_says_so_plainly() {
    block_on(async {
        let mut config = config();
        if let Some(p) = config.providers.get_mut("anthropic") {
            p.no_vision.push("claude-sonnet-4-5".into());
        }
        let h = Harness::with_config(Wire::Anthropic, config);
        h.file("p1", JPEG);
        let u = message(
            1,
            json!({"photo": photo("p1", JPEG.len()), "caption": "What is this?"}),
        );
        h.deliver_raw(&u).await;
        assert!(h.llm_requests().is_empty(), "no model call");
        assert!(h.calls("getFile").is_empty(), "nothing downloaded");
        let sent = h.sent_texts();
        assert!(
            sent.len() == 1
                && sent[0].contains("cannot see images")
                && sent[0].contains("anthropic/claude-sonnet-4-5"),
            "{sent:?}"
        );
    });
}
