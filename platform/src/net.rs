//! Which network addresses a request from outside may reach: [`is_public`], used by the URL
//! guard in the core (IP literals, with [`reserved`]'s reason in its refusals) and by the HTTP
//! adapters that resolve names themselves (every address a name resolves to).
//!
//! IPv6 is judged by an allow-list: only global unicast (2000::/3) is public, less the
//! documentation, Teredo and IETF-protocol blocks inside it. Addresses that carry an IPv4
//! address (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`)
//! are as public as the address they carry. IPv4-compatible `::a.b.c.d` (deprecated since
//! 2006) and Teredo (whose client address is obfuscated) are refused whatever they carry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public, as the end of a sentence ("127.0.0.1 is …").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A named range.
    Range(&'static str),
    /// An IPv6 address carrying a non-public IPv4 one.
    Embedded {
        /// How it carries it, e.g. "an IPv4-mapped address for".
        how: &'static str,
        v4: Ipv4Addr,
        why: &'static str,
    },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Range(why) => f.write_str(why),
            Why::Embedded { how, v4, why } => write!(f, "{how} {v4}, {why}"),
        }
    }
}

/// Whether an address may be connected to: false for loopback, private (RFC 1918, unique
/// local), link-local (where cloud metadata services answer), shared (CGNAT), multicast,
/// broadcast, reserved, benchmarking and documentation ranges, and for IPv6 forms that carry
/// such an IPv4 address. A caller that resolves a name checks every resolved address too.
pub fn is_public(ip: IpAddr) -> bool {
    reserved(ip).is_none()
}

/// Why `ip` is not public, or `None` when it is.
pub fn reserved(ip: IpAddr) -> Option<Why> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4).map(Why::Range),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

/// Non-public IPv4 ranges: base, prefix length, reason. The first match wins.
const V4_RANGES: &[([u8; 4], u32, &str)] = &[
    (
        [0, 0, 0, 0],
        8,
        "in 0.0.0.0/8 (\"this network\", read as this machine)",
    ),
    ([10, 0, 0, 0], 8, "a private address (RFC 1918)"),
    (
        [100, 64, 0, 0],
        10,
        "a shared address (carrier-grade NAT, 100.64.0.0/10)",
    ),
    ([127, 0, 0, 0], 8, "a loopback address"),
    (
        [169, 254, 0, 0],
        16,
        "a link-local address (169.254.0.0/16, where cloud metadata services answer)",
    ),
    ([172, 16, 0, 0], 12, "a private address (RFC 1918)"),
    (
        [192, 0, 0, 0],
        24,
        "reserved for IETF protocol assignments (192.0.0.0/24)",
    ),
    ([192, 0, 2, 0], 24, "a documentation address (TEST-NET-1)"),
    ([192, 168, 0, 0], 16, "a private address (RFC 1918)"),
    (
        [198, 18, 0, 0],
        15,
        "a benchmarking address (198.18.0.0/15)",
    ),
    (
        [198, 51, 100, 0],
        24,
        "a documentation address (TEST-NET-2)",
    ),
    ([203, 0, 113, 0], 24, "a documentation address (TEST-NET-3)"),
    ([224, 0, 0, 0], 4, "a multicast address"),
    ([255, 255, 255, 255], 32, "the broadcast address"),
    ([240, 0, 0, 0], 4, "a reserved address (240.0.0.0/4)"),
];

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let n = u32::from(ip);
    V4_RANGES
        .iter()
        .find(|(base, len, _)| in_prefix(n.into(), u32::from_be_bytes(*base).into(), *len, 32))
        .map(|(_, _, why)| *why)
}

/// Non-public IPv6 ranges inside or beside global unicast: base, prefix length, reason.
const V6_RANGES: &[(u128, u32, &str)] = &[
    (
        0x0064_ff9b_0001 << 80,
        48,
        "a local-use NAT64 address (64:ff9b:1::/48)",
    ),
    (0x0100 << 112, 64, "a discard-only address (100::/64)"),
    (0x2001_0000 << 96, 32, "a Teredo address (2001::/32)"),
    (
        0x2001 << 112,
        23,
        "reserved for IETF protocol assignments (2001::/23)",
    ),
    (
        0x2001_0db8 << 96,
        32,
        "a documentation address (2001:db8::/32)",
    ),
    (0x3fff << 112, 20, "a documentation address (3fff::/20)"),
    (
        0xfc00 << 112,
        7,
        "a unique-local address (fc00::/7, private)",
    ),
    (0xfe80 << 112, 10, "a link-local address (fe80::/10)"),
    (
        0xfec0 << 112,
        10,
        "a site-local address (fec0::/10, private)",
    ),
    (0xff00 << 112, 8, "a multicast address"),
];

fn v6_range(ip: Ipv6Addr) -> Option<Why> {
    let n = u128::from(ip);
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(Why::Range("the unspecified address (read as this machine)"));
    }
    if ip.is_loopback() {
        return Some(Why::Range("a loopback address"));
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return embedded("an IPv4-mapped address for", v4);
    }
    if s[..6] == [0; 6] {
        return Some(Why::Range(
            "an IPv4-compatible address (::a.b.c.d, deprecated)",
        ));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return embedded("a NAT64 address for", v4_from(s[6], s[7]));
    }
    if let Some((_, _, why)) = V6_RANGES
        .iter()
        .find(|(base, len, _)| in_prefix(n, *base, *len, 128))
    {
        return Some(Why::Range(why));
    }
    if s[0] == 0x2002 {
        return embedded("a 6to4 address for", v4_from(s[1], s[2]));
    }
    if !in_prefix(n, 0x2000 << 112, 3, 128) {
        return Some(Why::Range(
            "not a global unicast address (outside 2000::/3)",
        ));
    }
    None
}

/// The reason an IPv6 address carrying `v4` is not public, if `v4` is not.
fn embedded(how: &'static str, v4: Ipv4Addr) -> Option<Why> {
    v4_range(v4).map(|why| Why::Embedded { how, v4, why })
}

fn v4_from(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

/// Whether the `bits`-wide `n` lies in `base/len`.
fn in_prefix(n: u128, base: u128, len: u32, bits: u32) -> bool {
    let shift = bits - len;
    n >> shift == base >> shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_their_edges() {
        let private = [
            "0.0.0.0",
            "0.255.255.255",
            "10.0.0.0",
            "10.255.255.255",
            "100.64.0.0",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.0",
            "172.31.255.255",
            "192.0.0.1",
            "192.168.0.1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fdff::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
            "::ffff:0.0.0.0",
        ];
        for ip in private {
            assert!(!is_public(ip.parse().unwrap()), "{ip} is not public");
        }
        let public = [
            "1.1.1.1",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ];
        for ip in public {
            assert!(is_public(ip.parse().unwrap()), "{ip} is public");
        }
    }
}
