//! `is_public` at both sides of every range edge, IPv4 and IPv6.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::*;

fn v4(text: &str) -> IpAddr {
    IpAddr::V4(text.parse::<Ipv4Addr>().unwrap())
}

fn v6(text: &str) -> IpAddr {
    IpAddr::V6(text.parse::<Ipv6Addr>().unwrap())
}

#[test]
fn is_public_at_every_ipv4_range_edge() {
    for (ip, public) in [
        ("0.0.0.0", false),
        ("0.255.255.255", false),
        ("1.0.0.0", true),
        ("9.255.255.255", true),
        ("10.0.0.0", false),
        ("10.255.255.255", false),
        ("11.0.0.0", true),
        ("100.63.255.255", true),
        ("100.64.0.0", false),
        ("100.127.255.255", false),
        ("100.128.0.0", true),
        ("126.255.255.255", true),
        ("127.0.0.0", false),
        ("127.255.255.255", false),
        ("128.0.0.0", true),
        ("169.253.255.255", true),
        ("169.254.0.0", false),
        ("169.254.255.255", false),
        ("169.255.0.0", true),
        ("172.15.255.255", true),
        ("172.16.0.0", false),
        ("172.31.255.255", false),
        ("172.32.0.0", true),
        ("191.255.255.255", true),
        ("192.0.0.0", false),
        ("192.0.0.255", false),
        ("192.0.1.0", true),
        ("192.0.2.0", false),
        ("192.0.2.255", false),
        ("192.0.3.0", true),
        ("192.167.255.255", true),
        ("192.168.0.0", false),
        ("192.168.255.255", false),
        ("192.169.0.0", true),
        ("198.17.255.255", true),
        ("198.18.0.0", false),
        ("198.19.255.255", false),
        ("198.20.0.0", true),
        ("198.51.99.255", true),
        ("198.51.100.0", false),
        ("198.51.101.0", true),
        ("203.0.112.255", true),
        ("203.0.113.0", false),
        ("203.0.114.0", true),
        ("223.255.255.255", true),
        ("224.0.0.0", false),
        ("239.255.255.255", false),
        ("240.0.0.0", false),
        ("255.255.255.254", false),
        ("255.255.255.255", false),
        ("8.8.8.8", true),
        ("93.184.216.34", true),
        ("192.88.99.1", true),
    ] {
        assert_eq!(is_public(v4(ip)), public, "{ip}");
    }
}

#[test]
fn is_public_at_every_ipv6_range_edge() {
    for (ip, public) in [
        ("::", false),
        ("::1", false),
        ("::2", false),
        ("::8.8.8.8", false),
        ("::ffff:8.8.8.8", true),
        ("::ffff:10.0.0.1", false),
        ("::ffff:0.0.0.0", false),
        ("::fffe:808:808", false),
        ("::1:ffff:808:808", false),
        ("64:ff9b::8.8.8.8", true),
        ("64:ff9b::7f00:1", false),
        ("64:ff9b::a9fe:a9fe", false),
        ("64:ff9b:1::808:808", false),
        ("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("100::", false),
        ("100::ffff:ffff:ffff:ffff", false),
        ("100:0:0:1::", false),
        ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("2000::", true),
        ("2001::", false),
        ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("2001:200::", true),
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true),
        ("2001:db8::", false),
        ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("2001:db9::", true),
        ("2002:808:808::", true),
        ("2002:a00:1::", false),
        ("2002:c0a8:101::1", false),
        ("2002:7f00:1::", false),
        ("2606:4700:4700::1111", true),
        ("2a00:1450::1", true),
        ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
        ("3fff::", false),
        ("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("3fff:1000::", true),
        ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
        ("4000::", false),
        ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("fc00::", false),
        ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("fe00::", false),
        ("fe80::", false),
        ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("fec0::", false),
        ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ("ff00::", false),
        ("ff02::1", false),
    ] {
        assert_eq!(is_public(v6(ip)), public, "{ip}");
    }
}
