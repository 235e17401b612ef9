//! A tap on one of the bot's buttons that no waiting turn took (a waiting turn takes the taps
//! queued behind it: `approval::await_answer`): decoded once ([`Button`]) and handed to the
//! module the button belongs to; a stale approval or data no button of this bot wrote is
//! refused. Every tap is answered.

use super::button::Button;
use crate::app::App;
use crate::connector::Connector;
use crate::telegram::types::CallbackQuery;

/// Answers a tap on one of the bot's buttons ([`Button`]) that no waiting turn
/// took: a reminder's cancel, a model, an agent, a `/users` remove; an approval no turn
/// waits for any more; data no button of this bot wrote is refused. Always answered.
pub(super) async fn button_tap(app: &App, conn: &Connector, q: &CallbackQuery) {
    let tapped = q.data.as_deref().and_then(Button::decode);
    let refusal = match &tapped {
        Some(Button::CancelReminder(id)) => {
            return super::reminders::reminder_tap(app, conn, q, *id).await
        }
        Some(b @ (Button::Model { .. } | Button::DefaultModel)) => {
            return super::model::model_tap(app, conn, q, b).await
        }
        Some(Button::Agent(index)) => return super::agents::agent_tap(app, conn, q, *index).await,
        Some(Button::Unpair(user)) => {
            return super::pairing::pairing_tap(app, conn, q, *user).await
        }
        // A stale or repeated approval button.
        Some(Button::Approval { .. }) => "This request is no longer waiting.",
        None => "That button is no longer valid.",
    };
    if let Err(e) = conn.bot.answer_callback(&q.id, refusal, false).await {
        tracing::debug!(error = %e, "answerCallbackQuery failed");
    }
}
