//! Property checks over generated input: every spelling of an address reads as that address,
//! and random URLs never panic and rebuild to URLs that read the same again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};

use super::super::*;

/// A small deterministic generator (xorshift), so the property checks need no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Ways browsers accept to write the IPv4 address `ip` as a URL host.
fn spellings(ip: Ipv4Addr) -> Vec<String> {
    let n = u32::from(ip);
    let [a, b, c, d] = ip.octets();
    let dotted = ip.to_string();
    let encoded: String = dotted.bytes().map(|x| format!("%{x:02x}")).collect();
    vec![
        dotted.clone(),
        format!("{dotted}."),
        format!("{n}"),
        format!("0x{n:x}"),
        format!("0X{n:08X}"),
        format!("0{n:o}"),
        format!("{a}.{}", n & 0xff_ffff),
        format!("{a}.{b}.{}", n & 0xffff),
        format!("0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}"),
        format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        format!("0x{a:x}.0{b:o}.{}", (u32::from(c) << 8) | u32::from(d)),
        format!("{a}.0x{:x}", n & 0xff_ffff),
        encoded,
        format!("[::ffff:{dotted}]"),
        format!("[::ffff:{:x}:{:x}]", n >> 16, n & 0xffff),
        format!("[0:0:0:0:0:FFFF:{dotted}]"),
    ]
}

#[test]
fn every_spelling_of_an_address_reads_as_that_address() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut samples: Vec<Ipv4Addr> = V4_EDGES.iter().map(|s| s.parse().unwrap()).collect();
    samples.extend((0..300).map(|_| Ipv4Addr::from(rng.next() as u32)));
    for ip in samples {
        for host in spellings(ip) {
            let url = format!("http://{host}/p");
            match check(&url, &Policy::default()) {
                Ok(checked) => {
                    assert!(is_public(IpAddr::V4(ip)), "{url} passed");
                    let seen = match checked.host {
                        Host::Ip(IpAddr::V4(seen)) => seen,
                        Host::Ip(IpAddr::V6(seen)) => seen.to_ipv4_mapped().unwrap(),
                        Host::Name(name) => panic!("{url} read as the name {name}"),
                    };
                    assert_eq!(seen, ip, "{url}");
                }
                Err(Refusal(text)) => {
                    assert!(!is_public(IpAddr::V4(ip)), "{url}: {text}");
                    assert!(text.contains(&ip.to_string()), "{url}: {text}");
                }
            }
        }
    }
}

const V4_EDGES: &[&str] = &[
    "0.0.0.0",
    "1.0.0.0",
    "10.0.0.0",
    "10.255.255.255",
    "100.64.0.0",
    "100.128.0.0",
    "127.0.0.1",
    "127.255.255.255",
    "169.254.169.254",
    "172.16.0.0",
    "172.32.0.0",
    "192.168.0.1",
    "198.18.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "8.8.8.8",
];

#[test]
fn random_urls_never_panic_and_what_passes_reads_the_same_again() {
    const PIECES: &[&str] = &[
        "http://",
        "https://",
        "HTTP://",
        "/",
        "//",
        "\\",
        "@",
        ":",
        "::",
        ".",
        "..",
        "[",
        "]",
        "%",
        "%2e",
        "%40",
        "%00",
        "%31",
        "0x",
        "0X7f",
        "0177",
        "127",
        "1",
        "0",
        "255",
        "65535",
        "80",
        "443",
        "ffff",
        "fe80",
        "::ffff:",
        "example",
        "com",
        "localhost",
        "local",
        "-",
        "_",
        "?",
        "#",
        " ",
        "\t",
        "ä",
        "１",
        "xn--",
        "a",
        "%25",
        "8.8.8.8",
        "4294967295",
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let policy = Policy::default();
    for _ in 0..20_000 {
        let mut url = String::from(if rng.below(4) == 0 { "" } else { "http://" });
        for _ in 0..rng.below(10) + 1 {
            url.push_str(PIECES[rng.below(PIECES.len())]);
        }
        if let Ok(checked) = check(&url, &policy) {
            if let Host::Ip(ip) = checked.host {
                assert!(is_public(ip), "{url:?} passed as {}", checked.url);
            }
            assert_eq!(
                check(&checked.url, &policy).as_ref(),
                Ok(&checked),
                "{url:?}"
            );
            assert!(
                checked.url.is_ascii() && !checked.url.contains([' ', '#']),
                "{url:?}"
            );
        }
        let page = check("https://example.com/a/b", &policy).unwrap();
        if let Ok(checked) = redirect(&page, &url, &policy) {
            assert_eq!(
                check(&checked.url, &policy).as_ref(),
                Ok(&checked),
                "{url:?}"
            );
        }
    }
}
