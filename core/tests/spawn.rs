//! Sub-agents over the fakes: `spawn` runs another agent (or the same one) on a task with a
//! narrower tool set, in a fresh history, and its answer comes back as the tool result; the
//! depth limit takes the tool away; a child that outruns its timeout (on the fake clock) or
//! its token budget stops; a child's call that would ask or is denied for its parent is
//! refused; an agent exposed as a named tool; the child's spend and steps in the audit trail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use clawless_core::config::{AgentTool, Rule};
use clawless_core::ConnectorId;
use clawless_platform::{Http, HttpRequest, HttpResponse};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::spawn::{config, harness, sent_texts, tool_names, tool_results};
use support::{Harness, Wire};

#[test]
fn a_child_runs_with_the_narrower_tool_set_and_its_answer_is_the_tool_result() {
    block_on(async {
        let h = harness(|_| {});
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "What time is it in Tokyo?", "agent": "researcher", "tools": ["current_time", "web_fetch"]}),
            ),
        );
        h.script(200, anthropic_text("It is 9 pm in Tokyo."));
        h.script(200, anthropic_text("The researcher says: 9 pm."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 3);
        assert!(tool_names(&requests[0]).contains(&"spawn".to_owned()));
        let child = &requests[1];
        assert_eq!(tool_names(child), ["current_time", "web_fetch"]);
        assert_eq!(support::system_text(child), "You research things.");
        // A fresh history: only the task.
        let messages = child["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0]
            .to_string()
            .contains("What time is it in Tokyo?"));
        assert_eq!(
            tool_results(&requests[2]),
            [("It is 9 pm in Tokyo.".to_owned(), false)]
        );
        assert_eq!(sent_texts(&h), ["The researcher says: 9 pm."]);
        h.assert_spec_clean();
    });
}

#[test]
fn a_child_never_gets_a_tool_its_parent_lacks_nor_one_it_asks_for_beyond_that() {
    block_on(async {
        let h = harness(|_| {});
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "look", "agent": "researcher"}),
            ),
        );
        h.script(200, anthropic_text("Looked."));
        h.script(
            200,
            anthropic_tool_use(
                "s2",
                "spawn",
                json!({"task": "write", "agent": "researcher", "tools": ["write_file"]}),
            ),
        );
        h.script(200, anthropic_text("Done."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        // The researcher's own tools cut to the assistant's: no write_file.
        assert_eq!(
            tool_names(&requests[1]),
            ["current_time", "memory_search", "spawn", "web_fetch"]
        );
        let results = tool_results(&requests[3]);
        assert_eq!(results.len(), 2);
        assert!(
            results[1].1
                && results[1]
                    .0
                    .contains("\"write_file\" is not a tool this sub-agent may have"),
            "{results:?}"
        );
        assert_eq!(requests.len(), 4, "the refused spawn made no model call");
    });
}

#[test]
fn at_the_depth_limit_spawn_is_not_offered() {
    block_on(async {
        let h = harness(|_| {});
        // assistant → researcher → researcher (depth 2, the default limit) → answers.
        h.script(
            200,
            anthropic_tool_use("s1", "spawn", json!({"task": "dig", "agent": "researcher"})),
        );
        h.script(
            200,
            anthropic_tool_use("s2", "spawn", json!({"task": "dig deeper"})),
        );
        h.script(200, anthropic_text("bottom"));
        h.script(200, anthropic_text("middle"));
        h.script(200, anthropic_text("top"));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 5);
        assert!(tool_names(&requests[1]).contains(&"spawn".to_owned()));
        assert!(
            !tool_names(&requests[2]).contains(&"spawn".to_owned()),
            "{:?}",
            tool_names(&requests[2])
        );
        assert_eq!(tool_results(&requests[3]), [("bottom".to_owned(), false)]);
        assert_eq!(sent_texts(&h), ["top"]);
    });
}

#[test]
fn a_depth_limit_of_one_keeps_children_from_spawning_and_a_made_up_call_fails() {
    block_on(async {
        let h = harness(|c| {
            c.agents.get_mut("assistant").unwrap().spawn.max_depth = 1;
        });
        h.script(
            200,
            anthropic_tool_use("s1", "spawn", json!({"task": "dig"})),
        );
        h.script(
            200,
            anthropic_tool_use("s2", "spawn", json!({"task": "deeper"})),
        );
        h.script(200, anthropic_text("could not"));
        h.script(200, anthropic_text("top"));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert!(!tool_names(&requests[1]).contains(&"spawn".to_owned()));
        let refused = tool_results(&requests[2]);
        assert!(
            refused[0].1 && refused[0].0.contains("Unknown tool \"spawn\""),
            "{refused:?}"
        );
    });
}

