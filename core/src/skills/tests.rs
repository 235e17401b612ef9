//! SKILL.md frontmatter into `Meta` (AgentSkills and OpenClaw fields, limits), the catalog's
//! sources and their precedence, and which skills an agent is offered.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{FakeClock, Files, MemoryFiles};
use futures::executor::block_on;

use super::frontmatter::{parse, split};
use super::*;

fn skill(name: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: Does {name} things.\n{extra}---\n# {name}\nBody of {name}.\n")
}

#[test]
fn frontmatter_of_anthropic_and_openclaw_skills() {
    let anthropic = "---\nname: pdf\ndescription: Comprehensive PDF manipulation toolkit for extracting text and tables,\n  creating new PDFs. When Claude needs to fill in a PDF form.\nlicense: Proprietary. LICENSE.txt has complete terms\nallowed-tools: Read Bash\n---\n\n# PDF\n";
    let (meta, body) = parse(anthropic).unwrap();
    assert_eq!(meta.name, "pdf");
    assert_eq!(meta.description, "Comprehensive PDF manipulation toolkit for extracting text and tables, creating new PDFs. When Claude needs to fill in a PDF form.");
    assert_eq!(meta.requires, Requires::default());
    assert_eq!(body, "# PDF\n");

    let openclaw = "---\nname: github\ndescription: \"Interact with GitHub using the `gh` CLI.\"\nhomepage: https://github.com\nmetadata:\n  {\n    \"openclaw\": {\n      \"emoji\": \"🐙\",\n      \"requires\": { \"bins\": [\"gh\"], \"anyBins\": [\"git\"], \"env\": [\"GH_TOKEN\"] },\n    },\n  }\nrequires:\n  env: [GH_TOKEN, GH_HOST]\n  tools: [web_fetch]\n---\nUse gh.\n";
    let (meta, _) = parse(openclaw).unwrap();
    assert_eq!(meta.requires.env, ["GH_TOKEN", "GH_HOST"]);
    assert_eq!(meta.requires.tools, ["web_fetch"]);
    assert_eq!(meta.requires.bins, ["gh", "git"]);

    let as_string = "---\nname: s\ndescription: d\nmetadata: '{\"openclaw\":{\"requires\":{\"env\":[\"K\"]}}}'\n---\n";
    assert_eq!(parse(as_string).unwrap().0.requires.env, ["K"]);
}

#[test]
fn frontmatter_errors_are_sentences() {
    let long = "x".repeat(1025);
    for (text, what) in [
        ("# no frontmatter\n", "does not start with a frontmatter"),
        ("---\nname: a\ndescription: b\n", "not closed"),
        ("---\ndescription: b\n---\n", "`name` is missing"),
        ("---\nname: a\n---\n", "`description` is missing"),
        ("---\nname: Bad_Name\ndescription: b\n---\n", "lowercase"),
        ("---\nname: -a\ndescription: b\n---\n", "lowercase"),
        ("---\nname: a--b\ndescription: b\n---\n", "lowercase"),
        (
            &format!("---\nname: a\ndescription: {long}\n---\n"),
            "1025 characters",
        ),
        (
            "---\nname: a\ndescription: b\nrequires: [x]\n---\n",
            "`requires` is not a mapping",
        ),
        (
            "---\nname: a\ndescription: b\nrequires: {env: [{x: 1}]}\n---\n",
            "requires.env",
        ),
        (
            "---\nname: a\ndescription: b\n\tlicense: x\n---\n",
            "line 4: a tab",
        ),
        ("---\n- a\n---\n", "not a mapping"),
    ] {
        let e = parse(text).expect_err(text);
        assert!(e.contains(what), "{text:?}: {e}");
    }
    assert_eq!(
        split("\u{feff}---\r\nname: a\r\n---\r\n\r\nbody\r\n").unwrap(),
        ("name: a\r\n", "body\r\n")
    );
}

#[test]
fn names_follow_agentskills() {
    for ok in ["a", "pdf", "summarize-url", "x1-2y", &"a".repeat(64)] {
        assert!(valid_name(ok), "{ok}");
    }
    for bad in [
        "",
        "A",
        "a_b",
        "a b",
        "-a",
        "a-",
        "a--b",
        "é",
        &"a".repeat(65),
    ] {
        assert!(!valid_name(bad), "{bad}");
    }
}

