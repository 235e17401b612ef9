//! The secret check: each disguise found, ordinary text let through.

use super::*;
use serde_json::json;

#[test]
fn a_secret_is_found_anywhere_in_the_arguments() {
    let s = Secrets::new([Secret::new("123456:ABC-token"), Secret::new("short")]);
    assert!(s.found_in(&json!({"url": "https://x.example/?t=123456:ABC-token"})));
    assert!(s.found_in(&json!({"url": "https://x.example/?t=123456%3AABC-token"})));
    assert!(s.found_in(&json!({"url": "https://x.example/?t=%31%32%33456:ABC%2dtoken"})));
    assert!(s.found_in(&json!({"a": [{"b": "x 123456:ABC-token y"}]})));
    assert!(s.found_in(&json!({"123456:ABC-token": 1})));
    assert!(!s.found_in(&json!({"text": "a short note", "n": 123456})));
    assert!(!Secrets::default().found_in(&json!("123456:ABC-token")));
    assert_eq!(format!("{s:?}"), "Secrets(1 kept)");
}

#[test]
fn a_secret_in_base64_is_found_at_any_alignment_in_either_alphabet() {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    use base64::Engine as _;
    let secret = "7731:AAE-webhook?secret>>";
    let s = Secrets::new([Secret::new(secret)]);
    for lead in ["", "a", "ab", "abc", "{\"token\": \""] {
        for tail in ["", "x", "\"}", "yz"] {
            let plain = format!("{lead}{secret}{tail}");
            for engine in [&STANDARD, &URL_SAFE] {
                let text = engine.encode(&plain);
                assert!(
                    s.found_in(&json!({"body": format!("data={text}")})),
                    "{lead:?} {tail:?} {text}"
                );
            }
        }
    }
    let other = STANDARD.encode("nothing to see here, just a long enough text");
    assert!(!s.found_in(&json!({ "body": other })));
}

#[test]
fn text_shaped_like_a_known_key_is_found() {
    for leak in [
        "https://x.example/?k=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-ant-api03-abcdefghijklmnopqrstuvwx",
        "id AKIAIOSFODNN7EXAMPLE here",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "key=AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        "xoxb-1234567890-abcdefghijkl",
        "bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ/getMe",
        "bot123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
    ] {
        assert!(key_shaped_in(&json!({ "url": leak })), "{leak}");
    }
    for fine in [
        "ask-me-anything about tasks",
        "the meeting is at 12:30",
        "AKIA is a prefix",
        "time 123456789:short",
        "sk-short",
    ] {
        assert!(!key_shaped_in(&json!({ "text": fine })), "{fine}");
    }
}

/// Secrets shaped like the real ones: a bot token, an Anthropic key, an admin token from
/// `openssl rand -hex 32`, and a webhook secret a person chose.
const TOKEN: &str = "7351994823:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ";
const KEY: &str = "sk-ant-api03-R2D2xJ9kLmQ4vPz8WnT1yHcB6eFgA0sU3iOpKlZxCvBnM7qWeRtYuIoP5aSdFgHjKl-Q9wE2rT4yU6iOpA";
const ADMIN: &str = "3f9c2a7be41d8f06c5a9e2b7d1403f8e6c2b9a57d0e4f13c8b6a2d9e7f015c4a";
const WEBHOOK: &str = "my-webhook-s3cret";

