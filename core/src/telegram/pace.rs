//! The outbound limiter: keeps one bot's messages within Telegram's limits, so a long
//! multi-part answer or a burst of chats draws no 429, while a conversation never waits on it.
//!
//! Telegram's FAQ: about one message per second in a chat *in the long run* (short bursts
//! pass), 20 messages per minute in a group, 30 messages per second overall. Each limit is a
//! GCRA (a token bucket kept as one "theoretical arrival time"): a send reserves the earliest
//! instant every limit allows and waits for it on the Clock. A limit of burst `b` and interval
//! `t` lets at most `b + w / t` sends into any window of length `w`:
//! - a chat: 20 at once, then one per second. A quick back-and-forth, even with a fast model
//!   and multi-part answers, stays inside the burst, so a reply is not delayed unless the chat
//!   got 20 messages in the last seconds; a broadcast or a stream of long answers is paced to
//!   one a second;
//! - a group: 10 at once, then one per 6 s (≤ 20 in any minute);
//! - overall: 20 at once (a chat's burst fits), then one per 100 ms (≤ 29 in any second).
//!
//! The state is per process (per Worker isolate, per Lambda instance). One chat's sends come
//! from the drainer holding its lane, so the chat limit holds wherever that drainer runs; the
//! overall limit is per process, and a 429 that still comes is waited out as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_platform::Clock;

/// One limit: at most `burst` at once, then one per `interval_ms`.
#[derive(Debug, Clone, Copy)]
struct Rate {
    interval_ms: u64,
    burst: u64,
}

impl Rate {
    /// The earliest instant this limit allows a send, given its state `tat`.
    fn earliest(self, tat: u64, now: u64) -> u64 {
        now.max(tat.saturating_sub(self.interval_ms * (self.burst - 1)))
    }

    /// The state after a send at `at`.
    fn after(self, tat: u64, at: u64) -> u64 {
        tat.max(at) + self.interval_ms
    }
}

const CHAT: Rate = Rate {
    interval_ms: 1_000,
    burst: 20,
};
const GROUP: Rate = Rate {
    interval_ms: 6_000,
    burst: 10,
};
const OVERALL: Rate = Rate {
    interval_ms: 100,
    burst: 20,
};

/// A send that would wait longer than this is not made now: the caller gets
/// [`Wait::Later`] and retries the job later instead of holding its lane (and a serverless
/// request) for minutes.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// When a chat's states are pruned: entries whose limit has fully recovered are dropped once
/// there are this many.
const PRUNE_AT: usize = 2_048;

/// What a send must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Go now, after waiting this long (zero: at once). The slot is reserved.
    For(Duration),
    /// Nothing is reserved: every limit would make it wait past [`MAX_WAIT`]; try again
    /// after about this long.
    Later(Duration),
}

#[derive(Debug, Default)]
struct State {
    /// Per chat: (chat limit, group limit) states.
    chats: HashMap<i64, (u64, u64)>,
    overall: u64,
}

/// The limiter of one bot.
pub struct Pacer {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer").finish_non_exhaustive()
    }
}

/// Whether a Bot API method posts a message into a chat (and so counts against the limits),
/// and whether it counts against a group's per-minute limit (new messages do; edits count
/// only per chat and overall).
pub fn counts(method: &str) -> Option<bool> {
    match method {
        "sendMessage" | "sendDocument" | "sendPhoto" | "sendAudio" | "sendVoice"
        | "sendMediaGroup" | "copyMessage" | "forwardMessage" => Some(true),
        "editMessageText" => Some(false),
        _ => None,
    }
}

