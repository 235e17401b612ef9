//! Delivery: the checkpointed session turn applied once, then each part sent once (HTML
//! first, plain text when Telegram refuses the entities, short 429s waited out), each send
//! counted in the job so a retry sends only what is missing.

use std::time::Duration;

use clawless_platform::PortError;

use super::{Step, Turn};
use crate::app::App;
use crate::connector::Connector;
use crate::inbox::Job;
use crate::session;
use crate::telegram::api::Target;
use crate::telegram::keyboard::Key;
use crate::telegram::render::Part;
use crate::telegram::TelegramError;

/// Appends the checkpointed turn to its session, unless a previous try already did.
/// Returns whether the session has grown past its budget and is due to be compacted
/// (after delivery, `compact.rs`).
async fn apply_session_turn(app: &App, job: &Job, update_id: i64) -> Result<bool, PortError> {
    let Some(cp) = job.checkpoint() else {
        return Ok(false);
    };
    let Some((key, messages)) = &cp.session_turn else {
        return Ok(false);
    };
    let cfg = &app.config.session;
    // With compaction on, what passes the window waits (up to twice the window) to be
    // summarised rather than dropped; the model still reads at most the window.
    let keep = match cfg.compact_tokens {
        0 => cfg.history_window,
        _ => cfg.history_window.saturating_mul(2),
    };
    let kv = &*app.platform.kv;
    let when = (cfg.idle_ms(), app.platform.clock.now_ms());
    let turn = session::NewTurn {
        update_id,
        messages,
        tainted: cp.taint.as_deref(),
    };
    let Some(s) = session::append_turn(kv, key, turn, keep, when).await? else {
        return Ok(false);
    };
    Ok(crate::memory::compact::is_due(
        &s.messages,
        cfg.compact_tokens,
        cfg.history_window,
        cfg.keep_recent,
    ))
}

/// Puts the first part into the placeholder `id` the reply streamed into: an edit for a
/// text part (HTML, then plain text), else the placeholder is deleted and the part sent.
/// A placeholder that cannot be edited (deleted meanwhile) gives way to a new message.
async fn replace_placeholder(
    app: &App,
    conn: &Connector,
    target: Target,
    id: i64,
    part: &Part,
    reply_to: Option<i64>,
) -> Result<(), TelegramError> {
    if part.document.is_some() || !part.buttons.is_empty() || !part.links.is_empty() {
        if let Err(e) = conn.bot.delete_message(target.chat_id, id).await {
            tracing::debug!(error = %e, "placeholder not deleted");
        }
        return send_part(app, conn, target, part, reply_to).await;
    }
    match with_fallbacks(app, conn, target, part, Put::Edit(id)).await {
        Err(TelegramError::BadRequest(e)) => {
            tracing::debug!(error = %e, "placeholder not editable; sending anew");
            send_part(app, conn, target, part, reply_to).await
        }
        done => done,
    }
}

/// Sends one part, with `with_fallbacks`.
pub(super) async fn send_part(
    app: &App,
    conn: &Connector,
    target: Target,
    part: &Part,
    reply_to: Option<i64>,
) -> Result<(), TelegramError> {
    with_fallbacks(app, conn, target, part, Put::Send(reply_to)).await
}

