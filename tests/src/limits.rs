//! Telegram's flood limits as a fake Bot API enforces them: a send past one is answered 429.
//!
//! Telegram documents about one message a second in a chat *in the long run* (short bursts
//! pass), at most 20 messages a minute in a group, and about 30 messages a second in all
//! (core.telegram.org/bots/faq, "My bot is hitting limits"). Modelled here, independently of
//! the bot's own limiter (sliding windows over the recorded sends, not its GCRA):
//! - a chat: in any window of `w` seconds at most [`CHAT_BURST`] + `w` messages (new ones and
//!   edits alike);
//! - a group (negative chat id): at most 20 new messages in any 60 s;
//! - all chats together: at most 30 messages in any 1 s.

use std::collections::HashMap;

/// Messages a chat may get at once before the one-a-second rule applies.
pub const CHAT_BURST: u64 = 20;
/// New messages a group may get in any minute.
pub const GROUP_PER_MINUTE: usize = 20;
/// Messages all chats together may get in any second.
pub const OVERALL_PER_SECOND: usize = 30;

/// The sends a fake Bot API has let through, by chat, with their times (ms).
#[derive(Debug, Default)]
pub struct Limits {
    /// Per chat: (when, a new message rather than an edit).
    chats: HashMap<i64, Vec<(u64, bool)>>,
    all: Vec<u64>,
}

impl Limits {
    /// Judges a send to `chat` at `at_ms`: `Err` with the limit it would break (the send is
    /// then not recorded: Telegram refuses it), else records it.
    pub fn send(&mut self, chat: i64, new_message: bool, at_ms: u64) -> Result<(), String> {
        let sent = self.chats.get(&chat).map(Vec::as_slice).unwrap_or(&[]);
        // A chat: for every earlier send u, the sends in [u, at] (this one included) must
        // number at most CHAT_BURST + whole seconds between u and at.
        for (i, &(u, _)) in sent.iter().enumerate() {
            let in_window = (sent.len() - i) as u64 + 1;
            let allowed = CHAT_BURST + at_ms.saturating_sub(u) / 1_000;
            if in_window > allowed {
                return Err(format!(
                    "chat {chat}: {in_window} messages within {} ms",
                    at_ms.saturating_sub(u)
                ));
            }
        }
        if new_message && chat < 0 {
            let in_minute = sent
                .iter()
                .filter(|&&(u, new)| new && u + 60_000 > at_ms)
                .count();
            if in_minute + 1 > GROUP_PER_MINUTE {
                return Err(format!("group {chat}: more than 20 messages in a minute"));
            }
        }
        let in_second = self.all.iter().filter(|&&u| u + 1_000 > at_ms).count();
        if in_second + 1 > OVERALL_PER_SECOND {
            return Err("more than 30 messages in a second".into());
        }
        self.chats
            .entry(chat)
            .or_default()
            .push((at_ms, new_message));
        self.all.push(at_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_may_burst_then_gets_one_a_second() {
        let mut l = Limits::default();
        for _ in 0..CHAT_BURST {
            assert!(l.send(1, true, 1_000).is_ok());
        }
        assert!(l.send(1, true, 1_000).is_err(), "one past the burst");
        assert!(l.send(1, true, 1_999).is_err());
        assert!(l.send(1, true, 2_000).is_ok(), "a second later, one more");
        assert!(l.send(1, true, 2_500).is_err());
        assert!(l.send(2, true, 2_500).is_ok(), "other chats are apart");
    }

    #[test]
    fn a_group_gets_twenty_a_minute_and_edits_do_not_count_there() {
        let mut l = Limits::default();
        for i in 0..20 {
            assert!(l.send(-5, true, i * 2_000).is_ok(), "send {i}");
        }
        assert!(l.send(-5, true, 40_000).is_err());
        assert!(l.send(-5, false, 40_000).is_ok(), "an edit");
        assert!(
            l.send(-5, true, 60_000).is_ok(),
            "the first has left the minute"
        );
    }

    #[test]
    fn all_chats_together_get_thirty_a_second() {
        let mut l = Limits::default();
        for chat in 0..30 {
            assert!(l.send(chat, true, 500).is_ok());
        }
        assert!(l.send(99, true, 1_499).is_err());
        assert!(l.send(99, true, 1_500).is_ok());
    }
}
