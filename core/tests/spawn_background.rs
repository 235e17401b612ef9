//! Background sub-agents over the fakes: the task fires into the chat's task lane, so the chat
//! is answered while it waits; its answer is posted once and joins the chat's session once,
//! through the chat's lane; it is refused unless the config allows it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::{ConnectorId, Lane};
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::spawn::{harness, sent_texts, tool_names, tool_results};

/// Background tasks allowed; the first message's turn starts one for the researcher (with
/// `tools`, unless null) and answers "I'll post the comparison here.".
async fn started(tools: serde_json::Value) -> support::Harness {
    let h = harness(|c| {
        c.agents.get_mut("assistant").unwrap().spawn.background = true;
    });
    let mut call =
        json!({"task": "Compare the three offers.", "agent": "researcher", "background": true});
    if !tools.is_null() {
        call["tools"] = tools;
    }
    h.script(200, anthropic_tool_use("s1", "spawn", call));
    h.script(200, anthropic_text("I'll post the comparison here."));
    h.deliver("private_text", 1).await;
    h
}

#[test]
fn a_background_child_runs_as_its_own_job_and_posts_to_the_chat_once() {
    block_on(async {
        let h = started(json!(["web_fetch"])).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 2, "the child does not run in the turn");
        let spawn = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "spawn")
            .unwrap()
            .clone();
        assert!(spawn["input_schema"]["properties"]["background"].is_object());
        let started = tool_results(&requests[1]);
        assert!(
            !started[0].1
                && started[0]
                    .0
                    .starts_with("Started: researcher works on it in the background"),
            "{started:?}"
        );
        assert_eq!(sent_texts(&h), ["I'll post the comparison here."]);

        h.script(200, anthropic_text("Offer B is cheapest."));
        h.app.fire_due().await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 3);
        let child = &requests[2];
        assert_eq!(support::system_text(child), "You research things.");
        assert_eq!(tool_names(child), ["web_fetch"]);
        assert!(child["messages"]
            .to_string()
            .contains("Compare the three offers."));
        let sent = sent_texts(&h);
        assert_eq!(sent.len(), 2);
        assert!(
            sent[1].contains("Background task #1 (researcher) is done")
                && sent[1].contains("Offer B is cheapest."),
            "{sent:?}"
        );
        // Fired once: another scheduler run finds nothing due.
        h.app.fire_due().await;
        assert_eq!(h.llm_requests().len(), 3);
        assert_eq!(sent_texts(&h).len(), 2);
        h.assert_spec_clean();
    });
}

#[test]
fn background_is_refused_unless_the_config_allows_it() {
    block_on(async {
        let h = harness(|_| {});
        h.script(
            200,
            anthropic_tool_use("s1", "spawn", json!({"task": "later", "background": true})),
        );
        h.script(200, anthropic_text("Doing it now then."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        let spawn = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "spawn")
            .unwrap()
            .clone();
        assert!(spawn["input_schema"]["properties"]
            .get("background")
            .is_none());
        let refused = tool_results(&requests[1]);
        assert!(
            refused[0].1 && refused[0].0.contains("not enabled"),
            "{refused:?}"
        );
        h.app.fire_due().await;
        assert_eq!(h.llm_requests().len(), 2, "nothing was queued");
    });
}

#[test]
fn the_chat_is_answered_while_its_background_task_waits_and_the_answer_joins_the_session() {
    block_on(async {
        let h = started(json!(null)).await;

        // The firing goes into the task's own lane, not the chat's.
        let chat = fixtures::update("private_text", 1)["message"]["chat"]["id"]
            .as_i64()
            .unwrap();
        let main = ConnectorId::new("main");
        let lanes = h.app.enqueue_due().await;
        assert_eq!(lanes, [Lane::of_tasks(&main, chat)]);
        assert!(h.head_job(&Lane::of_chat(&main, chat)).await.is_none());

        // The chat is answered without waiting for the task.
        h.script(200, anthropic_text("Still here."));
        let mut next = fixtures::update("private_text", 2);
        next["message"]["message_id"] = json!(12);
        next["message"]["text"] = json!("are you there?");
        h.deliver_raw(&next).await;
        assert_eq!(
            sent_texts(&h),
            ["I'll post the comparison here.", "Still here."]
        );
        assert_eq!(h.llm_requests().len(), 3, "the child has not run");

        // The sweep runs the task, posts its answer, then records it in the chat's session.
        h.script(200, anthropic_text("Offer B is cheapest."));
        h.app.sweep().await.unwrap();
        let sent = sent_texts(&h);
        assert_eq!(sent.len(), 3, "{sent:?}");
        assert!(
            sent[2].starts_with("Background task #1 (researcher) is done")
                && sent[2].contains("Offer B is cheapest."),
            "{sent:?}"
        );
        assert!(h.head_job(&Lane::of_chat(&main, chat)).await.is_none());
        assert!(h.head_job(&Lane::of_tasks(&main, chat)).await.is_none());

        // The conversation's agent reads the task and its answer, after the turns before.
        h.script(200, anthropic_text("B it is."));
        let mut later = fixtures::update("private_text", 3);
        later["message"]["message_id"] = json!(13);
        later["message"]["text"] = json!("which one then?");
        h.deliver_raw(&later).await;
        let requests = h.llm_requests();
        let seen = requests.last().unwrap()["messages"].to_string();
        let still = seen.find("Still here.").unwrap();
        let handed = seen
            .find("[Background task #1, handed to researcher earlier:]")
            .unwrap();
        let answer = seen.find("Offer B is cheapest.").unwrap();
        assert!(still < handed && handed < answer, "{seen}");
        assert_eq!(seen.matches("Offer B is cheapest.").count(), 1, "once");

        // Nothing fires again; no lane has work.
        assert!(h.app.enqueue_due().await.is_empty());
        h.app.sweep().await.unwrap();
        assert_eq!(sent_texts(&h).len(), 4);
        h.assert_spec_clean();
    });
}
