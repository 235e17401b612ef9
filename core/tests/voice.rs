//! Voice replies, whole flow: a voice note is answered with a voice note (its body checked
//! as OGG) and the text; `/voice off` and `/voice on` change that per chat; the speech's cost
//! joins the person's spend, checked against the cap before it is spoken; a process killed
//! while the voice note is sent sends it once after its restart, spoken and paid once; a speech
//! service that fails, answers with no audio or with something else, or a voice note Telegram
//! refuses, each end in one short line and the text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::Arc;

use clawless_core::Config;
use clawless_platform::HttpResponse;
use clawless_testkit::fixtures;
use clawless_testkit::llm::anthropic_text;
use clawless_testkit::spec::multipart_file_bytes;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const STT: &str = "http://stt.test";
const TTS: &str = "http://tts.test";
const OGG: &[u8] = b"OggS\x00\x02\x00\x00 an opus stream \xff\xfe";

const SERVICES: [(&str, &str); 3] = [
    ("TRANSCRIBE_BASE_URL", STT),
    ("SPEECH_BASE_URL", TTS),
    ("SPEECH_API_KEY", "tts-key"),
];

/// A harness that transcribes at [`STT`] and speaks at [`TTS`], answering `speech`.
fn harness(speech: fn() -> HttpResponse) -> Harness {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let h = Harness::with_env(Wire::Anthropic, config, &SERVICES).unwrap();
    routes(h, speech)
}

fn routes(h: Harness, speech: fn() -> HttpResponse) -> Harness {
    h.http.route(STT, |_| {
        Ok(HttpResponse::json(
            200,
            &json!({"text": "how is the weather"}),
        ))
    });
    h.http.route(TTS, move |_| Ok(speech()));
    h
}

fn ogg() -> HttpResponse {
    HttpResponse::new(200, OGG.to_vec()).with_header("content-type", "audio/ogg")
}

fn update(id: i64, fields: Value) -> Value {
    let mut u = fixtures::update("private_text", id);
    let m = u["message"].as_object_mut().unwrap();
    m.remove("entities");
    m.remove("text");
    m["message_id"] = json!(100 + id);
    m.extend(fields.as_object().unwrap().clone());
    u
}

fn voice_note(h: &Harness, id: i64) -> Value {
    let file = format!("v{id}");
    h.file(&file, b"OggS question".to_vec());
    update(
        id,
        json!({"voice": {"file_id": file, "file_unique_id": format!("u{id}"), "duration": 3, "mime_type": "audio/ogg", "file_size": 13}}),
    )
}

fn text(id: i64, text: &str) -> Value {
    update(id, json!({ "text": text }))
}

/// The audio files `sendVoice` was given: (file name, bytes).
fn voices(h: &Harness) -> Vec<(String, Vec<u8>)> {
    h.http
        .requests()
        .iter()
        .filter(|r| r.url.ends_with("/sendVoice"))
        .filter_map(|r| multipart_file_bytes(r.header_value("content-type"), &r.body))
        .collect()
}

