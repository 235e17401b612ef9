//! The workspace tools on the in-memory Files port: the path rules and their corpus, each
//! tool's answers and limits, and that nothing lands outside the conversation's workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::path::{workspace_dir, workspace_path, MAX_SEGMENTS, MAX_SEGMENT_BYTES};
use super::*;
use crate::ids::Scope;
use crate::tools::ToolRegistry;
use clawless_platform::files::conformance::escapes;
use clawless_platform::{Files, MemoryFiles};
use futures::executor::block_on;
use std::sync::Arc;

const ROOT: &str = "workspace/a/main/u1";

fn scope() -> Scope {
    Scope::new("a/main/u1")
}

fn ctx() -> ToolContext {
    ToolContext {
        scope: scope(),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    }
}

fn workspace() -> (Arc<MemoryFiles>, Workspace) {
    let files = Arc::new(MemoryFiles::default());
    (files.clone(), Workspace::new(files))
}

fn call(tool: &dyn Tool, input: Value) -> Result<String, ToolError> {
    block_on(tool.call(&ctx(), input))
}

/// Paths the model may not use, each with a part of the reason it is told.
fn corpus() -> Vec<(String, &'static str)> {
    let mut bad: Vec<(String, &str)> = [
        ("../x", "`..`"),
        ("..", "`..`"),
        ("a/../b", "`..`"),
        ("a/../../x", "`..`"),
        ("notes/..", "`..`"),
        ("./../x", "`..`"),
        ("/etc/passwd", "absolute"),
        ("/", "absolute"),
        ("//server/share/x", "absolute"),
        ("\\\\server\\share\\x", "backslash"),
        ("..\\x", "backslash"),
        ("a\\..\\..\\x", "backslash"),
        ("notes\\a.md", "backslash"),
        ("C:\\Windows\\win.ini", "backslash"),
        ("C:/Windows/win.ini", "drive"),
        ("c:x", "drive"),
        ("file:///etc/passwd", "':'"),
        ("notes/a:b", "':'"),
        ("~/x", "~"),
        ("~root/x", "~"),
        ("%2e%2e/x", "%2e"),
        ("%2E%2E%2Fx", "%2E"),
        ("a%2fb", "%2f"),
        ("..%5cx", "%5c"),
        ("x%5c..", "%5c"),
        ("%252e%252e/x", "%25"),
        ("%c0%ae%c0%ae/x", "%c0"),
        ("a%00b", "%00"),
        ("a\0b", "control"),
        ("a\nb", "control"),
        ("\rx", "control"),
        ("x\u{7f}", "control"),
        ("x\u{85}", "control"),
        ("evil\u{202e}txt.exe", "control"),
        ("...", "dots only"),
        ("a/..../b", "dots only"),
        ("", "required"),
        (".", "required"),
        ("./", "required"),
        ("notes/", "directory"),
    ]
    .map(|(p, why)| (p.to_owned(), why))
    .to_vec();
    bad.push((format!("a/{}", "x".repeat(MAX_SEGMENT_BYTES + 1)), "name"));
    bad.push(("ab/".repeat(MAX_SEGMENTS) + "x", "deeper"));
    bad.push(("abcdefg/".repeat(40), "longer than 256"));
    bad
}

#[test]
fn the_corpus_is_refused_with_its_reason() {
    let corpus = corpus();
    assert!(corpus.len() >= 30, "{}", corpus.len());
    for (bad, why) in corpus {
        let err = workspace_path(&scope(), &bad).unwrap_err().0;
        assert!(err.contains(why), "{bad:?}: {err}");
        assert!(!err.contains(ROOT), "the root is never shown: {err}");
    }
}

#[test]
fn what_every_port_refuses_the_tools_refuse_too() {
    for bad in escapes() {
        assert!(workspace_path(&scope(), &bad).is_err(), "{bad:?}");
    }
}