/// HTTP that holds the first model request carrying `marker` for one poll: on the fake
/// clock, a child waiting on it loses the race against its timeout.
struct Stalling {
    inner: Arc<dyn Http>,
    marker: &'static str,
    stalled: AtomicBool,
}

struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[async_trait]
impl Http for Stalling {
    async fn send(&self, request: HttpRequest) -> clawless_platform::Result<HttpResponse> {
        let body = String::from_utf8_lossy(&request.body).into_owned();
        if body.contains(self.marker) && !self.stalled.swap(true, Ordering::SeqCst) {
            YieldOnce(false).await;
        }
        self.inner.send(request).await
    }
}

#[test]
fn a_child_that_outruns_its_timeout_is_a_tool_error() {
    block_on(async {
        let h = Harness::with_http(Wire::Anthropic, config(|_| {}), |fake, _| {
            Arc::new(Stalling {
                inner: fake,
                marker: "SLOW-TASK",
                stalled: AtomicBool::new(false),
            })
        });
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "SLOW-TASK", "agent": "researcher"}),
            ),
        );
        // The child's answer is never read: its call lost the race.
        h.script(200, anthropic_text("Without it, then."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        let results = tool_results(requests.last().unwrap());
        assert_eq!(results.len(), 1);
        assert!(
            results[0].1 && results[0].0.contains("timed out after 120s"),
            "{results:?}"
        );
        assert_eq!(sent_texts(&h), ["Without it, then."]);
    });
}

#[test]
fn a_child_stops_once_its_token_budget_is_spent() {
    block_on(async {
        let h = harness(|c| {
            c.agents.get_mut("assistant").unwrap().spawn.max_tokens = 1000;
        });
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "read everything", "agent": "researcher"}),
            ),
        );
        let mut big = anthropic_tool_use("c1", "current_time", json!({}));
        big["content"][0]["text"] = "Found the first half: 42.".into();
        big["usage"] = json!({"input_tokens": 900, "output_tokens": 200});
        h.script(200, big);
        h.script(200, anthropic_text("Partial: 42."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 3, "no second model call in the child");
        let results = tool_results(&requests[2]);
        assert!(!results[0].1, "{results:?}");
        assert!(results[0].0.starts_with("Found the first half: 42."));
        assert!(results[0]
            .0
            .contains("token budget of this run (1000) is used up"));
    });
}

#[test]
fn a_childs_call_that_would_ask_or_is_denied_for_its_parent_is_refused_without_asking() {
    block_on(async {
        let h = harness(|c| {
            let a = c.agents.get_mut("assistant").unwrap();
            a.policy.tools.insert("memory_search".into(), Rule::Ask);
            a.policy.tools.insert("web_fetch".into(), Rule::Deny);
        });
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "search", "agent": "researcher"}),
            ),
        );
        h.script(
            200,
            anthropic_tool_use("m1", "memory_search", json!({"query": "x"})),
        );
        h.script(
            200,
            anthropic_tool_use("w1", "web_fetch", json!({"url": "https://example.com"})),
        );
        h.script(200, anthropic_text("Could not search."));
        h.script(200, anthropic_text("Nothing found."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 5);
        let asked = tool_results(&requests[2]);
        assert!(
            asked[0].1
                && asked[0]
                    .0
                    .contains("needs the user's approval, which a sub-agent cannot ask for"),
            "{asked:?}"
        );
        let denied = tool_results(&requests[3]);
        assert!(
            denied[1].1 && denied[1].0.contains("not allowed"),
            "{denied:?}"
        );
        // No approval buttons went out: only the answer.
        assert_eq!(sent_texts(&h), ["Nothing found."]);
        assert!(h
            .http
            .requests()
            .iter()
            .all(|r| !r.url.starts_with("https://example.com")));
    });
}

#[test]
fn a_childs_asking_call_runs_when_the_chat_granted_the_tool() {
    block_on(async {
        let h = harness(|c| {
            let a = c.agents.get_mut("assistant").unwrap();
            a.policy.tools.insert("memory_search".into(), Rule::Ask);
        });
        let key =
            clawless_core::keys::grant(&ConnectorId::new("main"), 111_111_111, "memory_search");
        h.platform.kv.put(&key, b"1", None).await.unwrap();
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "search", "agent": "researcher"}),
            ),
        );
        h.script(
            200,
            anthropic_tool_use("m1", "memory_search", json!({"query": "x"})),
        );
        h.script(200, anthropic_text("Searched."));
        h.script(200, anthropic_text("Done."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        let ran = tool_results(&requests[2]);
        assert!(!ran[0].1, "{ran:?}");
    });
}

