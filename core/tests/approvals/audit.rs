//! The audit trail of approvals: a call allowed once, one denied and one expired, each as its
//! steps in the owner's chat and as `/audit` shows them.

use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;

use super::support::{Harness, Wire};
use super::{approval, asking, message, tap, write_call};

/// The audit steps of the owner's chat, as `kind: detail` strings.
async fn trail(h: &Harness) -> Vec<String> {
    h.app
        .admin()
        .audit_entries(&"main".into(), 86_400_000, Some(OWNER_ID), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| match e.step {
            clawless_core::audit::Step::Model { model, .. } => format!("model: {model}"),
            clawless_core::audit::Step::Tool {
                name,
                decision,
                args,
                ..
            } => {
                assert!(args.len() <= 600, "arguments are capped");
                format!("tool: {name} {decision}")
            }
            clawless_core::audit::Step::Approval { tool, outcome, .. } => {
                format!("approval: {tool} {outcome}")
            }
            clawless_core::audit::Step::Command { name } => format!("command: {name}"),
            clawless_core::audit::Step::Pairing { action, person } => {
                format!("pairing: {person} {action}")
            }
            clawless_core::audit::Step::Hook { name, mode } => format!("hook: {name} {mode}"),
        })
        .collect()
}

#[test]
fn the_audit_trail_records_a_round_trip_a_denial_and_an_expiry() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        // Allowed once.
        h.script(200, write_call("t1", "a"));
        h.deliver_raw(&message(1, "remember a")).await;
        let (id, buttons) = approval(&h);
        h.script(200, anthropic_text("Saved."));
        h.deliver_raw(&tap(2, OWNER_ID, &buttons[0], id)).await;
        // Denied.
        h.script(200, write_call("t2", "b"));
        h.deliver_raw(&message(3, "remember b")).await;
        let (id, buttons) = approval(&h);
        h.script(200, anthropic_text("Not saved."));
        h.deliver_raw(&tap(4, OWNER_ID, &buttons[2], id)).await;
        // Expired.
        h.script(200, write_call("t3", "c"));
        h.deliver_raw(&message(5, "remember c")).await;
        h.clock.advance(Duration::from_secs(31 * 60));
        h.script(200, anthropic_text("Too late."));
        h.app.sweep().await.unwrap();
        let steps = trail(&h).await;
        let model = "model: anthropic/claude-sonnet-4-5".to_owned();
        assert_eq!(
            steps,
            [
                model.clone(),
                "approval: memory_write allowed once".into(),
                "tool: memory_write approved".into(),
                model.clone(),
                model.clone(),
                "approval: memory_write denied".into(),
                "tool: memory_write denied".into(),
                model.clone(),
                model.clone(),
                "approval: memory_write expired".into(),
                "tool: memory_write expired".into(),
                model,
            ]
        );
        // The owner reads it in the chat.
        h.deliver_raw(&message(6, "/audit")).await;
        let shown = h.sent_texts().last().unwrap().clone();
        assert!(shown.contains("tool memory_write (expired)"), "{shown}");
        assert!(
            shown.contains("approval of memory_write: allowed once by Ada"),
            "{shown}"
        );
    });
}