fn speech_requests(h: &Harness) -> Vec<Value> {
    h.http
        .requests()
        .iter()
        .filter(|r| r.url.starts_with(TTS))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[test]
fn a_voice_note_is_answered_with_a_voice_note_and_its_text() {
    block_on(async {
        let h = harness(ogg);
        let answer = "Sunny and **warm**. ".repeat(25);
        h.script(200, anthropic_text(&answer));
        h.deliver_raw(&voice_note(&h, 1)).await;

        let asked = speech_requests(&h);
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0]["response_format"], "opus");
        assert_eq!(asked[0]["model"], "tts-1");
        let spoken = asked[0]["input"].as_str().unwrap();
        assert!(spoken.starts_with("Sunny and warm. Sunny") && !spoken.contains("**"));
        let tts = h.http.requests();
        let tts = tts.iter().find(|r| r.url.starts_with(TTS)).unwrap();
        assert_eq!(tts.url, format!("{TTS}/audio/speech"));
        assert_eq!(tts.header_value("authorization"), Some("Bearer tts-key"));

        // The voice note first, its body the speech as it came; then the text.
        let sent = voices(&h);
        assert_eq!(sent, vec![("answer.ogg".to_owned(), OGG.to_vec())]);
        assert!(sent[0].1.starts_with(b"OggS"));
        assert_eq!(h.calls("sendVoice")[0]["chat_id"], fixtures::OWNER_ID);
        let texts = h.sent_texts();
        assert_eq!(texts.len(), 1);
        assert!(texts[0].starts_with("Sunny and <b>warm</b>."), "{texts:?}");
        let order: Vec<String> = h
            .http
            .requests()
            .iter()
            .filter_map(|r| clawless_testkit::spec::method_of(&r.url).map(str::to_owned))
            .filter(|m| m == "sendVoice" || m == "sendMessage")
            .collect();
        assert_eq!(order, ["sendVoice", "sendMessage"]);

        // 399 characters spoken at $15 a million ($0.005985), beside the model's $0.000105.
        h.deliver_raw(&text(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(
            report.contains("Today: you 15 tokens ($0.0061)"),
            "{report}"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn voice_off_answers_in_text_and_voice_on_speaks_every_answer() {
    block_on(async {
        let h = harness(ogg);
        h.deliver_raw(&text(1, "/voice")).await;
        assert!(h.sent_texts()[0].contains("auto: a voice note gets a voice note back"));

        h.deliver_raw(&text(2, "/voice off")).await;
        assert!(
            h.sent_texts()[1].contains("now off"),
            "{:?}",
            h.sent_texts()
        );
        h.script(200, anthropic_text("Rainy."));
        h.deliver_raw(&voice_note(&h, 3)).await;
        assert!(voices(&h).is_empty(), "off: no voice note");
        assert_eq!(h.sent_texts().last().unwrap(), "Rainy.");

        h.deliver_raw(&text(4, "/voice on")).await;
        h.script(200, anthropic_text("Typed question, spoken answer."));
        h.deliver_raw(&text(5, "what time is it")).await;
        assert_eq!(voices(&h).len(), 1, "on: a typed message is spoken to");
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "Typed question, spoken answer."
        );

        h.deliver_raw(&text(6, "/voice loud")).await;
        assert!(h.sent_texts().last().unwrap().contains("Say /voice on"));

        // Auto (the default) speaks only to a voice note.
        h.deliver_raw(&text(7, "/voice auto")).await;
        h.script(200, anthropic_text("Typed."));
        h.deliver_raw(&text(8, "hello")).await;
        assert_eq!(voices(&h).len(), 1);
        h.assert_spec_clean();
    });
}

fn refused() -> HttpResponse {
    HttpResponse::json(500, &json!({"error": {"message": "overloaded"}}))
}
fn empty() -> HttpResponse {
    HttpResponse::new(200, Vec::new())
}
fn not_audio() -> HttpResponse {
    HttpResponse::json(200, &json!({"error": "this is JSON, not audio"}))
}

#[test]
fn a_failed_speech_ends_in_a_short_line_and_the_text() {
    block_on(async {
        for (speech, said) in [
            (refused as fn() -> HttpResponse, "did not answer"),
            (empty, "sent no usable audio"),
            (not_audio, "sent no usable audio"),
        ] {
            let h = harness(speech);
            h.script(200, anthropic_text("The text answer."));
            h.deliver_raw(&voice_note(&h, 1)).await;
            assert!(voices(&h).is_empty());
            let texts = h.sent_texts();
            assert_eq!(texts.len(), 2, "{texts:?}");
            assert!(
                texts[0].starts_with("(I could not say this aloud: the speech service tts.test")
                    && texts[0].contains(said),
                "{texts:?}"
            );
            assert!(!texts[0].contains("overloaded"), "no raw body: {texts:?}");
            assert_eq!(texts[1], "The text answer.");
            h.assert_spec_clean();
        }
    });
}

#[test]
fn a_voice_note_telegram_refuses_ends_in_a_short_line_and_the_text() {
    block_on(async {
        let h = harness(ogg);
        // The first send is the voice note's: refused as a person's privacy settings do.
        h.tg_script.lock().unwrap().push_back(Some((
            400,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: VOICE_MESSAGES_FORBIDDEN"}),
        )));
        h.script(200, anthropic_text("Text anyway."));
        h.deliver_raw(&voice_note(&h, 1)).await;
        let texts = h.sent_texts();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].contains("did not take this answer as a voice note"));
        assert_eq!(texts[1], "Text anyway.");
    });
}

/// The voice note's upload dies before Telegram has it (the process is killed): after the
/// restart the kept audio is sent, once, without speaking it again or counting it twice, and
/// then it is no longer kept.
#[test]
fn a_voice_note_cut_by_a_kill_is_sent_once_spoken_and_paid_once() {
    block_on(async {
        let kill = Arc::new(support::kill::Kill::default());
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let armed = kill.clone();
        let h = Harness::with_ports_env(Wire::Anthropic, config, &SERVICES, move |p, _, _| {
            support::kill::install(p, &armed)
        });
        let h = routes(h, ogg);
        h.script(200, anthropic_text("Cloudy, then sun."));
        let reply = h
            .app
            .handle_webhook(
                "main",
                Some(support::SECRET),
                voice_note(&h, 1).to_string().as_bytes(),
            )
            .await;
        let lane = reply.lane.unwrap();
        kill.arm("/sendVoice", false);
        assert!(kill.run(h.app.drain(&lane)).await, "killed at sendVoice");
        assert_eq!(speech_requests(&h).len(), 1);
        assert!(voices(&h).is_empty());
        h.clock
            .advance(clawless_core::inbox::LEASE_TTL + std::time::Duration::from_secs(1));
        h.drain(&lane).await;

        assert_eq!(speech_requests(&h).len(), 1, "not spoken again");
        assert_eq!(voices(&h), vec![("answer.ogg".to_owned(), OGG.to_vec())]);
        assert_eq!(h.sent_texts(), ["Cloudy, then sun."]);
        let kept = h.platform.files.list("spoken").await.unwrap();
        assert!(
            kept.is_empty(),
            "the kept audio is gone once sent: {kept:?}"
        );
        // 17 characters spoken at $15 a million: $0.000255 once, beside the model's $0.000105.
        h.deliver_raw(&text(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(report.contains("($0.0004)"), "{report}");
    });
}

/// Speech the spend cap has no room for is not asked for: one line says so, the text goes.
#[test]
fn speech_past_the_spend_cap_is_not_made() {
    block_on(async {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        // Room for the model's answer ($0.000105), not for speaking 399 characters ($0.006).
        config.limits.daily_usd_per_user = Some(0.001);
        let h = routes(
            Harness::with_env(Wire::Anthropic, config, &SERVICES).unwrap(),
            ogg,
        );
        h.script(200, anthropic_text(&"Sunny and **warm**. ".repeat(25)));
        h.deliver_raw(&voice_note(&h, 1)).await;
        assert!(speech_requests(&h).is_empty(), "no speech asked for");
        assert!(voices(&h).is_empty());
        let texts = h.sent_texts();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(
            texts[0].starts_with("(Not said aloud: speaking it would pass your daily spend cap."),
            "{texts:?}"
        );
        assert!(texts[1].starts_with("Sunny and <b>warm</b>."));
        h.assert_spec_clean();
    });
}