#[test]
fn good_paths_land_in_the_workspace() {
    let ok = |p: &str| workspace_path(&scope(), p).unwrap();
    assert_eq!(ok("notes/a.md"), format!("{ROOT}/notes/a.md"));
    assert_eq!(ok("./notes//./a.md"), format!("{ROOT}/notes/a.md"));
    assert_eq!(ok("ünï/çødé 📄.md"), format!("{ROOT}/ünï/çødé 📄.md"));
    for literal in [
        ".env",
        "a..b",
        "con",
        "nul.txt",
        "100% done.txt",
        "%41.md",
        "x%2",
        "a~",
    ] {
        assert_eq!(ok(literal), format!("{ROOT}/{literal}"));
    }
    let deepest = "ab/".repeat(MAX_SEGMENTS - 1) + "x";
    assert!(workspace_path(&scope(), &deepest).is_ok());
    let longest = "x".repeat(MAX_SEGMENT_BYTES);
    assert!(workspace_path(&scope(), &longest).is_ok());
    assert_eq!(workspace_dir(&scope(), "").unwrap(), ROOT);
    assert_eq!(workspace_dir(&scope(), ".").unwrap(), ROOT);
    assert_eq!(
        workspace_dir(&scope(), "notes/").unwrap(),
        format!("{ROOT}/notes")
    );
    assert!(workspace_dir(&scope(), "..").is_err());
}

#[test]
fn every_tool_refuses_the_corpus_and_writes_nothing() {
    let (files, ws) = workspace();
    let tools: [&dyn Tool; 5] = [
        &ReadFile(ws.clone()),
        &WriteFile(ws.clone()),
        &EditFile(ws.clone()),
        &ListDir(ws.clone()),
        &DeleteFile(ws),
    ];
    for (bad, _) in corpus() {
        for tool in tools {
            let input = json!({"path": bad, "content": "x", "old": "x", "new": "y"});
            let name = tool.spec().name;
            if name == "list_dir" && workspace_dir(&scope(), &bad).is_ok() {
                continue; // "", "." and "notes/" are directories
            }
            assert!(call(tool, input).is_err(), "{name} {bad:?}");
        }
    }
    assert!(block_on(files.list("")).unwrap().is_empty());
}

#[test]
fn workspaces_are_per_scope() {
    let (files, ws) = workspace();
    call(
        &WriteFile(ws.clone()),
        json!({"path": "a.md", "content": "mine"}),
    )
    .unwrap();
    let other = ToolContext {
        scope: Scope::new("a/main/u2"),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    };
    let read = block_on(ReadFile(ws.clone()).call(&other, json!({"path": "a.md"})));
    assert!(read.unwrap_err().0.contains("does not exist"));
    let listed = block_on(ListDir(ws).call(&other, json!({}))).unwrap();
    assert_eq!(listed, "Your workspace is empty.");
    assert_eq!(block_on(files.list("")).unwrap(), [format!("{ROOT}/a.md")]);
}