fn catalog(config: &[(&str, String)], env: &[&str]) -> (Catalog, Arc<MemoryFiles>, Arc<FakeClock>) {
    let files = Arc::new(MemoryFiles::default());
    let clock = Arc::new(FakeClock::new(1_000_000));
    let config: BTreeMap<String, String> = config
        .iter()
        .map(|(p, t)| ((*p).to_owned(), t.clone()))
        .collect();
    let env = env.iter().map(|e| (*e).to_owned()).collect();
    let c = Catalog::new(config, files.clone(), clock.clone(), env);
    (c, files, clock)
}

#[test]
fn later_sources_win_and_bad_folders_are_kept_with_the_reason() {
    block_on(async {
        let (c, files, _) = catalog(
            &[
                ("both/SKILL.md", skill("both", "")),
                ("config-only/SKILL.md", skill("config-only", "")),
                ("config-only/references/a.md", "A".into()),
                ("misnamed/SKILL.md", skill("other", "")),
            ],
            &[],
        );
        files
            .write(
                "skills/both/SKILL.md",
                skill("both", "license: MIT\n").as_bytes(),
            )
            .await
            .unwrap();
        files
            .write("skills/empty/notes.txt", b"no skill here")
            .await
            .unwrap();
        files
            .write("skills/README.md", b"not a skill folder")
            .await
            .unwrap();
        files
            .write(
                "workspace/a/skills/mine/SKILL.md",
                skill("mine", "").as_bytes(),
            )
            .await
            .unwrap();
        files
            .write("workspace/a/skills/bad/SKILL.md", b"---\nname: bad\n")
            .await
            .unwrap();

        let all = c.entries(Some("workspace/a/skills")).await;
        let names: Vec<(&str, Source)> =
            all.values().map(|e| (e.name.as_str(), e.source)).collect();
        assert_eq!(
            names,
            [
                ("bad", Source::Workspace),
                ("both", Source::Deployment),
                ("config-only", Source::Config),
                ("empty", Source::Deployment),
                ("mine", Source::Workspace),
                ("misnamed", Source::Config),
            ]
        );
        assert_eq!(all["config-only"].files, ["references/a.md"]);
        assert!(all["bad"].meta.as_ref().unwrap_err().contains("not closed"));
        assert!(all["empty"]
            .meta
            .as_ref()
            .unwrap_err()
            .contains("no SKILL.md"));
        assert!(all["misnamed"]
            .meta
            .as_ref()
            .unwrap_err()
            .contains("not its folder's"));
        // Another conversation sees none of this one's.
        let other = c.entries(Some("workspace/b/skills")).await;
        assert!(!other.contains_key("mine") && !other.contains_key("bad"));
    });
}

#[test]
fn a_skill_md_is_read_again_after_the_refresh_and_a_new_one_at_once() {
    block_on(async {
        let (c, files, clock) = catalog(&[], &[]);
        files
            .write("skills/s/SKILL.md", skill("s", "").as_bytes())
            .await
            .unwrap();
        let first = c.entries(None).await;
        assert_eq!(
            first["s"].meta.as_ref().unwrap().description,
            "Does s things."
        );
        let edited = "---\nname: s\ndescription: Edited.\n---\n";
        files
            .write("skills/s/SKILL.md", edited.as_bytes())
            .await
            .unwrap();
        files
            .write("skills/t/SKILL.md", skill("t", "").as_bytes())
            .await
            .unwrap();
        let soon = c.entries(None).await;
        assert!(soon.contains_key("t"), "a new skill shows at once");
        assert_eq!(
            soon["s"].meta.as_ref().unwrap().description,
            "Does s things.",
            "cached"
        );
        clock.advance(Duration::from_millis(REFRESH_MS));
        let later = c.entries(None).await;
        assert_eq!(later["s"].meta.as_ref().unwrap().description, "Edited.");
        files.delete("skills/t/SKILL.md").await.unwrap();
        assert!(
            !c.entries(None).await.contains_key("t"),
            "a removed skill goes at once"
        );
    });
}