#[test]
fn an_agent_exposed_as_a_named_tool_runs_that_agent() {
    block_on(async {
        let h = harness(|c| {
            let a = c.agents.get_mut("assistant").unwrap();
            a.tools.retain(|t| t != "spawn");
            a.agent_tools = vec![AgentTool {
                agent: "researcher".into(),
                name: "research".into(),
                description: "Researches a question.".into(),
            }];
        });
        h.script(
            200,
            anthropic_tool_use("r1", "research", json!({"task": "Who wrote Dune?"})),
        );
        h.script(200, anthropic_text("Frank Herbert."));
        h.script(200, anthropic_text("Frank Herbert wrote it."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        let parent = tool_names(&requests[0]);
        assert!(parent.contains(&"research".to_owned()) && !parent.contains(&"spawn".to_owned()));
        let research = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "research")
            .unwrap()
            .clone();
        assert_eq!(research["description"], "Researches a question.");
        assert_eq!(support::system_text(&requests[1]), "You research things.");
        // The parent has no spawn, so neither does the child.
        assert!(!tool_names(&requests[1]).contains(&"spawn".to_owned()));
        assert_eq!(
            tool_results(&requests[2]),
            [("Frank Herbert.".to_owned(), false)]
        );
    });
}

#[test]
fn the_childs_model_calls_and_tools_are_in_the_parents_audit_trail_and_spend() {
    block_on(async {
        let h = harness(|_| {});
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "time?", "agent": "researcher"}),
            ),
        );
        h.script(200, anthropic_tool_use("c1", "current_time", json!({})));
        h.script(200, anthropic_text("noon"));
        h.script(200, anthropic_text("It is noon."));
        h.deliver("private_text", 1).await;
        let kv = &*h.platform.kv;
        let entries = clawless_core::audit::read(kv, &ConnectorId::new("main"), 0, None, 100)
            .await
            .unwrap();
        use clawless_core::audit::Step;
        let steps: Vec<String> = entries
            .iter()
            .map(|e| match &e.step {
                Step::Model { agent, .. } => format!("model {}", agent.as_deref().unwrap_or("-")),
                Step::Tool { name, agent, .. } => {
                    format!("tool {name} {}", agent.as_deref().unwrap_or("-"))
                }
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            steps,
            [
                "model -",
                "model researcher",
                "tool current_time researcher",
                "model researcher",
                "tool spawn -",
                "model -"
            ]
        );
        assert!(
            entries.iter().all(|e| e.trace == entries[0].trace),
            "one turn's trace"
        );
        // Spend: the parent's two calls and the child's two, 15 tokens each.
        let mut usage = clawless_testkit::fixtures::update("private_text", 2);
        usage["message"]["message_id"] = json!(12);
        usage["message"]["text"] = json!("/usage");
        h.deliver_raw(&usage).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(report.contains("Today: you 60 tokens"), "{report}");
    });
}

#[test]
fn a_child_cannot_set_a_reminder_that_would_run_outside_its_tools() {
    block_on(async {
        // The child is the assistant itself: it has `schedule`, and its parent too.
        let h = harness(|c| {
            c.agents.get_mut("assistant").unwrap().spawn.agents = vec!["assistant".into()];
        });
        h.script(
            200,
            anthropic_tool_use(
                "s1",
                "spawn",
                json!({"task": "Read the page.", "agent": "assistant"}),
            ),
        );
        h.script(
            200,
            anthropic_tool_use(
                "r1",
                "schedule",
                json!({"action": "create", "in_minutes": 1, "prompt": "run exec rm -rf ~"}),
            ),
        );
        h.script(200, anthropic_text("Could not schedule it."));
        h.script(200, anthropic_text("Done."));
        h.deliver("private_text", 1).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 4);
        let refused = tool_results(&requests[2]);
        assert!(
            refused[0].1
                && refused[0]
                    .0
                    .contains("a sub-agent cannot set or cancel reminders"),
            "{refused:?}"
        );
        assert!(h.app.enqueue_due().await.is_empty());
        assert_eq!(h.app.next_due().await, None, "nothing was kept");
        assert_eq!(sent_texts(&h), ["Done."]);
    });
}
