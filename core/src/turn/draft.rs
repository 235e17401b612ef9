//! A reply shown while it is written. In private chats the model's text so far goes to the
//! chat as a draft (`sendMessageDraft`), the first at once and then at most one every
//! `streaming.draft_every_ms`. In groups with `streaming.groups`, it goes into a placeholder
//! message, a reply to the question, edited at most every `streaming.edit_every_ms`; its id is
//! kept in the Kv (`keys::preview`) as soon as it is sent, and delivery edits it into the
//! answer's first part instead of sending a new message (`deliver.rs`).
//!
//! Either way the preview is not the answer: the finished answer is still checkpointed and
//! delivered, and exactly-once applies to that. A crash mid-stream leaves a draft that
//! Telegram drops, or a placeholder whose id the retry finds and edits on.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{select, Either};
use futures::StreamExt;

use crate::allowance::Allowance;
use crate::app::App;
use crate::connector::Connector;
use crate::keys;
use crate::telegram::api::{clip, Target};
use crate::telegram::Message;

/// How often "typing…" is sent again while the agent works.
const TYPING_EVERY: Duration = Duration::from_millis(4500);

/// How long a placeholder key is kept: longer than any retry of its job.
const PREVIEW_TTL: Duration = Duration::from_secs(24 * 3600);

/// Where a streamed reply shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    /// `sendMessageDraft` (private chats).
    Draft,
    /// A placeholder message, edited (groups).
    Edit,
}

/// The text a streamed model call has written so far, and a wake-up for the loop showing it.
pub(super) struct Drafts {
    show: Show,
    latest: Arc<Mutex<String>>,
    changed: mpsc::UnboundedSender<()>,
    wakes: Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    /// A placeholder is being sent: the turn waits for it to be kept before delivering.
    sending: AtomicBool,
    settled: mpsc::UnboundedSender<()>,
    settles: Mutex<Option<mpsc::UnboundedReceiver<()>>>,
}

impl Drafts {
    fn new(show: Show) -> Drafts {
        let (changed, wakes) = mpsc::unbounded();
        let (settled, settles) = mpsc::unbounded();
        Drafts {
            show,
            latest: Arc::default(),
            changed,
            wakes: Mutex::new(Some(wakes)),
            sending: AtomicBool::new(false),
            settled,
            settles: Mutex::new(Some(settles)),
        }
    }

    /// What the model call under way has written so far (empty: withdrawn, a retry starts).
    pub(super) fn set(&self, text: &str) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.clear();
        latest.push_str(text);
        // The loop may be gone (the turn ended): nothing to wake then.
        let _ = self.changed.unbounded_send(());
    }

    fn latest(&self) -> String {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What runs beside a turn: "typing…" in `target`, the previews of `drafts` for the message
/// `message_id`, within `allowance`.
pub(super) struct Beside<'a> {
    pub(super) conn: &'a Connector,
    pub(super) target: Target,
    pub(super) message_id: i64,
    pub(super) drafts: Option<&'a Drafts>,
    pub(super) allowance: Option<&'a Allowance>,
}

/// How `msg`'s reply shows while it is written, if at all (`streaming:` in main.yaml).
pub(super) fn drafts_for(app: &App, msg: &Message) -> Option<Drafts> {
    let s = &app.config.streaming;
    match msg.is_private() {
        true => s.private.then(|| Drafts::new(Show::Draft)),
        false => s.groups.then(|| Drafts::new(Show::Edit)),
    }
}

/// Runs `turn` with "typing…" and the previews of `beside.drafts` beside it. When the
/// turn ends while a placeholder is being sent, waits for that send (and its id to be
/// kept), so delivery edits it instead of leaving a stray partial message.
pub(super) async fn beside_turn<T>(
    app: &App,
    beside: Beside<'_>,
    turn: impl Future<Output = T>,
) -> T {
    let Beside {
        conn,
        target,
        message_id,
        drafts,
        allowance,
    } = beside;
    let unbounded = Allowance::unbounded();
    let allowance = allowance.unwrap_or(&unbounded);
    let Some(d) = drafts else {
        let typing = pin!(keep_typing(app, conn, target, allowance));
        return match select(typing, pin!(turn)).await {
            Either::Left((never, _)) => match never {},
            Either::Right((out, _)) => out,
        };
    };
    let settles = d.settles.lock().unwrap_or_else(|e| e.into_inner()).take();
    let typing = pin!(keep_typing(app, conn, target, allowance));
    let previews = pin!(show_previews(app, conn, target, message_id, d, allowance));
    let mut beside = pin!(select(typing, previews));
    let out = match select(beside.as_mut(), pin!(turn)).await {
        Either::Left((either, _)) => match either.factor_first().0 {},
        Either::Right((out, _)) => out,
    };
    if let Some(mut settles) = settles {
        // Each send that ends says so; the flag says whether one is still under way.
        while d.sending.load(Ordering::SeqCst) {
            match select(beside.as_mut(), settles.next()).await {
                Either::Left((either, _)) => match either.factor_first().0 {},
                Either::Right((None, _)) => break,
                Either::Right((Some(()), _)) => {}
            }
        }
    }
    out
}

