#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};

use super::*;

mod properties;
mod ranges;
mod redirects;

/// URLs that must be refused, and a fragment of the reason each must give.
const REFUSED: &[(&str, &str)] = &[
    // Schemes.
    ("file:///etc/passwd", "scheme \"file\""),
    ("ftp://example.com/", "scheme \"ftp\""),
    ("gopher://example.com:70/_x", "scheme \"gopher\""),
    ("data:text/html,<b>hi</b>", "scheme \"data\""),
    ("javascript:alert(1)", "scheme \"javascript\""),
    ("//example.com/x", "no scheme"),
    ("example.com/x", "no scheme"),
    ("", "no scheme"),
    ("http:/example.com/", "exactly two slashes"),
    ("http:example.com/", "exactly two slashes"),
    ("http:\\\\example.com\\", "backslash"),
    ("http:/\\example.com/", "backslash"),
    // Credentials.
    ("http://user@example.com/", "credentials"),
    ("http://user:pass@example.com/", "credentials"),
    ("http://example.com@127.0.0.1/", "credentials"),
    ("http://evil.com%40127.0.0.1/", "percent-encoded `@`"),
    ("http://evil.com\\@127.0.0.1/", "backslash"),
    // IPv4 ranges.
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("HTTP://127.255.255.254/", "loopback"),
    (
        "http://10.0.0.1/",
        "10.0.0.1 is a private address (RFC 1918)",
    ),
    ("http://172.16.0.1/", "RFC 1918"),
    ("http://172.31.255.255/", "RFC 1918"),
    ("http://192.168.1.1/", "RFC 1918"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://0.0.0.0/", "0.0.0.0/8"),
    ("http://224.0.0.1/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://192.0.0.1/", "IETF protocol"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.2.1/", "documentation"),
    // IPv4 spellings.
    (
        "http://2130706433/",
        "\"2130706433\" is 127.0.0.1, a loopback",
    ),
    ("http://0x7f000001/", "is 127.0.0.1, a loopback"),
    ("http://0177.0.0.1/", "is 127.0.0.1, a loopback"),
    ("http://017700000001/", "is 127.0.0.1, a loopback"),
    ("http://127.1/", "is 127.0.0.1, a loopback"),
    ("http://127.0.1/", "is 127.0.0.1, a loopback"),
    ("http://0x7f.1/", "is 127.0.0.1, a loopback"),
    ("http://0X7F.1/", "is 127.0.0.1, a loopback"),
    ("http://0x7f.0.0.01/", "is 127.0.0.1, a loopback"),
    ("http://0xa.0250.1/", "is 10.168.0.1, a private"),
    ("http://127.0.0.1./", "127.0.0.1 is a loopback"),
    ("http://%31%32%37.0.0.1/", "is 127.0.0.1, a loopback"),
    ("http://%30x7f.1/", "is 127.0.0.1, a loopback"),
    ("http://0/", "is 0.0.0.0, in 0.0.0.0/8"),
    ("http://0x/", "is 0.0.0.0, in 0.0.0.0/8"),
    ("http://3232235777/", "is 192.168.1.1, a private"),
    ("http://0xA9FEA9FE/", "is 169.254.169.254, a link-local"),
    ("http://0x00000000000000007f.1/", "is 127.0.0.1"),
    ("http://127.0.0.1#@example.com/", "loopback"),
    ("http://127.0.0.1?@example.com/", "loopback"),
    ("https://127.0.0.1:443/", "loopback"),
    ("  http://127.0.0.1/  ", "loopback"),
    ("http://1.2.3.4.5/", "not a valid IPv4 address"),
    ("http://example.123/", "not a valid IPv4 address"),
    ("http://08/", "not a valid IPv4 address"),
    ("http://1.256.0.0/", "not a valid IPv4 address"),
    ("http://4294967296/", "not a valid IPv4 address"),
    // IPv6.
    ("http://[::1]/", "::1 is a loopback address"),
    ("http://[0:0:0:0:0:0:0:1]/", "is ::1, a loopback"),
    ("http://[0000:0000::0001]:80/", "is ::1, a loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://[FD12:3456::1]/", "unique-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "zone id"),
    ("http://[fe80::1%eth0]/", "zone id"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[fec0::1]/", "site-local"),
    (
        "http://[::ffff:127.0.0.1]/",
        "IPv4-mapped address for 127.0.0.1, a loopback",
    ),
    (
        "http://[::ffff:7f00:1]/",
        "IPv4-mapped address for 127.0.0.1, a loopback",
    ),
    (
        "http://[::ffff:a9fe:a9fe]/",
        "for 169.254.169.254, a link-local",
    ),
    ("http://[::127.0.0.1]/", "IPv4-compatible"),
    ("http://[::8.8.8.8]/", "IPv4-compatible"),
    (
        "http://[64:ff9b::10.0.0.1]/",
        "NAT64 address for 10.0.0.1, a private",
    ),
    ("http://[64:ff9b:1::1]/", "local-use NAT64"),
    (
        "http://[2002:c0a8:101::1]/",
        "6to4 address for 192.168.1.1, a private",
    ),
    ("http://[2002:7f00:1::]/", "6to4 address for 127.0.0.1"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
    ("http://[100::1]/", "discard-only"),
    ("http://[4000::1]/", "not a global unicast"),
    ("http://[::1/", "no closing `]`"),
    ("http://[::1]x/", "follows the IPv6 address"),
    ("http://[127.0.0.1]/", "not a valid IPv6 address"),
    ("http://[::1::2]/", "not a valid IPv6 address"),
    // Names.
    ("http://localhost/", "localhost is a localhost name"),
    ("http://LOCALHOST./", "localhost is a localhost name"),
    ("http://localhost:8080/", "localhost name"),
    ("http://api.localhost/", "api.localhost is a localhost name"),
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        "ends in .internal",
    ),
    ("http://db.internal/", "ends in .internal"),
    ("http://printer.local/", "ends in .local"),
    ("http://router.home.arpa/", "ends in .home.arpa"),
    ("http://metadata/", "single-label"),
    (
        "http://exämple.com/",
        "internationalised names are not supported",
    ),
    ("http://１２７.０.０.１/", "not plain ASCII"),
    (
        "http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/",
        "not plain ASCII",
    ),
    ("http://exa mple.com/", "contains a space"),
    ("http://exa\tmple.com/", "control character '\\t'"),
    ("http://example.com\n/", "control character '\\n'"),
    ("http://ex!ample.com/", "contains '!'"),
    ("http://example.com%00.evil.com/", "contains '\\0'"),
    ("http://example.com%2f@x/", "credentials"),
    ("http://example%2fevil.com/", "contains '/'"),
    ("http://exa%zzmple.com/", "not followed by two hex digits"),
    ("http://exa%4/", "not followed by two hex digits"),
    ("http:///example.com", "exactly two slashes"),
    ("http://:80/", "no host"),
    ("http://?q", "no host"),
    ("http://./", "no host"),
    ("http://a.b..c/", "empty label"),
    ("http://.example.com/", "empty label"),
    // Ports.
    (
        "http://example.com:8080/",
        "port 8080 is not allowed (allowed: 80, 443)",
    ),
    ("https://example.com:22/", "port 22 is not allowed"),
    ("http://example.com:0/", "port 0"),
    ("http://example.com:00/", "port 0"),
    ("http://example.com:65536/", "out of range"),
    ("http://example.com:99999999999999999999/", "out of range"),
    ("http://example.com:80a/", "not a number"),
    ("http://example.com:-1/", "not a number"),
    ("http://example.com:+80/", "not a number"),
    ("http://example.com:80:80/", "not a number"),
];

#[test]
fn the_refused_corpus_is_refused_for_the_right_reason() {
    assert!(REFUSED.len() >= 40);
    for (url, reason) in REFUSED {
        match check(url, &Policy::default()) {
            Ok(checked) => panic!("{url:?} passed as {}", checked.url),
            Err(Refusal(text)) => {
                assert!(text.starts_with("refused: "), "{url:?}: {text}");
                assert!(text.contains(reason), "{url:?}: {text:?} lacks {reason:?}");
            }
        }
    }
}

#[test]
fn long_inputs_are_refused_and_never_echoed_whole() {
    let long_path = format!("https://example.com/{}", "a".repeat(MAX_URL_BYTES));
    let text = check(&long_path, &Policy::default()).unwrap_err().0;
    assert!(text.contains("bytes long (at most 2048)"), "{text}");

    let labels = vec!["a".repeat(63); 4].join(".");
    let text = check(&format!("http://{labels}/"), &Policy::default())
        .unwrap_err()
        .0;
    assert!(
        text.contains("255 characters long (a DNS name has at most 253)"),
        "{text}"
    );

    let text = check(
        &format!("http://{}.com/", "a".repeat(64)),
        &Policy::default(),
    )
    .unwrap_err()
    .0;
    assert!(text.contains("longer than 63"), "{text}");

    for host in [
        format!("{}!", "b".repeat(1500)),
        format!("{}ä", "c".repeat(1500)),
        format!("{}.1", "d".repeat(1500)),
        format!("[{}]", "e".repeat(1500)),
        format!("x.com:{}", "9".repeat(1500)),
        format!("x.com:{}z", "9".repeat(1500)),
        format!("{0}.{0}.{0}.local", "f".repeat(63)),
        format!("{0}.{0}.{0}.localhost", "g".repeat(63)),
    ] {
        let text = check(&format!("http://{host}/"), &Policy::default())
            .unwrap_err()
            .0;
        assert!(text.chars().count() < 250, "{} chars: {text}", text.len());
    }
    let text = check(
        &format!("{}://x.com/", "s".repeat(1500)),
        &Policy::default(),
    )
    .unwrap_err()
    .0;
    assert!(text.chars().count() < 250, "{text}");

    let long_name = format!("{0}.{0}.{0}.example.com", "h".repeat(60));
    let text = check(
        &format!("https://{long_name}/"),
        &hosts(&[], &[".example.com"]),
    )
    .unwrap_err()
    .0;
    assert!(text.ends_with("… is on the operator's deny list"), "{text}");
    assert!(text.chars().count() < 250, "{text}");
}

/// URLs that must pass, and the URL each is rebuilt as.
const PASSED: &[(&str, &str)] = &[
    ("https://example.com", "https://example.com/"),
    (
        "HTTPS://Example.COM./Path?Q=1#frag",
        "https://example.com/Path?Q=1",
    ),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("https://example.com:/x", "https://example.com/x"),
    ("https://example.com:0443/x", "https://example.com/x"),
    ("https://example.com?x=1", "https://example.com/?x=1"),
    ("https://example.com#top", "https://example.com/"),
    ("http://example.com#@127.0.0.1/", "http://example.com/"),
    (
        "https://example.com/a b/ü?q=ä",
        "https://example.com/a%20b/%C3%BC?q=%C3%A4",
    ),
    (
        "https://example.com/%2e%2e/x?a=%00",
        "https://example.com/%2e%2e/x?a=%00",
    ),
    ("  https://example.com/\n", "https://example.com/"),
    ("https://xn--exmple-cua.com/", "https://xn--exmple-cua.com/"),
    (
        "https://my_host.example.com/",
        "https://my_host.example.com/",
    ),
    ("https://%65xample.com/", "https://example.com/"),
    ("https://example.com%2e/", "https://example.com/"),
    ("https://www.example.com.1x/", "https://www.example.com.1x/"),
    ("http://8.8.8.8/", "http://8.8.8.8/"),
    ("http://134744072/", "http://8.8.8.8/"),
    ("http://0x08080808/", "http://8.8.8.8/"),
    ("http://8.0x80808/", "http://8.8.8.8/"),
    ("http://172.15.255.255/", "http://172.15.255.255/"),
    (
        "http://[2606:4700:4700::1111]/dns-query",
        "http://[2606:4700:4700::1111]/dns-query",
    ),
    (
        "http://[2606:4700:4700:0:0:0:0:1111]/",
        "http://[2606:4700:4700::1111]/",
    ),
    (
        "http://[2606:4700:4700::1111]:443/",
        "http://[2606:4700:4700::1111]:443/",
    ),
    ("http://[::ffff:8.8.8.8]/", "http://[::ffff:8.8.8.8]/"),
    ("http://[64:ff9b::8.8.8.8]/", "http://[64:ff9b::808:808]/"),
    ("http://[2002:808:808::1]/", "http://[2002:808:808::1]/"),
];

#[test]
fn the_passed_corpus_passes_rebuilt() {
    assert!(PASSED.len() >= 10);
    for (url, rebuilt) in PASSED {
        let checked = check(url, &Policy::default()).unwrap_or_else(|r| panic!("{url:?}: {r}"));
        assert_eq!(checked.url, *rebuilt, "{url:?}");
        // The rebuilt URL reads the same again.
        assert_eq!(check(&checked.url, &Policy::default()), Ok(checked.clone()));
    }
}

#[test]
fn checked_holds_the_parts() {
    let checked = check("HTTPS://Example.com:8443/a/b?c#d", &ports(&[8443])).unwrap();
    assert!(checked.https);
    assert_eq!(checked.host, Host::Name("example.com".into()));
    assert_eq!(checked.port, 8443);
    assert_eq!(checked.origin(), "https://example.com:8443");
    assert_eq!(checked.path_and_query(), "/a/b?c");

    let checked = check("http://0x08080808", &Policy::default()).unwrap();
    assert!(!checked.https);
    assert_eq!(
        checked.host,
        Host::Ip(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)))
    );
    assert_eq!(checked.port, 80);
    assert_eq!(checked.path_and_query(), "/");
    assert_eq!(checked.host.to_string(), "8.8.8.8");

    let checked = check("https://[2606:4700::1]/", &Policy::default()).unwrap();
    assert_eq!(checked.host.to_string(), "2606:4700::1");
    assert_eq!(checked.origin(), "https://[2606:4700::1]");
}

fn ports(extra: &[u16]) -> Policy {
    Policy {
        extra_ports: extra.to_vec(),
        ..Policy::default()
    }
}

fn hosts(allow: &[&str], deny: &[&str]) -> Policy {
    Policy {
        allow_hosts: allow.iter().map(|h| h.to_string()).collect(),
        deny_hosts: deny.iter().map(|h| h.to_string()).collect(),
        ..Policy::default()
    }
}

fn reason(url: &str, policy: &Policy) -> String {
    match check(url, policy) {
        Ok(checked) => panic!("{url:?} passed as {}", checked.url),
        Err(Refusal(text)) => text,
    }
}

#[test]
fn extra_ports_open_only_those_ports() {
    let policy = ports(&[8080, 8443]);
    assert_eq!(
        check("http://example.com:8080/", &policy).unwrap().url,
        "http://example.com:8080/"
    );
    assert_eq!(
        check("https://example.com:8443/", &policy).unwrap().port,
        8443
    );
    let text = reason("http://example.com:8081/", &policy);
    assert!(
        text.contains("port 8081 is not allowed (allowed: 80, 443, 8080, 8443)"),
        "{text}"
    );
    // An extra port does not open private hosts.
    assert!(reason("http://127.0.0.1:8080/", &policy).contains("loopback"));
}

#[test]
fn deny_hosts_refuse_exact_hosts_and_domains() {
    let policy = hosts(
        &[],
        &[
            "Bad.example.",
            ".evil.org",
            "*.worse.net",
            "93.184.216.34",
            "[2606:4700::1]",
        ],
    );
    for (url, host) in [
        ("https://bad.example/", "bad.example"),
        ("https://evil.org/", "evil.org"),
        ("https://www.evil.org/", "www.evil.org"),
        ("https://a.b.worse.net/", "a.b.worse.net"),
        ("https://worse.net/", "worse.net"),
        ("http://1572395042/", "93.184.216.34"),
        ("http://0x5d.0xb8.0xd8.0x22/", "93.184.216.34"),
        ("http://[2606:4700:0::1]/", "2606:4700::1"),
    ] {
        let text = reason(url, &policy);
        assert_eq!(
            text,
            format!("refused: {host} is on the operator's deny list"),
            "{url}"
        );
    }
    for url in [
        "https://sub.bad.example/",
        "https://notevil.org/",
        "https://example.com/",
        "http://93.184.216.35/",
    ] {
        assert!(check(url, &policy).is_ok(), "{url}");
    }
}

#[test]
fn allow_hosts_narrow_and_never_widen() {
    let policy = hosts(
        &[
            "example.com",
            ".docs.rs",
            "8.8.8.8",
            "127.0.0.1",
            "localhost",
            "10.0.0.0",
        ],
        &["private.docs.rs"],
    );
    for url in [
        "https://example.com/",
        "https://docs.rs/x",
        "https://serde.docs.rs/",
        "http://134744072/",
    ] {
        assert!(check(url, &policy).is_ok(), "{url}");
    }
    for url in [
        "https://www.example.com/",
        "https://rust-lang.org/",
        "http://8.8.4.4/",
    ] {
        let text = reason(url, &policy);
        assert!(
            text.contains("is not on the operator's allow list (\"example.com\", \".docs.rs\""),
            "{text}"
        );
    }
    // Deny wins over allow.
    assert!(reason("https://private.docs.rs/", &policy).contains("deny list"));
    // A listed private address or localhost is still refused, in any spelling.
    assert!(reason("http://127.0.0.1/", &policy).contains("loopback"));
    assert!(reason("http://0x7f.1/", &policy).contains("loopback"));
    assert!(reason("http://localhost/", &policy).contains("localhost name"));
    assert!(reason("http://10.0.0.0/", &policy).contains("RFC 1918"));
}

#[test]
fn allow_private_lets_the_owners_network_through_and_nothing_else() {
    let policy = Policy {
        allow_private: true,
        ..Policy::default()
    };
    for (url, rebuilt) in [
        ("http://127.1:80/x", "http://127.0.0.1/x"),
        ("http://192.168.1.10/", "http://192.168.1.10/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://nas.local/", "http://nas.local/"),
        ("http://localhost/", "http://localhost/"),
        ("http://homeserver/", "http://homeserver/"),
    ] {
        assert_eq!(check(url, &policy).unwrap().url, rebuilt, "{url}");
    }
    // The other rules still hold.
    for url in [
        "file:///etc/passwd",
        "http://user@192.168.1.10/",
        "http://192.168.1.10:8080/",
    ] {
        assert!(check(url, &policy).is_err(), "{url}");
    }
    assert!(check("http://192.168.1.10/", &Policy::default()).is_err());
}
