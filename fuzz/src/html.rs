//! A checker for the HTML subset Telegram parses (`parse_mode: HTML`): only its tags with only
//! their attributes, every tag closed in order, `<`, `>` and `&` only as tags or entities, the
//! four named entities and numeric ones, and the nesting Telegram allows (nothing inside
//! `code`, only `code` inside `pre`, no link in a link, no quote in a quote).

/// Tags without attributes.
const PLAIN_TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "tg-spoiler",
    "code",
    "pre",
    "blockquote",
];

/// `Ok` when Telegram can parse `s` as HTML.
pub fn check_html(s: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        match rest.as_bytes()[0] {
            b'<' => {
                let end = rest
                    .find('>')
                    .ok_or_else(|| format!("unterminated tag at byte {i}"))?;
                let tag = &rest[1..end];
                i += end + 1;
                if let Some(name) = tag.strip_prefix('/') {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        Some(open) => return Err(format!("</{name}> closes <{open}>")),
                        None => return Err(format!("</{name}> closes nothing")),
                    }
                } else {
                    let name = open_tag(tag, stack.last().copied())?;
                    nesting(name, &stack)?;
                    stack.push(name);
                }
            }
            b'>' => return Err(format!("raw '>' at byte {i}")),
            b'&' => i += entity(rest).ok_or_else(|| format!("bad entity at byte {i}"))?,
            _ => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    match stack.last() {
        Some(open) => Err(format!("<{open}> never closed")),
        None => Ok(()),
    }
}

/// Checks an opening tag's name and attributes; returns its name.
fn open_tag<'a>(tag: &'a str, parent: Option<&str>) -> Result<&'a str, String> {
    let (name, attrs) = tag.split_once(' ').unwrap_or((tag, ""));
    let ok = match name {
        _ if PLAIN_TAGS.contains(&name) && attrs.is_empty() => true,
        "a" => quoted(attrs, "href=").is_some_and(|v| !v.is_empty()),
        "code" => {
            parent == Some("pre")
                && quoted(attrs, "class=")
                    .and_then(|v| v.strip_prefix("language-"))
                    .is_some_and(|l| !l.is_empty())
        }
        "span" => quoted(attrs, "class=") == Some("tg-spoiler"),
        "blockquote" => attrs == "expandable",
        "tg-emoji" => quoted(attrs, "emoji-id=")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())),
        _ => false,
    };
    if ok {
        Ok(name)
    } else {
        Err(format!("tag <{tag}> is not one Telegram accepts"))
    }
}

/// The value of `attrs` when it is exactly `<name>"<value>"`, the value holding no quote, no
/// `<`/`>` and only valid entities.
fn quoted<'a>(attrs: &'a str, name: &str) -> Option<&'a str> {
    let v = attrs
        .strip_prefix(name)?
        .strip_prefix('"')?
        .strip_suffix('"')?;
    if v.contains(['"', '<', '>']) {
        return None;
    }
    let mut i = 0;
    while let Some(at) = v[i..].find('&') {
        i += at;
        i += entity(&v[i..])?;
    }
    Some(v)
}

/// Telegram's nesting rules for a tag opened inside `stack`.
fn nesting(name: &str, stack: &[&str]) -> Result<(), String> {
    let inside = |t: &str| stack.contains(&t);
    let parent = stack.last().copied();
    let ok = match parent {
        Some("code") => false,
        Some("pre") => name == "code",
        _ => match name {
            "pre" | "code" => !inside("pre") && !inside("code"),
            "a" => !inside("a"),
            "blockquote" => !inside("blockquote"),
            _ => true,
        },
    };
    if ok {
        Ok(())
    } else {
        Err(format!("<{name}> may not be inside {stack:?}"))
    }
}

/// The length of the entity `s` starts with (`&lt;`, `&#60;`, `&#x3c;` …), if valid.
fn entity(s: &str) -> Option<usize> {
    for named in ["&lt;", "&gt;", "&amp;", "&quot;"] {
        if s.starts_with(named) {
            return Some(named.len());
        }
    }
    let body = s.strip_prefix("&#")?;
    let (digits, radix, skip) = match body.strip_prefix(['x', 'X']) {
        Some(hex) => (hex, 16, 3),
        None => (body, 10, 2),
    };
    let n = digits.find(';')?;
    let code = u32::from_str_radix(&digits[..n], radix).ok()?;
    char::from_u32(code)?;
    Some(skip + n + 1)
}

#[cfg(test)]
mod tests {
    use super::check_html;

    #[test]
    fn accepts_telegram_html() {
        for ok in [
            "plain &amp; &lt;b&gt; &#60; &#x3C;",
            "<b>b <i>i</i></b> <a href=\"https://x.y/?a=1&amp;b=2\">l <b>x</b></a>",
            "<pre><code class=\"language-rust\">a &lt; b</code></pre><pre>x</pre>",
            "<blockquote expandable>q</blockquote><span class=\"tg-spoiler\">s</span>",
        ] {
            assert_eq!(check_html(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_what_telegram_refuses() {
        for bad in [
            "<b>open",
            "<b><i>x</b></i>",
            "</b>",
            "a > b",
            "a & b",
            "&nbsp;",
            "<p>x</p>",
            "<a>x</a>",
            "<a href=\"x\"y\">z</a>",
            "<code class=\"language-rust\">x</code>",
            "<code><b>x</b></code>",
            "<pre><b>x</b></pre>",
            "<a href=\"https://a\"><a href=\"https://b\">x</a></a>",
            "<b",
        ] {
            assert!(check_html(bad).is_err(), "{bad}");
        }
    }
}