#[test]
fn sizes_and_counts_are_bounded() {
    block_on(async {
        let (c, files, _) = catalog(&[], &[]);
        let big = format!("{}{}", skill("big", ""), "x".repeat(MAX_SKILL_BYTES));
        files
            .write("skills/big/SKILL.md", big.as_bytes())
            .await
            .unwrap();
        for i in 0..MAX_SKILLS + 5 {
            let name = format!("s{i:03}");
            files
                .write(
                    &format!("skills/{name}/SKILL.md"),
                    skill(&name, "").as_bytes(),
                )
                .await
                .unwrap();
        }
        for i in 0..MAX_FILES_SHOWN + 3 {
            files
                .write(&format!("skills/s000/f{i:02}.md"), b"f")
                .await
                .unwrap();
        }
        let all = c.entries(None).await;
        assert_eq!(all.len(), MAX_SKILLS);
        assert!(all["big"].meta.as_ref().unwrap_err().contains("over 32 KB"));
        assert_eq!(all["s000"].files.len(), MAX_FILES_SHOWN);
    });
}

#[test]
fn an_agent_is_offered_what_it_can_use() {
    block_on(async {
        let (c, _, _) = catalog(
            &[
                ("plain/SKILL.md", skill("plain", "")),
                (
                    "env/SKILL.md",
                    skill("env", "requires:\n  env: [SET, UNSET]\n"),
                ),
                (
                    "tool/SKILL.md",
                    skill("tool", "requires: {tools: [web_fetch]}\n"),
                ),
                (
                    "bins/SKILL.md",
                    skill(
                        "bins",
                        "metadata: {\"openclaw\": {\"requires\": {\"bins\": [\"gh\"]}}}\n",
                    ),
                ),
                ("broken/SKILL.md", "---\nname: broken\n---\n".into()),
            ],
            &["SET"],
        );
        let c = Arc::new(c);
        let tools = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let offer = Offer::new(c.clone(), "a", tools(&["skill", "current_time"]), None);
        let all = c.entries(None).await;
        let why = |name: &str, o: &Offer| o.check(&all[name]).map(|m| m.name.clone());
        assert_eq!(why("plain", &offer), Ok("plain".into()));
        assert_eq!(why("env", &offer), Err("needs UNSET set".into()));
        assert!(why("tool", &offer)
            .unwrap_err()
            .contains("needs the tool web_fetch"));
        assert!(why("bins", &offer).unwrap_err().contains("`exec` tool"));
        assert!(why("broken", &offer)
            .unwrap_err()
            .contains("`description` is missing"));

        let with_exec = Offer::new(c.clone(), "a", tools(&["skill", "web_fetch", "exec"]), None);
        assert!(why("tool", &with_exec).is_ok() && why("bins", &with_exec).is_ok());
        let only = Offer::new(c.clone(), "a", tools(&["skill"]), Some(&["env".to_owned()]));
        assert!(why("plain", &only)
            .unwrap_err()
            .contains("not in the `skills:`"));
        let no_tool = Offer::new(c.clone(), "a", tools(&["current_time"]), None);
        assert!(why("plain", &no_tool)
            .unwrap_err()
            .contains("does not list the `skill` tool"));
        assert_eq!(no_tool.prompt(None).await, "");

        let prompt = offer.prompt(None).await;
        assert!(prompt.starts_with("## Skills\n"), "{prompt}");
        assert!(prompt.contains("- plain: Does plain things.\n"), "{prompt}");
        for hidden in ["env", "tool", "bins", "broken"] {
            assert!(!prompt.contains(&format!("- {hidden}:")), "{prompt}");
        }
        assert!(offer
            .read(None, "plain", None)
            .await
            .unwrap()
            .starts_with("# plain\nBody of plain."));
        assert!(offer
            .read(None, "env", None)
            .await
            .unwrap_err()
            .contains("not available here: needs UNSET set"));
        assert!(offer
            .read(None, "nope", None)
            .await
            .unwrap_err()
            .contains("Offered: plain."));
    });
}
