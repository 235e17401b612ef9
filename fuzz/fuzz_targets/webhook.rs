//! The whole ack-and-turn path on in-memory ports: raw bytes through `App::handle_webhook`,
//! the lane drained (retries included), then delivered again.
//!
//! Input: `<update> [0xFF <answer>]…`. Each answer is the model's reply to one call: a flags
//! byte (`flags % 8`: 4 → 429, 5 → 500, 6 → 401, 7 → 400, else 200; bit 7 of the first answer
//! picks the OpenAI wire instead of Anthropic's) and the body. Once the script is used up the
//! model echoes the user's text.
//!
//! Checked: the ack is 200; draining ends idle without a storage error; every Bot API call
//! obeys the spec, every HTML message parses as Telegram HTML; every message goes to the
//! update's chat; nobody but the allowed user reaches the model, and what is not a message
//! from a person reaches nobody (a button tap gets only its answerCallbackQuery); a person's
//! private message gets an answer (an update id that is not positive, which Telegram never
//! sends, gets nothing), and at most
//! `max_reply_parts` (2 here) messages; a second delivery of the same bytes is dropped without
//! a call.

#![no_main]

use clawless_core::telegram::{ChatKind, Update, UpdateKind};
use clawless_fuzz::world::{config, Answer, Wire, World, SECRET};
use clawless_testkit::fixtures::OWNER_ID;
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;

fn script(segments: &[&[u8]]) -> (Wire, Vec<Answer>) {
    let wire = match segments.first().and_then(|s| s.first()) {
        Some(f) if f & 0x80 != 0 => Wire::OpenAi,
        _ => Wire::Anthropic,
    };
    let answers = segments
        .iter()
        .map(|s| {
            let (flags, body) = s.split_first().unwrap_or((&0, &[]));
            let status = match flags % 8 {
                4 => 429,
                5 => 500,
                6 => 401,
                7 => 400,
                _ => 200,
            };
            (status, body.to_vec())
        })
        .collect();
    (wire, answers)
}

fuzz_target!(|data: &[u8]| {
    let mut segments = data.split(|b| *b == 0xFF);
    let update = segments.next().unwrap_or_default();
    let (wire, answers) = script(&segments.collect::<Vec<_>>());
    // Two messages at most, so that an answer of some 7,000 characters already goes out as a
    // document and short inputs reach that path too.
    let mut config = config().clone();
    config.limits.max_reply_parts = 2;
    let world = World::with_config(config, wire, answers).unwrap();
    let app = &world.app;

    let reply = block_on(app.handle_webhook("main", Some(SECRET), update));
    assert_eq!(reply.status, 200, "ack of {} bytes", update.len());
    if let Some(lane) = &reply.lane {
        assert!(world.drain(lane), "the lane never drained");
    }

    let violations = world.violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "Telegram would refuse: {violations:?}"
    );

    let calls = world.bot_calls();
    let parsed = Update::parse(update).ok();
    let msg = match parsed.as_ref().map(|u| &u.kind) {
        Some(UpdateKind::Message(m)) => Some(m),
        _ => None,
    };
    let person = msg.and_then(|m| m.from.as_ref()).filter(|u| !u.is_bot);
    let chat_ok = msg.is_some_and(|m| {
        matches!(
            m.chat.kind,
            ChatKind::Private | ChatKind::Group | ChatKind::Supergroup
        )
    });
    if let Some(UpdateKind::CallbackQuery(q)) = parsed.as_ref().map(|u| &u.kind) {
        // A tap with no turn waiting for it: answered "no longer waiting", nothing else.
        assert_eq!(world.model_calls(), 0, "a button tap reached the model");
        // Not answered: an update id that is not positive (dropped at the ack, as every
        // such update) and the control panel's own taps (id `panel:…`, never Telegram's).
        let positive = parsed.as_ref().is_some_and(|u| u.id > 0);
        let panels = q.id.starts_with(clawless_core::telegram::keyboard::PANEL_TAP);
        let expected = usize::from(q.message.is_some() && positive && !panels);
        assert!(
            calls.len() == expected && calls.iter().all(|(m, _)| m == "answerCallbackQuery"),
            "a lone tap made other calls: {calls:?}"
        );
    } else if person.is_none() || !chat_ok {
        assert!(
            calls.is_empty() && world.model_calls() == 0,
            "not a person's message, yet calls were made: {calls:?}"
        );
    }
    if person.is_some_and(|u| u.id.0 != OWNER_ID) {
        assert_eq!(world.model_calls(), 0, "a stranger reached the model");
    }
    let mut sent = 0;
    let mut notices = 0;
    let stranger = person.is_some_and(|u| u.id.0 != OWNER_ID);
    for (method, body) in &calls {
        // getMe and getFile (a photo, a voice note) name no chat.
        if method == "getMe" || method == "getFile" {
            continue;
        }
        // A stranger's pairing code is announced to the owner, in the owner's private chat,
        // and that is the only message that may go elsewhere.
        let text = body["text"].as_str().unwrap_or("");
        if stranger
            && method == "sendMessage"
            && body["chat_id"].as_i64() == Some(OWNER_ID)
            && text.contains("asks to talk to me")
        {
            notices += 1;
            continue;
        }
        let chat = msg.map(|m| m.chat.id.0);
        assert_eq!(body["chat_id"].as_i64(), chat, "{method} to another chat");
        if method == "sendMessage" || method == "sendDocument" {
            sent += 1;
        }
    }
    assert!(sent <= 2, "{sent} messages for one update");
    assert!(notices <= 1, "{notices} pairing notices for one update");
    // Telegram's update ids are positive; the others are the bot's own (a reminder's firing)
    // and dropped at the ack.
    let telegram_id = parsed.as_ref().is_some_and(|u| u.id > 0);
    if person.is_some() && telegram_id && msg.is_some_and(|m| m.chat.kind == ChatKind::Private) {
        assert!(sent >= 1, "a person's private message got no answer");
    }
    if !telegram_id {
        assert!(calls.is_empty(), "an update id that is not positive was acted on: {calls:?}");
    }

    // Telegram delivers again: nothing new happens.
    let before = world.http.requests().len();
    let again = block_on(app.handle_webhook("main", Some(SECRET), update));
    assert_eq!((again.status, again.lane.as_ref()), (200, None));
    assert_eq!(
        world.http.requests().len(),
        before,
        "a re-delivery made calls"
    );
});