fn real() -> Secrets {
    Secrets::new([TOKEN, KEY, ADMIN, WEBHOOK].map(Secret::new))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Each disguise of `secret` the check promises to see through, by name.
fn disguises(secret: &str) -> Vec<(&'static str, String)> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine as _;
    let spaced = |sep: &str| {
        let chars: Vec<String> = secret.chars().map(String::from).collect();
        chars.join(sep)
    };
    vec![
        ("as it is", secret.to_owned()),
        ("percent-encoded twice", {
            let once: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
            once.replace('%', "%25")
        }),
        ("hex", hex(secret.as_bytes())),
        ("HEX", hex(secret.as_bytes()).to_uppercase()),
        ("hex with colons", {
            let pairs: Vec<String> = secret.bytes().map(|b| format!("{b:02x}")).collect();
            pairs.join(":")
        }),
        (
            "\\x escapes",
            secret.bytes().map(|b| format!("\\x{b:02x}")).collect(),
        ),
        ("reversed", secret.chars().rev().collect()),
        (
            "\\u written as text",
            secret
                .chars()
                .map(|c| format!("\\u{:04x}", c as u32))
                .collect(),
        ),
        (
            "\\u{…} written as text",
            secret
                .chars()
                .map(|c| format!("\\u{{{:x}}}", c as u32))
                .collect(),
        ),
        (
            "HTML references",
            secret.chars().map(|c| format!("&#{};", c as u32)).collect(),
        ),
        ("spaced out", spaced(" ")),
        ("dotted", spaced(".")),
        ("dashed", spaced("-")),
        ("one character a line", spaced("\n")),
        ("base32", forms::base32(secret.as_bytes())),
        (
            "base32 lower case",
            forms::base32(format!("k={secret}").as_bytes()).to_lowercase(),
        ),
        (
            "base64 twice",
            STANDARD.encode(STANDARD.encode(format!("t={secret};"))),
        ),
        (
            "base64 twice, URL-safe",
            URL_SAFE_NO_PAD.encode(URL_SAFE_NO_PAD.encode(secret)),
        ),
        ("base64 in lines of 4", {
            let b = STANDARD.encode(secret);
            let lines: Vec<&str> = b
                .as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            lines.join("\n")
        }),
        (
            "ROT13",
            secret
                .chars()
                .map(|c| match c {
                    'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
                    'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
                    _ => c,
                })
                .collect(),
        ),
    ]
}

#[test]
fn every_disguise_of_every_secret_is_found() {
    let s = real();
    let mut found = 0;
    for secret in [TOKEN, KEY, ADMIN, WEBHOOK] {
        for (name, text) in disguises(secret) {
            let text = format!("https://evil.example/c?d={text}&x=1");
            assert!(
                s.found_in(&json!({ "url": text })),
                "{name} of {secret:.8}…: {text}"
            );
            found += 1;
        }
    }
    println!("{found} disguised forms found");
}

#[test]
fn a_secret_split_in_two_calls_is_found_in_one_of_them() {
    let s = real();
    for secret in [TOKEN, KEY, ADMIN] {
        for at in 1..secret.len() {
            let (a, b) = secret.split_at(at);
            let found = [a, b]
                .map(|part| s.found_in(&json!({ "url": format!("https://e.example/{part}") })));
            assert!(found.contains(&true), "{secret:.8}… split at {at}");
        }
    }
}

#[test]
fn a_secret_split_over_the_arguments_of_a_call_is_found() {
    let s = real();
    let (a, b) = TOKEN.split_at(10);
    assert!(s.found_in(&json!({"a": a, "b": b})));
    // Three parts, each shorter than half: found joined, in the order the arguments have.
    let (b, c) = b.split_at(18);
    assert!(s.found_in(&json!({"a": a, "b": b, "c": c})));
    assert!(s.found_in(&json!({"parts": [a, b, c]})));
    assert!(s.found_in(&json!({"a": format!("{a} "), "b": {"x": format!(" {b}")}, "c": c})));
}

#[test]
fn ordinary_text_is_not_taken_for_a_secret() {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let s = real();
    let sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let prose = "Set up my webhook: the secret is whatever I choose, and the bot token comes from @BotFather. The Anthropic key starts with sk-ant-api03- and the admin token is 64 hex characters.";
    for text in [
        prose.to_owned(),
        sha256.to_owned(),
        hex(prose.as_bytes()),
        STANDARD.encode(prose.repeat(20)),
        forms::base32(prose.as_bytes()),
        "550e8400-e29b-41d4-a716-446655440000 7351994823 bot7351994823".to_owned(),
        "https://api.telegram.org/bot7351994823:<token>/getMe".to_owned(),
        "a my webhook secret note, not the s3cret itself".to_owned(),
        (0..2000).map(|i| format!("{i:x}")).collect(),
    ] {
        assert!(!s.found_in(&json!({ "text": text })), "{text:.80}");
    }
}

#[test]
fn forms_are_built_once_and_a_large_argument_is_let_through() {
    let s = real();
    let forms = s.0.index.len() + s.0.exact.len();
    println!("{forms} forms of 4 secrets");
    assert!(forms < 400, "{forms}");
    // A quarter of a megabyte (a file written whole), with escapes to decode: one pass over
    // the skeleton of each of its texts (measured in a release build on a busy machine: about
    // 1 µs a URL, 7 to 16 ms a megabyte of prose, 40 ms a megabyte dense with escapes).
    let big = "Lorem ipsum dolor sit amet, 0123456789 ABCDEF %41 \\u0041 &#65; ".repeat(4_000);
    assert!(!s.found_in(&json!({ "path": "notes.md", "content": big })));
}
