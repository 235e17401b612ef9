//! Raw bytes → `Update::parse`, then for a message the mention logic: every entity's
//! `utf16_range` is checked against a slow reference, and every range `mentions_of` returns is
//! an `@username` of ours or a `text_mention` of our id.

#![no_main]

use clawless_core::telegram::types::utf16_range;
use clawless_core::telegram::{BotIdentity, Message, Update, UpdateKind};
use libfuzzer_sys::fuzz_target;

/// The byte offset of every UTF-16 offset that falls on a character boundary of `text`.
fn boundaries(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut units = 0;
    for (i, c) in text.char_indices() {
        out.push((units, i));
        units += c.len_utf16();
    }
    out.push((units, text.len()));
    out
}

fn reference_range(text: &str, offset: usize, length: usize) -> Option<std::ops::Range<usize>> {
    let end = offset.checked_add(length)?;
    let b = boundaries(text);
    let at = |u: usize| b.iter().find(|(units, _)| *units == u).map(|(_, i)| *i);
    Some(at(offset)?..at(end)?)
}

fn check_message(m: &Message) {
    let me = BotIdentity {
        id: 7_000_000_001,
        username: "clawless_test_bot".into(),
    };
    let mentions = m.mentions_of(&me);
    let Some(text) = m.text() else {
        assert!(mentions.is_empty());
        return;
    };
    for e in m.entities.iter().chain(&m.caption_entities) {
        assert_eq!(
            utf16_range(text, e.offset, e.length),
            reference_range(text, e.offset, e.length),
            "entity {e:?} of {text:?}"
        );
    }
    for r in mentions {
        let slice = text
            .get(r.clone())
            .expect("a mention is a slice of the text");
        let by_name = slice.eq_ignore_ascii_case("@clawless_test_bot");
        let by_id =
            m.entities.iter().chain(&m.caption_entities).any(|e| {
                e.kind == "text_mention" && e.user.as_ref().is_some_and(|u| u.id.0 == me.id)
            });
        assert!(by_name || by_id, "{slice:?} is not a mention of us");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(update) = Update::parse(data) else {
        return;
    };
    match &update.kind {
        UpdateKind::Message(m) | UpdateKind::EditedMessage(m) => {
            check_message(m);
            if let Some(r) = &m.reply_to_message {
                check_message(r);
            }
            assert!(update.message().is_some() == matches!(update.kind, UpdateKind::Message(_)));
        }
        UpdateKind::CallbackQuery(q) => {
            if let Some(m) = &q.message {
                check_message(m);
                assert_eq!(update.chat().map(|c| c.id), Some(m.chat.id));
            }
        }
        UpdateKind::Unknown(v) => {
            assert!(
                v.get("message").is_none()
                    && v.get("edited_message").is_none()
                    && v.get("callback_query").is_none()
            );
        }
    }
    // Parsing is a function of the JSON value, whatever the bytes looked like.
    let value: serde_json::Value = serde_json::from_slice(data).unwrap();
    assert_eq!(Update::from_value(&value).ok(), Some(update));
});
