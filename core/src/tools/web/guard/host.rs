//! A URL's host as browsers read it (the WHATWG URL host parser, less IDNA), refused unless
//! it is a public IP address or an ordinary DNS name.
//!
//! The steps follow the standard so that no spelling reads one way here and another in the
//! HTTP client: a bracketed host is IPv6; anything else is percent-decoded, lower-cased and,
//! when its last label is a number (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`), read as
//! IPv4 with decimal, octal (leading `0`) and hex (`0x`) parts, the last part filling the
//! remaining bytes. A host that ends in a number but is no IPv4 address (`1.2.3.4.5`,
//! `example.123`) is refused, as browsers refuse it.
//!
//! Names must be ASCII letters, digits, `-` and `_` in dot-separated labels: internationalised
//! names are refused rather than mapped (no IDNA tables in the core; the `xn--` form passes).
//! Names that never mean a public host are refused: `localhost` and `*.localhost`, the
//! private-use suffixes in [`PRIVATE_SUFFIXES`] (`.local`, `.internal` such as
//! `metadata.google.internal` …), and single-label names (`metadata`, `intranet`), which a
//! resolver completes with its search domains.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{clipped, quoted, refused, Host, Refusal};
use clawless_platform::net::reserved;

/// Longest DNS name, without the trailing dot.
const MAX_NAME: usize = 253;
/// Longest DNS label.
const MAX_LABEL: usize = 63;

/// Suffixes of names for private networks, never public: mDNS, cloud-internal DNS
/// (`metadata.google.internal`), RFC 8375's home networks, and suffixes routers and companies
/// use that ICANN will not delegate.
pub(super) const PRIVATE_SUFFIXES: &[&str] = &[
    "local",
    "internal",
    "localdomain",
    "home.arpa",
    "lan",
    "intranet",
    "corp",
    "home",
];

/// The host of an authority (`[v6]` or a name or IPv4 in any spelling), when it is public or
/// `private_ok`.
pub(super) fn parse(text: &str, private_ok: bool) -> Result<Host, Refusal> {
    if text.is_empty() {
        return Err(refused("the URL has no host"));
    }
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return ipv6(inner).and_then(|ip| public(IpAddr::V6(ip), inner, private_ok));
    }
    let host = decoded(text)?;
    if ends_in_number(&host) {
        return match ipv4(&host) {
            Some(ip) => public(IpAddr::V4(ip), text, private_ok),
            None => Err(refused(format_args!(
                "the host {} ends in a number but is not a valid IPv4 address",
                quoted(&host)
            ))),
        };
    }
    name(host, private_ok)
}

fn ipv6(inner: &str) -> Result<Ipv6Addr, Refusal> {
    if inner.contains('%') {
        return Err(refused(format_args!(
            "the IPv6 address {} has a zone id (`%`), which is not allowed",
            quoted(inner)
        )));
    }
    inner.parse().map_err(|_| {
        refused(format_args!(
            "{} is not a valid IPv6 address",
            quoted(inner)
        ))
    })
}

/// `ip` when it is public; `spelled` is the host as written, shown when it differs.
fn public(ip: IpAddr, spelled: &str, private_ok: bool) -> Result<Host, Refusal> {
    let Some(why) = reserved(ip).filter(|_| !private_ok) else {
        return Ok(Host::Ip(ip));
    };
    let canonical = ip.to_string();
    let spelled = spelled.strip_suffix('.').unwrap_or(spelled);
    Err(if spelled.eq_ignore_ascii_case(&canonical) {
        refused(format_args!("{canonical} is {why}"))
    } else {
        refused(format_args!("{} is {canonical}, {why}", quoted(spelled)))
    })
}

