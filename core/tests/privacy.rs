//! One person's memory is theirs alone: recall, the memory tools and session summaries read
//! and write only the memory of the conversation they run in (the person in a private chat,
//! the group in a group), unless the connector is set to share one memory. The workspace
//! tools follow the same scope.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

/// A second allowed user.
const BOB: i64 = 222_222_222;

fn two_users(shared: bool) -> Harness {
    two_users_with(shared, &[])
}

/// Two users; the agent has `tools` besides the default ones.
fn two_users_with(shared: bool, tools: &[&str]) -> Harness {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let main = config.connectors.get_mut("main").unwrap();
    main.allowed_users = vec![OWNER_ID, BOB];
    main.shared_memory = shared;
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.tools.extend(tools.iter().map(|t| t.to_string()));
    Harness::with_config(Wire::Anthropic, config)
}

/// A private message from `user`.
fn private(user: i64, update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["from"]["id"] = json!(user);
    u["message"]["chat"]["id"] = json!(user);
    u["message"]["text"] = json!(text);
    u
}

/// A group message from `user` addressed to the bot.
fn in_group(user: i64, update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("group_mention", update_id);
    u["message"]["from"]["id"] = json!(user);
    u["message"]["text"] = json!(format!("@clawless_test_bot {text}"));
    u
}

/// The system prompt of the last model call, and the memories recalled for it.
fn last_system(h: &Harness) -> String {
    let last = h.llm_requests().pop().unwrap();
    format!(
        "{}\n{}",
        support::system_text(&last),
        support::recalled(&last)
    )
}