#[test]
fn read_file_numbers_lines_and_says_how_to_read_on() {
    let (files, ws) = workspace();
    let text: String = (1..=1600).map(|i| format!("line {i}\n")).collect();
    block_on(files.write(&format!("{ROOT}/big.txt"), text.as_bytes())).unwrap();
    let read = ReadFile(ws);
    let out = call(&read, json!({"path": "big.txt"})).unwrap();
    assert!(out.starts_with("     1\tline 1\n     2\tline 2\n"), "{out}");
    assert!(out.contains("   400\tline 400\n"));
    assert!(!out.contains("line 401"));
    assert!(
        out.ends_with("… 1200 more lines: call again with offset=401"),
        "{out}"
    );
    let out = call(&read, json!({"path": "big.txt", "offset": 1599})).unwrap();
    assert_eq!(out, "  1599\tline 1599\n  1600\tline 1600");
    let out = call(&read, json!({"path": "big.txt", "offset": 2, "limit": 1})).unwrap();
    assert_eq!(
        out,
        "     2\tline 2\n… 1598 more lines: call again with offset=3"
    );
    let longer: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    block_on(files.write(&format!("{ROOT}/longer.txt"), longer.as_bytes())).unwrap();
    let out = call(&read, json!({"path": "longer.txt", "limit": 5000})).unwrap();
    assert!(out.contains("  2000\t2000\n"), "at most 2000 lines");
    assert!(
        out.ends_with("\n… 500 more lines: call again with offset=2001"),
        "{out}"
    );
    let err = call(&read, json!({"path": "big.txt", "offset": 1601})).unwrap_err();
    assert!(
        err.0.contains("past the end") && err.0.contains("1600 lines"),
        "{err}"
    );
    assert!(call(&read, json!({"path": "big.txt", "offset": 0})).is_err());
    assert!(call(&read, json!({"path": "big.txt", "limit": "ten"})).is_err());
}

#[test]
fn read_file_stays_within_64_kb_on_char_boundaries() {
    let (files, ws) = workspace();
    let line = "é".repeat(100); // 200 bytes a line
    let text: String = (0..1000).map(|_| format!("{line}\n")).collect();
    block_on(files.write(&format!("{ROOT}/wide.txt"), text.as_bytes())).unwrap();
    assert_eq!(
        MAX_READ_BYTES,
        crate::agent::MAX_TOOL_RESULT,
        "the agent never cuts it"
    );
    let out = call(
        &ReadFile(ws.clone()),
        json!({"path": "wide.txt", "limit": 2000}),
    )
    .unwrap();
    assert!(out.len() <= MAX_READ_BYTES, "{}", out.len());
    let shown = out.lines().filter(|l| l.contains('é')).count();
    assert!(out.ends_with(&format!(
        "… {} more lines (64 KB shown): call again with offset={}",
        1000 - shown,
        shown + 1
    )));

    let huge = format!("{}\nafter\n", "ü".repeat(50_000));
    block_on(files.write(&format!("{ROOT}/one.txt"), huge.as_bytes())).unwrap();
    let out = call(&ReadFile(ws), json!({"path": "one.txt"})).unwrap();
    assert!(out.len() <= MAX_READ_BYTES, "{}", out.len());
    assert!(out.contains("line 1 is 100000 bytes; only its start is shown\n"));
    assert!(
        out.ends_with("… 1 more lines (64 KB shown): call again with offset=2"),
        "{}",
        &out[out.len() - 100..]
    );
}

#[test]
fn read_file_explains_binary_missing_and_directories() {
    let (files, ws) = workspace();
    block_on(files.write(&format!("{ROOT}/img.png"), &[0x89, b'P', 0xff, 0])).unwrap();
    block_on(files.write(&format!("{ROOT}/docs/a.md"), b"")).unwrap();
    let read = ReadFile(ws);
    let err = call(&read, json!({"path": "img.png"})).unwrap_err().0;
    assert!(err.contains("binary") && err.contains("4 bytes"), "{err}");
    let err = call(&read, json!({"path": "nope.md"})).unwrap_err().0;
    assert_eq!(err, "nope.md does not exist; list_dir shows what does");
    let err = call(&read, json!({"path": "docs"})).unwrap_err().0;
    assert!(err.contains("docs is a directory"), "{err}");
    assert_eq!(
        call(&read, json!({"path": "docs/a.md"})).unwrap(),
        "docs/a.md is empty."
    );
}

