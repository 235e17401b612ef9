//! The Bot API client, over the Http port. Only the methods clawless calls.

use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{Clock, Http, HttpRequest, Outside, PortError};
use serde_json::{json, Value};

pub use super::form::{multipart, FilePart};
use super::keyboard::{Key, PANEL_TAP};
use super::pace::{self, Pacer};
use super::types::BotIdentity;
use crate::secret::Secret;

pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";
const TIMEOUT: Duration = Duration::from_secs(30);
/// A file download (up to 20 MB).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The update types the bot asks Telegram for (webhook and long polling alike).
pub const ALLOWED_UPDATES: [&str; 3] = ["message", "edited_message", "callback_query"];

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelegramError {
    /// 429: wait this many seconds before trying again.
    #[error("rate limited, retry after {0}s")]
    RetryAfter(u64),
    /// 400: Telegram refused the request itself (bad entities, message too long …).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 401/403/404: the token is wrong, or the bot was blocked or removed from the chat.
    #[error("refused ({0}): {1}")]
    Refused(u16, String),
    /// 5xx, timeouts, connection failures: worth retrying later.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Not sent: the outbound limiter has no slot for this chat for this many seconds
    /// (see `pace.rs`). Not a failure: the job waits, its attempts untouched.
    #[error("paced: the chat's next slot is in {0}s")]
    Paced(u64),
}

impl TelegramError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            TelegramError::RetryAfter(_) | TelegramError::Unavailable(_) | TelegramError::Paced(_)
        )
    }
    /// Telegram could not parse the HTML entities we sent.
    pub fn is_entity_error(&self) -> bool {
        matches!(self, TelegramError::BadRequest(d) if d.contains("parse entities") || d.contains("entity"))
    }
}

impl From<PortError> for TelegramError {
    fn from(e: PortError) -> Self {
        TelegramError::Unavailable(e.to_string())
    }
}

/// Where a reply goes: a chat and, in forums, a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub chat_id: i64,
    pub thread_id: Option<i64>,
}