/// The host percent-decoded and lower-cased, when it is plain ASCII of the characters a
/// name or an IPv4 address may hold.
fn decoded(text: &str) -> Result<String, Refusal> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'%' {
            bytes.push(b);
            continue;
        }
        let hex = rest.get(..2).and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(v) => {
                bytes.push(v);
                rest = rest.get(2..).unwrap_or_default();
            }
            None => {
                return Err(refused(format_args!(
                    "the host {} has a `%` that is not followed by two hex digits",
                    quoted(text)
                )))
            }
        }
    }
    if !bytes.is_ascii() {
        return Err(refused(format_args!(
            "the host {} is not plain ASCII: internationalised names are not supported \
             (write the xn-- form)",
            quoted(text)
        )));
    }
    let host: String = bytes
        .iter()
        .map(|&b| char::from(b.to_ascii_lowercase()))
        .collect();
    if host.contains('@') {
        return Err(refused(format_args!(
            "the host {} holds a percent-encoded `@`: credentials in URLs are not allowed",
            quoted(text)
        )));
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(refused(format_args!(
            "the host {} contains {c:?}: a host is letters, digits, `-`, `_` and dots",
            quoted(text)
        )));
    }
    Ok(host)
}

/// Whether browsers read the host as IPv4: its last label (after one trailing dot) is all
/// digits or an IPv4 number (`0x7f`, `0x`).
fn ends_in_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or_default();
    (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())) || ipv4_number(last).is_some()
}

/// The WHATWG IPv4 parser: up to four parts, each decimal, octal or hex, all but the last at
/// most 255 and the last filling the remaining bytes. `None` where browsers fail.
fn ipv4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts = host
        .split('.')
        .map(ipv4_number)
        .collect::<Option<Vec<u64>>>()?;
    let (&last, init) = parts.split_last()?;
    if init.len() > 3 || init.iter().any(|&n| n > 255) {
        return None;
    }
    let free_bytes = 4 - init.len() as u32;
    if last >= 1 << (8 * free_bytes) {
        return None;
    }
    let high = init
        .iter()
        .enumerate()
        .fold(0, |acc, (i, &n)| acc | (n << (8 * (3 - i as u32))));
    u32::try_from(high | last).ok().map(Ipv4Addr::from)
}

/// One IPv4 part: `0x…` hex, `0…` octal, else decimal; `0x` alone is 0. Saturates instead of
/// overflowing (any saturated value is out of range).
fn ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else if part.is_empty() {
        return None;
    } else {
        (part, 10)
    };
    digits.chars().try_fold(0u64, |n, c| {
        let d = c.to_digit(radix)?;
        Some(
            n.saturating_mul(u64::from(radix))
                .saturating_add(u64::from(d)),
        )
    })
}

/// A DNS name (lower-case, without the trailing dot) that may mean a public host (or, when
/// `private_ok`, any host).
fn name(host: String, private_ok: bool) -> Result<Host, Refusal> {
    let name = host.strip_suffix('.').unwrap_or(&host);
    if name.is_empty() {
        return Err(refused("the URL has no host"));
    }
    if name.len() > MAX_NAME {
        return Err(refused(format_args!(
            "the host is {} characters long (a DNS name has at most {MAX_NAME})",
            name.len()
        )));
    }
    if name.split('.').any(str::is_empty) {
        return Err(refused(format_args!(
            "the host {} has an empty label (`..` or a leading dot)",
            quoted(name)
        )));
    }
    if name.split('.').any(|l| l.len() > MAX_LABEL) {
        return Err(refused(format_args!(
            "the host {} has a label longer than {MAX_LABEL} characters",
            quoted(name)
        )));
    }
    if private_ok {
        return Ok(Host::Name(name.to_owned()));
    }
    if has_suffix(name, "localhost") {
        return Err(refused(format_args!(
            "{} is a localhost name (it means this machine)",
            clipped(name)
        )));
    }
    if let Some(suffix) = PRIVATE_SUFFIXES.iter().find(|s| has_suffix(name, s)) {
        return Err(refused(format_args!(
            "{} ends in .{suffix}, a name for private networks, not a public host",
            clipped(name)
        )));
    }
    if !name.contains('.') {
        return Err(refused(format_args!(
            "{name} is a single-label name, which resolvers complete with local search \
             domains: use the full domain name"
        )));
    }
    Ok(Host::Name(name.to_owned()))
}

/// Whether `name` is `domain` or one of its subdomains (both lower-case).
pub(super) fn has_suffix(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain)
        .is_some_and(|rest| rest.is_empty() || rest.ends_with('.'))
}