#[test]
fn write_file_creates_replaces_and_refuses_too_much() {
    let (files, mut ws) = workspace();
    ws.max_file_bytes = 10;
    let write = WriteFile(ws);
    let out = call(&write, json!({"path": "n/a.md", "content": "hello"})).unwrap();
    assert_eq!(out, "Created n/a.md (5 bytes).");
    let out = call(&write, json!({"path": "n/a.md", "content": "hi"})).unwrap();
    assert_eq!(out, "Replaced n/a.md (2 bytes; it was 5 bytes).");
    let err = call(&write, json!({"path": "n/a.md", "content": "x".repeat(11)})).unwrap_err();
    assert_eq!(err.0, "n/a.md would be 11 bytes, over the limit of 10 bytes per workspace file; write less, or split it into several files");
    assert_eq!(
        block_on(files.read(&format!("{ROOT}/n/a.md"))).unwrap(),
        b"hi"
    );
    let err = call(&write, json!({"path": "n", "content": "x"})).unwrap_err();
    assert_eq!(err.0, "n is a directory; write a file inside it");
    let err = call(&write, json!({"path": "n/a.md/b", "content": "x"})).unwrap_err();
    assert_eq!(err.0, "n/a.md is a file, so it cannot hold n/a.md/b");
    assert!(
        call(&write, json!({"path": "n/b.md"})).is_err(),
        "content is required"
    );
    assert_eq!(
        block_on(files.list("")).unwrap(),
        [format!("{ROOT}/n/a.md")]
    );
}

#[test]
fn the_default_cap_is_a_megabyte() {
    let (_, ws) = workspace();
    let write = WriteFile(ws);
    let mb = DEFAULT_MAX_FILE_BYTES;
    assert!(call(&write, json!({"path": "a", "content": "x".repeat(mb)})).is_ok());
    assert!(call(&write, json!({"path": "a", "content": "x".repeat(mb + 1)})).is_err());
}

#[test]
fn edit_file_replaces_exactly_one_occurrence() {
    let (files, mut ws) = workspace();
    ws.max_file_bytes = 40;
    let path = format!("{ROOT}/todo.md");
    block_on(files.write(&path, b"# Todo\n- milk\n- eggs\n- milk\n")).unwrap();
    let edit = EditFile(ws);
    let edit_with =
        |old: &str, new: &str| call(&edit, json!({"path": "todo.md", "old": old, "new": new}));
    let err = edit_with("- milk", "- oat milk").unwrap_err().0;
    assert!(
        err.contains("occurs 2 times") && err.contains("more of the lines"),
        "{err}"
    );
    let err = edit_with("  - eggs\n- bread", "x").unwrap_err().0;
    assert!(err.starts_with("old text not found in todo.md"), "{err}");
    assert!(
        err.contains("line 3 holds its first line: \"- eggs\""),
        "{err}"
    );
    let err = edit_with("coffee", "x").unwrap_err().0;
    assert_eq!(
        err,
        "old text not found in todo.md; read_file shows the exact text"
    );
    assert!(edit_with("", "x").unwrap_err().0.contains("empty"));
    let err = edit_with("- eggs", &"x".repeat(40)).unwrap_err().0;
    assert!(err.contains("limit"), "{err}");
    let out = edit_with("- eggs\n", "- eggs\n- bread\n").unwrap();
    assert_eq!(
        out,
        "Edited todo.md: replaced 1 occurrence at line 3 (36 bytes now)."
    );
    let text = block_on(files.read(&path)).unwrap();
    assert_eq!(text, b"# Todo\n- milk\n- eggs\n- bread\n- milk\n");
    let err = call(&edit, json!({"path": "gone.md", "old": "a", "new": "b"})).unwrap_err();
    assert!(err.0.contains("does not exist"));
}

#[test]
fn edit_file_counts_overlapping_occurrences() {
    let (files, ws) = workspace();
    block_on(files.write(&format!("{ROOT}/a"), "aaa ééé".as_bytes())).unwrap();
    let edit = EditFile(ws);
    let err = call(&edit, json!({"path": "a", "old": "aa", "new": "b"})).unwrap_err();
    assert!(err.0.contains("occurs 2 times"), "{err}");
    let err = call(&edit, json!({"path": "a", "old": "éé", "new": "b"})).unwrap_err();
    assert!(err.0.contains("occurs 2 times"), "{err}");
}