pub struct BotApi {
    http: Arc<dyn Http>,
    base: String,
    token: Secret,
    /// Every message this bot sends waits for its slot here.
    pacer: Pacer,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl BotApi {
    pub fn new(http: Arc<dyn Http>, clock: Arc<dyn Clock>, base: &str, token: Secret) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
            pacer: Pacer::new(clock),
        }
    }

    /// Waits for the limiter's slot when `method` posts into chat `chat_id`.
    async fn pace(&self, method: &str, chat_id: Option<i64>) -> Result<(), TelegramError> {
        match (pace::counts(method), chat_id) {
            (Some(new_message), Some(chat)) => self
                .pacer
                .wait(chat, new_message)
                .await
                .map_err(TelegramError::Paced),
            _ => Ok(()),
        }
    }

    /// Calls `method` with a JSON body and returns the `result` field.
    pub async fn call(&self, method: &str, body: Value) -> Result<Value, TelegramError> {
        self.call_with_timeout(method, body, TIMEOUT).await
    }

    async fn call_with_timeout(
        &self,
        method: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<Value, TelegramError> {
        self.pace(method, body.get("chat_id").and_then(Value::as_i64))
            .await?;
        let url = format!("{}/bot{}/{method}", self.base, self.token.expose());
        self.answer(method, HttpRequest::post_json(url, &body, timeout))
            .await
    }

    /// Sends a Bot API request and reads its answer: the `result` field, or the error.
    async fn answer(&self, method: &str, req: HttpRequest) -> Result<Value, TelegramError> {
        let resp = self.http.send(req).await?;
        let parsed: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        let description = parsed
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match resp.status {
            200 if parsed.get("ok") == Some(&Value::Bool(true)) => {
                Ok(parsed.get("result").cloned().unwrap_or(Value::Null))
            }
            200 => Err(TelegramError::Unavailable(format!(
                "{method}: unexpected body"
            ))),
            429 => {
                let secs = parsed
                    .pointer("/parameters/retry_after")
                    .and_then(Value::as_u64)
                    .unwrap_or(5);
                Err(TelegramError::RetryAfter(secs))
            }
            400 => Err(TelegramError::BadRequest(description)),
            s @ (401 | 403 | 404) => Err(TelegramError::Refused(s, description)),
            s => Err(TelegramError::Unavailable(format!(
                "{method}: HTTP {s} {description}"
            ))),
        }
    }

    pub async fn get_me(&self) -> Result<BotIdentity, TelegramError> {
        let v = self.call("getMe", json!({})).await?;
        serde_json::from_value(v).map_err(|e| TelegramError::Unavailable(format!("getMe: {e}")))
    }

    /// Sends one message; `html` selects `parse_mode: HTML`. Returns the new message id.
    pub async fn send_message(
        &self,
        to: Target,
        text: &str,
        html: bool,
        reply_to: Option<i64>,
    ) -> Result<i64, TelegramError> {
        self.send_with_keyboard(to, text, html, reply_to, &[]).await
    }

    /// [`BotApi::send_message`] with an inline keyboard: `rows` of `(label, callback_data)`
    /// buttons (none: no keyboard).
    pub async fn send_with_keyboard(
        &self,
        to: Target,
        text: &str,
        html: bool,
        reply_to: Option<i64>,
        rows: &[Vec<Key<'_>>],
    ) -> Result<i64, TelegramError> {
        let mut body = json!({ "chat_id": to.chat_id, "text": text });
        if let Some(t) = to.thread_id {
            body["message_thread_id"] = json!(t);
        }
        if html {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(id) = reply_to {
            body["reply_parameters"] =
                json!({ "message_id": id, "allow_sending_without_reply": true });
        }
        if !rows.is_empty() {
            let rows: Vec<Vec<Value>> = rows
                .iter()
                .map(|row| {
                    row.iter()
                        .map(|key| match key {
                            Key::Callback(label, data) => {
                                json!({ "text": label, "callback_data": data })
                            }
                            Key::Url(label, url) => json!({ "text": label, "url": url }),
                            Key::WebApp(label, url) => {
                                json!({ "text": label, "web_app": { "url": url } })
                            }
                        })
                        .collect()
                })
                .collect();
            body["reply_markup"] = json!({ "inline_keyboard": rows });
        }
        let v = self.call("sendMessage", body).await?;
        Ok(v.get("message_id").and_then(Value::as_i64).unwrap_or(0))
    }

    /// Sends a message with one row of inline buttons, `(label, callback_data)` each.
    /// Returns the new message id.
    pub async fn send_buttons(
        &self,
        to: Target,
        text: &str,
        buttons: &[(&str, String)],
    ) -> Result<i64, TelegramError> {
        let row: Vec<Key<'_>> = buttons
            .iter()
            .map(|(l, d)| Key::Callback(l, d.as_str()))
            .collect();
        self.send_with_keyboard(to, text, false, None, &[row]).await
    }

    /// Replaces a message's text (and drops its buttons).
    pub async fn edit_text(
        &self,
        chat_id: i64,
        message_id: i64,
        text: &str,
    ) -> Result<(), TelegramError> {
        let body = json!({ "chat_id": chat_id, "message_id": message_id, "text": text });
        self.call("editMessageText", body).await.map(drop)
    }

    /// Replaces a message's text with `text` (HTML when `html`). "Not modified" counts as
    /// done.
    pub async fn edit_message(
        &self,
        to: Target,
        message_id: i64,
        text: &str,
        html: bool,
    ) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": to.chat_id, "message_id": message_id, "text": text });
        if html {
            body["parse_mode"] = json!("HTML");
        }
        match self.call("editMessageText", body).await {
            Err(TelegramError::BadRequest(d)) if d.contains("not modified") => Ok(()),
            other => other.map(drop),
        }
    }

    /// Deletes a message the bot sent.
    pub async fn delete_message(&self, chat_id: i64, message_id: i64) -> Result<(), TelegramError> {
        let body = json!({ "chat_id": chat_id, "message_id": message_id });
        self.call("deleteMessage", body).await.map(drop)
    }

    /// Answers a button tap (Telegram shows a spinner until then); `alert` shows `text` in
    /// a dialog instead of a passing notice.
    pub async fn answer_callback(
        &self,
        id: &str,
        text: &str,
        alert: bool,
    ) -> Result<(), TelegramError> {
        // A tap the control panel made for an answer given there: nobody waits in Telegram.
        if id.starts_with(PANEL_TAP) {
            return Ok(());
        }
        let body = json!({ "callback_query_id": id, "text": text, "show_alert": alert });
        self.call("answerCallbackQuery", body).await.map(drop)
    }

    /// Sends `content` as a document named `filename`, with a caption (multipart upload).
    /// Returns the new message id.
    pub async fn send_document(
        &self,
        to: Target,
        filename: &str,
        content: &[u8],
        caption: &str,
        reply_to: Option<i64>,
    ) -> Result<i64, TelegramError> {
        let file = FilePart {
            field: "document",
            name: filename,
            content_type: "text/markdown; charset=utf-8",
            bytes: content,
        };
        self.send_file("sendDocument", to, file, caption, reply_to)
            .await
    }

    /// Sends a voice note (`sendVoice`: OGG/Opus, MP3 or M4A) with a plain-text caption.
    pub async fn send_voice(
        &self,
        to: Target,
        voice: FilePart<'_>,
        caption: &str,
        reply_to: Option<i64>,
    ) -> Result<i64, TelegramError> {
        self.send_file("sendVoice", to, voice, caption, reply_to)
            .await
    }

    /// Sends a picture (`sendPhoto`) with a plain-text caption.
    pub async fn send_photo(
        &self,
        to: Target,
        photo: FilePart<'_>,
        caption: &str,
        reply_to: Option<i64>,
    ) -> Result<i64, TelegramError> {
        self.send_file("sendPhoto", to, photo, caption, reply_to)
            .await
    }

    /// One file upload of `method` (its form field named in `file`), paced like a message.
    async fn send_file(
        &self,
        method: &str,
        to: Target,
        file: FilePart<'_>,
        caption: &str,
        reply_to: Option<i64>,
    ) -> Result<i64, TelegramError> {
        let mut fields = vec![("chat_id", to.chat_id.to_string())];
        if !caption.is_empty() {
            fields.push(("caption", caption.to_owned()));
        }
        if let Some(t) = to.thread_id {
            fields.push(("message_thread_id", t.to_string()));
        }
        if let Some(id) = reply_to {
            fields.push((
                "reply_parameters",
                json!({ "message_id": id, "allow_sending_without_reply": true }).to_string(),
            ));
        }
        let (content_type, body) = multipart(&fields, file);
        self.pace(method, Some(to.chat_id)).await?;
        let url = format!("{}/bot{}/{method}", self.base, self.token.expose());
        let mut req = HttpRequest::post_json(url, &Value::Null, TIMEOUT);
        req.headers = vec![("content-type".into(), content_type)];
        req.body = body;
        let v = self.answer(method, req).await?;
        Ok(v.get("message_id").and_then(Value::as_i64).unwrap_or(0))
    }

    /// Where a file can be downloaded (`getFile`): its `file_path`, and its size when
    /// Telegram says.
    pub async fn get_file(&self, file_id: &str) -> Result<(String, Option<u64>), TelegramError> {
        let v = self.call("getFile", json!({ "file_id": file_id })).await?;
        let path = v
            .get("file_path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                // No path: the file is over the Bot API's 20 MB download limit.
                TelegramError::BadRequest("getFile: no file_path (file too big)".into())
            })?;
        Ok((path.to_owned(), v.get("file_size").and_then(Value::as_u64)))
    }

    /// Downloads a file by its `file_path`, reading at most `max_bytes` (`Ok(None)` when it
    /// is longer). The URL holds the bot token: no error names it.
    pub async fn download(
        &self,
        file_path: &str,
        max_bytes: usize,
    ) -> Result<Option<Vec<u8>>, TelegramError> {
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token.expose());
        let req = HttpRequest::get(url, DOWNLOAD_TIMEOUT).outside(Outside {
            max_body: max_bytes,
            // Telegram's own server (or a local Bot API server the owner runs).
            allow_private: true,
        });
        let resp = self
            .http
            .send(req)
            .await
            .map_err(|e| TelegramError::Unavailable(format!("file download: {:?}", e.kind)))?;
        match resp.status {
            200 if resp.truncated => Ok(None),
            200 => Ok(Some(resp.body)),
            s @ (401 | 403 | 404) => Err(TelegramError::Refused(s, "file download".into())),
            s => Err(TelegramError::Unavailable(format!(
                "file download: HTTP {s}"
            ))),
        }
    }

    /// Shows `text` as the draft `draft_id` of a reply being written (private chats; Telegram
    /// shows it for about 30 s, until the finished message replaces it). Plain text, cut to
    /// fit one message.
    pub async fn send_draft(
        &self,
        to: Target,
        draft_id: i64,
        text: &str,
    ) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": to.chat_id, "draft_id": draft_id, "text": clip(text) });
        if let Some(t) = to.thread_id {
            body["message_thread_id"] = json!(t);
        }
        self.call("sendMessageDraft", body).await.map(drop)
    }

    pub async fn send_typing(&self, to: Target) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": to.chat_id, "action": "typing" });
        if let Some(t) = to.thread_id {
            body["message_thread_id"] = json!(t);
        }
        self.call("sendChatAction", body).await.map(drop)
    }

    /// Long polling: waits up to `timeout_secs` for updates after `offset`.
    pub async fn get_updates(
        &self,
        offset: i64,
        timeout_secs: u64,
    ) -> Result<Vec<Value>, TelegramError> {
        let body = json!({ "offset": offset, "timeout": timeout_secs, "allowed_updates": ALLOWED_UPDATES });
        let v = self
            .call_with_timeout("getUpdates", body, Duration::from_secs(timeout_secs + 15))
            .await?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }

    pub async fn set_webhook(&self, url: &str, secret: &Secret) -> Result<(), TelegramError> {
        let body = json!({
            "url": url,
            "secret_token": secret.expose(),
            "allowed_updates": ALLOWED_UPDATES,
            "drop_pending_updates": false,
        });
        self.call("setWebhook", body).await.map(drop)
    }

    /// Makes the bot's menu button (in every private chat) open the Mini App at `url`.
    pub async fn set_menu_button_web_app(
        &self,
        text: &str,
        url: &str,
    ) -> Result<(), TelegramError> {
        let body = json!({
            "menu_button": { "type": "web_app", "text": text, "web_app": { "url": url } },
        });
        self.call("setChatMenuButton", body).await.map(drop)
    }

    pub async fn delete_webhook(&self) -> Result<(), TelegramError> {
        self.call("deleteWebhook", json!({})).await.map(drop)
    }

    pub async fn get_webhook_info(&self) -> Result<Value, TelegramError> {
        self.call("getWebhookInfo", json!({})).await
    }
}

/// `text` cut to fit one message (4096 UTF-16 units), ending with "…" when cut.
pub(crate) fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 4096;
    if text.encode_utf16().count() <= MAX {
        return text.into();
    }
    let mut units = 0;
    let end = text
        .char_indices()
        .find(|(_, c)| {
            units += c.len_utf16();
            units > MAX - 1
        })
        .map_or(text.len(), |(i, _)| i);
    format!("{}…", &text[..end]).into()
}
