//! The scenarios themselves: what is posted, and what the fakes must have seen. Each text is
//! unique across the list (the model's log is searched by it) and avoids the words the fake
//! model reacts to ("time", "long", "remember: ", "model down") unless it means them.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use super::{Ctx, Scenario};
use crate::servers::{
    recall_after_new_as, MODEL_429_ONCE, MODEL_500_ONCE, SEND_429_ONCE, SEND_502_ONCE,
};

/// How long an answer may take.
const LIMIT: Duration = Duration::from_secs(20);
/// How long an answer may take when a job is retried after a backoff: native retries at its
/// next sweep (every 15 s), the serverless shells inline.
const RETRY_LIMIT: Duration = Duration::from_secs(40);

super::scenarios! {
    /// A private text is acknowledged at once and answered once, in HTML, unquoted.
    fn private_text_is_answered_once(c) {
        let started = Instant::now();
        c.post(&c.text("hello there")).await;
        let ack = started.elapsed();
        assert!(ack < Duration::from_secs(2), "ack took {ack:?}");
        assert_eq!(c.answers(c.user, 1, LIMIT).await, ["You said: hello there"]);
        assert_eq!(c.asked("hello there").len(), 1);
        let body = &c.bodies_to(c.user)[0];
        assert_eq!(body["parse_mode"], "HTML");
        assert!(body.get("reply_parameters").is_none(), "private replies are not quoted");
    }

    /// A wrong or missing secret is 401 and stores nothing: the same update with the secret is
    /// then answered once.
    fn a_wrong_secret_is_refused(c) {
        let update = c.text("a secret handshake");
        for secret in [Some("wrong"), None] {
            assert_eq!(c.post_raw(update.to_string(), secret).await, 401, "{secret:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(c.asked("secret handshake").is_empty(), "a 401 never reaches the model");
        assert!(c.sent_to(c.user).is_empty());
        c.post(&update).await;
        assert_eq!(c.answers(c.user, 1, LIMIT).await, ["You said: a secret handshake"]);
        assert_eq!(c.asked("secret handshake").len(), 1);
    }

    /// An update delivered again while pending, and again after its answer, is answered once.
    fn a_duplicate_delivery_is_answered_once(c) {
        let update = c.text("only once please");
        c.post(&update).await;
        c.post(&update).await;
        c.answers(c.user, 1, LIMIT).await;
        c.post(&update).await;
        assert_eq!(c.answers(c.user, 1, LIMIT).await, ["You said: only once please"]);
        assert_eq!(c.asked("only once please").len(), 1);
    }

    /// Several updates of one chat, posted back to back, are asked and answered in order.
    fn one_chat_is_answered_in_order(c) {
        let words = ["alpha", "bravo", "charlie", "delta"];
        for w in words {
            c.post(&c.text(&format!("in order {w}"))).await;
        }
        let expected: Vec<String> =
            words.iter().map(|w| format!("You said: in order {w}")).collect();
        assert_eq!(c.answers(c.user, words.len(), LIMIT).await, expected);
        let asked: Vec<&str> = c
            .asked("in order ")
            .iter()
            .map(|r| words.into_iter().find(|w| question(r).contains(w)).unwrap_or("?"))
            .collect();
        assert_eq!(asked, words, "the model was asked in order, each once");
    }

    /// A mention in a forum topic is answered in that topic, quoting the question, and
    /// "typing…" is shown there too.
    fn a_forum_topic_is_answered_in_its_topic(c) {
        c.post(&c.fixture("forum_topic_mention")).await;
        assert_eq!(c.answers(c.group, 1, LIMIT).await, ["You said: summarise the topic"]);
        let body = &c.bodies_to(c.group)[0];
        assert_eq!(body["message_thread_id"], 5, "{body}");
        assert_eq!(body["reply_parameters"]["message_id"], 30, "{body}");
        let typing = c.calls_to("sendChatAction", c.group);
        assert!(
            !typing.is_empty() && typing.iter().all(|b| b["message_thread_id"] == 5),
            "typing in the topic: {typing:?}"
        );
    }

    /// A stranger gets one notice with their id, however often they write, and never reaches
    /// the model.
    fn a_stranger_is_refused_without_the_model(c) {
        c.post(&c.fixture("stranger_private")).await;
        c.post(&c.fixture("stranger_private")).await;
        let sent = c.answers(c.stranger, 1, LIMIT).await;
        assert!(
            sent.len() == 1
                && sent[0].contains("private assistant")
                && sent[0].contains(&c.stranger.to_string()),
            "one notice with their id: {sent:?}"
        );
        assert!(c.asked("hello bot").is_empty(), "the stranger never reached the model");
    }

    /// In a group, messages without a mention (from members or strangers) are ignored; a
    /// mention is answered once, quoting the question, without the mention.
    fn a_group_message_needs_a_mention(c) {
        c.post(&c.fixture("group_no_mention")).await;
        c.post(&c.fixture("stranger_group_no_mention")).await;
        c.post(&c.fixture("group_mention")).await;
        assert_eq!(c.answers(c.group, 1, LIMIT).await, ["You said: what is 2+2?"]);
        assert_eq!(c.bodies_to(c.group)[0]["reply_parameters"]["message_id"], 21);
        assert!(c.asked("lunch at noon").is_empty(), "no mention, no model");
        assert!(c.sent_to(c.stranger).is_empty(), "no notice for an unaddressed group message");
    }

    /// History is kept between turns; `/new` answers without the model's words and the next
    /// question starts a session without history.
    fn new_resets_the_session(c) {
        c.post(&c.text("first words")).await;
        c.answers(c.user, 1, LIMIT).await;
        c.post(&c.text("second words")).await;
        c.answers(c.user, 2, LIMIT).await;
        assert_eq!(history(&c.asked("second words")[0]), 3, "user, assistant, user");
        c.post(&c.text("/new")).await;
        assert_eq!(c.answers(c.user, 3, LIMIT).await[2], "Started a fresh conversation.");
        c.post(&c.text("third words")).await;
        assert_eq!(c.answers(c.user, 4, LIMIT).await[3], "You said: third words");
        assert_eq!(history(&c.asked("third words")[0]), 1, "no history after /new");
    }

    /// A model that fails once with HTTP 500 is asked again and the question answered once.
    fn a_model_500_once_is_retried(c) {
        model_fails_once(c, MODEL_500_ONCE).await;
    }

    /// A model that answers 429 with `retry-after` once is waited out and asked again.
    fn a_model_429_once_is_retried(c) {
        model_fails_once(c, MODEL_429_ONCE).await;
    }

    /// A sendMessage refused with 502 once is sent again from the checkpoint: delivered once,
    /// the model not asked again.
    fn a_send_502_once_is_delivered_once(c) {
        send_fails_once(c, SEND_502_ONCE).await;
    }

    /// A sendMessage refused with 429 `retry_after` once is waited out and delivered once.
    fn a_send_429_once_is_delivered_once(c) {
        send_fails_once(c, SEND_429_ONCE).await;
    }

    /// The model calls the clock tool and answers with its result.
    fn a_tool_round_trip(c) {
        c.post(&c.text("what time is it")).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(
            sent.len() == 1 && sent[0].starts_with("Tool said: ") && sent[0].contains("UTC+00:00"),
            "{sent:?}"
        );
    }

    /// A 6000+ character answer arrives split into valid messages, each line once.
    fn a_long_answer_is_split(c) {
        c.post(&c.text("write something long")).await;
        crate::servers::within("the last line", LIMIT, || {
            c.sent_to(c.user).concat().contains("Line 119")
        })
        .await;
        let sent = c.answers(c.user, 2, LIMIT).await;
        assert!(sent.iter().all(|t| t.encode_utf16().count() <= 4096), "{sent:?}");
        let all = sent.concat();
        for i in 0..120 {
            assert_eq!(all.matches(&format!("Line {i:03} ")).count(), 1, "line {i} once");
        }
    }

    /// A body that is not JSON, an update type we do not handle and an edit are acknowledged
    /// (so Telegram stops re-sending) and get nothing else.
    fn unhandled_updates_are_acknowledged(c) {
        let junk = c.post_raw("not json".into(), Some(c.shell.secret())).await;
        assert_eq!(junk, 200);
        c.post(&c.fixture("unknown_poll")).await;
        c.post(&c.fixture("edited_message")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(c.sent_to(c.user).is_empty());
        assert!(c.asked("What can you do now?").is_empty(), "edits are not answered");
    }

    /// A fact the model saved with `memory_write` is recalled in a new session after `/new`.
    fn memory_is_recalled_after_new(c) {
        let first = c.id();
        c.id();
        c.id();
        recall_after_new_as(c.f, c.user, first, move |u| async move { c.post(&u).await }).await;
    }

    /// A photo with a caption reaches the model as an image (the largest size, its bytes in
    /// base64) followed by the caption, and is answered once.
    fn a_photo_with_a_caption_is_seen(c) {
        let file = format!("photo-{}", c.user);
        let bytes = format!("jpeg bytes of {}", c.user);
        c.file(&file, bytes.clone());
        c.post(&c.media(json!({"caption": "what is on this photo", "photo": [
            {"file_id": "thumbnail", "file_unique_id": "t", "width": 90, "height": 90, "file_size": 10},
            {"file_id": file, "file_unique_id": "p", "width": 800, "height": 600, "file_size": bytes.len()}
        ]}))).await;
        assert_eq!(
            c.answers(c.user, 1, LIMIT).await,
            ["I see 1 image(s): what is on this photo"]
        );
        let asked = c.asked("what is on this photo");
        assert_eq!(asked.len(), 1);
        let content = &asked[0]["messages"].as_array().unwrap().last().unwrap()["content"];
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(
            content[0],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": data}})
        );
        assert_eq!(content[1]["text"], "what is on this photo");
    }

    /// A voice note is downloaded, transcribed once, and the transcript answered.
    fn a_voice_note_is_transcribed_and_answered(c) {
        let file = format!("voice-{}", c.user);
        let words = format!("spoken words of {}", c.user);
        c.file(&file, words.clone());
        c.post(&c.media(json!({"voice": {
            "file_id": file, "file_unique_id": "v", "duration": 2, "mime_type": "audio/ogg"
        }}))).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(
            sent.len() == 1 && sent[0].contains("transcribed") && sent[0].contains(&words),
            "{sent:?}"
        );
        let heard: Vec<_> = c
            .f
            .transcriptions
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, content)| *content == words)
            .cloned()
            .collect();
        assert_eq!(heard, [("voice.ogg".to_owned(), words.clone())], "transcribed once");
        // Answered in kind: a voice note (OGG, speaking the answer) before the text.
        let voices = c.f.uploads_to("sendVoice", c.user);
        assert_eq!(voices.len(), 1, "one voice note");
        assert_eq!(voices[0].0, "answer.ogg");
        let audio = &voices[0].1;
        assert!(audio.starts_with(b"OggS"), "an OGG body");
        assert!(String::from_utf8_lossy(audio).contains(&words), "speaks the answer");
    }

    /// "draw: …" has `generate_image` make a picture, sent once with `sendPhoto` (its bytes as
    /// made, 512 KB, the model's caption) before the text, its cost in `/usage`; a prompt the service
    /// refuses is told and no photo goes out; `/imagine` draws without the model.
    fn a_picture_is_drawn_and_sent_once(c) {
        let prompt = format!("a lighthouse for {}", c.user);
        c.post(&c.text(&format!("draw: {prompt}"))).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(sent[0].contains("sent with your answer"), "{sent:?}");
        let photos = c.f.uploads_to("sendPhoto", c.user);
        assert_eq!(photos.len(), 1, "one photo");
        assert!(photos[0].1.starts_with(b"\xff\xd8\xff"), "a JPEG body");
        assert!(String::from_utf8_lossy(&photos[0].1).contains(&prompt));
        // Whole, though past a DynamoDB item's size (kept in parts on the Lambda).
        assert_eq!(photos[0].1.len(), crate::servers::PICTURE_BYTES);
        let call = &c.calls_to("sendPhoto", c.user)[0];
        assert_eq!(call["caption"], format!("Drawn: {prompt}"));

        c.post(&c.text("/usage")).await;
        let sent = c.answers(c.user, 2, LIMIT).await;
        assert!(sent[1].contains("($0.04"), "the picture's $0.042 counted: {sent:?}");

        c.post(&c.text(&format!("draw: {}", crate::servers::IMAGE_REFUSED))).await;
        let sent = c.answers(c.user, 3, LIMIT).await;
        assert!(sent[2].contains("refused this prompt"), "{sent:?}");
        assert_eq!(c.f.uploads_to("sendPhoto", c.user).len(), 1, "no photo");

        c.post(&c.text("/imagine a red kite")).await;
        crate::servers::within("the /imagine photo", LIMIT, || {
            c.f.uploads_to("sendPhoto", c.user).len() == 2
        })
        .await;
        let asked = c.asked("a red kite");
        assert!(asked.is_empty(), "no model call for /imagine");
    }

    /// `/voice off` answers a voice note in text only; with voice back on, a speech service
    /// answering with no audio ends in one short line, and the text arrives.
    fn voice_off_is_text_only_and_a_failed_speech_says_so(c) {
        c.post(&c.text("/voice off")).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(sent[0].contains("now off"), "{sent:?}");
        let file = format!("voice-off-{}", c.user);
        c.file(&file, format!("quiet please {}", c.user));
        c.post(&c.media(json!({"voice": {
            "file_id": file, "file_unique_id": "q", "duration": 2, "mime_type": "audio/ogg"
        }}))).await;
        let sent = c.answers(c.user, 2, LIMIT).await;
        assert!(sent[1].contains("quiet please"), "{sent:?}");
        assert!(c.f.uploads_to("sendVoice", c.user).is_empty(), "off: text only");

        c.post(&c.text("/voice auto")).await;
        c.answers(c.user, 3, LIMIT).await;
        let file = format!("voice-empty-{}", c.user);
        c.file(&file, crate::servers::SPEECH_EMPTY);
        c.post(&c.media(json!({"voice": {
            "file_id": file, "file_unique_id": "e", "duration": 2, "mime_type": "audio/ogg"
        }}))).await;
        let sent = c.answers(c.user, 5, LIMIT).await;
        assert!(
            sent[3].starts_with("(I could not say this aloud") && sent[3].contains("no usable audio"),
            "{sent:?}"
        );
        assert!(sent[4].contains(crate::servers::SPEECH_EMPTY), "the text: {sent:?}");
        assert!(c.f.uploads_to("sendVoice", c.user).is_empty());
    }

    /// The photos of an album, posted back to back, are one turn and one answer.
    fn an_album_is_one_turn(c) {
        let group = format!("album-{}", c.user);
        for i in 0..3 {
            let file = format!("album-{}-{i}", c.user);
            c.file(&file, format!("picture {i}"));
            let mut fields = json!({"media_group_id": group, "photo": [
                {"file_id": file, "file_unique_id": format!("a{i}"), "width": 640, "height": 480, "file_size": 9}
            ]});
            if i == 0 {
                fields["caption"] = json!("compare these pictures");
            }
            c.post(&c.media(fields)).await;
        }
        assert_eq!(
            c.answers(c.user, 1, LIMIT).await,
            ["I see 3 image(s): compare these pictures"]
        );
        assert_eq!(c.asked("compare these pictures").len(), 1, "one turn");
    }

    /// A text file is read into the message, and answered.
    fn a_text_file_is_read(c) {
        let file = format!("notes-{}", c.user);
        let content = format!("shopping: eggs and {} apples", c.user);
        c.file(&file, content.clone());
        c.post(&c.media(json!({"caption": "summarise my file", "document": {
            "file_id": file, "file_unique_id": "d", "file_name": "notes.txt",
            "mime_type": "text/plain", "file_size": content.len()
        }}))).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(
            sent.len() == 1 && sent[0].contains(&content) && sent[0].contains("summarise my file"),
            "{sent:?}"
        );
    }

    /// A file over the limits gets a plain reply; it is not downloaded and the model is not
    /// asked.
    fn a_too_large_file_gets_a_clear_reply(c) {
        let file = format!("huge-{}", c.user);
        c.post(&c.media(json!({"caption": "read this huge log", "document": {
            "file_id": file, "file_unique_id": "h", "file_name": "huge.log",
            "mime_type": "text/plain", "file_size": 30_000_000
        }}))).await;
        let sent = c.answers(c.user, 1, LIMIT).await;
        assert!(sent.len() == 1 && sent[0].contains("too large"), "{sent:?}");
        assert!(c.asked("huge log").is_empty());
        let fetched = c.f.calls.lock().unwrap().iter().any(|(m, b)| m == "getFile" && b["file_id"] == file.as_str());
        assert!(!fetched, "not downloaded");
    }

    /// Runs last: no line the shell logged during all the scenarios names the bot token
    /// (file downloads carry it in their URL; failures are logged).
    fn no_log_line_names_the_bot_token(c) {
        let token = c.f.token.lock().unwrap().clone().expect("the shell called the Bot API");
        assert!(token.len() > 8, "{token}");
        let logs = c.shell.logs();
        assert!(!logs.is_empty(), "the shell's log was captured");
        let leaks: Vec<&String> = logs.iter().filter(|l| l.contains(&token)).collect();
        assert!(leaks.is_empty(), "the token in the log: {leaks:?}");
    }
}

/// The text of a model request's question (its last message).
fn question(request: &Value) -> String {
    let messages = request["messages"].as_array();
    messages
        .and_then(|m| m.last())
        .map(Value::to_string)
        .unwrap_or_default()
}

/// How many messages a model request carried.
fn history(request: &Value) -> usize {
    request["messages"].as_array().map_or(0, Vec::len)
}

async fn model_fails_once(c: &Ctx<'_>, marker: &str) {
    let q = format!("please answer, {marker}");
    c.post(&c.text(&q)).await;
    assert_eq!(
        c.answers(c.user, 1, LIMIT).await,
        [format!("You said: {q}")]
    );
    assert_eq!(c.asked(&q).len(), 2, "failed once, then asked again");
}

async fn send_fails_once(c: &Ctx<'_>, marker: &str) {
    let q = format!("deliver this, {marker}");
    c.post(&c.text(&q)).await;
    assert_eq!(
        c.answers(c.user, 1, RETRY_LIMIT).await,
        [format!("You said: {q}")]
    );
    assert_eq!(c.f.refused_to(c.user), 1, "refused once, then delivered");
    assert_eq!(
        c.asked(&q).len(),
        1,
        "the checkpointed answer is not asked for again"
    );
}