/// The tool result the model got in the last model call.
fn last_tool_result(h: &Harness) -> String {
    let req = h.llm_requests().pop().unwrap();
    let msgs = req["messages"].as_array().unwrap();
    msgs.last().unwrap()["content"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The owner tells a secret in a private chat; the model saves it to MEMORY.md.
async fn owner_saves_pin(h: &Harness) {
    h.script(
        200,
        anthropic_tool_use(
            "t1",
            "memory_write",
            json!({"content": "Ada's PIN is 4321.", "target": "long_term"}),
        ),
    );
    h.script(200, anthropic_text("Saved."));
    h.deliver_raw(&private(OWNER_ID, 1, "Remember my PIN is 4321"))
        .await;
}

#[test]
fn another_person_never_reads_recalls_or_wipes_your_memory() {
    block_on(async {
        let h = two_users(false);
        owner_saves_pin(&h).await;

        // Bob asks in his private chat: nothing of Ada's is recalled.
        h.script(200, anthropic_text("I don't know."));
        h.deliver_raw(&private(BOB, 2, "What is the PIN 4321 of Ada?"))
            .await;
        assert!(!last_system(&h).contains("4321"), "{}", last_system(&h));

        // Bob's memory_get of MEMORY.md reads his own (empty) memory.
        h.script(
            200,
            anthropic_tool_use("t2", "memory_get", json!({"path": "MEMORY.md"})),
        );
        h.script(200, anthropic_text("Nothing there."));
        h.deliver_raw(&private(BOB, 3, "Read your memory file"))
            .await;
        assert_eq!(last_tool_result(&h), "MEMORY.md does not exist yet.");

        // Bob's memory_search finds nothing of Ada's.
        h.script(
            200,
            anthropic_tool_use("t3", "memory_search", json!({"query": "PIN 4321"})),
        );
        h.script(200, anthropic_text("Nothing."));
        h.deliver_raw(&private(BOB, 4, "Search your memory for the PIN"))
            .await;
        assert_eq!(last_tool_result(&h), "No matching memories.");

        // Bob's replace writes his own MEMORY.md, never Ada's.
        h.script(
            200,
            anthropic_tool_use(
                "t4",
                "memory_write",
                json!({"content": "Bob likes tea.", "target": "long_term", "mode": "replace"}),
            ),
        );
        h.script(200, anthropic_text("Done."));
        h.deliver_raw(&private(BOB, 5, "Forget everything, I like tea"))
            .await;
        let ada = h
            .app
            .admin()
            .search_memory(&"main".into(), None, "PIN 4321")
            .await
            .unwrap();
        assert!(ada.iter().any(|m| m.text.contains("4321")), "{ada:?}");

        // In a group, even Ada's own secret is not recalled: groups have their own memory.
        h.script(200, anthropic_text("Hello group."));
        h.deliver_raw(&in_group(OWNER_ID, 6, "what is Ada's PIN 4321?"))
            .await;
        assert!(!last_system(&h).contains("4321"), "{}", last_system(&h));

        // What is said in the group lands in the group's memory, not in Ada's recall.
        h.script(
            200,
            anthropic_tool_use(
                "t5",
                "memory_write",
                json!({"content": "The team meets on Fridays.", "target": "long_term"}),
            ),
        );
        h.script(200, anthropic_text("Noted."));
        h.deliver_raw(&in_group(BOB, 7, "remember the team meets on Fridays"))
            .await;
        h.script(200, anthropic_text("Not sure."));
        h.deliver_raw(&private(OWNER_ID, 8, "when does the team meet on Fridays?"))
            .await;
        assert!(!last_system(&h).contains("Fridays"), "{}", last_system(&h));
        // Ada's own memory is still recalled for her.
        h.script(200, anthropic_text("4321."));
        h.deliver_raw(&private(OWNER_ID, 9, "what is my PIN 4321?"))
            .await;
        assert!(last_system(&h).contains("4321"), "{}", last_system(&h));
        h.assert_spec_clean();
    });
}

#[test]
fn a_session_summary_goes_to_its_own_person() {
    block_on(async {
        let h = two_users(false);
        // Ada chats without saving anything, then starts over: the summary is hers.
        h.script(200, anthropic_text("Nice!"));
        h.deliver_raw(&private(OWNER_ID, 1, "My dog Rex turned five today"))
            .await;
        h.script(200, anthropic_text("- Ada's dog Rex turned five."));
        let mut new = fixtures::update("private_command_new", 2);
        new["message"]["from"]["id"] = json!(OWNER_ID);
        h.deliver_raw(&new).await;
        // Bob asks about Rex: nothing recalled.
        h.script(200, anthropic_text("Who is Rex?"));
        h.deliver_raw(&private(BOB, 3, "How old is the dog Rex?"))
            .await;
        assert!(!last_system(&h).contains("Rex"), "{}", last_system(&h));
        // Ada asks: her summary is recalled.
        h.script(200, anthropic_text("Five."));
        h.deliver_raw(&private(OWNER_ID, 4, "How old is my dog Rex?"))
            .await;
        assert!(
            last_system(&h).contains("Rex turned five"),
            "{}",
            last_system(&h)
        );
    });
}

#[test]
fn shared_memory_is_one_memory_for_everyone_when_configured() {
    block_on(async {
        let h = two_users(true);
        owner_saves_pin(&h).await;
        h.script(200, anthropic_text("4321."));
        h.deliver_raw(&private(BOB, 2, "What is Ada's PIN 4321?"))
            .await;
        assert!(last_system(&h).contains("4321"), "{}", last_system(&h));
        h.script(200, anthropic_text("4321."));
        h.deliver_raw(&in_group(BOB, 3, "What is Ada's PIN 4321?"))
            .await;
        assert!(last_system(&h).contains("4321"), "{}", last_system(&h));
    });
}

#[test]
fn memory_from_before_moves_to_the_owner_once() {
    block_on(async {
        let h = two_users(false);
        let files = &h.platform.files;
        files
            .write("memory/assistant/main/MEMORY.md", b"- Ada's PIN is 4321.\n")
            .await
            .unwrap();
        files
            .write(
                "memory/assistant/main/memory/2023-11-13.md",
                b"- Old note.\n",
            )
            .await
            .unwrap();
        // Indexed the old way, as an existing install would have it.
        h.app
            .memory_store()
            .reindex(&"assistant/main".into())
            .await
            .unwrap();
        h.app.scheduled().await;
        let owner_root = format!("memory/assistant/main/u{OWNER_ID}");
        assert_eq!(
            files
                .read(&format!("{owner_root}/MEMORY.md"))
                .await
                .unwrap(),
            b"- Ada's PIN is 4321.\n"
        );
        assert!(files
            .read(&format!("{owner_root}/memory/2023-11-13.md"))
            .await
            .is_ok());
        assert!(files.read("memory/assistant/main/MEMORY.md").await.is_err());
        assert!(
            h.app
                .memory_store()
                .search(&"assistant/main".into(), "PIN 4321")
                .await
                .unwrap()
                .is_empty(),
            "the old index entries are gone"
        );
        // Bob does not get it; Ada does.
        h.script(200, anthropic_text("?"));
        h.deliver_raw(&private(BOB, 1, "What is the PIN 4321?"))
            .await;
        assert!(!last_system(&h).contains("4321"));
        h.script(200, anthropic_text("4321."));
        h.deliver_raw(&private(OWNER_ID, 2, "What is my PIN 4321?"))
            .await;
        assert!(last_system(&h).contains("4321"), "{}", last_system(&h));
        // Once: a file written at the old place later is not moved again.
        files
            .write("memory/assistant/main/MEMORY.md", b"- later\n")
            .await
            .unwrap();
        h.app.scheduled().await;
        assert!(files.read("memory/assistant/main/MEMORY.md").await.is_ok());
    });
}

#[test]
fn another_person_never_sees_your_workspace_files() {
    block_on(async {
        let tools = [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "delete_file",
        ];
        let h = two_users_with(false, &tools);

        let write = json!({"path": "plans/trip.md", "content": "Lisbon in May"});
        h.script(200, anthropic_tool_use("t1", "write_file", write));
        h.script(200, anthropic_text("Written."));
        h.deliver_raw(&private(OWNER_ID, 1, "Note my trip")).await;
        assert_eq!(last_tool_result(&h), "Created plans/trip.md (13 bytes).");

        let read = json!({"path": "plans/trip.md"});
        h.script(200, anthropic_tool_use("t2", "read_file", read.clone()));
        h.script(200, anthropic_text("Nothing."));
        h.deliver_raw(&private(BOB, 2, "Read Ada's trip")).await;
        assert_eq!(
            last_tool_result(&h),
            "plans/trip.md does not exist; list_dir shows what does"
        );
        h.script(200, anthropic_tool_use("t3", "list_dir", json!({})));
        h.script(200, anthropic_text("Empty."));
        h.deliver_raw(&private(BOB, 3, "What files are there?"))
            .await;
        assert_eq!(last_tool_result(&h), "Your workspace is empty.");

        h.script(200, anthropic_tool_use("t4", "read_file", read));
        h.script(200, anthropic_text("Lisbon."));
        h.deliver_raw(&private(OWNER_ID, 4, "Where am I going?"))
            .await;
        assert_eq!(last_tool_result(&h), "     1\tLisbon in May");
        let stored = h.platform.files.list("workspace").await.unwrap();
        assert_eq!(
            stored,
            [format!(
                "workspace/assistant/main/u{OWNER_ID}/plans/trip.md"
            )]
        );
        h.assert_spec_clean();
    });
}

/// `/memory` lists and searches only the asker's own memory (no model call), with scores.
#[test]
fn the_memory_command_shows_each_person_only_their_own() {
    block_on(async {
        let h = two_users(false);
        owner_saves_pin(&h).await;
        let calls = h.llm_requests().len();

        h.deliver_raw(&private(OWNER_ID, 2, "/memory")).await;
        let listed = h.sent_texts().pop().unwrap();
        assert!(listed.contains("MEMORY.md"), "{listed}");
        h.deliver_raw(&private(OWNER_ID, 3, "/memory PIN")).await;
        let found = h.sent_texts().pop().unwrap();
        assert!(found.contains("4321") && found.contains("score"), "{found}");

        // Bob: nothing of Ada's, listed or found.
        h.deliver_raw(&private(BOB, 4, "/memory")).await;
        let his = h.sent_texts().pop().unwrap();
        assert!(his.contains("nothing in memory about you"), "{his}");
        h.deliver_raw(&private(BOB, 5, "/memory PIN 4321")).await;
        let his = h.sent_texts().pop().unwrap();
        assert!(
            his.contains("Nothing in my memory matches") && !his.contains("Ada"),
            "{his}"
        );
        assert_eq!(h.llm_requests().len(), calls, "no model call");
        h.assert_spec_clean();
    });
}