/// Shows the text of `drafts` in `target` until dropped. Failures are only logged: the
/// finished message does not depend on them.
async fn show_previews(
    app: &App,
    conn: &Connector,
    target: Target,
    message_id: i64,
    drafts: &Drafts,
    allowance: &Allowance,
) -> std::convert::Infallible {
    let taken = drafts
        .wakes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let every = Duration::from_millis(match drafts.show {
        Show::Draft => app.config.streaming.draft_every_ms,
        Show::Edit => app.config.streaming.edit_every_ms,
    });
    let key = keys::preview(&conn.id, target.chat_id, message_id);
    // The placeholder: looked up in the Kv (a retried turn's) before the first is sent.
    let mut placeholder: Option<Option<i64>> = None;
    if let Some(mut wakes) = taken {
        let mut shown = String::new();
        while wakes.next().await.is_some() {
            // Whatever else changed meanwhile is in `latest` already.
            while let Ok(()) = wakes.try_recv() {}
            let text = drafts.latest();
            if text == shown {
                continue;
            }
            // Previews spend only the requests the turn's steps leave, spread out.
            let Some(every) = allowance.preview_every(every, app.platform.clock.now_ms()) else {
                continue;
            };
            match drafts.show {
                Show::Draft => {
                    if let Err(e) = conn.bot.send_draft(target, message_id.max(1), &text).await {
                        tracing::debug!(error = %e, "sendMessageDraft failed");
                    }
                }
                Show::Edit => {
                    let known = match placeholder {
                        Some(known) => known,
                        None => placeholder_of(app, &key).await,
                    };
                    placeholder = Some(match known {
                        Some(id) => {
                            // Withdrawn text (a retry starts) shows as an ellipsis.
                            let body = if text.is_empty() { "…" } else { &text };
                            if let Err(e) =
                                conn.bot.edit_message(target, id, &clip(body), false).await
                            {
                                tracing::debug!(error = %e, "placeholder edit failed");
                            }
                            Some(id)
                        }
                        None if text.is_empty() => None,
                        None => {
                            send_placeholder(app, conn, target, message_id, &key, &text, drafts)
                                .await
                        }
                    });
                }
            }
            shown = text;
            app.platform.clock.sleep(every).await;
        }
    }
    futures::future::pending().await
}

/// The placeholder a previous try of this turn sent, if any.
async fn placeholder_of(app: &App, key: &str) -> Option<i64> {
    match app.platform.kv.get(key).await {
        Ok(v) => v.and_then(|b| std::str::from_utf8(&b).ok()?.parse().ok()),
        Err(e) => {
            tracing::debug!(error = %e, "placeholder lookup failed");
            None
        }
    }
}

/// Sends the placeholder (a reply to the question) and keeps its id; tells a turn that
/// ended meanwhile that it is kept.
async fn send_placeholder(
    app: &App,
    conn: &Connector,
    target: Target,
    message_id: i64,
    key: &str,
    text: &str,
    drafts: &Drafts,
) -> Option<i64> {
    drafts.sending.store(true, Ordering::SeqCst);
    let sent = conn
        .bot
        .send_message(target, &clip(text), false, Some(message_id))
        .await;
    let id = match sent {
        Ok(id) if id > 0 => {
            let put = app
                .platform
                .kv
                .put(key, id.to_string().as_bytes(), Some(PREVIEW_TTL))
                .await;
            if let Err(e) = put {
                tracing::warn!(error = %e, "placeholder id not kept");
            }
            Some(id)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "placeholder not sent");
            None
        }
    };
    drafts.sending.store(false, Ordering::SeqCst);
    let _ = drafts.settled.unbounded_send(());
    id
}

/// Shows "typing…" in the chat until dropped: at once, then every [`TYPING_EVERY`]
/// (Telegram shows it for about 5 s), while `allowance` spares the request. Failures are
/// only logged.
pub(super) async fn keep_typing(
    app: &App,
    conn: &Connector,
    target: Target,
    allowance: &crate::allowance::Allowance,
) -> std::convert::Infallible {
    loop {
        if allowance.may_spare() {
            if let Err(e) = conn.bot.send_typing(target).await {
                tracing::debug!(error = %e, "sendChatAction failed");
            }
        }
        crate::task::yield_now().await;
        app.platform.clock.sleep(TYPING_EVERY).await;
    }
}
