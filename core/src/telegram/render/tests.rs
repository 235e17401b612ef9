#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn renders_common_markdown() {
    let html = to_html(
        "# Title\n**bold** and *it* and `a<b>` and ~~no~~\n- item [link](https://x.y/?a=1&b=2)",
    );
    assert_eq!(
        html,
        "<b>Title</b>\n<b>bold</b> and <i>it</i> and <code>a&lt;b&gt;</code> and <s>no</s>\n• item <a href=\"https://x.y/?a=1&amp;b=2\">link</a>"
    );
}

#[test]
fn unbalanced_delimiters_stay_text() {
    assert_eq!(to_html("2 * 3 = 6 and a*b"), "2 * 3 = 6 and a*b");
    assert_eq!(to_html("snake_case_name **open"), "snake_case_name **open");
    assert_eq!(
        to_html("[x](javascript:alert(1))"),
        "[x](javascript:alert(1))"
    );
}

#[test]
fn code_blocks_are_escaped_verbatim() {
    let html = to_html("```rust\nlet a = b < c && **d**;\n```\nafter");
    assert_eq!(
        html,
        "<pre><code class=\"language-rust\">let a = b &lt; c &amp;&amp; **d**;</code></pre>\nafter"
    );
}

#[test]
fn long_text_splits_at_paragraphs_within_limit() {
    let para = "word ".repeat(300);
    let text = format!("{para}\n\n{para}\n\n{para}\n\n{para}\n\n{para}");
    let parts = render_parts(&text);
    assert!(parts.len() >= 2, "{} parts", parts.len());
    for p in &parts {
        assert!(utf16_len(&p.text) <= MAX_MESSAGE_LEN);
        assert!(!p.text.starts_with(' ') && !p.text.is_empty());
    }
    let joined: String = parts
        .iter()
        .map(|p| p.text.split_whitespace().count())
        .sum::<usize>()
        .to_string();
    assert_eq!(joined, "1500", "no word lost");
}

#[test]
fn split_code_fence_is_reopened() {
    let code: String = (0..400).map(|i| format!("line {i} <x>\n")).collect();
    let text = format!("Intro\n\n```\n{code}```\nend");
    let parts = render_parts(&text);
    assert!(parts.len() >= 2);
    for p in &parts {
        assert!(utf16_len(&p.text) <= MAX_MESSAGE_LEN);
        assert_eq!(
            p.text.matches("<pre>").count(),
            p.text.matches("</pre>").count(),
            "balanced: {}",
            p.text
        );
    }
    let all: String = parts.iter().map(|p| p.text.clone()).collect();
    assert!(all.contains("line 0 &lt;x&gt;") && all.contains("line 399 &lt;x&gt;"));
}

#[test]
fn one_long_word_is_hard_split() {
    let parts = plain_parts(&"x".repeat(9000));
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| utf16_len(&p.text) <= MAX_MESSAGE_LEN));
    assert_eq!(parts.iter().map(|p| p.text.len()).sum::<usize>(), 9000);
}

#[test]
fn emoji_count_as_two_units() {
    let parts = plain_parts(&"😀".repeat(3000));
    assert!(parts.len() == 2, "6000 units need two messages");
    assert!(parts.iter().all(|p| utf16_len(&p.text) <= MAX_MESSAGE_LEN));
}

#[test]
fn escaping_heavy_text_stays_within_limit() {
    let parts = render_parts(&"<&>".repeat(3000));
    // 9000 characters escape to 39,000: at least ten messages, none over the limit.
    assert!(parts.len() >= 10, "{} parts", parts.len());
    assert!(parts.iter().all(|p| utf16_len(&p.text) <= MAX_MESSAGE_LEN));
}

#[test]
fn markup_that_shows_nothing_is_sent_as_written() {
    // Found by fuzzing: "``" rendered as `<code></code>`, an empty message Telegram refuses.
    for md in ["``", "```", "```\n```", "# \n```"] {
        let parts = render_parts(md);
        assert_eq!(
            parts,
            vec![Part {
                text: md.into(),
                html: false,
                document: None,
                voice: None,
                photo: None,
                buttons: Vec::new(),
                links: Vec::new(),
            }],
            "{md:?}"
        );
    }
}

#[test]
fn a_long_fence_line_does_not_stall_splitting() {
    // Found by fuzzing: a fence line longer than the budget was reopened in full at the top
    // of every chunk, leaving no room to advance; splitting looped until memory ran out.
    let text = format!("```{}\ncode\n```\nafter", "x".repeat(5000));
    let parts = render_parts(&text);
    assert!(parts.len() <= 3, "{} parts", parts.len());
    assert!(parts.iter().all(|p| utf16_len(&p.text) <= MAX_MESSAGE_LEN));
    assert!(parts.iter().any(|p| p.text.contains("code")));
    let chunks = split("```<\"\"_\"\"\"\u{1}\u{1}\u{0}`", 16);
    assert!(chunks.len() <= 3, "{chunks:?}");
    assert!(chunks.iter().all(|c| utf16_len(c) <= 16));
}