#[test]
fn list_dir_shows_files_and_directories() {
    let (files, ws) = workspace();
    let list = ListDir(ws);
    assert_eq!(call(&list, json!({})).unwrap(), "Your workspace is empty.");
    for f in ["b.md", "a/1.md", "a/2.md", "a/deep/3.md", "c/x"] {
        block_on(files.write(&format!("{ROOT}/{f}"), b"x")).unwrap();
    }
    block_on(files.write("workspace/a/main/u2/theirs.md", b"x")).unwrap();
    let out = call(&list, json!({"path": null})).unwrap();
    assert_eq!(
        out,
        "workspace: 1 file, 2 directories\na/ (3 files)\nb.md\nc/ (1 file)"
    );
    let out = call(&list, json!({"path": "a/"})).unwrap();
    assert_eq!(out, "a: 2 files, 1 directory\n1.md\n2.md\ndeep/ (1 file)");
    let err = call(&list, json!({"path": "b.md"})).unwrap_err().0;
    assert_eq!(err, "b.md is a file; read it with read_file");
    let out = call(&list, json!({"path": "nope"})).unwrap();
    assert_eq!(out, "nope does not exist (no files under it).");
}

#[test]
fn list_dir_shows_at_most_500_entries() {
    let (files, ws) = workspace();
    for i in 0..(MAX_LIST_ENTRIES + 20) {
        block_on(files.write(&format!("{ROOT}/many/{i:04}"), b"")).unwrap();
    }
    let out = call(&ListDir(ws), json!({"path": "many"})).unwrap();
    assert_eq!(out.lines().count(), 1 + MAX_LIST_ENTRIES + 1);
    assert!(out.ends_with("… 20 more entries not shown: list a sub-directory"));
}

#[test]
fn delete_file_deletes_one_file() {
    let (files, ws) = workspace();
    block_on(files.write(&format!("{ROOT}/d/a.md"), b"abc")).unwrap();
    let delete = DeleteFile(ws);
    let err = call(&delete, json!({"path": "d"})).unwrap_err().0;
    assert_eq!(err, "d is a directory; list it with list_dir");
    assert_eq!(
        call(&delete, json!({"path": "d/a.md"})).unwrap(),
        "Deleted d/a.md (3 bytes)."
    );
    let err = call(&delete, json!({"path": "d/a.md"})).unwrap_err().0;
    assert_eq!(err, "d/a.md does not exist; list_dir shows what does");
    assert!(block_on(files.list("")).unwrap().is_empty());
}

#[test]
fn the_five_are_built_ins_and_guarded() {
    let (p, _, _) = clawless_platform::Platform::in_memory();
    let memory = crate::memory::store::MemoryStore {
        files: p.files.clone(),
        kv: p.kv.clone(),
        vectors: p.vectors.clone(),
        text: p.text.clone(),
        embedder: Arc::new(crate::memory::embed::LocalEmbedder::default()),
        config: Default::default(),
    };
    let deps = crate::tools::ToolDeps {
        wake: Default::default(),
        clock: p.clock.clone(),
        memory: Arc::new(memory),
        files: p.files.clone(),
        kv: p.kv.clone(),
        http: p.http.clone(),
        web: Default::default(),
        search: None,
        exec: None,
        bots: Default::default(),
        painter: None,
        watches: Default::default(),
    };
    let names = [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "delete_file",
    ];
    let names: Vec<String> = names.map(String::from).to_vec();
    let reg = ToolRegistry::builtins(&names, &deps).unwrap();
    assert_eq!(reg.names().len(), 5);
    for name in &names {
        assert!(crate::tools::BUILTIN_TOOLS.contains(&name.as_str()));
        assert_eq!(reg.get(name).unwrap().level(), Level::Guarded, "{name}");
    }
}