impl Pacer {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            state: Mutex::default(),
        }
    }

    /// Reserves the next slot for a message to `chat_id` (negative ids are groups and
    /// channels); `new_message` is false for an edit.
    pub fn reserve(&self, chat_id: i64, new_message: bool) -> Wait {
        let now = self.clock.now_ms();
        let Ok(mut s) = self.state.lock() else {
            // A panic elsewhere poisoned the lock: do not hold sends back for it.
            return Wait::For(Duration::ZERO);
        };
        let group = new_message && chat_id < 0;
        let (chat_tat, group_tat) = s.chats.get(&chat_id).copied().unwrap_or((0, 0));
        let mut at = CHAT
            .earliest(chat_tat, now)
            .max(OVERALL.earliest(s.overall, now));
        if group {
            at = at.max(GROUP.earliest(group_tat, now));
        }
        let wait = at - now;
        if wait > MAX_WAIT.as_millis() as u64 {
            return Wait::Later(Duration::from_millis(wait));
        }
        let group_tat = if group {
            GROUP.after(group_tat, at)
        } else {
            group_tat
        };
        s.chats
            .insert(chat_id, (CHAT.after(chat_tat, at), group_tat));
        s.overall = OVERALL.after(s.overall, at);
        if s.chats.len() > PRUNE_AT {
            s.chats.retain(|_, (c, g)| *c > now || *g > now);
        }
        Wait::For(Duration::from_millis(wait))
    }

    /// Waits for the next slot of a message to `chat_id`: `Err` with the seconds to retry
    /// after when the wait would pass [`MAX_WAIT`].
    pub async fn wait(&self, chat_id: i64, new_message: bool) -> Result<(), u64> {
        match self.reserve(chat_id, new_message) {
            Wait::For(d) if d.is_zero() => Ok(()),
            Wait::For(d) => {
                self.clock.sleep(d).await;
                Ok(())
            }
            Wait::Later(d) => Err(d.as_secs().max(1)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clawless_platform::FakeClock;

    /// Reserves `n` sends at `now` (no time passing) and returns their instants.
    fn burst(p: &Pacer, clock: &FakeClock, chats: impl Fn(usize) -> i64, n: usize) -> Vec<u64> {
        (0..n)
            .map(|i| match p.reserve(chats(i), true) {
                Wait::For(d) => clock.now_ms() + d.as_millis() as u64,
                Wait::Later(_) => u64::MAX,
            })
            .collect()
    }

    /// The most instants of `times` in any window `[t, t + len)`.
    fn most_in_window(times: &[u64], len: u64) -> usize {
        times
            .iter()
            .map(|&t| times.iter().filter(|&&u| u >= t && u < t + len).count())
            .max()
            .unwrap_or(0)
    }

    fn pacer() -> (Pacer, Arc<FakeClock>) {
        let clock = Arc::new(FakeClock::new(1_000_000));
        (Pacer::new(clock.clone()), clock)
    }

    #[test]
    fn one_chat_gets_a_burst_then_one_message_a_second() {
        let (p, clock) = pacer();
        let times = burst(&p, &clock, |_| 42, 25);
        assert!(
            times[..20].iter().all(|&t| t == clock.now_ms()),
            "twenty go at once: {times:?}"
        );
        assert_eq!(
            &times[20..],
            &[1_001_000, 1_002_000, 1_003_000, 1_004_000, 1_005_000]
        );
    }

    #[test]
    fn a_conversation_is_never_held_back() {
        let (p, clock) = pacer();
        // Replies a few seconds apart, each in up to three parts: never a wait.
        for _ in 0..200 {
            for _ in 0..3 {
                assert_eq!(p.reserve(42, true), Wait::For(Duration::ZERO));
            }
            clock.advance(Duration::from_secs(3));
        }
    }

    #[test]
    fn a_group_gets_at_most_twenty_a_minute() {
        let (p, clock) = pacer();
        // The sends that would wait past MAX_WAIT are refused for now (a second passes).
        let mut times = Vec::new();
        for _ in 0..40 {
            match p.reserve(-100, true) {
                Wait::For(d) => {
                    times.push(clock.now_ms() + d.as_millis() as u64);
                    clock.advance(d);
                }
                Wait::Later(d) => {
                    assert!(d > MAX_WAIT);
                    clock.advance(Duration::from_secs(1));
                }
            }
        }
        assert!(times.len() >= 20, "sent {}", times.len());
        assert!(most_in_window(&times, 60_000) <= 20);
        assert!(most_in_window(&times, 1_000) <= 10, "ten at once at most");
    }

    #[test]
    fn edits_in_a_group_count_per_chat_only() {
        let (p, clock) = pacer();
        let mut times = Vec::new();
        for _ in 0..30 {
            let Wait::For(d) = p.reserve(-100, false) else {
                panic!("an edit was refused");
            };
            times.push(clock.now_ms() + d.as_millis() as u64);
            clock.advance(d);
        }
        assert_eq!(times[19], times[0], "twenty at once");
        assert_eq!(times[29] - times[19], 10_000, "then one a second");
    }

    #[test]
    fn many_chats_get_at_most_thirty_a_second() {
        let (p, clock) = pacer();
        let times = burst(&p, &clock, |i| i as i64 + 1, 100);
        assert!(times.iter().all(|&t| t != u64::MAX), "100 fit in MAX_WAIT");
        let most = most_in_window(&times, 1_000);
        assert!((25..=30).contains(&most), "{most} in a second");
        assert!(times.iter().take(20).all(|&t| t == clock.now_ms()));
    }

    #[test]
    fn a_wait_past_the_bound_reserves_nothing() {
        let (p, clock) = pacer();
        for _ in 0..40 {
            let _ = p.reserve(7, true);
        }
        // 20 at once, then 20 one a second: the next would wait 21 s.
        assert!(matches!(p.reserve(7, true), Wait::Later(_)));
        clock.advance(Duration::from_secs(5));
        // Nothing was reserved by the refusal: the wait shrank by the 5 s that passed.
        assert_eq!(p.reserve(7, true), Wait::For(Duration::from_secs(16)));
    }

    #[test]
    fn recovered_chats_are_pruned() {
        let (p, clock) = pacer();
        for chat in 0..(PRUNE_AT as i64) {
            assert!(matches!(p.reserve(chat + 1, true), Wait::For(_)));
            clock.advance(Duration::from_millis(100));
        }
        assert_eq!(p.state.lock().unwrap().chats.len(), PRUNE_AT);
        clock.advance(Duration::from_secs(3_600));
        let _ = p.reserve(-1, true);
        assert_eq!(p.state.lock().unwrap().chats.len(), 1);
    }
}
