//! Skills over the fakes (the real `App`, in-memory ports, a scripted model): a skill whose
//! requirements are unmet is not in the system prompt the model saw and the `skill` tool
//! refuses it; one whose requirements are met is listed and its body read on demand; a skill
//! added on the Files port at run time shows on the next turn; a SKILL.md that does not parse
//! is reported with the reason, and turns go on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use clawless_core::skills::Source;
use clawless_core::{Config, ConnectorId, SessionKey};
use clawless_platform::{async_trait, Files};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

/// The owner's private conversation's workspace (its memory scope's).
const WORKSPACE: &str = "workspace/assistant/main/u111111111";

const WEEKLY: &str = "---\nname: weekly-report\ndescription: Write the user's weekly report from their notes.\nlicense: MIT\n---\n# Weekly report\n\nThree sections: done, next, blocked.\n";
const GH: &str = "---\nname: gh-issues\ndescription: Triage GitHub issues.\nmetadata: {\"openclaw\": {\"emoji\": \"🐙\"}}\nrequires:\n  env: [GH_TOKEN]\n---\nList issues with the token.\n";

/// The repository's config with two more skills in `config/skills/`.
fn config() -> Config {
    let mut files = clawless_core::config::embedded();
    for (path, text) in [
        ("skills/weekly-report/SKILL.md", WEEKLY),
        (
            "skills/weekly-report/template.md",
            "## Done\n## Next\n## Blocked\n",
        ),
        ("skills/gh-issues/SKILL.md", GH),
    ] {
        files.0.insert(path.into(), text.into());
    }
    Config::load(&files).unwrap()
}

fn harness(env: &[(&str, &str)]) -> Harness {
    Harness::with_env(Wire::Anthropic, config(), env).unwrap()
}

/// The system prompt of the model's `n`th request.
fn system(h: &Harness, n: usize) -> String {
    support::system_text(&h.llm_requests()[n])
}

#[test]
fn an_unmet_requirement_hides_the_skill_and_the_tool_refuses_it() {
    block_on(async {
        let h = harness(&[]);
        h.script(
            200,
            anthropic_tool_use("t1", "skill", json!({"name": "gh-issues"})),
        );
        h.script(200, anthropic_text("I cannot triage issues here."));
        h.deliver("private_text", 1).await;
        let sys = system(&h, 0);
        assert!(sys.contains("## Skills"), "{sys}");
        assert!(
            sys.contains("- weekly-report: Write the user's weekly report from their notes."),
            "{sys}"
        );
        assert!(
            !sys.contains("gh-issues"),
            "unmet GH_TOKEN: not offered\n{sys}"
        );
        let refused = h.last_tool_result();
        assert_eq!(refused["is_error"], true);
        let text = refused["content"].as_str().unwrap();
        assert!(
            text.contains("\"gh-issues\" is not available here: needs GH_TOKEN set"),
            "{text}"
        );
        assert!(
            !text.contains("List issues"),
            "the body is not shown: {text}"
        );
        assert_eq!(h.sent_texts(), ["I cannot triage issues here."]);
        h.assert_spec_clean();
    });
}

