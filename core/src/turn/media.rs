//! A turn's media: the photos, voice notes and files of a message (and of the rest of its
//! album) downloaded and turned into the user's message for the model: images and PDFs as
//! blocks, voice as a transcript, text files inline. What cannot be read gets a plain reply
//! instead of a model call.
//!
//! Kept in the job across retries (`MediaState`): the album's other updates, taken out of the
//! lane once, and each transcript, so a retry pays for no second transcription.

use base64::Engine as _;

use super::{Failure, Turn};
use crate::connector::Connector;
use crate::inbox::Job;
use crate::keys;
use crate::llm::{Block, ChatMessage, LlmError, ModelChain, Role};
use crate::media::kind::{self, Media};
use crate::telegram::{Message, TelegramError, Update};

/// Telegram sends at most ten items in an album.
const MAX_ALBUM: usize = 10;

/// What the user's message came to.
pub(super) enum Input {
    /// The message for the model.
    Message(ChatMessage),
    /// A reply instead of a model call (too large, not readable, no vision …).
    Reply(String),
    /// The lane was taken by another drainer while the album was gathered.
    Lost,
}

/// Downloads a file of at most `max` bytes; `None` when it is bigger (said by Telegram
/// or found while reading).
async fn fetch(
    conn: &Connector,
    file_id: &str,
    size: Option<u64>,
    max: usize,
) -> Result<Option<Vec<u8>>, Failure> {
    if size.is_some_and(|s| s > max as u64) {
        return Ok(None);
    }
    let (path, size) = match conn.bot.get_file(file_id).await {
        Ok(found) => found,
        // Over the Bot API's 20 MB limit: Telegram gives no path.
        Err(TelegramError::BadRequest(d)) if d.contains("too big") => return Ok(None),
        Err(e) => return Err(Failure::telegram(e)),
    };
    if size.is_some_and(|s| s > max as u64) {
        return Ok(None);
    }
    conn.bot
        .download(&path, max)
        .await
        .map_err(Failure::telegram)
}

