//! Voice replies. `/voice on|off|auto` sets when a chat's answers are spoken
//! (`voice/<connector>/<chat>`, else `media.voice_replies`; auto answers a voice note with
//! one). A spoken answer's checkpoint starts with a voice part holding the words
//! ([`speakable`]: prose only, at most `media.max_spoken_chars`), the whole text after it. The
//! words are spoken when the part is sent, after a check that the spend cap leaves room for
//! them, and the audio is kept in Files until `sendVoice` took it: a crash or a deferral
//! before then sends the kept audio, not a second (paid) speech; a crash while the speech is
//! being made speaks again. The part is counted sent once, like every part. The speech's cost
//! joins the person's spend. What fails (no audio, not audio, too big, a voice note Telegram
//! refuses, no room under the cap) becomes one short line; the text follows as always.

use clawless_platform::{KvExt, PortError};

use super::Turn;
use crate::app::App;
use crate::connector::Connector;
use crate::keys;
use crate::media::config::VoiceMode;
use crate::media::speak::{speakable, NO_SPEECH};
use crate::telegram::api::FilePart;
use crate::telegram::render::{voice_part, Part};
use crate::telegram::TelegramError;

/// When `chat`'s answers are spoken: its `/voice` choice, else the configured default.
pub(super) async fn mode(app: &App, conn: &Connector, chat: i64) -> VoiceMode {
    let key = keys::chat_voice(&conn.id, chat);
    match app.platform.kv.get_json::<VoiceMode>(&key).await {
        Ok(Some(mode)) => mode,
        Ok(None) => app.config.media.voice_replies,
        Err(e) => {
            tracing::warn!(error = %e, "the chat's voice setting could not be read");
            app.config.media.voice_replies
        }
    }
}

/// Whether the answer to `msg` is spoken: a speech service is set and the chat's mode says
/// so for this message.
pub(super) async fn speaks(app: &App, conn: &Connector, msg: &crate::telegram::Message) -> bool {
    if app.speaker.is_none() {
        return false;
    }
    mode(app, conn, msg.chat.id.0)
        .await
        .speaks(msg.voice.is_some())
}

/// The voice part an answer starts with, when there are words in it to speak.
pub(super) fn spoken(app: &App, reply: &str) -> Option<Part> {
    let words = speakable(reply, app.config.media.max_spoken_chars);
    (!words.is_empty()).then(|| voice_part(words))
}

/// `/voice`, `/voice on|off|auto`: says or sets when this chat's answers are spoken.
pub(super) async fn voice_reply(
    app: &App,
    conn: &Connector,
    chat: i64,
    args: &str,
) -> Result<String, PortError> {
    let describe = |mode: VoiceMode| match mode {
        VoiceMode::Auto => "auto: a voice note gets a voice note back, with its text",
        VoiceMode::On => "on: every answer is spoken too, with its text",
        VoiceMode::Off => "off: answers are text only",
    };
    let service = match app.speaks() {
        Some(_) => String::new(),
        None => format!("\n{NO_SPEECH}"),
    };
    if args.trim().is_empty() {
        let now = mode(app, conn, chat).await;
        return Ok(format!(
            "Voice replies here are {}. Change with /voice on, /voice off or /voice auto.{service}",
            describe(now)
        ));
    }
    let Some(new) = VoiceMode::parse(args) else {
        return Ok("Say /voice on, /voice off or /voice auto.".into());
    };
    app.platform
        .kv
        .put_json(&keys::chat_voice(&conn.id, chat), &new, None)
        .await?;
    Ok(format!("Voice replies are now {}.{service}", describe(new)))
}