#[test]
fn a_met_requirement_lists_the_skill_and_its_body_is_read_on_demand() {
    block_on(async {
        let h = harness(&[("GH_TOKEN", "ghp_test")]);
        h.script(
            200,
            anthropic_tool_use("t1", "skill", json!({"name": "gh-issues"})),
        );
        h.script(
            200,
            anthropic_tool_use("t2", "skill", json!({"name": "weekly-report"})),
        );
        h.script(
            200,
            anthropic_tool_use(
                "t3",
                "skill",
                json!({"name": "weekly-report", "file": "template.md"}),
            ),
        );
        h.script(200, anthropic_text("Here is your report."));
        h.deliver("private_text", 1).await;
        let sys = system(&h, 0);
        assert!(sys.contains("- gh-issues: Triage GitHub issues."), "{sys}");
        assert!(
            !sys.contains("List issues with the token"),
            "only names and descriptions are in the prompt"
        );
        let results: Vec<String> = h.llm_requests()[3]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                assert_eq!(b["is_error"], false, "{b}");
                b["content"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(results[0], "List issues with the token.");
        assert!(results[1].starts_with("# Weekly report\n\nThree sections: done, next, blocked.\n\n---\nOther files of this skill"), "{}", results[1]);
        assert!(results[1].ends_with("template.md"), "{}", results[1]);
        assert!(!results[1].contains("license"), "frontmatter stripped");
        assert_eq!(results[2], "## Done\n## Next\n## Blocked\n");
        assert_eq!(h.sent_texts(), ["Here is your report."]);
    });
}

#[test]
fn a_skill_added_at_run_time_shows_on_the_next_turn() {
    block_on(async {
        let h = harness(&[]);
        h.script(200, anthropic_text("one"));
        h.deliver("private_text", 1).await;
        assert!(!system(&h, 0).contains("packing-list"));
        assert!(!system(&h, 0).contains("my-recipes"));

        let files = &h.platform.files;
        let packing = "---\nname: packing-list\ndescription: Make a packing list for a trip.\n---\nAsk where and how long.\n";
        files
            .write("skills/packing-list/SKILL.md", packing.as_bytes())
            .await
            .unwrap();
        let mine = "---\nname: my-recipes\ndescription: Cook from my recipe notes.\n---\nRead recipes.md first.\n";
        let path = format!("{WORKSPACE}/skills/my-recipes/SKILL.md");
        files.write(&path, mine.as_bytes()).await.unwrap();

        h.script(
            200,
            anthropic_tool_use("t1", "skill", json!({"name": "my-recipes"})),
        );
        h.script(200, anthropic_text("two"));
        h.deliver("private_text", 2).await;
        let sys = system(&h, 1);
        assert!(
            sys.contains("- packing-list: Make a packing list for a trip."),
            "{sys}"
        );
        assert!(
            sys.contains("- my-recipes: Cook from my recipe notes."),
            "{sys}"
        );
        assert_eq!(h.last_tool_result()["content"], "Read recipes.md first.");
        assert_eq!(h.sent_texts(), ["one", "two"]);

        // The command line lists the deployment's, not a conversation's own.
        let (agent, list) = h
            .app
            .admin()
            .skills(&ConnectorId::new("main"))
            .await
            .unwrap();
        assert_eq!(agent, "assistant");
        let packing = list.iter().find(|s| s.name == "packing-list").unwrap();
        assert_eq!(
            (packing.source, &packing.offered),
            (Source::Deployment, &Ok(()))
        );
        assert!(list.iter().all(|s| s.name != "my-recipes"));
    });
}

#[test]
fn a_malformed_skill_is_reported_not_offered_and_turns_go_on() {
    block_on(async {
        let h = harness(&[]);
        let files = &h.platform.files;
        let broken = "---\nname: broken\ndescription: [unclosed\n---\nBody.\n";
        files
            .write("skills/broken/SKILL.md", broken.as_bytes())
            .await
            .unwrap();
        files
            .write("skills/binary/SKILL.md", &[0xff, 0xfe, 0x00])
            .await
            .unwrap();
        files
            .write("skills/nameless/SKILL.md", b"just text, no frontmatter")
            .await
            .unwrap();

        h.script(
            200,
            anthropic_tool_use("t1", "skill", json!({"name": "broken"})),
        );
        h.script(200, anthropic_text("Done."));
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["Done."]);
        let sys = system(&h, 0);
        assert!(sys.contains("- weekly-report:"), "{sys}");
        for bad in ["broken", "binary", "nameless"] {
            assert!(!sys.contains(&format!("- {bad}:")), "{sys}");
        }
        let refused = h.last_tool_result();
        let text = refused["content"].as_str().unwrap();
        assert!(
            text.contains("not available here: frontmatter line 3"),
            "{text}"
        );

        let (_, list) = h
            .app
            .admin()
            .skills(&ConnectorId::new("main"))
            .await
            .unwrap();
        let why = |name: &str| {
            list.iter()
                .find(|s| s.name == name)
                .unwrap()
                .offered
                .clone()
                .unwrap_err()
        };
        assert!(
            why("broken").contains("`]` is missing"),
            "{}",
            why("broken")
        );
        assert!(why("binary").contains("not UTF-8"), "{}", why("binary"));
        assert!(
            why("nameless").contains("frontmatter"),
            "{}",
            why("nameless")
        );
        assert!(why("gh-issues").contains("needs GH_TOKEN set"));
        let example = list.iter().find(|s| s.name == "summarize-url").unwrap();
        assert_eq!(
            (example.source, &example.offered),
            (Source::Config, &Ok(()))
        );
    });
}

