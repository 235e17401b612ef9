//! Pending approvals in the panel (the owner's): what waits, and an answer given from the
//! page. An answer is a tap: the panel puts a callback query into the lane of the approval's
//! chat through the ack path (`App::accept_update`), as Telegram would, so the turn resumes
//! on the one path every tap takes — answered once under the lane's lease, the approval
//! message edited (saying it was answered from the panel), a replayed answer finding nothing
//! waiting. Its id starts with [`PANEL_TAP`], which `BotApi::answer_callback` never sends to
//! Telegram.

use clawless_platform::KvExt;
use serde_json::{json, Value};

use super::{PanelReply, Who};
use crate::app::App;
use crate::ids::Lane;
use crate::inbox::Job;
use crate::keys;
use crate::turn::button::{Button, Choice};

use crate::telegram::keyboard::PANEL_TAP;
/// Update ids of panel taps start here: past every Telegram update id, so a tap sorts
/// behind the approval it answers in the lane.
const TAP_IDS_FROM: i64 = 1 << 53;
/// Jobs looked through for waiting approvals, at most.
const MAX_JOBS: usize = 10_000;
/// Approvals listed, at most.
const MAX_LISTED: usize = 50;

/// The approvals waiting on the owner's bot, oldest lane first.
pub(crate) async fn list(app: &App, who: &Who<'_>) -> Result<Value, clawless_platform::PortError> {
    let kv = &*app.platform.kv;
    let mut out = Vec::new();
    let mut last_lane = String::new();
    for key in kv.list(keys::INBOX, MAX_JOBS).await? {
        let Some((lane, _)) = key
            .strip_prefix(keys::INBOX)
            .and_then(|r| r.rsplit_once('/'))
        else {
            continue;
        };
        // Only each lane's head can wait.
        if lane == last_lane {
            continue;
        }
        last_lane = lane.to_owned();
        if Lane::new(lane).connector().as_ref() != Some(&who.conn.id) {
            continue;
        }
        let Some(job) = kv.get_json::<Job>(&key).await? else {
            continue;
        };
        let Some(s) = job.suspended() else {
            continue;
        };
        if s.answer.is_some() || s.message_id.is_none() {
            continue;
        }
        out.push(json!({
            "lane": lane,
            "id": s.id,
            "tool": s.call.name,
            "args": crate::audit::shown_args(&s.call.input, 600),
            "why": s.call.why,
            "asker": s.asker,
            "expires_ms": s.expires_ms,
            "trace": crate::turn::trace(&job),
        }));
        if out.len() >= MAX_LISTED {
            break;
        }
    }
    Ok(json!({ "approvals": out }))
}

/// `{"lane", "id", "answer": "once" | "while" | "deny"}`: the owner's answer, as a tap in the
/// approval's lane; 202 and the lane to drain. 404 when that approval no longer waits.
pub(crate) async fn answer(app: &App, who: &Who<'_>, body: &[u8]) -> PanelReply {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return PanelReply::error(400, "the body is not JSON"),
    };
    let field = |name: &str| {
        v.get(name)
            .and_then(Value::as_str)
            .filter(|s| s.len() <= 128)
    };
    let (Some(lane), Some(id), Some(answer)) = (field("lane"), field("id"), field("answer")) else {
        return PanelReply::error(400, "send {\"lane\", \"id\", \"answer\"}");
    };
    let answer = match answer {
        "once" => Choice::Once,
        "while" => Choice::ForAWhile,
        "deny" => Choice::Deny,
        _ => return PanelReply::error(400, "answer is once, while or deny"),
    };
    let lane = Lane::new(lane);
    if lane.connector().as_ref() != Some(&who.conn.id) {
        return PanelReply::error(404, "no such approval");
    }
    let kv = &*app.platform.kv;
    let head = match kv.list(&keys::lane_jobs(&lane), 1).await {
        Ok(mut keys) => keys.pop(),
        Err(e) => return super::unavailable(e),
    };
    let job = match head {
        Some(key) => match kv.get_json::<Job>(&key).await {
            Ok(job) => job,
            Err(e) => return super::unavailable(e),
        },
        None => None,
    };
    let waiting = job.as_ref().and_then(|j| {
        let s = j.suspended()?;
        (s.id == id && s.answer.is_none()).then_some((s.message_id?, j))
    });
    let Some((message_id, job)) = waiting else {
        return PanelReply::error(404, "that approval no longer waits");
    };
    // The approval was asked in the chat of the update that started the turn.
    let chat = [
        "/message/chat",
        "/callback_query/message/chat",
        "/business_message/chat",
    ]
    .iter()
    .find_map(|at| job.update.pointer(at))
    .filter(|c| c.get("id").is_some_and(Value::is_i64))
    .cloned();
    let Some(chat) = chat else {
        return PanelReply::error(404, "that approval no longer waits");
    };
    let now = app.platform.clock.now_ms();
    let name = if who.name.is_empty() {
        "the owner".to_owned()
    } else {
        who.name.clone()
    };
    let data = Button::Approval {
        id: id.to_owned(),
        answer,
    }
    .encode();
    let update = json!({
        "update_id": TAP_IDS_FROM + i64::try_from(now).unwrap_or(0),
        "callback_query": {
            "id": format!("{PANEL_TAP}{now}"),
            "from": { "id": who.user, "is_bot": false, "first_name": format!("{name} (from the panel)") },
            "chat_instance": "panel",
            "message": {
                "message_id": message_id,
                "date": now / 1000,
                "chat": chat,
                "text": "",
            },
            "data": data,
        },
    });
    match app
        .accept_update(who.conn.id.as_str(), update.to_string().as_bytes())
        .await
    {
        Ok(Some(lane)) => {
            tracing::info!(connector = %who.conn.id, "panel: approval answered");
            let mut r = PanelReply::json(202, &json!({ "ok": true }));
            r.lane = Some(lane);
            r
        }
        Ok(None) => PanelReply::error(409, "that answer was given already"),
        Err(e) => super::unavailable(e),
    }
}
