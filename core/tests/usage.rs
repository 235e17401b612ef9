//! Usage and spend caps over the fakes: tokens parsed from both wire formats and priced, the
//! counters `/usage` shows, a reached cap answered without any model call, and a sub-agent
//! held to what the cap leaves its parent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use, openai_text};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

fn with_caps(per_user: Option<f64>, total: Option<f64>) -> Config {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    config.limits.daily_usd_per_user = per_user;
    config.limits.daily_usd_total = total;
    config
}

fn message(update_id: i64, text: &str) -> serde_json::Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(10 + update_id);
    u["message"]["text"] = json!(text);
    u
}

#[test]
fn usage_shows_tokens_and_cost_of_both_wire_formats() {
    block_on(async {
        // Anthropic: 10 input and 5 output tokens at $3 / $15 per million = $0.000105.
        let h = Harness::with_config(Wire::Anthropic, with_caps(None, None));
        h.script(200, anthropic_text("Hi."));
        h.deliver_raw(&message(1, "hello")).await;
        h.deliver_raw(&message(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(
            report.contains("Today: you 15 tokens ($0.0001)"),
            "{report}"
        );
        assert!(report.contains("This month: you 15 tokens"), "{report}");
        assert!(report.contains("No spending limit"), "{report}");

        // OpenAI: 10 prompt and 5 completion tokens, priced as gpt-4o-mini.
        let h = Harness::with_config(Wire::OpenAi, with_caps(Some(1.0), None));
        h.script(200, openai_text("Hi."));
        h.deliver_raw(&message(1, "hello")).await;
        h.deliver_raw(&message(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(
            report.contains("Today: you 15 tokens ($0.0000)"),
            "{report}"
        );
        assert!(
            report.contains("Left under your daily limit of $1.00: $1.00"),
            "{report}"
        );
    });
}

#[test]
fn cache_reads_and_writes_are_priced_and_shown_with_the_hit_rate() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, with_caps(None, None));
        let mut answer = anthropic_text("Hi.");
        answer["usage"] = json!({"input_tokens": 100, "cache_creation_input_tokens": 1000,
            "cache_read_input_tokens": 8900, "output_tokens": 5});
        h.script(200, answer);
        h.deliver_raw(&message(1, "hello")).await;
        h.deliver_raw(&message(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        // 100 × $3 + 1,000 × $3.75 + 8,900 × $0.30 + 5 × $15 per million = $0.006795;
        // 8,900 of the 10,000 input tokens came from the cache.
        assert!(
            report.contains(
                "Today: you 10005 tokens ($0.0068), 89 % of the input from the prompt cache."
            ),
            "{report}"
        );
        assert!(
            report.contains("Today on anthropic/claude-sonnet-4-5: 10005 tokens ($0.0068), 89 %"),
            "{report}"
        );
        let metrics = h.app.admin().metrics_text().await;
        let hit = r#"clawless_model_input_tokens_total{model="anthropic/claude-sonnet-4-5",cache="hit"} 8900"#;
        let miss = r#"clawless_model_input_tokens_total{model="anthropic/claude-sonnet-4-5",cache="miss"} 1100"#;
        assert!(metrics.contains(hit) && metrics.contains(miss), "{metrics}");
        assert!(metrics.contains(r#"clawless_tokens_total{direction="cached_input"} 8900"#));
    });
}

#[test]
fn a_reached_cap_gets_a_clear_reply_and_no_model_call() {
    block_on(async {
        // $0.0001 a day for everyone: the first answer ($0.000105) uses it up.
        let h = Harness::with_config(Wire::Anthropic, with_caps(None, Some(0.0001)));
        h.script(200, anthropic_text("First answer."));
        h.deliver_raw(&message(1, "hello")).await;
        assert_eq!(h.llm_requests().len(), 1);
        h.script(200, anthropic_text("Should not be asked."));
        h.deliver_raw(&message(2, "and again")).await;
        assert_eq!(h.llm_requests().len(), 1, "no model call over the cap");
        let reply = h.sent_texts().last().unwrap().clone();
        assert!(
            reply.contains("today's total spending limit ($0.0001)"),
            "{reply}"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn a_zero_cap_for_a_person_stops_them_before_the_first_call() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, with_caps(Some(0.0), None));
        h.deliver_raw(&message(1, "hello")).await;
        assert_eq!(h.llm_requests().len(), 0);
        assert!(h.sent_texts()[0].contains("your daily spending limit"));
    });
}

#[test]
fn a_sub_agent_stops_where_the_cap_stops_its_parent() {
    block_on(async {
        // $0.0002 a day for everyone; each model call costs $0.000105. The parent's first
        // call leaves the child $0.000095: enough for one call, not two.
        let mut config = with_caps(None, Some(0.0002));
        let a = config.agents.get_mut("assistant").unwrap();
        a.tools.push("spawn".into());
        a.spawn.agents = vec!["assistant".into()];
        let h = Harness::with_config(Wire::Anthropic, config);
        let task = json!({"task": "What time is it?", "agent": "assistant"});
        h.script(200, anthropic_tool_use("s1", "spawn", task));
        h.script(200, anthropic_tool_use("t1", "current_time", json!({})));
        h.script(200, anthropic_text("Should not be asked (child)."));
        h.script(200, anthropic_text("Should not be asked (parent)."));
        h.deliver_raw(&message(1, "ask a helper")).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 2, "the child's second call is over the cap");
        let reply = h.sent_texts().last().unwrap().clone();
        assert!(
            reply.contains("today's total spending limit ($0.0002)"),
            "{reply}"
        );
        h.deliver_raw(&message(2, "/usage")).await;
        let report = h.sent_texts().last().unwrap().clone();
        assert!(report.contains("Today: you 30 tokens"), "{report}");
        h.assert_spec_clean();
    });
}