impl Turn<'_> {
    /// Speaks `words` and sends them as a voice note; a failure to speak, speech the spend
    /// cap does not leave room for, or a voice note Telegram refuses or fails to take, sends a
    /// short line instead (the answer's text follows). The audio is kept (see [`kept_path`])
    /// until the voice note is sent, so a crash or a deferral before then sends it again
    /// without speaking (and paying for) it twice. Errors are the line's, or a pacing
    /// deferral: the part is tried again.
    pub(super) async fn send_spoken(
        &self,
        words: &str,
        reply_to: Option<i64>,
    ) -> Result<(), TelegramError> {
        let Turn {
            app,
            conn,
            msg,
            target,
            ..
        } = *self;
        let Some(speaker) = app.speaker.clone() else {
            // The service went away since the answer was decided: text only.
            return Ok(());
        };
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        let files = &app.platform.files;
        let kept = kept_path(&conn.id, msg, words);
        // The audio of an earlier try, and what the spend cap leaves, read together.
        let (earlier, left) = futures::future::join(
            files.read(&kept),
            super::reports::budget(app, &conn.id, user),
        )
        .await;
        let earlier = earlier
            .ok()
            .and_then(|audio| crate::media::speak::check(speaker.name(), audio, 0).ok());
        let speech = match earlier {
            Some(speech) => speech,
            None => {
                let price = speaker.price_micros(words);
                let left = left.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "the spend cap could not be read for speech");
                    None
                });
                if let Some(left) = left.filter(|l| l.micros < price) {
                    let line = format!(
                        "(Not said aloud: speaking it would pass {} spend cap. Here it is in writing.)",
                        left.cap
                    );
                    return self.send_line(&line, reply_to).await;
                }
                let speech = match speaker.speak(words).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(service = speaker.name(), error = %e, "speech failed");
                        let line = format!(
                            "(I could not say this aloud: the speech service {} {}. Here it is in writing.)",
                            speaker.name(),
                            failed_how(&e)
                        );
                        return self.send_line(&line, reply_to).await;
                    }
                };
                let spend = crate::llm::Tally {
                    calls: 1,
                    cost_micros: speech.cost_micros,
                    ..Default::default()
                };
                let models = [crate::usage::ModelSpend {
                    agent: conn.agent.config.id.clone(),
                    model: speaker.model().to_owned(),
                    spend,
                }];
                let ledger = app.ledger();
                let counted = ledger.add(&conn.id, user, msg.chat.id.0, spend, &models);
                let (written, counted) =
                    futures::future::join(files.write(&kept, &speech.audio), counted).await;
                if let Err(e) = counted {
                    tracing::warn!(error = %e, "the speech's spend was not counted");
                }
                if let Err(e) = written {
                    tracing::warn!(error = %e, "the speech was not kept until it is sent");
                }
                speech
            }
        };
        let file = FilePart {
            field: "voice",
            name: speech.format.file_name(),
            content_type: speech.format.content_type(),
            bytes: &speech.audio,
        };
        let upload = || conn.bot.send_voice(target, file, "", reply_to);
        let sent = super::deliver::patiently(app, upload).await;
        if !matches!(sent, Err(TelegramError::Paced(_))) {
            // Sent, or given up on: the kept audio is done with.
            if let Err(e) = files.delete(&kept).await {
                tracing::warn!(error = %e, "the kept speech was not deleted");
            }
        }
        match sent {
            Ok(()) => Ok(()),
            // The chat's sending slots are taken: the part goes out later.
            Err(e @ TelegramError::Paced(_)) => Err(e),
            // Refused (a person's privacy settings may refuse voice notes:
            // VOICE_MESSAGES_FORBIDDEN) or failed: the text still goes, after a line.
            Err(e) => {
                tracing::info!(error = %e, "voice note not sent");
                self.send_line(
                    "(Telegram did not take this answer as a voice note. Here it is in writing.)",
                    reply_to,
                )
                .await
            }
        }
    }
}

/// Where the audio of the answer to `msg` speaking `words` is kept until it is sent
/// (`spoken/<connector>/<chat>/<message>-<digest of the words>`; never exported).
pub(crate) fn kept_path(
    connector: &crate::ids::ConnectorId,
    msg: &crate::telegram::Message,
    words: &str,
) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(words.as_bytes());
    let short: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{SPOKEN_DIR}/{connector}/{}/{}-{short}",
        msg.chat.id.0, msg.message_id
    )
}

/// The folder of spoken answers waiting to be sent.
pub const SPOKEN_DIR: &str = "spoken";

/// How a speech service failed, in a few words.
fn failed_how(e: &crate::llm::LlmError) -> &'static str {
    match e {
        crate::llm::LlmError::RateLimited { .. } => "is busy",
        crate::llm::LlmError::Transient(_) => "did not answer",
        crate::llm::LlmError::Fatal(m) if m.contains("not audio") || m.contains("empty") => {
            "sent no usable audio"
        }
        crate::llm::LlmError::Fatal(m) if m.contains("limit") => "sent too long a recording",
        _ => "refused",
    }
}
