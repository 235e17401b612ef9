//! A background sub-agent's job (see [`crate::spawn`]): the task kept by `spawn` with
//! `background: true` fired like a reminder; the child runs as the chat's agent's, and its
//! answer (or why there is none) is posted to the chat and kept in its session.

use super::{Failure, Reply};
use crate::app::App;
use crate::connector::Routed;
use crate::llm::ChatMessage;
use crate::telegram::Message;
use crate::tools::ToolContext;

impl App {
    /// Runs background task `#id` (agent `agent` on `task`) and posts what came of it.
    pub(super) async fn background_task(
        &self,
        conn: &Routed<'_>,
        msg: &Message,
        id: u64,
        agent: &str,
        task: &str,
        tools: Option<Vec<String>>,
    ) -> Result<Reply, Failure> {
        let chat = msg.chat.id.0;
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        let ctx = ToolContext {
            scope: conn.memory_scope_of(msg),
            granted: self.granted(conn, chat).await.map_err(Failure::storage)?,
            origin: Some(super::reminders::origin(&conn.id, msg)),
            depth: 0,
            // The spend caps hold for a background task as for a turn.
            budget: self
                .budget(&conn.id, user)
                .await
                .map_err(Failure::storage)?,
        };
        tracing::info!(connector = %conn.id, task = id, agent, "background task runs");
        let (answer, reported) =
            crate::spawn::run_fired(&conn.agent, &self.spawn, &ctx, agent, task, tools).await;
        let reply = match answer {
            Ok(text) => format!("Background task #{id} ({agent}) is done:\n\n{text}"),
            Err(e) => format!("Background task #{id} ({agent}) did not finish: {e}"),
        };
        // The child's steps come marked with its agent.
        let books = self.books(msg, reported.usage, 0, reported.steps);
        // In the session, so the conversation's agent knows what came of it.
        let asked = ChatMessage::user_text(format!(
            "[Background task #{id}, handed to {agent} earlier:]\n{task}"
        ));
        let messages = vec![asked, ChatMessage::assistant_text(reply.clone())];
        let mut out = self.turn_reply(conn, msg, reply, messages, books);
        if let Reply::Send(cp) = &mut out {
            cp.reply_to = None;
        }
        Ok(out)
    }
}
