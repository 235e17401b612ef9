//! Pictures in answers. The pictures `generate_image` made this turn (found by their calls'
//! results in the turn's messages) become photo parts of the checkpoint, ahead of the text, so
//! each is sent once with `sendPhoto`, through crashes, from the copy kept in the workspace.
//! `/imagine <prompt>` makes one without the model. What fails (the picture deleted before it
//! was sent, a photo Telegram refuses) becomes one short line.

use clawless_platform::{ErrorKind, PortError};

use super::{Checkpoint, Reply, Turn};
use crate::app::App;
use crate::connector::Routed;
use crate::ids::Scope;
use crate::llm::{Block, ChatMessage};
use crate::media::image::{ImageFormat, NO_IMAGES};
use crate::telegram::api::FilePart;
use crate::telegram::render::{photo_part, Part};
use crate::telegram::Message;
use crate::telegram::TelegramError;
use crate::tools::files::path::workspace_path;
use crate::tools::image::{caption_of, picture_of, GenerateImage, NAME};
use crate::usage::Books;

/// Pictures sent with one answer, at most (a model asking for more gets them kept, not sent).
pub const MAX_PICTURES_PER_ANSWER: usize = 4;

/// The photo parts of the pictures `messages` made in `scope`'s workspace, in call order.
pub(super) fn photo_parts(messages: &[ChatMessage], scope: &Scope) -> Vec<Part> {
    let mut captions: Vec<(&str, String)> = Vec::new();
    let mut parts = Vec::new();
    for m in messages {
        for (id, name, input) in m.tool_uses() {
            if name == NAME {
                captions.push((id, caption_of(input)));
            }
        }
        for block in &m.content {
            let Block::ToolResult {
                tool_use_id,
                content,
                is_error: false,
            } = block
            else {
                continue;
            };
            let Some((_, caption)) = captions.iter().find(|(id, _)| id == tool_use_id) else {
                continue;
            };
            let full = picture_of(content).and_then(|p| workspace_path(scope, &p).ok());
            if let Some(full) = full {
                if parts.len() < MAX_PICTURES_PER_ANSWER {
                    parts.push(photo_part(full, caption.clone()));
                }
            }
        }
    }
    parts
}

/// `/imagine <prompt>`: one picture, made without the model and sent as the reply; its cost
/// joins the person's spend, like the model's.
pub(super) async fn imagine(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
    args: &str,
    (reply_to, books): (Option<i64>, Option<Box<Books>>),
) -> Result<Reply, PortError> {
    let text = |text: &str, books: Option<Box<Books>>| {
        Reply::Send(Checkpoint {
            parts: crate::telegram::render::plain_parts(text),
            sent: 0,
            reply_to,
            session_turn: None,
            taint: None,
            books,
        })
    };
    let prompt = args.trim();
    let Some(painter) = app.painter.clone() else {
        return Ok(text(NO_IMAGES, books));
    };
    if prompt.is_empty() {
        let how = "Say what to draw, e.g. /imagine a lighthouse at dusk, watercolour.";
        return Ok(text(how, books));
    }
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    let left = super::reports::budget(app, &conn.id, user).await?;
    let tool = GenerateImage::new(
        painter,
        app.platform.files.clone(),
        app.platform.clock.clone(),
    );
    let scope = conn.memory_scope_of(msg);
    // One turn of its own (`<turn>:<round>:<call>`), for the tool's count of pictures a turn.
    let call = format!(
        "imagine/{}/{}/{}:0:0",
        conn.id, msg.chat.id.0, msg.message_id
    );
    let size = crate::media::image::SIZES[0];
    let made = crate::tools::image::make(&tool, &scope, (prompt, size, &call), left.as_ref()).await;
    let made = match made {
        Ok(m) => m,
        Err(u) => return Ok(text(&u.user, books)),
    };
    // The picture's spend joins the command's books (or books of its own).
    let model = crate::usage::ModelSpend {
        agent: conn.agent.config.id.clone(),
        model: tool.painter.model().to_owned(),
        spend: made.spend,
    };
    let books = match books {
        Some(mut b) => {
            b.spend.add(made.spend);
            b.models.push(model);
            Some(b)
        }
        None => Some(Box::new(Books {
            spend: made.spend,
            user,
            chat: msg.chat.id.0,
            audit: Vec::new(),
            models: vec![model],
        })),
    };
    if let Some(why) = made.unkept {
        return Ok(text(&why, books));
    }
    let caption = crate::tools::image::cut_caption(prompt);
    Ok(Reply::Send(Checkpoint {
        parts: vec![photo_part(made.full, caption)],
        sent: 0,
        reply_to,
        session_turn: None,
        taint: None,
        books,
    }))
}

impl Turn<'_> {
    /// Sends the picture at `full` with `caption`; a picture gone from the workspace, or one
    /// Telegram refuses or fails to take, sends a short line instead. Errors are the line's,
    /// storage's, or a pacing deferral: the part is tried again.
    pub(super) async fn send_picture(
        &self,
        full: &str,
        caption: &str,
        reply_to: Option<i64>,
    ) -> Result<(), TelegramError> {
        let Turn {
            app, conn, target, ..
        } = *self;
        let bytes = match app.platform.files.read(full).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => {
                return self
                    .send_line(
                        "(The picture was deleted before I could send it.)",
                        reply_to,
                    )
                    .await
            }
            Err(e) => return Err(TelegramError::Unavailable(format!("storage: {e}"))),
        };
        let Some(format) = ImageFormat::of(&bytes) else {
            return self
                .send_line("(The picture I kept is no longer an image.)", reply_to)
                .await;
        };
        let name = format!("picture.{}", format.extension());
        let file = FilePart {
            field: "photo",
            name: &name,
            content_type: format.content_type(),
            bytes: &bytes,
        };
        let upload = || conn.bot.send_photo(target, file, caption, reply_to);
        match super::deliver::patiently(app, upload).await {
            Ok(()) => Ok(()),
            Err(e @ TelegramError::Paced(_)) => Err(e),
            Err(e) => {
                tracing::info!(error = %e, "photo not sent");
                self.send_line(
                    "(Telegram did not take the picture; it is in your files, under pictures/.)",
                    reply_to,
                )
                .await
            }
        }
    }
}