/// The Files port, counting the listings of skill folders.
struct CountingFiles {
    inner: Arc<dyn Files>,
    skill_lists: AtomicUsize,
}

#[async_trait]
impl Files for CountingFiles {
    async fn read(&self, path: &str) -> clawless_platform::Result<Vec<u8>> {
        self.inner.read(path).await
    }
    async fn write(&self, path: &str, data: &[u8]) -> clawless_platform::Result<()> {
        self.inner.write(path, data).await
    }
    async fn append(&self, path: &str, data: &[u8]) -> clawless_platform::Result<()> {
        self.inner.append(path, data).await
    }
    async fn list(&self, dir: &str) -> clawless_platform::Result<Vec<String>> {
        if dir.ends_with("skills") {
            self.skill_lists.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.list(dir).await
    }
    async fn delete(&self, path: &str) -> clawless_platform::Result<()> {
        self.inner.delete(path).await
    }
}

/// A harness whose Files port counts skill listings.
fn counting(config: Config) -> (Harness, Arc<CountingFiles>) {
    let mut counter = None;
    let h = Harness::with_ports_env(Wire::Anthropic, config, &[], |platform, _, _| {
        let files = Arc::new(CountingFiles {
            inner: platform.files.clone(),
            skill_lists: AtomicUsize::new(0),
        });
        platform.files = files.clone();
        counter = Some(files);
    });
    (h, counter.unwrap())
}

#[test]
fn a_turn_lists_the_two_skill_folders_once_each() {
    block_on(async {
        let (h, files) = counting(config());
        h.script(200, anthropic_text("Hi."));
        h.deliver("private_text", 1).await;
        assert_eq!(files.skill_lists.load(Ordering::SeqCst), 2);
        // The terminal chat offers the same skills.
        h.script(200, anthropic_text("Hello."));
        let session = SessionKey::new("local/test");
        let reply = h
            .app
            .chat_local(&ConnectorId::new("main"), &session, "hi")
            .await
            .unwrap();
        assert_eq!(reply, "Hello.");
        assert!(
            system(&h, 1).contains("- weekly-report:"),
            "{}",
            system(&h, 1)
        );
    });
}

#[test]
fn an_agent_without_the_skill_tool_gets_no_skills_and_pays_no_listing() {
    block_on(async {
        let mut config = config();
        let agent = config.agents.get_mut("assistant").unwrap();
        agent.tools.retain(|t| t != "skill");
        let (h, files) = counting(config);
        h.script(200, anthropic_text("Hi."));
        h.deliver("private_text", 1).await;
        let req = &h.llm_requests()[0];
        assert!(!support::system_text(req).contains("## Skills"));
        assert!(req["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "skill"));
        assert_eq!(files.skill_lists.load(Ordering::SeqCst), 0);
        let (_, list) = h
            .app
            .admin()
            .skills(&ConnectorId::new("main"))
            .await
            .unwrap();
        assert!(list[0]
            .offered
            .as_ref()
            .unwrap_err()
            .contains("does not list the `skill` tool"));
    });
}