impl Turn<'_> {
    /// The user's message for a turn on `msg`, whose text (cut, without mentions) is `text`.
    pub(super) async fn user_message(&self, job: &mut Job, text: String) -> Result<Input, Failure> {
        let Turn { app, conn, msg, .. } = *self;
        if !msg.has_media() {
            return Ok(Input::Message(ChatMessage::user_text(text)));
        }
        let mut messages = vec![msg.clone()];
        if let Some(group) = &msg.media_group_id {
            match self.gather_album(job, group).await? {
                Some(album) => messages.extend(album),
                None => return Ok(Input::Lost),
            }
        }
        // The model that will read them, as the chat chose it (read once for an album).
        let chain = super::model::chain_for(app, conn, msg.chat.id.0).await;
        let mut blocks = Vec::new();
        let mut notes = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            // The head's caption is `text`; another item's caption is read as it is.
            if i > 0 {
                if let Some(caption) = m.text() {
                    notes.push(caption.to_owned());
                }
            }
            let read = self.read_media(job, &chain, m).await?;
            match read {
                Read::Nothing => {}
                Read::Block(b) => blocks.push(b),
                Read::Note(n) => notes.push(n),
                Read::Reply(r) => return Ok(Input::Reply(r)),
            }
        }
        if blocks.is_empty() && notes.is_empty() && text.is_empty() {
            return Ok(Input::Reply(super::decide::NO_CONTENT.into()));
        }
        notes.push(text);
        let text = notes
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        // Images first, then the words: what the providers recommend.
        if !text.is_empty() {
            blocks.push(Block::Text { text });
        }
        Ok(Input::Message(ChatMessage {
            role: Role::User,
            content: blocks,
        }))
    }

    /// The album's other updates, taken out of the lane into `job` the first time (after
    /// waiting `media.album_wait_ms` from the first's arrival for the rest to arrive); `None`
    /// when the lane was lost meanwhile.
    async fn gather_album(
        &self,
        job: &mut Job,
        group: &str,
    ) -> Result<Option<Vec<Message>>, Failure> {
        let Turn {
            app,
            key,
            conn,
            lease,
            ..
        } = *self;
        let accepted_ms = job.accepted_ms;
        // Only a turn not yet begun reads its media (`process` sends the others elsewhere).
        let Some(state) = job.media_mut() else {
            return Ok(Some(Vec::new()));
        };
        if !state.gathered {
            let clock = &app.platform.clock;
            let until = accepted_ms.saturating_add(app.config.media.album_wait_ms);
            let now = clock.now_ms();
            if accepted_ms > 0 && now < until {
                clock
                    .sleep(std::time::Duration::from_millis(until - now))
                    .await;
            }
            let mut at = key.to_owned();
            while state.album.len() + 1 < MAX_ALBUM {
                let next = app
                    .inbox
                    .next_after(lease.lane, &at)
                    .await
                    .map_err(Failure::storage)?;
                let Some((next_key, next)) = next else {
                    break;
                };
                let same = Update::from_value(&next.update).ok().is_some_and(|u| {
                    u.message()
                        .and_then(|m| m.media_group_id.as_deref())
                        .is_some_and(|g| g == group)
                });
                if !same || next.checkpoint().is_some() || next.suspended().is_some() {
                    break;
                }
                state.album.push(next.update);
                state.album_ids.push(next.update_id);
                at = next_key;
            }
            state.gathered = true;
            if !app.inbox.hold(lease).await.map_err(Failure::storage)? {
                return Ok(None);
            }
            app.inbox.save(key, job).await.map_err(Failure::storage)?;
        }
        let state = job.media().cloned().unwrap_or_default();
        // Taken out of the lane (again after a crash: finishing twice is harmless), so they
        // are not answered on their own.
        for id in &state.album_ids {
            let sibling = keys::job(lease.lane, *id);
            let found = clawless_platform::KvExt::get_json::<Job>(&*app.platform.kv, &sibling)
                .await
                .map_err(Failure::storage)?;
            if let Some(s) = found {
                app.inbox
                    .finish(&sibling, &s)
                    .await
                    .map_err(Failure::storage)?;
            }
        }
        tracing::debug!(connector = %conn.id, items = state.album.len() + 1, "album gathered");
        Ok(Some(
            state
                .album
                .iter()
                .filter_map(|u| Update::from_value(u).ok())
                .filter_map(|u| u.message().cloned())
                .collect(),
        ))
    }

    /// One message's media, read.
    async fn read_media(
        &self,
        job: &mut Job,
        chain: &ModelChain,
        msg: &Message,
    ) -> Result<Read, Failure> {
        let Turn { app, conn, .. } = *self;
        let cfg = &app.config.media;
        let Some(media) = kind::of(msg, cfg.max_photo()) else {
            return Ok(Read::Nothing);
        };
        let first = chain.links.first();
        let model = first.map_or("none", |l| l.label.as_str());
        match media {
            Media::Image {
                file_id,
                size,
                media_type,
            } => {
                if !first.is_none_or(|l| l.vision) {
                    return Ok(Read::Reply(format!(
                        "I cannot see images: my model ({model}) has no vision. Describe it in words, or ask the bot's owner for a model that sees images."
                    )));
                }
                let Some(bytes) = fetch(conn, file_id, size, cfg.max_photo()).await? else {
                    return Ok(Read::Reply(too_large("photo", cfg.max_photo_kb)));
                };
                Ok(Read::Block(Block::Image {
                    media_type,
                    data: base64::engine::general_purpose::STANDARD.encode(bytes),
                }))
            }
            Media::Audio { file, name, what } => {
                if file.duration.is_some_and(|d| d > cfg.max_voice_secs) {
                    return Ok(Read::Reply(format!(
                        "That {what} is too long for me: I transcribe up to {} minutes.",
                        cfg.max_voice_secs.div_ceil(60)
                    )));
                }
                let known = job.media().and_then(|m| m.transcripts.get(&file.file_id));
                if let Some(t) = known {
                    return Ok(Read::Note(transcribed(what, t)));
                }
                let Some(tr) = app.transcriber.clone() else {
                    return Ok(Read::Reply(format!(
                        "I cannot listen to a {what} yet: the bot's owner needs to set GROQ_API_KEY or OPENAI_API_KEY (or TRANSCRIBE_BASE_URL) for transcription."
                    )));
                };
                let Some(bytes) =
                    fetch(conn, &file.file_id, file.file_size, cfg.max_audio()).await?
                else {
                    return Ok(Read::Reply(too_large(what, cfg.max_audio_kb)));
                };
                let t = tr
                    .transcribe(&bytes, &name)
                    .await
                    .map_err(|e| transcription_failed(&e, tr.name()))?;
                // Kept before anything else can fail, so a retry does not pay again.
                if let Some(media) = job.media_mut() {
                    media.transcripts.insert(file.file_id.clone(), t.clone());
                }
                self.save_media(job).await?;
                Ok(Read::Note(transcribed(what, &t)))
            }
            Media::Text { file, name } => {
                let Some(bytes) =
                    fetch(conn, &file.file_id, file.file_size, cfg.max_text()).await?
                else {
                    return Ok(Read::Reply(too_large("text file", cfg.max_text_kb)));
                };
                match read_text(&bytes) {
                    Some(text) => Ok(Read::Note(format!(
                        "[The user attached the file {name:?}; its content follows.]\n{text}\n[End of {name:?}.]"
                    ))),
                    None => Ok(Read::Reply(format!(
                        "I could not read {name:?}: it is not text (UTF-8)."
                    ))),
                }
            }
            Media::Pdf { file, name } => {
                if !first.is_some_and(|l| l.reads_pdf) {
                    return Ok(Read::Reply(format!(
                        "I cannot read PDFs with my model ({model}). Send the text, or ask the bot's owner for a model that reads PDFs (Anthropic, Gemini or OpenAI)."
                    )));
                }
                let Some(bytes) = fetch(conn, &file.file_id, file.file_size, cfg.max_pdf()).await?
                else {
                    return Ok(Read::Reply(too_large("PDF", cfg.max_pdf_kb)));
                };
                Ok(Read::Block(Block::Document {
                    media_type: "application/pdf".into(),
                    data: base64::engine::general_purpose::STANDARD.encode(bytes),
                    name,
                }))
            }
            Media::Other(what) if msg.text().is_none() => Ok(Read::Reply(format!(
                "I cannot read {what}: send me text, a photo, a voice note, a PDF or a text file."
            ))),
            Media::Other(what) => Ok(Read::Note(format!(
                "[The user attached {what}, which you cannot read.]"
            ))),
        }
    }

    /// Saves the job's media state, if the lane is still ours (else the next drainer reads
    /// the media again).
    async fn save_media(&self, job: &Job) -> Result<(), Failure> {
        let Turn {
            app, key, lease, ..
        } = *self;
        if app.inbox.hold(lease).await.map_err(Failure::storage)? {
            app.inbox.save(key, job).await.map_err(Failure::storage)?;
        }
        Ok(())
    }
}

/// One message's media, read.
enum Read {
    Nothing,
    Block(Block),
    /// Words for the model (a transcript, a text file, a note).
    Note(String),
    Reply(String),
}

fn transcribed(what: &str, text: &str) -> String {
    format!("[A {what} from the user, transcribed:]\n{text}")
}

fn too_large(what: &str, max_kb: u64) -> String {
    let size = if max_kb >= 1024 {
        format!("{} MB", max_kb / 1024)
    } else {
        format!("{max_kb} KB")
    };
    format!("That {what} is too large for me: I read up to {size}.")
}

fn transcription_failed(e: &LlmError, service: &str) -> Failure {
    let said = e.for_user(Some(service));
    Failure {
        user: said.replacen("the model provider", "the transcription service", 1),
        detail: format!("transcription: {e}"),
    }
}

/// The text of a file, or `None` when it is not text: invalid UTF-8 or NUL bytes.
fn read_text(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    (!text.contains('\0')).then(|| text.to_owned())
}
