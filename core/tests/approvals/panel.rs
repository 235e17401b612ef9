//! An approval answered from the control panel.

use clawless_core::panel::auth::{sign_init_data, PanelKeys};
use clawless_core::panel::PanelRequest;
use clawless_platform::Clock;
use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};

use super::support::{daily, Harness, Wire, SECRET, TOKEN};
use super::{answers, asking, message, write_call};

/// The owner answers from the panel: the answer goes into the lane as a tap, the turn resumes
/// once, the approval message says it was answered from the panel, Telegram is asked no
/// `answerCallbackQuery`; answering again, or an approval that no longer waits, is 404.
#[test]
fn an_answer_from_the_panel_resumes_the_turn_once() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "buy oat milk"));
        assert_eq!(
            h.deliver_raw(&message(1, "remember: buy oat milk")).await,
            200
        );
        let auth_s = (h.clock.now_ms() / 1000).to_string();
        let user = json!({"id": OWNER_ID, "first_name": "Ada"}).to_string();
        let auth = format!(
            "tma {}",
            sign_init_data(
                &PanelKeys::new(TOKEN, SECRET),
                &[("user", &user), ("auth_date", &auth_s)]
            )
        );
        let call = |method: &'static str, body: String| {
            let (auth, h) = (auth.clone(), &h);
            async move {
                h.app
                    .panel()
                    .serve(PanelRequest {
                        method,
                        path: "/api/approvals",
                        authorization: Some(&auth),
                        body: body.as_bytes(),
                        ..Default::default()
                    })
                    .await
            }
        };
        let listed = call("GET", String::new()).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        let v: Value = serde_json::from_str(&listed.body).unwrap();
        let a = &v["approvals"][0];
        assert_eq!(a["tool"], "memory_write");
        assert!(a["args"].as_str().unwrap().contains("buy oat milk"));
        let answer = json!({"lane": a["lane"], "id": a["id"], "answer": "once"}).to_string();

        h.script(200, anthropic_text("Saved."));
        let r = call("POST", answer.clone()).await;
        assert_eq!(r.status, 202, "{}", r.body);
        let lane = r.lane.clone().expect("a lane to drain");
        h.app.drain(&lane).await.unwrap();
        assert!(daily(&h).await.contains("buy oat milk"), "the call ran");
        assert_eq!(h.sent_texts().last().unwrap(), "Saved.");
        let edits = h.calls("editMessageText");
        assert_eq!(edits.len(), 1);
        let edited = edits[0]["text"].as_str().unwrap();
        assert!(
            edited.contains("allowed once") && edited.contains("from the panel"),
            "{edited}"
        );
        assert!(
            answers(&h).is_empty(),
            "no answerCallbackQuery for a panel tap"
        );

        // Again: nothing waits.
        let again = call("POST", answer).await;
        assert_eq!(again.status, 404, "{}", again.body);
        h.app.drain(&lane).await.unwrap();
        assert_eq!(h.llm_requests().len(), 2, "resumed once");
        let listed = call("GET", String::new()).await;
        assert_eq!(
            serde_json::from_str::<Value>(&listed.body).unwrap()["approvals"],
            json!([])
        );
        h.assert_spec_clean();
    });
}
