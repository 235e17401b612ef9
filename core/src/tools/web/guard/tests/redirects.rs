//! `redirect`: every form of `Location` resolved, and redirects into private space refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::*;
use super::{hosts, ports};

fn from(url: &str) -> Checked {
    check(url, &ports(&[8443])).unwrap()
}

/// `Location`s that must be refused from a public page, and the reason's fragment.
const REFUSED_REDIRECTS: &[(&str, &str)] = &[
    ("http://127.1/", "is 127.0.0.1, a loopback"),
    (
        "//169.254.169.254/latest/meta-data",
        "169.254.169.254 is a link-local",
    ),
    (
        "http://[::ffff:10.0.0.1]/",
        "IPv4-mapped address for 10.0.0.1, a private",
    ),
    ("https://localhost/admin", "localhost name"),
    ("//localhost:8080/", "localhost name"),
    ("http://2130706433/", "loopback"),
    ("//0x7f.1/", "loopback"),
    ("//metadata.google.internal/", ".internal"),
    ("http://user:pass@example.org/", "credentials"),
    ("file:///etc/passwd", "scheme \"file\""),
    ("gopher://example.org/", "scheme \"gopher\""),
    ("javascript:alert(1)", "scheme \"javascript\""),
    ("/\\127.0.0.1/", "backslash"),
    ("\\\\127.0.0.1/", "backslash"),
    ("\\/127.0.0.1/", "backslash"),
    ("///127.0.0.1/", "exactly two slashes"),
    ("//example.org:8080/", "port 8080"),
    ("http:127.0.0.1", "exactly two slashes"),
    ("/a\tb", "control character"),
];

#[test]
fn redirects_into_private_space_are_refused() {
    let page = from("https://example.com/a/b?c=d");
    for (location, reason) in REFUSED_REDIRECTS {
        match redirect(&page, location, &Policy::default()) {
            Ok(checked) => panic!("{location:?} passed as {}", checked.url),
            Err(Refusal(text)) => {
                assert!(
                    text.starts_with("refused (redirect): "),
                    "{location:?}: {text}"
                );
                assert!(
                    text.contains(reason),
                    "{location:?}: {text:?} lacks {reason:?}"
                );
            }
        }
    }
}

#[test]
fn redirects_resolve_every_form_of_location() {
    let page = from("https://example.com:8443/a/b/c?q=1#f");
    for (location, target) in [
        ("https://other.org/x", "https://other.org/x"),
        ("HTTP://Other.ORG", "http://other.org/"),
        ("//other.org/p?x", "https://other.org/p?x"),
        ("/x?y", "https://example.com:8443/x?y"),
        ("/x/./y/../z", "https://example.com:8443/x/z"),
        ("d", "https://example.com:8443/a/b/d"),
        ("d/e?f#g", "https://example.com:8443/a/b/d/e?f"),
        ("./", "https://example.com:8443/a/b/"),
        ("..", "https://example.com:8443/a/"),
        ("../d", "https://example.com:8443/a/d"),
        ("../../../../d", "https://example.com:8443/d"),
        ("?r=2", "https://example.com:8443/a/b/c?r=2"),
        ("#frag", "https://example.com:8443/a/b/c?q=1"),
        ("", "https://example.com:8443/a/b/c?q=1"),
        (" /x ", "https://example.com:8443/x"),
        ("/a b", "https://example.com:8443/a%20b"),
    ] {
        let checked = redirect(&page, location, &ports(&[8443]))
            .unwrap_or_else(|r| panic!("{location:?}: {r}"));
        assert_eq!(checked.url, target, "{location:?}");
    }
    // The operator's lists apply to redirects too.
    let text = redirect(&page, "/x", &hosts(&[], &["example.com"]))
        .unwrap_err()
        .0;
    assert_eq!(
        text,
        "refused (redirect): example.com is on the operator's deny list"
    );
    // The root and an IP page resolve the same way.
    let root = from("http://8.8.8.8");
    assert_eq!(
        redirect(&root, "x", &Policy::default()).unwrap().url,
        "http://8.8.8.8/x"
    );
    let v6 = from("http://[2606:4700::1]/a/");
    assert_eq!(
        redirect(&v6, "b", &Policy::default()).unwrap().url,
        "http://[2606:4700::1]/a/b"
    );
}
