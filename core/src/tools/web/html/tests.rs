use super::*;

#[test]
fn the_main_content_becomes_markdownish_text() {
    let html = r#"<!doctype html><html><head><title> The  Page </title>
        <style>body { color: red }</style><script>var x = "<p>not text</p>";</script></head>
        <body><nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
        <main><h1>Hello &amp; welcome</h1>
        <p>First   paragraph with a <a href="/docs/intro">link</a> and <b>bold</b> words.</p>
        <ul><li>one</li><li>two &lt;three&gt;</li></ul>
        <pre>  code
    kept</pre>
        <p hidden>secret</p><div style="display: none">also hidden</div>
        <img src="x.png" alt="a cat"></main>
        <footer>© 2026</footer></body></html>"#;
    let page = to_text(html, "https://example.com/blog/post.html");
    assert_eq!(page.title, "The Page");
    assert_eq!(
        page.text,
        "# Hello & welcome\n\nFirst paragraph with a [link](https://example.com/docs/intro) and bold words.\n\n- one\n- two <three>\n\n  code\n    kept\n\n[image: a cat]"
    );
}

#[test]
fn without_main_the_body_is_kept_without_its_furniture() {
    let html = "<body><header>Site</header><p>Body text</p><aside>ads</aside>\
                <form><input name=q></form><p>More</p><footer>foot</footer></body>";
    assert_eq!(to_text(html, "http://a.test/").text, "Body text\n\nMore");
}

#[test]
fn links_are_made_absolute_or_dropped() {
    let base = "https://a.test/dir/page?q=1";
    assert_eq!(
        absolute("x/y", base).as_deref(),
        Some("https://a.test/dir/x/y")
    );
    assert_eq!(absolute("/r", base).as_deref(), Some("https://a.test/r"));
    assert_eq!(
        absolute("//b.test/z", base).as_deref(),
        Some("https://b.test/z")
    );
    assert_eq!(
        absolute("http://c.test", base).as_deref(),
        Some("http://c.test")
    );
    for dropped in ["#top", "javascript:alert(1)", "mailto:a@b.c", ""] {
        assert_eq!(absolute(dropped, base), None, "{dropped}");
    }
    let html = r##"<p><a href="#x">jump</a> <a href="javascript:void(0)">js</a></p>"##;
    assert_eq!(to_text(html, base).text, "[jump] [js]");
}

#[test]
fn broken_markup_still_gives_text() {
    let html = "<p>unclosed <b>bold <i>both</p><div>after</div></span></span><p>end";
    assert_eq!(
        to_text(html, "http://a.test/").text,
        "unclosed bold both\n\nafter\n\nend"
    );
    assert_eq!(to_text("", "http://a.test/"), Page::default());
    assert_eq!(to_text("just text", "http://a.test/").text, "just text");
}

#[test]
fn tables_keep_their_cells_apart() {
    let html = "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ada</td><td>36</td></tr></table>";
    assert_eq!(
        to_text(html, "http://a.test/").text,
        "| Name | Age\n| Ada | 36"
    );
}

#[test]
fn a_nesting_bomb_inside_skipped_markup_ends_and_keeps_the_text_after_it() {
    // Unclosed tags inside a <nav>, then end tags that match none: each end tag searches the
    // skipped-element stack, which is bounded.
    let html = format!(
        "<nav>{}{}</nav><p>after</p>",
        "<a>".repeat(50_000),
        "</b>".repeat(50_000)
    );
    let page = to_text(&html, "http://a.test/");
    assert_eq!(page.text, "after");
}
