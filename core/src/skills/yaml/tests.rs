//! The frontmatter YAML subset: what skills in the wild write, and errors that name the line.

use serde_json::json;

use super::parse;

fn ok(src: &str) -> serde_json::Value {
    parse(src, 2).unwrap_or_else(|e| panic!("{e}\n---\n{src}"))
}

#[test]
fn plain_quoted_and_typed_scalars() {
    let v = ok("name: pdf\ndescription: \"Fill PDF forms: text, checkboxes\"\nlicense: 'Apache-2.0 (it''s in LICENSE.txt)'\nversion: 2\nratio: 1.5\nbeta: true\nnothing: ~\nurl: https://example.com/a#b\n");
    assert_eq!(
        v,
        json!({"name": "pdf", "description": "Fill PDF forms: text, checkboxes",
            "license": "Apache-2.0 (it's in LICENSE.txt)", "version": 2, "ratio": 1.5,
            "beta": true, "nothing": null, "url": "https://example.com/a#b"})
    );
}

#[test]
fn comments_and_blank_lines_are_skipped() {
    let v = ok("# about\nname: x # the name\n\n   \ndescription: y\n");
    assert_eq!(v, json!({"name": "x", "description": "y"}));
    let below = ok("description:\n  on the next line\n  and the one after\nlist:\n  [a, b]\n");
    assert_eq!(below["description"], "on the next line and the one after");
    assert_eq!(below["list"], json!(["a", "b"]));
}

#[test]
fn a_plain_value_continues_on_more_indented_lines() {
    let v =
        ok("description: Use this when the user\n  asks for a summary\n  of a page.\nname: s\n");
    assert_eq!(
        v["description"],
        "Use this when the user asks for a summary of a page."
    );
    assert_eq!(v["name"], "s");
}

#[test]
fn block_mappings_and_sequences_nest() {
    let v = ok("requires:\n  env:\n    - GITHUB_TOKEN\n    - GH_HOST\n  tools: [web_fetch]\nallowed-tools:\n- Read\n- Bash(git:*)\nmetadata:\n  author: someone\n  tags:\n    - name: a\n      weight: 1\n    - name: b\n");
    assert_eq!(
        v,
        json!({
            "requires": {"env": ["GITHUB_TOKEN", "GH_HOST"], "tools": ["web_fetch"]},
            "allowed-tools": ["Read", "Bash(git:*)"],
            "metadata": {"author": "someone", "tags": [{"name": "a", "weight": 1}, {"name": "b"}]}
        })
    );
}

#[test]
fn openclaw_metadata_as_json_over_several_lines() {
    let src = "name: github\nmetadata:\n  {\n    \"openclaw\": {\n      \"emoji\": \"🐙\",\n      \"requires\": { \"bins\": [\"gh\"], \"env\": [\"GH_TOKEN\"] },\n      \"install\": [\n        { \"id\": \"brew\", \"kind\": \"brew\", },\n      ],\n    },\n  }\ndescription: GitHub via gh.\n";
    let v = ok(src);
    assert_eq!(v["metadata"]["openclaw"]["requires"]["bins"], json!(["gh"]));
    assert_eq!(v["metadata"]["openclaw"]["emoji"], "🐙");
    assert_eq!(v["metadata"]["openclaw"]["install"][0]["kind"], "brew");
    assert_eq!(v["description"], "GitHub via gh.");
    let one_line = ok("metadata: {\"openclaw\":{\"requires\":{\"env\":[\"A\"]}}} # json\n");
    assert_eq!(
        one_line["metadata"]["openclaw"]["requires"]["env"],
        json!(["A"])
    );
}

#[test]
fn flow_collections_with_plain_scalars() {
    let v = ok("a: {x: 1, y: [b, 'c d', \"e\\u00e9\\n\"], z: http://h/p}\nb: []\nc: {}\n");
    assert_eq!(
        v,
        json!({"a": {"x": 1, "y": ["b", "c d", "eé\n"], "z": "http://h/p"}, "b": [], "c": {}})
    );
}

#[test]
fn block_scalars_literal_and_folded() {
    let v = ok("lit: |\n  line one\n    indented\n\n  after blank\nfold: >\n  folded\n  into one\n\n  paragraph two\nstrip: |-\n  no newline\nkeep: |+\n  kept\n\nnext: 1\n");
    assert_eq!(v["lit"], "line one\n  indented\n\nafter blank\n");
    assert_eq!(v["fold"], "folded into one\nparagraph two\n");
    assert_eq!(v["strip"], "no newline");
    assert_eq!(v["keep"], "kept\n\n");
    assert_eq!(v["next"], 1);
}

#[test]
fn quoted_values_over_lines_and_escapes() {
    let v =
        ok("d: \"first\n  second\"\ne: 'it''s\n\n  new paragraph'\nf: \"\\uD83D\\uDE00 \\x41\"\n");
    assert_eq!(v["d"], "first second");
    assert_eq!(v["e"], "it's\nnew paragraph");
    assert_eq!(v["f"], "😀 A");
}

#[test]
fn errors_name_the_line() {
    for (src, line, what) in [
        ("name: x\n\tdescription: y\n", "line 3", "tab"),
        ("name: x\n  oops: y\n", "line 3", "indented more"),
        ("d: text\n  - item\n", "line 3", "indented more"),
        ("a:\n    b: 1\n  c: 2\n", "line 4", "indented more"),
        ("just some text\n", "line 2", "key: value"),
        ("a: [1, 2\nb: 3\n", "line 2", "`]` is missing"),
        ("a: {x: 1} trailing\n", "line 2", "after the value"),
        ("a: \"open\n", "line 2", "not closed"),
        ("a: \"\\q\"\n", "line 2", "unknown escape"),
        ("a: |x\n  t\n", "line 2", "block scalar header"),
        ("a: \"\\uD800\"\n", "line 2", "surrogate"),
        ("a:\n  - x\n  y: 1\n", "line 4", "key"),
    ] {
        let e = parse(src, 2).expect_err(src);
        assert!(e.starts_with(line) && e.contains(what), "{src:?}: {e}");
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let deep = format!("a: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse(&deep, 2).unwrap_err().contains("deeper"));
    let mut block = String::new();
    for i in 0..200 {
        block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
    }
    assert!(parse(&block, 2).unwrap_err().contains("deeper"));
}

#[test]
fn odd_input_never_panics() {
    for src in [
        "",
        "\n\n",
        "-",
        "- ",
        ":",
        ": x",
        "a:",
        "a: [",
        "a: {",
        "a: \"",
        "a: '",
        "a: |",
        "a: >-2",
        "a: [,]",
        "a: {,}",
        "a: {b}",
        "- a\nb: c",
        "a: b\n- c",
        "a: \"\\u12\"",
        "a: \"\\U0011FFFF\"",
        "a: 'x'y",
        "é: ü",
        "a:\n-\n-",
        "a: [\"\\",
        "a: {\"k\"",
        "? complex\n",
        "&anchor a: *b",
    ] {
        let _ = parse(src, 2);
    }
}