/// Puts `part` out as `how` says: HTML first and, if Telegram refuses its entities, the
/// same as plain text; a short `retry_after` is waited out here.
async fn with_fallbacks(
    app: &App,
    conn: &Connector,
    target: Target,
    part: &Part,
    how: Put,
) -> Result<(), TelegramError> {
    let mut html = part.html;
    let mut text = part.text.clone();
    for _ in 0..4 {
        let done = match (how, &part.document) {
            (Put::Edit(id), _) => conn.bot.edit_message(target, id, &text, html).await,
            (Put::Send(reply_to), Some(doc)) => conn
                .bot
                .send_document(target, "answer.md", doc.as_bytes(), &text, reply_to)
                .await
                .map(drop),
            (Put::Send(reply_to), None) => {
                let rows: Vec<Vec<Key<'_>>> = part
                    .buttons
                    .iter()
                    .map(|(label, data)| vec![Key::Callback(label, data)])
                    .chain(part.links.iter().map(|l| {
                        vec![if l.web_app {
                            Key::WebApp(&l.label, &l.url)
                        } else {
                            Key::Url(&l.label, &l.url)
                        }]
                    }))
                    .collect();
                conn.bot
                    .send_with_keyboard(target, &text, html, reply_to, &rows)
                    .await
                    .map(drop)
            }
        };
        match done {
            Ok(()) => return Ok(()),
            Err(e) if html && e.is_entity_error() => {
                tracing::warn!(error = %e, "HTML refused; trying again as plain text");
                html = false;
                text = crate::telegram::render::strip_html(&text);
            }
            Err(TelegramError::RetryAfter(secs)) if secs <= 30 => {
                app.platform.clock.sleep(Duration::from_secs(secs)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Err(TelegramError::Unavailable(
        "gave up sending after repeated refusals".into(),
    ))
}

impl Turn<'_> {
    /// One plain line, sent as a part (what a voice note or a picture that failed becomes).
    pub(super) async fn send_line(
        &self,
        line: &str,
        reply_to: Option<i64>,
    ) -> Result<(), TelegramError> {
        let part = crate::telegram::render::plain_parts(line)
            .into_iter()
            .next()
            .unwrap_or_default();
        send_part(self.app, self.conn, self.target, &part, reply_to).await
    }

    /// Sends the parts not sent yet, checkpointing each, then appends the checkpointed turn
    /// to its session and finishes the job. `preview` names the Kv key of a placeholder the
    /// reply streamed into (groups, see `draft.rs`): the first part replaces its text instead
    /// of going out as a new message. With the step, whether the session is due to be
    /// compacted.
    ///
    /// The session is written after the sends, not before: the reply does not wait for it,
    /// and the lane's next job does (it starts once this one is finished), so it still reads
    /// the history with this turn in it. A crash in between leaves the job, whose retry
    /// sends nothing again and appends the turn once (`update_id` marks it).
    pub(super) async fn deliver(
        &self,
        job: &mut Job,
        preview: Option<String>,
        update_id: i64,
    ) -> Result<(Step, bool), PortError> {
        let Turn {
            app,
            key,
            conn,
            target,
            lease,
            ..
        } = *self;
        // The placeholder waits for the first text part (voice notes and pictures go first).
        let no_text_yet = job.checkpoint().map(|c| {
            c.parts
                .iter()
                .take(c.sent)
                .all(|p| p.voice.is_some() || p.photo.is_some())
        });
        let mut placeholder = match (preview, no_text_yet) {
            (Some(preview), Some(true)) => app
                .platform
                .kv
                .get(&preview)
                .await?
                .and_then(|b| std::str::from_utf8(&b).ok()?.parse::<i64>().ok()),
            _ => None,
        };
        while let Some((part, reply_to)) = next_part(job) {
            if !app.inbox.hold(lease).await? {
                tracing::warn!(key, "lane taken by another drainer; stopped before sending");
                return Ok((Step::LostLease, false));
            }
            let sent = match (&part.voice, &part.photo, placeholder.take()) {
                // A voice note or a photo goes out as its own message; a placeholder waits for
                // the text.
                (Some(words), _, kept) => {
                    placeholder = kept;
                    self.send_spoken(words, reply_to).await
                }
                (None, Some(full), kept) => {
                    placeholder = kept;
                    self.send_picture(full, &part.text, reply_to).await
                }
                (None, None, Some(id)) => {
                    replace_placeholder(app, conn, target, id, &part, reply_to).await
                }
                (None, None, None) => send_part(app, conn, target, &part, reply_to).await,
            };
            match sent {
                Ok(()) => {
                    let mut sent = crate::events::Event::ReplySent {
                        chat: target.chat_id,
                        part: 0,
                        parts: 0,
                    };
                    if let Some(cp) = job.checkpoint_mut() {
                        cp.sent += 1;
                        sent = crate::events::Event::ReplySent {
                            chat: target.chat_id,
                            part: cp.sent,
                            parts: cp.parts.len(),
                        };
                    }
                    app.inbox.save(key, job).await?;
                    app.emit(&super::trace(job), sent);
                }
                Err(TelegramError::Paced(secs)) => {
                    let until = app.platform.clock.now_ms() + secs * 1000;
                    tracing::info!(key, secs, "the chat's sending slots are taken; later");
                    let at = app.inbox.defer(key, job, until).await?;
                    return Ok((Step::RetryAt(at), false));
                }
                Err(e) if e.is_transient() => {
                    if let Some(at) = app.inbox.retry_later(key, job).await? {
                        tracing::warn!(key, error = %e, "send failed; will retry");
                        return Ok((Step::RetryAt(at), false));
                    }
                    tracing::error!(key, error = %e, "send failed for the last time; reply dropped");
                    break;
                }
                Err(e) => {
                    tracing::error!(key, error = %e, "Telegram refused the reply; dropped");
                    break;
                }
            }
        }
        let compact = apply_session_turn(app, job, update_id).await?;
        app.inbox.finish(key, job).await?;
        Ok((Step::Done, compact))
    }
}

/// An upload (a voice note, a photo) put out, a short `retry_after` waited out as
/// [`with_fallbacks`] does for text.
pub(super) async fn patiently<F, Fut>(app: &App, mut put: F) -> Result<(), TelegramError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<i64, TelegramError>>,
{
    for _ in 0..4 {
        match put().await {
            Ok(_) => return Ok(()),
            Err(TelegramError::RetryAfter(secs)) if secs <= 30 => {
                app.platform.clock.sleep(Duration::from_secs(secs)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Err(TelegramError::Unavailable(
        "gave up sending after repeated refusals".into(),
    ))
}

/// How a part goes out: a new message (replying to a message, or not), or an edit of the
/// placeholder message with this id.
#[derive(Debug, Clone, Copy)]
enum Put {
    Send(Option<i64>),
    Edit(i64),
}

/// The next part to send and, for the first, the message it replies to.
fn next_part(job: &Job) -> Option<(Part, Option<i64>)> {
    let cp = job.checkpoint()?;
    let part = cp.parts.get(cp.sent)?.clone();
    Some((part, if cp.sent == 0 { cp.reply_to } else { None }))
}
